/* real_exec.c: the executor's one engine (real.h, real_priv.h): set-up checks on every rank
 * (validation, program hash, data hazards, NS iterations, fault-injection targets), groups, the
 * step frame (reset, barrier, stall injection, the backend's ops, the loss and bad-parameter
 * agreement, phases by the one ruler, commit or skip), the trace, the authoritative weights, and
 * state access for checkpoints. The backend (real_cpu.c or real_gpu.c) is reached only through
 * its table of operations. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_api.h"
#include "phases.h"
#include "real.h"
#include "real_priv.h"
#include "real_work.h"
#include "trace.h"

int real_local_rank(MPI_Comm comm, int *nlocal)
{
    MPI_Comm node;
    int r = 0;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &r);
    MPI_Comm_size(node, nlocal);
    MPI_Comm_free(&node);
    return r;
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
    static char tune[1024]; /* the committed autotune cache, where the source tree is */
    snprintf(tune, sizeof tune, "%s/traces/kernels/autotune_h200.tsv", DM_SRCDIR);
    if (access(tune, R_OK) == 0) o->autotune_path = tune;
}

int64_t real_exec_n_matrices(const real_exec *ex) { return ex->n_mx; }
const dm_matrix *real_exec_matrices(const real_exec *ex) { return ex->mx; }
const char *real_exec_info(const real_exec *ex) { return ex->info; }
int real_exec_steps_done(const real_exec *ex) { return ex->step; }

const char *real_matrix_name(const real_exec *ex, int64_t id)
{
    real_exec *e = (real_exec *)ex;
    if (id < 0 || id >= ex->n_mx) snprintf(e->name_buf, sizeof e->name_buf, "param %lld", (long long)id);
    else real_matrix_name_into(ex->model, &ex->mx[id], e->name_buf, sizeof e->name_buf);
    return ex->name_buf;
}

int real_op_params(const real_exec *ex, const dm_op *op, int64_t **list, int *n, int *owned, dm_err *err)
{
    *owned = 0;
    *list = op->params;
    *n = op->n_params;
    if (op->n_params || op->layer < 0 || (op->kind != DM_OP_FORWARD && op->kind != DM_OP_BACKWARD)) return 0;
    int k = 0;
    for (int64_t i = 0; i < ex->n_mx; i++) k += ex->mx[i].layer == op->layer;
    int64_t *l = dm_malloc((size_t)(k ? k : 1) * sizeof *l, err);
    if (!l) return -1;
    k = 0;
    for (int64_t i = 0; i < ex->n_mx; i++)
        if (ex->mx[i].layer == op->layer) l[k++] = i;
    *list = l;
    *n = k;
    *owned = 1;
    return 0;
}

int real_agree(MPI_Comm comm, int rc, dm_err *err)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    int first = rc < 0 ? rank : INT_MAX;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == INT_MAX) return 0;
    MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, first, comm);
    return -1;
}

/* ---- set-up ------------------------------------------------------------------------------ */

/* What this rank can check alone about the program and the options: -1 with the reason. */
static int check_local(real_exec *ex, dm_err *err)
{
    const dm_program *p = ex->prog;
    const real_opts *o = &ex->o;
    if (p->nranks != ex->nranks)
        return dm_err_set(err, "the program is for %d ranks; this run has %d", p->nranks, ex->nranks);
    if (o->tokens < 1 || o->grad_chunks < 1 || o->tokens % o->grad_chunks)
        return dm_err_set(err, "tokens (%lld) must be >= 1 and a multiple of the gradient chunks (%d)",
                          (long long)o->tokens, o->grad_chunks);
    if (o->grad_chunk_group > 1 && o->grad_chunks % o->grad_chunk_group)
        return dm_err_set(err, "the gradient chunks (%d) must be a multiple of the chunk group (%d)", o->grad_chunks,
                          o->grad_chunk_group);
    /* a program the validator refuses would hang or misread a collective: say why instead */
    if (dm_program_validate(p, err) < 0) return -1;
    if (dm_model_matrices(ex->model, -1, &ex->mx, &ex->n_mx, err) < 0) return -1;
    if (real_facts_build(p, ex->mx, ex->n_mx, &ex->facts, err) < 0) return -1;
    /* where this rank keeps optimizer state: both backends allocate by this one rule */
    size_t nm = (size_t)(ex->n_mx ? ex->n_mx : 1);
    int64_t *sz = dm_malloc(nm * sizeof *sz, err);
    int rc = sz && (ex->st = dm_calloc(nm, sizeof *ex->st, err)) && (ex->need = dm_calloc(nm, 1, err)) ? 0 : -1;
    for (int64_t i = 0; i < ex->n_mx && rc == 0; i++) sz[i] = dm_matrix_elems(ex->model, &ex->mx[i]);
    if (rc == 0) rc = dm_state_ranges(p, sz, ex->n_mx, ex->rank, ex->st, ex->need, err);
    free(sz);
    if (rc < 0) return -1;
    /* a racy program would run differently on GPUs */
    if (real_check_hazards(p, ex->rank, ex->mx, ex->n_mx, err) < 0) return -1;
    /* the layers' kernels at this run's tokens; the program's works must be these */
    wk_plan_opts wo = {o->tokens, p->seq_len, ex->rank, ex->nranks, o->token_offset, o->seed, p->causal_tile,
                       !p->layer_passes};
    if (wk_plan_build(ex->model, ex->mx, ex->n_mx, &wo, &ex->wl, err) < 0 ||
        wk_plan_check(&ex->wl, p, ex->rank, ex->mx, ex->n_mx, err) < 0)
        return -1;
    const dm_rank_prog *rp = &p->ranks[ex->rank];
    for (int i = 0; i < rp->n_ops; i++)
        if (rp->ops[i].kind == DM_OP_NS && rp->ops[i].iters != ex->coeffs.n)
            return dm_err_set(err, "program: rank %d op %d (ns) runs %d NS iterations; the coefficient set has %d "
                              "(--ns-coeffs: one a,b,c triple per iteration)", ex->rank, i, rp->ops[i].iters,
                              ex->coeffs.n);
    /* fault injection that names nothing of this run would silently do nothing */
    if (o->inject_step >= 0 && (o->inject_rank < 0 || o->inject_rank >= ex->nranks))
        return dm_err_set(err, "--inject-nan: rank %d does not exist (ranks 0..%d)", o->inject_rank, ex->nranks - 1);
    if (o->inject_step >= 0 && (o->inject_param < 0 || o->inject_param >= ex->n_mx))
        return dm_err_set(err, "--inject-nan: parameter %lld does not exist (%s has %lld: 0..%lld)",
                          (long long)o->inject_param, ex->model->name, (long long)ex->n_mx, (long long)ex->n_mx - 1);
    if (o->overflow_step >= 0 && (o->overflow_param < 0 || o->overflow_param >= ex->n_mx))
        return dm_err_set(err, "--inject-overflow: parameter %lld does not exist (%s has %lld: 0..%lld)",
                          (long long)o->overflow_param, ex->model->name, (long long)ex->n_mx, (long long)ex->n_mx - 1);
    if (o->stall_step >= 0 && (o->stall_rank < 0 || o->stall_rank >= ex->nranks))
        return dm_err_set(err, "--inject-stall: rank %d does not exist (ranks 0..%d)", o->stall_rank, ex->nranks - 1);
    return 0;
}

int real_exec_create(const dm_model *model, const dm_program *prog, MPI_Comm comm, const real_opts *o, real_exec **out,
                     dm_err *err)
{
    *out = NULL;
    real_exec *ex = dm_calloc(1, sizeof *ex, err);
    if (!ex) return -1;
    ex->model = model;
    ex->prog = prog;
    ex->o = *o;
    ex->comm = MPI_COMM_NULL;
    if (o->muon.ns.coeffs) ex->coeffs = *o->muon.ns.coeffs;
    else ns_coeffs_default(&ex->coeffs);
    ex->o.muon.ns.coeffs = &ex->coeffs;
    MPI_Comm_dup(comm, &ex->comm);
    MPI_Comm_rank(ex->comm, &ex->rank);
    MPI_Comm_size(ex->comm, &ex->nranks);
    int rc = check_local(ex, err);
    /* the first collective: every rank's program must be rank 0's */
    uint64_t mine = rc == 0 ? dm_program_hash(prog) : 0, root = mine;
    MPI_Bcast(&root, 1, MPI_UINT64_T, 0, ex->comm);
    if (rc == 0 && mine != root)
        rc = dm_err_set(err, "rank %d: program hash %016llx differs from rank 0's %016llx; refusing to start", ex->rank,
                        (unsigned long long)mine, (unsigned long long)root);
    if (real_agree(ex->comm, rc, err) < 0) goto fail;
    int ng = prog->n_groups, n = prog->ranks[ex->rank].n_ops;
    if (!(ex->gidx = dm_malloc((size_t)(ng ? ng : 1) * sizeof *ex->gidx, err)) ||
        !(ex->op_t0 = dm_calloc((size_t)(n ? n : 1), sizeof *ex->op_t0, err)) ||
        !(ex->op_dur = dm_calloc((size_t)(n ? n : 1), sizeof *ex->op_dur, err)) ||
        !(ex->op_h0 = dm_calloc((size_t)(n ? n : 1), sizeof *ex->op_h0, err)) ||
        !(ex->op_h1 = dm_calloc((size_t)(n ? n : 1), sizeof *ex->op_h1, err)) ||
        !(ex->ev = dm_calloc((size_t)(n ? n : 1), sizeof *ex->ev, err)))
        rc = -1;
    for (int g = 0; g < ng && rc == 0; g++) ex->gidx[g] = real_group_index(prog, g, ex->rank);
    ex->n_tokens_global = o->tokens * ex->nranks;
    if (o->backend == REAL_BACKEND_GPU) {
        const dm_gpu_api *api = rc == 0 ? dm_gpu_side(err) : NULL;
        if (api && !(ex->be = api->backend))
            rc = dm_err_set(err, "the GPU side of this build has no executor backend (configure found no NCCL)");
        else if (!api && rc == 0)
            rc = -1;
    } else {
        ex->be = &real_backend_cpu;
    }
    if (real_agree(ex->comm, rc, err) < 0) goto fail;
    if (ex->be->precheck) rc = ex->be->precheck(ex, err);
    if (real_agree(ex->comm, rc, err) < 0) goto fail;
    rc = ex->be->create(ex, err);
    if (real_agree(ex->comm, rc, err) < 0) goto fail;
    *out = ex;
    return 0;
fail:
    real_exec_destroy(ex);
    return -1;
}

void real_exec_destroy(real_exec *ex)
{
    if (!ex) return;
    if (ex->be) ex->be->destroy(ex);
    if (ex->comm != MPI_COMM_NULL) MPI_Comm_free(&ex->comm);
    real_facts_free(&ex->facts);
    free(ex->st);
    free(ex->need);
    wk_plan_free(&ex->wl);
    free(ex->mx);
    free(ex->gidx);
    free(ex->op_t0);
    free(ex->op_dur);
    free(ex->op_h0);
    free(ex->op_h1);
    free(ex->ev);
    free(ex);
}

/* ---- the step frame ---------------------------------------------------------------------- */

/* The stall fault injection of real_opts (a no-op unless this rank and step are named). */
static void maybe_stall(const real_exec *ex)
{
    if (ex->step != ex->o.stall_step || ex->rank != ex->o.stall_rank || !(ex->o.stall_s > 0)) return;
    struct timespec ts = {(time_t)ex->o.stall_s, (long)((ex->o.stall_s - (double)(time_t)ex->o.stall_s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The rank's parts of the step, by the ruler over its ops as the backend timed them. */
static int measure(real_exec *ex, real_step_stats *st, dm_err *err)
{
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        ex->ev[i] = (dm_trace_event){ex->rank, op->stream, i, op->kind, ex->op_t0[i], ex->op_dur[i], op->bytes,
                                     op->flops, op->layer, op->coll, 0, op->payload};
    }
    dm_phases ph;
    if (dm_phases_rank(ex->ev, rp->n_ops, ex->rank, st->step_us, &ph, err) < 0) return -1;
    st->forward_us = ph.us[DM_PHASE_FORWARD];
    st->backward_us = ph.us[DM_PHASE_BACKWARD];
    st->optimizer_us = ph.us[DM_PHASE_OPTIMIZER];
    st->ns_us = ph.us[DM_PHASE_NS];
    st->exposed_comm_us = ph.us[DM_PHASE_EXPOSED_COMM];
    st->opt_window_us = ph.us[DM_PHASE_OPT_WINDOW];
    return 0;
}

int real_exec_step(real_exec *ex, real_step_stats *st, dm_err *err)
{
    memset(st, 0, sizeof *st);
    st->bad_param = -1;
    st->bad_rank = -1;
    if (ex->be->step_begin(ex, err) < 0) goto fail;
    MPI_Barrier(ex->comm);
    maybe_stall(ex);
    double t0 = dm_clock_us();
    real_step_local loc = {0, -1, -1, 0};
    for (int i = 0; i < ex->prog->ranks[ex->rank].n_ops; i++) ex->op_h0[i] = ex->op_h1[i] = -1;
    if (ex->be->step_run(ex, t0, &loc, err) < 0) goto fail;
    /* agree on the loss and on non-finite gradients; this is also the step's end */
    double mine[3] = {loc.loss, (double)loc.bad_local, (double)loc.bad_reduced};
    double *all = dm_malloc(sizeof mine * (size_t)ex->nranks, err);
    if (!all) goto fail;
    MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, ex->comm);
    double t1 = dm_clock_us();
    for (int r = 0; r < ex->nranks; r++) st->loss += all[3 * r];
    /* name the rank whose own gradient went bad first; else where a reduced one was seen */
    for (int pass = 1; pass <= 2 && st->bad_param < 0; pass++)
        for (int r = 0; r < ex->nranks; r++) {
            int64_t b = (int64_t)all[3 * r + pass];
            if (b >= 0 && (st->bad_param < 0 || b < st->bad_param)) st->bad_param = b, st->bad_rank = r;
        }
    free(all);
    st->step_us = loc.step_us > 0 ? loc.step_us : t1 - t0;
    st->skipped = st->bad_param >= 0;
    if (measure(ex, st, err) < 0 || ex->be->step_end(ex, !st->skipped, err) < 0) goto fail;
    if (!st->skipped) ex->adam_t++;
    ex->step++;
    return 0;
fail:
    /* collectives may still be pending: their buffers stay allocated until the caller aborts */
    if (ex->be->abort) ex->be->abort(ex);
    ex->step++;
    return -1;
}

int real_exec_step_row(real_exec *ex, const real_step_stats *st, real_step_row *row, dm_err *err)
{
    enum { N = 8 };
    double me[N] = {st->step_us, st->forward_us, st->backward_us, st->optimizer_us, st->opt_window_us,
                    st->exposed_comm_us, st->ns_us, st->ns_us};
    double *all = NULL;
    int bad = ex->rank == 0 && !(all = dm_malloc(sizeof me * (size_t)ex->nranks, err));
    MPI_Bcast(&bad, 1, MPI_INT, 0, ex->comm);
    if (bad) return -1;
    MPI_Gather(me, N, MPI_DOUBLE, all, N, MPI_DOUBLE, 0, ex->comm);
    if (ex->rank == 0) {
        double mx[N] = {0}, ns_min = INFINITY;
        for (int r = 0; r < ex->nranks; r++) {
            for (int k = 0; k < N; k++)
                if (all[r * N + k] > mx[k]) mx[k] = all[r * N + k];
            if (all[r * N + 6] < ns_min) ns_min = all[r * N + 6];
        }
        *row = (real_step_row){st->loss, mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], ns_min, mx[7], st->skipped};
    }
    free(all);
    return 0;
}

/* ---- results ----------------------------------------------------------------------------- */

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
    /* the source names the backend: a CPU run's times are no GPU's (compare says so) */
    if (!cstart || !(t = dm_trace_new(ex->be && !strcmp(ex->be->name, "gpu") ? "real-gpu" : "real-cpu", p, err))) {
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
            dm_trace_event e = {r, op->stream, i, op->kind, s, d, op->bytes, op->flops, op->layer, op->coll, w, op->payload};
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

int real_exec_write_trace(real_exec *ex, const char *path, dm_err *err)
{
    dm_trace *t = NULL;
    int rc = real_exec_trace(ex, &t, err);
    if (rc == 0 && t) rc = dm_trace_write(t, path, err);
    dm_trace_free(t);
    int bad = rc < 0;
    MPI_Bcast(&bad, 1, MPI_INT, 0, ex->comm);
    if (bad && rc == 0) return dm_err_set(err, "rank %d: rank 0 could not write the trace", ex->rank);
    return bad ? -1 : 0;
}

void real_weights_free(float **w, int64_t n)
{
    if (!w) return;
    for (int64_t i = 0; i < n; i++) free(w[i]);
    free(w);
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
                    if (memcmp(buf, w[i] + lo, (size_t)(hi - lo) * 4) != 0 && !mismatch) mismatch = 1, mismatch_p = i;
                } else {
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

int real_exec_memory(real_exec *ex, real_mem_report *out)
{
    double v[3] = {0, 0, 0};
    if (ex->be->memory) ex->be->memory(ex, &v[0], &v[1], &v[2]);
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, ex->comm);
    *out = (real_mem_report){v[0], v[1], v[2]};
    return 0;
}

/* ---- state access (real_priv.h) ---------------------------------------------------------- */

void real_param_info(const real_exec *ex, int64_t i, real_pinfo *pi) { ex->be->param_info(ex, i, pi); }

int real_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err)
{
    return ex->be->param_weights(ex, i, lo, hi, dst, err);
}

int real_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err)
{
    return ex->be->param_get(ex, i, W, mom, m1, m2, err);
}

int real_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                   int64_t own_lo, int64_t own_hi, dm_err *err)
{
    return ex->be->param_put(ex, i, W, mom, m1, m2, own_lo, own_hi, err);
}

/* ---- the program to every rank ------------------------------------------------------------ */

int real_share_program(dm_program **p, MPI_Comm comm, dm_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    long long n = 0;
    int rc = 0, rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        FILE *f = open_memstream(&buf, &len);
        if (!f) return dm_err_set(err, "open_memstream failed");
        rc = dm_program_write_json(*p, f, err);
        fclose(f);
        n = rc == 0 && len <= INT_MAX ? (long long)len : -1;
        if (rc == 0 && n < 0) rc = dm_err_set(err, "the program's JSON (%zu bytes) is too large to share", len);
    }
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, comm);
    if (n < 0) {
        free(buf);
        return rank == 0 ? -1 : dm_err_set(err, "rank 0 could not write its program");
    }
    if (rank != 0 && !(buf = dm_malloc((size_t)n + 1, err))) return -1;
    MPI_Bcast(buf, (int)n, MPI_CHAR, 0, comm);
    if (rank != 0) {
        char path[] = "/tmp/dmuon-program-XXXXXX";
        int fd = mkstemp(path);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        int bad = !f;
        if (f) {
            bad = fwrite(buf, 1, (size_t)n, f) != (size_t)n;
            if (fclose(f) != 0) bad = 1;
        } else if (fd >= 0) {
            close(fd);
        }
        if (bad) {
            free(buf);
            if (fd >= 0) unlink(path);
            return dm_err_set(err, "rank %d: cannot write %s", rank, path);
        }
        *p = NULL;
        rc = dm_program_load(path, p, err);
        unlink(path);
    }
    free(buf);
    return rc;
}
