/* memory.c: the per-rank device memory estimate of the GPU executor (memory.h): the parts every
 * rank shares (weights and gradients, activations, scratch, collective buffers) computed once,
 * the optimizer state and NS plans per rank. */
#include "memory.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holds.h"
#include "ns_cuda.h"
#include "workload.h"

#define GIB 1073741824.0

double dm_mem_alloc_bytes(double bytes)
{
    const double page = 2097152, small = 32768;
    if (bytes > page / 2) return ceil(bytes / page) * page;
    double b = small;
    while (b < bytes) b *= 2;
    return b;
}

/* A param of rank r's op i the model does not have (dm_op_check_params, the one check), or a
 * collective without a valid id or group: refused (every loop below checks the ops it reads
 * before it reads them). */
static int bad_op(const dm_program *p, int r, int i, int64_t n, dm_err *err)
{
    const dm_op *op = &p->ranks[r].ops[i];
    if (dm_op_is_collective(op->kind) && (op->coll < 0 || op->coll >= p->n_colls || op->group < 0 || op->group >= p->n_groups))
        return dm_err_set(err, "memory: rank %d op %d (%s): bad collective %d or group %d", r, i, dm_op_kind_name(op->kind),
                          op->coll, op->group);
    return dm_op_check_params(op, r, i, n, err);
}

/* What every rank shares, and what the per-rank parts read. */
typedef struct mem_ctx {
    const dm_model *m;
    const dm_program *p;
    dm_matrix *mx;
    int64_t n;
    int64_t *sz;             /* elements per matrix */
    dm_mem_est common;       /* the rank-independent parts */
    dm_state_walk sw;        /* the state rule's walk of the rank at hand (holds.h): per matrix
                                the range of its state, need 1 NS on it, | 2 AdamW on it */
    int64_t (*nskey)[4];     /* NS plan keys of one rank */
    int nskey_cap;
    const dm_op *ns_of;      /* the op list whose NS plans ns_bytes counts (ranks sharing a list
                                share their plans) */
    int ns_of_n;
    double ns_bytes;
} mem_ctx;

static void ctx_free(mem_ctx *c)
{
    free(c->mx);
    free(c->sz);
    dm_state_walk_free(&c->sw);
    free(c->nskey);
}

/* Activations kept for backward and the transient scratch, from every layer's kernels. */
static int layer_parts(mem_ctx *c, dm_err *err)
{
    const dm_model *m = c->m;
    dm_workload_opts o = {c->p->tokens, c->p->seq_len, 2, c->p->causal_tile, !c->p->layer_passes};
    if (dm_workload_check(m, &o, err)) return -1;
    double kept = 0;
    int64_t dx = 0, ew = 0, scores = 0, operands = 0, big[6] = {0}; /* the largest of each attention buffer */
    for (int l = 0; l < m->n_layers; l++) {
        dm_layer_work w;
        if (dm_layer_work_build(m, c->mx, c->n, l, &o, &w, err)) return -1;
        kept += w.kept_bytes;
        for (int i = 0; i < w.n_bwd; i++) {
            const dm_kernel *k = &w.bwd[i];
            if (k->op == DM_KOP_DGRAD || k->op == DM_KOP_ACT_BWD || k->op == DM_KOP_GLU_BWD) {
                int64_t e = k->m * k->n * (k->kind == DM_KERN_BGEMM ? k->batch : 1);
                if (e > dx) dx = e;
            }
            if (dm_pass_scratch(k) > ew) ew = dm_pass_scratch(k);
        }
        for (int i = 0; i < w.n_fwd; i++)
            if (dm_pass_scratch(&w.fwd[i]) > ew) ew = dm_pass_scratch(&w.fwd[i]);
        /* the attention buffers, each at its own largest over the step's products, as the
         * executor sizes them (kernels/wk_plan.c): the window's operands, each group's scores,
         * one output buffer; Q, K, V, dO and the output count as 2 x operands */
        for (int i = 0; i < 6; i++)
            if (w.attn_max[i] > big[i]) big[i] = w.attn_max[i];
        dm_layer_work_free(&w);
    }
    scores = big[4], operands = (big[0] + big[1] + big[2] + big[3] + big[5] + 1) / 2;
    dm_mem_est *e = &c->common;
    e->activations = kept;
    e->max_dx = dx;
    e->max_ew = ew;
    e->max_attn_scores = scores;
    e->max_attn_operands = operands;
    e->scratch = 2.0 * ((double)dx + (double)ew + 2.0 * (double)scores + 2.0 * (double)operands);
    return 0;
}

/* The ops of rank r that tell what it holds of a param (a gradient reduced to it, an update). */
static int walk_reads(const dm_op *op, int r, int nranks)
{
    switch (op->kind) {
    case DM_OP_BACKWARD: return nranks == 1;
    case DM_OP_REDUCE: return op->root == r;
    case DM_OP_BROADCAST: return op->parts > 1; /* a part of the weights it then holds (HSDP) */
    case DM_OP_ALLREDUCE:
    case DM_OP_REDUCESCATTER:
    case DM_OP_ALLGATHER:
    case DM_OP_MUON_UPDATE:
    case DM_OP_ADAMW: return 1;
    default: return 0;
    }
}

/* Does what a rank of this list holds depend on which rank it is (holds.h's dm_hold_op)? */
static int member_dependent(const dm_rank_prog *rp)
{
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->kind == DM_OP_REDUCESCATTER || op->parts > 1 || op->kind == DM_OP_REDUCE) return 1;
    }
    return 0;
}

/* Which ranks the per-rank walks visit (memory.h): a rank on the list of the rank before it has
 * its parts, unless the list cuts flat buffers by member (a reduce-scatter, a part) or reduces to
 * a root: then what it holds (core/holds.h) may differ by where its shards fall, and such ranks
 * are all visited up to DM_MEM_PEAK_EXACT ranks, past it every (ranks / DM_MEM_PEAK_EXACT)-th of
 * a run of one list and its last. w carries the run from rank to rank, in order from 0. */
typedef struct rank_walk {
    int run, dep;
} rank_walk;

static int rank_walked(const dm_program *p, int r, rank_walk *w)
{
    int stride = p->nranks > DM_MEM_PEAK_EXACT ? p->nranks / DM_MEM_PEAK_EXACT : 1;
    int same = dm_rank_same_list_as_prev(p, r);
    int last = r + 1 == p->nranks || p->ranks[r + 1].ops != p->ranks[r].ops;
    w->run = same ? w->run + 1 : 0;
    if (!same) w->dep = -1;
    if (same && w->dep < 0) w->dep = member_dependent(&p->ranks[r]); /* once per run of one list */
    return !(same && (!w->dep || (w->run % stride && !last)));
}

/* Elements of each collective's buffer; all-gathers by their members' contributions (memory.h)
 * unless the caller gives ag_slot. One walk per rank over its list, in order, when the program
 * has all-gathers, over the ranks rank_walked visits. */
static int coll_parts(mem_ctx *c, const dm_mem_exact *x, dm_err *err)
{
    const dm_program *p = c->p;
    const int64_t *sz = c->sz, *ag_slot = x ? x->ag_slot : NULL;
    int64_t n = c->n, max_coll = 1;
    int64_t *ag = dm_calloc((size_t)p->n_colls + 1, sizeof *ag, err);
    /* what the rank holds of each param as its ops run: core/holds.h's rule, the executors' */
    dm_range *hr = dm_calloc(4 * ((size_t)n + 1), sizeof *hr, err);
    dm_hold h = {hr, hr + n + 1, hr + 2 * (n + 1), hr + 3 * (n + 1)};
    unsigned char *seen = dm_calloc((size_t)p->n_colls + 1, 1, err);
    int rc = -1, any_ag = 0;
    if (!ag || !hr || !seen) goto out;
    for (int r = 0; r < p->nranks && !any_ag; r++)
        for (int i = 0; i < p->ranks[r].n_ops && !any_ag; i++) any_ag = p->ranks[r].ops[i].kind == DM_OP_ALLGATHER;
    rank_walk w = {0, -1};
    for (int r = 0; r < p->nranks && any_ag && !ag_slot; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        if (!rank_walked(p, r, &w)) continue;
        for (int i = 0; i < rp->n_ops; i++) { /* the params it reads back to nothing */
            if (!walk_reads(&rp->ops[i], r, p->nranks)) continue;
            if (bad_op(p, r, i, n, err)) goto out;
            for (int a = 0; a < rp->ops[i].n_params; a++) {
                int64_t q = rp->ops[i].params[a];
                h.red[q] = h.rs[q] = h.upd[q] = h.part[q] = (dm_range){0, 0};
            }
        }
        for (int pass = 0; pass < 2; pass++) /* the walk; then weight all-gathers by the updates */
            for (int i = 0; i < rp->n_ops; i++) {
                const dm_op *op = &rp->ops[i];
                if (!walk_reads(op, r, p->nranks)) continue;
                int grads = op->kind == DM_OP_ALLGATHER && op->payload == DM_PAYLOAD_GRADS;
                if (pass == 1 && (op->kind != DM_OP_ALLGATHER || grads)) continue;
                int64_t got = 0; /* the member's contribution (real/real_work.c walk_rank): what it
                                    holds reduced; for weights what it updates, else the part a
                                    part broadcast brought it (HSDP) */
                if (grads || pass == 1)
                    for (int a = 0; a < op->n_params; a++) {
                        int64_t q = op->params[a];
                        dm_range g = pass == 0 ? h.red[q] : h.upd[q].hi > h.upd[q].lo ? h.upd[q] : h.part[q];
                        got += g.hi > g.lo ? g.hi - g.lo : 0;
                    }
                if (pass == 0) dm_hold_op(p, sz, r, op, &h);
                if ((grads || pass == 1) && got > ag[op->coll]) ag[op->coll] = got;
            }
    }
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops && p->ranks[r].share == r; i++) { /* a shared list once */
            const dm_op *op = &p->ranks[r].ops[i];
            if (!dm_op_is_collective(op->kind)) continue;
            if ((op->coll < 0 || op->coll >= p->n_colls || !seen[op->coll]) && bad_op(p, r, i, n, err)) goto out;
            if (seen[op->coll]) continue;
            seen[op->coll] = 1; /* every member's op of a collective names the same params */
            if (!(x && x->staged ? x->staged[op->coll] : op->staged)) continue; /* in place on the arenas (core/arena.h) */
            int64_t t = 0, gn = p->groups[op->group].n;
            for (int a = 0; a < op->n_params; a++) t += sz[op->params[a]];
            t = (t + gn - 1) / gn * gn;
            if (op->kind == DM_OP_ALLGATHER) t = (ag_slot ? ag_slot[op->coll] : ag[op->coll]) * gn;
            if (t > max_coll) max_coll = t;
        }
    c->common.max_coll = max_coll;
    c->common.comm = (double)DM_STREAM_COLL_COUNT * 2.0 * (double)max_coll;
    rc = 0;
out:
    free(ag);
    free(hr);
    free(seen);
    return rc;
}

static int ctx_init(mem_ctx *c, const dm_model *m, const dm_program *p, const dm_mem_exact *x, dm_err *err)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->p = p;
    if (dm_model_matrices(m, -1, &c->mx, &c->n, err) < 0 ||
        !(c->sz = dm_malloc(((size_t)c->n + 1) * sizeof *c->sz, err)))
        return -1;
    for (int64_t i = 0; i < c->n; i++) c->sz[i] = dm_matrix_elems(m, &c->mx[i]);
    if (dm_state_walk_init(&c->sw, c->n, err)) return -1;
    dm_mem_est *e = &c->common;
    int64_t total = 0, max_size = 1;
    for (int64_t i = 0; i < c->n; i++) {
        total += c->sz[i];
        if (c->sz[i] > max_size) max_size = c->sz[i];
    }
    e->total_elems = total;
    e->max_size = max_size;
    e->weights_grads = 2.0 * 2.0 * (double)(x && x->arena_elems > 0 ? x->arena_elems : total);
    e->runtime = DM_MEM_RUNTIME_BYTES;
    if (layer_parts(c, err) || coll_parts(c, x, err)) return -1;
    if (x && x->activations > 0) e->activations = x->activations;
    if (x && x->scratch > 0) e->scratch = x->scratch;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Plan key nk of rank_parts (rows, cols, count, algorithm), the array grown as needed. */
static int push_key(mem_ctx *c, int nk, int64_t rows, int64_t cols, int64_t count, int64_t algo, dm_err *err)
{
    if (nk == c->nskey_cap) {
        int cap = c->nskey_cap ? 2 * c->nskey_cap : 64;
        int64_t(*g)[4] = dm_realloc(c->nskey, (size_t)cap * sizeof *g, err);
        if (!g) return -1;
        c->nskey = g;
        c->nskey_cap = cap;
    }
    int64_t *key = c->nskey[nk];
    key[0] = rows, key[1] = cols, key[2] = count, key[3] = algo;
    return 0;
}

/* The per-rank parts of rank r into *e (a copy of the shared ones). */
static int rank_parts(mem_ctx *c, int r, dm_mem_est *e, dm_err *err)
{
    const dm_rank_prog *rp = &c->p->ranks[r];
    *e = c->common;
    e->rank = r;
    /* which matrices this rank updates, and its NS plans (one per shape, batch and algorithm) */
    int nk = 0;
    double state = 0, next = 0, ns = 0;
    int same_list = c->ns_of && c->ns_of == rp->ops && c->ns_of_n == rp->n_ops;
    for (int i = 0; i < rp->n_ops && !same_list; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->kind != DM_OP_NS && op->kind != DM_OP_ADAMW) continue; /* the ops that need state */
        if (bad_op(c->p, r, i, c->n, err)) return -1;
        if (op->kind != DM_OP_NS || op->n_params < 1) continue;
        /* the executor's plans (real/real_gpu.c ns_op): one per orientation of the batch's
         * matrices, keyed by (rows, cols, count, algorithm) */
        const dm_matrix *x = &c->mx[op->params[0]];
        if (op->parts > 1) { /* a split NS: its slice (s x r) and the n x n Gram, as a direct plan of s x r */
            if (push_key(c, nk++, dm_ns_split_rows(op), x->rows < x->cols ? x->rows : x->cols, 1, DM_NS_DIRECT, err))
                return -1;
            continue;
        }
        int64_t cnt = 0;
        for (int a = 0; a < op->n_params; a++) cnt += c->mx[op->params[a]].rows == x->rows;
        for (int pass = 0; pass < 2; pass++) {
            int64_t k = pass ? op->n_params - cnt : cnt;
            if (k < 1 || (pass && x->rows == x->cols)) continue;
            if (push_key(c, nk++, pass ? x->cols : x->rows, pass ? x->rows : x->cols, k, op->algo, err)) return -1;
        }
    }
    /* distinct plans, each: input and output in the iteration dtype (2 bytes), two m x n
     * iterates, and m x m buffers, six for Gram and two for direct (kernels/ns_cuda.cu
     * ns_plan_create), each buffer over the plan's batch a cudaMalloc of its own, and the
     * plan's cuBLASLt workspace (NS_PLAN_WS_BYTES) */
    if (nk > 1) qsort(c->nskey, (size_t)nk, sizeof *c->nskey, cmp_key);
    for (int j = 0; j < nk; j++) {
        int64_t *key = c->nskey[j];
        if (j && !cmp_key(key, c->nskey[j - 1])) continue;
        double rows = (double)key[0], cols = (double)key[1], mn = rows < cols ? rows : cols, cnt = (double)key[2];
        ns += 4 * dm_mem_alloc_bytes(2.0 * cnt * rows * cols) +
              (key[3] == DM_NS_GRAM ? 6 : 2) * dm_mem_alloc_bytes(2.0 * cnt * mn * mn) + dm_mem_alloc_bytes(NS_PLAN_WS_BYTES);
    }
    if (same_list) {
        ns = c->ns_bytes;
    } else {
        c->ns_of = rp->ops, c->ns_of_n = rp->n_ops, c->ns_bytes = ns;
    }
    /* fp32 master weights, momentum and moments over the range this rank's updates touch (the
     * state rule, core/holds.h), and a second buffer of each */
    dm_state_walk *w = &c->sw;
    if (dm_state_walk_rank(w, c->p, c->sz, r, err)) return -1;
    for (int64_t j = 0; j < w->n_touched; j++) {
        int64_t q = w->touched[j];
        if (w->st[q].hi <= w->st[q].lo) continue;
        double s4 = dm_mem_alloc_bytes(4.0 * (double)(w->st[q].hi - w->st[q].lo)); /* an allocation each */
        int arrays = 1 + ((w->need[q] & 1) ? 1 : 0) + ((w->need[q] & 2) ? 2 : 0);
        state += s4 * arrays;
        next += s4 * arrays;
    }
    e->state = state + dm_mem_alloc_bytes(4.0 * (double)c->common.max_size); /* + the fp32 gradient scratch */
    int64_t lo_scratch = dm_mem_lo_scratch(rp, w->st);
    if (lo_scratch > 0) e->state += dm_mem_alloc_bytes(4.0 * (double)lo_scratch); /* + compute-lo's */
    e->state_next = next;
    e->ns = ns;
    e->total = e->weights_grads + e->activations + e->scratch + e->state + e->state_next + e->ns + e->comm + e->runtime;
    return 0;
}

int64_t dm_mem_lo_scratch(const dm_rank_prog *rp, const dm_range *st)
{
    int on[2] = {0, 0}, ns_lo = 0;
    int64_t most = 0;
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->kind != DM_OP_NS && op->kind != DM_OP_MUON_UPDATE && op->kind != DM_OP_ADAMW) continue;
        int lo = op->stream == DM_STREAM_COMPUTE_LO;
        on[lo] = 1;
        if (lo && op->kind != DM_OP_ADAMW) ns_lo = 1;
        for (int a = 0; lo && op->kind == DM_OP_ADAMW && a < op->n_params; a++) {
            const dm_range *q = &st[op->params[a]];
            if (q->hi - q->lo > most) most = q->hi - q->lo;
        }
    }
    if (!on[0] || !on[1]) return 0;
    return ns_lo ? -1 : most;
}

int dm_mem_estimate(const dm_model *m, const dm_program *p, int r, const dm_mem_exact *x, dm_mem_est *e, dm_err *err)
{
    memset(e, 0, sizeof *e);
    if (r < 0 || r >= p->nranks) return dm_err_set(err, "memory: rank %d is not in the program's %d ranks", r, p->nranks);
    mem_ctx c;
    int rc = ctx_init(&c, m, p, x, err) || rank_parts(&c, r, e, err) ? -1 : 0;
    ctx_free(&c);
    return rc;
}

int dm_mem_peak(const dm_model *m, const dm_program *p, const dm_mem_exact *x, dm_mem_est *e, dm_err *err)
{
    memset(e, 0, sizeof *e);
    mem_ctx c;
    int rc = ctx_init(&c, m, p, x, err);
    rank_walk w = {0, -1};
    for (int r = 0; r < p->nranks && !rc; r++) {
        dm_mem_est x;
        if (!rank_walked(p, r, &w)) continue;
        if ((rc = rank_parts(&c, r, &x, err))) break;
        if (r == 0 || x.total > e->total) *e = x;
    }
    ctx_free(&c);
    return rc ? -1 : 0;
}

int dm_mem_fits(const dm_mem_est *e, const dm_gpu *gpu) { return e->total <= gpu->mem_bytes; }

const char *dm_mem_describe(const dm_mem_est *e, const dm_gpu *gpu, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "peak %.1f GiB per rank (rank %d: weights+grads %.1f, activations %.1f, scratch %.1f, optimizer "
                     "state %.1f + %.1f second buffers, NS %.1f, comm %.1f, runtime %.1f GiB)",
                     e->total / GIB, e->rank, e->weights_grads / GIB, e->activations / GIB, e->scratch / GIB,
                     e->state / GIB, e->state_next / GIB, e->ns / GIB, e->comm / GIB, e->runtime / GIB);
    if (n < 0 || (size_t)n >= size) return buf;
    if (dm_mem_fits(e, gpu) && e->total > (1 - DM_MEM_EST_MARGIN) * gpu->mem_bytes)
        snprintf(buf + n, size - (size_t)n, ": fits on %s (%.1f GiB), tight: the estimate has come out up to %.0f%% under "
                 "the measured peak", gpu->short_name, gpu->mem_bytes / GIB, 100 * DM_MEM_EST_MARGIN);
    else if (dm_mem_fits(e, gpu))
        snprintf(buf + n, size - (size_t)n, ": fits on %s (%.1f GiB)", gpu->short_name, gpu->mem_bytes / GIB);
    else
        snprintf(buf + n, size - (size_t)n, ": does not fit on GPU %s: needs %.1f GiB of %.1f", gpu->short_name,
                 e->total / GIB, gpu->mem_bytes / GIB);
    return buf;
}
