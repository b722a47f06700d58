/* assign.c: owner assignment of Muon matrices to ranks: round-robin, LPT (longest processing
 * time first, with same-layer spreading and per-layer packing of small matrices) and a MILP
 * over (shape, batch size, owner) solved by lp_solve, backed by the LPT plan. All three are
 * deterministic: every rank that runs them gets the same plan. */
#define _GNU_SOURCE
#include "sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lpsolve/lp_lib.h>

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
    if (merge_batches(p, a, err)) {
        sched_assign_free(a);
        return -1;
    }
    return 0;
}

int sched_assign_lpt(const sched_problem *p, sched_assign *a, dm_err *err)
{
    int *order, nu, max_layer = 0;
    unit *u;
    unsigned char *has = NULL;
    if (assign_alloc(p, a, err) || make_units(p, &order, &u, &nu, err)) {
        sched_assign_free(a);
        return -1;
    }
    for (int k = 0; k < nu; k++)
        if (u[k].layer > max_layer) max_layer = u[k].layer;
    if (!(has = dm_calloc((size_t)p->nowners * (size_t)(max_layer + 1), 1, err))) {
        free(order);
        free(u);
        sched_assign_free(a);
        return -1;
    }
    qsort(u, (size_t)nu, sizeof *u, cmp_unit_cost);
    for (int k = 0; k < nu; k++) {
        int any = 0, free_ = -1;
        for (int o = 0; o < p->nowners; o++) {
            if (a->load_us[o] < a->load_us[any]) any = o;
            if (!has[(size_t)o * (max_layer + 1) + u[k].layer] && (free_ < 0 || a->load_us[o] < a->load_us[free_]))
                free_ = o;
        }
        /* Spread a layer over owners as long as it does not raise the makespan beyond what
         * plain LPT would reach with this unit. */
        int pick = any;
        if (free_ >= 0 && a->load_us[free_] + u[k].cost <= fmax(a->makespan_us, a->load_us[any] + u[k].cost) + 1e-9)
            pick = free_;
        has[(size_t)pick * (max_layer + 1) + u[k].layer] = 1;
        place_unit(p, order, &u[k], pick, a);
    }
    a->n_units = nu;
    free(has);
    free(order);
    free(u);
    if (merge_batches(p, a, err)) {
        sched_assign_free(a);
        return -1;
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
static double schedule_jobs(const sched_problem *p, job *jobs, int nj, double *load, double deadline)
{
    qsort(jobs, (size_t)nj, sizeof *jobs, cmp_job_cost);
    for (int o = 0; o < p->nowners; o++) load[o] = 0;
    for (int j = 0; j < nj; j++) {
        int best = 0;
        for (int o = 1; o < p->nowners; o++)
            if (load[o] < load[best]) best = o;
        jobs[j].owner = best;
        load[best] += jobs[j].cost;
    }
    for (int iter = 0; iter < 100000; iter++) {
        if ((iter & 63) == 0 && sched_wall_s() > deadline) break;
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
        for (int j = 0; j < nj && !done; j++) { /* swap */
            if (jobs[j].owner != mx) continue;
            for (int k = 0; k < nj && !done; k++) {
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
        }
        if (!done) break;
    }
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
    double **T; /* T[s][0 .. count[s]] */
    int **first;/* the first batch size of T's best split */
    int *n;     /* O x S */
    double *load;
} cls;

static void cls_free(cls *c)
{
    if (c->T)
        for (int s = 0; s < c->S; s++) {
            free(c->T[s]);
            free(c->first[s]);
        }
    free(c->T);
    free(c->first);
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
    if (!(c->T = dm_calloc((size_t)c->S, sizeof *c->T, err)) || !(c->first = dm_calloc((size_t)c->S, sizeof *c->first, err)) ||
        !(c->n = dm_calloc((size_t)c->S * c->O, sizeof *c->n, err)) || !(c->load = dm_calloc((size_t)c->O, sizeof *c->load, err)))
        return -1;
    for (int s = 0; s < c->S; s++) {
        if (!(c->T[s] = dm_malloc(((size_t)count[s] + 1) * sizeof **c->T, err)) ||
            !(c->first[s] = dm_malloc(((size_t)count[s] + 1) * sizeof **c->first, err)))
            return -1;
        c->T[s][0] = 0;
        c->first[s][0] = 0;
        for (int n = 1; n <= count[s]; n++) {
            c->T[s][n] = INFINITY;
            for (int b = 1; b <= n && b <= p->max_batch; b++) {
                double v = cost_of(p, s, b) + c->T[s][n - b];
                if (v < c->T[s][n] - 1e-12) {
                    c->T[s][n] = v;
                    c->first[s][n] = b;
                }
            }
        }
    }
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
static int cls_pair_opt(cls *c, int M, long limit)
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
        if (combos > limit) continue;
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

static double cls_search(cls *c, double deadline, long pair_limit)
{
    cls_loads(c);
    for (int iter = 0; iter < 20000; iter++) {
        if ((iter & 15) == 0 && sched_wall_s() > deadline) break;
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
                if (newM >= best) continue;
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
        for (int s = 0; s < c->S; s++) { /* swaps of single matrices */
            int have = CN(c, M, s);
            if (!have) continue;
            for (int o = 0; o < c->O; o++) {
                if (o == M) continue;
                for (int s2 = 0; s2 < c->S; s2++) {
                    int h2 = CN(c, o, s2);
                    if (s2 == s || !h2) continue;
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
        if (bs < 0) {
            if (pair_limit > 0 && cls_pair_opt(c, M, pair_limit)) continue;
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
static int heuristic_jobs(const sched_problem *p, const int *count, const sched_assign *lpt, double lb, double deadline,
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
    for (int k = -2; k < 10 && sched_wall_s() < deadline; k++) {
        memset(c.n, 0, (size_t)c.S * c.O * sizeof *c.n);
        if (k == -2) {
            for (int i = 0; i < p->n_items; i++) CN(&c, lpt->owner[i], p->items[i].shape)++;
        } else {
            int nj = make_jobs(p, count, k < 0 ? 0 : lb * 2 / (double)(1 << k), jobs);
            schedule_jobs(p, jobs, nj, load, deadline);
            for (int j = 0; j < nj; j++) CN(&c, jobs[j].owner, jobs[j].shape) += jobs[j].size;
        }
        double ms = cls_search(&c, deadline, 0);
        if (ms < *best_ms - 1e-9) {
            *best_ms = ms;
            memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
        }
    }
    /* iterated local search: perturb the best counts (a few random single-matrix moves, fixed
     * seed so the plan is reproducible) and search again; keep improvements */
    unsigned seed = 0x9e3779b9u;
    for (int round = 0; round < 200 && sched_wall_s() < deadline && *best_ms > lb * (1 + 1e-4); round++) {
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
        double ms = cls_search(&c, deadline, 0);
        if (ms < *best_ms - 1e-9) {
            *best_ms = ms;
            memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
        }
    }
    /* polish the best with exact pair re-splits */
    memcpy(c.n, bestn, (size_t)c.S * c.O * sizeof *c.n);
    double polished = cls_search(&c, deadline, 20000);
    if (polished < *best_ms - 1e-9) {
        *best_ms = polished;
        memcpy(bestn, c.n, (size_t)c.S * c.O * sizeof *c.n);
    }
    *cut = sched_wall_s() > deadline;
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

/* ---- MILP ---------------------------------------------------------------------------------- */

typedef struct milp_ctx {
    double deadline;
} milp_ctx;

static int __WINAPI milp_abort(lprec *lp, void *h)
{
    (void)lp;
    return sched_wall_s() > ((milp_ctx *)h)->deadline;
}

/* Batch sizes the MILP may use for a shape with `count` matrices. */
static int batch_menu(int count, int max_batch, int *menu)
{
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024};
    int n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= count && sizes[i] <= max_batch) menu[n++] = sizes[i];
    return n;
}

/* Solve x[s, b, o] (batches of size b of shape s on owner o) minimizing the makespan L (then
 * the total work), with L <= upper (strictly better than the plan in hand). Returns the
 * lp_solve status; on a solution fills jobs/nj. */
static int solve_milp(const sched_problem *p, const int *count, double lb, double upper, double deadline,
                      int verbose, job *jobs, int *nj, int *nvars, dm_err *err)
{
    enum { MB = 32 };
    int ret = -100;
    lprec *lp = NULL;
    int *menus = dm_calloc((size_t)p->n_shapes * MB, sizeof *menus, err);
    int *n_menu = dm_calloc((size_t)p->n_shapes, sizeof *n_menu, err);
    int *off = dm_calloc((size_t)p->n_shapes, sizeof *off, err);
    int *colno = NULL;
    double *row = NULL, *vars = NULL;
    *nj = 0;
    if (!menus || !n_menu || !off) goto done;
    int nx = 0;
    for (int s = 0; s < p->n_shapes; s++) {
        n_menu[s] = batch_menu(count[s], p->max_batch < MB ? p->max_batch : MB, &menus[s * MB]);
        off[s] = nx;
        nx += n_menu[s] * p->nowners;
    }
    *nvars = nx;
    int ncols = 1 + nx; /* column 1 = L, then x[s][k][o] at 2 + off[s] + k * owners + o */
#define XCOL(s, k, o) (2 + off[s] + (k) * p->nowners + (o))
    if (!(lp = make_lp(0, ncols))) {
        dm_err_set(err, "milp: lp_solve could not create a model with %d columns", ncols);
        goto done;
    }
    if (!(colno = dm_malloc((size_t)(ncols + 1) * sizeof *colno, err)) ||
        !(row = dm_malloc((size_t)(ncols + 1) * sizeof *row, err)) ||
        !(vars = dm_malloc((size_t)(ncols + 1) * sizeof *vars, err)))
        goto done;
    set_verbose(lp, verbose ? NORMAL : NEUTRAL);
    set_add_rowmode(lp, TRUE);
    double eps = 1e-4 / p->nowners; /* objective L + eps * total work: L dominates */
    int nz = 0;
    colno[nz] = 1;
    row[nz++] = 1;
    for (int s = 0; s < p->n_shapes; s++)
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < p->nowners; o++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = eps * cost_of(p, s, menus[s * MB + k]);
            }
    set_obj_fnex(lp, nz, row, colno);
    set_minim(lp);
    for (int s = 0; s < p->n_shapes; s++) { /* every matrix covered */
        if (!count[s]) continue;
        nz = 0;
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < p->nowners; o++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = menus[s * MB + k];
            }
        add_constraintex(lp, nz, row, colno, EQ, count[s]);
    }
    for (int o = 0; o < p->nowners; o++) { /* load(o) <= L; load(o) >= load(o+1) (symmetry) */
        nz = 0;
        for (int s = 0; s < p->n_shapes; s++)
            for (int k = 0; k < n_menu[s]; k++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = cost_of(p, s, menus[s * MB + k]);
            }
        colno[nz] = 1;
        row[nz++] = -1;
        add_constraintex(lp, nz, row, colno, LE, 0);
        if (o + 1 < p->nowners) {
            nz = 0;
            for (int s = 0; s < p->n_shapes; s++)
                for (int k = 0; k < n_menu[s]; k++) {
                    double t = cost_of(p, s, menus[s * MB + k]);
                    colno[nz] = XCOL(s, k, o);
                    row[nz++] = t;
                    colno[nz] = XCOL(s, k, o + 1);
                    row[nz++] = -t;
                }
            add_constraintex(lp, nz, row, colno, GE, 0);
        }
    }
    set_add_rowmode(lp, FALSE);
    set_lowbo(lp, 1, lb);
    set_upbo(lp, 1, upper);
    for (int s = 0; s < p->n_shapes; s++)
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < p->nowners; o++) {
                set_int(lp, XCOL(s, k, o), TRUE);
                set_upbo(lp, XCOL(s, k, o), count[s] / menus[s * MB + k]);
            }
    milp_ctx ctx = {deadline};
    put_abortfunc(lp, milp_abort, &ctx);
    set_mip_gap(lp, FALSE, 1e-4);
    set_mip_gap(lp, TRUE, 1e-6);
    set_break_at_value(lp, lb * (1 + 1e-4) + eps * lb * p->nowners);
    set_bb_floorfirst(lp, BRANCH_CEILING);
    ret = solve(lp);
    if (ret == OPTIMAL || ret == SUBOPTIMAL || ret == PRESOLVED) {
        get_variables(lp, vars);
        for (int s = 0; s < p->n_shapes; s++)
            for (int k = 0; k < n_menu[s]; k++)
                for (int o = 0; o < p->nowners; o++) {
                    long cnt = lround(vars[XCOL(s, k, o) - 1]);
                    for (long c = 0; c < cnt; c++) jobs[(*nj)++] = (job){s, menus[s * MB + k], o, cost_of(p, s, menus[s * MB + k])};
                }
    }
#undef XCOL
done:
    if (lp) delete_lp(lp);
    free(menus);
    free(n_menu);
    free(off);
    free(colno);
    free(row);
    free(vars);
    return ret;
}

int sched_assign_milp(const sched_problem *p, double time_limit_s, int verbose, sched_assign *a,
                      char *status, size_t status_size, double *bound_us, dm_err *err)
{
    double t0 = sched_wall_s(), deadline = t0 + time_limit_s;
    sched_assign lpt, h;
    int rc = -1, nh = 0, nm = 0, nvars = 0, cut = 0;
    int *count = NULL;
    job *hjobs = NULL, *mjobs = NULL;
    double hms = INFINITY;
    memset(&h, 0, sizeof h);
    if (bound_us) *bound_us = 0;
    if (sched_assign_lpt(p, &lpt, err)) return -1;
    /* the better of the simple bound and the two-shape bound (both valid): stops the search early
     * and bounds L for lp_solve */
    double lb = fmax(sched_lower_bound(p), sched_two_shape_bound(p));
    if (p->n_items == 0 || lpt.makespan_us <= lb * (1 + 1e-9)) {
        *a = lpt;
        snprintf(status, status_size, "lpt, optimal: at a lower bound");
        if (bound_us) *bound_us = lb;
        return 0;
    }
    size_t ni = (size_t)(p->n_items ? p->n_items : 1);
    if (!(count = dm_calloc((size_t)p->n_shapes, sizeof *count, err)) || !(hjobs = dm_malloc(ni * sizeof *hjobs, err)) ||
        !(mjobs = dm_malloc(ni * sizeof *mjobs, err)))
        goto done;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    /* a batch-aware start: the MILP only has to beat the better of it and LPT */
    if (heuristic_jobs(p, count, &lpt, lb, t0 + 0.5 * time_limit_s, hjobs, &nh, &hms, &cut, err)) goto done;
    double best = fmin(lpt.makespan_us, hms);
    const char *from = hms < lpt.makespan_us - 1e-9 ? (cut ? "count search (cut by the time limit)" : "count search") : "lpt";
    int ret = -100;
    if (best > lb * (1 + 1e-4) && sched_wall_s() < deadline)
        ret = solve_milp(p, count, lb, best * (1 - 1e-7), deadline, verbose, mjobs, &nm, &nvars, err);
    double elapsed = sched_wall_s() - t0;
    sched_assign m;
    memset(&m, 0, sizeof m);
    if (nm && realize_jobs(p, mjobs, nm, &m, err) == 0 && merge_batches(p, &m, err) == 0 && m.makespan_us < best - 1e-9) {
        *a = m;
        snprintf(status, status_size, "%s (milp, %d vars, %.2f s)",
                 ret == OPTIMAL ? "optimal" : ret == SUBOPTIMAL ? "timeout, best found" : "feasible", nvars, elapsed);
        if (bound_us && ret == OPTIMAL) *bound_us = m.makespan_us;
        rc = 0;
        goto done;
    }
    sched_assign_free(&m);
    const char *why = ret == INFEASIBLE ? "optimal: milp proved nothing better" :
                      ret == -100 ? "within 0.01% of a lower bound: milp skipped" :
                      elapsed >= time_limit_s - 1e-3 ? "milp timeout" : "milp found nothing better";
    if (bound_us && ret == INFEASIBLE) *bound_us = best;
    if (bound_us && ret == -100) *bound_us = lb; /* the plan is within 0.01% of it */
    if (hms < lpt.makespan_us - 1e-9) {
        if (realize_jobs(p, hjobs, nh, &h, err) || merge_batches(p, &h, err)) goto done;
        *a = h;
        memset(&h, 0, sizeof h);
    } else {
        *a = lpt;
        memset(&lpt, 0, sizeof lpt);
    }
    snprintf(status, status_size, "%s; %s (%d vars, %.2f s)", from, why, nvars, elapsed);
    rc = 0;
done:
    sched_assign_free(&lpt);
    sched_assign_free(&h);
    free(count);
    free(hjobs);
    free(mjobs);
    return rc;
}

/* ---- a stronger lower bound ---------------------------------------------------------------- */

/* T[n]: the cheapest batching of n matrices of shape s; fills T[0..count]. */
static void batch_dp(const sched_problem *p, int s, int count, double *T)
{
    T[0] = 0;
    for (int n = 1; n <= count; n++) {
        T[n] = INFINITY;
        for (int b = 1; b <= n && b <= p->max_batch; b++) T[n] = fmin(T[n], cost_of(p, s, b) + T[n - b]);
    }
}

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
    batch_dp(p, sa, nA, TA);
    if (sb >= 0) batch_dp(p, sb, nB, TB);
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
