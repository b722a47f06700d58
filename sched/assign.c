/* assign.c: owner assignment of Muon matrices to ranks: round-robin, LPT (longest processing
 * time first, per-layer packing of small matrices, each unit on the owner that raises the
 * objective least) and the MILP balance (LPT, a split search over how many owners share each
 * layer, a batch-aware count search, then lp_solve on an aggregate model over (shape, batch
 * size, owner) and (layer class, owner)), backed by the LPT plan. The objective (sched.h) is
 * each owner's NS load plus the collectives the assignment creates. Deterministic: every rank
 * and every run gets the same plan, a time limit included (the MILP balance counts its time in
 * work: the search clock below). */
#define _GNU_SOURCE
#include "sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lpsolve/lp_lib.h>

/* ---- the search clock ----------------------------------------------------------------------
 * The MILP balance's time limit (--milp-time) is counted in work, not read off the wall clock,
 * so that a problem and a limit give one plan on every run, rank and load of the machine (a
 * wall-clock cut gave DeepSeek-V4-Pro four different steps in eight runs). Each search step
 * charges its count of basic operations at a rate measured on the 2-core build machine
 * (DM_MILP_CLOCK=1 prints, per phase, the wall time beside the charged time: the rates are
 * set so the two agree there, traces/sched/milp-clock-2026-12-07); a phase ends when the
 * charged time passes its share of the limit. On a faster machine the search ends early, on a
 * slower one late, with the same plan. The wall clock stays only as a ceiling against a gross
 * misestimate (twice the limit plus half a second): a search it cuts says so in the status. */
enum { SC_SCAN, SC_EVAL, SC_SPLIT, SC_BUILD, SC_BUILDQ, SC_BASIS, SC_START, SC_PIVOT, SC_BSWAP, SC_KINDS };
/* seconds per unit: an entry a local search scans; a candidate move it evaluates; a matrix
 * placed by split_eval (per part it weighs); a nonzero added to the model, and per row added
 * each nonzero already there (lp_solve's row mode moves the matrix as it grows: the build is
 * about quadratic); the warm start's guess_basis per column squared (it grows about
 * quadratically too); lp_solve's start per nonzero of the model; a simplex pivot per nonzero;
 * a bound swap per column */
static const double sc_rate[SC_KINDS] = {0.7e-9, 2.8e-9, 4.2e-9, 2.5e-7, 1.2e-10, 5e-10, 2.8e-7, 4.7e-9, 1.75e-9};

typedef struct sclock {
    double t0, wall_cap; /* wall seconds: the start, the ceiling */
    double spent, until; /* charged seconds since the start; the current phase ends past `until` */
    double by[SC_KINDS]; /* units charged per kind (the log) */
    int walled;          /* the ceiling cut the search */
    int log;             /* DM_MILP_CLOCK: a line per phase on stderr */
    double phase_wall, phase_spent;
} sclock;

static void sc_init(sclock *ck, double limit_s)
{
    memset(ck, 0, sizeof *ck);
    ck->t0 = sched_wall_s();
    ck->wall_cap = ck->t0 + 2 * limit_s + 0.5;
    const char *e = getenv("DM_MILP_CLOCK");
    ck->log = e && *e && strcmp(e, "0");
    ck->phase_wall = ck->t0;
}

static void sc_charge(sclock *ck, int kind, double units)
{
    double t = units * sc_rate[kind];
    ck->spent += t;
    ck->by[kind] += units;
}

/* A local search's counts since its last charge (entries scanned *w, moves evaluated *e; e may
 * be NULL) charged and zeroed. */
static void sc_charge_search(sclock *ck, double *w, double *e)
{
    sc_charge(ck, SC_SCAN, *w);
    *w = 0;
    if (e) {
        sc_charge(ck, SC_EVAL, *e);
        *e = 0;
    }
}

/* 1 when the current phase's time is spent (or the wall-clock ceiling passed) */
static int sc_over(sclock *ck)
{
    if (!ck->walled && sched_wall_s() > ck->wall_cap) ck->walled = 1;
    return ck->walled || ck->spent > ck->until;
}

static void sc_phase_end(sclock *ck, const char *phase)
{
    static const char *const name[SC_KINDS] = {"scan", "eval", "split", "build", "buildq", "basis", "start", "pivot", "bswap"};
    double now = sched_wall_s();
    if (ck->log) {
        fprintf(stderr, "milp-clock %-5s wall %.4f s charged %.4f s units", phase, now - ck->phase_wall, ck->spent - ck->phase_spent);
        for (int k = 0; k < SC_KINDS; k++) fprintf(stderr, " %s %.4g", name[k], ck->by[k]);
        fprintf(stderr, "%s\n", ck->walled ? " walled" : "");
    }
    ck->phase_wall = now;
    ck->phase_spent = ck->spent;
    for (int k = 0; k < SC_KINDS; k++) ck->by[k] = 0;
}

static double cost_of(const sched_problem *p, int s, int b) { return p->cost[(size_t)s * p->max_batch + (b - 1)]; }

static void set_makespan(const sched_problem *p, sched_assign *a)
{
    a->makespan_us = 0;
    for (int o = 0; o < p->nowners; o++) a->makespan_us = fmax(a->makespan_us, a->load_us[o]);
}

void sched_assign_free(sched_assign *a)
{
    if (!a) return;
    free(a->owner);
    free(a->batch_of);
    free(a->load_us);
    memset(a, 0, sizeof *a);
}

static int assign_alloc(const sched_problem *p, sched_assign *a, dm_err *err)
{
    memset(a, 0, sizeof *a);
    if (!(a->owner = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *a->owner, err)) ||
        !(a->batch_of = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *a->batch_of, err)) ||
        !(a->load_us = dm_calloc((size_t)p->nowners, sizeof *a->load_us, err))) {
        sched_assign_free(a);
        return -1;
    }
    a->n_items = p->n_items;
    return 0;
}

int sched_assign_same(const sched_assign *a, const sched_assign *b)
{
    if (a->n_items <= 0 || a->n_items != b->n_items || !a->owner || !b->owner || !a->batch_of || !b->batch_of) return 0;
    return !memcmp(a->owner, b->owner, (size_t)a->n_items * sizeof *a->owner) &&
           !memcmp(a->batch_of, b->batch_of, (size_t)a->n_items * sizeof *a->batch_of);
}

int sched_assign_copy(const sched_problem *p, const sched_assign *src, sched_assign *a, dm_err *err)
{
    if (assign_alloc(p, a, err)) return -1;
    int *owner = a->owner, *batch_of = a->batch_of;
    double *load = a->load_us;
    *a = *src;
    a->owner = owner, a->batch_of = batch_of, a->load_us = load;
    memcpy(a->owner, src->owner, (size_t)p->n_items * sizeof *a->owner);
    memcpy(a->batch_of, src->batch_of, (size_t)p->n_items * sizeof *a->batch_of);
    memcpy(a->load_us, src->load_us, (size_t)p->nowners * sizeof *a->load_us);
    return 0;
}

static int has_comm(const sched_problem *p) { return p->pair_us > 0 || p->owner_pair_us > 0 || p->owner_elem_us > 0; }

/* sched_comm_bound, and *m_best the makespan M at which it is reached: the makespan the best
 * trade between NS balance and collectives may aim at. */
static double comm_bound_at(const sched_problem *p, double ns_bound, double *m_best);
static void per_matrix_cost(const sched_problem *p, const int *count, double *per);

static int layer_of(const sched_problem *p, int i) { return p->items[i].layer > 0 ? p->items[i].layer : 0; }

static int n_layers_of(const sched_problem *p)
{
    int n = 1;
    for (int i = 0; i < p->n_items; i++)
        if (layer_of(p, i) + 1 > n) n = layer_of(p, i) + 1;
    return n;
}

static double elems_of(const sched_problem *p, int shape) { return p->shape_elems ? (double)p->shape_elems[shape] : 0; }

/* Relative tie tolerance of objective comparisons. */
static int less(double x, double y) { return isinf(y) ? x < y : x < y - 1e-9 * fmax(1, fabs(y)); }

int sched_assign_score(const sched_problem *p, sched_assign *a, dm_err *err)
{
    int L = n_layers_of(p);
    unsigned char *has = dm_calloc((size_t)p->nowners * L, 1, err);
    double *chain = dm_malloc((size_t)p->nowners * sizeof *chain, err);
    if (!has || !chain) {
        free(has);
        free(chain);
        return -1;
    }
    for (int o = 0; o < p->nowners; o++) chain[o] = a->load_us[o];
    int pairs = 0;
    for (int i = 0; i < p->n_items; i++) {
        int o = a->owner[i];
        size_t k = (size_t)o * L + layer_of(p, i);
        if (!has[k]) {
            has[k] = 1;
            pairs++;
            chain[o] += p->owner_pair_us;
        }
        chain[o] += elems_of(p, p->items[i].shape) * p->owner_elem_us;
    }
    double mx = 0;
    for (int o = 0; o < p->nowners; o++) mx = fmax(mx, chain[o]);
    a->pairs = pairs;
    a->objective_us = mx + p->pair_us * pairs;
    free(has);
    free(chain);
    return 0;
}

double sched_lower_bound(const sched_problem *p)
{
    int *count = calloc((size_t)p->n_shapes, sizeof *count);
    double total = 0, largest = 0;
    if (!count) return 0;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    for (int s = 0; s < p->n_shapes; s++) {
        if (!count[s]) continue;
        double per = INFINITY, single = INFINITY;
        for (int b = 1; b <= p->max_batch && b <= count[s]; b++) {
            per = fmin(per, cost_of(p, s, b) / b);
            single = fmin(single, cost_of(p, s, b));
        }
        total += count[s] * per;
        largest = fmax(largest, single);
    }
    free(count);
    return fmax(total / p->nowners, largest);
}

/* ---- units: one large matrix, or the small matrices of one layer -------------------------- */

typedef struct unit {
    int first;      /* index into the order array */
    int n;          /* items */
    int layer;
    double cost;
    double elems;   /* elements of its matrices */
} unit;

static int cmp_item_order(const void *a, const void *b, void *ctx)
{
    const sched_problem *p = ctx;
    const sched_item *x = &p->items[*(const int *)a], *y = &p->items[*(const int *)b];
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    int sx = p->shape_elems[x->shape] < p->threshold_elems, sy = p->shape_elems[y->shape] < p->threshold_elems;
    if (sx != sy) return sx - sy; /* large ones first in a layer */
    if (x->shape != y->shape) return x->shape < y->shape ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Cost of NS over items order[first .. first+n) in batches per shape (at most max_batch). If
 * batch_of is given, numbers the batches from *next_batch. */
static double group_cost(const sched_problem *p, const int *order, int first, int n, int *batch_of, int *next_batch)
{
    double c = 0;
    int i = first;
    while (i < first + n) {
        int s = p->items[order[i]].shape, j = i;
        while (j < first + n && p->items[order[j]].shape == s && j - i < p->max_batch) j++;
        c += cost_of(p, s, j - i);
        if (batch_of) {
            for (int k = i; k < j; k++) batch_of[order[k]] = *next_batch;
            (*next_batch)++;
        }
        i = j;
    }
    return c;
}

static int make_units(const sched_problem *p, int **order_out, unit **units_out, int *n_units, dm_err *err)
{
    int *order = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *order, err);
    unit *u = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *u, err);
    int nu = 0;
    if (!order || !u) {
        free(order);
        free(u);
        return -1;
    }
    for (int i = 0; i < p->n_items; i++) order[i] = i;
    qsort_r(order, (size_t)p->n_items, sizeof *order, cmp_item_order, (void *)p);
    for (int i = 0; i < p->n_items;) {
        const sched_item *it = &p->items[order[i]];
        int j = i + 1;
        if (p->shape_elems[it->shape] < p->threshold_elems)
            while (j < p->n_items && p->items[order[j]].layer == it->layer) j++;
        u[nu].first = i;
        u[nu].n = j - i;
        u[nu].layer = it->layer;
        u[nu].cost = group_cost(p, order, i, j - i, NULL, NULL);
        u[nu].elems = 0;
        for (int k = i; k < j; k++) u[nu].elems += elems_of(p, p->items[order[k]].shape);
        nu++;
        i = j;
    }
    *order_out = order;
    *units_out = u;
    *n_units = nu;
    return 0;
}

static int cmp_unit_cost(const void *a, const void *b)
{
    const unit *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

static void place_unit(const sched_problem *p, const int *order, const unit *u, int owner, sched_assign *a)
{
    for (int k = u->first; k < u->first + u->n; k++) a->owner[order[k]] = owner;
    group_cost(p, order, u->first, u->n, a->batch_of, &a->n_batches);
    a->load_us[owner] += u->cost;
    if (a->load_us[owner] > a->makespan_us) a->makespan_us = a->load_us[owner];
}

/* After placement: on each owner, re-batch each shape's matrices across units (chunks of at
 * most max_batch, sizes as even as possible) when that is cheaper than the units' own batches.
 * Loads only go down, so bounds on the placement still hold. */
static int cmp_owner_shape(const void *x, const void *y, void *ctx)
{
    const void *const *c = ctx;
    const sched_problem *p = c[0];
    const sched_assign *a = c[1];
    int i = *(const int *)x, j = *(const int *)y;
    if (a->owner[i] != a->owner[j]) return a->owner[i] < a->owner[j] ? -1 : 1;
    if (p->items[i].shape != p->items[j].shape) return p->items[i].shape < p->items[j].shape ? -1 : 1;
    if (p->items[i].layer != p->items[j].layer) return p->items[i].layer > p->items[j].layer ? -1 : 1;
    return (i > j) - (i < j);
}

static int merge_batches(const sched_problem *p, sched_assign *a, dm_err *err)
{
    size_t ni = (size_t)(p->n_items ? p->n_items : 1), nb = (size_t)(a->n_batches ? a->n_batches : 1);
    int *order = dm_malloc(ni * sizeof *order, err);
    int *bsize = dm_calloc(nb, sizeof *bsize, err);
    int *remap = dm_malloc(nb * sizeof *remap, err);
    int rc = -1, next = 0;
    if (!order || !bsize || !remap) goto done;
    for (int i = 0; i < p->n_items; i++) {
        order[i] = i;
        bsize[a->batch_of[i]]++;
    }
    for (size_t k = 0; k < nb; k++) remap[k] = -1;
    const void *ctx[2] = {p, a};
    qsort_r(order, (size_t)p->n_items, sizeof *order, cmp_owner_shape, (void *)ctx);
    for (int o = 0; o < p->nowners; o++) a->load_us[o] = 0;
    for (int i = 0; i < p->n_items;) {
        int j = i, o = a->owner[order[i]], s = p->items[order[i]].shape;
        while (j < p->n_items && a->owner[order[j]] == o && p->items[order[j]].shape == s) j++;
        int cnt = j - i, chunks = (cnt + p->max_batch - 1) / p->max_batch;
        double old_cost = 0, new_cost = 0;
        for (int k = i; k < j; k++) { /* a batch holds one (owner, shape): each counted once here */
            int ob = a->batch_of[order[k]];
            if (remap[ob] == -1) {
                old_cost += cost_of(p, s, bsize[ob]);
                remap[ob] = -2;
            }
        }
        for (int c = 0; c < chunks; c++) new_cost += cost_of(p, s, cnt / chunks + (c < cnt % chunks));
        if (new_cost < old_cost - 1e-9) {
            int k = i;
            for (int c = 0; c < chunks; c++) {
                int sz = cnt / chunks + (c < cnt % chunks);
                for (int q = 0; q < sz; q++) a->batch_of[order[k++]] = next;
                next++;
            }
            a->load_us[o] += new_cost;
        } else {
            for (int k = i; k < j; k++) {
                int ob = a->batch_of[order[k]];
                if (remap[ob] < 0) remap[ob] = next++;
                a->batch_of[order[k]] = remap[ob];
            }
            a->load_us[o] += old_cost;
        }
        i = j;
    }
    a->n_batches = next;
    set_makespan(p, a);
    rc = 0;
done:
    free(order);
    free(bsize);
    free(remap);
    return rc;
}

/* The objective's greedy step: a unit goes to the owner for which max(makespan, its chain after
 * the unit) plus the pair term the unit adds is least; ties: the shorter chain, then an owner
 * already holding the layer, then the lowest owner. A layer's units share an owner while that
 * costs less than the collectives another owner would add. The makespan starts at a target:
 * the makespan at which sched_comm_bound is reached (at least the NS lower bound, which any
 * plan reaches), so owners fill up to it before a layer is spread, instead of every unit
 * weighing its own small rise of the makespan against a whole pair. */
typedef struct placer {
    const sched_problem *p;
    int L;
    unsigned char *has; /* nowners x L: owner holds the layer */
    double *chain, mk;  /* per owner: NS + owner-side communication; their maximum */
    int *heap, *pos;    /* owners in a min-heap by (chain, owner); an owner's place in it */
    int *held, *n_held; /* per layer (nowners apart): the owners holding it, in owner order */
    int *frontier;      /* placer_put's best-first walk of the heap */
} placer;

static void placer_free(placer *pl)
{
    free(pl->held);
    free(pl->n_held);
    free(pl->has);
    free(pl->chain);
    free(pl->heap);
    free(pl->pos);
    free(pl->frontier);
    memset(pl, 0, sizeof *pl);
}

static int placer_init(placer *pl, const sched_problem *p, double target_us, dm_err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->L = n_layers_of(p);
    size_t O = (size_t)(p->nowners > 0 ? p->nowners : 1), L = (size_t)(pl->L > 0 ? pl->L : 1);
    if (!(pl->has = dm_calloc(O * L, 1, err)) || !(pl->chain = dm_calloc(O, sizeof *pl->chain, err)) ||
        !(pl->heap = dm_malloc(O * sizeof *pl->heap, err)) || !(pl->pos = dm_malloc(O * sizeof *pl->pos, err)) ||
        !(pl->frontier = dm_malloc((O + 1) * sizeof *pl->frontier, err)) ||
        !(pl->held = dm_malloc(O * L * sizeof *pl->held, err)) || !(pl->n_held = dm_calloc(L, sizeof *pl->n_held, err))) {
        placer_free(pl);
        return -1;
    }
    for (int o = 0; o < p->nowners; o++) pl->heap[o] = pl->pos[o] = o; /* every chain 0: in owner order */
    pl->mk = target_us;
    return 0;
}

/* (chain, owner) order of the owners' heap */
static int placer_before(const placer *pl, int a, int b)
{
    return pl->chain[a] < pl->chain[b] || (pl->chain[a] == pl->chain[b] && a < b);
}

/* Owner o's chain grew: move it down the heap. */
static void placer_sink(placer *pl, int o)
{
    int n = pl->p->nowners, i = pl->pos[o];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && placer_before(pl, pl->heap[c + 1], pl->heap[c])) c++;
        if (!placer_before(pl, pl->heap[c], o)) break;
        pl->heap[i] = pl->heap[c];
        pl->pos[pl->heap[i]] = i;
        i = c;
    }
    pl->heap[i] = o;
    pl->pos[o] = i;
}

/* The owner with the shortest chain (the lowest on ties) that does not hold the layer, -1 if
 * every owner does: a best-first walk down the heap, which passes at most the layer's holders. */
static int placer_free_owner(placer *pl, int layer)
{
    int n = pl->p->nowners, nf = 0, *f = pl->frontier, steps = 0;
    if (n < 1) return -1;
    f[nf++] = 0; /* heap places, themselves a small heap by their owners' order */
    while (nf > 0) {
        if (++steps > 64) { /* a layer most owners hold (NS-only LPT spreads layers): a scan */
            int best = -1;
            for (int o = 0; o < n; o++)
                if (!pl->has[(size_t)o * pl->L + layer] && (best < 0 || placer_before(pl, o, best))) best = o;
            return best;
        }
        int i = f[0];
        f[0] = f[--nf];
        for (int j = 0;;) { /* sift down */
            int c = 2 * j + 1;
            if (c >= nf) break;
            if (c + 1 < nf && placer_before(pl, pl->heap[f[c + 1]], pl->heap[f[c]])) c++;
            if (!placer_before(pl, pl->heap[f[c]], pl->heap[f[j]])) break;
            int t = f[c];
            f[c] = f[j];
            f[j] = t;
            j = c;
        }
        int o = pl->heap[i];
        if (!pl->has[(size_t)o * pl->L + layer]) return o;
        for (int c = 2 * i + 1; c <= 2 * i + 2 && c < n; c++) { /* its children, sifted up */
            int j = nf++;
            f[j] = c;
            while (j > 0 && placer_before(pl, pl->heap[f[j]], pl->heap[f[(j - 1) / 2]])) {
                int t = f[j];
                f[j] = f[(j - 1) / 2];
                f[(j - 1) / 2] = t;
                j = (j - 1) / 2;
            }
        }
    }
    return -1;
}

/* Owner o holds the layer from now on. */
static void placer_hold(placer *pl, int layer, int o)
{
    if (pl->has[(size_t)o * pl->L + layer]) return;
    int *h = pl->held + (size_t)layer * pl->p->nowners, j = pl->n_held[layer]++; /* kept in owner order */
    while (j > 0 && h[j - 1] > o) h[j] = h[j - 1], j--;
    h[j] = o;
    pl->has[(size_t)o * pl->L + layer] = 1;
}

/* The greedy step over the owners holding the layer and the best one that does not: among the
 * owners without the layer, the score and the chain are least at the shortest chain, so the
 * others cannot win (up to the tolerance of `less`: owners whose chains differ by less than 1e-9
 * of them count as tied there, and this takes the exact shortest). Candidates are weighed in
 * owner order, as a scan of every owner would. */
static int placer_put(placer *pl, int layer, double cost, double elems)
{
    const sched_problem *p = pl->p;
    int best = 0, best_new = 1, fo = placer_free_owner(pl, layer), nh = pl->n_held[layer], *h = pl->held + (size_t)layer * p->nowners;
    double best_sc = INFINITY, best_nl = INFINITY;
    for (int j = 0, done_free = fo < 0; j < nh || !done_free; ) {
        int o;
        if (!done_free && (j >= nh || fo < h[j])) o = fo, done_free = 1;
        else o = h[j++];
        int nw = !pl->has[(size_t)o * pl->L + layer];
        double nl = pl->chain[o] + cost + elems * p->owner_elem_us + nw * p->owner_pair_us;
        double sc = fmax(pl->mk, nl) + nw * p->pair_us;
        if (less(sc, best_sc) || (!less(best_sc, sc) && (less(nl, best_nl) || (!less(best_nl, nl) && best_new && !nw)))) {
            best = o;
            best_sc = sc;
            best_nl = nl;
            best_new = nw;
        }
    }
    placer_hold(pl, layer, best);
    pl->chain[best] = best_nl;
    placer_sink(pl, best);
    pl->mk = fmax(pl->mk, best_nl);
    return best;
}

int sched_assign_rr(const sched_problem *p, sched_assign *a, dm_err *err)
{
    int *order, nu;
    unit *u;
    if (assign_alloc(p, a, err) || make_units(p, &order, &u, &nu, err)) {
        sched_assign_free(a);
        return -1;
    }
    for (int k = 0; k < nu; k++) place_unit(p, order, &u[k], k % p->nowners, a);
    a->n_units = nu;
    free(order);
    free(u);
    if (merge_batches(p, a, err) || sched_assign_score(p, a, err)) {
        sched_assign_free(a);
        return -1;
    }
    a->method = "round-robin";
    return 0;
}

static double lpt_target(const sched_problem *p)
{
    double m;
    comm_bound_at(p, sched_lower_bound(p), &m);
    return m;
}

int sched_assign_lpt(const sched_problem *p, sched_assign *a, dm_err *err)
{
    int *order, nu, comm = has_comm(p);
    unit *u;
    placer pl;
    memset(&pl, 0, sizeof pl);
    if (assign_alloc(p, a, err) || make_units(p, &order, &u, &nu, err)) {
        sched_assign_free(a);
        return -1;
    }
    if (placer_init(&pl, p, comm ? lpt_target(p) : 0, err)) {
        free(order);
        free(u);
        sched_assign_free(a);
        return -1;
    }
    if (nu > 1) qsort(u, (size_t)nu, sizeof *u, cmp_unit_cost);
    for (int k = 0; k < nu; k++) {
        int layer = u[k].layer > 0 ? u[k].layer : 0;
        if (comm) { /* communication terms: the objective's greedy step */
            place_unit(p, order, &u[k], placer_put(&pl, layer, u[k].cost, u[k].elems), a);
            continue;
        }
        /* the least loaded owner (the lowest on ties) and the least loaded without the layer:
         * the placer's heap, its chains the NS loads */
        int any = pl.heap[0], free_ = placer_free_owner(&pl, layer);
        /* Spread a layer over owners as long as it does not raise the makespan beyond what
         * plain LPT would reach with this unit. */
        int pick = any;
        if (free_ >= 0 && a->load_us[free_] + u[k].cost <= fmax(a->makespan_us, a->load_us[any] + u[k].cost) + 1e-9)
            pick = free_;
        placer_hold(&pl, layer, pick);
        place_unit(p, order, &u[k], pick, a);
        pl.chain[pick] = a->load_us[pick];
        placer_sink(&pl, pick);
    }
    a->n_units = nu;
    placer_free(&pl);
    free(order);
    free(u);
    if (merge_batches(p, a, err) || sched_assign_score(p, a, err)) {
        sched_assign_free(a);
        return -1;
    }
    a->method = "lpt";
    return 0;
}

/* ---- batching tables ----------------------------------------------------------------------- */

/* T[n]: the cheapest batching of n matrices of shape s, first[n] (may be NULL) the first batch
 * size of that split; fills T[0..count]. */
static void batch_dp(const sched_problem *p, int s, int count, double *T, int *first)
{
    T[0] = 0;
    if (first) first[0] = 0;
    for (int n = 1; n <= count; n++) {
        T[n] = INFINITY;
        for (int b = 1; b <= n && b <= p->max_batch; b++) {
            double v = cost_of(p, s, b) + T[n - b];
            if (v < T[n] - 1e-12) {
                T[n] = v;
                if (first) first[n] = b;
            }
        }
    }
}

/* batch_dp for every shape, up to count[s] matrices. */
typedef struct btab {
    int S;
    double **T;
    int **first;
} btab;

static void btab_free(btab *t)
{
    for (int s = 0; s < t->S; s++) {
        if (t->T) free(t->T[s]);
        if (t->first) free(t->first[s]);
    }
    free(t->T);
    free(t->first);
    memset(t, 0, sizeof *t);
}

static int btab_init(btab *t, const sched_problem *p, const int *count, dm_err *err)
{
    memset(t, 0, sizeof *t);
    if (!(t->T = dm_calloc((size_t)(p->n_shapes ? p->n_shapes : 1), sizeof *t->T, err)) ||
        !(t->first = dm_calloc((size_t)(p->n_shapes ? p->n_shapes : 1), sizeof *t->first, err)))
        return -1;
    t->S = p->n_shapes;
    for (int s = 0; s < t->S; s++) {
        if (!(t->T[s] = dm_malloc(((size_t)count[s] + 1) * sizeof **t->T, err)) ||
            !(t->first[s] = dm_malloc(((size_t)count[s] + 1) * sizeof **t->first, err)))
            return -1;
        batch_dp(p, s, count[s], t->T[s], t->first[s]);
    }
    return 0;
}

/* ---- jobs: NS batches as scheduling jobs (the MILP's granularity) --------------------------- */

typedef struct job {
    int shape, size, owner;
    double cost;
} job;

static int cmp_job_cost(const void *x, const void *y)
{
    const job *a = x, *b = y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    if (a->shape != b->shape) return a->shape < b->shape ? -1 : 1;
    return (a->size > b->size) - (a->size < b->size);
}

static int cmp_by_layer(const void *a, const void *b, void *ctx)
{
    const sched_problem *p = ctx;
    const sched_item *x = &p->items[*(const int *)a], *y = &p->items[*(const int *)b];
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Turn jobs (shape, size, owner) into concrete items: deal a shape's items (in layer order)
 * round-robin over the owners that still take that shape, so one layer's matrices land on
 * different owners, then cut each owner's items into its jobs. a is allocated here. */
static int realize_jobs(const sched_problem *p, const job *jobs, int nj, sched_assign *a, dm_err *err)
{
    int rc = -1;
    size_t ni = (size_t)(p->n_items ? p->n_items : 1);
    int *items = dm_malloc(ni * sizeof *items, err);
    int *want = dm_malloc((size_t)p->nowners * sizeof *want, err);
    int *pos = dm_malloc((size_t)p->nowners * sizeof *pos, err);
    int *mine = dm_malloc(ni * sizeof *mine, err);
    int *start = dm_malloc(((size_t)p->nowners + 1) * sizeof *start, err);
    if (!items || !want || !pos || !mine || !start || assign_alloc(p, a, err)) goto done;
    for (int s = 0; s < p->n_shapes; s++) {
        int n = 0, total = 0;
        for (int i = 0; i < p->n_items; i++)
            if (p->items[i].shape == s) items[n++] = i;
        if (!n) continue;
        qsort_r(items, (size_t)n, sizeof *items, cmp_by_layer, (void *)p);
        for (int o = 0; o < p->nowners; o++) want[o] = 0;
        for (int j = 0; j < nj; j++)
            if (jobs[j].shape == s) want[jobs[j].owner] += jobs[j].size;
        for (int o = 0; o < p->nowners; o++) total += want[o];
        if (total != n) {
            dm_err_set(err, "assign: shape %d covered %d times, expected %d", s, total, n);
            goto done;
        }
        int o = 0;
        for (int i = 0; i < n; i++) {
            while (!want[o]) o = (o + 1) % p->nowners;
            a->owner[items[i]] = o;
            want[o]--;
            o = (o + 1) % p->nowners;
        }
        /* each owner's items of the shape, contiguous in `mine`, layer order */
        start[0] = 0;
        for (int w = 0; w < p->nowners; w++) start[w + 1] = start[w];
        for (int i = 0; i < n; i++) start[a->owner[items[i]] + 1]++;
        for (int w = 0; w < p->nowners; w++) start[w + 1] += start[w];
        for (int w = 0; w < p->nowners; w++) pos[w] = start[w];
        for (int i = 0; i < n; i++) mine[pos[a->owner[items[i]]]++] = items[i];
        for (int w = 0; w < p->nowners; w++) pos[w] = start[w];
        for (int j = 0; j < nj; j++) {
            if (jobs[j].shape != s) continue;
            for (int k = 0; k < jobs[j].size; k++) a->batch_of[mine[pos[jobs[j].owner]++]] = a->n_batches;
            a->n_batches++;
            a->load_us[jobs[j].owner] += cost_of(p, s, jobs[j].size);
        }
    }
    set_makespan(p, a);
    rc = 0;
done:
    if (rc) sched_assign_free(a);
    free(items);
    free(want);
    free(pos);
    free(mine);
    free(start);
    return rc;
}

/* Jobs for a batching cap: per shape the largest batch whose NS costs at most cap_us (at least
 * 1), the shape's matrices split as evenly as possible into batches no larger. */
static int make_jobs(const sched_problem *p, const int *count, double cap_us, job *jobs)
{
    int nj = 0;
    for (int s = 0; s < p->n_shapes; s++) {
        if (!count[s]) continue;
        int b = 1;
        for (int k = 2; k <= p->max_batch && k <= count[s]; k++)
            if (cost_of(p, s, k) <= cap_us) b = k;
        int nb = (count[s] + b - 1) / b;
        for (int i = 0; i < nb; i++) {
            int size = count[s] / nb + (i < count[s] % nb);
            jobs[nj++] = (job){s, size, -1, cost_of(p, s, size)};
        }
    }
    return nj;
}

/* LPT over jobs, then local search: move a job off the most loaded owner, or swap it with a
 * smaller job elsewhere, while that lowers the pair's maximum below the current makespan. */
static double schedule_jobs(const sched_problem *p, job *jobs, int nj, double *load, sclock *ck)
{
    if (nj > 1) qsort(jobs, (size_t)nj, sizeof *jobs, cmp_job_cost);
    for (int o = 0; o < p->nowners; o++) load[o] = 0;
    for (int j = 0; j < nj; j++) {
        int best = 0;
        for (int o = 1; o < p->nowners; o++)
            if (load[o] < load[best]) best = o;
        jobs[j].owner = best;
        load[best] += jobs[j].cost;
    }
    sc_charge(ck, SC_SCAN, (double)nj * p->nowners);
    double w = 0; /* entries scanned since the last charge */
    for (int iter = 0; iter < 100000; iter++) {
        if ((iter & 63) == 0) {
            sc_charge_search(ck, &w, NULL);
            if (sc_over(ck)) break;
        }
        w += p->nowners + nj;
        int mx = 0, mn = 0;
        for (int o = 1; o < p->nowners; o++) {
            if (load[o] > load[mx]) mx = o;
            if (load[o] < load[mn]) mn = o;
        }
        int done = 0;
        for (int j = 0; j < nj && !done; j++) { /* move */
            if (jobs[j].owner != mx) continue;
            if (load[mn] + jobs[j].cost < load[mx] - 1e-9) {
                load[mx] -= jobs[j].cost;
                load[mn] += jobs[j].cost;
                jobs[j].owner = mn;
                done = 1;
            }
        }
        int stop = 0;
        for (int j = 0; j < nj && !done && !stop; j++) { /* swap */
            if (jobs[j].owner != mx) continue;
            int k = 0;
            for (; k < nj && !done; k++) {
                int o = jobs[k].owner;
                double d = jobs[j].cost - jobs[k].cost;
                if (o == mx || d <= 1e-9) continue;
                if (load[o] + d < load[mx] - 1e-9) {
                    load[mx] -= d;
                    load[o] += d;
                    jobs[k].owner = mx;
                    jobs[j].owner = o;
                    done = 1;
                }
            }
            w += k;
            if (w > 1 << 22) { /* a long pass (many jobs): the clock is read within it too */
                sc_charge_search(ck, &w, NULL);
                stop = sc_over(ck);
            }
        }
        if (!done) break;
    }
    sc_charge_search(ck, &w, NULL);
    double ms = 0;
    for (int o = 0; o < p->nowners; o++) ms = fmax(ms, load[o]);
    return ms;
}

/* Count-based local search. The state is n[o][s], how many matrices of shape s owner o holds;
 * an owner batches each shape optimally (T[s][n] = cheapest split of n matrices into batches,
 * by dynamic programming), so load(o) = sum_s T[s][n[o][s]]. Moves: shift k matrices of one
 * shape off the most loaded owner, or swap one matrix each of two shapes with another owner,
 * whichever lowers the larger of the two loads the most, while that stays below the makespan. */
typedef struct cls {
    const sched_problem *p;
    int S, O;
    const int *count;
    btab bt;
    double **T; /* bt.T: T[s][0 .. count[s]] */
    int **first;/* bt.first: the first batch size of T's best split */
    int *n;     /* O x S */
    double *load;
} cls;

static void cls_free(cls *c)
{
    btab_free(&c->bt);
    free(c->n);
    free(c->load);
}

static int cls_init(cls *c, const sched_problem *p, const int *count, dm_err *err)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->S = p->n_shapes;
    c->O = p->nowners;
    c->count = count;
    if (btab_init(&c->bt, p, count, err) || !(c->n = dm_calloc((size_t)c->S * c->O, sizeof *c->n, err)) ||
        !(c->load = dm_calloc((size_t)c->O, sizeof *c->load, err)))
        return -1;
    c->T = c->bt.T;
    c->first = c->bt.first;
    return 0;
}

#define CN(c, o, s) ((c)->n[(size_t)(o) * (c)->S + (s)])

static void cls_loads(cls *c)
{
    for (int o = 0; o < c->O; o++) {
        c->load[o] = 0;
        for (int s = 0; s < c->S; s++) c->load[o] += c->T[s][CN(c, o, s)];
    }
}

/* Exact re-split of owner M's and one other owner's matrices: every division of their combined
 * counts (when there are at most `limit` divisions), the one with the smallest larger load.
 * Applies the best if it lowers that below load[M]; returns 1 if it did. */
static int cls_pair_opt(cls *c, int M, long limit, double *w, double *e)
{
    int S = c->S, *tot = malloc((size_t)S * sizeof *tot), *a = malloc((size_t)S * sizeof *a);
    int *best = malloc((size_t)S * sizeof *best), *idx = malloc((size_t)S * sizeof *idx);
    double bestv = c->load[M] - 1e-9 * fmax(1, c->load[M]);
    int besto = -1;
    if (!tot || !a || !best || !idx) goto out;
    for (int o = 0; o < c->O; o++) {
        if (o == M) continue;
        int ns = 0;
        long combos = 1;
        for (int s = 0; s < S; s++) {
            tot[s] = CN(c, M, s) + CN(c, o, s);
            if (tot[s]) {
                idx[ns++] = s;
                combos *= tot[s] + 1;
                if (combos > limit) break;
            }
        }
        *w += S;
        if (combos > limit) continue;
        *e += (double)combos * (ns + 1);
        for (int k = 0; k < ns; k++) a[k] = 0;
        for (;;) {
            double lm = 0, lo = 0;
            for (int k = 0; k < ns; k++) {
                int s = idx[k];
                lm += c->T[s][a[k]];
                lo += c->T[s][tot[s] - a[k]];
            }
            double v = fmax(lm, lo);
            if (v < bestv) {
                bestv = v;
                besto = o;
                for (int s = 0; s < S; s++) best[s] = 0;
                for (int k = 0; k < ns; k++) best[idx[k]] = a[k];
            }
            int k = 0;
            while (k < ns && ++a[k] > tot[idx[k]]) a[k++] = 0;
            if (k == ns) break;
        }
    }
    if (besto >= 0) {
        double lm = 0, lo = 0;
        for (int s = 0; s < S; s++) {
            int t = CN(c, M, s) + CN(c, besto, s);
            CN(c, M, s) = best[s];
            CN(c, besto, s) = t - best[s];
            lm += c->T[s][best[s]];
            lo += c->T[s][t - best[s]];
        }
        c->load[M] = lm;
        c->load[besto] = lo;
    }
out:
    free(tot);
    free(a);
    free(best);
    free(idx);
    return besto >= 0;
}

static double cls_search(cls *c, sclock *ck, long pair_limit)
{
    cls_loads(c);
    double w = (double)c->O * c->S, e = 0; /* entries scanned, moves evaluated since the last charge */
    int stop = 0;
    for (int iter = 0; iter < 20000 && !stop; iter++) {
        if ((iter & 15) == 0 || w + e > 1 << 22) {
            sc_charge_search(ck, &w, &e);
            if (sc_over(ck)) break;
        }
        w += c->O + 2 * c->S;
        int M = 0;
        for (int o = 1; o < c->O; o++)
            if (c->load[o] > c->load[M]) M = o;
        double best = c->load[M] - 1e-9 * fmax(1, c->load[M]);
        int bs = -1, bk = 0, bo = -1, bs2 = -1;
        for (int s = 0; s < c->S; s++) {
            int have = CN(c, M, s);
            for (int k = 1; k <= have; k++) {
                if (k > 64 && k != have) continue;
                double newM = c->load[M] - c->T[s][have] + c->T[s][have - k];
                w += 1;
                if (newM >= best) continue;
                e += c->O;
                for (int o = 0; o < c->O; o++) {
                    if (o == M) continue;
                    double newO = c->load[o] - c->T[s][CN(c, o, s)] + c->T[s][CN(c, o, s) + k];
                    double v = fmax(newM, newO);
                    if (v < best) {
                        best = v;
                        bs = s, bk = k, bo = o, bs2 = -1;
                    }
                }
            }
        }
        for (int s = 0; s < c->S && !stop; s++) { /* swaps of single matrices */
            int have = CN(c, M, s);
            if (!have) continue;
            w += (double)c->O * c->S;
            if (w + e > 1 << 22) { /* a long pass (many shapes and owners): the clock is read within it too */
                sc_charge_search(ck, &w, &e);
                stop = sc_over(ck);
            }
            for (int o = 0; o < c->O; o++) {
                if (o == M) continue;
                for (int s2 = 0; s2 < c->S; s2++) {
                    int h2 = CN(c, o, s2);
                    if (s2 == s || !h2) continue;
                    e++;
                    double newM = c->load[M] - c->T[s][have] + c->T[s][have - 1] - c->T[s2][CN(c, M, s2)] +
                                  c->T[s2][CN(c, M, s2) + 1];
                    double newO = c->load[o] - c->T[s2][h2] + c->T[s2][h2 - 1] - c->T[s][CN(c, o, s)] +
                                  c->T[s][CN(c, o, s) + 1];
                    double v = fmax(newM, newO);
                    if (v < best) {
                        best = v;
                        bs = s, bk = 1, bo = o, bs2 = s2;
                    }
                }
            }
        }
        if (stop) break; /* the pass was cut: its best move is not known */
        if (bs < 0) {
            if (pair_limit > 0 && cls_pair_opt(c, M, pair_limit, &w, &e)) continue;
            break;
        }
        CN(c, M, bs) -= bk;
        CN(c, bo, bs) += bk;
        if (bs2 >= 0) {
            CN(c, bo, bs2) -= 1;
            CN(c, M, bs2) += 1;
        }
        double lm = 0, lo = 0;
        for (int s = 0; s < c->S; s++) {
            lm += c->T[s][CN(c, M, s)];
            lo += c->T[s][CN(c, bo, s)];
        }
        c->load[M] = lm;
        c->load[bo] = lo;
    }
    sc_charge_search(ck, &w, &e);
    double ms = 0;
    for (int o = 0; o < c->O; o++) ms = fmax(ms, c->load[o]);
    return ms;
}

/* jobs from the counts: each (owner, shape) split by T's best batching */
static int cls_jobs(const cls *c, job *jobs)
{
    int nj = 0;
    for (int o = 0; o < c->O; o++)
        for (int s = 0; s < c->S; s++)
            for (int n = CN(c, o, s); n > 0;) {
                int b = c->first[s][n];
                jobs[nj++] = (job){s, b, o, cost_of(c->p, s, b)};
                n -= b;
            }
    return nj;
}

/* The best count-based local search from several starts: the LPT plan and LPT over jobs
 * batched at a ladder of caps. */
static int heuristic_jobs(const sched_problem *p, const int *count, const sched_assign *lpt, double lb, sclock *ck,
                          job *best, int *nbest, double *best_ms, int *cut, dm_err *err)
{
    job *jobs = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *jobs, err);
    double *load = dm_malloc((size_t)p->nowners * sizeof *load, err);
    int *bestn = dm_malloc((size_t)p->n_shapes * p->nowners * sizeof *bestn, err);
    cls c;
    int rc = -1;
    memset(&c, 0, sizeof c);
    if (!jobs || !load || !bestn || cls_init(&c, p, count, err)) goto done;
    *best_ms = INFINITY;
    *nbest = 0;
    for (int k = -2; k < 10 && (k == -2 || !sc_over(ck)); k++) { /* the first start always */
        memset(c.n, 0, (size_t)c.S * c.O * sizeof *c.n);
        if (k == -2) {
            for (int i = 0; i < p->n_items; i++) CN(&c, lpt->owner[i], p->items[i].shape)++;
        } else {
            int nj = make_jobs(p, count, k < 0 ? 0 : lb * 2 / (double)(1 << k), jobs);
            sc_charge(ck, SC_SCAN, (double)p->n_shapes * p->max_batch + nj);
            schedule_jobs(p, jobs, nj, load, ck);
            for (int j = 0; j < nj; j++) CN(&c, jobs[j].owner, jobs[j].shape) += jobs[j].size;
        }
        double ms = cls_search(&c, ck, 0);
        if (ms < *best_ms - 1e-9) {
            *best_ms = ms;
            memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
        }
    }
    /* iterated local search: perturb the best counts (a few random single-matrix moves, fixed
     * seed so the plan is reproducible) and search again; keep improvements */
    unsigned seed = 0x9e3779b9u;
    for (int round = 0; round < 200 && !sc_over(ck) && *best_ms > lb * (1 + 1e-4); round++) {
        memcpy(c.n, bestn, (size_t)c.S * c.O * sizeof *c.n);
        int moves = 2 + round % 6;
        for (int mv = 0; mv < moves; mv++) {
            seed = seed * 1664525u + 1013904223u;
            int o = (int)((seed >> 8) % (unsigned)c.O);
            if (mv == 0) { /* the first move always takes from a most loaded owner */
                cls_loads(&c);
                for (int w = 0; w < c.O; w++)
                    if (c.load[w] > c.load[o]) o = w;
            }
            seed = seed * 1664525u + 1013904223u;
            int s = (int)((seed >> 8) % (unsigned)c.S);
            seed = seed * 1664525u + 1013904223u;
            int o2 = (int)((seed >> 8) % (unsigned)c.O);
            if (CN(&c, o, s) > 0 && o2 != o) {
                CN(&c, o, s)--;
                CN(&c, o2, s)++;
            }
        }
        double ms = cls_search(&c, ck, 0);
        if (ms < *best_ms - 1e-9) {
            *best_ms = ms;
            memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
        }
    }
    /* polish the best with exact pair re-splits */
    memcpy(c.n, bestn, (size_t)c.S * c.O * sizeof *c.n);
    double polished = cls_search(&c, ck, 20000);
    if (polished < *best_ms - 1e-9) {
        *best_ms = polished;
        memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
    }
    *cut = sc_over(ck);
    memcpy(c.n, bestn, (size_t)c.S * c.O * sizeof *c.n);
    *nbest = cls_jobs(&c, best);
    rc = 0;
done:
    cls_free(&c);
    free(jobs);
    free(load);
    free(bestn);
    return rc;
}

/* ---- communication-aware realization and the split search ---------------------------------- */

/* Batches from owners: each owner's matrices of a shape (latest layer first) split by T's
 * cheapest batching; then the loads, the makespan and the objective. */
static int batch_owned(const sched_problem *p, const btab *bt, sched_assign *a, dm_err *err)
{
    int *order = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *order, err);
    if (!order) return -1;
    for (int i = 0; i < p->n_items; i++) order[i] = i;
    const void *ctx[2] = {p, a};
    qsort_r(order, (size_t)p->n_items, sizeof *order, cmp_owner_shape, (void *)ctx);
    for (int o = 0; o < p->nowners; o++) a->load_us[o] = 0;
    a->n_batches = 0;
    for (int i = 0; i < p->n_items;) {
        int j = i, o = a->owner[order[i]], s = p->items[order[i]].shape;
        while (j < p->n_items && a->owner[order[j]] == o && p->items[order[j]].shape == s) j++;
        a->load_us[o] += bt->T[s][j - i];
        for (int rem = j - i, k = i; rem > 0;) {
            int b = bt->first[s][rem];
            for (int q = 0; q < b; q++) a->batch_of[order[k++]] = a->n_batches;
            a->n_batches++;
            rem -= b;
        }
        i = j;
    }
    free(order);
    set_makespan(p, a);
    return sched_assign_score(p, a, err);
}

/* The items by (layer, shape), in item order: take() hands out the next unowned one. */
typedef struct grid {
    int L, S;
    int *start; /* L x S + 1 */
    int *list;  /* n_items */
    int *next;  /* L x S: next position to hand out */
} grid;

static void grid_free(grid *g)
{
    free(g->start);
    free(g->list);
    free(g->next);
    memset(g, 0, sizeof *g);
}

static int grid_init(grid *g, const sched_problem *p, dm_err *err)
{
    memset(g, 0, sizeof *g);
    g->L = n_layers_of(p);
    g->S = p->n_shapes;
    size_t cells = (size_t)g->L * g->S;
    if (!(g->start = dm_calloc(cells + 1, sizeof *g->start, err)) ||
        !(g->list = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *g->list, err)) ||
        !(g->next = dm_malloc((cells ? cells : 1) * sizeof *g->next, err))) {
        grid_free(g);
        return -1;
    }
    for (int i = 0; i < p->n_items; i++) g->start[(size_t)layer_of(p, i) * g->S + p->items[i].shape + 1]++;
    for (size_t c = 0; c < cells; c++) g->start[c + 1] += g->start[c];
    for (size_t c = 0; c < cells; c++) g->next[c] = g->start[c];
    for (int i = 0; i < p->n_items; i++) g->list[g->next[(size_t)layer_of(p, i) * g->S + p->items[i].shape]++] = i;
    for (size_t c = 0; c < cells; c++) g->next[c] = g->start[c];
    return 0;
}

static int grid_avail(const grid *g, int l, int s) { return g->start[(size_t)l * g->S + s + 1] - g->next[(size_t)l * g->S + s]; }
static int grid_take(grid *g, int l, int s) { return g->list[g->next[(size_t)l * g->S + s]++]; }

/* Matrices from counts n[o x S] (owner o holds n[o][s] of shape s) with few (layer, owner)
 * pairs: owners by decreasing NS load, each taking, layer after layer, the layer that covers
 * most of what it still needs (ties: the layer left with the fewest matrices, then the lowest). */
static int realize_counts(const sched_problem *p, const btab *bt, const int *n, sched_assign *a, dm_err *err)
{
    int S = p->n_shapes, O = p->nowners, rc = -1;
    grid g;
    memset(&g, 0, sizeof g);
    int *ord = dm_malloc((size_t)O * sizeof *ord, err), *need = dm_malloc((size_t)(S ? S : 1) * sizeof *need, err);
    double *load = dm_calloc((size_t)O, sizeof *load, err);
    if (!ord || !need || !load || assign_alloc(p, a, err) || grid_init(&g, p, err)) goto done;
    for (int o = 0; o < O; o++) {
        ord[o] = o;
        for (int s = 0; s < S; s++) load[o] += bt->T[s][n[(size_t)o * S + s]];
    }
    for (int i = 1; i < O; i++) { /* insertion sort: by load, descending; stable */
        int x = ord[i], j = i;
        while (j > 0 && load[ord[j - 1]] < load[x]) ord[j] = ord[j - 1], j--;
        ord[j] = x;
    }
    for (int k = 0; k < O; k++) {
        int o = ord[k];
        long tot = 0;
        for (int s = 0; s < S; s++) tot += need[s] = n[(size_t)o * S + s];
        while (tot > 0) {
            int bl = -1;
            long bc = 0, br = 0;
            for (int l = 0; l < g.L; l++) {
                long cover = 0, av = 0;
                for (int s = 0; s < S; s++) {
                    int x = grid_avail(&g, l, s);
                    av += x;
                    cover += need[s] < x ? need[s] : x;
                }
                if (cover && (cover > bc || (cover == bc && av - cover < br))) bl = l, bc = cover, br = av - cover;
            }
            if (bl < 0) {
                dm_err_set(err, "assign: owner %d's counts exceed the matrices left", o);
                goto done;
            }
            for (int s = 0; s < S; s++) {
                int take = grid_avail(&g, bl, s) < need[s] ? grid_avail(&g, bl, s) : need[s];
                for (int q = 0; q < take; q++) a->owner[grid_take(&g, bl, s)] = o;
                need[s] -= take;
                tot -= take;
            }
        }
    }
    for (int l = 0; l < g.L; l++)
        for (int s = 0; s < S; s++)
            if (grid_avail(&g, l, s)) {
                dm_err_set(err, "assign: counts leave matrices of layer %d unowned", l);
                goto done;
            }
    rc = batch_owned(p, bt, a, err);
done:
    if (rc) sched_assign_free(a);
    grid_free(&g);
    free(ord);
    free(need);
    free(load);
    return rc;
}

/* Layer classes: layers holding the same count of each shape. */
typedef struct lclass {
    int n;     /* classes */
    int L, S;
    int *of;   /* L: class of a layer, -1 for a layer without Muon matrices */
    int *vec;  /* n x S: matrices of each shape in one layer of the class */
    int *size; /* n: layers in the class */
    int *nmat; /* n: matrices in one layer */
} lclass;

static void lclass_free(lclass *c)
{
    free(c->of);
    free(c->vec);
    free(c->size);
    free(c->nmat);
    memset(c, 0, sizeof *c);
}

static int lclass_init(lclass *c, const sched_problem *p, dm_err *err)
{
    memset(c, 0, sizeof *c);
    c->L = n_layers_of(p);
    c->S = p->n_shapes;
    size_t LS = (size_t)c->L * (c->S ? c->S : 1);
    int *lv = dm_calloc(LS, sizeof *lv, err);
    if (!lv || !(c->of = dm_malloc((size_t)c->L * sizeof *c->of, err)) || !(c->vec = dm_calloc(LS, sizeof *c->vec, err)) ||
        !(c->size = dm_calloc((size_t)c->L, sizeof *c->size, err)) || !(c->nmat = dm_calloc((size_t)c->L, sizeof *c->nmat, err))) {
        free(lv);
        lclass_free(c);
        return -1;
    }
    for (int i = 0; i < p->n_items; i++) lv[(size_t)layer_of(p, i) * c->S + p->items[i].shape]++;
    for (int l = 0; l < c->L; l++) {
        const int *v = lv + (size_t)l * c->S;
        int tot = 0, k;
        for (int s = 0; s < c->S; s++) tot += v[s];
        c->of[l] = -1;
        if (!tot) continue;
        for (k = 0; k < c->n && memcmp(c->vec + (size_t)k * c->S, v, (size_t)c->S * sizeof *v); k++)
            ;
        if (k == c->n) {
            memcpy(c->vec + (size_t)k * c->S, v, (size_t)c->S * sizeof *v);
            c->nmat[k] = tot;
            c->n++;
        }
        c->of[l] = k;
        c->size[k]++;
    }
    free(lv);
    return 0;
}

/* One layer of a class cut into k parts (parts: k x S counts) of near-equal NS cost: matrices
 * costliest first (sorder: the shapes by single-matrix cost, descending), each to the part
 * whose cost rises least (T's batching inside a part). */
static void split_layer(const sched_problem *p, const btab *bt, const int *sorder, const int *vec, int k, int *parts,
                        double *pcost)
{
    int S = p->n_shapes;
    memset(parts, 0, (size_t)k * S * sizeof *parts);
    for (int j = 0; j < k; j++) pcost[j] = 0;
    for (int t = 0; t < S; t++) {
        int s = sorder[t];
        for (int m = 0; m < vec[s]; m++) {
            int best = 0;
            double bv = INFINITY;
            for (int j = 0; j < k; j++) {
                int have = parts[(size_t)j * S + s];
                double v = pcost[j] + bt->T[s][have + 1] - bt->T[s][have];
                if (less(v, bv)) best = j, bv = v;
            }
            parts[(size_t)best * S + s]++;
            pcost[best] = bv;
        }
    }
}

typedef struct sunit {
    int layer, part;
    double cost, elems;
} sunit;

static int cmp_sunit(const void *x, const void *y)
{
    const sunit *a = x, *b = y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return (a->part > b->part) - (a->part < b->part);
}

/* The plan for part counts k[class]: every layer cut by split_layer, the parts placed by the
 * objective's greedy step, batched per owner. */
static int split_eval(const sched_problem *p, const btab *bt, const lclass *lc, const int *k, double target_us, sched_assign *a,
                      dm_err *err)
{
    int S = p->n_shapes, rc = -1, kmax = 1, nu = 0;
    for (int c = 0; c < lc->n; c++) kmax = k[c] > kmax ? k[c] : kmax;
    int *parts = dm_malloc((size_t)(lc->n ? lc->n : 1) * kmax * (S ? S : 1) * sizeof *parts, err);
    double *pcost = dm_malloc((size_t)(lc->n ? lc->n : 1) * kmax * sizeof *pcost, err);
    sunit *u = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *u, err);
    int *sorder = dm_malloc((size_t)(S ? S : 1) * sizeof *sorder, err);
    grid g;
    placer pl;
    memset(&g, 0, sizeof g);
    memset(&pl, 0, sizeof pl);
    if (!parts || !pcost || !u || !sorder || assign_alloc(p, a, err) || grid_init(&g, p, err) ||
        placer_init(&pl, p, target_us, err))
        goto done;
    for (int i = 0; i < S; i++) { /* shapes by single-matrix cost, descending; stable */
        int j = i;
        while (j > 0 && cost_of(p, sorder[j - 1], 1) < cost_of(p, i, 1)) sorder[j] = sorder[j - 1], j--;
        sorder[j] = i;
    }
    for (int c = 0; c < lc->n; c++)
        split_layer(p, bt, sorder, lc->vec + (size_t)c * S, k[c], parts + (size_t)c * kmax * S, pcost + (size_t)c * kmax);
    for (int l = 0; l < lc->L; l++) {
        int c = lc->of[l];
        if (c < 0) continue;
        for (int j = 0; j < k[c]; j++) {
            const int *pv = parts + ((size_t)c * kmax + j) * S;
            double e = 0;
            int nm = 0;
            for (int s = 0; s < S; s++) e += pv[s] * elems_of(p, s), nm += pv[s];
            if (nm) u[nu++] = (sunit){l, j, pcost[(size_t)c * kmax + j], e};
        }
    }
    if (nu > 1) qsort(u, (size_t)nu, sizeof *u, cmp_sunit);
    for (int i = 0; i < nu; i++) {
        int o = placer_put(&pl, u[i].layer, u[i].cost, u[i].elems), c = lc->of[u[i].layer];
        const int *pv = parts + ((size_t)c * kmax + u[i].part) * S;
        for (int s = 0; s < S; s++)
            for (int q = 0; q < pv[s]; q++) a->owner[grid_take(&g, u[i].layer, s)] = o;
    }
    a->n_units = nu;
    rc = batch_owned(p, bt, a, err);
done:
    if (rc) sched_assign_free(a);
    placer_free(&pl);
    grid_free(&g);
    free(parts);
    free(pcost);
    free(u);
    free(sorder);
    return rc;
}

/* What split_eval weighs for part counts k (the search clock's SC_SPLIT units): each matrix of a
 * class's layer against its k parts, each part's shapes, the owners and the sort of the items. */
static double split_units(const sched_problem *p, const lclass *lc, const int *k)
{
    double n = p->n_items, u = n * log2(n + 2) + p->nowners + (double)lc->L * lc->S;
    for (int c = 0; c < lc->n; c++) u += (double)k[c] * (lc->nmat[c] + (double)lc->size[c] * lc->S);
    return u;
}

/* Coordinate descent over the part counts of each layer class (1 part: one owner per layer),
 * from the counts the objective's bound suggests (ceil(W / M) for a layer of NS work W, M the
 * makespan where sched_comm_bound is reached) and from one part everywhere, over a ladder of
 * counts, until a round changes nothing or the deadline passes. *best: the lowest objective
 * found (allocated here). */
static int split_search(const sched_problem *p, const btab *bt, const lclass *lc, const int *count, sclock *ck,
                        sched_assign *best, int *cut, dm_err *err)
{
    static const int ladder[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024};
    int *k = dm_malloc((size_t)(lc->n ? lc->n : 1) * sizeof *k, err);
    sched_assign cand;
    memset(best, 0, sizeof *best);
    memset(&cand, 0, sizeof cand);
    *cut = 0;
    if (!k) return -1;
    double target = lpt_target(p);
    double *per = dm_malloc((size_t)(p->n_shapes ? p->n_shapes : 1) * sizeof *per, err);
    int *k1 = dm_malloc((size_t)(lc->n ? lc->n : 1) * sizeof *k1, err);
    if (!per || !k1) {
        free(k);
        free(per);
        free(k1);
        return -1;
    }
    per_matrix_cost(p, count, per);
    for (int c = 0; c < lc->n; c++) {
        double W = 0;
        for (int s = 0; s < p->n_shapes; s++) W += lc->vec[(size_t)c * p->n_shapes + s] * per[s];
        int kmax = lc->nmat[c] < p->nowners ? lc->nmat[c] : p->nowners, kb = (int)ceil(W / target * (1 - 1e-12));
        k[c] = kb < 1 ? 1 : kb > kmax ? kmax : kb;
        k1[c] = 1;
    }
    free(per);
    sc_charge(ck, SC_SPLIT, split_units(p, lc, k));
    int rc = split_eval(p, bt, lc, k, target, best, err);
    if (rc == 0 && !sc_over(ck) && memcmp(k, k1, (size_t)lc->n * sizeof *k)) {
        sc_charge(ck, SC_SPLIT, split_units(p, lc, k1));
        rc = split_eval(p, bt, lc, k1, target, &cand, err);
        if (rc == 0 && less(cand.objective_us, best->objective_us)) {
            sched_assign_free(best);
            *best = cand;
            memcpy(k, k1, (size_t)lc->n * sizeof *k);
        } else {
            sched_assign_free(&cand);
        }
        memset(&cand, 0, sizeof cand);
    }
    free(k1);
    if (rc) {
        free(k);
        sched_assign_free(best);
        return -1;
    }
    for (int round = 0; round < 4 && !*cut; round++) {
        int changed = 0;
        for (int c = 0; c < lc->n && !*cut; c++) {
            int kmax = lc->nmat[c] < p->nowners ? lc->nmat[c] : p->nowners, bestk = k[c];
            for (size_t i = 0; i < sizeof ladder / sizeof ladder[0] && ladder[i] <= kmax; i++) {
                if (ladder[i] == bestk) continue;
                if (sc_over(ck)) {
                    *cut = 1;
                    break;
                }
                k[c] = ladder[i];
                sc_charge(ck, SC_SPLIT, split_units(p, lc, k));
                if (split_eval(p, bt, lc, k, target, &cand, err)) {
                    free(k);
                    sched_assign_free(best);
                    return -1;
                }
                if (less(cand.objective_us, best->objective_us)) {
                    sched_assign_free(best);
                    *best = cand;
                    bestk = ladder[i];
                    changed = 1;
                } else {
                    sched_assign_free(&cand);
                }
                memset(&cand, 0, sizeof cand);
            }
            k[c] = bestk;
        }
        if (!changed) break;
    }
    free(k);
    best->method = "split search";
    return 0;
}

/* ---- MILP ---------------------------------------------------------------------------------- */

typedef struct milp_ctx {
    sclock *ck;
    double cols, nnz;  /* the model's columns and nonzeros */
    long long iters, bswaps; /* lp_solve's iterations and bound swaps charged so far */
} milp_ctx;

/* lp_solve's abort poll (about two per iteration): charge its iterations since the last poll
 * (a pivot costs about a pass over the model's nonzeros, a bound swap over its columns), stop
 * when the time is spent. The counts are lp_solve's own (its iteration count includes the
 * bound swaps, which lprec counts apart) */
static int __WINAPI milp_abort(lprec *lp, void *h)
{
    milp_ctx *m = h;
    long long it = get_total_iter(lp), bs = (long long)(lp->total_bswap + lp->current_bswap);
    if (bs > it) bs = it;
    sc_charge(m->ck, SC_PIVOT, (double)((it - bs) - (m->iters - m->bswaps)) * m->nnz);
    sc_charge(m->ck, SC_BSWAP, (double)(bs - m->bswaps) * m->cols);
    m->iters = it;
    m->bswaps = bs;
    return sc_over(m->ck);
}

enum { MENU_MAX = 32, MILP_SKIPPED = -100, MILP_NO_TIME = -101, MILP_FAILED = -102 /* out of memory: err */ };

/* Batch sizes the MILP may use for a shape with `count` matrices: every size up to
 * min(count, max_batch) when that is at most MENU_MAX (so the model holds every plan, and its
 * proofs hold for any batching); else a ladder plus the sizes the warm-start plan uses (so that
 * plan is a point of the model). */
static int batch_menu(int count, int max_batch, const unsigned char *used, int *menu)
{
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024};
    int n = 0, cap = max_batch < count ? max_batch : count;
    if (cap <= MENU_MAX) {
        for (int b = 1; b <= cap; b++) menu[n++] = b;
        return n;
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= cap && n < MENU_MAX) menu[n++] = sizes[i];
    for (int b = 1; used && b <= cap && b <= 1024; b++) {
        if (!used[b]) continue;
        int k = 0;
        while (k < n && menu[k] < b) k++;
        if ((k < n && menu[k] == b) || n == MENU_MAX) continue;
        memmove(menu + k + 1, menu + k, (size_t)(n - k) * sizeof *menu);
        menu[k] = b;
        n++;
    }
    return n;
}

typedef struct milp_in {
    const int *count;        /* matrices per shape */
    const lclass *lc;        /* layer classes: the communication part (y); NULL: none */
    double lb_L, ub_L;       /* bounds on L, the largest owner chain */
    double upper_J;          /* with lc: L + pair_us x sum y must stay below it (the cut-off) */
    double break_J;          /* stop at a plan this good */
    const sched_assign *inc; /* the best plan so far: the warm start (may be NULL) */
    sclock *ck;              /* its phase ends at the whole limit */
    int verbose;
} milp_in;

/* Solve the aggregate model (sched.h, sched_assign_milp). Returns the lp_solve status; on a
 * solution fills jobs/nj (batches: shape, size, owner) and *model_J (its L + pair_us x sum y). */
static int solve_milp(const sched_problem *p, const milp_in *in, job *jobs, int *nj, double *model_J, int *nvars,
                      int *warm, int *complete, dm_err *err)
{
    const int *count = in->count;
    const lclass *lc = in->lc;
    int S = p->n_shapes, O = p->nowners, C = lc ? lc->n : 0, ret = MILP_FAILED; /* (err) until solved or out of time */
    lprec *lp = NULL;
    int *menus = dm_calloc((size_t)(S ? S : 1) * MENU_MAX, sizeof *menus, err);
    int *n_menu = dm_calloc((size_t)(S ? S : 1), sizeof *n_menu, err);
    int *off = dm_calloc((size_t)(S ? S : 1), sizeof *off, err);
    unsigned char *used = dm_calloc((size_t)(S ? S : 1) * 1025, 1, err);
    int *colno = NULL, *basis = NULL, *bsize = NULL, *bown = NULL, *bshape = NULL, *perm = NULL;
    double *row = NULL, *vars = NULL, *guess = NULL, *chain = NULL;
    *nj = 0;
    *warm = 0;
    if (!menus || !n_menu || !off || !used) goto done;
    const sched_assign *inc = in->inc;
    if (inc) { /* the warm-start plan's batches */
        size_t nb = (size_t)(inc->n_batches ? inc->n_batches : 1);
        if (!(bsize = dm_calloc(nb, sizeof *bsize, err)) || !(bown = dm_malloc(nb * sizeof *bown, err)) ||
            !(bshape = dm_malloc(nb * sizeof *bshape, err)))
            goto done;
        for (int i = 0; i < p->n_items; i++) {
            int b = inc->batch_of[i];
            bsize[b]++;
            bown[b] = inc->owner[i];
            bshape[b] = p->items[i].shape;
        }
        for (int b = 0; b < inc->n_batches; b++)
            if (bsize[b] <= 1024) used[(size_t)bshape[b] * 1025 + bsize[b]] = 1;
    }
    int nx = 0;
    *complete = 1;
    for (int s = 0; s < S; s++) {
        n_menu[s] = batch_menu(count[s], p->max_batch, used + (size_t)s * 1025, &menus[s * MENU_MAX]);
        if (count[s] && n_menu[s] < (p->max_batch < count[s] ? p->max_batch : count[s])) *complete = 0;
        off[s] = nx;
        nx += n_menu[s] * O;
    }
    int ncols = 1 + nx + C * O; /* column 1 = L, x[s][k][o] at 2 + off[s] + k * O + o, y[c][o] after */
    *nvars = ncols - 1;
    /* The build's time goes with the nonzeros it adds (the objective, the cover and layer rows,
     * an owner's shape rows, the chains in pairs). A model is built only when the time left
     * covers the build, lp_solve's start and a pivot per owner: where lp_solve ended its search
     * it took 0.9-2.4 pivots per owner (pi0.5 at 1024 GPUs, 30 s; Llama-3.1-8B, Moonlight-16B at
     * 256), and where it stopped short of that it timed out with nothing (every dense model at
     * 1024 GPUs in 1 s, traces/sched/milp-clock-2026-12-07): else the time would go to a model
     * lp_solve has no time to solve */
    double nnz = ncols + nx + 3.0 * C * O + 2.0 * nx, rows = S + C + 2.0 * O + 1;
    for (int s = 0; s < S && C; s++) {
        for (int c = 0; c < C; c++) nnz += lc->vec[(size_t)c * S + s] ? O : 0;
        rows += O;
    }
    if (C) nnz += nx;
    double added = 0, addedq = 0, built = 0; /* nonzeros added and not yet charged; the quadratic part; all added */
    sclock *ck = in->ck;
    double need = nnz * sc_rate[SC_BUILD] + nnz * rows / 2 * sc_rate[SC_BUILDQ] + nnz * sc_rate[SC_START] +
                  (double)O * nnz * sc_rate[SC_PIVOT];
    if (ck->until - ck->spent < need + 0.005 || sc_over(ck)) {
        ret = MILP_NO_TIME;
        goto done;
    }
#define XCOL(s, k, o) (2 + off[s] + (k) * O + (o))
#define YCOL(c, o) (2 + nx + (c) * O + (o))
    if (!(lp = make_lp(0, ncols))) {
        dm_err_set(err, "milp: lp_solve could not create a model with %d columns", ncols);
        goto done;
    }
    if (!(colno = dm_malloc((size_t)(ncols + 1) * sizeof *colno, err)) ||
        !(row = dm_malloc((size_t)(ncols + 1) * sizeof *row, err)) ||
        !(vars = dm_malloc((size_t)(ncols + 1) * sizeof *vars, err)))
        goto done;
    set_verbose(lp, in->verbose ? NORMAL : NEUTRAL);
    set_add_rowmode(lp, TRUE);
    double eps = 1e-4 / O; /* objective L (+ pair_us x sum y) + eps x total work: the first dominates */
    int nz = 0;
    colno[nz] = 1;
    row[nz++] = 1;
    for (int s = 0; s < S; s++)
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < O; o++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = eps * cost_of(p, s, menus[s * MENU_MAX + k]);
            }
    for (int c = 0; c < C; c++)
        for (int o = 0; o < O; o++) {
            colno[nz] = YCOL(c, o);
            row[nz++] = p->pair_us;
        }
    set_obj_fnex(lp, nz, row, colno);
    added += nz;
    built += nz;
    set_minim(lp);
#define ADD_ROW(n, kind, rhs) (addedq += built, added += (n), built += (n), add_constraintex(lp, (n), row, colno, (kind), (rhs)))
    for (int s = 0; s < S; s++) { /* every matrix covered */
        if (!count[s]) continue;
        nz = 0;
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < O; o++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = menus[s * MENU_MAX + k];
            }
        ADD_ROW(nz, EQ, count[s]);
    }
    for (int c = 0; c < C; c++) { /* every layer touched by some owner */
        nz = 0;
        for (int o = 0; o < O; o++) {
            colno[nz] = YCOL(c, o);
            row[nz++] = 1;
        }
        ADD_ROW(nz, GE, lc->size[c]);
    }
    /* the build stops when the time is spent (the estimate above lets it start, these checks end
     * it in time) */
#define BUILD_LATE(o) \
    ((o) % 32 == 31 && (sc_charge(ck, SC_BUILD, added), sc_charge(ck, SC_BUILDQ, addedq), added = addedq = 0, sc_over(ck)))
    for (int o = 0; o < O && C; o++) { /* an owner's matrices of a shape need enough touched layers */
        if (BUILD_LATE(o)) {
            ret = MILP_NO_TIME;
            goto done;
        }
        for (int s = 0; s < S; s++) {
            if (!count[s]) continue;
            nz = 0;
            for (int k = 0; k < n_menu[s]; k++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = menus[s * MENU_MAX + k];
            }
            for (int c = 0; c < C; c++)
                if (lc->vec[(size_t)c * S + s]) {
                    colno[nz] = YCOL(c, o);
                    row[nz++] = -lc->vec[(size_t)c * S + s];
                }
            ADD_ROW(nz, LE, 0);
        }
    }
    for (int o = 0; o < O; o++) { /* chain(o) <= L; chain(o) >= chain(o+1) (symmetry) */
        if (BUILD_LATE(o)) {
            ret = MILP_NO_TIME;
            goto done;
        }
        for (int q = o; q <= o + 1 && q < O; q++) {
            double sign = q == o ? 1 : -1;
            if (q == o) nz = 0;
            for (int s = 0; s < S; s++)
                for (int k = 0; k < n_menu[s]; k++) {
                    int b = menus[s * MENU_MAX + k];
                    colno[nz] = XCOL(s, k, q);
                    row[nz++] = sign * (cost_of(p, s, b) + b * elems_of(p, s) * p->owner_elem_us);
                }
            for (int c = 0; c < C; c++) {
                colno[nz] = YCOL(c, q);
                row[nz++] = sign * p->owner_pair_us;
            }
            if (q == o) {
                colno[nz] = 1;
                row[nz] = -1;
                ADD_ROW(nz + 1, LE, 0);
            }
        }
        if (o + 1 < O) ADD_ROW(nz, GE, 0);
    }
    int cut_row = 0;
    if (C) { /* the cut-off: strictly better than the plan in hand (at the plan's own value until
                the warm start's basis is made, then tightened) */
        nz = 0;
        colno[nz] = 1;
        row[nz++] = 1;
        for (int c = 0; c < C; c++)
            for (int o = 0; o < O; o++) {
                colno[nz] = YCOL(c, o);
                row[nz++] = p->pair_us;
            }
        ADD_ROW(nz, LE, inc ? fmax(in->upper_J, inc->objective_us * (1 + 1e-9)) : in->upper_J);
        cut_row = get_Nrows(lp);
    }
    set_add_rowmode(lp, FALSE);
#undef BUILD_LATE
#undef ADD_ROW
    sc_charge(ck, SC_BUILD, added);
    sc_charge(ck, SC_BUILDQ, addedq);
    if (ck->log)
        fprintf(stderr, "milp-build rows %d columns %d nonzeros %d wall %.4f s\n", get_Nrows(lp), ncols, get_nonzeros(lp),
                sched_wall_s() - ck->phase_wall);
    if (sc_over(ck)) {
        ret = MILP_NO_TIME;
        goto done;
    }
    set_lowbo(lp, 1, in->lb_L);
    set_upbo(lp, 1, inc ? fmax(in->ub_L, inc->objective_us * (1 + 1e-9)) : in->ub_L);
    for (int s = 0; s < S; s++)
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < O; o++) {
                set_int(lp, XCOL(s, k, o), TRUE);
                set_upbo(lp, XCOL(s, k, o), count[s] / menus[s * MENU_MAX + k]);
            }
    for (int c = 0; c < C; c++)
        for (int o = 0; o < O; o++) {
            set_int(lp, YCOL(c, o), TRUE);
            set_upbo(lp, YCOL(c, o), lc->size[c]);
        }
    /* warm start: the plan in hand, owners by chain (descending, as the symmetry rows want), as
     * the starting basis. guess_basis grows about quadratically (0.02 s at 6.5k columns, 0.33 s
     * at 26k, 1.4 s at 52k on the build machine) and did not pay above ~8k columns (measured on
     * the bundled models): only below that. The cut-off row is the warm start's other half. */
    if (inc && ncols <= 8192) {
        int nrows = get_Nrows(lp);
        if (!(guess = dm_calloc((size_t)ncols + 1, sizeof *guess, err)) ||
            !(basis = dm_calloc((size_t)nrows + ncols + 1, sizeof *basis, err)) ||
            !(perm = dm_malloc((size_t)O * 2 * sizeof *perm, err)) || !(chain = dm_calloc((size_t)O, sizeof *chain, err)))
            goto done;
        int *rank = perm + O;
        int L = n_layers_of(p);
        unsigned char *has = dm_calloc((size_t)O * L, 1, err);
        if (!has) goto done;
        for (int o = 0; o < O; o++) chain[o] = inc->load_us[o];
        for (int i = 0; i < p->n_items; i++) {
            int o = inc->owner[i], l = layer_of(p, i);
            chain[o] += elems_of(p, p->items[i].shape) * p->owner_elem_us;
            if (!has[(size_t)o * L + l]) {
                has[(size_t)o * L + l] = 1;
                chain[o] += p->owner_pair_us;
            }
        }
        for (int o = 0; o < O; o++) perm[o] = o;
        for (int i = 1; i < O; i++) {
            int x = perm[i], j = i;
            while (j > 0 && chain[perm[j - 1]] < chain[x]) perm[j] = perm[j - 1], j--;
            perm[j] = x;
        }
        for (int r = 0; r < O; r++) rank[perm[r]] = r;
        double mx = 0;
        for (int o = 0; o < O; o++) mx = fmax(mx, chain[o]);
        guess[1] = mx;
        for (int b = 0; b < inc->n_batches; b++) {
            int s = bshape[b], k = 0;
            while (k < n_menu[s] && menus[s * MENU_MAX + k] != bsize[b]) k++;
            if (k < n_menu[s]) guess[XCOL(bshape[b], k, rank[bown[b]])] += 1;
        }
        for (int l = 0; l < L && C; l++)
            if (lc->of[l] >= 0)
                for (int o = 0; o < O; o++)
                    if (has[(size_t)o * L + l]) guess[YCOL(lc->of[l], rank[o])] += 1;
        free(has);
        /* guess_basis reads the basis vector it fills (lp_solve 5.5.2.5): it starts zeroed */
        sc_charge(ck, SC_BASIS, (double)ncols * ncols);
        if (guess_basis(lp, guess, basis) && set_basis(lp, basis, TRUE)) *warm = 1;
        set_upbo(lp, 1, in->ub_L); /* now cut off the plan itself */
        if (cut_row) set_rh(lp, cut_row, in->upper_J);
    }
    /* the build took the time: lp_solve's start alone (a pass of factorizing and pricing over the
     * nonzeros) would not fit with room for pivots after it */
    if (ck->until - ck->spent < 1.5 * sc_rate[SC_START] * get_nonzeros(lp) + 0.005 || sc_over(ck)) {
        ret = MILP_NO_TIME;
        goto done;
    }
    sc_phase_end(ck, "build");
    milp_ctx ctx = {ck, ncols, get_nonzeros(lp), 0, 0};
    sc_charge(ck, SC_START, ctx.nnz);
    put_abortfunc(lp, milp_abort, &ctx);
    double left = ck->wall_cap - sched_wall_s();
    set_timeout(lp, (long)ceil(left > 1 ? left : 1)); /* whole seconds, the ceiling; the abort poll ends the search */
    set_mip_gap(lp, FALSE, 1e-4);
    set_mip_gap(lp, TRUE, 1e-6);
    set_break_at_value(lp, in->break_J);
    set_bb_floorfirst(lp, BRANCH_CEILING);
    ret = solve(lp);
    if (ck->log)
        fprintf(stderr, "milp-lp iterations %lld (bound swaps %lld) nodes %lld, model %d columns %d rows %d nonzeros\n",
                get_total_iter(lp), ctx.bswaps, get_total_nodes(lp), get_Ncolumns(lp), get_Nrows(lp), get_nonzeros(lp));
    if (ret == OPTIMAL || ret == SUBOPTIMAL || ret == PRESOLVED) {
        get_variables(lp, vars);
        *model_J = vars[0];
        for (int c = 0; c < C; c++)
            for (int o = 0; o < O; o++) *model_J += p->pair_us * vars[YCOL(c, o) - 1];
        for (int s = 0; s < S; s++)
            for (int k = 0; k < n_menu[s]; k++)
                for (int o = 0; o < O; o++) {
                    long cnt = lround(vars[XCOL(s, k, o) - 1]);
                    int b = menus[s * MENU_MAX + k];
                    for (long q = 0; q < cnt; q++) jobs[(*nj)++] = (job){s, b, o, cost_of(p, s, b)};
                }
    }
#undef XCOL
#undef YCOL
done:
    if (lp) delete_lp(lp);
    free(menus);
    free(n_menu);
    free(off);
    free(used);
    free(colno);
    free(row);
    free(vars);
    free(guess);
    free(basis);
    free(bsize);
    free(bown);
    free(bshape);
    free(perm);
    free(chain);
    return ret;
}

/* Counts per owner and shape from jobs, turned into matrices with few pairs. */
static int realize_jobs_comm(const sched_problem *p, const btab *bt, const job *jobs, int nj, sched_assign *a, dm_err *err)
{
    int *n = dm_calloc((size_t)p->nowners * (p->n_shapes ? p->n_shapes : 1), sizeof *n, err);
    if (!n) return -1;
    for (int j = 0; j < nj; j++) n[(size_t)jobs[j].owner * p->n_shapes + jobs[j].shape] += jobs[j].size;
    int rc = realize_counts(p, bt, n, a, err);
    free(n);
    return rc;
}

/* Jobs into a plan: round-robin dealing over the owners without communication terms (the plan
 * before issue 16), few pairs with them. */
static int jobs_to_plan(const sched_problem *p, const btab *bt, const job *jobs, int nj, sched_assign *a, dm_err *err)
{
    if (has_comm(p)) return realize_jobs_comm(p, bt, jobs, nj, a, err);
    if (realize_jobs(p, jobs, nj, a, err)) return -1;
    if (merge_batches(p, a, err) || sched_assign_score(p, a, err)) {
        sched_assign_free(a);
        return -1;
    }
    return 0;
}

/* Keep the better of *best and *cand (by the objective; cand is freed or taken over). */
static int keep_better(sched_assign *best, sched_assign *cand, const char *method)
{
    if (cand->owner && less(cand->objective_us, best->objective_us)) {
        sched_assign_free(best);
        *best = *cand;
        best->method = method;
        memset(cand, 0, sizeof *cand);
        return 1;
    }
    sched_assign_free(cand);
    return 0;
}

int sched_assign_milp(const sched_problem *p, double time_limit_s, int verbose, sched_assign *a,
                      char *status, size_t status_size, double *bound_us, dm_err *err)
{
    sclock ck;
    sc_init(&ck, time_limit_s);
    sched_assign best, cand;
    int rc = -1, nh = 0, nm = 0, nvars = 0, cut = 0, scut = 0, warm = 0, complete = 1, comm = has_comm(p);
    int *count = NULL;
    job *hjobs = NULL, *mjobs = NULL;
    double hms = INFINITY, model_J = 0;
    btab bt;
    lclass lc;
    memset(&best, 0, sizeof best);
    memset(&cand, 0, sizeof cand);
    memset(&bt, 0, sizeof bt);
    memset(&lc, 0, sizeof lc);
    if (bound_us) *bound_us = 0;
    if (sched_assign_lpt(p, &best, err)) return -1;
    double lpt_J = best.objective_us;
    /* the better of the simple bound and the two-shape bound (both valid): stops the search early
     * and bounds L for lp_solve; with communication, the objective's bound built on them */
    double lb_ns = fmax(sched_lower_bound(p), sched_two_shape_bound(p));
    double lb = sched_comm_bound(p, lb_ns);
    if (p->n_items == 0 || best.objective_us <= lb * (1 + 1e-9)) {
        *a = best;
        snprintf(status, status_size, "lpt, optimal: at a lower bound");
        if (bound_us) *bound_us = lb;
        return 0;
    }
    size_t ni = (size_t)(p->n_items ? p->n_items : 1);
    if (!(count = dm_calloc((size_t)p->n_shapes, sizeof *count, err)) || !(hjobs = dm_malloc(ni * sizeof *hjobs, err)) ||
        !(mjobs = dm_malloc(ni * sizeof *mjobs, err)))
        goto done;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    if (btab_init(&bt, p, count, err) || (comm && lclass_init(&lc, p, err))) goto done;
    sc_phase_end(&ck, "setup");
    /* with communication: how many owners share each layer */
    if (comm) {
        ck.until = 0.3 * time_limit_s;
        if (split_search(p, &bt, &lc, count, &ck, &cand, &scut, err)) goto done;
        keep_better(&best, &cand, scut ? "split search (cut by the time limit)" : "split search");
        sc_phase_end(&ck, "split");
    }
    /* a batch-aware count search from the best plan so far */
    ck.until = (comm ? 0.55 : 0.5) * time_limit_s;
    if (best.objective_us > lb * (1 + 1e-4) && heuristic_jobs(p, count, &best, lb_ns, &ck, hjobs, &nh, &hms, &cut, err))
        goto done;
    if (nh && (!comm ? hms < best.makespan_us - 1e-9 : 1)) {
        if (jobs_to_plan(p, &bt, hjobs, nh, &cand, err)) goto done;
        keep_better(&best, &cand, cut ? "count search (cut by the time limit)" : "count search");
    }
    sc_phase_end(&ck, "count");
    const char *from = best.method;
    double best_J = best.objective_us;
    int ret = MILP_SKIPPED;
    ck.until = time_limit_s;
    if (best_J > lb * (1 + 1e-4) && sc_over(&ck)) ret = MILP_NO_TIME;
    if (best_J > lb * (1 + 1e-4) && !sc_over(&ck)) {
        milp_in in = {count, comm ? &lc : NULL, lb_ns, best.makespan_us * (1 - 1e-7), best_J * (1 - 1e-7),
                      lb * (1 + 1e-4), &best, &ck, verbose};
        if (comm) {
            int nl = 0;
            for (int c = 0; c < lc.n; c++) nl += lc.size[c];
            in.ub_L = best_J * (1 - 1e-7) - p->pair_us * nl;
        }
        double eps_work = 1e-4 * lb_ns; /* the total-work term at the bound */
        in.break_J += eps_work;
        if (in.ub_L >= in.lb_L) ret = solve_milp(p, &in, mjobs, &nm, &model_J, &nvars, &warm, &complete, err);
        else ret = INFEASIBLE; /* no L fits below the plan in hand */
        if (ret == MILP_FAILED) goto done;
    }
    double elapsed = ck.spent; /* the charged time: the same on every run */
    int milp_won = 0;
    if (nm) {
        if (jobs_to_plan(p, &bt, mjobs, nm, &cand, err)) goto done;
        milp_won = keep_better(&best, &cand, "milp");
    }
    /* lp_solve's proofs hold for every plan when the model allows every batch size (else only
     * for its sizes: then the status says so and the bound stays the combinatorial one) */
    double proven = lb;
    if (ret == INFEASIBLE && complete) proven = fmax(proven, best_J); /* nothing beats the plan in hand */
    if (ret == OPTIMAL && nm && complete) proven = fmax(proven, fmin(model_J, best.objective_us) * (1 - 1e-4)); /* mip gap */
    if (bound_us) *bound_us = fmin(proven, best.objective_us);
    if (milp_won) {
        snprintf(status, status_size, "%s (milp, %d vars%s, %.2f s)",
                 ret == OPTIMAL ? (complete ? "optimal" : "optimal for its batch sizes") :
                 ret == SUBOPTIMAL ? "timeout, best found" : "feasible", nvars, warm ? ", warm start" : "", elapsed);
    } else {
        const char *why = ret == INFEASIBLE ? (complete ? "optimal: milp proved nothing better" :
                                               "milp proved nothing better for its batch sizes") :
                          ret == MILP_SKIPPED ? "within 0.01% of a lower bound: milp skipped" :
                          ret == MILP_NO_TIME ? "no time left for lp_solve" :
                          ret == OPTIMAL ? "milp optimum not better once realized" :
                          ret == TIMEOUT || ret == USERABORT || elapsed >= time_limit_s - 1e-3 ? "milp timeout" :
                          "milp found nothing better";
        snprintf(status, status_size, "%s; %s (%d vars%s, %.2f s)", from, why, nvars, warm ? ", warm start" : "", elapsed);
    }
    if (ck.walled) { /* the one cut that depends on the machine's speed */
        size_t n = strlen(status);
        if (n < status_size) snprintf(status + n, status_size - n, "; cut by the wall-clock ceiling (%.2f s): may differ run to run",
                                      ck.wall_cap - ck.t0);
    }
    sc_phase_end(&ck, "milp");
    if (!comm && !milp_won && ret != INFEASIBLE && ret != MILP_SKIPPED && bound_us) *bound_us = 0; /* as before: only proofs */
    (void)lpt_J;
    *a = best;
    memset(&best, 0, sizeof best);
    rc = 0;
done:
    sched_assign_free(&best);
    sched_assign_free(&cand);
    btab_free(&bt);
    lclass_free(&lc);
    free(count);
    free(hjobs);
    free(mjobs);
    return rc;
}

/* ---- lower bounds on the objective --------------------------------------------------------- */

/* per[s]: the cheapest NS time per matrix of shape s, over the batch sizes its count allows. */
static void per_matrix_cost(const sched_problem *p, const int *count, double *per)
{
    for (int s = 0; s < p->n_shapes; s++) {
        per[s] = INFINITY;
        for (int b = 1; b <= p->max_batch && b <= count[s]; b++) per[s] = fmin(per[s], cost_of(p, s, b) / b);
    }
}

static double comm_bound_at(const sched_problem *p, double ns_bound, double *m_best)
{
    *m_best = ns_bound;
    if (!has_comm(p) || p->pair_us <= 0) return ns_bound;
    int L = n_layers_of(p), *count = calloc((size_t)(p->n_shapes ? p->n_shapes : 1), sizeof *count);
    double *per = calloc((size_t)(p->n_shapes ? p->n_shapes : 1), sizeof *per), *W = calloc((size_t)L, sizeof *W);
    double best = ns_bound;
    if (!count || !per || !W) goto out;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    per_matrix_cost(p, count, per);
    for (int i = 0; i < p->n_items; i++) W[layer_of(p, i)] += per[p->items[i].shape];
    /* f(M) = M + pair_us x sum ceil(W_l / M) is smallest at M = ns_bound or where a ceil steps
     * down: M = W_l / k */
    best = INFINITY;
    for (int l = -1; l < L; l++) {
        for (int k = 1; l < 0 ? k == 1 : W[l] / k >= ns_bound; k++) {
            double M = l < 0 ? ns_bound : W[l] / k, f = M;
            if (M <= 0) break;
            for (int q = 0; q < L; q++)
                if (W[q] > 0) f += p->pair_us * ceil(W[q] / M * (1 - 1e-12));
            if (f < best) best = f, *m_best = M;
            if (k > p->nowners) break;
        }
    }
    if (!isfinite(best)) best = ns_bound, *m_best = ns_bound;
out:
    free(count);
    free(per);
    free(W);
    return best;
}

double sched_comm_bound(const sched_problem *p, double ns_bound)
{
    double m;
    return comm_bound_at(p, ns_bound, &m);
}

/* ---- a stronger lower bound ---------------------------------------------------------------- */

/* the largest n with T[n] <= x, given the suffix minima M (nondecreasing); -1 if none */
static int max_fit(const double *M, int count, double x)
{
    if (M[0] > x) return -1;
    int lo = 0, hi = count;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (M[mid] <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Can `owners` owners hold all of A and B with load <= L? DP over owners: best[a] = most B
 * matrices placed with a A matrices placed. xs/fit: scratch of nA + 1 entries. 1 yes, 0 no,
 * -1 when the DP would take too long (more than about 3e7 steps). */
static int two_fit(const double *TA, int nA, const double *MB, int nB, int owners, double L, int *best, int *next,
                   int *xs, int *fit)
{
    int nx = 0;
    for (int x = 0; x <= nA; x++) /* an owner's choices: x A matrices, then as many B as fit */
        if (TA[x] <= L) {
            int b = max_fit(MB, nB, L - TA[x]);
            xs[nx] = x;
            fit[nx++] = b > 0 ? b : 0;
        }
    if ((double)owners * (nA + 1) * nx > 3e7) return -1;
    for (int a = 0; a <= nA; a++) best[a] = -1;
    best[0] = 0;
    for (int o = 0; o < owners; o++) {
        for (int a = 0; a <= nA; a++) next[a] = -1;
        for (int a = 0; a <= nA; a++) {
            if (best[a] < 0) continue;
            for (int k = 0; k < nx && a + xs[k] <= nA; k++) {
                int v = best[a] + fit[k];
                if (v > nB) v = nB;
                if (v > next[a + xs[k]]) next[a + xs[k]] = v;
            }
        }
        int *t = best;
        best = next;
        next = t;
        if (best[nA] >= nB) return 1;
    }
    return 0;
}

double sched_two_shape_bound(const sched_problem *p)
{
    int *count = calloc((size_t)p->n_shapes, sizeof *count);
    double *TA = NULL, *TB = NULL, *MB = NULL, bound = 0;
    int *best = NULL, *next = NULL, *xs = NULL, *fit = NULL;
    if (!count) return 0;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    /* the two shapes with the largest cheapest total */
    int sa = -1, sb = -1;
    double ta = -1, tb = -1;
    for (int s = 0; s < p->n_shapes; s++) {
        if (!count[s]) continue;
        double per = INFINITY;
        for (int b = 1; b <= p->max_batch && b <= count[s]; b++) per = fmin(per, cost_of(p, s, b) / b);
        double t = per * count[s];
        if (t > ta) {
            sb = sa, tb = ta;
            sa = s, ta = t;
        } else if (t > tb) {
            sb = s, tb = t;
        }
    }
    if (sa < 0) goto out;
    int nA = count[sa], nB = sb >= 0 ? count[sb] : 0;
    if ((double)p->nowners * (nA + 1) > 2e7) goto out; /* too large to do quickly */
    if (!(TA = malloc(((size_t)nA + 1) * sizeof *TA)) || !(TB = malloc(((size_t)nB + 1) * sizeof *TB)) ||
        !(MB = malloc(((size_t)nB + 1) * sizeof *MB)) || !(best = malloc(((size_t)nA + 1) * sizeof *best)) ||
        !(next = malloc(((size_t)nA + 1) * sizeof *next)) || !(xs = malloc(((size_t)nA + 1) * sizeof *xs)) ||
        !(fit = malloc(((size_t)nA + 1) * sizeof *fit)))
        goto out;
    batch_dp(p, sa, nA, TA, NULL);
    if (sb >= 0) batch_dp(p, sb, nB, TB, NULL);
    else TB[0] = 0;
    MB[nB] = TB[nB];
    for (int b = nB - 1; b >= 0; b--) MB[b] = fmin(TB[b], MB[b + 1]);
    double lo = 0, hi = TA[nA] + TB[nB]; /* one owner holding everything fits */
    lo = sched_lower_bound(p) * (1 - 1e-9); /* below it nothing fits: start the bisection there */
    if (two_fit(TA, nA, MB, nB, p->nowners, hi, best, next, xs, fit) != 1) goto out;
    for (int it = 0; it < 50 && hi - lo > 1e-7 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        int f = two_fit(TA, nA, MB, nB, p->nowners, mid, best, next, xs, fit);
        if (f < 0) goto out;
        if (f) hi = mid;
        else lo = mid;
    }
    bound = lo; /* every L below lo is infeasible: lo is a valid lower bound */
out:
    free(count);
    free(TA);
    free(TB);
    free(MB);
    free(best);
    free(next);
    free(xs);
    free(fit);
    return bound;
}
