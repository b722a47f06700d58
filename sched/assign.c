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

static int cmp_by_layer(const void *a, const void *b, void *ctx)
{
    const sched_problem *p = ctx;
    const sched_item *x = &p->items[*(const int *)a], *y = &p->items[*(const int *)b];
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Turn per-(shape, owner) batch counts into concrete items: deal a shape's items (in layer
 * order) round-robin over the owners that still take that shape, so one layer's matrices land
 * on different owners, then cut each owner's items into its batches. */
static int realize(const sched_problem *p, int n_menu_max, const int *menus, const int *n_menu,
                   const double *x, sched_assign *a, dm_err *err)
{
    int rc = -1;
    int *items = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *items, err);
    int *want = dm_malloc((size_t)p->nowners * sizeof *want, err);
    int *mine = dm_malloc((size_t)(p->n_items ? p->n_items : 1) * sizeof *mine, err);
    if (!items || !want || !mine) goto done;
    for (int s = 0; s < p->n_shapes; s++) {
        int n = 0;
        for (int i = 0; i < p->n_items; i++)
            if (p->items[i].shape == s) items[n++] = i;
        if (!n) continue;
        qsort_r(items, (size_t)n, sizeof *items, cmp_by_layer, (void *)p);
        int total = 0;
        for (int o = 0; o < p->nowners; o++) {
            want[o] = 0;
            for (int k = 0; k < n_menu[s]; k++)
                want[o] += menus[s * n_menu_max + k] *
                           (int)llround(x[((size_t)s * n_menu_max + k) * p->nowners + o]);
            total += want[o];
        }
        if (total != n) {
            dm_err_set(err, "milp: shape %d covered %d times, expected %d", s, total, n);
            goto done;
        }
        int o = 0;
        for (int i = 0; i < n; i++) {
            while (!want[o]) o = (o + 1) % p->nowners;
            a->owner[items[i]] = o;
            want[o]--;
            o = (o + 1) % p->nowners;
        }
        /* per owner, its items of this shape (layer order) cut into its batches, largest first */
        for (int ow = 0; ow < p->nowners; ow++) {
            int nm = 0;
            for (int i = 0; i < n; i++)
                if (a->owner[items[i]] == ow) mine[nm++] = items[i];
            int pos = 0;
            for (int k = n_menu[s] - 1; k >= 0; k--) {
                int b = menus[s * n_menu_max + k];
                int cnt = (int)llround(x[((size_t)s * n_menu_max + k) * p->nowners + ow]);
                for (int c = 0; c < cnt; c++) {
                    for (int j = 0; j < b; j++) a->batch_of[mine[pos++]] = a->n_batches;
                    a->n_batches++;
                    a->load_us[ow] += cost_of(p, s, b);
                }
            }
        }
    }
    set_makespan(p, a);
    rc = 0;
done:
    free(items);
    free(want);
    free(mine);
    return rc;
}

int sched_assign_milp(const sched_problem *p, double time_limit_s, int verbose, sched_assign *a,
                      char *status, size_t status_size, double *bound_us, dm_err *err)
{
    double t0 = sched_wall_s();
    sched_assign lpt;
    int rc = -1;
    lprec *lp = NULL;
    int *count = NULL, *menus = NULL, *n_menu = NULL, *colno = NULL, *off = NULL;
    double *row = NULL, *vars = NULL, *x = NULL;
    const int MB = 32;
    if (bound_us) *bound_us = 0;
    if (sched_assign_lpt(p, &lpt, err)) return -1;
    double lb = sched_lower_bound(p);
    if (p->n_items == 0 || lpt.makespan_us <= lb * (1 + 1e-9)) {
        *a = lpt;
        snprintf(status, status_size, "lpt is optimal (at the lower bound)");
        return 0;
    }
    count = dm_calloc((size_t)p->n_shapes, sizeof *count, err);
    menus = dm_calloc((size_t)p->n_shapes * MB, sizeof *menus, err);
    n_menu = dm_calloc((size_t)p->n_shapes, sizeof *n_menu, err);
    if (!count || !menus || !n_menu) goto done;
    for (int i = 0; i < p->n_items; i++) count[p->items[i].shape]++;
    int nx = 0;
    if (!(off = dm_malloc((size_t)p->n_shapes * sizeof *off, err))) goto done;
    for (int s = 0; s < p->n_shapes; s++) {
        n_menu[s] = batch_menu(count[s], p->max_batch, &menus[s * MB]);
        off[s] = nx;
        nx += n_menu[s] * p->nowners;
    }
    /* columns: 1 = L, then x[s][k][o] at 2 + off[s] + k * owners + o */
    int ncols = 1 + nx;
    if (!(lp = make_lp(0, ncols))) {
        dm_err_set(err, "milp: lp_solve could not create a model with %d columns", ncols);
        goto done;
    }
    if (!(colno = dm_malloc((size_t)(ncols + 1) * sizeof *colno, err)) ||
        !(row = dm_malloc((size_t)(ncols + 1) * sizeof *row, err)) ||
        !(vars = dm_malloc((size_t)(ncols + 1) * sizeof *vars, err)) ||
        !(x = dm_calloc((size_t)p->n_shapes * MB * p->nowners, sizeof *x, err)))
        goto done;
#define XCOL(s, k, o) (2 + off[s] + (k) * p->nowners + (o))
    set_verbose(lp, verbose ? NORMAL : NEUTRAL);
    set_add_rowmode(lp, TRUE);
    /* objective: L + eps * total work (eps small enough that L dominates) */
    double eps = 1e-4 / p->nowners;
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
    for (int s = 0; s < p->n_shapes; s++) { /* cover */
        if (!count[s]) continue;
        nz = 0;
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < p->nowners; o++) {
                colno[nz] = XCOL(s, k, o);
                row[nz++] = menus[s * MB + k];
            }
        add_constraintex(lp, nz, row, colno, EQ, count[s]);
    }
    for (int o = 0; o < p->nowners; o++) { /* load(o) <= L, load(o) >= load(o+1) */
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
    set_upbo(lp, 1, lpt.makespan_us); /* never worse than LPT */
    for (int s = 0; s < p->n_shapes; s++)
        for (int k = 0; k < n_menu[s]; k++)
            for (int o = 0; o < p->nowners; o++) {
                int c = XCOL(s, k, o);
                set_int(lp, c, TRUE);
                set_upbo(lp, c, count[s] / menus[s * MB + k]);
            }
    milp_ctx ctx = {t0 + time_limit_s};
    put_abortfunc(lp, milp_abort, &ctx);
    set_mip_gap(lp, FALSE, 1e-4);
    set_mip_gap(lp, TRUE, 1e-6);
    set_break_at_value(lp, lb * (1 + 1e-4) + eps * lb * p->nowners);
    set_bb_floorfirst(lp, BRANCH_CEILING);
    int ret = solve(lp);
    double elapsed = sched_wall_s() - t0;
    int have = ret == OPTIMAL || ret == SUBOPTIMAL || ret == PRESOLVED;
    if (have) {
        get_variables(lp, vars);
        for (int s = 0; s < p->n_shapes; s++)
            for (int k = 0; k < n_menu[s]; k++)
                for (int o = 0; o < p->nowners; o++)
                    x[((size_t)s * MB + k) * p->nowners + o] = vars[XCOL(s, k, o) - 1];
    }
    sched_assign m;
    if (have && assign_alloc(p, &m, err) == 0) {
        if (realize(p, MB, menus, n_menu, x, &m, err) == 0 && m.makespan_us < lpt.makespan_us - 1e-9) {
            *a = m;
            sched_assign_free(&lpt);
            snprintf(status, status_size, "%s (%d vars, %.2f s)",
                     ret == OPTIMAL ? "optimal" : elapsed >= time_limit_s ? "timeout, best found" : "feasible",
                     nx, elapsed);
            if (bound_us && ret == OPTIMAL) *bound_us = m.makespan_us;
            rc = 0;
            goto done;
        }
        sched_assign_free(&m);
    }
    *a = lpt;
    snprintf(status, status_size, "%s (%d vars, %.2f s; lpt kept)",
             ret == OPTIMAL ? "optimal = lpt" : have ? "no better than lpt" :
             elapsed >= time_limit_s ? "timeout" : "infeasible below lpt", nx, elapsed);
    if (bound_us && ret == INFEASIBLE) *bound_us = lpt.makespan_us; /* nothing below LPT exists */
    rc = 0;
#undef XCOL
done:
    if (rc) sched_assign_free(&lpt);
    if (lp) delete_lp(lp);
    free(count);
    free(menus);
    free(n_menu);
    free(off);
    free(colno);
    free(row);
    free(vars);
    free(x);
    return rc;
}
