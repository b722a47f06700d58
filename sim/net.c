/* net.c: max-min fair sharing of link bandwidth among concurrent flows, recomputed incrementally
 * over the part of the flow-link graph a change touches (net.h). A wide flow (a ring over
 * thousands of GPUs) keeps which of its links another flow crosses too, so that a settle walks
 * those and one link of the rest (`wide`, below); a change among the narrow flows around wide
 * ones refills only those narrow flows when it cannot move a wide flow's rate (settle_local). */
#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct wide;

typedef struct flow {
    int tag;
    int nl;
    uint64_t seq;   /* start order */
    double rem;     /* bytes left */
    double rate;    /* bytes/s */
    int *links;
    double *w;
    char frozen, in_part;
    char dup;       /* crosses some link twice (its weights there add up) */
    int bneck;      /* the link at which the last fill over it froze it (its rate that link's share
                       then); -1: none known (new, or its rate came from no such pick) */
    char borrowed;  /* links and w are the caller's (sim_net_add_shared), not freed here */
    struct wide *wv; /* a wide flow's view of its links, else NULL */
} flow;

/* A wide flow (sim_net_wide_min links or more, none crossed twice, no usage tracked): of its
 * links, those another flow crosses too (bits), and a tournament over the others (lone links):
 * t[P + k] is k when links[k] is lone with a weight over 1e-12 (else -1), t[i] the better of
 * t[2i] and t[2i + 1] by (capacity / weight, index), so t[1] is its best lone link. A lone link's
 * share is capacity / weight until its flow freezes, after which it is dead: of the lone links
 * only the best can ever be the bottleneck, as fill's heap already assumes, and no other flow
 * reads them. So a settle walks a wide flow's shared links and its best lone link (flow_walk, in
 * its links' order: the order of first use is kept), not all its links: a ring over 4096 GPUs
 * crosses 11,906 links, of which a node's collective running beside it shares a few dozen.
 * Kept up to date as flows join and leave its links (on_push, remove_flow) and as capacities
 * change. */
typedef struct wide {
    uint64_t *bits;
    int *t;
    int P, cap_nl;
} wide;

/* The flows crossing one link, as slots, in start order (ascending seq). While one flow crosses
 * it, that flow is `sole` and s is not read (nor written: a flow that starts alone on a link does
 * not touch the link's array); from two flows on, s holds them all. */
typedef struct on_link {
    int *s;
    int *k; /* beside s: the link's index in each flow's links (sole_k: the sole flow's) */
    int n, cap;
    int sole, sole_k;
} on_link;

static inline int on_at(const on_link *on, int j) { return on->n == 1 ? on->sole : on->s[j]; }

/* A flow of the part being filled: its start order and its slot. */
typedef struct part_flow {
    uint64_t seq;
    int slot;
} part_flow;

struct sim_net {
    int n_links;
    double *cap;
    on_link *on;
    /* Changed links since the last settle. */
    char *dirty;
    int *dirty_list, n_dirty;
    /* Progressive filling, per link: capacity left, weight of the unfrozen flows, their share
     * (rem / wsum), first use in the part (-1 outside it), place in the fill heap (-1 outside). */
    double *rem, *wsum, *share;
    int *ord, *hpos, *heap, hn;
    char *lmark, *chg;
    int *part_links, n_part_links, *changed;
    /* The heap's groups of links crossed by the same two flows (slots pa, pb with weights wa, wb,
     * in the part's start order) at the same capacity: a table of gcap entries (-1 empty; the
     * entry's link stands for the group), gused the entries taken in this fill. */
    int *pa, *pb, *gtab, *gused, gcap;
    double *wa, *wb;
    part_flow *part;
    int cap_part;
    /* Usage, per link: load (bytes/s) since t_load, bytes carried and time saturated before it. */
    int track; /* sim_net_track_usage */
    double *load, *bytes, *sat_us, *t_load;
    char *sat;
    /* Flows: slots (stable while a flow lives), free slots, and the active ones in start order. */
    flow *f;
    int cap_slots, *free_slots, n_free;
    int *act, n_act;
    /* The one active flow when it started with no other flow in the net (and no link crossed
     * twice, no usage tracked): its rate is its lone rate and it is on no link's list, so that
     * its start and finish cost nothing per link. It is put on its links' lists (`link_alone`)
     * as soon as anything else could change its rate: another flow's start, a capacity change.
     * -1 when none. */
    int alone;
    uint64_t cap_version; /* changes with every capacity change (sim_net_memo) */
    uint64_t next_seq;
    double last_us;
    uint64_t version;
    int64_t recomputes, refilled, local;
    /* Wide flows: the size from which a flow is one, a list of one's links (flow_walk), views
     * of finished flows kept for reuse. */
    int wide_min;
    int n_views; /* wide flows with a view now */
    /* settle_local's scratch: per local link its first use (seq, k); per crossing of a local link
     * by a wide flow, the link, the flow's place in wl and its weight; the wide flows (slots) */
    uint64_t *ls;
    int *lk, ls_cap;
    int *xl, *xw, x_cap;
    double *xwt;
    int *wl, wl_cap;
    uint64_t *wks; /* beside wl (its capacity): the first use of each wide flow's bottleneck */
    int *wkk;
    int *wk, wk_cap;
    wide **wpool;
    int n_wpool, cap_wpool;
};

sim_net *sim_net_new(int n_links, const double *cap_Bps, dm_err *err)
{
    sim_net *n = dm_calloc(1, sizeof *n, err);
    if (!n) return NULL;
    n->n_links = n_links;
    size_t L = (size_t)(n_links > 0 ? n_links : 1);
    if (!(n->cap = dm_calloc(L, sizeof *n->cap, err)) || !(n->on = dm_calloc(L, sizeof *n->on, err)) ||
        !(n->dirty = dm_calloc(L, 1, err)) || !(n->dirty_list = dm_malloc(L * sizeof(int), err)) ||
        !(n->rem = dm_calloc(L, sizeof(double), err)) || !(n->wsum = dm_calloc(L, sizeof(double), err)) ||
        !(n->share = dm_calloc(L, sizeof(double), err)) || !(n->ord = dm_malloc(L * sizeof(int), err)) ||
        !(n->hpos = dm_malloc(L * sizeof(int), err)) || !(n->heap = dm_malloc(L * sizeof(int), err)) ||
        !(n->lmark = dm_calloc(L, 1, err)) || !(n->chg = dm_calloc(L, 1, err)) ||
        !(n->part_links = dm_malloc(L * sizeof(int), err)) || !(n->changed = dm_malloc(L * sizeof(int), err)) ||
        !(n->load = dm_calloc(L, sizeof(double), err)) || !(n->bytes = dm_calloc(L, sizeof(double), err)) ||
        !(n->sat_us = dm_calloc(L, sizeof(double), err)) || !(n->t_load = dm_calloc(L, sizeof(double), err)) ||
        !(n->sat = dm_calloc(L, 1, err)) || !(n->pa = dm_malloc(L * sizeof(int), err)) ||
        !(n->pb = dm_malloc(L * sizeof(int), err)) || !(n->wa = dm_malloc(L * sizeof(double), err)) ||
        !(n->wb = dm_malloc(L * sizeof(double), err)) || !(n->gused = dm_malloc(L * sizeof(int), err)))
        goto fail;
    n->gcap = 16;
    while ((size_t)n->gcap < 2 * L) n->gcap *= 2;
    if (!(n->gtab = dm_malloc((size_t)n->gcap * sizeof(int), err))) goto fail;
    for (int i = 0; i < n->gcap; i++) n->gtab[i] = -1;
    if (n_links > 0) memcpy(n->cap, cap_Bps, (size_t)n_links * sizeof *n->cap);
    for (size_t i = 0; i < L; i++) n->ord[i] = n->hpos[i] = -1;
    n->alone = -1;
    n->cap_version = 1;
    n->wide_min = SIM_NET_WIDE_MIN;
    return n;
fail:
    sim_net_free(n);
    return NULL;
}

static void wide_free(wide *v)
{
    if (!v) return;
    free(v->bits);
    free(v->t);
    free(v);
}

void sim_net_free(sim_net *n)
{
    if (!n) return;
    for (int i = 0; i < n->n_act; i++) {
        wide_free(n->f[n->act[i]].wv);
        if (n->f[n->act[i]].borrowed) continue;
        free(n->f[n->act[i]].links);
        free(n->f[n->act[i]].w);
    }
    for (int i = 0; i < n->n_wpool; i++) wide_free(n->wpool[i]);
    free(n->wpool);
    free(n->wk);
    free(n->ls);
    free(n->lk);
    free(n->xl);
    free(n->xw);
    free(n->xwt);
    free(n->wl);
    free(n->wks);
    free(n->wkk);
    if (n->on)
        for (int l = 0; l < n->n_links; l++) {
            free(n->on[l].s);
            free(n->on[l].k);
        }
    free(n->f);
    free(n->free_slots);
    free(n->act);
    free(n->part);
    free(n->cap);
    free(n->on);
    free(n->dirty);
    free(n->dirty_list);
    free(n->rem);
    free(n->wsum);
    free(n->share);
    free(n->ord);
    free(n->hpos);
    free(n->heap);
    free(n->lmark);
    free(n->chg);
    free(n->part_links);
    free(n->changed);
    free(n->load);
    free(n->bytes);
    free(n->sat_us);
    free(n->t_load);
    free(n->sat);
    free(n->pa);
    free(n->pb);
    free(n->wa);
    free(n->wb);
    free(n->gtab);
    free(n->gused);
    free(n);
}

static void mark_dirty(sim_net *n, int l)
{
    if (n->dirty[l]) return;
    n->dirty[l] = 1;
    n->dirty_list[n->n_dirty++] = l;
}

static int grow(void **p, int *cap, int need, size_t elem, dm_err *err)
{
    if (need <= *cap) return 0;
    int c = *cap ? 2 * *cap : 16;
    while (c < need) c *= 2;
    void *q = dm_realloc(*p, (size_t)c * elem, err);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- wide flows' views -------------------------------------------------------------------- */

/* The better of two of wide flow f's lone links (indices, -1 none) by (capacity / weight, index):
 * the order in which fill's heap takes a flow's lone links (their shares; their first use follows
 * the index). */
static int wide_better(const sim_net *n, const flow *f, int a, int b)
{
    if (a < 0) return b;
    if (b < 0) return a;
    double sa = n->cap[f->links[a]] / f->w[a], sb = n->cap[f->links[b]] / f->w[b];
    return sa < sb ? a : sb < sa ? b : a < b ? a : b;
}

/* Link k of wide flow f is shared (1) or lone (0) now, or lone still with its capacity changed
 * (2): its bit and its leaf set, the tournament replayed above it as far as it changes (a link
 * taken out changes only the nodes it won, one put in only those it wins). */
static void wide_set(const sim_net *n, const flow *f, int k, int shared)
{
    wide *v = f->wv;
    if (shared == 1) v->bits[k >> 6] |= (uint64_t)1 << (k & 63);
    else v->bits[k >> 6] &= ~((uint64_t)1 << (k & 63));
    int i = v->P + k, in = shared != 1 && f->w[k] > 1e-12;
    v->t[i] = in ? k : -1;
    for (i /= 2; i >= 1; i /= 2) {
        int was = v->t[i];
        if (shared == 2 || was == k) v->t[i] = wide_better(n, f, v->t[2 * i], v->t[2 * i + 1]);
        else if (in) v->t[i] = wide_better(n, f, was, k);
        if (shared != 2 && v->t[i] == was) break; /* (nothing above changes) */
    }
}

/* Flow `slot`, in a settle's part for the first time, made wide when it is one: its view (from
 * the pool) set from its links' lists. Out of memory it stays as it is: a flow without a view
 * walks all its links, with the same rates. */
static void wide_make(sim_net *n, int slot)
{
    flow *f = &n->f[slot];
    if (f->wv || f->dup || n->track || f->nl < n->wide_min) return;
    if (grow((void **)&n->wk, &n->wk_cap, f->nl, sizeof *n->wk, NULL)) return;
    wide *v = n->n_wpool ? n->wpool[--n->n_wpool] : dm_calloc(1, sizeof *v, NULL);
    if (!v) return;
    int P = 1;
    while (P < f->nl) P *= 2;
    if (P > v->cap_nl) {
        uint64_t *b = dm_realloc(v->bits, (size_t)(P / 64 + 1) * sizeof *b, NULL);
        if (b) v->bits = b;
        int *t = b ? dm_realloc(v->t, (size_t)(2 * P) * sizeof *t, NULL) : NULL;
        if (t) v->t = t;
        if (!t) {
            wide_free(v);
            return;
        }
        v->cap_nl = P;
    }
    v->P = P;
    memset(v->bits, 0, (size_t)(P / 64 + 1) * sizeof *v->bits);
    for (int k = 0; k < P; k++) {
        int sh = k < f->nl && n->on[f->links[k]].n > 1;
        if (sh) v->bits[k >> 6] |= (uint64_t)1 << (k & 63);
        v->t[P + k] = k < f->nl && !sh && f->w[k] > 1e-12 ? k : -1;
    }
    f->wv = v;
    n->n_views++;
    for (int i = P - 1; i >= 1; i--) v->t[i] = wide_better(n, f, v->t[2 * i], v->t[2 * i + 1]);
}

/* A finished wide flow's view back to the pool (freed when the pool cannot grow). */
static void wide_end(sim_net *n, flow *f)
{
    if (!f->wv) return;
    n->n_views--;
    if (grow((void **)&n->wpool, &n->cap_wpool, n->n_wpool + 1, sizeof *n->wpool, NULL)) wide_free(f->wv);
    else n->wpool[n->n_wpool++] = f->wv;
    f->wv = NULL;
}

/* The links a settle walks of flow f, as indices into f->links in their order: every one, or of
 * a wide flow its shared links and its best lone link (into n->wk). *ks NULL: 0 .. count - 1. */
static int flow_walk(sim_net *n, const flow *f, const int **ks)
{
    *ks = NULL;
    if (!f->wv) return f->nl;
    const wide *v = f->wv;
    int c = 0, b = v->t[1], words = (f->nl + 63) / 64;
    for (int i = 0; i < words; i++)
        for (uint64_t x = v->bits[i]; x; x &= x - 1) {
            int k = i * 64 + __builtin_ctzll(x);
            if (b >= 0 && b < k) n->wk[c++] = b, b = -1;
            n->wk[c++] = k;
        }
    if (b >= 0) n->wk[c++] = b;
    *ks = n->wk;
    return c;
}

/* ---- the fill heap: links by (share, first use), the order in which a scan of every link in
 * first-use order picks the smallest share (strictly smaller wins, so ties go to first use) --- */

static int before(const sim_net *n, int a, int b)
{
    return n->share[a] < n->share[b] || (n->share[a] == n->share[b] && n->ord[a] < n->ord[b]);
}

static void heap_set(sim_net *n, int i, int l)
{
    n->heap[i] = l;
    n->hpos[l] = i;
}

static void heap_up(sim_net *n, int i)
{
    int l = n->heap[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!before(n, l, n->heap[p])) break;
        heap_set(n, i, n->heap[p]);
        i = p;
    }
    heap_set(n, i, l);
}

static void heap_down(sim_net *n, int i)
{
    int l = n->heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n->hn) break;
        if (c + 1 < n->hn && before(n, n->heap[c + 1], n->heap[c])) c++;
        if (!before(n, n->heap[c], l)) break;
        heap_set(n, i, n->heap[c]);
        i = c;
    }
    heap_set(n, i, l);
}

static void heap_remove(sim_net *n, int l)
{
    int i = n->hpos[l];
    n->hpos[l] = -1;
    int last = n->heap[--n->hn];
    if (i == n->hn) return;
    heap_set(n, i, last);
    heap_up(n, i);
    heap_down(n, n->hpos[last]);
}

/* ---- settling the rates ------------------------------------------------------------------- */

static int cmp_part(const void *a, const void *b)
{
    const part_flow *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The rate of a flow alone in its part that crosses no link twice: the smallest share of its
 * links, as the fill below finds it (each link's weight sum is its one weight: 0 + w is w). */
static double lone_rate(const sim_net *n, const int *links, const double *w, int nl, const int *ks)
{
    double best = INFINITY;
    for (int q = 0; q < nl; q++) {
        int k = ks ? ks[q] : q;
        if (w[k] <= 1e-12) continue;
        double s = n->cap[links[k]] / w[k];
        if (s < best) best = s;
    }
    return isinf(best) ? 0 : best < 0 ? 0 : best;
}

double sim_net_lone_rate(const sim_net *n, const int *links, const double *w, int nl)
{
    return lone_rate(n, links, w, nl, NULL);
}

/* Progressive filling's step: the unfrozen flows on link bl (the smallest share, best; below 0
 * taken as 0) frozen at it in start order, the capacity they take and their weights off every
 * link they cross; bl saturated. nch: NULL, or where to count the links they cross, each listed
 * once in changed (chg marks it). Returns how many were frozen. */
static int freeze_on(sim_net *n, int bl, double best, int *nch)
{
    int frozen = 0;
    const on_link *on = &n->on[bl];
    if (best < 0) best = 0;
    for (int j = 0; j < on->n; j++) {
        flow *f = &n->f[on_at(on, j)];
        if (f->frozen) continue;
        f->rate = best;
        f->frozen = 1;
        f->bneck = bl;
        frozen++;
        const int *ks;
        int nw = flow_walk(n, f, &ks);
        for (int q = 0; q < nw; q++) {
            int k = ks ? ks[q] : q;
            int l = f->links[k];
            n->rem[l] -= best * f->w[k];
            n->wsum[l] -= f->w[k];
            if (n->rem[l] < 0) n->rem[l] = 0;
            if (nch && !n->chg[l]) {
                n->chg[l] = 1;
                n->changed[(*nch)++] = l;
            }
        }
    }
    n->wsum[bl] = 0; /* saturated: no flow left on it may rise */
    return frozen;
}

static uint64_t mix64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 29);
}

static uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int same_group(const sim_net *n, int a, int b)
{
    return n->pa[a] == n->pa[b] && n->pb[a] == n->pb[b] && bits_of(n->wa[a]) == bits_of(n->wa[b]) &&
           bits_of(n->wb[a]) == bits_of(n->wb[b]) && bits_of(n->cap[a]) == bits_of(n->cap[b]);
}

/* The table entry of link l's group (two flows cross it: pa, pb with wa, wb; its capacity):
 * the entry holding a link of the same group, else the empty one where it goes. */
static int group_of(const sim_net *n, int l)
{
    uint64_t h = mix64(mix64(mix64(mix64(mix64(0, (uint64_t)n->pa[l]), (uint64_t)n->pb[l]), bits_of(n->wa[l])),
                             bits_of(n->wb[l])),
                       bits_of(n->cap[l]));
    int m = n->gcap - 1;
    for (int g = (int)(h & (uint64_t)m);; g = (g + 1) & m) {
        int r = n->gtab[g];
        if (r < 0 || same_group(n, r, l)) return g;
    }
}

/* Progressive filling of the part's flows (in start order), exactly as a fill of every flow
 * would treat them: the links in first-use order, each iteration the unsaturated link with the
 * smallest share, its unfrozen flows frozen at that share in start order. */
static void fill(sim_net *n, int np, double crossings)
{
    if (np == 1) { /* alone: the smallest share, as the loop below finds it, without the heap */
        flow *f = &n->f[n->part[0].slot];
        f->bneck = -1;
        if (!f->dup) {
            const int *ks;
            int nw = flow_walk(n, f, &ks);
            f->rate = lone_rate(n, f->links, f->w, nw, ks);
            return;
        }
        double best = INFINITY; /* a link crossed twice: its weights summed */
        for (int k = 0; k < f->nl; k++) n->wsum[f->links[k]] = 0;
        for (int k = 0; k < f->nl; k++) n->wsum[f->links[k]] += f->w[k];
        for (int k = 0; k < f->nl; k++) {
            int l = f->links[k];
            if (n->wsum[l] <= 1e-12) continue;
            double s = n->cap[l] / n->wsum[l];
            if (s < best) best = s;
        }
        f->rate = isinf(best) ? 0 : best < 0 ? 0 : best;
        return;
    }
    /* Each iteration freezes at least one flow, so there are at most np. A part of few flows over
     * many links (rings over thousands of GPUs: 9000 links each) finds each iteration's link by a
     * scan of its links in first-use order, strictly smaller winning (np x links); a part of many
     * flows keeps links in a heap (links and crossings, times a sift). The same link either way, so
     * the form is chosen by the part's size as settle found it (links: those of its flows and the
     * changed ones).
     * Only links that can come out of the heap alive go in (most links of rings over thousands of
     * GPUs cannot):
     * - a link that one flow crosses alone (once) keeps its share until that flow freezes, and
     *   then dies: of a flow's such links only the first in (share, first use) goes in;
     * - links that the same two flows cross (pa, pb in start order, with weights wa, wb) at the
     *   same capacity have the same share at every step (the same operations on the same values):
     *   the first in first use stands for them all, and freezing its flows freezes theirs. */
    double nl_part = n->n_part_links;
    int heap = (double)np * nl_part > (nl_part + crossings) * log2(nl_part + 2.0);
    int nt = 0;
    n->hn = 0;
    for (int i = 0; i < np; i++) {
        int slot = n->part[i].slot, pl = -1;
        flow *f = &n->f[slot];
        f->frozen = 0;
        f->rate = 0;
        f->bneck = -1;
        const int *ks;
        int nw = flow_walk(n, f, &ks);
        for (int q = 0; q < nw; q++) {
            int k = ks ? ks[q] : q;
            int l = f->links[k];
            if (n->ord[l] < 0) {
                n->ord[l] = nt++;
                n->rem[l] = n->cap[l];
                n->wsum[l] = 0;
                if (heap) n->pa[l] = slot, n->wa[l] = f->w[k];
            } else if (heap) {
                n->pb[l] = slot, n->wb[l] = f->w[k]; /* read only where two cross it */
            }
            n->wsum[l] += f->w[k];
            if (heap && n->on[l].n == 1 && n->wsum[l] > 1e-12) { /* its first crossing, so its share now */
                n->share[l] = n->rem[l] / n->wsum[l];
                if (pl < 0 || before(n, l, pl)) pl = l;
            }
        }
        if (pl >= 0) heap_set(n, n->hn++, pl);
    }
    if (!heap) {
        int *by_ord = n->heap; /* (the heap's array, unused in this form) */
        for (int i = 0; i < n->n_part_links; i++) {
            int l = n->part_links[i];
            if (n->ord[l] >= 0) by_ord[n->ord[l]] = l;
        }
        int unfrozen = np;
        while (unfrozen > 0) {
            int bl = -1;
            double bs = 0;
            for (int i = 0; i < nt; i++) {
                int l = by_ord[i];
                if (n->wsum[l] <= 1e-12) continue;
                double sh = n->rem[l] / n->wsum[l];
                if (bl < 0 || sh < bs) bl = l, bs = sh;
            }
            if (bl < 0) break;
            unfrozen -= freeze_on(n, bl, bs, NULL);
        }
        return;
    }
    int ng = 0, prev = -1, gprev = -1; /* the last link of a group seen, its entry: a flow's
                                          links come in runs of one group */
    for (int i = 0; i < n->n_part_links; i++) {
        int l = n->part_links[i];
        if (n->ord[l] < 0 || n->wsum[l] <= 1e-12 || n->on[l].n == 1) continue;
        if (n->on[l].n == 2) {
            int g = prev >= 0 && same_group(n, prev, l) ? gprev : group_of(n, l);
            prev = l, gprev = g;
            if (n->gtab[g] < 0) {
                n->gtab[g] = l;
                n->gused[ng++] = g;
            } else if (n->ord[l] < n->ord[n->gtab[g]]) {
                n->gtab[g] = l;
            }
            continue;
        }
        n->share[l] = n->rem[l] / n->wsum[l];
        heap_set(n, n->hn++, l);
    }
    for (int i = 0; i < ng; i++) {
        int l = n->gtab[n->gused[i]];
        n->gtab[n->gused[i]] = -1;
        n->share[l] = n->rem[l] / n->wsum[l];
        heap_set(n, n->hn++, l);
    }
    for (int i = n->hn / 2 - 1; i >= 0; i--) heap_down(n, i);
    /* A link whose unfrozen weight falls to (about) 0 stays in the heap, dead, and is skipped
     * when it comes out. A key is never above its link's share (rem / wsum, as the scan computes
     * it): freezing flows at the smallest share raises the others' shares (or keeps them), so a
     * link the frozen flows cross (changed, listed by freeze_on) is sifted up at once only when
     * its share fell below its key (rounding), and otherwise re-keyed when it comes out on top
     * with a key below its share. The link that comes out with its key equal to its share is
     * then the smallest in (share, first use) of all live links: the scan's link, bit for bit. */
    int unfrozen = np;
    while (unfrozen > 0 && n->hn > 0) {
        int bl = n->heap[0];
        if (n->wsum[bl] <= 1e-12) {
            heap_remove(n, bl);
            continue;
        }
        double sh = n->rem[bl] / n->wsum[bl];
        if (sh != n->share[bl]) {
            n->share[bl] = sh;
            heap_down(n, 0);
            continue;
        }
        heap_remove(n, bl);
        int nch = 0;
        unfrozen -= freeze_on(n, bl, sh, &nch);
        for (int c = 0; c < nch; c++) {
            int l = n->changed[c];
            n->chg[l] = 0;
            if (n->hpos[l] < 0 || n->wsum[l] <= 1e-12) continue;
            double s2 = n->rem[l] / n->wsum[l];
            if (s2 < n->share[l]) {
                n->share[l] = s2;
                heap_up(n, n->hpos[l]);
            }
        }
    }
    while (n->hn > 0) n->hpos[n->heap[--n->hn]] = -1;
}

/* Bring a link's usage up to now at its current load. */
static void flush_usage(sim_net *n, int l, double now_us)
{
    double dt = now_us - n->t_load[l];
    if (dt > 0) {
        n->bytes[l] += n->load[l] * dt * 1e-6;
        if (n->sat[l]) n->sat_us[l] += dt;
    }
    n->t_load[l] = now_us;
}

/* ---- a settle that leaves the wide flows' rates as they are --------------------------------
 * A wide flow (a ring over thousands of GPUs) joins every flow it shares a link with into one
 * part, so a change anywhere would refill all of them (~250 flows at 4096 GPUs, every settle).
 * Yet in the fill a wide flow W is frozen once, at the share s_W of its bottleneck link, and the
 * values on the links of the flows around it depend on the rest only through that: W's weight on
 * them until the fill reaches s_W, then s_W x its weight off them. So where a change touches only
 * narrow flows (the local part: the flows reachable from the changed links without passing
 * through a wide flow) and cannot move any W's freeze, the local part is filled alone, each W in
 * it frozen at its known rate when the fill's share passes it: the same operations in the same
 * order on every link the local part crosses, so the same rates bit for bit, and every other
 * flow keeps its rate. It cannot move W's freeze when W's bottleneck is not a local link, no
 * local link is picked while W crosses it unfrozen (there W would freeze, at another share), and
 * no share ties with s_W (a tie could reorder freezes of equal share: then the whole part is
 * filled as before). The order of the scan is the fill's: smallest share, then first use (a
 * link's first use is the earliest flow on its list, which walks it, at its index there), the
 * wide flows' order that of their bottlenecks (rate, then first use; rates apart by rounding alone
 * are a tie too). The local part is kept small (LOCAL_MAX_*: each step of its fill scans its
 * links); tests/test_net.c checks it against the full progressive filling on random instances.
 * Returns 1 when it settled, 0 when the whole part must be filled (nothing changed but scratch
 * that the fill sets again). */
#define LOCAL_MAX_FLOWS 32
#define LOCAL_MAX_LINKS 512

static int near_share(double a, double b)
{
    if (isinf(a) || isinf(b)) return 0;
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* Whether flow f walks link l (on_link `on`, f at index k of its links) in a fill. */
static int walks(const flow *f, const on_link *on, int k)
{
    return !f->wv || on->n > 1 || f->wv->t[1] == k;
}

/* Link l's first use in a fill: the earliest flow on its list that walks it (the first, unless a
 * wide flow alone on it that does not walk it: then 0) and the link's index in that flow. */
static int first_use(const sim_net *n, int l, uint64_t *seq, int *k)
{
    const on_link *on = &n->on[l];
    if (on->n == 0) return 0;
    int slot = on_at(on, 0), kk = on->n == 1 ? on->sole_k : on->k[0];
    if (!walks(&n->f[slot], on, kk)) return 0;
    *seq = n->f[slot].seq;
    *k = kk;
    return 1;
}

/* (seq a, k a) before (seq b, k b): the fill's tie order (first use) */
static int use_before(uint64_t sa, int ka, uint64_t sb, int kb)
{
    return sa < sb || (sa == sb && ka < kb);
}

/* The wide flows of a local settle (few) in the order they freeze: by rate, then their
 * bottleneck's first use, then start order (one pick freezes a link's flows in start order). */
static void sort_wide(sim_net *n, int nw)
{
    for (int i = 1; i < nw; i++) {
        int v = n->wl[i], vk = n->wkk[i], j = i;
        uint64_t vs = n->wks[i];
        const flow *x = &n->f[v];
        for (; j > 0; j--) {
            const flow *y = &n->f[n->wl[j - 1]];
            if (y->rate < x->rate ||
                (y->rate == x->rate && (use_before(n->wks[j - 1], n->wkk[j - 1], vs, vk) ||
                                        (n->wks[j - 1] == vs && n->wkk[j - 1] == vk && y->seq < x->seq))))
                break;
            n->wl[j] = n->wl[j - 1];
            n->wks[j] = n->wks[j - 1];
            n->wkk[j] = n->wkk[j - 1];
        }
        n->wl[j] = v;
        n->wks[j] = vs;
        n->wkk[j] = vk;
    }
}

/* Room for `need` entries in a local settle's scratch arrays a (of size ea) and b (eb), which
 * share the capacity *cap (and c, of size ec, when not NULL). */
static int grow_local(void **a, size_t ea, void **b, size_t eb, void **c, size_t ec, int *cap, int need)
{
    if (need <= *cap) return 0;
    int m = *cap ? 2 * *cap : 64;
    while (m < need) m *= 2;
    void *x = dm_realloc(*a, (size_t)m * ea, NULL);
    if (!x) return -1;
    *a = x;
    if (!(x = dm_realloc(*b, (size_t)m * eb, NULL))) return -1;
    *b = x;
    if (c) {
        if (!(x = dm_realloc(*c, (size_t)m * ec, NULL))) return -1;
        *c = x;
    }
    *cap = m;
    return 0;
}

/* The fill of a local part: its nl links (part_links), nf narrow flows (part, in start order) and
 * nw wide flows (wl, in their freeze order, their bottlenecks' first use in wks/wkk). 1: the narrow
 * flows' rates set; 0: the whole part must be filled. */
static int local_fill(sim_net *n, int nl, int nf, int nw)
{
    /* each local link: capacity, its walking flows' weights summed in start order, first use */
    int nx = 0;
    for (int i = 0; i < nl; i++) {
        int l = n->part_links[i];
        const on_link *on = &n->on[l];
        n->rem[l] = n->cap[l];
        n->wsum[l] = 0;
        if (!first_use(n, l, &n->ls[i], &n->lk[i])) continue; /* no flow walks it: never a candidate */
        for (int j = 0; j < on->n; j++) {
            int slot = on_at(on, j), k = on->n == 1 ? on->sole_k : on->k[j];
            flow *f = &n->f[slot];
            if (!walks(f, on, k)) continue;
            n->wsum[l] += f->w[k];
            if (f->wv) {
                if (grow_local((void **)&n->xl, sizeof *n->xl, (void **)&n->xw, sizeof *n->xw, (void **)&n->xwt,
                               sizeof *n->xwt, &n->x_cap, nx + 1))
                    return 0;
                n->xl[nx] = l;
                n->xw[nx] = slot;
                n->xwt[nx++] = f->w[k];
            }
        }
    }
    for (int i = 0; i < nf; i++) {
        flow *f = &n->f[n->part[i].slot];
        f->frozen = 0;
        f->rate = 0;
    }
    for (int i = 0; i < nw; i++) n->f[n->wl[i]].frozen = 0;
    int wi = 0, unfrozen = nf;
    for (;;) {
        int bl = -1, bi = -1;
        double bs = 0;
        for (int i = 0; i < nl; i++) {
            int l = n->part_links[i];
            if (n->wsum[l] <= 1e-12) continue;
            double sh = n->rem[l] / n->wsum[l];
            if (bl < 0 || sh < bs || (sh == bs && use_before(n->ls[i], n->lk[i], n->ls[bi], n->lk[bi])))
                bl = l, bi = i, bs = sh;
        }
        double sw = wi < nw ? n->f[n->wl[wi]].rate : INFINITY;
        if (bl < 0 && wi >= nw) break;
        int w_first = bl < 0 || bs > sw;
        if (bl >= 0 && bs == sw) /* a tie: the fill takes the first in first use */
            w_first = use_before(n->wks[wi], n->wkk[wi], n->ls[bi], n->lk[bi]);
        else if (bl >= 0 && near_share(bs, sw))
            return 0; /* (rounding could order them either way) */
        if (w_first) { /* the next wide flow freezes first, at its rate */
            int ws = n->wl[wi++];
            flow *W = &n->f[ws];
            for (int x = 0; x < nx; x++) {
                if (n->xw[x] != ws) continue;
                int l = n->xl[x];
                n->rem[l] -= sw * n->xwt[x];
                n->wsum[l] -= n->xwt[x];
                if (n->rem[l] < 0) n->rem[l] = 0;
            }
            W->frozen = 1;
            continue;
        }
        if (unfrozen == 0 && wi >= nw) break;
        const on_link *on = &n->on[bl];
        for (int j = 0; j < on->n; j++) { /* a wide flow would freeze here, at another share */
            const flow *f = &n->f[on_at(on, j)];
            if (f->wv && !f->frozen) return 0;
        }
        unfrozen -= freeze_on(n, bl, bs, NULL);
    }
    return 1;
}

static int settle_local(sim_net *n)
{
    if (!n->n_views || n->track || n->n_dirty > LOCAL_MAX_LINKS) return 0;
    int nl = 0, nf = 0, nw = 0, ok = 1;
    for (int i = 0; i < n->n_dirty; i++) {
        int l = n->dirty_list[i];
        if (!n->lmark[l]) {
            n->lmark[l] = 1;
            n->part_links[nl++] = l;
        }
    }
    for (int i = 0; i < nl && ok; i++) {
        const on_link *on = &n->on[n->part_links[i]];
        for (int j = 0; j < on->n && ok; j++) {
            int slot = on_at(on, j);
            flow *f = &n->f[slot];
            if (f->in_part) continue;
            f->in_part = 1;
            if (f->wv) {
                if (grow_local((void **)&n->wl, sizeof *n->wl, (void **)&n->wks, sizeof *n->wks, (void **)&n->wkk,
                               sizeof *n->wkk, &n->wl_cap, nw + 1))
                    ok = 0;
                else n->wl[nw++] = slot;
                continue;
            }
            if ((!f->dup && f->nl >= n->wide_min) || nf == LOCAL_MAX_FLOWS) { /* a wide flow without its
                                                                             view yet, or one too many */
                ok = 0;
                f->in_part = 0;
                break;
            }
            n->part[nf++] = (part_flow){f->seq, slot};
            for (int k = 0; k < f->nl && ok; k++) {
                int l = f->links[k];
                if (n->lmark[l]) continue;
                if (nl == LOCAL_MAX_LINKS) ok = 0;
                else n->lmark[l] = 1, n->part_links[nl++] = l;
            }
        }
    }
    ok &= nw > 0; /* (none: the local part is the whole part) */
    if (ok && grow_local((void **)&n->ls, sizeof *n->ls, (void **)&n->lk, sizeof *n->lk, NULL, 0, &n->ls_cap, nl))
        ok = 0;
    for (int i = 0; i < nw && ok; i++) { /* each wide flow's freeze must stay where it is */
        const flow *W = &n->f[n->wl[i]];
        if (W->bneck < 0 || n->lmark[W->bneck] || !first_use(n, W->bneck, &n->wks[i], &n->wkk[i])) ok = 0;
        int b = W->wv->t[1];
        if (ok && b >= 0 && W->links[b] != W->bneck && n->cap[W->links[b]] / W->w[b] <= W->rate * (1 + 1e-9)) ok = 0;
    }
    if (ok) {
        qsort(n->part, (size_t)nf, sizeof *n->part, cmp_part);
        sort_wide(n, nw);
        for (int i = 1; i < nw && ok; i++) { /* rates apart by rounding alone: the fill's order unknown */
            double a = n->f[n->wl[i - 1]].rate, b = n->f[n->wl[i]].rate;
            if (a != b && near_share(a, b)) ok = 0;
        }
        ok = ok && local_fill(n, nl, nf, nw);
    }
    for (int i = 0; i < nl; i++) n->lmark[n->part_links[i]] = 0;
    for (int i = 0; i < nf; i++) n->f[n->part[i].slot].in_part = 0;
    for (int i = 0; i < nw; i++) {
        n->f[n->wl[i]].in_part = 0;
        n->f[n->wl[i]].frozen = 1;
    }
    if (!ok) return 0;
    for (int i = 0; i < n->n_dirty; i++) n->dirty[n->dirty_list[i]] = 0;
    n->n_dirty = 0;
    n->refilled += nf;
    n->local++;
    return 1;
}

/* Recompute the rates of the part of the flow-link graph connected to the changed links (every
 * change so far happened at last_us). */
static void settle(sim_net *n)
{
    if (!n->n_dirty) return;
    n->recomputes++;
    if (settle_local(n)) return;
    int np = 0;
    double crossings = 0;
    n->n_part_links = 0;
    for (int i = 0; i < n->n_dirty; i++) {
        int l = n->dirty_list[i];
        n->dirty[l] = 0;
        if (!n->lmark[l]) {
            n->lmark[l] = 1;
            n->part_links[n->n_part_links++] = l;
        }
    }
    n->n_dirty = 0;
    for (int i = 0; i < n->n_part_links; i++) {
        const on_link *on = &n->on[n->part_links[i]];
        for (int j = 0; j < on->n; j++) {
            int slot = on_at(on, j);
            flow *f = &n->f[slot];
            if (f->in_part) continue;
            f->in_part = 1;
            n->part[np++] = (part_flow){f->seq, slot};
            wide_make(n, slot);
            const int *ks;
            int nw = flow_walk(n, f, &ks);
            crossings += nw;
            for (int q = 0; q < nw; q++) {
                int l = f->links[ks ? ks[q] : q];
                if (!n->lmark[l]) {
                    n->lmark[l] = 1;
                    n->part_links[n->n_part_links++] = l;
                }
            }
        }
    }
    /* in start order: the active list is (sim_net_pop_finished keeps it so), so where the part
     * is most of it a pass over it picks the part's flows in order, with no sort (a part that a
     * ring over thousands of GPUs joins holds nearly every flow) */
    int sorted = np <= 1;
    if (!sorted && (double)n->n_act < np * log2((double)np)) {
        int k = 0;
        for (int i = 0; i < n->n_act; i++) k += n->f[n->act[i]].in_part;
        if (k == np) { /* (every flow of the part is active: else the sort below) */
            k = 0;
            for (int i = 0; i < n->n_act && k < np; i++)
                if (n->f[n->act[i]].in_part) n->part[k++] = (part_flow){n->f[n->act[i]].seq, n->act[i]};
            sorted = 1;
        }
    }
    if (!sorted) qsort(n->part, (size_t)np, sizeof *n->part, cmp_part);
    fill(n, np, crossings);
    n->refilled += np;
    for (int i = 0; i < n->n_part_links; i++) {
        int l = n->part_links[i];
        n->lmark[l] = 0;
        n->ord[l] = -1;
    }
    for (int i = 0; i < np; i++) n->f[n->part[i].slot].in_part = 0;
    if (!n->track) return;
    for (int i = 0; i < n->n_part_links; i++) {
        int l = n->part_links[i];
        flush_usage(n, l, n->last_us);
        n->load[l] = 0;
    }
    for (int i = 0; i < np; i++) {
        const flow *f = &n->f[n->part[i].slot];
        for (int k = 0; k < f->nl; k++) n->load[f->links[k]] += f->rate * f->w[k];
    }
    for (int i = 0; i < n->n_part_links; i++) {
        int l = n->part_links[i];
        n->sat[l] = n->cap[l] > 0 && n->load[l] > 0 && n->load[l] >= n->cap[l] * (1 - 1e-9);
    }
}

/* Advance every flow at its rate to now_us (the rates must be settled). */
static void advance(sim_net *n, double now_us)
{
    double dt = (now_us - n->last_us) * 1e-6;
    if (dt > 0)
        for (int i = 0; i < n->n_act; i++) {
            flow *f = &n->f[n->act[i]];
            f->rem -= f->rate * dt;
            if (f->rem < 0) f->rem = 0;
        }
    n->last_us = now_us;
}

/* Before a change at now_us: settle what changed at last_us and move the flows to now_us. */
static void move_to(sim_net *n, double now_us)
{
    if (now_us != n->last_us) settle(n);
    advance(n, now_us);
}

/* Put the flow started alone on its links' lists: every list is empty (it was the only flow),
 * so it becomes each link's sole flow, with nothing to allocate. Its rate stays: it is the
 * settle's of a part of one flow. */
static void link_alone(sim_net *n)
{
    if (n->alone < 0) return;
    const flow *f = &n->f[n->alone];
    for (int k = 0; k < f->nl; k++) {
        on_link *on = &n->on[f->links[k]];
        on->n = 1;
        on->sole = n->alone;
        on->sole_k = k;
    }
    n->alone = -1;
}

/* Add a slot to link l's list (room made by the caller), k the link's index in its links: the
 * newest flow, so the list stays in start order. A wide flow alone on it until now shares it. */
static void on_push(sim_net *n, int l, int slot, int k)
{
    on_link *on = &n->on[l];
    if (on->n == 0) {
        on->sole = slot;
        on->sole_k = k;
    } else {
        if (on->n == 1) {
            on->s[0] = on->sole;
            on->k[0] = on->sole_k;
            if (n->f[on->sole].wv) wide_set(n, &n->f[on->sole], on->sole_k, 1);
        }
        on->s[on->n] = slot;
        on->k[on->n] = k;
    }
    on->n++;
}

/* Room for `need` flows on a link's list. */
static int on_room(on_link *on, int need, dm_err *err)
{
    if (need <= 1 || need <= on->cap) return 0;
    int c = on->cap;
    if (grow((void **)&on->s, &c, need, sizeof *on->s, err)) return -1;
    int *k = dm_realloc(on->k, (size_t)c * sizeof *k, err);
    if (!k) return -1;
    on->k = k;
    on->cap = c;
    return 0;
}

/* The start of a flow whose links are checked and whose dup flag is known: links and w become
 * the flow's (borrowed: not freed here). memo, when given, caches the link set's lone rate. */
static int add_flow(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int dup,
                    int borrowed, sim_net_memo *memo, int tag, dm_err *err)
{
    link_alone(n);
    /* alone in the net: on every link it crosses by itself, its lists left untouched */
    int by_itself = !dup && !n->track && n->n_act == 0;
    int lone = !dup && !n->track; /* alone on every link it crosses (and no usage to record) */
    for (int i = 0; i < nl && !by_itself; i++) { /* room on each link (a link crossed twice: twice) */
        on_link *on = &n->on[links[i]];
        lone &= on->n == 0;
        if (on_room(on, on->n + (dup ? nl : 1), err)) return -1;
    }
    if (n->n_free == 0) {
        int old = n->cap_slots, c = n->cap_slots;
        if (grow((void **)&n->f, &c, old + 1, sizeof *n->f, err)) return -1;
        int *fs = dm_realloc(n->free_slots, (size_t)c * sizeof *fs, err);
        if (!fs) return -1;
        n->free_slots = fs;
        int *a = dm_realloc(n->act, (size_t)c * sizeof *a, err);
        if (!a) return -1;
        n->act = a;
        part_flow *pf = dm_realloc(n->part, (size_t)c * sizeof *pf, err);
        if (!pf) return -1;
        n->part = pf;
        n->cap_slots = n->cap_part = c;
        for (int s = c - 1; s >= old; s--) n->free_slots[n->n_free++] = s;
    }
    move_to(n, now_us);
    int slot = n->free_slots[--n->n_free];
    n->f[slot] = (flow){.tag = tag, .nl = nl, .seq = n->next_seq, .rem = bytes, .links = (int *)links,
                        .w = (double *)w, .dup = (char)dup, .borrowed = (char)borrowed, .bneck = -1};
    n->next_seq++;
    n->act[n->n_act++] = slot;
    /* A flow alone on its links while nothing else changed at this instant: its rate is the
     * settle's of a part of one flow (fill's first case), set here without the settle; a change
     * later at this instant that touches its links settles it again with the rest. */
    lone &= n->n_dirty == 0;
    by_itself &= lone;
    if (by_itself) {
        n->alone = slot;
    } else {
        for (int i = 0; i < nl; i++) {
            on_push(n, links[i], slot, i);
            if (!lone) mark_dirty(n, links[i]);
        }
    }
    if (lone) { /* not counted as a settle */
        if (!memo) {
            n->f[slot].rate = lone_rate(n, links, w, nl, NULL);
        } else {
            if (memo->cap_version != n->cap_version) {
                memo->lone = lone_rate(n, links, w, nl, NULL);
                memo->cap_version = n->cap_version;
            }
            n->f[slot].rate = memo->lone;
        }
    }
    n->version++;
    return 0;
}

int sim_net_links_check(const sim_net *n, const int *links, const double *w, int nl, int *dup, dm_err *err)
{
    if (nl < 1) return dm_err_set(err, "net: a flow needs at least one link");
    for (int i = 0; i < nl; i++)
        if (links[i] < 0 || links[i] >= n->n_links || !(w[i] > 0))
            return dm_err_set(err, "net: bad link %d (weight %g)", links[i], w[i]);
    int d = 0;
    for (int i = 0; i < nl; i++) { /* lmark is clear between settles */
        d |= n->lmark[links[i]];
        n->lmark[links[i]] = 1;
    }
    for (int i = 0; i < nl; i++) n->lmark[links[i]] = 0;
    *dup = d;
    return 0;
}

int sim_net_add(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int tag,
                dm_err *err)
{
    int dup;
    if (sim_net_links_check(n, links, w, nl, &dup, err)) return -1;
    int *l = dm_malloc((size_t)nl * sizeof *l, err);
    double *ww = l ? dm_malloc((size_t)nl * sizeof *ww, err) : NULL;
    if (!ww) {
        free(l);
        return -1;
    }
    memcpy(l, links, (size_t)nl * sizeof *links);
    memcpy(ww, w, (size_t)nl * sizeof *w);
    if (add_flow(n, now_us, bytes, l, ww, nl, dup, 0, NULL, tag, err)) {
        free(l);
        free(ww);
        return -1;
    }
    return 0;
}

int sim_net_add_shared(sim_net *n, double now_us, double bytes, const int *links, const double *w, int nl, int dup,
                       sim_net_memo *memo, int tag, dm_err *err)
{
    return add_flow(n, now_us, bytes, links, w, nl, dup, 1, memo, tag, err);
}

/* Unlink a finished flow from its links (marking them changed) and free its slot. */
static void remove_flow(sim_net *n, int slot)
{
    flow *f = &n->f[slot];
    int nl = f->nl;
    if (n->alone == slot) { /* on no list */
        n->alone = -1;
        nl = 0;
    }
    for (int k = 0; k < nl; k++) {
        on_link *on = &n->on[f->links[k]];
        if (on->n == 1) { /* alone on the link: no rate left to change there, so it is settled
                             only for the usage it records */
            if (on->sole == slot) {
                on->n = 0;
                if (n->track) mark_dirty(n, f->links[k]);
            }
            continue;
        }
        int lo = 0, hi = on->n; /* first entry with seq >= f->seq */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (n->f[on->s[mid]].seq < f->seq) lo = mid + 1;
            else hi = mid;
        }
        if (lo < on->n && on->s[lo] == slot) {
            memmove(on->s + lo, on->s + lo + 1, (size_t)(on->n - lo - 1) * sizeof *on->s);
            memmove(on->k + lo, on->k + lo + 1, (size_t)(on->n - lo - 1) * sizeof *on->k);
            on->n--;
            if (on->n == 1) {
                on->sole = on->s[0];
                on->sole_k = on->k[0];
                if (n->f[on->sole].wv) wide_set(n, &n->f[on->sole], on->sole_k, 0); /* alone on it now */
            }
        }
        mark_dirty(n, f->links[k]);
    }
    wide_end(n, f);
    if (!f->borrowed) {
        free(f->links);
        free(f->w);
    }
    f->links = NULL;
    f->w = NULL;
    n->free_slots[n->n_free++] = slot;
}

static double finish_us(const sim_net *n, const flow *f)
{
    return f->rate > 0 ? n->last_us + f->rem / f->rate * 1e6 : INFINITY;
}

double sim_net_next_finish_us(sim_net *n)
{
    settle(n);
    double t = INFINITY;
    for (int i = 0; i < n->n_act; i++) {
        double x = finish_us(n, &n->f[n->act[i]]);
        if (x < t) t = x;
    }
    return t;
}

uint64_t sim_net_version(const sim_net *n) { return n->version; }

void sim_net_set_capacity(sim_net *n, double now_us, int link, double cap_Bps)
{
    if (link < 0 || link >= n->n_links || n->cap[link] == cap_Bps) return;
    move_to(n, now_us);
    link_alone(n); /* its rate may change: the settle must find it */
    n->cap[link] = cap_Bps;
    const on_link *on = &n->on[link];
    if (on->n == 1 && n->f[on->sole].wv) wide_set(n, &n->f[on->sole], on->sole_k, 2); /* its share as a lone link */
    n->cap_version++;
    mark_dirty(n, link);
    n->version++;
}

int sim_net_active(const sim_net *n) { return n->n_act; }
int64_t sim_net_recomputes(const sim_net *n) { return n->recomputes; }
int64_t sim_net_flows_refilled(const sim_net *n) { return n->refilled; }
int64_t sim_net_local_settles(const sim_net *n) { return n->local; }

double sim_net_rate(sim_net *n, int tag)
{
    settle(n);
    for (int i = 0; i < n->n_act; i++)
        if (n->f[n->act[i]].tag == tag) return n->f[n->act[i]].rate;
    return 0;
}

int sim_net_pop_finished(sim_net *n, double now_us, int *tags, int max)
{
    /* A flow whose predicted finish is now (to rounding) is done; advancing first would leave
     * rounding residue of a few bytes. */
    settle(n);
    int k = 0, j = 0;
    double tol = 1e-9 * fmax(1.0, fabs(now_us));
    for (int i = 0; i < n->n_act; i++) {
        int s = n->act[i];
        if (k < max && finish_us(n, &n->f[s]) <= now_us + tol) {
            tags[k++] = n->f[s].tag;
            remove_flow(n, s);
        } else {
            n->act[j++] = s;
        }
    }
    n->n_act = j;
    advance(n, now_us); /* the others, at the rates they had until now */
    if (k) n->version++;
    return k;
}

void sim_net_track_usage(sim_net *n) { n->track = 1; }

void sim_net_wide_min(sim_net *n, int links) { n->wide_min = links > 1 ? links : 1; }

int sim_net_n_links(const sim_net *n) { return n->n_links; }

double sim_net_capacity(const sim_net *n, int link)
{
    return link >= 0 && link < n->n_links ? n->cap[link] : 0;
}

void sim_net_link_usage(sim_net *n, double now_us, int link, double *bytes, double *saturated_us)
{
    *bytes = *saturated_us = 0;
    if (link < 0 || link >= n->n_links) return;
    settle(n);
    double dt = now_us - n->t_load[link];
    if (dt < 0) dt = 0;
    *bytes = n->bytes[link] + n->load[link] * dt * 1e-6;
    *saturated_us = n->sat_us[link] + (n->sat[link] ? dt : 0);
}
