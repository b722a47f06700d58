/* real_cpu.c: the CPU backend of the real executor (real.h): interprets a step program with
 * MPI non-blocking collectives and the reference kernels of ns_ref.h.
 *
 * Streams are emulated by a dataflow loop on one thread: an op starts when its dependencies
 * and the previous op of its stream are done; a collective is also posted only after the
 * collectives before it in its group (list order), which is the order MPI (and NCCL) match
 * them in. Compute ops run to completion when started; collectives are MPI_I* calls tested in
 * the loop, so a program that would deadlock on GPUs deadlocks here too and is reported after
 * the timeout instead of hanging. */
#include "config.h"

#include <gsl/gsl_cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "real.h"
#include "real_priv.h"
#include "real_work.h"
#include "trace.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

void real_opts_default(real_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = REAL_BACKEND_CPU;
    o->tokens = 64;
    o->grad_chunks = 1;
    o->seed = 1;
    o->timeout_s = 300;
    o->input_grad = 1;
    ns_muon_params_default(&o->muon);
    ns_adamw_params_default(&o->adamw);
    o->inject_step = -1;
    o->inject_rank = -1;
    o->inject_param = -1;
    o->overflow_step = -1;
    o->overflow_param = -1;
    o->stall_step = -1;
    o->stall_rank = -1;
}

void real_maybe_stall(const real_exec *ex)
{
    if (ex->step != ex->o.stall_step || ex->rank != ex->o.stall_rank || !(ex->o.stall_s > 0)) return;
    struct timespec ts = {(time_t)ex->o.stall_s, (long)((ex->o.stall_s - (double)(time_t)ex->o.stall_s) * 1e9)};
    nanosleep(&ts, NULL);
}

int64_t real_exec_n_matrices(const real_exec *ex) { return ex->n_mx; }
const dm_matrix *real_exec_matrices(const real_exec *ex) { return ex->mx; }

const char *real_exec_info(const real_exec *ex) { return ex->info; }

const char *real_matrix_name(const real_exec *ex, int64_t id)
{
    real_exec *e = (real_exec *)ex;
    if (id < 0 || id >= ex->n_mx) snprintf(e->name_buf, sizeof e->name_buf, "param %lld", (long long)id);
    else real_matrix_name_into(ex->model, &ex->mx[id], e->name_buf, sizeof e->name_buf);
    return ex->name_buf;
}

static void *xcalloc(size_t n, size_t sz, dm_err *err) { return dm_calloc(n ? n : 1, sz, err); }

/* ---- setup ---------------------------------------------------------------------------- */

static int check_hash(real_exec *ex, dm_err *err)
{
    uint64_t mine = dm_program_hash(ex->prog), root = mine;
    MPI_Bcast(&root, 1, MPI_UINT64_T, 0, ex->comm);
    int bad = mine != root, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ex->comm);
    if (bad)
        return dm_err_set(err, "rank %d: program hash %016llx differs from rank 0's %016llx; refusing to start",
                          ex->rank, (unsigned long long)mine, (unsigned long long)root);
    if (any) return dm_err_set(err, "rank %d: another rank's program differs from rank 0's; refusing to start", ex->rank);
    return 0;
}

static int setup_ops(real_exec *ex, dm_err *err)
{
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    int n = rp->n_ops;
    if (!(ex->prev_stream = xcalloc((size_t)n, sizeof(int), err)) ||
        !(ex->prev_coll = xcalloc((size_t)n, sizeof(int), err)) ||
        !(ex->state = xcalloc((size_t)n, 1, err)) || !(ex->pend = xcalloc((size_t)n, sizeof(pending), err)) ||
        !(ex->op_t0 = xcalloc((size_t)n, sizeof(double), err)) || !(ex->op_dur = xcalloc((size_t)n, sizeof(double), err)))
        return -1;
    int last_s[DM_STREAM__COUNT];
    for (int s = 0; s < DM_STREAM__COUNT; s++) last_s[s] = -1;
    int *last_g = xcalloc((size_t)(ex->prog->n_groups ? ex->prog->n_groups : 1), sizeof(int), err);
    if (!last_g) return -1;
    for (int g = 0; g < ex->prog->n_groups; g++) last_g[g] = -1;
    for (int i = 0; i < n; i++) {
        const dm_op *op = &rp->ops[i];
        if ((unsigned)op->stream >= DM_STREAM__COUNT) {
            free(last_g);
            return dm_err_set(err, "program: rank %d op %d: bad stream %d", ex->rank, i, (int)op->stream);
        }
        for (int d = 0; d < op->n_deps; d++)
            if (op->deps[d] < 0 || op->deps[d] >= i) {
                free(last_g);
                return dm_err_set(err, "program: rank %d op %d depends on op %d (not earlier)", ex->rank, i,
                                  op->deps[d]);
            }
        ex->prev_stream[i] = last_s[op->stream];
        last_s[op->stream] = i;
        ex->prev_coll[i] = -1;
        if (dm_op_is_collective(op->kind)) {
            if (ex->gidx[op->group] < 0) {
                free(last_g);
                return dm_err_set(err, "program: rank %d op %d (%s, collective %d) in a group without this rank",
                                  ex->rank, i, dm_op_kind_name(op->kind), op->coll);
            }
            ex->prev_coll[i] = last_g[op->group];
            last_g[op->group] = i;
        }
    }
    free(last_g);
    return 0;
}

int real_exec_create(const dm_model *model, const dm_program *prog, MPI_Comm comm,
                     const real_opts *o, real_exec **out, dm_err *err)
{
    *out = NULL;
    unsigned char *need = NULL; /* per matrix: 1 Muon state, 2 AdamW state on this rank */
    real_exec *ex = dm_calloc(1, sizeof *ex, err);
    if (!ex) return -1;
    ex->model = model;
    ex->prog = prog;
    ex->o = *o;
    ex->comm = MPI_COMM_NULL;
    ex->bad_param = -1;
    if (o->muon.ns.coeffs) {
        ex->coeffs = *o->muon.ns.coeffs;
    } else {
        ns_coeffs_jordan(&ex->coeffs);
    }
    ex->o.muon.ns.coeffs = &ex->coeffs;
    MPI_Comm_dup(comm, &ex->comm);
    MPI_Comm_rank(ex->comm, &ex->rank);
    MPI_Comm_size(ex->comm, &ex->nranks);
    if (prog->nranks != ex->nranks) {
        dm_err_set(err, "the program is for %d ranks; this run has %d", prog->nranks, ex->nranks);
        goto fail;
    }
    if (o->tokens < 1 || o->grad_chunks < 1 || o->tokens % o->grad_chunks) {
        dm_err_set(err, "tokens (%lld) must be >= 1 and a multiple of the gradient chunks (%d)",
                   (long long)o->tokens, o->grad_chunks);
        goto fail;
    }
    if (check_hash(ex, err) < 0) goto fail;
    if (dm_model_matrices(model, -1, &ex->mx, &ex->n_mx, err) < 0) goto fail;
    if (real_facts_build(prog, ex->mx, ex->n_mx, &ex->facts, err) < 0) goto fail;
    { /* a racy program would run differently on GPUs: refuse it on every rank */
        int bad = real_check_hazards(prog, ex->rank, ex->mx, ex->n_mx, err) < 0, any = 0;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ex->comm);
        if (any) {
            if (!bad) dm_err_set(err, "rank %d: another rank's program has a data hazard", ex->rank);
            goto fail;
        }
    }
    int ng = prog->n_groups;
    if (!(ex->gcomm = xcalloc((size_t)ng, sizeof *ex->gcomm, err)) ||
        !(ex->gidx = xcalloc((size_t)ng, sizeof *ex->gidx, err)))
        goto fail;
    for (int g = 0; g < ng; g++) {
        ex->gidx[g] = -1;
        for (int k = 0; k < prog->groups[g].n; k++)
            if (prog->groups[g].ranks[k] == ex->rank) ex->gidx[g] = k;
        /* key = global rank: the communicator's order is the group's ascending order */
        MPI_Comm_split(ex->comm, ex->gidx[g] >= 0 ? 0 : MPI_UNDEFINED, ex->rank, &ex->gcomm[g]);
    }
    if (setup_ops(ex, err) < 0) goto fail;
    ex->n_tokens_global = o->tokens * ex->nranks;
    if (o->backend == REAL_BACKEND_GPU) {
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
        /* every rank fails with the lowest failing rank's message, so the cause is one line */
        int bad = real_gpu_create(ex, err) < 0, first = bad ? ex->rank : INT_MAX;
        MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, ex->comm);
        if (first != INT_MAX) {
            MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, first, ex->comm);
            goto fail;
        }
        *out = ex;
        return 0;
#else
        dm_err_set(err, "the GPU backend is not in this build (needs CUDA and NCCL)");
        goto fail;
#endif
    }

    int64_t T = o->tokens;
    { /* the CPU backend holds every matrix whole on every rank: refuse what cannot fit */
        double need = 0;
        for (int64_t i = 0; i < ex->n_mx; i++) {
            double sz = (double)ex->mx[i].rows * (double)ex->mx[i].cols, in = (double)ex->mx[i].cols;
            need += 4.0 * (sz * 7 + (double)T * (in + 2.0 * (double)ex->mx[i].rows)); /* W, Wn, G, O, states; X, Y, R */
        }
        MPI_Comm node;
        int local = 1;
        MPI_Comm_split_type(ex->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
        double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (have > 0 && need * local > 0.9 * have) {
            dm_err_set(err, "the CPU backend needs about %.1f GiB per rank for %s at %lld tokens (%d ranks on this "
                       "node: %.1f GiB; the node has %.1f GiB): use a smaller model, fewer --tokens or the GPU "
                       "backend", need / 1073741824.0, model->name, (long long)T, local, need * local / 1073741824.0,
                       have / 1073741824.0);
            goto fail;
        }
    }
    if (!(ex->p = xcalloc((size_t)ex->n_mx, sizeof *ex->p, err))) goto fail;
    size_t scratch = 0;
    need = xcalloc((size_t)ex->n_mx, 1, err);
    if (!need) goto fail;
    real_state_needs(prog, ex->rank, ex->n_mx, need);
    for (int64_t i = 0; i < ex->n_mx; i++) {
        rparam *q = &ex->p[i];
        const dm_matrix *m = &ex->mx[i];
        q->one_d = model->tensors[m->tensor].ndim == 1;
        q->rows = m->rows;
        q->cols = q->one_d ? 1 : m->cols;
        q->size = q->rows * q->cols;
        q->muon = m->role == DM_ROLE_MUON && !q->one_d;
        int64_t in = q->one_d ? q->rows : q->cols;
        size_t sz = (size_t)q->size;
        if (!(q->W = dm_malloc(sz * 4, err)) || !(q->Wn = dm_malloc(sz * 4, err)) ||
            !(q->G = dm_calloc(sz, 4, err)) || !(q->X = dm_malloc((size_t)(T * in) * 4, err)) ||
            !(q->Y = dm_malloc((size_t)(T * q->rows) * 4, err)) ||
            !(q->R = dm_malloc((size_t)(T * q->rows) * 4, err)))
            goto fail;
        /* optimizer state only for what this rank's program updates */
        int need_muon = need[i] & 1, need_adam = need[i] & 2;
        if (need_muon && (!(q->mom = dm_calloc(sz, 4, err)) || !(q->mom_n = dm_calloc(sz, 4, err)) ||
                          !(q->O = dm_calloc(sz, 4, err))))
            goto fail;
        if (need_adam && (!(q->m1 = dm_calloc(sz, 4, err)) || !(q->m2 = dm_calloc(sz, 4, err)) ||
                          !(q->m1n = dm_calloc(sz, 4, err)) || !(q->m2n = dm_calloc(sz, 4, err))))
            goto fail;
        real_fill_weights(o->seed, m, q->one_d, q->W);
        real_fill_tokens(o->seed, m, q->one_d, o->token_offset + (int64_t)ex->rank * T, T, q->X, q->Y);
        size_t s1 = (size_t)(T * in), s2 = sz;
        if (s1 > scratch) scratch = s1;
        if (s2 > scratch) scratch = s2;
        q->own_lo = 0;
        q->own_hi = ex->rank == 0 ? q->size : 0; /* before any step rank 0's copy is the one */
    }
    if (!(ex->scratch = dm_malloc(scratch * 4, err))) goto fail;
    snprintf(ex->info, sizeof ex->info, "cpu: MPI non-blocking collectives summing in rank order, reference kernels (ns_ref)");
    ex->scratch_n = scratch;
    free(need);
    *out = ex;
    return 0;
fail:
    free(need);
    real_exec_destroy(ex);
    return -1;
}

void real_exec_destroy(real_exec *ex)
{
    if (!ex) return;
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) real_gpu_destroy(ex);
#endif
    free(ex->op_t0);
    free(ex->op_dur);
    if (ex->p)
        for (int64_t i = 0; i < ex->n_mx; i++) {
            rparam *q = &ex->p[i];
            free(q->W), free(q->Wn), free(q->G), free(q->X), free(q->Y), free(q->R);
            free(q->mom), free(q->mom_n), free(q->O), free(q->m1), free(q->m2), free(q->m1n), free(q->m2n);
        }
    free(ex->p);
    if (ex->gcomm)
        for (int g = 0; g < ex->prog->n_groups; g++)
            if (ex->gcomm[g] != MPI_COMM_NULL) MPI_Comm_free(&ex->gcomm[g]);
    free(ex->gcomm);
    free(ex->gidx);
    if (ex->comm != MPI_COMM_NULL) MPI_Comm_free(&ex->comm);
    real_facts_free(&ex->facts);
    free(ex->mx);
    free(ex->prev_stream);
    free(ex->prev_coll);
    free(ex->state);
    free(ex->pend);
    free(ex->scratch);
    free(ex);
}

/* ---- compute ops ---------------------------------------------------------------------- */

static void note_bad(real_exec *ex, int64_t p)
{
    if (ex->bad_param < 0 || p < ex->bad_param) ex->bad_param = p;
}

static int finite_range(const float *x, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void forward_one(real_exec *ex, rparam *q)
{
    int64_t T = ex->o.tokens, out = q->rows;
    if (q->one_d) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < out; i++) q->R[t * out + i] = q->X[t * out + i] * q->W[i];
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)out, (int)q->cols, 1.0f, q->X,
                    (int)q->cols, q->W, (int)q->cols, 0.0f, q->R, (int)out);
    }
    double acc = 0;
    for (int64_t k = 0; k < T * out; k++) {
        q->R[k] -= q->Y[k];
        acc += (double)q->R[k] * q->R[k];
    }
    q->loss = acc / (2.0 * (double)ex->n_tokens_global * (double)out);
}

static void backward_one(real_exec *ex, rparam *q)
{
    int64_t T = ex->o.tokens, out = q->rows, chunks = ex->o.grad_chunks, Tc = T / chunks;
    float s = (float)(1.0 / ((double)ex->n_tokens_global * (double)out));
    for (int64_t c = 0; c < chunks; c++) {
        float *dst = c == 0 ? q->G : ex->scratch;
        const float *R = q->R + c * Tc * out;
        if (q->one_d) {
            const float *X = q->X + c * Tc * out;
            for (int64_t i = 0; i < out; i++) {
                float acc = 0;
                for (int64_t t = 0; t < Tc; t++) acc += R[t * out + i] * X[t * out + i];
                dst[i] = s * acc;
            }
        } else {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)q->cols, (int)Tc, s, R,
                        (int)out, q->X + c * Tc * q->cols, (int)q->cols, 0.0f, dst, (int)q->cols);
        }
        if (c > 0)
            for (int64_t k = 0; k < q->size; k++) q->G[k] += dst[k];
    }
    if (ex->o.input_grad && !q->one_d) /* dX = R W, for its cost only */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)q->cols, (int)out, 1.0f, q->R,
                    (int)out, q->W, (int)q->cols, 0.0f, ex->scratch, (int)q->cols);
    if (ex->nranks == 1) {
        q->gr_lo = 0;
        q->gr_hi = q->size;
    }
    if (ex->step == ex->o.inject_step && ex->rank == ex->o.inject_rank &&
        (int64_t)(q - ex->p) == ex->o.inject_param)
        q->G[q->size / 2] = NAN;
    if (ex->step == ex->o.overflow_step && (int64_t)(q - ex->p) == ex->o.overflow_param) q->G[q->size / 2] = 3.0e38f;
    if (!finite_range(q->G, 0, q->size) && (ex->bad_local < 0 || q - ex->p < ex->bad_local))
        ex->bad_local = q - ex->p;
}

static int layer_params(real_exec *ex, const dm_op *op, int64_t **list, int *n, dm_err *err)
{
    if (op->n_params || op->layer < 0) {
        *list = op->params;
        *n = op->n_params;
        return 0;
    }
    int k = 0;
    for (int64_t i = 0; i < ex->n_mx; i++) k += ex->mx[i].layer == op->layer;
    int64_t *l = xcalloc((size_t)k, sizeof *l, err);
    if (!l) return -1;
    k = 0;
    for (int64_t i = 0; i < ex->n_mx; i++)
        if (ex->mx[i].layer == op->layer) l[k++] = i;
    *list = l;
    *n = k;
    return 1; /* caller frees */
}

static int run_compute(real_exec *ex, int i, dm_err *err)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    const ns_muon_params *mp = &ex->o.muon;
    int64_t *pl;
    int np;
    int own = 0;
    if (op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD) {
        if ((own = layer_params(ex, op, &pl, &np, err)) < 0) return -1;
    } else {
        pl = op->params;
        np = op->n_params;
    }
    int rc = 0;
    for (int k = 0; k < np && rc == 0; k++) {
        int64_t id = pl[k];
        rparam *q = &ex->p[id];
        switch (op->kind) {
        case DM_OP_FORWARD: forward_one(ex, q); break;
        case DM_OP_BACKWARD: backward_one(ex, q); break;
        case DM_OP_NS: {
            if (!q->muon) {
                rc = dm_err_set(err, "rank %d op %d (ns): %s is not a Muon matrix", ex->rank, i, real_matrix_name(ex, id));
                break;
            }
            if (q->gr_lo != 0 || q->gr_hi != q->size) {
                rc = dm_err_set(err, "rank %d op %d (ns): the reduced gradient of %s is not on this rank",
                                ex->rank, i, real_matrix_name(ex, id));
                break;
            }
            if (!finite_range(q->G, 0, q->size)) note_bad(ex, id);
            double mu = mp->momentum;
            for (int64_t e = 0; e < q->size; e++) {
                double b = mu * q->mom[e] + q->G[e];
                q->mom_n[e] = (float)b;
                q->O[e] = (float)(mp->nesterov ? q->G[e] + mu * b : b);
            }
            ns_opts no = mp->ns;
            no.algo = op->algo == DM_NS_GRAM ? DM_NS_GRAM : DM_NS_DIRECT;
            if (ns_ref_f(q->O, q->O, q->rows, q->cols, &no, err) < 0) rc = -1;
            q->ns_done = 1;
            break;
        }
        case DM_OP_MUON_UPDATE: {
            if (!q->ns_done) {
                rc = dm_err_set(err, "rank %d op %d (muon-update): no ns of %s before it this step", ex->rank, i,
                                real_matrix_name(ex, id));
                break;
            }
            double scale = mp->scale_coef * sqrt((double)(q->rows > q->cols ? q->rows : q->cols));
            double decay = 1.0 - mp->lr * mp->weight_decay;
            /* FSDP: the rank updates its reduce-scatter shard (the NS ran on the whole) */
            int64_t lo = q->rs_hi > q->rs_lo ? q->rs_lo : 0, hi = q->rs_hi > q->rs_lo ? q->rs_hi : q->size;
            for (int64_t e = lo; e < hi; e++) q->Wn[e] = (float)(q->W[e] * decay - mp->lr * scale * q->O[e]);
            q->up_lo = lo;
            q->up_hi = hi;
            q->applied = 1;
            break;
        }
        case DM_OP_ADAMW: {
            if (q->gr_hi <= q->gr_lo) break;
            if (!finite_range(q->G, q->gr_lo, q->gr_hi)) note_bad(ex, id);
            const ns_adamw_params *ap = &ex->o.adamw;
            int64_t t = ex->adam_t + 1;
            double bc1 = 1.0 - pow(ap->beta1, (double)t), bc2 = 1.0 - pow(ap->beta2, (double)t);
            for (int64_t e = q->gr_lo; e < q->gr_hi; e++) {
                double g = q->G[e];
                double m1 = ap->beta1 * q->m1[e] + (1 - ap->beta1) * g;
                double m2 = ap->beta2 * q->m2[e] + (1 - ap->beta2) * g * g;
                q->m1n[e] = (float)m1;
                q->m2n[e] = (float)m2;
                q->Wn[e] = (float)(q->W[e] * (1 - ap->lr * ap->weight_decay) -
                                   ap->lr * (m1 / bc1) / (sqrt(m2 / bc2) + ap->eps));
            }
            q->up_lo = q->up_hi > q->up_lo ? (q->gr_lo < q->up_lo ? q->gr_lo : q->up_lo) : q->gr_lo;
            q->up_hi = q->gr_hi > q->up_hi ? q->gr_hi : q->up_hi;
            q->applied = 1;
            break;
        }
        default: break;
        }
    }
    if (own == 1) free(pl);
    return rc;
}

/* ---- collectives ---------------------------------------------------------------------- */

static int64_t flat_total(real_exec *ex, const dm_op *op)
{
    int64_t t = 0;
    for (int k = 0; k < op->n_params; k++) t += ex->p[op->params[k]].size;
    return t;
}

static void extend_gr(rparam *q, int64_t lo, int64_t hi)
{
    if (q->gr_hi <= q->gr_lo) q->gr_lo = lo, q->gr_hi = hi;
    else {
        if (lo < q->gr_lo) q->gr_lo = lo;
        if (hi > q->gr_hi) q->gr_hi = hi;
    }
}

/* Copy between the flat view [lo, hi) of op's params and buf (buf[0] = element lo).
 * dir 0: params -> buf (from G or Wn); dir 1: buf -> params. */
enum { FROM_G, FROM_W, TO_G, TO_W, TO_G_RS };
static void flat_copy(real_exec *ex, const dm_op *op, int64_t lo, int64_t hi, float *buf, int what, int src_rank)
{
    int64_t base = 0;
    for (int k = 0; k < op->n_params && base < hi; k++) {
        rparam *q = &ex->p[op->params[k]];
        int64_t a = lo > base ? lo : base, b = hi < base + q->size ? hi : base + q->size;
        if (a < b) {
            int64_t pa = a - base, n = b - a;
            float *bp = buf + (a - lo);
            switch (what) {
            case FROM_G: memcpy(bp, q->G + pa, (size_t)n * 4); break;
            case FROM_W: memcpy(bp, q->Wn + pa, (size_t)n * 4); break;
            case TO_G_RS:
                q->rs_lo = pa, q->rs_hi = pa + n;
                /* fall through */
            case TO_G:
                memcpy(q->G + pa, bp, (size_t)n * 4);
                extend_gr(q, pa, pa + n);
                break;
            case TO_W:
                memcpy(q->Wn + pa, bp, (size_t)n * 4);
                /* a value committed in an earlier step also replaces the stale current copy */
                if (!real_src_updated_before(&ex->facts, src_rank, op->coll, op->params[k]))
                    memcpy(q->W + pa, bp, (size_t)n * 4);
                break;
            }
        }
        base += q->size;
    }
}


/* Pack (unpack = 0) or unpack member k's contribution to an all-gather (real_work.h).
 * Packing a gradient range this rank does not hold reduced is a program error: -1. */
static int ag_copy(real_exec *ex, const dm_op *op, int k, float *buf, int unpack, int src_rank)
{
    const real_range *g = ex->facts.ag[op->coll] + (size_t)k * op->n_params;
    int grad = ex->facts.ag_grad[op->coll];
    int64_t off = 0;
    for (int a = 0; a < op->n_params; a++) {
        if (g[a].hi <= g[a].lo) continue;
        rparam *q = &ex->p[op->params[a]];
        int64_t lo = g[a].lo, n = g[a].hi - g[a].lo;
        if (!unpack) {
            if (grad && (lo < q->gr_lo || lo + n > q->gr_hi)) return -1;
            memcpy(buf + off, (grad ? q->G : q->Wn) + lo, (size_t)n * 4);
        } else if (grad) {
            memcpy(q->G + lo, buf + off, (size_t)n * 4);
            extend_gr(q, lo, lo + n);
        } else {
            memcpy(q->Wn + lo, buf + off, (size_t)n * 4);
            if (!real_src_updated_before(&ex->facts, src_rank, op->coll, op->params[a]))
                memcpy(q->W + lo, buf + off, (size_t)n * 4);
        }
        off += n;
    }
    return 0;
}

static int post_coll(real_exec *ex, int i, dm_err *err)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    const dm_group *g = &ex->prog->groups[op->group];
    MPI_Comm c = ex->gcomm[op->group];
    int n = g->n, me = ex->gidx[op->group];
    int64_t total = flat_total(ex, op), s = (total + n - 1) / n;
    if (total * n > INT_MAX)
        return dm_err_set(err, "rank %d op %d: collective of %lld elements is too large for the CPU backend",
                          ex->rank, i, (long long)total);
    int root = -1;
    if (op->kind == DM_OP_BROADCAST || op->kind == DM_OP_REDUCE) {
        for (int k = 0; k < n; k++)
            if (g->ranks[k] == op->root) root = k;
        if (root < 0)
            return dm_err_set(err, "rank %d op %d (%s): root %d is not in its group", ex->rank, i,
                              dm_op_kind_name(op->kind), op->root);
    }
    pending *pd = &ex->pend[ex->n_pend];
    memset(pd, 0, sizeof *pd);
    pd->op = i;
    size_t nsend = 0, nrecv = 0;
    switch (op->kind) {
    case DM_OP_ALLREDUCE: nsend = (size_t)total, nrecv = (size_t)(total * n); break;
    case DM_OP_REDUCE: nsend = (size_t)total, nrecv = me == root ? (size_t)(total * n) : 0; break;
    case DM_OP_BROADCAST: nsend = (size_t)total; break;
    case DM_OP_REDUCESCATTER: nsend = (size_t)(s * n), nrecv = (size_t)(s * n); break;
    case DM_OP_ALLGATHER:
        s = ex->facts.ag_slot[op->coll];
        nsend = (size_t)s, nrecv = (size_t)(s * n);
        break;
    default: return dm_err_set(err, "internal: post_coll on %s", dm_op_kind_name(op->kind));
    }
    if (!(pd->send = xcalloc(nsend, 4, err)) || !(pd->recv = xcalloc(nrecv, 4, err))) {
        free(pd->send);
        return -1;
    }
    int rc = MPI_SUCCESS;
    switch (op->kind) {
    case DM_OP_ALLREDUCE:
        flat_copy(ex, op, 0, total, pd->send, FROM_G, ex->rank);
        rc = MPI_Iallgather(pd->send, (int)total, MPI_FLOAT, pd->recv, (int)total, MPI_FLOAT, c, &pd->req);
        break;
    case DM_OP_REDUCE:
        flat_copy(ex, op, 0, total, pd->send, FROM_G, ex->rank);
        rc = MPI_Igather(pd->send, (int)total, MPI_FLOAT, pd->recv, (int)total, MPI_FLOAT, root, c, &pd->req);
        break;
    case DM_OP_BROADCAST:
        if (me == root) flat_copy(ex, op, 0, total, pd->send, FROM_W, ex->rank);
        rc = MPI_Ibcast(pd->send, (int)total, MPI_FLOAT, root, c, &pd->req);
        break;
    case DM_OP_REDUCESCATTER:
        flat_copy(ex, op, 0, total, pd->send, FROM_G, ex->rank);
        rc = MPI_Ialltoall(pd->send, (int)s, MPI_FLOAT, pd->recv, (int)s, MPI_FLOAT, c, &pd->req);
        break;
    case DM_OP_ALLGATHER:
        if (ag_copy(ex, op, me, pd->send, 0, ex->rank) < 0) {
            free(pd->send), free(pd->recv);
            return dm_err_set(err, "rank %d op %d (all-gather, collective %d): this rank does not hold the reduced "
                              "gradient it should contribute", ex->rank, i, op->coll);
        }
        rc = MPI_Iallgather(pd->send, (int)s, MPI_FLOAT, pd->recv, (int)s, MPI_FLOAT, c, &pd->req);
        break;
    default: break;
    }
    if (rc != MPI_SUCCESS) {
        free(pd->send), free(pd->recv);
        return dm_err_set(err, "rank %d op %d (%s, collective %d): MPI error %d", ex->rank, i,
                          dm_op_kind_name(op->kind), op->coll, rc);
    }
    ex->n_pend++;
    return 0;
}

static void finish_coll(real_exec *ex, pending *pd)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[pd->op];
    const dm_group *g = &ex->prog->groups[op->group];
    int n = g->n, me = ex->gidx[op->group];
    int64_t total = flat_total(ex, op), s = (total + n - 1) / n;
    int root = -1;
    for (int k = 0; k < n; k++)
        if (g->ranks[k] == op->root) root = k;
    switch (op->kind) {
    case DM_OP_ALLREDUCE:
    case DM_OP_REDUCE:
        if (op->kind == DM_OP_REDUCE && me != root) break;
        for (int j = 1; j < n; j++) /* ascending rank order: the same sums on every rank */
            for (int64_t e = 0; e < total; e++) pd->recv[e] += pd->recv[j * total + e];
        flat_copy(ex, op, 0, total, pd->recv, TO_G, ex->rank);
        break;
    case DM_OP_BROADCAST:
        if (me != root) flat_copy(ex, op, 0, total, pd->send, TO_W, op->root);
        break;
    case DM_OP_REDUCESCATTER: {
        for (int j = 1; j < n; j++)
            for (int64_t e = 0; e < s; e++) pd->recv[e] += pd->recv[j * s + e];
        int64_t lo = me * s, hi = lo + s < total ? lo + s : total;
        if (lo < hi) flat_copy(ex, op, lo, hi, pd->recv, TO_G_RS, ex->rank);
        break;
    }
    case DM_OP_ALLGATHER:
        s = ex->facts.ag_slot[op->coll];
        for (int j = 0; j < n; j++)
            if (j != me || ex->facts.ag_grad[op->coll]) ag_copy(ex, op, j, pd->recv + j * s, 1, g->ranks[j]);
        break;
    default: break;
    }
    free(pd->send);
    free(pd->recv);
    pd->send = pd->recv = NULL;
}

/* ---- the step ------------------------------------------------------------------------- */

static int op_ready(real_exec *ex, int i)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    for (int d = 0; d < op->n_deps; d++)
        if (ex->state[op->deps[d]] != 2) return 0;
    if (ex->prev_stream[i] >= 0 && ex->state[ex->prev_stream[i]] != 2) return 0;
    if (ex->prev_coll[i] >= 0 && ex->state[ex->prev_coll[i]] == 0) return 0;
    return 1;
}

static int is_grad_coll(real_exec *ex, const dm_op *op)
{
    return op->kind == DM_OP_REDUCE || op->kind == DM_OP_ALLREDUCE || op->kind == DM_OP_REDUCESCATTER ||
           (op->kind == DM_OP_ALLGATHER && ex->facts.ag_grad[op->coll]);
}

static void pending_summary(real_exec *ex, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < ex->n_pend && k + 80 < len; j++) {
        const dm_op *op = &ex->prog->ranks[ex->rank].ops[ex->pend[j].op];
        k += (size_t)snprintf(buf + k, len - k, "%sop %d (%s, collective %d, group %d)", j ? ", " : "",
                              ex->pend[j].op, dm_op_kind_name(op->kind), op->coll, op->group);
    }
}

int real_exec_step(real_exec *ex, real_step_stats *st, dm_err *err)
{
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) return real_gpu_step(ex, st, err);
#endif
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    int n = rp->n_ops;
    memset(st, 0, sizeof *st);
    st->bad_param = -1;
    st->bad_rank = -1;
    ex->bad_param = ex->bad_local = -1;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        rparam *q = &ex->p[i];
        memcpy(q->Wn, q->W, (size_t)q->size * 4);
        if (q->mom) memcpy(q->mom_n, q->mom, (size_t)q->size * 4);
        if (q->m1) memcpy(q->m1n, q->m1, (size_t)q->size * 4), memcpy(q->m2n, q->m2, (size_t)q->size * 4);
        q->gr_lo = q->gr_hi = q->up_lo = q->up_hi = q->rs_lo = q->rs_hi = 0;
        q->ns_done = q->applied = 0;
        q->loss = 0;
    }
    memset(ex->state, 0, (size_t)n);
    ex->n_pend = 0;
    MPI_Barrier(ex->comm);
    real_maybe_stall(ex);
    double t0 = now_us(), last_progress = t0, last_grad_coll = -1, last_update = -1;
    int n_done = 0, first = 0, rc = 0;
    while (n_done < n) {
        int progressed = 0;
        for (int i = first; i < n; i++) {
            if (ex->state[i]) continue;
            if (!op_ready(ex, i)) continue;
            const dm_op *op = &rp->ops[i];
            ex->op_t0[i] = now_us() - t0;
            if (dm_op_is_collective(op->kind)) {
                if (post_coll(ex, i, err) < 0) {
                    rc = -1;
                    goto out;
                }
                ex->state[i] = 1;
            } else {
                double a = now_us();
                if (run_compute(ex, i, err) < 0) {
                    rc = -1;
                    goto out;
                }
                double b = now_us(), d = b - a;
                switch (op->kind) {
                case DM_OP_FORWARD: st->forward_us += d; break;
                case DM_OP_BACKWARD: st->backward_us += d; break;
                case DM_OP_NS: st->ns_us += d, st->optimizer_us += d; break;
                case DM_OP_MUON_UPDATE:
                case DM_OP_ADAMW: st->optimizer_us += d, last_update = b; break;
                default: break;
                }
                ex->state[i] = 2;
                ex->op_dur[i] = b - t0 - ex->op_t0[i];
                n_done++;
            }
            progressed = 1;
        }
        while (first < n && ex->state[first] == 2) first++;
        double idle0 = now_us();
        for (int j = 0; j < ex->n_pend; j++) {
            int flag = 0;
            MPI_Test(&ex->pend[j].req, &flag, MPI_STATUS_IGNORE);
            if (!flag) continue;
            pending done = ex->pend[j];
            ex->pend[j] = ex->pend[--ex->n_pend];
            j--;
            finish_coll(ex, &done);
            ex->state[done.op] = 2;
            ex->op_dur[done.op] = now_us() - t0 - ex->op_t0[done.op];
            n_done++;
            progressed = 1;
            if (is_grad_coll(ex, &rp->ops[done.op])) last_grad_coll = now_us();
        }
        double t = now_us();
        if (progressed) {
            last_progress = t;
        } else {
            st->comm_exposed_us += t - idle0;
            if (t - last_progress > ex->o.timeout_s * 1e6) {
                char buf[512];
                pending_summary(ex, buf, sizeof buf);
                rc = dm_err_set(err, "rank %d: step %d: no progress for %.0f s (--timeout); waiting for %s",
                                ex->rank, ex->step, ex->o.timeout_s, ex->n_pend ? buf : "(nothing posted)");
                goto out;
            }
            if (ex->n_pend) {
                struct timespec nap = {0, 20000}; /* let oversubscribed ranks run */
                nanosleep(&nap, NULL);
            }
            else {
                rc = dm_err_set(err, "rank %d: step %d: no op can start (dependency cycle?)", ex->rank, ex->step);
                goto out;
            }
        }
    }
    /* every param whose NS ran must have been applied */
    for (int64_t i = 0; i < ex->n_mx; i++)
        if (ex->p[i].ns_done && !ex->p[i].applied) {
            rc = dm_err_set(err, "rank %d: step %d: ns of %s ran but no muon-update followed", ex->rank, ex->step,
                            real_matrix_name(ex, i));
            goto out;
        }
    double loss = 0;
    for (int64_t i = 0; i < ex->n_mx; i++) loss += ex->p[i].loss;
    /* agree on the loss and on non-finite gradients; this is also the step's end */
    double mine[3] = {loss, (double)ex->bad_local, (double)ex->bad_param};
    double *all = dm_malloc(sizeof mine * (size_t)ex->nranks, err);
    if (!all) {
        rc = -1;
        goto out;
    }
    MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, ex->comm);
    double t1 = now_us();
    st->loss = 0;
    for (int r = 0; r < ex->nranks; r++) st->loss += all[3 * r];
    /* name the rank whose own gradient went bad first; else where a reduced one was seen */
    for (int pass = 1; pass <= 2 && st->bad_param < 0; pass++)
        for (int r = 0; r < ex->nranks; r++) {
            int64_t b = (int64_t)all[3 * r + pass];
            if (b >= 0 && (st->bad_param < 0 || b < st->bad_param)) st->bad_param = b, st->bad_rank = r;
        }
    free(all);
    st->step_us = t1 - t0;
    st->opt_window_us = last_update > 0 && last_grad_coll > 0 && last_update > last_grad_coll
                            ? last_update - last_grad_coll
                            : last_update > 0 ? st->optimizer_us : 0;
    if (st->bad_param >= 0) {
        st->skipped = 1;
    } else {
        for (int64_t i = 0; i < ex->n_mx; i++) {
            rparam *q = &ex->p[i];
            float *t;
            t = q->W, q->W = q->Wn, q->Wn = t;
            if (q->mom) t = q->mom, q->mom = q->mom_n, q->mom_n = t;
            if (q->m1) {
                t = q->m1, q->m1 = q->m1n, q->m1n = t;
                t = q->m2, q->m2 = q->m2n, q->m2n = t;
            }
            q->own_lo = q->up_lo;
            q->own_hi = q->up_hi;
        }
        ex->adam_t++;
    }
out:
    /* on failure collectives may still be pending: their buffers stay allocated (MPI may
     * still write them) until the caller aborts the job */
    ex->step++;
    return rc;
}

/* ---- results -------------------------------------------------------------------------- */

int real_exec_trace(real_exec *ex, dm_trace **out, dm_err *err)
{
    const dm_program *p = ex->prog;
    int R = ex->nranks, n = p->ranks[ex->rank].n_ops, total = 0;
    int *counts = NULL, *displ = NULL, bad = 0;
    double *mine = dm_malloc((size_t)(2 * (n ? n : 1)) * sizeof *mine, err), *all = NULL;
    dm_trace *t = NULL;
    *out = NULL;
    if (!mine) bad = 1;
    for (int i = 0; i < n && mine; i++) mine[2 * i] = ex->op_t0[i], mine[2 * i + 1] = ex->op_dur[i];
    if (ex->rank == 0) {
        for (int r = 0; r < R; r++) total += 2 * p->ranks[r].n_ops;
        if (!(counts = dm_malloc((size_t)R * sizeof *counts, err)) || !(displ = dm_malloc((size_t)R * sizeof *displ, err)) ||
            !(all = dm_malloc((size_t)(total ? total : 1) * sizeof *all, err)))
            bad = 1;
        for (int r = 0, d = 0; r < R && !bad; r++) counts[r] = 2 * p->ranks[r].n_ops, displ[r] = d, d += counts[r];
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, ex->comm);
    if (any) goto done;
    MPI_Gatherv(mine, 2 * n, MPI_DOUBLE, all, counts, displ, MPI_DOUBLE, 0, ex->comm);
    if (ex->rank != 0) goto done;
    /* a collective starts when its last member arrives */
    double *cstart = dm_malloc((size_t)(p->n_colls ? p->n_colls : 1) * sizeof *cstart, err);
    if (!cstart || !(t = dm_trace_new("real", p, err))) {
        free(cstart);
        bad = 1;
        goto done;
    }
    for (int c = 0; c < p->n_colls; c++) cstart[c] = 0;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *op = &p->ranks[r].ops[i];
            double s = all[displ[r] + 2 * i];
            if (op->coll >= 0 && s > cstart[op->coll]) cstart[op->coll] = s;
        }
    for (int r = 0; r < R && !bad; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *op = &p->ranks[r].ops[i];
            double s = all[displ[r] + 2 * i], d = all[displ[r] + 2 * i + 1], w = 0;
            if (op->coll >= 0 && cstart[op->coll] > s) {
                w = cstart[op->coll] - s;
                d = d > w ? d - w : 0;
                s = cstart[op->coll];
            }
            dm_trace_event e = {r, op->stream, i, op->kind, s, d, op->bytes, op->flops, op->layer, op->coll, w};
            if (dm_trace_add(t, &e, err) < 0) {
                bad = 1;
                break;
            }
        }
    free(cstart);
done:
    free(mine);
    free(all);
    free(counts);
    free(displ);
    if (bad) {
        dm_trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void real_weights_free(float **w, int64_t n)
{
    if (!w) return;
    for (int64_t i = 0; i < n; i++) free(w[i]);
    free(w);
}

/* ---- state access (checkpoints, weights) --------------------------------------------- */

void real_param_info(const real_exec *ex, int64_t i, real_pinfo *pi)
{
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) {
        real_gpu_param_info(ex, i, pi);
        return;
    }
#endif
    const rparam *q = &ex->p[i];
    *pi = (real_pinfo){q->size, q->own_lo, q->own_hi, q->mom != NULL, q->m1 != NULL};
}

int real_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err)
{
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) return real_gpu_param_weights(ex, i, lo, hi, dst, err);
#endif
    (void)err;
    if (hi > lo) memcpy(dst, ex->p[i].W + lo, (size_t)(hi - lo) * 4);
    return 0;
}

int real_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err)
{
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) return real_gpu_param_get(ex, i, W, mom, m1, m2, err);
#endif
    (void)err;
    rparam *q = &ex->p[i];
    size_t sz = (size_t)q->size * 4;
    if (W) memcpy(W, q->W, sz);
    if (mom && q->mom) memcpy(mom, q->mom, sz);
    if (m1 && q->m1) memcpy(m1, q->m1, sz), memcpy(m2, q->m2, sz);
    return 0;
}

int real_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                   int64_t own_lo, int64_t own_hi, dm_err *err)
{
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
    if (ex->gpu) return real_gpu_param_put(ex, i, W, mom, m1, m2, own_lo, own_hi, err);
#endif
    (void)err;
    rparam *q = &ex->p[i];
    size_t sz = (size_t)q->size * 4;
    if (W) memcpy(q->W, W, sz);
    if (mom && q->mom) memcpy(q->mom, mom, sz);
    if (m1 && q->m1) memcpy(q->m1, m1, sz), memcpy(q->m2, m2, sz);
    q->own_lo = own_lo;
    q->own_hi = own_hi;
    return 0;
}

int real_exec_weights(real_exec *ex, float ***out, dm_err *err)
{
    *out = NULL;
    int64_t np = ex->n_mx;
    int64_t *rng = dm_malloc((size_t)(2 * np) * sizeof *rng, err), *all = NULL;
    float **w = NULL, *buf = NULL, *sendb = NULL;
    int rc = -1, bad = 0;
    if (!rng) return -1;
    int64_t max_size = 1;
    for (int64_t i = 0; i < np; i++) {
        real_pinfo pi;
        real_param_info(ex, i, &pi);
        rng[2 * i] = pi.own_lo, rng[2 * i + 1] = pi.own_hi;
        if (pi.size > max_size) max_size = pi.size;
    }
    if (ex->rank == 0 && !(all = dm_malloc((size_t)(2 * np * ex->nranks) * sizeof *all, err))) bad = 1;
    MPI_Bcast(&bad, 1, MPI_INT, 0, ex->comm);
    if (bad) goto done;
    MPI_Gather(rng, (int)(2 * np), MPI_INT64_T, all, (int)(2 * np), MPI_INT64_T, 0, ex->comm);
    if (ex->rank == 0) {
        if (!(w = dm_calloc((size_t)np, sizeof *w, err))) bad = 1;
        for (int64_t i = 0; i < np && !bad; i++) {
            real_pinfo pi;
            real_param_info(ex, i, &pi);
            if (!(w[i] = dm_malloc((size_t)pi.size * 4, err)) || real_param_weights(ex, i, 0, pi.size, w[i], err) < 0)
                bad = 1;
        }
    } else if (!(sendb = dm_malloc((size_t)max_size * 4, err))) {
        bad = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, ex->comm);
    if (bad) goto done;
    /* every rank r > 0 sends each range it owns; rank 0 places (or compares) them in rank order */
    int mismatch = 0;
    int64_t mismatch_p = -1;
    for (int r = 1; r < ex->nranks; r++) {
        for (int64_t i = 0; i < np; i++) {
            int64_t lo, hi;
            if (ex->rank == 0) lo = all[(2 * np) * r + 2 * i], hi = all[(2 * np) * r + 2 * i + 1];
            else lo = rng[2 * i], hi = rng[2 * i + 1];
            if (hi <= lo) continue;
            if (ex->rank == r) {
                /* a device copy that fails leaves NaN, which the comparison then reports */
                if (real_param_weights(ex, i, lo, hi, sendb, err) < 0)
                    for (int64_t e = 0; e < hi - lo; e++) sendb[e] = NAN;
                MPI_Send(sendb, (int)(hi - lo), MPI_FLOAT, 0, 7, ex->comm);
            } else if (ex->rank == 0) {
                free(buf);
                if (!(buf = malloc((size_t)(hi - lo) * 4))) MPI_Abort(ex->comm, 1); /* out of memory */
                MPI_Recv(buf, (int)(hi - lo), MPI_FLOAT, r, 7, ex->comm, MPI_STATUS_IGNORE);
                int earlier = 0;                               /* owned by an earlier rank too? */
                for (int q = 0; q < r; q++)
                    if (all[(2 * np) * q + 2 * i] < hi && all[(2 * np) * q + 2 * i + 1] > lo) earlier = 1;
                if (earlier) {
                    if (buf && memcmp(buf, w[i] + lo, (size_t)(hi - lo) * 4) != 0 && !mismatch)
                        mismatch = 1, mismatch_p = i;
                } else if (buf) {
                    memcpy(w[i] + lo, buf, (size_t)(hi - lo) * 4);
                }
            }
        }
    }
    MPI_Bcast(&mismatch, 1, MPI_INT, 0, ex->comm);
    if (mismatch) {
        MPI_Bcast(&mismatch_p, 1, MPI_INT64_T, 0, ex->comm);
        dm_err_set(err, "replicated updates of %s differ between ranks", real_matrix_name(ex, mismatch_p));
        goto done;
    }
    if (ex->rank == 0) *out = w, w = NULL;
    rc = 0;
done:
    if (w) real_weights_free(w, np);
    free(buf);
    free(sendb);
    free(rng);
    free(all);
    return rc;
}
