/* holds.c: what a rank holds of each parameter along its step program, and the state rule
 * (holds.h). */
#include "holds.h"

#include <stdlib.h>
#include <string.h>

void dm_flat_shard(int64_t total, int n, int k, int64_t *lo, int64_t *hi)
{
    int64_t s = (total + n - 1) / n;
    *lo = k * s < total ? k * s : total;
    *hi = *lo + s < total ? *lo + s : total;
}

int dm_group_index(const dm_group *g, int r)
{
    int lo = 0, hi = g->n; /* a binary search: a 16384-rank group walked by every rank was O(ranks^2) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (g->ranks[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n && g->ranks[lo] == r ? lo : -1;
}

static dm_range rg(int64_t lo, int64_t hi) { return (dm_range){lo, hi}; }
static int empty(dm_range r) { return r.hi <= r.lo; }

/* 1 when dm_hold_op may change what rank r holds (else it leaves *h as it was: a broadcast of
 * whole weights, a reduce to another rank, a weight all-gather, a compute op but the updates). */
static int hold_writes(const dm_program *p, int r, const dm_op *op)
{
    switch (op->kind) {
    case DM_OP_BACKWARD: return p->nranks == 1;
    case DM_OP_REDUCE: return op->root == r;
    case DM_OP_BROADCAST: return op->parts > 1;
    case DM_OP_ALLGATHER: return op->payload == DM_PAYLOAD_GRADS;
    case DM_OP_ALLREDUCE: return op->payload != DM_PAYLOAD_GRAM; /* a split NS's Gram: no param's range */
    case DM_OP_REDUCESCATTER:
    case DM_OP_MUON_UPDATE:
    case DM_OP_ADAMW: return 1;
    default: return 0;
    }
}

void dm_hold_op(const dm_program *p, const int64_t *sz, int r, const dm_op *op, dm_hold *h)
{
    if (!hold_writes(p, r, op)) return;
    int k = 0;
    if (dm_op_is_collective(op->kind)) {
        if (op->group < 0 || op->group >= p->n_groups || (k = dm_group_index(&p->groups[op->group], r)) < 0) return;
    }
    int64_t total = 0;
    if (op->kind == DM_OP_REDUCESCATTER || op->parts > 1)
        for (int a = 0; a < op->n_params; a++) total += sz[op->params[a]];
    int64_t base = 0, slo = 0, shi = 0;
    if (op->kind == DM_OP_REDUCESCATTER) dm_flat_shard(total, p->groups[op->group].n, k, &slo, &shi);
    if (op->parts > 1) dm_flat_shard(total, op->parts, op->part, &slo, &shi); /* a part (program.h) */
    for (int a = 0; a < op->n_params; a++) {
        int64_t q = op->params[a], e = sz[q];
        /* the shard or part [slo, shi) of the flat buffer within this param (empty: none) */
        int64_t lo = slo > base ? slo : base, hi = shi < base + e ? shi : base + e;
        dm_range mine = lo < hi ? rg(lo - base, hi - base) : rg(0, 0);
        switch (op->kind) {
        case DM_OP_BACKWARD:
            if (p->nranks == 1) h->red[q] = rg(0, e);
            break;
        case DM_OP_REDUCE:
            if (op->root == r && op->parts > 1) { /* a part: that range, summed everywhere; a whole update */
                if (!empty(mine)) h->red[q] = mine;
                h->rs[q] = rg(0, 0);
            } else if (op->root == r) {
                h->red[q] = rg(0, e);
            }
            break;
        case DM_OP_ALLREDUCE: /* a part (HSDP's AdamW): that range, summed over the replicas */
            if (op->parts <= 1) h->red[q] = rg(0, e);
            else if (!empty(mine)) h->red[q] = mine;
            break;
        case DM_OP_BROADCAST: /* a part of the weights this rank now holds (HSDP) */
            if (op->parts > 1 && !empty(mine)) h->part[q] = mine;
            break;
        case DM_OP_REDUCESCATTER: h->red[q] = h->rs[q] = mine; break;
        case DM_OP_ALLGATHER:
            if (op->payload == DM_PAYLOAD_GRADS) h->red[q] = rg(0, e);
            break;
        case DM_OP_MUON_UPDATE: /* a split NS's part (program.h), else the shard or the whole */
            h->upd[q] = op->parts > 1 ? mine : empty(h->rs[q]) ? rg(0, e) : h->rs[q];
            break;
        case DM_OP_ADAMW:
            if (!empty(h->red[q])) h->upd[q] = h->red[q];
            break;
        default: break;
        }
        base += e;
    }
}

static void hull(dm_range *a, dm_range b)
{
    if (empty(b)) return;
    if (empty(*a)) *a = b;
    else {
        if (b.lo < a->lo) a->lo = b.lo;
        if (b.hi > a->hi) a->hi = b.hi;
    }
}

/* The walk of dm_state_ranges over rank r's ops into st and need (zero on entry) with the hold
 * scratch h (zero on entry, left zero), touched (when not NULL, room for n): the params whose st
 * or need it set, *n_touched of them, each once. */
static int state_walk(const dm_program *p, const int64_t *sz, int64_t n, int r, dm_range *st, unsigned char *need,
                      dm_hold *h, int64_t *touched, int64_t *n_touched, dm_err *err)
{
    const dm_rank_prog *rp = &p->ranks[r];
    int rc = 0, i = 0;
    int64_t nt = 0;
    for (; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        int state_op = op->kind == DM_OP_NS || op->kind == DM_OP_MUON_UPDATE || op->kind == DM_OP_ADAMW;
        if (!state_op && !hold_writes(p, r, op)) continue; /* nothing read: its params checked where
                                                              they are (a forward's hundreds of a
                                                              MoE layer's ids were most of the walk) */
        if ((rc = dm_op_check_params(op, r, i, n, err))) goto reset;
        if (dm_op_is_collective(op->kind) && (op->group < 0 || op->group >= p->n_groups)) {
            rc = dm_err_set(err, "program: rank %d op %d (%s): bad group %d", r, i, dm_op_kind_name(op->kind), op->group);
            goto reset;
        }
        dm_hold_op(p, sz, r, op, h);
        if (!state_op) continue;
        for (int k = 0; k < op->n_params; k++) {
            int64_t q = op->params[k];
            int fresh = empty(st[q]) && !(need && need[q]);
            if (op->kind == DM_OP_NS) { /* the whole matrix, or a split NS's part (its rows) */
                int64_t lo = 0, hi = sz[q];
                if (op->parts > 1) dm_flat_shard(sz[q], op->parts, op->part, &lo, &hi);
                hull(&st[q], rg(lo, hi));
            } else if (op->kind == DM_OP_MUON_UPDATE || !empty(h->red[q])) hull(&st[q], h->upd[q]);
            if (need) need[q] |= op->kind == DM_OP_NS ? 1 : op->kind == DM_OP_ADAMW ? 2 : 0;
            if (touched && fresh && (!empty(st[q]) || (need && need[q]))) touched[nt++] = q;
        }
    }
reset: /* the scratch back to zero: the params of the ops walked */
    for (int j = 0; j < i + (i < rp->n_ops); j++) {
        const dm_op *op = &rp->ops[j];
        if (!hold_writes(p, r, op)) continue;
        for (int k = 0; k < op->n_params; k++) {
            int64_t q = op->params[k];
            if (q < 0 || q >= n) continue;
            h->red[q] = h->rs[q] = h->upd[q] = h->part[q] = (dm_range){0, 0};
        }
    }
    if (n_touched) *n_touched = nt;
    return rc;
}

int dm_state_ranges(const dm_program *p, const int64_t *sz, int64_t n, int r, dm_range *st, unsigned char *need,
                    dm_err *err)
{
    if (r < 0 || r >= p->nranks) return dm_err_set(err, "program: rank %d is not in its %d ranks", r, p->nranks);
    dm_range *a = dm_calloc(4 * (size_t)(n > 0 ? n : 1), sizeof *a, err);
    if (!a) return -1;
    dm_hold h = {a, a + n, a + 2 * n, a + 3 * n};
    memset(st, 0, (size_t)(n > 0 ? n : 0) * sizeof *st);
    if (need) memset(need, 0, (size_t)(n > 0 ? n : 0));
    int rc = state_walk(p, sz, n, r, st, need, &h, NULL, NULL, err);
    free(a);
    return rc;
}

int dm_state_walk_init(dm_state_walk *w, int64_t n, dm_err *err)
{
    memset(w, 0, sizeof *w);
    size_t N = (size_t)(n > 0 ? n : 1);
    w->n = n;
    if (!(w->scratch = dm_calloc(4 * N, sizeof *w->scratch, err)) || !(w->st = dm_calloc(N, sizeof *w->st, err)) ||
        !(w->need = dm_calloc(N, 1, err)) || !(w->touched = dm_malloc(N * sizeof *w->touched, err))) {
        dm_state_walk_free(w);
        return -1;
    }
    return 0;
}

void dm_state_walk_free(dm_state_walk *w)
{
    free(w->scratch);
    free(w->st);
    free(w->need);
    free(w->touched);
    memset(w, 0, sizeof *w);
}

int dm_state_walk_rank(dm_state_walk *w, const dm_program *p, const int64_t *sz, int r, dm_err *err)
{
    for (int64_t j = 0; j < w->n_touched; j++) { /* the last rank's, cleared */
        w->st[w->touched[j]] = (dm_range){0, 0};
        w->need[w->touched[j]] = 0;
    }
    w->n_touched = 0;
    if (r < 0 || r >= p->nranks) return dm_err_set(err, "program: rank %d is not in its %d ranks", r, p->nranks);
    int64_t n = w->n;
    dm_hold h = {w->scratch, w->scratch + n, w->scratch + 2 * n, w->scratch + 3 * n};
    return state_walk(p, sz, n, r, w->st, w->need, &h, w->touched, &w->n_touched, err);
}
