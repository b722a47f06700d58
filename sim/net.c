/* net.c: max-min fair sharing of link bandwidth among concurrent flows, recomputed incrementally
 * over the part of the flow-link graph a change touches (net.h). */
#include "net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    char borrowed;  /* links and w are the caller's (sim_net_add_shared), not freed here */
} flow;

/* The flows crossing one link, as slots, in start order (ascending seq). While one flow crosses
 * it, that flow is `sole` and s is not read (nor written: a flow that starts alone on a link does
 * not touch the link's array); from two flows on, s holds them all. */
typedef struct on_link {
    int *s;
    int n, cap;
    int sole;
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
    int64_t recomputes, refilled;
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
    return n;
fail:
    sim_net_free(n);
    return NULL;
}

void sim_net_free(sim_net *n)
{
    if (!n) return;
    for (int i = 0; i < n->n_act; i++) {
        if (n->f[n->act[i]].borrowed) continue;
        free(n->f[n->act[i]].links);
        free(n->f[n->act[i]].w);
    }
    if (n->on)
        for (int l = 0; l < n->n_links; l++) free(n->on[l].s);
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
static double lone_rate(const sim_net *n, const int *links, const double *w, int nl)
{
    double best = INFINITY;
    for (int k = 0; k < nl; k++) {
        if (w[k] <= 1e-12) continue;
        double s = n->cap[links[k]] / w[k];
        if (s < best) best = s;
    }
    return isinf(best) ? 0 : best < 0 ? 0 : best;
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
        frozen++;
        for (int k = 0; k < f->nl; k++) {
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
        if (!f->dup) {
            f->rate = lone_rate(n, f->links, f->w, f->nl);
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
        for (int k = 0; k < f->nl; k++) {
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

/* Recompute the rates of the part of the flow-link graph connected to the changed links (every
 * change so far happened at last_us). */
static void settle(sim_net *n)
{
    if (!n->n_dirty) return;
    n->recomputes++;
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
            crossings += f->nl;
            for (int k = 0; k < f->nl; k++) {
                int l = f->links[k];
                if (!n->lmark[l]) {
                    n->lmark[l] = 1;
                    n->part_links[n->n_part_links++] = l;
                }
            }
        }
    }
    if (np > 1) qsort(n->part, (size_t)np, sizeof *n->part, cmp_part);
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
    }
    n->alone = -1;
}

/* Add a slot to a link's list (room made by the caller): the newest flow, so the list stays in
 * start order. */
static void on_push(on_link *on, int slot)
{
    if (on->n == 0) {
        on->sole = slot;
    } else {
        if (on->n == 1) on->s[0] = on->sole;
        on->s[on->n] = slot;
    }
    on->n++;
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
        int need = on->n + (dup ? nl : 1);
        if (need > 1 && need > on->cap && grow((void **)&on->s, &on->cap, need, sizeof *on->s, err)) return -1;
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
                        .w = (double *)w, .dup = (char)dup, .borrowed = (char)borrowed};
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
            on_push(&n->on[links[i]], slot);
            if (!lone) mark_dirty(n, links[i]);
        }
    }
    if (lone) { /* not counted as a settle */
        if (!memo) {
            n->f[slot].rate = lone_rate(n, links, w, nl);
        } else {
            if (memo->cap_version != n->cap_version) {
                memo->lone = lone_rate(n, links, w, nl);
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
            on->n--;
            if (on->n == 1) on->sole = on->s[0];
        }
        mark_dirty(n, f->links[k]);
    }
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
    n->cap_version++;
    mark_dirty(n, link);
    n->version++;
}

int sim_net_active(const sim_net *n) { return n->n_act; }
int64_t sim_net_recomputes(const sim_net *n) { return n->recomputes; }
int64_t sim_net_flows_refilled(const sim_net *n) { return n->refilled; }

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
