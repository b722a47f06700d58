/* build.c: step-program generation (sched_build). Each strategy describes, per layer, the
 * collectives that fetch its weights before the forward and the collectives that carry its
 * gradients after the backward, plus the NS batches and updates each rank runs; one driver
 * turns that description into per-rank op lists with the overlap options (sched.h has the
 * program's shape). */
#define _GNU_SOURCE
#include "arena.h"
#include "memory.h"
#include "sched.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collcost.h"
#include "holds.h" /* dm_flat_shard, dm_group_index: the state rule's shards */

/* ---- growable arrays ----------------------------------------------------------------------- */

typedef struct vec {
    void *data;
    size_t n, cap, elem;
} vec;

static void *vec_push(vec *v, dm_err *err)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        void *d = dm_realloc(v->data, cap * v->elem, err);
        if (!d) return NULL;
        v->data = d;
        v->cap = cap;
    }
    return (char *)v->data + v->elem * v->n++;
}
#define VEC(T) {NULL, 0, 0, sizeof(T)}
#define AT(v, T, i) (((T *)(v).data)[i])

/* ---- the strategy's description ------------------------------------------------------------ */

typedef struct coll_desc {
    dm_op_kind kind;
    int group, root;
    double bytes;
    int layer;          /* op's layer (-1: several) */
    size_t p_first, p_n;/* params in the pool */
    /* HSDP's ordering (hsdp_pair): the collective of stage hs_stage of pair hs_pair (its index
     * among its layer's pairs); hs_record: each member's op id goes into the stage's slot of the
     * pair (b->hs_rec); hs_wait 1: the root waits on its own op of the stage before for the same
     * pair, unless it is hs_owner; 2: every member does; hs_skip_back: not in the Z3 re-fetch
     * (cross-node: the shard groups still hold what it brought) */
    int hs_wait, hs_record, hs_skip_back, hs_stage, hs_pair;
    int hs_owner;
    int part, parts;    /* the op's flat part (program.h); parts 0: all */
    dm_dtype dtype;     /* what the collective moves (the program's dtype) */
} coll_desc;

typedef struct ns_batch {
    int owner;          /* owner index (rank, or local rank when hierarchical); -1: every rank */
    int shape;
    int size;           /* matrices */
    dm_ns_algo algo;
    double us;          /* modelled NS time */
    int64_t elems;      /* parameters in the batch */
    int min_layer;      /* the batch is ready once this layer's gradients arrived */
    size_t m_first;     /* matrix indices in the batch pool */
    int split;          /* --ns-split: index of its split (bctx.split_*; one matrix, owner -1 and
                           its group's ranks run it), else -1 */
} ns_batch;

typedef struct bctx {
    int cut;                 /* dmuon over max_ops: assignment only (sched_opts.max_ops) */
    const dm_model *model;
    const dm_cluster *cl;
    const dm_costs *costs;
    const sched_opts *o;
    sched_report *rep;
    dm_err *err;
    dm_program *p;
    int nranks, gpn, nnodes, nowners, nlayers;
    double elt;                 /* bytes per weight/gradient element */
    dm_matrix *mats;            /* all roles, sorted by layer */
    int64_t nmats;
    int64_t *lay_first, *lay_n; /* matrices of each layer */
    double *lay_params, *lay_adamw;
    int world;
    int *node_group, *cross_group;
    /* HSDP (sched_opts.hsdp): shard groups of S consecutive ranks, R of them; column c = the
     * ranks c, c + S, ...; a global owner o's column is o % S */
    int hsdp, S, R;
    int gathers_lo;            /* the forward fetch's all-gathers ride comm-lo (fetch_gathers_lo) */
    int *fetch_hi_now, *fetch_hi_prev; /* with gathers_lo, per rank: its last comm-hi forward
                                          fetch op, and that before the layer being fetched (-1) */
    int *shard_group, *col_group;
    int *hs_rec;                /* [stage][rank * hs_pairs + pair]: a member's op of that stage */
    int hs_pairs;               /* the most (layer, owner) pairs of a layer */
    coll_topo aw_topo[3];       /* adamw_world's groups: world, a shard group, a column */
    int aw_topo_set;
    int *hs_ids, *hs_dep;       /* [rank]: an emitted collective's op ids; deps */
    /* shapes of Muon matrices */
    int n_shapes;
    int64_t (*shapes)[2];
    double *cost;               /* n_shapes x max_batch */
    dm_ns_algo *algo;           /* n_shapes x max_batch */
    /* description */
    vec fetch, grad;            /* coll_desc, grouped per layer */
    size_t *fetch_first, *fetch_n, *grad_first, *grad_n; /* per layer */
    vec pool;                   /* int64 params */
    vec batches;                /* ns_batch */
    /* the batches by owner (own_index, made before the emission; opt_items reads it): owner o's
     * at own_idx[own_off[o] .. own_off[o + 1]), then those of every rank (owner -1) and the split
     * ones at own_idx[own_off[nowners] .. own_off[nowners + 1]) */
    int *own_off, *own_idx;
    vec batch_mats;             /* int64 matrix indices */
    int adamw_sharded;          /* AdamW params: reduce-scatter + shard update (else all-reduce, full) */
    int muon_update_shard;      /* muon-fsdp: the update touches the rank's shard only */
    int shared_updates;         /* the naive strategies: sharded updates priced as an even share,
                                   the same on every rank (update_work), so that their ranks'
                                   lists stay one list (replicated_plan) */
    int eager;                  /* the PyTorch forms: NS ops launched kernel by kernel (dm_op.eager) */
    dm_stream opt_stream;       /* the optimizer ops' stream: compute, or compute-lo (ns_stream) */
    int fsdp_serial;            /* muon-fsdp as PyTorch runs it: each Muon gradient's all-gather in
                                   the optimizer step, after the previous matrix's update */
    int opt_after_grads;        /* muon-ddp as PyTorch runs it: the optimizer's loop starts when the
                                   backward returns, and DDP's backward returns (its stream waits)
                                   only when every gradient bucket's all-reduce is done */
    int z3;
    int publishing;             /* emit_publish is emitting: the collectives carry dm_op.publish */
    const int *publish_dep2;    /* ... and each rank's second dependency (emit_publish) */
    unsigned char *pub_in;      /* [param id]: a published fetch carries it (publish_marks), or NULL */
    unsigned char *pub_adamw;   /* [layer < publish]: its published fetch carries AdamW-updated params
                                   (their update then runs on compute-lo: emit_opt_item), or NULL */
    int emit_ranks;             /* ranks whose ops are emitted: 1 when every rank runs the same list
                                   (replicated_plan: the others share rank 0's, program.h), else all */
    /* the kernels of each layer's forward and backward (program works), and their sums */
    int *work_fwd, *work_bwd;
    double *fwd_flops, *bwd_flops, *fwd_bytes, *bwd_bytes;
    vec uw_k; /* the update op's kernel list update_work builds */
    /* rank_piece's layout, per matrix (index = id), filled a layer at a time on first use: the
     * first reduce-scatter of its layer's gradients that covers it (-1: none), its offset in that
     * op's flat buffer and the buffer's length */
    int64_t *pc_desc, *pc_base, *pc_total;
    unsigned char *pc_done; /* per layer */
    /* --ns-split (sched_opts.ns_split): the split matrices, their P ranks (a program group,
     * ascending: part j on ranks[j]), a member's modelled time, each iteration's gram all-reduce
     * collective id (-1 until its first member emits it), and per matrix index: 1 when split */
    int nsplit;
    int64_t *split_mat;
    int *split_group;
    double *split_us;
    int *split_coll;
    unsigned char *is_split;
    int nres;                   /* ranks reserved for the splits (the last nres, a block of P per
                                   split matrix), 0 when the splits share ranks with the balance;
                                   the balance then places the other matrices on the first
                                   nowners - nres ranks (its owner indices are those ranks) */
    /* emission bookkeeping, [rank * nlayers + layer] */
    int *fetch_lo, *fetch_hi, *bfetch_lo, *bfetch_hi, *grad_lo, *grad_hi, *fwd_id, *bwd_id;
} bctx;

static int push_params(bctx *b, const int64_t *ids, size_t n, size_t *first)
{
    *first = b->pool.n;
    for (size_t i = 0; i < n; i++) {
        int64_t *d = vec_push(&b->pool, b->err);
        if (!d) return -1;
        *d = ids[i];
    }
    return 0;
}

/* A collective's description appended to v, its params not yet set (NULL on error). */
static coll_desc *new_desc(bctx *b, vec *v, dm_op_kind kind, int group, int root, double bytes, int layer, size_t n)
{
    coll_desc *d = vec_push(v, b->err);
    if (!d) return NULL;
    d->kind = kind;
    d->group = group;
    d->root = root;
    d->bytes = bytes;
    d->layer = layer;
    d->p_n = n;
    d->hs_wait = d->hs_record = d->hs_skip_back = d->hs_stage = d->hs_pair = 0;
    d->hs_owner = -1;
    d->part = d->parts = 0;
    d->dtype = b->o->dtype;
    return d;
}

/* The description of a collective of params ids[0..n), appended to v: its params pooled once at
 * *pf (SIZE_MAX: not yet; set here), so that the descriptions of the same params share one copy
 * (HSDP's pair has a collective per shard group, over a hundred at 1024 ranks). */
static int add_desc_pooled(bctx *b, vec *v, dm_op_kind kind, int group, int root, double bytes, int layer,
                           const int64_t *ids, size_t n, size_t *pf)
{
    coll_desc *d = new_desc(b, v, kind, group, root, bytes, layer, n);
    if (!d || (*pf == SIZE_MAX && push_params(b, ids, n, pf))) return -1;
    d->p_first = *pf;
    return 0;
}

/* The same with a copy of its own. */
static int add_desc(bctx *b, vec *v, dm_op_kind kind, int group, int root, double bytes, int layer,
                    const int64_t *ids, size_t n)
{
    size_t pf = SIZE_MAX;
    return add_desc_pooled(b, v, kind, group, root, bytes, layer, ids, n, &pf);
}

static int shape_of(const bctx *b, const dm_matrix *m)
{
    int64_t r = m->rows < m->cols ? m->rows : m->cols, c = m->rows < m->cols ? m->cols : m->rows;
    for (int s = 0; s < b->n_shapes; s++)
        if (b->shapes[s][0] == r && b->shapes[s][1] == c) return s;
    return -1;
}

/* ---- setup --------------------------------------------------------------------------------- */

static int setup(bctx *b)
{
    const dm_model *m = b->model;
    dm_err *err = b->err;
    b->nlayers = m->n_layers > 0 ? m->n_layers : 1;
    if (dm_model_matrices(m, -1, &b->mats, &b->nmats, err)) return -1;
    size_t L = (size_t)b->nlayers;
    if (!(b->lay_first = dm_calloc(L, sizeof *b->lay_first, err)) || !(b->lay_n = dm_calloc(L, sizeof *b->lay_n, err)) ||
        !(b->lay_params = dm_calloc(L, sizeof *b->lay_params, err)) ||
        !(b->lay_adamw = dm_calloc(L, sizeof *b->lay_adamw, err)))
        return -1;
    for (int64_t i = b->nmats - 1; i >= 0; i--) {
        const dm_matrix *x = &b->mats[i];
        if (x->layer < 0 || x->layer >= b->nlayers) return dm_err_set(err, "sched: matrix %lld has layer %d", (long long)i, x->layer);
        if (i + 1 < b->nmats && b->mats[i + 1].layer < x->layer) return dm_err_set(err, "sched: matrices not in layer order");
        b->lay_first[x->layer] = i;
        b->lay_n[x->layer]++;
        b->lay_params[x->layer] += (double)(x->rows * x->cols);
        if (x->role == DM_ROLE_ADAMW) b->lay_adamw[x->layer] += (double)(x->rows * x->cols);
    }
    /* shapes */
    if (!(b->shapes = dm_malloc((size_t)(b->nmats ? b->nmats : 1) * sizeof *b->shapes, err))) return -1;
    for (int64_t i = 0; i < b->nmats; i++) {
        const dm_matrix *x = &b->mats[i];
        if (x->role != DM_ROLE_MUON || shape_of(b, x) >= 0) continue;
        b->shapes[b->n_shapes][0] = x->rows < x->cols ? x->rows : x->cols;
        b->shapes[b->n_shapes][1] = x->rows < x->cols ? x->cols : x->rows;
        b->n_shapes++;
    }
    int MB = b->o->max_batch;
    size_t nc = (size_t)(b->n_shapes ? b->n_shapes : 1) * MB;
    if (!(b->cost = dm_malloc(nc * sizeof *b->cost, err)) || !(b->algo = dm_malloc(nc * sizeof *b->algo, err))) return -1;
    const dm_gpu *gpu = b->cl->gpu;
    for (int s = 0; s < b->n_shapes; s++)
        for (int k = 1; k <= MB; k++) {
            dm_cost_source src;
            dm_ns_algo a;
            double us;
            if (b->o->ns_algo < 0) {
                a = dm_costs_best_algo(b->costs, gpu, b->shapes[s][0], b->shapes[s][1], k, NULL);
            } else {
                a = (dm_ns_algo)b->o->ns_algo;
            }
            /* the simulator's price of the op (kernels, calibrated scale, gradient check and momentum) */
            dm_op o = dm_op_init(DM_OP_NS, DM_STREAM_COMPUTE); /* its orientations unknown here: wide */
            o.m = b->shapes[s][0], o.n = b->shapes[s][1], o.batch = k, o.algo = a, o.eager = b->eager;
            us = dm_ns_op_us(b->costs, b->cl, &o, &src);
            b->cost[(size_t)s * MB + k - 1] = us;
            b->algo[(size_t)s * MB + k - 1] = a;
            if (b->rep) b->rep->cost_src_counts[src]++;
        }
    /* groups: world first, then nodes, then cross-node (same local rank) */
    int *rk = dm_malloc((size_t)b->nranks * sizeof *rk, err);
    if (!rk) return -1;
    for (int r = 0; r < b->nranks; r++) rk[r] = r;
    b->world = dm_program_group(b->p, rk, b->nranks, err);
    b->node_group = dm_malloc((size_t)b->nnodes * sizeof *b->node_group, err);
    b->cross_group = dm_malloc((size_t)b->gpn * sizeof *b->cross_group, err);
    int rc = b->world < 0 || !b->node_group || !b->cross_group ? -1 : 0;
    for (int nd = 0; rc == 0 && nd < b->nnodes; nd++) {
        int n = 0;
        for (int r = nd * b->gpn; r < (nd + 1) * b->gpn && r < b->nranks; r++) rk[n++] = r;
        if ((b->node_group[nd] = dm_program_group(b->p, rk, n, err)) < 0) rc = -1;
    }
    for (int g = 0; rc == 0 && g < b->gpn; g++) {
        int n = 0;
        for (int r = g; r < b->nranks; r += b->gpn) rk[n++] = r;
        if ((b->cross_group[g] = dm_program_group(b->p, rk, n, err)) < 0) rc = -1;
    }
    if (rc == 0 && b->hsdp) { /* shard groups, then columns (== node and cross groups when S is gpn) */
        b->shard_group = dm_malloc((size_t)b->R * sizeof *b->shard_group, err);
        b->col_group = dm_malloc((size_t)b->S * sizeof *b->col_group, err);
        b->hs_ids = dm_malloc((size_t)b->nranks * sizeof *b->hs_ids, err);
        b->hs_dep = dm_malloc((size_t)b->nranks * sizeof *b->hs_dep, err);
        if (!b->shard_group || !b->col_group || !b->hs_ids || !b->hs_dep) rc = -1;
        for (int k = 0; rc == 0 && k < b->R; k++) {
            for (int i = 0; i < b->S; i++) rk[i] = k * b->S + i;
            if ((b->shard_group[k] = dm_program_group(b->p, rk, b->S, err)) < 0) rc = -1;
        }
        for (int c = 0; rc == 0 && c < b->S; c++) {
            for (int k = 0; k < b->R; k++) rk[k] = k * b->S + c;
            if ((b->col_group[c] = dm_program_group(b->p, rk, b->R, err)) < 0) rc = -1;
        }
    }
    free(rk);
    if (rc) return -1;
    size_t RL = (size_t)b->nranks * L;
    int **arrs[] = {&b->fetch_lo, &b->fetch_hi, &b->bfetch_lo, &b->bfetch_hi, &b->grad_lo, &b->grad_hi, &b->fwd_id, &b->bwd_id};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        if (!(*arrs[i] = dm_malloc(RL * sizeof **arrs[i], err))) return -1;
        for (size_t k = 0; k < RL; k++) (*arrs[i])[k] = -1;
    }
    if (!(b->fetch_first = dm_calloc(L, sizeof(size_t), err)) || !(b->fetch_n = dm_calloc(L, sizeof(size_t), err)) ||
        !(b->grad_first = dm_calloc(L, sizeof(size_t), err)) || !(b->grad_n = dm_calloc(L, sizeof(size_t), err)))
        return -1;
    return 0;
}

static void free_ctx(bctx *b)
{
    free(b->mats);
    free(b->lay_first);
    free(b->lay_n);
    free(b->lay_params);
    free(b->lay_adamw);
    free(b->node_group);
    free(b->cross_group);
    free(b->shard_group);
    free(b->col_group);
    free(b->hs_ids);
    free(b->hs_dep);
    free(b->hs_rec);
    free(b->shapes);
    free(b->cost);
    free(b->algo);
    free(b->fetch.data);
    free(b->grad.data);
    free(b->fetch_first);
    free(b->fetch_n);
    free(b->grad_first);
    free(b->grad_n);
    free(b->pool.data);
    free(b->batches.data);
    free(b->own_off);
    free(b->own_idx);
    free(b->batch_mats.data);
    free(b->fetch_hi_now);
    free(b->split_mat);
    free(b->split_group);
    free(b->split_us);
    free(b->split_coll);
    free(b->is_split);
    free(b->fetch_lo);
    free(b->fetch_hi);
    free(b->bfetch_lo);
    free(b->bfetch_hi);
    free(b->grad_lo);
    free(b->grad_hi);
    free(b->fwd_id);
    free(b->bwd_id);
    free(b->work_fwd);
    free(b->work_bwd);
    free(b->uw_k.data);
    free(b->pc_desc);
    free(b->pc_done);
    free(b->fwd_flops);
    free(b->bwd_flops);
    free(b->fwd_bytes);
    free(b->bwd_bytes);
}

/* Every layer's forward and backward kernels (core/workload.h) into the program's works. */
static int setup_works(bctx *b)
{
    size_t L = (size_t)b->nlayers;
    dm_workload_opts wo = {b->o->tokens, b->o->seq_len, (int)b->elt, b->p->causal_tile, !b->p->layer_passes};
    if (dm_workload_check(b->model, &wo, b->err)) return -1;
    if (!(b->work_fwd = dm_malloc(L * sizeof *b->work_fwd, b->err)) ||
        !(b->work_bwd = dm_malloc(L * sizeof *b->work_bwd, b->err)) ||
        !(b->fwd_flops = dm_calloc(L, sizeof *b->fwd_flops, b->err)) ||
        !(b->bwd_flops = dm_calloc(L, sizeof *b->bwd_flops, b->err)) ||
        !(b->fwd_bytes = dm_calloc(L, sizeof *b->fwd_bytes, b->err)) ||
        !(b->bwd_bytes = dm_calloc(L, sizeof *b->bwd_bytes, b->err)))
        return -1;
    for (size_t l = 0; l < L; l++) {
        dm_layer_work w;
        if (dm_layer_work_build(b->model, b->mats, b->nmats, (int)l, &wo, &w, b->err)) return -1;
        b->work_fwd[l] = dm_program_add_work(b->p, w.fwd, w.n_fwd, b->err);
        b->work_bwd[l] = b->work_fwd[l] < 0 ? -1 : dm_program_add_work(b->p, w.bwd, w.n_bwd, b->err);
        b->fwd_flops[l] = w.fwd_flops, b->bwd_flops[l] = w.bwd_flops;
        b->fwd_bytes[l] = w.fwd_bytes, b->bwd_bytes[l] = w.bwd_bytes;
        dm_layer_work_free(&w);
        if (b->work_bwd[l] < 0) return -1;
    }
    return 0;
}

/* ---- per-layer pieces shared by strategies ---------------------------------------------- */

/* ids of the matrices of layer l with role r (r < 0: all) into buf; returns the count */
static size_t layer_ids(const bctx *b, int l, int r, int64_t *buf)
{
    size_t n = 0;
    for (int64_t i = b->lay_first[l]; i < b->lay_first[l] + b->lay_n[l]; i++)
        if (r < 0 || (int)b->mats[i].role == r) buf[n++] = b->mats[i].id;
    return n;
}

static double ids_elems(const bctx *b, const int64_t *ids, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) e += (double)(b->mats[ids[i]].rows * b->mats[ids[i]].cols);
    return e;
}

/* NS batch over matrix indices idx[0..n) (one shape) for `owner`. */
static int add_batch(bctx *b, int owner, const int64_t *idx, int n)
{
    ns_batch *nb = vec_push(&b->batches, b->err);
    if (!nb) return -1;
    int MB = b->o->max_batch;
    nb->owner = owner;
    nb->shape = shape_of(b, &b->mats[idx[0]]);
    nb->size = n;
    nb->algo = b->algo[(size_t)nb->shape * MB + n - 1];
    nb->us = b->cost[(size_t)nb->shape * MB + n - 1];
    nb->elems = 0;
    nb->min_layer = b->mats[idx[0]].layer;
    nb->m_first = b->batch_mats.n;
    nb->split = -1;
    for (int i = 0; i < n; i++) {
        int64_t *d = vec_push(&b->batch_mats, b->err);
        if (!d) return -1;
        *d = idx[i];
        nb->elems += b->mats[idx[i]].rows * b->mats[idx[i]].cols;
        if (b->mats[idx[i]].layer < nb->min_layer) nb->min_layer = b->mats[idx[i]].layer;
    }
    return 0;
}

/* Every rank runs NS on every Muon matrix: batches of one shape, in gradient-arrival order
 * (last layer first), at most max_batch. */
static int batches_everywhere(bctx *b)
{
    int64_t *idx = dm_malloc((size_t)(b->nmats ? b->nmats : 1) * sizeof *idx, b->err);
    if (!idx) return -1;
    for (int s = 0; s < b->n_shapes; s++) {
        int n = 0;
        for (int64_t i = b->nmats - 1; i >= 0; i--)
            if (b->mats[i].role == DM_ROLE_MUON && shape_of(b, &b->mats[i]) == s) idx[n++] = i;
        for (int i = 0; i < n; i += b->o->max_batch) {
            int k = n - i < b->o->max_batch ? n - i : b->o->max_batch;
            if (add_batch(b, -1, idx + i, k)) {
                free(idx);
                return -1;
            }
        }
    }
    free(idx);
    return 0;
}

/* Elements [lo, hi) of flat part k of n over T elements (the reduce-scatter layout, program.h). */
static void flat_part(double T, int n, int k, double *lo, double *hi)
{
    double s = ceil(T / n);
    *lo = fmin(T, k * s);
    *hi = fmin(T, (k + 1) * s);
}

/* HSDP: 1 when layer l's AdamW-role parameters (bytes) are sharded over all ranks, 0 when in the
 * shard groups with each part all-reduced over its column (sched_opts.hsdp_adamw; auto: the
 * scheme whose all-gather and reduce, as the collective model prices them alone (collcost.h),
 * cost less). The replicas' all-reduce moves twice a reduce-scatter's bus bytes, each column over
 * its own NIC: for a large tensor (an embedding) the world's reduce-scatter is the cheaper; for
 * small ones the latency of a ring over every rank is. The three groups' topologies (world, a
 * shard group, a column: all shard groups and columns alike) are found once. -1 (err set) on
 * error. */
static int adamw_world(bctx *b, double bytes)
{
    if (b->o->hsdp_adamw != SCHED_HSDP_ADAMW_AUTO) return b->o->hsdp_adamw == SCHED_HSDP_ADAMW_WORLD;
    coll_topo *t = b->aw_topo; /* world, shard group, column */
    if (!b->aw_topo_set) {
        const int gs[3] = {b->world, b->shard_group[0], b->col_group[0]};
        for (int i = 0; i < 3; i++)
            if (collcost_topo(b->cl, b->p->groups[gs[i]].ranks, b->p->groups[gs[i]].n, &t[i], b->err)) return -1;
        b->aw_topo_set = 1;
    }
    double world = collcost_time_us(DM_OP_ALLGATHER, COLL_ALGO_AUTO, bytes, &t[0]) +
                   collcost_time_us(DM_OP_REDUCESCATTER, COLL_ALGO_AUTO, bytes, &t[0]),
           replicas = collcost_time_us(DM_OP_ALLGATHER, COLL_ALGO_AUTO, bytes, &t[1]) +
                      collcost_time_us(DM_OP_REDUCESCATTER, COLL_ALGO_AUTO, bytes, &t[1]) +
                      collcost_time_us(DM_OP_ALLREDUCE, COLL_ALGO_AUTO, ceil(bytes / b->S / b->elt) * b->elt, &t[2]);
    return world < replicas;
}

/* The AdamW-role parameters of layer l: reduce-scatter/all-gather (sharded) or all-reduce; under
 * HSDP sharded in each shard group (reduce-scatter, all-gather) and each part all-reduced over
 * its column (the replicas), or sharded over all ranks as the flat plan (adamw_world). */
static int adamw_part(bctx *b, int l, int64_t *ids)
{
    size_t n = layer_ids(b, l, DM_ROLE_ADAMW, ids);
    if (!n) return 0;
    double bytes = ids_elems(b, ids, n) * b->elt;
    int world = b->hsdp && b->R > 1 ? adamw_world(b, bytes) : 0;
    if (world < 0) return -1;
    if (world && b->rep) b->rep->hsdp_adamw_world++;
    if (b->hsdp && b->R > 1 && !world) { /* DMuon's HSDP: sharded in the shard group, replicated across */
        int pair = b->hs_pairs - 1; /* the slot after the owners' (hsdp_pair) */
        size_t pf = SIZE_MAX; /* the layer's params in the pool, once */
        for (int k = 0; k < b->R; k++) {
            if (add_desc_pooled(b, &b->fetch, DM_OP_ALLGATHER, b->shard_group[k], -1, bytes, l, ids, n, &pf) ||
                add_desc_pooled(b, &b->grad, DM_OP_REDUCESCATTER, b->shard_group[k], -1, bytes, l, ids, n, &pf))
                return -1;
            coll_desc *d = &AT(b->grad, coll_desc, b->grad.n - 1);
            d->hs_record = 1, d->hs_stage = 0, d->hs_pair = pair;
        }
        for (int j = 0; j < b->S; j++) { /* part j summed over the replicas: the column's all-reduce */
            double lo, hi;
            flat_part(ids_elems(b, ids, n), b->S, j, &lo, &hi);
            if (hi <= lo) continue;
            if (add_desc_pooled(b, &b->grad, DM_OP_ALLREDUCE, b->col_group[j], -1, (hi - lo) * b->elt, l, ids, n, &pf))
                return -1;
            coll_desc *d = &AT(b->grad, coll_desc, b->grad.n - 1);
            d->hs_wait = 2, d->hs_stage = 1, d->hs_pair = pair, d->part = j, d->parts = b->S;
        }
        return 0;
    }
    if (b->adamw_sharded || world)
        return add_desc(b, &b->fetch, DM_OP_ALLGATHER, b->world, -1, bytes, l, ids, n) ||
               add_desc(b, &b->grad, DM_OP_REDUCESCATTER, b->world, -1, bytes, l, ids, n) ? -1 : 0;
    return 0; /* all-reduced together with the layer's Muon gradients by the caller */
}

static void mark_layer(bctx *b, int l, size_t f0, size_t g0)
{
    b->fetch_first[l] = f0;
    b->fetch_n[l] = b->fetch.n - f0;
    b->grad_first[l] = g0;
    b->grad_n[l] = b->grad.n - g0;
}

/* ---- strategies: descriptions ------------------------------------------------------------- */

static int describe_adamw(bctx *b, int64_t *ids)
{
    for (int l = 0; l < b->nlayers; l++) {
        size_t f0 = b->fetch.n, g0 = b->grad.n, n = layer_ids(b, l, -1, ids);
        if (n) {
            double bytes = ids_elems(b, ids, n) * b->elt;
            if (add_desc(b, &b->fetch, DM_OP_ALLGATHER, b->world, -1, bytes, l, ids, n) ||
                add_desc(b, &b->grad, DM_OP_REDUCESCATTER, b->world, -1, bytes, l, ids, n))
                return -1;
        }
        mark_layer(b, l, f0, g0);
    }
    return 0;
}

static int describe_ddp(bctx *b, int64_t *ids)
{
    for (int l = 0; l < b->nlayers; l++) {
        size_t f0 = b->fetch.n, g0 = b->grad.n, n = layer_ids(b, l, -1, ids);
        if (n && add_desc(b, &b->grad, DM_OP_ALLREDUCE, b->world, -1, ids_elems(b, ids, n) * b->elt, l, ids, n))
            return -1;
        mark_layer(b, l, f0, g0);
    }
    return batches_everywhere(b);
}

static int describe_fsdp(bctx *b, int64_t *ids)
{
    for (int l = 0; l < b->nlayers; l++) {
        size_t f0 = b->fetch.n, g0 = b->grad.n, n = layer_ids(b, l, -1, ids);
        if (n) {
            double bytes = ids_elems(b, ids, n) * b->elt;
            if (add_desc(b, &b->fetch, DM_OP_ALLGATHER, b->world, -1, bytes, l, ids, n) ||
                add_desc(b, &b->grad, DM_OP_REDUCESCATTER, b->world, -1, bytes, l, ids, n))
                return -1;
            size_t nm = b->fsdp_serial ? 0 : layer_ids(b, l, DM_ROLE_MUON, ids); /* serial: emit_program */
            if (nm && add_desc(b, &b->grad, DM_OP_ALLGATHER, b->world, -1, ids_elems(b, ids, nm) * b->elt, l, ids, nm))
                return -1;
        }
        mark_layer(b, l, f0, g0);
    }
    return batches_everywhere(b);
}

static int cmp_rr(const void *x, const void *y, void *ctx)
{
    const dm_matrix *m = ctx;
    const dm_matrix *a = &m[*(const int64_t *)x], *c = &m[*(const int64_t *)y];
    int64_t ea = a->rows * a->cols, ec = c->rows * c->cols;
    if (ea != ec) return ea > ec ? -1 : 1;
    return (a->id > c->id) - (a->id < c->id);
}

/* modded-nanogpt: gradients all-reduced; Muon matrices sorted by size and cut into chunks of
 * `nranks`; matrix j of a chunk is NS'd by rank j; one all-gather per chunk (padded to the
 * chunk's largest matrix) before the next forward. */
static int describe_rr(bctx *b, int64_t *ids)
{
    int64_t *idx = dm_malloc((size_t)(b->nmats ? b->nmats : 1) * sizeof *idx, b->err);
    int n = 0;
    if (!idx) return -1;
    for (int64_t i = 0; i < b->nmats; i++)
        if (b->mats[i].role == DM_ROLE_MUON) idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_rr, b->mats);
    size_t f0 = b->fetch.n;
    for (int c = 0; c < n; c += b->nranks) {
        int k = n - c < b->nranks ? n - c : b->nranks;
        double biggest = 0;
        for (int j = 0; j < k; j++) {
            const dm_matrix *x = &b->mats[idx[c + j]];
            ids[j] = x->id;
            biggest = fmax(biggest, (double)(x->rows * x->cols));
            if (add_batch(b, j, &idx[c + j], 1)) {
                free(idx);
                return -1;
            }
        }
        if (add_desc(b, &b->fetch, DM_OP_ALLGATHER, b->world, -1, biggest * b->elt * b->nranks, -1, ids, (size_t)k)) {
            free(idx);
            return -1;
        }
    }
    free(idx);
    for (int l = 0; l < b->nlayers; l++) {
        size_t g0 = b->grad.n, nl = layer_ids(b, l, -1, ids);
        if (nl && add_desc(b, &b->grad, DM_OP_ALLREDUCE, b->world, -1, ids_elems(b, ids, nl) * b->elt, l, ids, nl))
            return -1;
        /* every chunk all-gather belongs to layer 0's fetch: the forward waits for all of them */
        mark_layer(b, l, l == 0 ? f0 : b->fetch.n, g0);
    }
    return 0;
}

/* HSDP's stages for the Muon pairs (hsdp_pair): several replica groups and not hsdp_muon world
 * (whose pairs go over all ranks, as the flat plan's) */
static int muon_stages(const bctx *b) { return b->hsdp && b->R > 1 && b->o->hsdp_muon != SCHED_HSDP_MUON_WORLD; }

/* The objective's communication terms (sched.h, sched_problem) from the collective cost model
 * (collcost.h) on this cluster, times the comm weight; *colls: collectives per (layer, owner)
 * pair. Flat: one broadcast and one reduce over the world group per pair, on every rank in
 * series. Hierarchical: one of each per node over the node's GPUs (every rank in its node's),
 * plus, between nodes, one all-reduce among the owner's same-local-rank GPUs: its latency and
 * bytes on the owner's chain. HSDP: one of each per shard group, plus the owner's column
 * reduce and fp32 publish on the owner's chain. */
static int comm_terms(bctx *b, sched_problem *pr, int *colls)
{
    double w = b->o->comm_weight;
    /* HSDP with its Muon pairs over all ranks (hsdp_muon world): the flat plan's terms */
    int hs = muon_stages(b);
    int hier = b->o->hierarchical, n = hier ? b->gpn : hs ? b->S : b->nranks, rc = -1;
    int *rk = dm_malloc((size_t)(b->nranks > 0 ? b->nranks : 1) * sizeof *rk, b->err);
    coll_topo t;
    *colls = 2;
    if (!rk) return -1;
    for (int r = 0; r < n; r++) rk[r] = r;
    if (collcost_topo(b->cl, rk, n, &t, b->err)) goto done;
    pr->pair_us = w * (collcost_time_us(DM_OP_BROADCAST, COLL_ALGO_RING, 0, &t) +
                       collcost_time_us(DM_OP_REDUCE, COLL_ALGO_RING, 0, &t));
    if (hs) { /* the owner's column: its reduce and its publish */
        int nc = 0;
        for (int r = 0; r < b->nranks; r += b->S) rk[nc++] = r;
        if (collcost_topo(b->cl, rk, nc, &t, b->err)) goto done;
        double big = 1e8;
        double lat = collcost_time_us(DM_OP_REDUCE, COLL_ALGO_RING, 0, &t) +
                     collcost_time_us(DM_OP_BROADCAST, COLL_ALGO_RING, 0, &t);
        double per = (collcost_time_us(DM_OP_REDUCE, COLL_ALGO_RING, big, &t) +
                      collcost_time_us(DM_OP_BROADCAST, COLL_ALGO_RING, big, &t) - lat) / big;
        pr->owner_pair_us = w * lat;
        pr->owner_elem_us = w * per * b->elt;
        *colls = 2 * b->R + 2;
    } else if (hier && b->nnodes > 1) {
        int nc = 0;
        for (int r = 0; r < b->nranks; r += b->gpn) rk[nc++] = r;
        if (collcost_topo(b->cl, rk, nc, &t, b->err)) goto done;
        double muon = 0;
        for (int64_t i = 0; i < b->nmats; i++)
            if (b->mats[i].role == DM_ROLE_MUON) muon += (double)(b->mats[i].rows * b->mats[i].cols);
        double typical = muon * b->elt / (b->nlayers * (double)b->gpn), big = 1e8; /* bytes of a mean pair */
        coll_algo algo = collcost_pick(DM_OP_ALLREDUCE, COLL_ALGO_AUTO, typical, &t);
        double lat = collcost_time_us(DM_OP_ALLREDUCE, algo, 0, &t);
        pr->owner_pair_us = w * lat;
        pr->owner_elem_us = w * (collcost_time_us(DM_OP_ALLREDUCE, algo, big, &t) - lat) / big * b->elt;
        *colls = 2 * b->nnodes + 1;
    } else if (hier) {
        *colls = 2 * b->nnodes;
    }
    rc = 0;
done:
    free(rk);
    return rc;
}

/* Build the assignment problem over the Muon matrices and solve it with the chosen balance. */
static int assign_owners(bctx *b, sched_assign *a, sched_problem *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->n_shapes = b->n_shapes;
    pr->max_batch = b->o->max_batch;
    pr->cost = b->cost;
    pr->nowners = b->nowners - b->nres;
    pr->threshold_elems = b->o->batch_threshold;
    if (!(pr->shape_elems = dm_malloc((size_t)(b->n_shapes ? b->n_shapes : 1) * sizeof *pr->shape_elems, b->err)) ||
        !(pr->items = dm_malloc((size_t)(b->nmats ? b->nmats : 1) * sizeof *pr->items, b->err)))
        return -1;
    for (int s = 0; s < b->n_shapes; s++) pr->shape_elems[s] = b->shapes[s][0] * b->shapes[s][1];
    for (int64_t i = 0; i < b->nmats; i++)
        if (b->mats[i].role == DM_ROLE_MUON && !(b->is_split && b->is_split[i])) {
            sched_item *it = &pr->items[pr->n_items++];
            it->shape = shape_of(b, &b->mats[i]);
            it->layer = b->mats[i].layer;
            it->id = i; /* index into mats (== matrix id) */
        }
    int colls = 2;
    if (b->o->comm_weight > 0 && comm_terms(b, pr, &colls)) return -1;
    double t0 = sched_wall_s();
    int rc;
    double bound = 0;
    sched_report *rep = b->rep;
    char status[160] = "";
    const sched_assign *in = b->o->assign_in;
    if (in) { /* an earlier build's, with these options: the same problem, the same items */
        rc = sched_assign_copy(pr, in, a, b->err);
    } else if (b->o->balance == SCHED_BAL_MILP) {
        rc = sched_assign_milp(pr, b->o->milp_time_s, b->o->verbose, a, status, sizeof status, &bound, b->err);
    } else if (b->o->balance == SCHED_BAL_RR) {
        rc = sched_assign_rr(pr, a, b->err);
        snprintf(status, sizeof status, "round-robin");
    } else {
        rc = sched_assign_lpt(pr, a, b->err);
        snprintf(status, sizeof status, "lpt");
    }
    if (rc) return -1;
    if (rep) {
        /* built on an earlier build's assignment: the solver's findings (status, time, bounds) as
         * that build reported them, not computed again */
        const sched_report *ir = in ? b->o->assign_in_rep : NULL;
        rep->solver_s = ir ? ir->solver_s : sched_wall_s() - t0;
        snprintf(rep->solver_status, sizeof rep->solver_status, "%s", ir ? ir->solver_status : status);
        rep->lower_bound_us = ir ? ir->lower_bound_us : sched_lower_bound(pr);
        rep->shape_bound_us = ir ? ir->shape_bound_us : sched_two_shape_bound(pr);
        snprintf(rep->method, sizeof rep->method, "%s", a->method ? a->method : "?");
        rep->objective_us = a->objective_us;
        rep->pairs = a->pairs;
        rep->comm_us = pr->pair_us * a->pairs;
        rep->colls_per_pair = colls;
        rep->comm_weight = b->o->comm_weight;
        if (ir) {
            rep->objective_bound_us = ir->objective_bound_us;
            rep->lpt_max_us = ir->lpt_max_us;
            rep->lpt_objective_us = ir->lpt_objective_us;
            return 0;
        }
        double proven = fmax(bound, sched_comm_bound(pr, fmax(rep->lower_bound_us, rep->shape_bound_us)));
        rep->objective_bound_us = fmin(proven, a->objective_us);
        if (b->o->balance == SCHED_BAL_MILP) {
            sched_assign l;
            if (sched_assign_lpt(pr, &l, b->err)) return -1;
            rep->lpt_max_us = l.makespan_us;
            rep->lpt_objective_us = l.objective_us;
            sched_assign_free(&l);
        } else if (b->o->balance == SCHED_BAL_LPT) {
            rep->lpt_max_us = a->makespan_us;
            rep->lpt_objective_us = a->objective_us;
        }
    }
    return 0;
}


/* HSDP's collectives of one (layer, owner o) pair with R > 1 replicas, built in passes over a
 * layer's owners so that a pass's collectives of different owners and columns (disjoint ranks,
 * their own NICs) run side by side. The cross-node stage is split by flat part over the shard
 * group's S columns, so every GPU's NIC carries 1/S of each pair, as the flat plan's rings use
 * every NIC. Fetch (the previous step's update, ahead of this step's forward, as the flat
 * plan's broadcast): pass 0, o broadcasts the weights in its shard group; pass 1, each column j
 * broadcasts part j from o's shard group to the other replicas (the publish); pass 2, every
 * other shard group all-gathers the parts its members received. Gradients: pass 0, a
 * reduce-scatter in every shard group (member j: part j summed over the group); pass 1, each
 * column j reduces part j to o's shard group; pass 3, an all-gather of those parts in o's
 * shard group brings o the whole reduced gradient. Each collective waits on its members' own
 * ops of the stage before for the same pair (hs_stage, hs_pair); emit_fetch and emit_grad put
 * the cross-node parts on the other comm stream. */
static int hsdp_pair(bctx *b, int pass, int o, int pair, double elems, int l, const int64_t *ids, size_t n)
{
    int S = b->S, ro = o / b->S;
    double bytes = elems * b->elt;
    size_t pf = SIZE_MAX; /* the pair's params in the pool, once */
    coll_desc *d;
#define HS_LAST(v) (&AT(v, coll_desc, (v).n - 1))
    if (pass == 0) {
        if (add_desc_pooled(b, &b->fetch, DM_OP_BROADCAST, b->shard_group[ro], o, bytes, l, ids, n, &pf)) return -1;
        d = HS_LAST(b->fetch);
        d->hs_record = 1, d->hs_stage = 0, d->hs_pair = pair;
    }
    for (int j = 0; j < S && pass == 1; j++) {
        double lo, hi;
        flat_part(elems, S, j, &lo, &hi);
        if (hi <= lo) continue; /* fewer elements than columns */
        if (add_desc_pooled(b, &b->fetch, DM_OP_BROADCAST, b->col_group[j], ro * S + j, (hi - lo) * b->elt, l, ids,
                            n, &pf))
            return -1;
        d = HS_LAST(b->fetch);
        d->hs_wait = 1, d->hs_owner = o, d->hs_record = 1, d->hs_skip_back = 1, d->part = j, d->parts = S;
        d->hs_stage = 1, d->hs_pair = pair;
        if (add_desc_pooled(b, &b->grad, DM_OP_REDUCE, b->col_group[j], ro * S + j, (hi - lo) * b->elt, l, ids, n, &pf))
            return -1;
        d = HS_LAST(b->grad);
        d->hs_wait = 2, d->hs_record = 1, d->part = j, d->parts = S, d->hs_stage = 1, d->hs_pair = pair;
    }
    for (int k = 0; pass == 2 && k < b->R; k++) { /* the other shard groups rebuild it from the parts */
        if (k == ro) continue;
        if (add_desc_pooled(b, &b->fetch, DM_OP_ALLGATHER, b->shard_group[k], -1, bytes, l, ids, n, &pf)) return -1;
        d = HS_LAST(b->fetch);
        d->hs_wait = 2, d->hs_stage = 2, d->hs_pair = pair;
    }
    if (pass == 0) /* the gradients' first stage, in every shard group */
        for (int k = 0; k < b->R; k++) {
            if (add_desc_pooled(b, &b->grad, DM_OP_REDUCESCATTER, b->shard_group[k], -1, bytes, l, ids, n, &pf))
                return -1;
            d = HS_LAST(b->grad);
            d->hs_record = 1, d->hs_stage = 0, d->hs_pair = pair;
        }
    if (pass == 3) {
        if (add_desc_pooled(b, &b->grad, DM_OP_ALLGATHER, b->shard_group[ro], -1, bytes, l, ids, n, &pf)) return -1;
        d = HS_LAST(b->grad);
        d->hs_wait = 2, d->hs_stage = 2, d->hs_pair = pair;
    }
#undef HS_LAST
    return 0;
}

/* ---- --ns-split ---------------------------------------------------------------------------- */

/* The split NS op template of matrix x (program.h: parts > 1), stage 0. */
static dm_op split_op(const bctx *b, const dm_matrix *x, int P)
{
    dm_op op = dm_op_init(DM_OP_NS, b->opt_stream);
    op.m = x->rows < x->cols ? x->rows : x->cols;
    op.n = x->rows < x->cols ? x->cols : x->rows;
    op.algo = DM_NS_DIRECT;
    op.iters = DM_NS_ITERS_DEFAULT;
    op.dtype = b->o->dtype;
    op.tall = x->rows > x->cols;
    op.parts = P;
    op.layer = x->layer;
    return op;
}

/* Stage `stage` of op (its kernels' FLOPs and bytes, dm_ns_split_stage_kernels). */
static void split_stage(dm_op *op, int stage)
{
    dm_kernel k[2];
    int n;
    double eb;
    op->stage = stage;
    dm_ns_split_stage_kernels(op, k, &n, &eb);
    op->flops = op->bytes = 0;
    for (int i = 0; i < n; i++) op->flops += k[i].flops, op->bytes += k[i].bytes;
    op->bytes += eb;
}

/* A member's modelled time for a split of matrix x over P ranks: its stages (the simulator's
 * price) and its gram all-reduces over P ranks of a node (topology t, the collective model's). */
static double split_member_us(const bctx *b, const dm_matrix *x, int P, const coll_topo *t)
{
    dm_op op = split_op(b, x, P);
    double us = 0, ar = collcost_time_us(DM_OP_ALLREDUCE, COLL_ALGO_AUTO, dm_gram_elems(op.m) * b->elt, t);
    for (int s = 0; s < 2 * op.iters; s++) {
        split_stage(&op, s);
        us += dm_ns_op_us(b->costs, b->cl, &op, NULL);
    }
    return us + op.iters * ar;
}

/* Which Muon matrices the plan splits (sched_opts.ns_split), a shape at a time, the longest NS
 * first. The NS makespan can be no shorter than LB = max(the mean load, the longest unsplit
 * matrix's NS, the longest split member's time). A shape qualifies when its matrices are stored
 * tall or square with rows a multiple of P and one of them alone sets LB; it is split when that
 * lowers LB by more than the split's extra collectives cost every rank: per matrix P - 1 more
 * broadcasts and reduces over all ranks (each a latency on every rank's comm streams, the
 * collective model's at zero bytes). The first shape that does not pay ends the search. */
static int choose_splits(bctx *b)
{
    int P = b->o->ns_split, MB = b->o->max_batch, *rk = NULL, rc = -1;
    int64_t nm = b->nmats ? b->nmats : 1;
    coll_topo tp, tw;
    if (!(b->is_split = dm_calloc((size_t)nm, 1, b->err)) ||
        !(b->split_mat = dm_malloc((size_t)nm * sizeof *b->split_mat, b->err)) ||
        !(b->split_us = dm_malloc((size_t)nm * sizeof *b->split_us, b->err)) ||
        !(rk = dm_malloc((size_t)b->nranks * sizeof *rk, b->err)))
        goto done;
    for (int r = 0; r < b->nranks; r++) rk[r] = r;
    if (collcost_topo(b->cl, rk, P, &tp, b->err) || collcost_topo(b->cl, rk, b->nranks, &tw, b->err)) goto done;
    double lat = collcost_time_us(DM_OP_BROADCAST, COLL_ALGO_AUTO, 0, &tw) +
                 collcost_time_us(DM_OP_REDUCE, COLL_ALGO_AUTO, 0, &tw);
    /* per shape: its matrices' count and whole NS; the total over all */
    double total = 0;
    int S = b->n_shapes;
    int64_t *cnt = dm_calloc((size_t)(S ? S : 1), sizeof *cnt, b->err);
    unsigned char *ok = dm_calloc((size_t)(S ? S : 1), 1, b->err), *done_s = dm_calloc((size_t)(S ? S : 1), 1, b->err);
    double *split = dm_calloc((size_t)(S ? S : 1), sizeof *split, b->err);
    if (!cnt || !ok || !done_s || !split) {
        free(cnt), free(ok), free(done_s), free(split);
        goto done;
    }
    for (int s = 0; s < S; s++) ok[s] = 1;
    for (int64_t i = 0; i < b->nmats; i++) {
        const dm_matrix *x = &b->mats[i];
        if (x->role != DM_ROLE_MUON) continue;
        int s = shape_of(b, x);
        cnt[s]++;
        total += b->cost[(size_t)s * MB];
        if (x->rows < x->cols || x->rows % P) ok[s] = 0; /* a shape splits whole or not at all */
        else if (!split[s]) split[s] = split_member_us(b, x, P, &tp);
    }
    double worst_split = 0;
    for (;;) {
        int top = -1, next = -1; /* the longest unsplit shape, and the one after it */
        for (int s = 0; s < S; s++) {
            if (!cnt[s] || done_s[s]) continue;
            double w = b->cost[(size_t)s * MB];
            if (top < 0 || w > b->cost[(size_t)top * MB]) next = top, top = s;
            else if (next < 0 || w > b->cost[(size_t)next * MB]) next = s;
        }
        if (top < 0 || !ok[top]) break;
        double whole = b->cost[(size_t)top * MB], n = (double)cnt[top];
        double mean = total / b->nowners, mean2 = (total - n * whole + n * P * split[top]) / b->nowners;
        double lb = fmax(mean, fmax(whole, worst_split));
        double lb2 = fmax(mean2, fmax(next >= 0 ? b->cost[(size_t)next * MB] : 0, fmax(split[top], worst_split)));
        if (!(lb - lb2 > n * (P - 1) * lat)) break;
        done_s[top] = 1;
        total = total - n * whole + n * P * split[top];
        worst_split = fmax(worst_split, split[top]);
        for (int64_t i = 0; i < b->nmats; i++)
            if (b->mats[i].role == DM_ROLE_MUON && shape_of(b, &b->mats[i]) == top) {
                b->is_split[i] = 1;
                b->split_mat[b->nsplit] = i;
                b->split_us[b->nsplit++] = split[top];
            }
    }
    /* Reserve a block of P ranks per split matrix (the last ones, each block within a node) when
     * that bounds the makespan lower than sharing: members doing their split alone (the longest
     * member time) or the others' mean over the ranks left, against a member's share of the rest
     * plus its split, as placing the splits after the balance gives */
    if (b->nsplit) {
        double rest = 0, longest = 0;
        for (int64_t i = 0; i < b->nmats; i++)
            if (b->mats[i].role == DM_ROLE_MUON && !b->is_split[i]) rest += b->cost[(size_t)shape_of(b, &b->mats[i]) * MB];
        for (int k = 0; k < b->nsplit; k++) longest = fmax(longest, b->split_us[k]);
        int R = P * b->nsplit, fits = 2 * R <= b->nowners;
        for (int k = 0; k < b->nsplit && fits; k++) { /* block k: ranks [N - P (k + 1), N - P k) in one node */
            int lo = b->nowners - P * (k + 1), hi = b->nowners - P * k - 1;
            fits = lo / b->gpn == hi / b->gpn;
        }
        if (fits && fmax(longest, rest / (b->nowners - R)) < rest / b->nowners + longest) b->nres = R;
    }
    free(cnt), free(ok), free(done_s), free(split);
    rc = 0;
done:
    free(rk);
    return rc;
}

/* place_splits' orders: split indices by member time, longest first (ties: index); ranks by
 * load, least first (ties: rank); ranks ascending */
static int cmp_longer(const void *x, const void *y, void *ctx)
{
    const double *us = ctx;
    int a = *(const int *)x, c = *(const int *)y;
    return us[a] != us[c] ? (us[a] < us[c]) - (us[a] > us[c]) : (a > c) - (a < c);
}
static int cmp_lighter(const void *x, const void *y, void *ctx)
{
    const double *load = ctx;
    int a = *(const int *)x, c = *(const int *)y;
    return load[a] != load[c] ? (load[a] > load[c]) - (load[a] < load[c]) : (a > c) - (a < c);
}
static int cmp_rank(const void *x, const void *y)
{
    int a = *(const int *)x, c = *(const int *)y;
    return (a > c) - (a < c);
}

/* Each split matrix on P ranks of one node: longest first, on the node whose P least loaded ranks
 * (the assignment's NS loads, with the splits placed before) end the earliest; an NS batch of
 * its own (ns_batch.split). */
static int place_splits(bctx *b, sched_assign *a)
{
    int P = b->o->ns_split;
    double *load = dm_malloc((size_t)b->nowners * sizeof *load, b->err);
    int *rk = dm_malloc((size_t)b->gpn * sizeof *rk, b->err), *best = dm_malloc((size_t)P * sizeof *best, b->err);
    if (!load || !rk || !best || !(b->split_group = dm_malloc((size_t)b->nsplit * sizeof *b->split_group, b->err)) ||
        !(b->split_coll = dm_malloc((size_t)b->nsplit * DM_NS_ITERS_DEFAULT * sizeof *b->split_coll, b->err))) {
        free(load), free(rk), free(best);
        return -1;
    }
    for (int o = 0; o < b->nowners; o++) load[o] = a->load_us && o < b->nowners - b->nres ? a->load_us[o] : 0;
    for (int k = 0; k < b->nsplit * DM_NS_ITERS_DEFAULT; k++) b->split_coll[k] = -1;
    int *order = dm_malloc((size_t)b->nsplit * sizeof *order, b->err);
    if (!order) {
        free(load), free(rk), free(best);
        return -1;
    }
    for (int k = 0; k < b->nsplit; k++) order[k] = k;
    qsort_r(order, (size_t)b->nsplit, sizeof *order, cmp_longer, b->split_us); /* longest first */
    int rc = 0;
    for (int q = 0; q < b->nsplit && !rc; q++) {
        int k = order[q];
        double best_end = INFINITY;
        for (int j = 0; j < P && b->nres; j++) best[j] = b->nowners - P * (k + 1) + j; /* its reserved block */
        for (int nd = 0; nd < b->nnodes && !b->nres; nd++) {
            int lo = nd * b->gpn, n = 0;
            for (int r = lo; r < lo + b->gpn && r < b->nranks; r++) rk[n++] = r;
            if (n < P) continue;
            qsort_r(rk, (size_t)n, sizeof *rk, cmp_lighter, load); /* by load, then rank */
            double end = load[rk[P - 1]] + b->split_us[k];
            if (end < best_end - 1e-9) {
                best_end = end;
                memcpy(best, rk, (size_t)P * sizeof *rk);
            }
        }
        qsort(best, (size_t)P, sizeof *best, cmp_rank); /* ascending ranks: part j on the j-th */
        for (int j = 0; j < P; j++) load[best[j]] += b->split_us[k];
        if ((b->split_group[k] = dm_program_group(b->p, best, P, b->err)) < 0) rc = -1;
        int64_t idx = b->split_mat[k];
        if (!rc && add_batch(b, -1, &idx, 1)) rc = -1;
        if (!rc) {
            ns_batch *nb = &AT(b->batches, ns_batch, b->batches.n - 1);
            nb->split = k;
            nb->us = b->split_us[k];
            nb->algo = DM_NS_DIRECT;
        }
    }
    free(order), free(load), free(rk), free(best);
    return rc;
}

/* Layer l's split matrices: per part j, the weights' broadcast from member j and the gradient's
 * reduce to it, the flat part j of P (the rows slice), over all ranks. */
static int split_descs(bctx *b, int l)
{
    int P = b->o->ns_split;
    for (int k = 0; k < b->nsplit; k++) {
        int64_t i = b->split_mat[k], id = b->mats[i].id;
        if (b->mats[i].layer != l) continue;
        const dm_group *g = &b->p->groups[b->split_group[k]];
        double bytes = (double)(b->mats[i].rows / P) * (double)b->mats[i].cols * b->elt;
        for (int j = 0; j < P; j++) {
            if (add_desc(b, &b->fetch, DM_OP_BROADCAST, b->world, g->ranks[j], bytes, l, &id, 1)) return -1;
            coll_desc *d = &AT(b->fetch, coll_desc, b->fetch.n - 1);
            d->part = j, d->parts = P;
            if (add_desc(b, &b->grad, DM_OP_REDUCE, b->world, g->ranks[j], bytes, l, &id, 1)) return -1;
            d = &AT(b->grad, coll_desc, b->grad.n - 1);
            d->part = j, d->parts = P;
        }
    }
    return 0;
}

/* Collect each owner's matrices of layer l (ascending owner) and add one descriptor per owner
 * for fetch (broadcast) and gradients (reduce), flat, hierarchical or HSDP. */
static int describe_dmuon(bctx *b, int64_t *ids)
{
    sched_assign a;
    sched_problem pr;
    int rc = -1;
    int64_t *own = NULL;
    memset(&a, 0, sizeof a);
    if (b->o->ns_split > 1 && choose_splits(b)) goto done;
    if (assign_owners(b, &a, &pr)) goto done;
    if (b->rep) b->rep->n_units = (a.n_units ? a.n_units : pr.n_items) + b->nsplit;
    if (b->nsplit && place_splits(b, &a)) goto done;
    /* batches: group items by batch id */
    {
        int64_t *idx = dm_malloc((size_t)(pr.n_items ? pr.n_items : 1) * sizeof *idx, b->err);
        int *first = dm_malloc((size_t)(a.n_batches ? a.n_batches : 1) * sizeof *first, b->err);
        int *next = dm_malloc((size_t)(pr.n_items ? pr.n_items : 1) * sizeof *next, b->err);
        if (!idx || !first || !next) {
            free(idx);
            free(first);
            free(next);
            goto done;
        }
        for (int k = 0; k < a.n_batches; k++) first[k] = -1;
        for (int i = pr.n_items - 1; i >= 0; i--) { /* linked lists keep item order */
            next[i] = first[a.batch_of[i]];
            first[a.batch_of[i]] = i;
        }
        int bad = 0;
        for (int k = 0; k < a.n_batches && !bad; k++) {
            int n = 0;
            for (int i = first[k]; i >= 0; i = next[i]) idx[n++] = pr.items[i].id;
            if (n && add_batch(b, a.owner[first[k]], idx, n)) bad = 1;
        }
        free(idx);
        free(first);
        free(next);
        if (bad) goto done;
    }
    /* the collectives of the (layer, owner) pairs, on every rank: flat (and HSDP's pairs over all
     * ranks, hsdp_muon world), a broadcast and a reduce each; HSDP's stages (hsdp_pair), per pair
     * 4 N + S ops over the N ranks (fetch: the owner's shard-group broadcast S, the column
     * broadcasts N, the other groups' all-gathers N - S; gradients: the reduce-scatters N, the
     * column reduces N, the owner group's all-gather S), with --zero 3 N more (the re-fetch's
     * broadcast and all-gathers); hierarchical, per pair a broadcast and a reduce in every node
     * and an all-reduce over the nodes' owners (one rank in gpn): 2 + 1 / gpn, and since every
     * node runs every NS, each batch's NS and Muon update once per node (a flat plan's run once
     * in all: left out, as the forward and backward are). */
    double per = muon_stages(b)           ? (b->z3 ? 5.0 : 4.0)
                 : b->o->hierarchical ? 2.0 + (b->nnodes > 1 ? 1.0 / b->gpn : 0.0)
                                      : 2.0;
    double node_ops = b->o->hierarchical ? 2.0 * (double)a.n_batches * (double)b->nnodes : 0.0;
    double est = per * (double)a.pairs * (double)b->nranks + node_ops;
    if (b->rep) b->rep->ops_estimate = est, b->rep->ops_per_pair_rank = per, b->rep->ops_node_compute = node_ops;
    if (b->o->objective_only) goto report;
    if (b->o->max_ops > 0 && !b->o->hierarchical) {
        if (est > b->o->max_ops) {
            b->cut = 1;
            if (b->rep) b->rep->cut = 1;
            goto report;
        }
    }
    /* owner per matrix index */
    if (!(own = dm_malloc((size_t)(b->nmats ? b->nmats : 1) * sizeof *own, b->err))) goto done;
    for (int64_t i = 0; i < b->nmats; i++) own[i] = -1;
    for (int i = 0; i < pr.n_items; i++) own[pr.items[i].id] = a.owner[i];
    if (b->hsdp && b->R > 1) { /* HSDP's per-pair slots: the most owners a layer has */
        unsigned char *seen = dm_calloc((size_t)b->nowners, 1, b->err);
        if (!seen) goto done;
        for (int l = 0; l < b->nlayers; l++) {
            int np = 0;
            memset(seen, 0, (size_t)b->nowners);
            for (int64_t i = b->lay_first[l]; i < b->lay_first[l] + b->lay_n[l]; i++)
                if (own[i] >= 0 && !seen[own[i]]) seen[own[i]] = 1, np++;
            if (np > b->hs_pairs) b->hs_pairs = np;
        }
        free(seen);
        b->hs_pairs++; /* and one for the layer's AdamW parameters (adamw_part) */
        size_t nrec = 3 * (size_t)b->nranks * (size_t)b->hs_pairs;
        if (!(b->hs_rec = dm_malloc(nrec * sizeof *b->hs_rec, b->err))) goto done;
        for (size_t i = 0; i < nrec; i++) b->hs_rec[i] = -1;
    }
    /* HSDP's stages for the Muon pairs, or (hsdp_muon world) the flat plan's reduce and broadcast
     * over all ranks for them; the AdamW parameters as adamw_part decides either way */
    int hs = muon_stages(b);
    for (int l = 0; l < b->nlayers; l++) {
        size_t f0 = b->fetch.n, g0 = b->grad.n;
        if (b->nsplit && split_descs(b, l)) goto done;
        for (int pass = 0, pair = 0; pass < (hs ? 4 : 1); pass++, pair = 0)
            for (int o = 0; o < b->nowners; o++) {
                size_t n = 0;
                for (int64_t i = b->lay_first[l]; i < b->lay_first[l] + b->lay_n[l]; i++)
                    if (own[i] == o) ids[n++] = b->mats[i].id;
                if (!n) continue;
                double bytes = ids_elems(b, ids, n) * b->elt;
                if (hs) {
                    if (hsdp_pair(b, pass, o, pair++, ids_elems(b, ids, n), l, ids, n)) goto done;
                    continue;
                }
                if (!b->o->hierarchical) { /* (HSDP with one replica group: this, in its shard group;
                                              with hsdp_muon world: over all ranks) */
                    if (add_desc(b, &b->fetch, DM_OP_BROADCAST, b->world, o, bytes, l, ids, n) ||
                        add_desc(b, &b->grad, DM_OP_REDUCE, b->world, o, bytes, l, ids, n))
                        goto done;
                    continue;
                }
                for (int nd = 0; nd < b->nnodes; nd++)
                    if (add_desc(b, &b->fetch, DM_OP_BROADCAST, b->node_group[nd], nd * b->gpn + o, bytes, l, ids,
                                 n) ||
                        add_desc(b, &b->grad, DM_OP_REDUCE, b->node_group[nd], nd * b->gpn + o, bytes, l, ids, n))
                        goto done;
                if (b->nnodes > 1 && add_desc(b, &b->grad, DM_OP_ALLREDUCE, b->cross_group[o], -1, bytes, l, ids, n))
                    goto done;
            }
        if (adamw_part(b, l, ids)) goto done;
        mark_layer(b, l, f0, g0);
    }
report:
    if (b->rep) {
        sched_report *r = b->rep;
        r->nowners = b->nowners;
        r->ns_load_us = dm_calloc((size_t)b->nowners, sizeof *r->ns_load_us, b->err);
        r->ns_ops = dm_calloc((size_t)b->nowners, sizeof *r->ns_ops, b->err);
        if (!r->ns_load_us || !r->ns_ops) goto done;
        for (size_t k = 0; k < b->batches.n; k++) {
            const ns_batch *nb = &AT(b->batches, ns_batch, k);
            if (nb->split >= 0) { /* every member its share */
                const dm_group *g = &b->p->groups[b->split_group[nb->split]];
                for (int j = 0; j < g->n; j++) r->ns_load_us[g->ranks[j]] += nb->us, r->ns_ops[g->ranks[j]]++;
                continue;
            }
            r->ns_load_us[nb->owner] += nb->us;
            r->ns_ops[nb->owner]++;
        }
    }
    rc = 0;
done:
    free(own);
    free(pr.items);
    free(pr.shape_elems);
    if (rc == 0 && b->o->assign_out) { /* the caller's now */
        *b->o->assign_out = a;
        memset(&a, 0, sizeof a);
    }
    sched_assign_free(&a);
    return rc;
}

/* ---- emission ------------------------------------------------------------------------------ */

/* Add descriptor d to every member of its group; deps per rank: dep[r] and dep2[r] (-1 or a NULL
 * array: none). Records the first and last op id per rank into lo/hi[r * nlayers + layer_slot],
 * and each member's op id into ids[r] when ids is given. payload: what the collective moves
 * (fetches: weights; the gradient phase: gradients, all-gathers included). */
static int emit_desc_ids(bctx *b, const coll_desc *d, dm_stream st, dm_payload payload, const int *dep,
                         const int *dep2, int *lo, int *hi, int slot, int *ids)
{
    const dm_group *g = &b->p->groups[d->group];
    dm_op op = dm_op_init(d->kind, st);
    op.payload = payload;
    op.coll = dm_program_new_coll(b->p);
    op.group = d->group;
    op.root = d->root;
    op.bytes = d->bytes;
    op.layer = d->layer;
    op.dtype = d->dtype;
    op.part = d->part;
    op.parts = d->parts;
    op.publish = b->publishing;
    const int64_t *params = (const int64_t *)b->pool.data + d->p_first;
    for (int i = 0; i < g->n && g->ranks[i] < b->emit_ranks; i++) { /* ascending members */
        int r = g->ranks[i];
        int dd[2], nd = 0;
        if (dep && dep[r] >= 0) dd[nd++] = dep[r];
        if (dep2 && dep2[r] >= 0 && (!nd || dep2[r] != dd[0])) dd[nd++] = dep2[r];
        int id = dm_program_add_op(b->p, r, &op, dd, nd, params, (int)d->p_n, b->err);
        if (id < 0) return -1;
        if (ids) ids[r] = id;
        size_t k = (size_t)r * b->nlayers + slot;
        if (lo[k] < 0) lo[k] = id;
        hi[k] = id;
    }
    return 0;
}

static int emit_desc(bctx *b, const coll_desc *d, dm_stream st, dm_payload payload, const int *dep, int *lo, int *hi,
                     int slot)
{
    return emit_desc_ids(b, d, st, payload, dep, NULL, lo, hi, slot, NULL);
}

/* HSDP: a stage's slot of rank r and the collective's pair in b->hs_rec. */
static int *hs_slot(bctx *b, int stage, int r, int pair)
{
    return &b->hs_rec[((size_t)stage * b->nranks + r) * b->hs_pairs + pair];
}

/* HSDP: the deps of collective d (hs_wait > 0), in b->hs_dep: the waiting members' own op of the
 * stage before, for the same pair (an earlier op when a member had no part there: harmless);
 * the others keep dep's (that op kept them itself). */
static const int *hsdp_deps(bctx *b, const coll_desc *d, const int *dep)
{
    const dm_group *g = &b->p->groups[d->group];
    for (int i = 0; i < g->n; i++) {
        int r = g->ranks[i];
        int waits = d->hs_wait == 2 || (r == d->root && r != d->hs_owner);
        int before = d->hs_stage > 0 ? *hs_slot(b, d->hs_stage - 1, r, d->hs_pair) : -1;
        b->hs_dep[r] = waits && before >= 0 ? before : dep ? dep[r] : -1;
    }
    return b->hs_dep;
}

/* HSDP: each member's op of d (just emitted, in b->hs_ids) into its stage's slot. */
static void hsdp_record(bctx *b, const coll_desc *d)
{
    const dm_group *g = &b->p->groups[d->group];
    for (int i = 0; i < g->n; i++) *hs_slot(b, d->hs_stage, g->ranks[i], d->hs_pair) = b->hs_ids[g->ranks[i]];
}

/* Whether the plan's forward fetch can put its all-gathers on comm-lo (emit_fetch): it holds a
 * broadcast (dmuon's: the Muon weights from their owners) and nothing of it rides comm-lo already
 * (HSDP's cross-node parts of its Muon stages do). */
static int fetch_gathers_lo(const bctx *b)
{
    int bcast = 0;
    for (size_t k = 0; k < b->fetch.n; k++) {
        const coll_desc *d = &AT(b->fetch, coll_desc, k);
        if (d->parts > 1 && d->hs_stage > 0) return 0;
        bcast |= d->kind == DM_OP_BROADCAST;
    }
    return bcast;
}

static int emit_fetch(bctx *b, int l, const int *dep, int back)
{
    /* A forward fetch of broadcasts and all-gathers (dmuon's flat plans: the Muon weights from
     * their owners, the AdamW role's shards, often a few KB of norms and biases) puts the
     * all-gathers on comm-lo, idle in the forward: on comm-hi each queued behind its layer's
     * broadcasts and paid its latency after them (at 256 A800s a 32 KB all-gather costs 0.35 ms,
     * a third of a vision-tower layer's fetch). Each waits on the comm-hi fetch of the layers
     * before it (fetch_hi_prev), so it runs beside its own layer's broadcasts and never ahead of
     * an earlier layer's, which the forward needs first (without the wait a bandwidth-bound
     * fetch shared its links with later layers' gathers: Moonlight-6L's step 2.8 ms longer at 8
     * GPUs). Not where the fetch uses comm-lo already (HSDP's Muon stages: their cross-node
     * parts) nor in the backward's re-fetch (comm-lo carries the gradients then). */
    int lo_gathers = !back && b->gathers_lo && !b->publishing;
    if (lo_gathers) memcpy(b->fetch_hi_prev, b->fetch_hi_now, (size_t)b->emit_ranks * sizeof *b->fetch_hi_now);
    for (size_t k = b->fetch_first[l]; k < b->fetch_first[l] + b->fetch_n[l]; k++) {
        const coll_desc *d = &AT(b->fetch, coll_desc, k);
        if (d->hs_skip_back && back) continue; /* the Z3 re-fetch: the shard groups hold its parts */
        const int *dd = d->hs_wait && !back ? hsdp_deps(b, d, dep) : dep;
        /* HSDP's cross-node parts on the other comm stream (idle in the forward), so that one
         * pair's network transfer overlaps another's all-gather on NVLink (the per-pair deps
         * order them) */
        dm_stream st = d->parts > 1 && d->hs_stage > 0 ? DM_STREAM_COMM_LO : DM_STREAM_COMM_HI;
        int lo = lo_gathers && d->kind == DM_OP_ALLGATHER;
        if (lo) st = DM_STREAM_COMM_LO;
        int *ids = d->hs_record && !back ? b->hs_ids : lo_gathers && !lo ? b->fetch_hi_now : NULL;
        if (emit_desc_ids(b, d, st, DM_PAYLOAD_WEIGHTS, dd, b->publishing ? b->publish_dep2 : lo ? b->fetch_hi_prev : NULL,
                          back ? b->bfetch_lo : b->fetch_lo, back ? b->bfetch_hi : b->fetch_hi, l, ids))
            return -1;
        if (d->hs_record && !back) {
            hsdp_record(b, d);
            if (lo_gathers && !lo) { /* a comm-hi op of the fetch, its ids in hs_ids */
                const dm_group *g = &b->p->groups[d->group];
                for (int i = 0; i < g->n && g->ranks[i] < b->emit_ranks; i++)
                    b->fetch_hi_now[g->ranks[i]] = b->hs_ids[g->ranks[i]];
            }
        }
    }
    return 0;
}

static int emit_grad(bctx *b, int l, const int *dep)
{
    for (size_t k = b->grad_first[l]; k < b->grad_first[l] + b->grad_n[l]; k++) {
        const coll_desc *d = &AT(b->grad, coll_desc, k);
        const int *dd = d->hs_wait ? hsdp_deps(b, d, dep) : dep;
        /* HSDP's cross-node part reduces on the other comm stream, as in the fetch */
        dm_stream st = d->parts > 1 && d->hs_stage > 0 ? DM_STREAM_COMM_HI : DM_STREAM_COMM_LO;
        if (emit_desc_ids(b, d, st, DM_PAYLOAD_GRADS, dd, NULL, b->grad_lo, b->grad_hi, l,
                          d->hs_record ? b->hs_ids : NULL))
            return -1;
        if (d->hs_record) hsdp_record(b, d);
    }
    return 0;
}

/* deps on every op of [lo, hi] of (rank, layer) */
static int range_deps(const int *lo, const int *hi, size_t k, int *deps, int n)
{
    if (lo[k] < 0) return n;
    for (int id = lo[k]; id <= hi[k]; id++) deps[n++] = id;
    return n;
}

static int emit_compute(bctx *b, int r, dm_op_kind kind, int l, const int *deps, int nd, int *out_id)
{
    dm_op op = dm_op_init(kind, DM_STREAM_COMPUTE);
    int fwd = kind == DM_OP_FORWARD;
    op.layer = l;
    op.work = fwd ? b->work_fwd[l] : b->work_bwd[l];
    op.flops = fwd ? b->fwd_flops[l] : b->bwd_flops[l];
    op.bytes = fwd ? b->fwd_bytes[l] : b->bwd_bytes[l];
    op.dtype = b->o->dtype;
    int64_t stackbuf[64], *params = stackbuf;
    size_t n = (size_t)b->lay_n[l];
    if (n > 64 && !(params = dm_malloc(n * sizeof *params, b->err))) return -1;
    layer_ids(b, l, -1, params);
    int id = dm_program_add_op(b->p, r, &op, deps, nd, params, (int)n, b->err);
    if (params != stackbuf) free(params);
    if (id < 0) return -1;
    *out_id = id;
    return 0;
}

static int *dep_of(bctx *b, const int *ids, int l, int *tmp)
{
    for (int r = 0; r < b->nranks; r++) tmp[r] = l >= 0 && l < b->nlayers ? ids[(size_t)r * b->nlayers + l] : -1;
    return tmp;
}

/* The piece [*lo, *hi) of matrix id (of layer l) that rank r updates: where a reduce-scatter
 * of l's gradients in one of r's groups covers it, the part of it inside r's shard of that op's
 * flat buffer (the state rule's, core/holds.c: dm_flat_shard over the op's params in order;
 * empty when the shard misses it); else the whole matrix. The reduce-scatters are the world
 * group's or, under HSDP, one per shard group over the same params (r's index in its own: r mod
 * S), so the first that covers id gives the layout, found once per layer (pc_*). -1 (err set)
 * when out of memory. */
static int rank_piece(bctx *b, int r, int l, int64_t id, int64_t *lo, int64_t *hi)
{
    const int64_t e = b->mats[id].rows * b->mats[id].cols;
    *lo = 0, *hi = e;
    if (!b->pc_desc) {
        size_t nm = (size_t)(b->nmats > 0 ? b->nmats : 1);
        if (!(b->pc_desc = dm_malloc(3 * nm * sizeof *b->pc_desc, b->err)) ||
            !(b->pc_done = dm_calloc((size_t)(b->nlayers > 0 ? b->nlayers : 1), 1, b->err)))
            return -1;
        b->pc_base = b->pc_desc + nm, b->pc_total = b->pc_base + nm;
    }
    if (!b->pc_done[l]) {
        for (int64_t i = b->lay_first[l]; i < b->lay_first[l] + b->lay_n[l]; i++) b->pc_desc[i] = -1;
        for (size_t k = b->grad_first[l]; k < b->grad_first[l] + b->grad_n[l]; k++) {
            const coll_desc *d = &AT(b->grad, coll_desc, k);
            if (d->kind != DM_OP_REDUCESCATTER) continue;
            const int64_t *ps = (const int64_t *)b->pool.data + d->p_first;
            int64_t total = 0;
            for (size_t i = 0; i < d->p_n; i++) total += b->mats[ps[i]].rows * b->mats[ps[i]].cols;
            for (size_t i = 0, base = 0; i < d->p_n; base += (size_t)(b->mats[ps[i]].rows * b->mats[ps[i]].cols), i++)
                if (b->mats[ps[i]].layer == l && b->pc_desc[ps[i]] < 0)
                    b->pc_desc[ps[i]] = (int64_t)k, b->pc_base[ps[i]] = (int64_t)base, b->pc_total[ps[i]] = total;
        }
        b->pc_done[l] = 1;
    }
    if (b->pc_desc[id] < 0) return 0;
    const coll_desc *d = &AT(b->grad, coll_desc, (size_t)b->pc_desc[id]);
    const dm_group *g = &b->p->groups[d->group];
    int gi = d->group == b->world ? r : b->hsdp ? r % b->S : dm_group_index(g, r);
    if (gi < 0 || gi >= g->n) return 0;
    int64_t slo, shi, base = b->pc_base[id];
    dm_flat_shard(b->pc_total[id], g->n, gi, &slo, &shi);
    *lo = slo > base ? slo - base : 0;
    *hi = shi < base + e ? shi - base : e;
    if (*hi < *lo) *hi = *lo;
    return 0;
}

/* The work of an update op (adamw: DM_KOP_ADAMW, muon-update: DM_KOP_MUON_UPDATE) of rank r
 * over params ids[0..n): one update kernel per tensor over the elements the executor updates in
 * it, equal neighbours as one kernel of that count; *elems: their sum. even < 0: the rank's own
 * pieces (rank_piece: a sharded update touches its shard's pieces only). even >= 0: a plan whose
 * ranks share one op list (replicated_plan: the naive strategies), whose pieces differ from rank
 * to rank: an even share, the first `even` elements of the tensors' concatenation, for every
 * rank. *out: the work's index, each distinct list stored once (dm_program_intern_work: ranks
 * whose pieces match share it). */
static int update_work(bctx *b, int r, dm_kern_op kop, const int64_t *ids, size_t n, double even, double *elems,
                       int *out)
{
    double bpp = dm_elementwise_bytes_per_param(kop == DM_KOP_ADAMW ? "adamw" : "muon_update");
    b->uw_k.n = 0;
    *elems = 0;
    for (size_t i = 0; i < n && even != 0; i++) {
        int64_t lo = 0, hi = b->mats[ids[i]].rows * b->mats[ids[i]].cols;
        if (even < 0) { /* Muon matrices are sharded only by muon-fsdp (an even share): whole */
            if (kop == DM_KOP_ADAMW && rank_piece(b, r, b->mats[ids[i]].layer, ids[i], &lo, &hi)) return -1;
        } else {
            if ((double)hi > even) hi = (int64_t)even;
            even -= (double)hi;
        }
        int64_t e = hi - lo;
        if (e < 1) continue;
        *elems += (double)e;
        dm_kernel *last = b->uw_k.n ? &AT(b->uw_k, dm_kernel, b->uw_k.n - 1) : NULL;
        if (last && last->m == e) {
            last->count++;
        } else {
            dm_kernel *k = vec_push(&b->uw_k, b->err);
            if (!k) return -1;
            memset(k, 0, sizeof *k);
            k->kind = DM_KERN_ELEM, k->op = kop, k->m = e, k->n = 1, k->batch = 1, k->count = 1, k->param = -1;
            k->slot = -1;
        }
    }
    const dm_kernel *kl = (const dm_kernel *)b->uw_k.data;
    int nk = (int)b->uw_k.n;
    for (int i = 0; i < nk; i++) { /* per kernel: its elements and HBM bytes, all its count */
        dm_kernel *k = &AT(b->uw_k, dm_kernel, i);
        k->elems = (double)k->m * (double)k->count;
        k->bytes = k->elems * bpp;
    }
    return (*out = dm_program_intern_work(b->p, kl, nk, b->err)) < 0 ? -1 : 0;
}

/* One optimizer op for the ordering on the compute stream. */
typedef struct opt_item {
    int ready_layer;
    int is_adamw;
    size_t index; /* batch index or layer */
} opt_item;

static int cmp_opt(const void *x, const void *y)
{
    const opt_item *a = x, *c = y;
    if (a->ready_layer != c->ready_layer) return a->ready_layer > c->ready_layer ? -1 : 1;
    if (a->is_adamw != c->is_adamw) return a->is_adamw ? -1 : 1;
    return (a->index > c->index) - (a->index < c->index);
}


static int owner_of_rank(const bctx *b, int r) { return b->nowners < b->nranks ? r % b->nowners : r; }

/* A batch's place in the index by owner: its owner, or nowners for the split ones and those of
 * every rank. */
static int own_bucket(const bctx *b, const ns_batch *nb)
{
    return nb->split < 0 && nb->owner >= 0 && nb->owner < b->nowners ? nb->owner : b->nowners;
}

/* The batches by owner (bctx.own_off, own_idx), made once the batches are (before the emission):
 * each bucket counted two places ahead, summed, then filled, which leaves own_off[k] the start
 * of bucket k. 0, or -1 with b->err. */
static int own_index(bctx *b)
{
    int O = b->nowners;
    free(b->own_off), free(b->own_idx);
    b->own_off = dm_calloc((size_t)O + 3, sizeof *b->own_off, b->err);
    b->own_idx = b->own_off ? dm_malloc((b->batches.n + 1) * sizeof *b->own_idx, b->err) : NULL;
    if (!b->own_idx) return -1; /* (free_ctx frees what was made) */
    for (size_t i = 0; i < b->batches.n; i++) b->own_off[own_bucket(b, &AT(b->batches, ns_batch, i)) + 2]++;
    for (int k = 2; k <= O + 2; k++) b->own_off[k] += b->own_off[k - 1];
    for (size_t i = 0; i < b->batches.n; i++)
        b->own_idx[b->own_off[own_bucket(b, &AT(b->batches, ns_batch, i)) + 1]++] = (int)i;
    return 0;
}

/* Batch i among rank r's optimizer items? */
static int rank_takes(bctx *b, int r, size_t i)
{
    const ns_batch *nb = &AT(b->batches, ns_batch, i);
    return nb->split >= 0 ? dm_group_index(&b->p->groups[b->split_group[nb->split]], r) >= 0
                          : nb->owner < 0 || nb->owner == owner_of_rank(b, r);
}

/* The optimizer ops of rank r in gradient-arrival order (items: room for batches + layers). */
static size_t opt_items(bctx *b, int r, opt_item *items)
{
    size_t ni = 0;
    int o = owner_of_rank(b, r), O = b->nowners; /* its owner's batches, then every rank's and the split ones */
    for (int j = b->own_off[o]; j < b->own_off[o + 1]; j++)
        items[ni++] = (opt_item){AT(b->batches, ns_batch, b->own_idx[j]).min_layer, 0, (size_t)b->own_idx[j]};
    for (int j = b->own_off[O]; j < b->own_off[O + 1]; j++)
        if (rank_takes(b, r, (size_t)b->own_idx[j]))
            items[ni++] = (opt_item){AT(b->batches, ns_batch, b->own_idx[j]).min_layer, 0, (size_t)b->own_idx[j]};
    for (int l = 0; l < b->nlayers; l++)
        if (b->lay_adamw[l] > 0 || (b->o->strategy == SCHED_ADAMW && b->lay_params[l] > 0))
            items[ni++] = (opt_item){l, 1, (size_t)l};
    if (ni > 1) qsort(items, ni, sizeof *items, cmp_opt);
    return ni;
}

/* A split NS on rank r (a member of its group: part j): per iteration the slice's Gram, the
 * gram all-reduce in the group (comm-hi), the step; then the part's Muon update. deps[0..nd):
 * what its gradient waits on. */
static int emit_split_item(bctx *b, int r, const ns_batch *nb, int *deps, int nd, int *after)
{
    int k = nb->split, P = b->o->ns_split;
    const dm_group *g = &b->p->groups[b->split_group[k]];
    const dm_matrix *x = &b->mats[b->split_mat[k]];
    int64_t id = x->id;
    int j = dm_group_index(g, r), prev = -1;
    dm_op op = split_op(b, x, P);
    op.part = j;
    for (int it = 0; it < op.iters; it++) {
        split_stage(&op, 2 * it);
        int gid = it == 0 ? dm_program_add_op(b->p, r, &op, deps, nd, &id, 1, b->err)
                          : dm_program_add_op(b->p, r, &op, &prev, 1, &id, 1, b->err);
        if (gid < 0) return -1;
        int *coll = &b->split_coll[k * DM_NS_ITERS_DEFAULT + it];
        if (*coll < 0) *coll = dm_program_new_coll(b->p);
        dm_op ar = dm_op_init(DM_OP_ALLREDUCE, DM_STREAM_COMM_HI);
        ar.payload = DM_PAYLOAD_GRAM;
        ar.coll = *coll;
        ar.group = b->split_group[k];
        ar.bytes = dm_gram_elems(op.m) * b->elt;
        ar.layer = x->layer;
        ar.dtype = b->o->dtype;
        int aid = dm_program_add_op(b->p, r, &ar, &gid, 1, &id, 1, b->err);
        if (aid < 0) return -1;
        split_stage(&op, 2 * it + 1);
        if ((prev = dm_program_add_op(b->p, r, &op, &aid, 1, &id, 1, b->err)) < 0) return -1;
    }
    dm_op up = dm_op_init(DM_OP_MUON_UPDATE, b->opt_stream);
    up.layer = x->layer;
    up.dtype = DM_DT_FP32;
    up.part = j, up.parts = P;
    double elems = (double)(x->rows / P) * (double)x->cols;
    if (update_work(b, r, DM_KOP_MUON_UPDATE, &id, 1, elems, &elems, &up.work)) return -1;
    up.bytes = elems * dm_elementwise_bytes_per_param("muon_update");
    int uid = dm_program_add_op(b->p, r, &up, &prev, 1, &id, 1, b->err);
    if (uid < 0) return -1;
    if (after) *after = uid;
    return 0;
}

/* One optimizer item on rank r: an AdamW op, or an NS batch and its Muon update (after its
 * layers' last gradient ops, and after *after when given: the update's id goes back there). */
static int emit_opt_item(bctx *b, int r, const opt_item *it, int *deps, int64_t *params, int *after)
{
    int L = b->nlayers, nd = 0;
    if (it->is_adamw) {
        int l = (int)it->index;
        /* --publish: a published layer's AdamW update on compute-lo, as soon as its gradients are
         * in, not behind the rank's NS on the compute stream: its fetch at the step's end waits on
         * it (emit_publish) and then runs beside the optimizer's tail. The compute stream's chain
         * (after) neither waits on it nor continues from it. */
        int lo = l < b->o->publish && b->opt_stream == DM_STREAM_COMPUTE && b->pub_adamw && b->pub_adamw[l];
        size_t n = b->o->strategy == SCHED_ADAMW ? layer_ids(b, l, -1, params) : layer_ids(b, l, DM_ROLE_ADAMW, params);
        size_t gk = (size_t)r * L + l;
        if (b->grad_hi[gk] >= 0) deps[nd++] = b->grad_hi[gk];
        else if ((lo || b->opt_stream != DM_STREAM_COMPUTE) && b->bwd_id[gk] >= 0) deps[nd++] = b->bwd_id[gk];
        if (!lo && after && *after >= 0) deps[nd++] = *after;
        dm_op op = dm_op_init(DM_OP_ADAMW, lo ? DM_STREAM_COMPUTE_LO : b->opt_stream);
        op.layer = l;
        op.dtype = DM_DT_FP32;
        double elems = b->o->strategy == SCHED_ADAMW ? b->lay_params[l] : b->lay_adamw[l], even = -1;
        if (b->adamw_sharded && b->shared_updates) even = ceil(elems / b->nranks); /* update_work */
        if (update_work(b, r, DM_KOP_ADAMW, params, n, even, &elems, &op.work)) return -1;
        op.bytes = elems * dm_elementwise_bytes_per_param("adamw");
        int id = dm_program_add_op(b->p, r, &op, deps, nd, params, (int)n, b->err);
        if (id < 0) return -1;
        if (after && !lo) *after = id;
        return 0;
    }
    const ns_batch *nb = &AT(b->batches, ns_batch, it->index);
    const int64_t *mi = (const int64_t *)b->batch_mats.data + nb->m_first;
    int lo_l = L, hi_l = -1;
    for (int j = 0; j < nb->size; j++) {
        params[j] = b->mats[mi[j]].id;
        int l = b->mats[mi[j]].layer;
        if (l < lo_l) lo_l = l;
        if (l > hi_l) hi_l = l;
    }
    for (int l = lo_l; l <= hi_l; l++) { /* the last gradient op of each layer involved */
        int used = 0;
        for (int j = 0; j < nb->size && !used; j++) used = b->mats[mi[j]].layer == l;
        size_t gk = (size_t)r * L + l;
        if (used && b->grad_hi[gk] >= 0) deps[nd++] = b->grad_hi[gk];
        /* no gradient collective (one rank): the layer's backward, which the compute stream's
         * order gave before */
        else if (used && b->opt_stream != DM_STREAM_COMPUTE && b->bwd_id[gk] >= 0) deps[nd++] = b->bwd_id[gk];
    }
    if (after && *after >= 0) deps[nd++] = *after;
    if (nb->split >= 0) return emit_split_item(b, r, nb, deps, nd, after);
    dm_op op = dm_op_init(DM_OP_NS, b->opt_stream);
    op.layer = nb->min_layer == hi_l ? hi_l : -1;
    op.m = b->shapes[nb->shape][0];
    op.n = b->shapes[nb->shape][1];
    op.batch = nb->size;
    op.algo = nb->algo;
    op.iters = DM_NS_ITERS_DEFAULT; /* the iterations dm_ns_flops and the cost tables count */
    op.flops = nb->size * dm_ns_flops(op.m, op.n, nb->algo);
    op.bytes = nb->size * dm_ns_bytes(op.m, op.n, nb->algo);
    op.dtype = b->o->dtype;
    op.eager = b->eager;
    for (int j = 0; j < nb->size; j++) op.tall += b->mats[mi[j]].rows > b->mats[mi[j]].cols;
    int ns_id = dm_program_add_op(b->p, r, &op, deps, nd, params, nb->size, b->err);
    if (ns_id < 0) return -1;
    dm_op up = dm_op_init(DM_OP_MUON_UPDATE, b->opt_stream);
    up.layer = op.layer;
    up.dtype = DM_DT_FP32;
    double elems = (double)nb->elems, even = -1;
    if (b->muon_update_shard && b->shared_updates) even = ceil(elems / b->nranks); /* update_work */
    if (update_work(b, r, DM_KOP_MUON_UPDATE, params, (size_t)nb->size, even, &elems, &up.work)) return -1;
    up.bytes = elems * dm_elementwise_bytes_per_param("muon_update");
    int id = dm_program_add_op(b->p, r, &up, &ns_id, 1, params, nb->size, b->err);
    if (id < 0) return -1;
    if (after) *after = id;
    return 0;
}

/* A rank's optimizer items in order, and the next one to emit (NS under the backward). */
typedef struct rank_items {
    opt_item *v;
    size_t n, next;
} rank_items;

/* Every rank's items whose gradients arrived by layer `ready` (ready_layer >= ready; INT_MIN:
 * all that are left). */
static int emit_ready_items(bctx *b, rank_items *ri, int ready, int *deps, int64_t *params)
{
    for (int r = 0; r < b->emit_ranks; r++)
        while (ri[r].next < ri[r].n && ri[r].v[ri[r].next].ready_layer >= ready)
            if (emit_opt_item(b, r, &ri[r].v[ri[r].next++], deps, params, NULL)) return -1;
    return 0;
}

/* muon-fsdp as PyTorch runs it: every rank gathers a matrix's full gradient (one collective of
 * all ranks, emitted for all at once), each rank's gather waiting on its previous update (the
 * first on the end of its backward); the matrix's NS waits on the gather through grad_hi. Naive
 * plans give every rank the same items (items: room for them). */
static int emit_fsdp_serial(bctx *b, opt_item *items, int *deps, int64_t *params)
{
    int R = b->nranks, rc = -1;
    int *prev = dm_malloc((size_t)R * sizeof *prev, b->err);
    if (!prev) return -1;
    for (int r = 0; r < R; r++) prev[r] = b->bwd_id[(size_t)r * b->nlayers + 0];
    size_t ni = opt_items(b, 0, items);
    for (size_t i = 0; i < ni; i++) {
        if (!items[i].is_adamw) {
            const ns_batch *nb = &AT(b->batches, ns_batch, items[i].index);
            const int64_t *mi = (const int64_t *)b->batch_mats.data + nb->m_first;
            int l = b->mats[mi[0]].layer;
            for (int j = 0; j < nb->size; j++) params[j] = b->mats[mi[j]].id;
            size_t g0 = b->grad.n;
            if (add_desc(b, &b->grad, DM_OP_ALLGATHER, b->world, -1, (double)nb->elems * b->elt, l, params,
                         (size_t)nb->size) ||
                emit_desc(b, &AT(b->grad, coll_desc, g0), DM_STREAM_COMM_LO, DM_PAYLOAD_GRADS, prev, b->grad_lo,
                          b->grad_hi, l))
                goto out;
        }
        for (int r = 0; r < b->emit_ranks; r++)
            if (emit_opt_item(b, r, &items[i], deps, params, &prev[r])) goto out;
    }
    rc = 0;
out:
    free(prev);
    return rc;
}

/* The params the first P layers' published fetches carry (b->pub_in) and which of those layers
 * carry AdamW-updated ones (b->pub_adamw; adamw updates every role): one walk of their fetches,
 * before the optimizer is emitted (emit_opt_item) and the fetches after it (emit_publish). */
static int publish_marks(bctx *b, int P)
{
    if (!(b->pub_in = dm_calloc((size_t)b->nmats, 1, b->err)) || !(b->pub_adamw = dm_calloc((size_t)P, 1, b->err)))
        return -1;
    for (int l = 0; l < P; l++)
        for (size_t k = b->fetch_first[l]; k < b->fetch_first[l] + b->fetch_n[l]; k++) {
            const coll_desc *d = &AT(b->fetch, coll_desc, k);
            const int64_t *ps = (const int64_t *)b->pool.data + d->p_first;
            for (size_t j = 0; j < d->p_n; j++) {
                b->pub_in[ps[j]] = 1;
                b->pub_adamw[l] |= b->mats[ps[j]].role == DM_ROLE_ADAMW || b->o->strategy == SCHED_ADAMW;
            }
        }
    return 0;
}

/* --publish: the first P layers' forward fetch at the end of the step, marked publish
 * (program.h). Each of its ops on rank r waits on r's last update (muon-update, adamw) of any
 * param those fetches carry, on each compute stream (a published layer's AdamW runs on
 * compute-lo: emit_opt_item), and at least on r's backward of layer 0, the last reader of their
 * weights in the step (the executors write a received fetch in place of the weights the
 * backward reads). The forward of those layers waits on nothing in the step: `sim --steps` and
 * the executors carry the published weights to the next step (dm_program_unroll). Their
 * all-gathers stay on comm-hi (idle at the step's end; comm-lo carries the gradients). */
static int emit_publish(bctx *b, int P, int *tmp)
{
    int L = b->nlayers, rc = -1;
    const unsigned char *in = b->pub_in;
    int *lo = dm_malloc((size_t)b->nranks * sizeof *lo, b->err);
    if (!lo) goto out;
    for (int r = 0; r < b->nranks; r++) {
        tmp[r] = lo[r] = -1;
        if (r >= b->emit_ranks) continue;
        const dm_rank_prog *rp = &b->p->ranks[r];
        tmp[r] = b->bwd_id[(size_t)r * L + 0];
        for (int i = 0; i < rp->n_ops; i++) { /* list order: the last update on each stream */
            const dm_op *op = &rp->ops[i];
            if (op->kind != DM_OP_MUON_UPDATE && op->kind != DM_OP_ADAMW) continue;
            int hit = 0;
            for (int a = 0; a < op->n_params && !hit; a++) hit = in[op->params[a]];
            if (hit && op->stream == DM_STREAM_COMPUTE_LO) lo[r] = i;
            else if (hit && i > tmp[r]) tmp[r] = i; /* (an update under the backward, --ns-under-backward D,
                                                       listed before it: the backward stays the dep) */
        }
    }
    b->publishing = 1;
    b->publish_dep2 = lo;
    rc = 0;
    for (int l = 0; l < P && rc == 0; l++) rc = emit_fetch(b, l, tmp, 0);
    b->publishing = 0;
    b->publish_dep2 = NULL;
out:
    free(lo);
    return rc;
}

/* Every rank of the plan runs the same ops: the naive strategies (adamw, muon-ddp, muon-fsdp,
 * their tuned forms) give every rank every op, all collectives over the world group, deps by
 * rank-independent positions. dmuon (owners), muon-rr (chunk owners) and HSDP do not.
 * tests/test_sched checks the lists against an emission for every rank (emit_every_rank). */
static int replicated_plan(const bctx *b)
{
    sched_strategy s = b->o->strategy;
    return b->nranks > 1 && !b->hsdp && !b->o->emit_every_rank &&
           (s == SCHED_ADAMW || s == SCHED_MUON_DDP || s == SCHED_MUON_FSDP);
}

static int emit_program(bctx *b)
{
    int L = b->nlayers, R = b->nranks, k = b->o->prefetch_depth;
    int *tmp = dm_malloc((size_t)R * sizeof *tmp, b->err);
    int *deps = dm_malloc((size_t)(4 * L + 2 * b->o->max_batch + 64 + (int)b->fetch.n + (int)b->grad.n) * sizeof *deps, b->err);
    opt_item *items = NULL;
    rank_items *ri = NULL; /* NS under the backward: every rank's items, made before it */
    int64_t *params = NULL;
    int rc = -1;
    if (!tmp || !deps) goto done;
    int none = b->o->overlap == SCHED_OVERLAP_NONE;
    b->emit_ranks = replicated_plan(b) ? 1 : R;
    /* reserve each rank's op list once: growing 400k ops by doubling costs more than building */
    {
        size_t *need = dm_calloc((size_t)R, sizeof *need, b->err);
        if (!need) goto done;
        for (int pass = 0; pass < 2; pass++) {
            const vec *v = pass ? &b->grad : &b->fetch;
            for (size_t k = 0; k < v->n; k++) {
                const dm_group *g = &b->p->groups[AT(*v, coll_desc, k).group];
                for (int i = 0; i < g->n; i++) need[g->ranks[i]] += pass == 0 && b->z3 ? 2 : 1;
            }
        }
        for (size_t i = 0; i < b->batches.n; i++) {
            int ow = AT(b->batches, ns_batch, i).owner;
            for (int r = 0; r < R; r++)
                if (ow < 0 || ow == owner_of_rank(b, r)) need[r] += 2;
        }
        int bad = 0;
        for (int r = 0; r < R && !bad; r++)
            bad = dm_program_reserve(b->p, r, (int)(need[r] + 3 * (size_t)L + 8), b->err) < 0;
        free(need);
        if (bad) goto done;
    }
    /* 1. fetch + forward */
    if ((b->gathers_lo = fetch_gathers_lo(b))) {
        if (!(b->fetch_hi_now = dm_malloc(2 * (size_t)b->emit_ranks * sizeof *b->fetch_hi_now, b->err))) goto done;
        b->fetch_hi_prev = b->fetch_hi_now + b->emit_ranks;
        for (int r = 0; r < 2 * b->emit_ranks; r++) b->fetch_hi_now[r] = -1;
    }
    int P = b->o->publish < L ? b->o->publish : L; /* the first P layers' fetch: at the step's end (emit_publish) */
    if (P && publish_marks(b, P)) goto done;
    if (none) {
        for (int l = P; l < L; l++)
            if (emit_fetch(b, l, NULL, 0)) goto done;
    } else {
        for (int l = P; l <= k && l < L; l++)
            if (emit_fetch(b, l, NULL, 0)) goto done;
    }
    for (int l = 0; l < L; l++) {
        for (int r = 0; r < b->emit_ranks; r++) {
            int nd = 0;
            if (none && l == 0)
                for (int j = 0; j < L; j++) nd = range_deps(b->fetch_lo, b->fetch_hi, (size_t)r * L + j, deps, nd);
            else if (!none)
                nd = range_deps(b->fetch_lo, b->fetch_hi, (size_t)r * L + l, deps, nd);
            if (emit_compute(b, r, DM_OP_FORWARD, l, deps, nd, &b->fwd_id[(size_t)r * L + l])) goto done;
        }
        if (!none && l + k + 1 < L && emit_fetch(b, l + k + 1, dep_of(b, b->fwd_id, l, tmp), 0)) goto done;
    }
    /* the optimizer's items of every rank, before the backward when NS runs under it */
    int early = (b->o->ns_early > 0 || b->o->ns_stream) && b->o->overlap == SCHED_OVERLAP_INTERLEAVE &&
                b->o->strategy == SCHED_DMUON;
    b->opt_stream = early && b->o->ns_stream ? DM_STREAM_COMPUTE_LO : DM_STREAM_COMPUTE;
    size_t nitems_max = b->batches.n + (size_t)L;
    size_t maxb = (size_t)b->o->max_batch > 64 ? (size_t)b->o->max_batch : 64;
    for (int l = 0; l < L; l++)
        if ((size_t)b->lay_n[l] > maxb) maxb = (size_t)b->lay_n[l];
    if (!(params = dm_malloc(maxb * sizeof *params, b->err))) goto done;
    if (!(items = dm_malloc(nitems_max * sizeof *items, b->err)) || own_index(b)) goto done;
    if (early) { /* each rank's own items only (an owner holds a share of the batches) */
        if (!(ri = dm_calloc((size_t)R, sizeof *ri, b->err))) goto done;
        for (int r = 0; r < R; r++) {
            ri[r].n = opt_items(b, r, items);
            if (!(ri[r].v = dm_malloc((ri[r].n ? ri[r].n : 1) * sizeof *ri[r].v, b->err))) goto done;
            memcpy(ri[r].v, items, ri[r].n * sizeof *items);
        }
    }
    /* 2. backward (+ Z3 re-fetch, + interleaved gradients) */
    if (b->z3) {
        int first = none ? 0 : (L - 1 - k > 0 ? L - 1 - k : 0);
        for (int l = L - 1; l >= first; l--)
            if (emit_fetch(b, l, dep_of(b, b->fwd_id, L - 1, tmp), 1)) goto done;
    }
    for (int l = L - 1; l >= 0; l--) {
        for (int r = 0; r < b->emit_ranks; r++) {
            int nd = 0;
            if (b->z3 && none && l == L - 1)
                for (int j = 0; j < L; j++) nd = range_deps(b->bfetch_lo, b->bfetch_hi, (size_t)r * L + j, deps, nd);
            else if (b->z3 && !none)
                nd = range_deps(b->bfetch_lo, b->bfetch_hi, (size_t)r * L + l, deps, nd);
            if (emit_compute(b, r, DM_OP_BACKWARD, l, deps, nd, &b->bwd_id[(size_t)r * L + l])) goto done;
        }
        if (b->z3 && !none && l - k - 1 >= 0 && emit_fetch(b, l - k - 1, dep_of(b, b->bwd_id, l, tmp), 1)) goto done;
        if (b->o->overlap == SCHED_OVERLAP_INTERLEAVE && emit_grad(b, l, dep_of(b, b->bwd_id, l, tmp))) goto done;
        /* NS under the backward: every item whose gradients were reduced D layers ago */
        if (ri && emit_ready_items(b, ri, l + b->o->ns_early, deps, params)) goto done;
    }
    if (b->o->overlap != SCHED_OVERLAP_INTERLEAVE)
        for (int l = L - 1; l >= 0; l--)
            if (emit_grad(b, l, dep_of(b, b->bwd_id, 0, tmp))) goto done;
    /* 3. optimizer: NS batches + Muon updates on owners, AdamW, in gradient-arrival order (what
     * the backward did not take) */
    if (ri) {
        if (emit_ready_items(b, ri, INT_MIN, deps, params)) goto done;
    } else if (b->fsdp_serial) {
        if (emit_fsdp_serial(b, items, deps, params)) goto done;
    } else {
        for (int r = 0; r < b->emit_ranks; r++) {
            size_t ni = opt_items(b, r, items);
            int last = -1; /* the rank's last gradient collective: the stream runs them in order */
            for (int l = 0; l < L && b->opt_after_grads; l++)
                if (b->grad_hi[(size_t)r * L + l] > last) last = b->grad_hi[(size_t)r * L + l];
            int wait = last >= 0; /* the first item on the compute stream waits on it */
            for (size_t i = 0; i < ni; i++) {
                int was = last;
                if (emit_opt_item(b, r, &items[i], deps, params, wait ? &last : NULL)) goto done;
                if (last != was) wait = 0;
            }
        }
    }
    if (P && emit_publish(b, P, tmp)) goto done;
    /* the other ranks' lists: rank 0's, which they follow already (program.h) */
    rc = b->emit_ranks < R ? dm_program_replicate(b->p, b->err) : 0;
done:
    for (int r = 0; ri && r < R; r++) free(ri[r].v);
    free(ri);
    free(b->pub_in), free(b->pub_adamw);
    b->pub_in = b->pub_adamw = NULL;
    free(tmp);
    free(deps);
    free(items);
    free(params);
    return rc;
}

/* ---- entry --------------------------------------------------------------------------------- */

char *sched_report_objective(const sched_report *r, char *buf, size_t size)
{
    double chain = r->objective_us - r->comm_us;
    int n = snprintf(buf, size, "objective %.3f ms = owner chain %.3f + comm %.3f (%d pairs, %lld collectives)",
                     r->objective_us / 1e3, chain / 1e3, r->comm_us / 1e3, r->pairs,
                     (long long)r->pairs * r->colls_per_pair);
    if (n >= 0 && (size_t)n < size && r->objective_bound_us > 0)
        n += snprintf(buf + n, size - n, "; proven bound %.3f ms (gap %.2f%%)", r->objective_bound_us / 1e3,
                      100 * (r->objective_us / r->objective_bound_us - 1));
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - n, "; method %s%s", r->method[0] ? r->method : "?",
                 r->comm_weight != 1.0 ? (r->comm_weight == 0 ? ", NS load only (comm weight 0)" : ", comm weighted") : "");
    return buf;
}

void sched_report_free(sched_report *r)
{
    if (!r) return;
    free(r->ns_load_us);
    free(r->ns_ops);
    r->ns_load_us = NULL;
    r->ns_ops = NULL;
}

int sched_report_mem(const sched_report *rep, const dm_model *m, const dm_program *p, dm_mem_est *e, dm_err *err)
{
    if (rep && rep->mem_valid) return *e = rep->mem, 0;
    return dm_mem_peak(m, p, NULL, e, err);
}

static int report_everywhere(bctx *b)
{
    sched_report *r = b->rep;
    r->nowners = b->nranks;
    if (!(r->ns_load_us = dm_calloc((size_t)b->nranks, sizeof *r->ns_load_us, b->err)) ||
        !(r->ns_ops = dm_calloc((size_t)b->nranks, sizeof *r->ns_ops, b->err)))
        return -1;
    for (size_t k = 0; k < b->batches.n; k++) {
        const ns_batch *nb = &AT(b->batches, ns_batch, k);
        for (int o = 0; o < b->nranks; o++)
            if (nb->owner < 0 || nb->owner == o) {
                r->ns_load_us[o] += nb->us;
                r->ns_ops[o]++;
            }
    }
    return 0;
}

static int build_once(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                      const sched_opts *opts, dm_program **out, sched_report *rep, dm_err *err)
{
    double t0 = sched_wall_s();
    bctx b;
    int64_t *ids = NULL;
    int rc = -1;
    memset(&b, 0, sizeof b);
    b.fetch = (vec)VEC(coll_desc);
    b.grad = (vec)VEC(coll_desc);
    b.pool = (vec)VEC(int64_t);
    b.batches = (vec)VEC(ns_batch);
    b.batch_mats = (vec)VEC(int64_t);
    b.uw_k = (vec)VEC(dm_kernel);
    *out = NULL;
    if (rep) memset(rep, 0, sizeof *rep);
    if (nranks < 1) return dm_err_set(err, "sched: expected at least one rank, got %d", nranks);
    if (opts->max_batch < 1 || opts->prefetch_depth < 1 || opts->tokens < 1)
        return dm_err_set(err, "sched: max_batch, prefetch depth and tokens must be positive");
    sched_opts resolved; /* auto without a simulator: lpt on the NS load (sched.h) */
    sched_opts_effective(opts, &resolved);
    if (resolved.balance == SCHED_BAL_AUTO) resolved.balance = SCHED_BAL_LPT, resolved.comm_weight = 0;
    opts = &resolved;
    b.model = model;
    b.cl = cluster;
    b.costs = costs;
    b.o = opts;
    b.rep = rep;
    b.err = err;
    b.nranks = nranks;
    b.gpn = opts->gpus_per_node > 0 ? opts->gpus_per_node : cluster->gpus_per_node;
    if (b.gpn > nranks) b.gpn = nranks;
    if (b.gpn < 1) b.gpn = 1;
    b.nnodes = (nranks + b.gpn - 1) / b.gpn;
    if (opts->hierarchical && opts->strategy != SCHED_DMUON) resolved.hierarchical = 0; /* dmuon's scheme, as --hsdp */
    if (opts->hierarchical && nranks % b.gpn)
        return dm_err_set(err, "sched: --hierarchical needs whole nodes: %d ranks is not a multiple of %d GPUs per node",
                          nranks, b.gpn);
    if (opts->hsdp && opts->strategy != SCHED_DMUON) { /* DMuon's scheme: the others ignore it, as a */
        resolved.hsdp = 0, resolved.shard = 0;          /* study over strategies needs */
    } else if (opts->hsdp) {
        if (opts->hierarchical)
            return dm_err_set(err, "sched: --hsdp and --hierarchical are two different schemes: choose one");
        resolved.shard = opts->shard > 0 ? opts->shard : b.gpn;
        if (resolved.shard > nranks || nranks % resolved.shard)
            return dm_err_set(err, "sched: --hsdp needs whole shard groups: %d ranks is not a multiple of %d ranks per "
                              "shard group", nranks, resolved.shard);
        b.hsdp = 1;
        b.S = resolved.shard;
        b.R = nranks / b.S;
    }
    if (opts->ns_split < 0) {
        resolved.ns_split = 0; /* auto: the P chosen by simulation (plan_best.c), none here */
    } else if (opts->ns_split && opts->strategy != SCHED_DMUON) {
        resolved.ns_split = 0; /* dmuon's, as --hsdp: the others ignore it */
    } else if (opts->ns_split) {
        if (opts->hierarchical || opts->hsdp)
            return dm_err_set(err, "sched: --ns-split works with the flat dmuon plan, not with --%s",
                              opts->hsdp ? "hsdp" : "hierarchical");
        if (opts->ns_split > b.gpn)
            return dm_err_set(err, "sched: --ns-split %d: a split runs on the GPUs of one node, and a node has %d",
                              opts->ns_split, b.gpn);
    }
    b.nowners = opts->strategy == SCHED_DMUON && opts->hierarchical ? b.gpn : nranks;
    b.elt = opts->dtype == DM_DT_FP32 ? 4 : 2;
    b.z3 = opts->zero == 3 && opts->strategy != SCHED_MUON_DDP && opts->strategy != SCHED_MUON_RR;
    if (opts->publish == SCHED_PUBLISH_AUTO) /* (the first layer's fetch has something to run beside at the
                                                 step's end only where the forward prefetches) */
        resolved.publish = nranks > 1 && !b.z3 && opts->overlap != SCHED_OVERLAP_NONE;
    else if (opts->publish && b.z3)
        return dm_err_set(err, "sched: --publish keeps the first layers' weights from the end of one step to the next, "
                          "and --zero 3 frees them after the forward: choose one");
    if (opts->publish > opts->prefetch_depth + 1)
        return dm_err_set(err, "sched: --publish %d: only the layers fetched before any forward compute can be published "
                          "at the step's end, %d with --prefetch %d", opts->publish, opts->prefetch_depth + 1,
                          opts->prefetch_depth);
    b.adamw_sharded = opts->strategy == SCHED_ADAMW || opts->strategy == SCHED_MUON_FSDP || opts->strategy == SCHED_DMUON;
    b.muon_update_shard = opts->strategy == SCHED_MUON_FSDP;
    b.shared_updates = opts->strategy == SCHED_ADAMW || opts->strategy == SCHED_MUON_DDP || opts->strategy == SCHED_MUON_FSDP;
    char desc[512];
    sched_opts_describe(opts, desc, sizeof desc);
    b.fsdp_serial = opts->strategy == SCHED_MUON_FSDP && sched_opts_pytorch_form(opts);
    b.eager = sched_opts_pytorch_form(opts);
    b.opt_after_grads = opts->strategy == SCHED_MUON_DDP && sched_opts_pytorch_form(opts);
    if (!(b.p = dm_program_new(nranks, b.gpn, model->name, sched_opts_strategy_label(opts), cluster->name, desc,
                               opts->tokens, err)))
        return -1;
    b.p->seq_len = opts->seq_len;
    b.p->causal_tile = opts->causal_tile;
    b.p->layer_passes = opts->layer_passes;
    if (b.eager && !(b.p->ns_coeffs = dm_strdup(SCHED_PYTORCH_NS_COEFFS, err))) goto done;
    if (setup(&b) || setup_works(&b)) goto done;
    if (!(ids = dm_malloc((size_t)(b.nmats ? b.nmats : 1) * sizeof *ids, err))) goto done;
    int drc = 0;
    switch (opts->strategy) {
    case SCHED_ADAMW: drc = describe_adamw(&b, ids); break;
    case SCHED_MUON_DDP: drc = describe_ddp(&b, ids); break;
    case SCHED_MUON_FSDP: drc = describe_fsdp(&b, ids); break;
    case SCHED_MUON_RR: drc = describe_rr(&b, ids); break;
    case SCHED_DMUON: drc = describe_dmuon(&b, ids); break;
    }
    if (drc) goto done;
    if (rep && opts->strategy != SCHED_DMUON) {
        if (report_everywhere(&b)) goto done;
        snprintf(rep->solver_status, sizeof rep->solver_status, "%s",
                 opts->strategy == SCHED_MUON_RR ? "round-robin (modded-nanogpt chunks)" :
                 opts->strategy == SCHED_ADAMW ? "no NS" : "replicated (every rank)");
        rep->n_units = (int)b.batches.n;
    }
    if (!(opts->objective_only && opts->strategy == SCHED_DMUON) && !b.cut &&
        (emit_program(&b) || dm_arena_mark(model, b.p, err))) /* which collectives the executor stages */
        goto done;
    if (rep) {
        rep->n_muon = 0;
        for (int64_t i = 0; i < b.nmats; i++) rep->n_muon += b.mats[i].role == DM_ROLE_MUON;
        double sum = 0, mx = 0, largest = 0;
        for (int o = 0; o < rep->nowners; o++) {
            sum += rep->ns_load_us[o];
            mx = fmax(mx, rep->ns_load_us[o]);
        }
        for (size_t k = 0; k < b.batches.n; k++) largest = fmax(largest, AT(b.batches, ns_batch, k).us);
        rep->max_us = mx;
        rep->mean_us = rep->nowners ? sum / rep->nowners : 0;
        rep->imbalance = rep->mean_us > 0 ? mx / rep->mean_us - 1 : 0;
        if (opts->strategy != SCHED_DMUON) rep->lower_bound_us = rep->nowners ? fmax(sum / rep->nowners, largest) : 0;
        rep->gap = rep->lower_bound_us > 0 ? mx / rep->lower_bound_us - 1 : 0;
        snprintf(rep->costs, sizeof rep->costs, "%s", dm_costs_describe(costs));
    }
    rc = 0;
done:
    free(ids);
    free_ctx(&b);
    if (rc) {
        dm_program_free(b.p);
        if (rep) sched_report_free(rep);
    } else {
        *out = b.p;
        if (rep) rep->plan_s = sched_wall_s() - t0;
    }
    return rc;
}

/* 1 when some rank runs an NS op of more than one matrix (each shared op list read once). */
static int batches_ns(const dm_program *p)
{
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; p->ranks[r].share == r && i < p->ranks[r].n_ops; i++)
            if (p->ranks[r].ops[i].kind == DM_OP_NS && p->ranks[r].ops[i].n_params > 1) return 1;
    return 0;
}

/* The program as asked; when its NS batches make it need more memory than the GPU has
 * (core/memory.h), built again with the largest NS batch halved until it fits (NS batches
 * cost memory, a plan per batch: Llama-3.2-3B at 16384 tokens on one H200 needs 142.8 GiB with
 * batches of 28 and 138.6 with batches of at most 8, for 0.05% of its simulated step), and the
 * options line says the max-batch used; when no halving fits, the first program (the memory
 * line says it does not fit). */
int sched_build(const dm_model *model, const dm_cluster *cluster, int nranks, const dm_costs *costs,
                const sched_opts *opts, dm_program **out, sched_report *rep, dm_err *err)
{
    sched_assign mine; /* each rebuild's owner assignment; the caller's when its program is kept */
    memset(&mine, 0, sizeof mine);
    if (build_once(model, cluster, nranks, costs, opts, out, rep, err)) return -1;
    const dm_gpu *gpu = cluster->gpu;
    sched_opts eff; /* the PyTorch forms run one matrix per NS whatever max_batch says */
    sched_opts_effective(opts, &eff);
    if (!gpu || gpu->mem_bytes <= 0 || eff.max_batch < 2 || !*out || !batches_ns(*out)) return 0;
    dm_mem_est e;
    if (dm_mem_peak(model, *out, NULL, &e, err)) goto fail;
    if (rep) rep->mem = e, rep->mem_valid = 1;
    if (dm_mem_fits(&e, gpu)) return 0;
    double no_ns = e.total - e.ns; /* what no batch size changes */
    if (no_ns > gpu->mem_bytes) return 0;
    sched_opts o = *opts;
    o.assign_in = NULL, o.assign_in_rep = NULL; /* an assignment of other batches: balanced again */
    if (o.assign_out) o.assign_out = &mine;
    while (o.max_batch > 1) {
        o.max_batch /= 2;
        sched_assign_free(&mine);
        dm_program *p = NULL;
        sched_report r;
        if (build_once(model, cluster, nranks, costs, &o, &p, rep ? &r : NULL, err)) goto fail;
        if (dm_mem_peak(model, p, NULL, &e, err)) {
            dm_program_free(p);
            if (rep) sched_report_free(&r);
            goto fail;
        }
        if (dm_mem_fits(&e, gpu)) {
            dm_program_free(*out);
            *out = p;
            if (rep) {
                sched_report_free(rep);
                *rep = r;
                rep->mem = e, rep->mem_valid = 1;
            }
            if (opts->assign_out) {
                sched_assign_free(opts->assign_out);
                *opts->assign_out = mine;
            }
            return 0;
        }
        dm_program_free(p);
        if (rep) sched_report_free(&r);
    }
    sched_assign_free(&mine); /* nothing fits: the program as asked, with its assignment */
    return 0;
fail:
    sched_assign_free(&mine);
    dm_program_free(*out);
    *out = NULL;
    if (rep) sched_report_free(rep);
    return -1;
}
