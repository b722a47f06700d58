/* real_gpu.c: the GPU backend of the executor (real_priv.h's table). One rank per GPU (device =
 * local rank on the node), NCCL communicators split from the world communicator of real_nccl.h
 * (one per program group and stream; the collectives are the table's calls, core/coll.h),
 * the program's CUDA streams with its priorities (comm-hi highest; with one rank the
 * collectives run on the compute stream, dm_run_stream of core/program.h), ops issued in list
 * order and ordered across streams by events only; every forward/backward kernel of the
 * layers' plans (wk_plan.h) through the work kernels' one dispatcher (kernels/wk_cuda.h:
 * cuBLAS products in bf16 with fp32 compute, our elementwise kernels and deterministic
 * reductions), the kernels helper's NS plans (graph replays) and Muon/AdamW kernels, NCCL
 * collectives in bf16.
 *
 * Buffers: per matrix the bf16 working weights Wb (what forward/backward read and fetches
 * move) and gradients G, in two arenas laid out by dm_arena_layout (core/arena.h: the matrices
 * of one tensor in one layer back to back, so a layer's experts are one strided batch; each such
 * group 16-byte aligned; the groups in the order the program's collectives take them), so a
 * collective runs in place on the arena's range, alignment gaps (zeros) included, unless the
 * program marks it staged (dm_op.staged: packed into the stream's collective buffer around the
 * call); fp32 master weights and
 * optimizer state only where this rank updates and only over the range its updates touch
 * (ex->st, core/holds.h: the whole matrix where it runs NS, its shard of an AdamW or FSDP
 * update; element x at [x - s0]), each of those in two buffers (ping-pong, below); no rank
 * keeps a master of what it does not update (the initial weights come from the counter hash
 * through the fp32 gradient scratch); per layer its input activations and the residuals forward
 * keeps for backward (two arenas, layer after layer: what the workload's kept_bytes counts); shared scratch for the
 * cost-only outputs (input gradients, attention), the reductions' workspace and the index maps.
 *
 * Data: activations from the CPU backend's counter hash keyed by global row (wk_plan.h), targets
 * from it on the fly, so runs on different rank counts over the same tokens compare.
 *
 * Non-finite gradients, as the CPU backend: every local gradient is checked after the backward
 * and every reduced gradient where ns or adamw reads it (an overflow inside a bf16 reduction),
 * into device flags; no host wait inside the step. The ranks agree at the step's end; a bad
 * step leaves nothing changed, without copying anything in a good one:
 *   - Ping-pong state: every state array this rank updates (master weights W32, Muon momentum,
 *     AdamW moments) has a committed buffer (q->W32, q->mom, q->m1, q->m2: what checkpoints
 *     and the state accessors read) and a second one (q->nxt). The update kernels read the
 *     committed buffer and write the second one, out of place; a kept step swaps the two of
 *     every state it wrote, a skipped step does not, so the committed state never changed.
 *   - Ranges: an update may cover part of a matrix (an FSDP shard, an AdamW reduce-scatter
 *     shard). Per state, [st_lo, st_hi) is where the second buffer may differ from the
 *     committed one (the whole matrix after allocation and after param_put). At the state's
 *     first write in a step over U, the second buffer takes the committed values over that
 *     interval less U (nothing in a steady run: every step writes the same U); a second write
 *     in the same step reads the second buffer. At the step's end the interval becomes the
 *     hull of what the step wrote, kept or skipped.
 *   - The bf16 working weights have no copy: inside a step they change by this rank's updates
 *     (bf16 of the new master over the updated range) and by the fetches (broadcasts and
 *     all-gathers, which sched/build.c places before the forward, and Z3's before each layer's
 *     backward: those complete before this rank's first optimizer op, so they carry committed
 *     weights; --publish's fetches, after the updates, carry the new ones). A skipped step
 *     converts the committed master back to bf16 over the range this rank's updates wrote:
 *     Wb == bf16(W32) holds there between steps (initial weights, param_put and every update
 *     write both); then the publishing fetches run again (republish), which carry the
 *     committed weights over what they brought. Elsewhere Wb may keep what this step's fetches
 *     brought (the committed weights of their owners), which the next step fetches again
 *     before any op reads it.
 * Every wait polls the event, NCCL's async errors and the --timeout, and aborts every
 * communicator on failure (the caller then MPI_Aborts).
 *
 * Before allocating, the bytes this rank needs (real_gpu_mem_estimate: what this file allocates,
 * part by part) are checked against the GPU's free memory; every allocation names its buffer,
 * bytes and free/total when it fails. The device's used memory is read (cudaMemGetInfo) before
 * the buffers, after them and after every step: its peak beside the estimate is
 * real_exec_memory's. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autotune.h"
#include "clock.h"
#include "clock_probe.h"
#include "coll.h"
#include "memory.h"
#include "ns_cuda.h"
#include "step_kern.h"
#include "real_nccl.h"
#include "real_priv.h"
#include "wk_cuda.h"

#define CU(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return dm_err_set(err, "rank %d: %s: %s (%s:%d)", ex->rank, #call, cudaGetErrorString(e_), \
                              __FILE__, __LINE__);                                                \
    } while (0)
#define CB(call)                                                                                  \
    do {                                                                                          \
        cublasStatus_t s_ = (call);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
            return dm_err_set(err, "rank %d: %s: cuBLAS status %d (%s:%d)", ex->rank, #call, (int)s_, \
                              __FILE__, __LINE__);                                                \
    } while (0)
#define NC(call)                                                                                  \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess && r_ != ncclInProgress)                                            \
            return dm_err_set(err, "rank %d: %s: %s (%s:%d)", ex->rank, #call, ncclGetErrorString(r_), \
                              __FILE__, __LINE__);                                                \
    } while (0)
#define OK(call)                                                                                  \
    do {                                                                                          \
        if ((call) < 0) return -1;                                                                \
    } while (0)

typedef uint16_t bf16; /* storage only */

/* The fp32 state arrays of a matrix, each in two buffers where this rank updates it. */
enum { ST_W32, ST_MOM, ST_M1, ST_M2, ST__N };

typedef struct gparam {
    int64_t rows, cols, size;
    int one_d;
    bf16 *Wb, *G;             /* into the arenas */
    float *W32, *mom, *m1, *m2; /* the committed state where this rank updates, over [s0, s1) */
    float *nxt[ST__N];        /* the second buffer of each state this rank updates (ping-pong) */
    int64_t s0, s1;           /* the states' range (ex->st): element x of the matrix at [x - s0] */
    int64_t st_lo[ST__N], st_hi[ST__N]; /* where nxt may differ from the committed buffer */
    int64_t wr_lo[ST__N], wr_hi[ST__N]; /* written this step (hull; empty: not written) */
    int64_t own_lo, own_hi;   /* range updated in the last committed step */
    void *ns_out;             /* this step's NS output (in a plan's output buffer) */
    dm_dtype ns_dt;           /* its dtype (the plan's: bf16 direct, fp16 Gram) */
    int64_t rs_lo, rs_hi;     /* this step's reduce-scatter shard */
    int64_t gr_lo, gr_hi;     /* reduced range (for adamw) */
} gparam;

typedef struct plan_ent {
    int64_t rows, cols;
    int batch;
    int algo;
    dm_dtype dt;        /* input and output dtype */
    ns_plan *plan;
} plan_ent;

typedef struct gpu {
    int device;
    cudaStream_t st[DM_STREAM__COUNT];
    cublasHandle_t blas[DM_STREAM__COUNT];
    ncclComm_t *comm;         /* [group * DM_STREAM__COUNT + stream], NULL if unused; the last of
                                 n_comm is the world communicator they are split from */
    int n_comm;
    gparam *p;
    bf16 *arena_w, *arena_g;
    int64_t total;            /* elements in each arena */
    int64_t *off;             /* each matrix's offset in them (dm_arena_layout) */
    bf16 *act, *res;          /* every layer's activations and residuals (wk_plan.h offsets from
                                 act_base[l], res_base[l]) */
    int64_t *act_base, *res_base;
    bf16 *dx, *dx2;           /* cost-only outputs */
    bf16 *ew;                 /* the layer passes' scratch (cost only) */
    float *ws;                /* the reductions' workspace */
    void *attn[WK_A__N];      /* attention buffers */
    void ***attn_ptr;         /* [geometry][op - DM_KOP_ATTN_SCORE]: device pointer arrays, or NULL
                                 (strided) */
    int32_t **map_dev;        /* [map * 5 + k]: a, inv, uniq, off, tok on the device */
    double mem_free0, mem_free_min, mem_total; /* cudaMemGetInfo: before the buffers, lowest since */
    float *g32;               /* fp32 gradient scratch (largest matrix) */
    float *g32_lo;            /* the AdamW ops' on compute-lo beside the others on compute, or NULL
                                 (core/memory.h dm_mem_lo_scratch) */
    bf16 *cbuf[DM_STREAM__COUNT]; /* collective packing buffers */
    size_t cbuf_n;
    float *d_loss;            /* device loss accumulator */
    int *d_flag;              /* device non-finite flags (INT_MAX - param, max): [0] this
                                 rank's local gradients, [1] reduced gradients it read */
    int *h_flag;              /* pinned copy of both */
    float *h_loss;            /* pinned */
    cudaEvent_t *ev_s, *ev_e; /* per op */
    cudaEvent_t step_s, step_e, flag_ev;
    plan_ent *plans;
    int n_plans, cap_plans;
    ns_config ns_cfg;
    at_cache *tune;           /* the kernels' autotune cache (tuned block counts), or NULL */
    int n_tuned, n_near, n_other, n_default; /* plans configured from the cache (their shape's
                                       entries / a near shape's / another GPU's: at_config_for) / with
                                       defaults */
    real_mem_est est;         /* what this rank needs (the precheck's) */
} gpu;

static gpu *G(const real_exec *ex) { return ex->bs; }

static void gpu_abort(real_exec *ex)
{
    gpu *g = G(ex);
    if (g && g->comm) real_nccl_abort(g->comm, g->n_comm);
}

/* Wait for ev, polling NCCL's async errors and the timeout; on failure abort every
 * communicator and return -1 (the caller aborts the MPI job). */
static int gpu_wait(real_exec *ex, cudaEvent_t ev, const char *what, dm_err *err)
{
    char who[64];
    snprintf(who, sizeof who, "rank %d: step %d", ex->rank, ex->step);
    return real_nccl_wait(ev, G(ex)->comm, G(ex)->n_comm, ex->o.timeout_s, who, what, err);
}

static ns_plan *get_plan(real_exec *ex, int64_t rows, int64_t cols, int batch, int algo, dm_dtype *dt,
                         dm_err *err);

/* Every state's second buffer may differ from the committed one anywhere in its range
 * (allocation, param_put). */
static void state_stale(gparam *q)
{
    for (int k = 0; k < ST__N; k++) q->st_lo[k] = q->s0, q->st_hi[k] = q->s1;
}

/* ---- setup ----------------------------------------------------------------------------- */

static int dev_alloc(real_exec *ex, void **p, size_t bytes, const char *what, dm_err *err)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        return dm_err_set(err, "rank %d: out of GPU memory (" DM_NOFIT_WORDS "): %s needs %.2f GiB, %.2f GiB of %.2f "
                          "GiB free; fewer --tokens or more ranks",
                          ex->rank, what, bytes / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0);
    }
    return 0;
}

static int init_nccl(real_exec *ex, dm_err *err)
{
    gpu *g = G(ex);
    ncclComm_t *world = &g->comm[g->n_comm - 1];
    if (real_nccl_world(ex->comm, world, err) < 0) return -1;
    /* one communicator per (group, stream) that carries collectives, so the comm-hi fetches
     * and the comm-lo gradients of one group can overlap */
    const dm_program *p = ex->prog;
    unsigned char *used = dm_calloc((size_t)(p->n_groups * DM_STREAM__COUNT + 1), 1, err);
    if (!used) return -1;
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *op = &p->ranks[r].ops[i];
            if (dm_op_is_collective(op->kind)) used[op->group * DM_STREAM__COUNT + op->stream] = 1;
        }
    for (int k = 0; k < p->n_groups * DM_STREAM__COUNT; k++) {
        if (!used[k]) continue;
        int gi = real_group_index(p, k / DM_STREAM__COUNT, ex->rank);
        ncclResult_t r = ncclCommSplit(*world, gi >= 0 ? k : NCCL_SPLIT_NOCOLOR, ex->rank, &g->comm[k], NULL);
        if (r != ncclSuccess) {
            free(used);
            return dm_err_set(err, "rank %d: ncclCommSplit for group %d: %s", ex->rank, k / DM_STREAM__COUNT,
                              ncclGetErrorString(r));
        }
    }
    free(used);
    return 0;
}

/* This rank's device (one per local rank) and whether the program's buffers fit on it, before
 * any NCCL call, so the ranks can agree and fail together with one message. */
/* DMUON_CLOCK_TRACE (the clock probe's file, see cp_step), NULL when unset or empty. */
static const char *clock_trace_path(void)
{
    const char *p = getenv("DMUON_CLOCK_TRACE");
    return p && *p ? p : NULL;
}

static int gpu_precheck(real_exec *ex, dm_err *err)
{
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    for (int i = 0; i < rp->n_ops; i++) /* before any CUDA call: what this backend does not run */
        if ((rp->ops[i].kind == DM_OP_NS && rp->ops[i].parts > 1) || rp->ops[i].payload == DM_PAYLOAD_GRAM)
            return dm_err_set(err, "rank %d op %d: a split NS (plan --ns-split) runs in the simulator and the CPU "
                              "backend only; the GPU backend does not run it yet", ex->rank, i);
    gpu *g = dm_calloc(1, sizeof *g, err);
    if (!g) return -1;
    ex->bs = g;
    real_mem_est *est = &g->est;
    /* the clock probe's sampler runs for the whole run beside the step: a kernel loaded lazily at
     * its first launch would wait for the sampler to end (module loading synchronizes the
     * context), so with the probe every module loads at start (before the first CUDA call) */
    if (clock_trace_path()) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    if (real_gpu_select(ex->comm, &g->device, err) < 0) return -1;
    if (real_gpu_mem_estimate(ex->model, ex->prog, ex->rank, ex->o.tokens, est, err) < 0) return -1;
    size_t fr = 0, tot = 0;
    CU(cudaMemGetInfo(&fr, &tot));
    g->mem_free0 = g->mem_free_min = (double)fr;
    g->mem_total = (double)tot;
    const double GiB = 1073741824.0;
    if (est->total > (double)fr)
        return dm_err_set(err, "rank %d: %s " DM_NOFIT_WORDS " on GPU %d: this rank needs about %.1f GiB (weights and "
                          "gradients %.1f, activations kept for backward %.1f, scratch %.1f, optimizer state %.1f, its "
                          "second buffers %.1f, collective buffers %.1f, NS plans %.1f, runtime %.1f) and the GPU has "
                          "%.1f GiB free of %.1f GiB; use more GPUs, fewer --tokens or a sharded strategy",
                          ex->rank, ex->model->name, g->device, est->total / GiB, est->weights_grads / GiB,
                          est->activations / GiB, est->scratch / GiB, est->state / GiB, est->state_next / GiB,
                          est->comm / GiB, est->ns / GiB, est->runtime / GiB, (double)fr / GiB, (double)tot / GiB);
    return 0;
}

/* The lowest free device memory seen so far (after the buffers, after each step). */
static void note_mem(gpu *g)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && (double)fr < g->mem_free_min) g->mem_free_min = (double)fr;
}

/* Upload host ints (n of them) to a new device array (NULL and 0 when n is 0). */
static int upload_ints(real_exec *ex, int32_t **dst, const int32_t *src, int64_t n, const char *what, dm_err *err)
{
    *dst = NULL;
    if (n <= 0 || !src) return 0;
    if (dev_alloc(ex, (void **)dst, (size_t)n * 4, what, err)) return -1;
    CU(cudaMemcpy(*dst, src, (size_t)n * 4, cudaMemcpyHostToDevice));
    return 0;
}

/* The layers' buffers (wk_plan.h): activations filled from the counter hash, residuals, the
 * shared scratch, the attention buffers and pointer arrays, the index maps. */
static int alloc_workload(real_exec *ex, cudaStream_t s0, dm_err *err)
{
    gpu *g = G(ex);
    const wk_plan *w = &ex->wl;
    int L = w->n_layers;
    if (!(g->act_base = dm_calloc((size_t)(L + 1), sizeof *g->act_base, err)) ||
        !(g->res_base = dm_calloc((size_t)(L + 1), sizeof *g->res_base, err)))
        return -1;
    for (int l = 0; l < L; l++) {
        g->act_base[l + 1] = g->act_base[l] + w->L[l].n_act;
        g->res_base[l + 1] = g->res_base[l] + w->L[l].n_res;
    }
    if (dev_alloc(ex, (void **)&g->act, (size_t)w->n_act * 2, "the layers' input activations", err) ||
        dev_alloc(ex, (void **)&g->res, (size_t)w->n_res * 2, "the activations kept for backward", err) ||
        dev_alloc(ex, (void **)&g->dx, (size_t)w->max_dx * 2, "the input-gradient scratch", err) ||
        dev_alloc(ex, (void **)&g->dx2, (size_t)w->max_dx2 * 2, "the combine's scratch", err) ||
        dev_alloc(ex, (void **)&g->ew, (size_t)w->max_ew * 2, "the layer passes' scratch", err) ||
        dev_alloc(ex, (void **)&g->ws, (size_t)w->max_ws * 4, "the reductions' workspace", err))
        return -1;
    /* the combine reads the experts' input gradients: defined even when input_grad skips them */
    if (w->max_dx) CU(cudaMemsetAsync(g->dx, 0, (size_t)w->max_dx * 2, s0));
    if (w->max_ew) CU(cudaMemsetAsync(g->ew, 0, (size_t)w->max_ew * 2, s0));
    for (int l = 0; l < L; l++) {
        const wk_layer *lp = &w->L[l];
        for (int si = 0; si < lp->n_slots; si++) {
            const wk_slot *q = &lp->slots[si];
            bf16 *X = g->act + g->act_base[l] + q->off;
            if (q->routed && q->gathered) {
                CU(cudaMemsetAsync(X, 0, (size_t)(q->rows * q->cols) * 2, s0));
            } else if (q->routed) {
                for (int64_t e = 0; e < q->nexp; e++)
                    OK(wk_fill_hash(X + e * q->per * q->cols, q->per, q->cols, ex->o.seed, WK_H_ROUTED, q->key * 65536 + e,
                                    q->row0, (ns_stream)s0, err));
            } else {
                OK(wk_fill_hash(X, q->rows, q->cols, ex->o.seed, WK_H_ACT, q->key, q->row0, (ns_stream)s0, err));
            }
        }
    }
    for (int a = 0; a < WK_A__N; a++) {
        char what[64];
        snprintf(what, sizeof what, "attention buffer %d", a);
        if (dev_alloc(ex, &g->attn[a], (size_t)w->attn_size[a] * 2, what, err)) return -1;
        if (w->attn_size[a]) OK(ns_fill_random(g->attn[a], DM_DT_BF16, w->attn_size[a], 77 + a, 0.25f, s0, err));
    }
    if (w->n_attn && !(g->attn_ptr = dm_calloc((size_t)w->n_attn, sizeof *g->attn_ptr, err))) return -1;
    for (int i = 0; i < w->n_attn; i++) {
        const wk_attn_geom *ge = &w->attn[i];
        if (wk_attn_strided(ge)) continue;
        int64_t b = wk_attn_entries(ge);
        int nops = DM_KOP_ATTN_DKEY - DM_KOP_ATTN_SCORE + 1;
        void **host = dm_malloc((size_t)(3 * b) * sizeof *host, err);
        if (!host || !(g->attn_ptr[i] = dm_calloc((size_t)nops, sizeof *g->attn_ptr[i], err))) {
            free(host);
            return -1;
        }
        for (int k = 0; k < nops && host; k++) {
            wk_args tmp;
            memset(&tmp, 0, sizeof tmp);
            wk_attn_bind(ge, g->attn, (dm_kern_op)(DM_KOP_ATTN_SCORE + k), host, &tmp);
            if (dev_alloc(ex, (void **)&g->attn_ptr[i][k], (size_t)(3 * b) * sizeof *host, "attention pointers", err) ||
                cudaMemcpy(g->attn_ptr[i][k], host, (size_t)(3 * b) * sizeof *host, cudaMemcpyHostToDevice) != cudaSuccess) {
                free(host);
                return dm_err_set(err, "rank %d: attention pointer arrays: %s", ex->rank, err->msg);
            }
        }
        free(host);
    }
    if (w->n_maps && !(g->map_dev = dm_calloc((size_t)w->n_maps * 5, sizeof *g->map_dev, err))) return -1;
    for (int i = 0; i < w->n_maps; i++) {
        const wk_map *mp = &w->maps[i];
        int32_t **d = g->map_dev + 5 * i;
        /* the grouped tokens of a lookup at their upper bound (as the estimate counts them) */
        if (upload_ints(ex, &d[0], mp->a, mp->n, "an index map", err) ||
            upload_ints(ex, &d[1], mp->inv, mp->n_inv, "an index map", err) ||
            (mp->embed && (dev_alloc(ex, (void **)&d[2], (size_t)(mp->n ? mp->n : 1) * 4, "an index map", err) ||
                           dev_alloc(ex, (void **)&d[3], (size_t)(mp->n + 1) * 4, "an index map", err) ||
                           upload_ints(ex, &d[4], mp->tok, mp->n, "an index map", err))))
            return -1;
        if (mp->embed) {
            CU(cudaMemcpy(d[2], mp->uniq, (size_t)mp->n_uniq * 4, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(d[3], mp->off, (size_t)(mp->n_uniq + 1) * 4, cudaMemcpyHostToDevice));
        }
    }
    return 0;
}

static int gpu_create(real_exec *ex, dm_err *err)
{
    gpu *g = G(ex);
    const dm_program *p = ex->prog;
    const real_mem_est est = g->est;
    /* the optimizer's ops share the fp32 gradient scratch and the NS plans' buffers: one compute
     * stream runs all of them (compute, or compute-lo beside the backward), but for AdamW ops on
     * compute-lo beside the rest on compute (--publish), which get a scratch of their own */
    const dm_rank_prog *rp = &p->ranks[ex->rank];
    int64_t lo_scratch = dm_mem_lo_scratch(rp, ex->st);
    if (lo_scratch < 0)
        return dm_err_set(err, "rank %d: NS or Muon updates on compute-lo beside optimizer ops on compute (the GPU "
                          "executor runs them on one stream)", ex->rank);
    int lo_pri = 0, hi_pri = 0;
    CU(cudaDeviceGetStreamPriorityRange(&lo_pri, &hi_pri));
    /* comm-hi highest (fetches gate the next forward), comm-lo next, then compute; compute-lo
     * (the optimizer beside the backward) lowest, so that it takes what compute leaves */
    int pri[DM_STREAM__COUNT] = {hi_pri < lo_pri ? lo_pri - 1 : lo_pri, hi_pri, hi_pri < lo_pri ? hi_pri + 1 : hi_pri,
                                 lo_pri};
    for (int s = 0; s < DM_STREAM__COUNT; s++) {
        CU(cudaStreamCreateWithPriority(&g->st[s], cudaStreamNonBlocking, pri[s]));
        CB(cublasCreate(&g->blas[s]));
        CB(cublasSetStream(g->blas[s], g->st[s]));
    }
    g->n_comm = p->n_groups * DM_STREAM__COUNT + 1;
    if (!(g->comm = dm_calloc((size_t)g->n_comm, sizeof *g->comm, err))) return -1;
    OK(init_nccl(ex, err));
    ns_config_default(&g->ns_cfg, DM_NS_DIRECT);
    g->ns_cfg.coeffs = ex->coeffs;
    if (ex->o.autotune_path && ex->o.autotune_path[0]) {
        ns_device_info info;
        if (ns_device_query(&info, err) < 0 || at_cache_open(ex->o.autotune_path, &info, &g->tune, err) < 0) return -1;
    }

    /* what this rank updates */
    int64_t n = ex->n_mx;
    const unsigned char *need = ex->need;
    if (!(g->p = dm_calloc((size_t)(n ? n : 1), sizeof *g->p, err))) return -1;
    int64_t total = est.total_elems, max_size = est.max_size, max_coll = est.max_coll;
    g->total = total;
    for (int64_t i = 0; i < n; i++) {
        gparam *q = &g->p[i];
        const dm_matrix *m = &ex->mx[i];
        q->one_d = ex->model->tensors[m->tensor].ndim == 1;
        q->rows = m->rows;
        q->cols = q->one_d ? 1 : m->cols;
        q->size = q->rows * q->cols;
        q->s0 = ex->st[i].lo;
        q->s1 = ex->st[i].hi > ex->st[i].lo ? ex->st[i].hi : ex->st[i].lo;
        /* before any step the initial master over the state's range (exact fp32) is the one */
        q->own_lo = q->s0;
        q->own_hi = q->s1;
        state_stale(q); /* nxt uninitialised */
    }
    int rc = -1;
    if (dev_alloc(ex, (void **)&g->arena_w, (size_t)total * 2, "the bf16 weights", err) ||
        dev_alloc(ex, (void **)&g->arena_g, (size_t)total * 2, "the bf16 gradients", err) ||
        dev_alloc(ex, (void **)&g->g32, (size_t)max_size * 4, "the fp32 gradient scratch", err) ||
        (lo_scratch > 0 &&
         dev_alloc(ex, (void **)&g->g32_lo, (size_t)lo_scratch * 4, "compute-lo's fp32 gradient scratch", err)) ||
        dev_alloc(ex, (void **)&g->d_loss, sizeof(float), "the loss", err) ||
        dev_alloc(ex, (void **)&g->d_flag, 2 * sizeof(int), "the flag", err))
        goto out;
    g->cbuf_n = (size_t)max_coll;
    for (int s = 0; s < DM_STREAM_COLL_COUNT; s++)
        if (dev_alloc(ex, (void **)&g->cbuf[s], (size_t)max_coll * 2, "the collective buffers", err)) goto out;
    if (cudaMallocHost((void **)&g->h_flag, 2 * sizeof(int)) != cudaSuccess ||
        cudaMallocHost((void **)&g->h_loss, sizeof(float)) != cudaSuccess) {
        dm_err_set(err, "rank %d: cudaMallocHost failed", ex->rank);
        goto out;
    }
    if (!(g->off = dm_malloc((size_t)(n ? n : 1) * sizeof *g->off, err)) ||
        dm_arena_layout(ex->model, ex->mx, n, p, g->off, err) != total)
        goto out;
    cudaStream_t s0 = g->st[DM_STREAM_COMPUTE];
    /* the alignment gaps stay zero: an in-place collective spans the gaps between its params */
    if (cudaMemsetAsync(g->arena_w, 0, (size_t)total * 2, s0) != cudaSuccess ||
        cudaMemsetAsync(g->arena_g, 0, (size_t)total * 2, s0) != cudaSuccess) {
        dm_err_set(err, "rank %d: cudaMemsetAsync of the arenas failed", ex->rank);
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        gparam *q = &g->p[i];
        q->Wb = g->arena_w + g->off[i];
        q->G = g->arena_g + g->off[i];
        char what[320];
        size_t ns = (size_t)(q->s1 - q->s0) * 4;
        if (ns) {
            snprintf(what, sizeof what, "the master weights and optimizer state of %s", real_matrix_name(ex, i));
            if (dev_alloc(ex, (void **)&q->W32, ns, what, err)) goto out;
            if ((need[i] & 1) && (dev_alloc(ex, (void **)&q->mom, ns, what, err) ||
                                  cudaMemsetAsync(q->mom, 0, ns, s0) != cudaSuccess))
                goto out;
            if ((need[i] & 2) && (dev_alloc(ex, (void **)&q->m1, ns, what, err) ||
                                  dev_alloc(ex, (void **)&q->m2, ns, what, err) ||
                                  cudaMemsetAsync(q->m1, 0, ns, s0) != cudaSuccess ||
                                  cudaMemsetAsync(q->m2, 0, ns, s0) != cudaSuccess))
                goto out;
            snprintf(what, sizeof what, "the second buffers of the state of %s", real_matrix_name(ex, i));
            if (dev_alloc(ex, (void **)&q->nxt[ST_W32], ns, what, err) ||
                ((need[i] & 1) && dev_alloc(ex, (void **)&q->nxt[ST_MOM], ns, what, err)) ||
                ((need[i] & 2) && (dev_alloc(ex, (void **)&q->nxt[ST_M1], ns, what, err) ||
                                   dev_alloc(ex, (void **)&q->nxt[ST_M2], ns, what, err))))
                goto out;
        }
        /* every rank draws the same initial weights, the CPU backend's (real_fill_weights: 1 + 0.1 U
         * for 1-D, U / sqrt(cols) for 2-D, U the counter hash), whole into the fp32 scratch, so the
         * backends start alike: the working copy from all of it, the master from its range */
        if (q->one_d ? wk_fill_hash_f32(g->g32, 1, q->size, ex->o.seed, WK_H_WEIGHT, ex->mx[i].id, 0.1f, 1.0f,
                                        (ns_stream)s0, err)
                     : wk_fill_hash_f32(g->g32, q->rows, q->cols, ex->o.seed, WK_H_WEIGHT, ex->mx[i].id,
                                        (float)(1.0 / sqrt((double)q->cols)), 0.0f, (ns_stream)s0, err))
            goto out;
        if (ns_convert(g->g32, DM_DT_FP32, q->Wb, DM_DT_BF16, q->size, (ns_stream)s0, err)) goto out;
        if (ns && cudaMemcpyAsync(q->W32, g->g32 + q->s0, ns, cudaMemcpyDeviceToDevice, s0) != cudaSuccess) {
            dm_err_set(err, "rank %d: the initial master weights of %s: cudaMemcpyAsync failed", ex->rank,
                       real_matrix_name(ex, i));
            goto out;
        }
    }
    if (alloc_workload(ex, s0, err)) goto out;
    /* NS plans (and their graphs) before the first step: plan creation synchronizes the device */
    for (int k = 0; k < rp->n_ops; k++) {
        const dm_op *op = &rp->ops[k];
        if (op->kind != DM_OP_NS || op->n_params < 1) continue;
        gparam *q0 = &g->p[op->params[0]];
        for (int pass = 0; pass < 2; pass++) {
            int64_t rows = pass == 0 ? q0->rows : q0->cols, cols = pass == 0 ? q0->cols : q0->rows;
            int cnt = 0;
            for (int j = 0; j < op->n_params; j++) cnt += g->p[op->params[j]].rows == rows && g->p[op->params[j]].cols == cols;
            if (!cnt || (pass == 1 && rows == cols)) continue;
            dm_dtype dt;
            ns_plan *pl = get_plan(ex, rows, cols, cnt, op->algo, &dt, err);
            if (!pl || ns_fill_random(ns_plan_input(pl), dt, rows * cols * cnt, 1, 1.0f, s0, err) ||
                ns_plan_run(pl, (ns_stream)s0, !op->eager, err))
                goto out;
        }
    }
    int nops = rp->n_ops;
    if (!(g->ev_s = dm_calloc((size_t)(nops ? nops : 1), sizeof *g->ev_s, err)) ||
        !(g->ev_e = dm_calloc((size_t)(nops ? nops : 1), sizeof *g->ev_e, err)))
        goto out;
    for (int i = 0; i < nops; i++)
        if (cudaEventCreate(&g->ev_s[i]) != cudaSuccess || cudaEventCreate(&g->ev_e[i]) != cudaSuccess) {
            dm_err_set(err, "rank %d: cudaEventCreate failed", ex->rank);
            goto out;
        }
    {
        ns_device_info dev;
        dm_err e2;
        int nccl_v = 0;
        ncclGetVersion(&nccl_v);
        if (ns_device_query(&dev, &e2) < 0) snprintf(dev.name, sizeof dev.name, "?");
        snprintf(ex->info, sizeof ex->info,
                 "gpu: %.100s (device %d of rank 0), NCCL %d; NS plans %d (%d with tuned block counts from %.200s, %d "
                 "with a near shape's, %d with another GPU's, %d with defaults)", dev.name, g->device, nccl_v,
                 g->n_plans, g->n_tuned, g->tune ? ex->o.autotune_path : "no autotune cache", g->n_near, g->n_other,
                 g->n_default);
    }
    if (cudaEventCreate(&g->step_s) != cudaSuccess || cudaEventCreate(&g->step_e) != cudaSuccess ||
        cudaEventCreate(&g->flag_ev) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        dm_err_set(err, "rank %d: CUDA setup failed", ex->rank);
        goto out;
    }
    note_mem(g);
    rc = 0;
out:
    return rc;
}

static void gpu_destroy(real_exec *ex)
{
    gpu *g = G(ex);
    if (!g) return;
    dm_err cp_err = {0};
    if (clock_trace_path() && cp_stop_write(clock_trace_path(), &cp_err) < 0) fprintf(stderr, "dmuon: %s\n", cp_err.msg);
    cudaDeviceSynchronize();
    if (g->p)
        for (int64_t i = 0; i < ex->n_mx; i++) {
            gparam *q = &g->p[i];
            cudaFree(q->W32), cudaFree(q->mom), cudaFree(q->m1), cudaFree(q->m2);
            for (int k = 0; k < ST__N; k++) cudaFree(q->nxt[k]);
        }
    free(g->p);
    for (int i = 0; i < g->n_plans; i++) ns_plan_destroy(g->plans[i].plan);
    at_cache_close(g->tune);
    free(g->plans);
    cudaFree(g->arena_w), cudaFree(g->arena_g), cudaFree(g->g32), cudaFree(g->g32_lo);
    free(g->off);
    cudaFree(g->act), cudaFree(g->res), cudaFree(g->dx), cudaFree(g->dx2), cudaFree(g->ws), cudaFree(g->ew);
    free(g->act_base), free(g->res_base);
    for (int a = 0; a < WK_A__N; a++) cudaFree(g->attn[a]);
    for (int i = 0; g->attn_ptr && i < ex->wl.n_attn; i++) {
        for (int k = 0; g->attn_ptr[i] && k <= DM_KOP_ATTN_DKEY - DM_KOP_ATTN_SCORE; k++) cudaFree(g->attn_ptr[i][k]);
        free(g->attn_ptr[i]);
    }
    free(g->attn_ptr);
    for (int i = 0; g->map_dev && i < 5 * ex->wl.n_maps; i++) cudaFree(g->map_dev[i]);
    free(g->map_dev);
    cudaFree(g->d_loss), cudaFree(g->d_flag);
    for (int s = 0; s < DM_STREAM__COUNT; s++) cudaFree(g->cbuf[s]);
    if (g->h_flag) cudaFreeHost(g->h_flag);
    if (g->h_loss) cudaFreeHost(g->h_loss);
    int nops = ex->prog->ranks[ex->rank].n_ops;
    for (int i = 0; g->ev_s && i < nops; i++) cudaEventDestroy(g->ev_s[i]), cudaEventDestroy(g->ev_e[i]);
    free(g->ev_s);
    free(g->ev_e);
    if (g->comm) {
        for (int k = 0; k < g->n_comm; k++) /* the world last: the others are split from it */
            if (g->comm[k]) ncclCommDestroy(g->comm[k]);
        free(g->comm);
    }
    for (int s = 0; s < DM_STREAM__COUNT; s++) {
        if (g->blas[s]) cublasDestroy(g->blas[s]);
        if (g->st[s]) cudaStreamDestroy(g->st[s]);
    }
    free(g);
    ex->bs = NULL;
}

/* ---- ops ------------------------------------------------------------------------------- */

/* The buffers and scalars of kernel b of layer l for the work kernels' dispatcher (wk_cuda.h). */
static void kernel_args(real_exec *ex, int l, const wk_kb *b, wk_args *a)
{
    gpu *g = G(ex);
    const dm_kernel *k = &b->k;
    bf16 *act = g->act + g->act_base[l], *res = g->res + g->res_base[l];
    bf16 *W = k->param >= 0 ? g->p[k->param].Wb : NULL, *Gr = k->param >= 0 ? g->p[k->param].G : NULL;
    int32_t *const *mp = b->map >= 0 ? g->map_dev + 5 * b->map : NULL;
    int bg = k->kind == DM_KERN_BGEMM;
    wk_args_scalars(a, b, ex->o.seed);
    a->loss = g->d_loss;
    a->ws = g->ws;
    switch (k->op) {
    case DM_KOP_FWD: /* Y = X W^T: X shared by the count matrices, or each expert's rows */
        a->a = act + b->x, a->sa = bg ? k->m * k->k : 0;
        a->b = W, a->sb = k->n * k->k;
        a->c = res + b->r, a->sc = k->m * k->n;
        break;
    case DM_KOP_DGRAD: /* dX = dY W (cost only) */
        a->a = res + b->r, a->sa = k->m * k->k;
        a->b = W, a->sb = k->k * k->n;
        a->c = g->dx, a->sc = bg ? k->m * k->n : 0;
        break;
    case DM_KOP_WGRAD: /* dW = dY^T X / (N out) */
        a->a = res + b->r, a->sa = k->k * k->m;
        a->b = act + b->x, a->sb = bg ? k->k * k->n : 0;
        a->c = Gr, a->sc = k->m * k->n;
        a->alpha = (float)b->scale;
        break;
    case DM_KOP_ATTN_SCORE:
    case DM_KOP_ATTN_VALUE:
    case DM_KOP_ATTN_DVALUE:
    case DM_KOP_ATTN_DSCORE:
    case DM_KOP_ATTN_DQUERY:
    case DM_KOP_ATTN_DKEY: {
        wk_attn_bind(&ex->wl.attn[b->attn], g->attn, k->op, NULL, a);
        void **pp = g->attn_ptr && g->attn_ptr[b->attn] ? g->attn_ptr[b->attn][k->op - DM_KOP_ATTN_SCORE] : NULL;
        if (pp) {
            int64_t n = k->batch;
            a->pa = (const void *const *)pp, a->pb = (const void *const *)(pp + n), a->pc = (void *const *)(pp + 2 * n);
        }
        break;
    }
    case DM_KOP_LOSS: a->r = res + b->r; break;
    case DM_KOP_VECTOR:
    case DM_KOP_TABLE: a->x = act + b->x, a->w = W, a->r = res + b->r; break;
    case DM_KOP_VECTOR_BWD:
    case DM_KOP_TABLE_BWD: a->r = res + b->r, a->x = act + b->x, a->w = W, a->g = Gr, a->dx = g->dx; break;
    case DM_KOP_EMBED: a->w = W, a->idx = mp[0], a->r = res + b->r; break;
    case DM_KOP_EMBED_BWD:
        a->r = res + b->r, a->g = Gr;
        a->csr_id = mp[2], a->csr_off = mp[3], a->csr_tok = mp[4], a->csr_n = ex->wl.maps[b->map].n_uniq;
        break;
    case DM_KOP_ROUTE: a->x = act + b->x, a->idx = mp[0], a->g = act + b->dst; break;
    case DM_KOP_ROUTE_BWD: a->r = g->dx, a->idx = mp[1], a->dx = g->dx2; break;
    case DM_KOP_SOFTMAX: a->r = g->attn[WK_AS]; break;
    case DM_KOP_SOFTMAX_BWD: a->x = g->attn[WK_AS], a->r = g->attn[WK_ADS]; break;
    case DM_KOP_ACT:
    case DM_KOP_ACT_BWD:
    case DM_KOP_GLU:
    case DM_KOP_GLU_BWD: /* from the input projections' residuals (and dH, the consumer's dX) */
        a->x = res + b->r, a->w = b->r2 >= 0 ? res + b->r2 : NULL, a->dx = g->dx, a->r = g->ew, a->ld = b->ld;
        break;
    case DM_KOP_ROPE:
    case DM_KOP_ROPE_BWD: a->r = g->ew; break;
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: a->x = act + b->x, a->w = g->ew + k->m * k->n, a->r = g->ew; break;
    default: break;
    }
}

/* Diagnostics: with DMUON_KERNEL_TIMES=FILE in the environment, every forward/backward kernel
 * of a step is timed by CUDA events around its launch (they add a few us each, so the step is
 * not the one measured without them) and the last step's times are written to FILE as CSV, to
 * hold the kernels as the step runs them against `dmuon bench work`'s rows of the same shapes.
 * One process, one rank's kernels; nothing of it in the normal path. */
typedef struct ktime {
    int layer, fwd;
    dm_kernel k;
    uintptr_t pa, pb, pc, pg; /* the operands' addresses (a, b, c, g): their alignment beside the time */
    cudaEvent_t a, b;
} ktime;
static ktime *kt;
static int kt_n, kt_cap, kt_on = -1;
static const char *kt_path;

static int kt_enabled(void)
{
    if (kt_on < 0) {
        kt_path = getenv("DMUON_KERNEL_TIMES");
        kt_on = kt_path && *kt_path;
    }
    return kt_on;
}

static ktime *kt_next(void)
{
    if (kt_n == kt_cap) {
        int cap = kt_cap ? 2 * kt_cap : 1024;
        ktime *n = realloc(kt, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        for (int i = kt_cap; i < cap; i++)
            if (cudaEventCreate(&n[i].a) != cudaSuccess || cudaEventCreate(&n[i].b) != cudaSuccess) return kt = n, NULL;
        kt = n;
        kt_cap = cap;
    }
    return &kt[kt_n++];
}

/* After the step's end was waited for: write the step's kernel times (each step overwrites).
 * start_us: each kernel's start from the step's first; wall_s: that start on the host's clock
 * (CLOCK_REALTIME, seconds), placed by the last kernel's end being about now (the host has just
 * waited for it): to put a kernel beside the GPU's clock readings (nvidia-smi, NVML). */
static void kt_flush(void)
{
    if (!kt_enabled() || !kt_n) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    float span_ms = 0;
    cudaEventElapsedTime(&span_ms, kt[0].a, kt[kt_n - 1].b);
    double wall0 = (double)now.tv_sec + now.tv_nsec * 1e-9 - span_ms * 1e-3;
    FILE *f = fopen(kt_path, "w");
    if (f) {
        fprintf(f, "layer,pass,index,kind,op,m,n,k,batch,count,param,us,a_mod4k,b_mod4k,c_mod4k,g_mod4k,start_us,wall_s\n");
        int idx = 0, last_layer = -2, last_fwd = -1;
        for (int i = 0; i < kt_n; i++) {
            const ktime *t = &kt[i];
            if (t->layer != last_layer || t->fwd != last_fwd) idx = 0, last_layer = t->layer, last_fwd = t->fwd;
            float ms = 0, at = 0;
            cudaEventElapsedTime(&ms, t->a, t->b);
            cudaEventElapsedTime(&at, kt[0].a, t->a);
            fprintf(f, "%d,%s,%d,%s,%s,%lld,%lld,%lld,%lld,%lld,%lld,%.3f,%u,%u,%u,%u,%.3f,%.6f\n", t->layer,
                    t->fwd ? "fwd" : "bwd", idx++, dm_kern_kind_name(t->k.kind), dm_kern_op_name(t->k.op), (long long)t->k.m,
                    (long long)t->k.n, (long long)t->k.k, (long long)t->k.batch, (long long)t->k.count, (long long)t->k.param,
                    ms * 1e3, (unsigned)(t->pa % 4096), (unsigned)(t->pb % 4096), (unsigned)(t->pc % 4096),
                    (unsigned)(t->pg % 4096), at * 1e3, wall0 + at * 1e-3);
        }
        fclose(f);
    }
    kt_n = 0;
}

/* Diagnostics: with DMUON_HOST_TIMES=FILE in the environment, the last step's ops are written to
 * FILE as CSV with the host's side beside the GPU's: when the host began and finished issuing
 * each op (host_start_us, host_end_us) and when the GPU ran it (gpu_start_us, gpu_dur_us), all in
 * us from the step's start. An op whose GPU start follows its host start by only a launch
 * latency waited for the host; one the host issued long before it ran did not. One process, one
 * rank's ops; no cost in the normal path beyond two clock reads an op. */
static void ht_write(const real_exec *ex)
{
    const char *path = getenv("DMUON_HOST_TIMES");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    fprintf(f, "op,kind,stream,layer,host_start_us,host_end_us,gpu_start_us,gpu_dur_us\n");
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        fprintf(f, "%d,%s,%s,%d,%.3f,%.3f,%.3f,%.3f\n", i, dm_op_kind_name(op->kind), dm_stream_name(op->stream),
                op->layer, ex->op_h0[i], ex->op_h1[i], ex->op_t0[i], ex->op_dur[i]);
    }
    fclose(f);
}

/* A forward or backward op: its layer's kernels in order. */
static int layer_op(real_exec *ex, const dm_op *op, cudaStream_t s, cublasHandle_t h, dm_err *err)
{
    const wk_layer *lp = &ex->wl.L[op->layer];
    int fwd = op->kind == DM_OP_FORWARD;
    for (int k = 0; k < (fwd ? lp->n_fwd : lp->n_bwd); k++) {
        const wk_kb *b = fwd ? &lp->fwd[k] : &lp->bwd[k];
        if (b->k.op == DM_KOP_DGRAD && !ex->o.input_grad) continue;
        wk_args a;
        kernel_args(ex, op->layer, b, &a);
        ktime *t = kt_enabled() ? kt_next() : NULL;
        if (t) {
            t->layer = op->layer, t->fwd = fwd, t->k = b->k;
            t->pa = (uintptr_t)a.a, t->pb = (uintptr_t)a.b, t->pc = (uintptr_t)a.c, t->pg = (uintptr_t)a.g;
            CU(cudaEventRecord(t->a, s));
        }
        OK(wk_run((wk_blas)h, &b->k, &a, (ns_stream)s, err));
        if (t) CU(cudaEventRecord(t->b, s));
    }
    return 0;
}

/* After a backward, per gradient: the fault injections and the non-finite check. */
static int backward_done(real_exec *ex, int64_t id, gparam *q, cudaStream_t s, dm_err *err)
{
    gpu *g = G(ex);
    if (ex->step == ex->o.inject_step && ex->rank == ex->o.inject_rank && id == ex->o.inject_param)
        OK(sk_poison(q->G, q->size / 2, s, err));
    if (ex->step == ex->o.overflow_step && id == ex->o.overflow_param) OK(sk_set(q->G, q->size / 2, 3.0e38f, s, err));
    if (ex->nranks == 1) q->gr_lo = 0, q->gr_hi = q->size;
    return sk_nonfinite(q->G, q->size, g->d_flag, (int)(0x7fffffff - id), s, err);
}

static ns_plan *get_plan(real_exec *ex, int64_t rows, int64_t cols, int batch, int algo, dm_dtype *dt,
                         dm_err *err)
{
    gpu *g = G(ex);
    for (int i = 0; i < g->n_plans; i++)
        if (g->plans[i].rows == rows && g->plans[i].cols == cols && g->plans[i].batch == batch &&
            g->plans[i].algo == algo) {
            *dt = g->plans[i].dt;
            return g->plans[i].plan;
        }
    if (g->n_plans == g->cap_plans) {
        int cap = g->cap_plans ? 2 * g->cap_plans : 16;
        plan_ent *np = dm_realloc(g->plans, (size_t)cap * sizeof *np, err);
        if (!np) return NULL;
        g->plans = np;
        g->cap_plans = cap;
    }
    /* the configuration the cost table was measured with: tuned block counts when the
     * autotune cache has this key, input/output in the iteration dtype */
    ns_config cfg;
    dm_ns_algo a = algo == DM_NS_GRAM ? DM_NS_GRAM : DM_NS_DIRECT;
    ns_config_default(&cfg, a);
    int got = g->tune ? at_config_for(g->tune, rows, cols, batch, a, &cfg) : 0;
    if (got == 3) g->n_near++;
    else if (got == 4) g->n_other++;
    else if (got) g->n_tuned++; /* or a smaller batch's */
    else g->n_default++;
    cfg.coeffs = g->ns_cfg.coeffs;
    ns_plan *pl = NULL;
    if (ns_plan_create(rows, cols, batch, cfg.work, &cfg, &pl, err) < 0) {
        /* most likely out of memory: say how much the device had left */
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        dm_err_set(err, "rank %d: the NS plan for %d x %lld x %lld: %s (%.2f GiB of %.2f GiB free)", ex->rank, batch,
                   (long long)rows, (long long)cols, msg, fr / 1073741824.0, tot / 1073741824.0);
        return NULL;
    }
    g->plans[g->n_plans++] = (plan_ent){rows, cols, batch, algo, cfg.work, pl};
    *dt = cfg.work;
    return pl;
}

static void extend(int64_t *lo, int64_t *hi, int64_t a, int64_t b);

static float **state_cur(gparam *q, int k)
{
    return k == ST_W32 ? &q->W32 : k == ST_MOM ? &q->mom : k == ST_M1 ? &q->m1 : &q->m2;
}

/* Ready state k of q for an update over [lo, hi) on stream s (ping-pong, at the top): *out is
 * the second buffer, which the update writes; *in what it reads: the committed buffer at the
 * state's first write in the step (the second buffer first takes the committed values where it
 * is stale outside [lo, hi): at most two intervals, normally none), the second buffer at a
 * later write (valid everywhere by then). Both point at the range's start (element x of the
 * matrix at [x - q->s0]); [lo, hi) must lie in the range. */
static int stage(real_exec *ex, gparam *q, int k, int64_t lo, int64_t hi, cudaStream_t s, float **in, float **out,
                 dm_err *err)
{
    float *cur = *state_cur(q, k), *nx = q->nxt[k];
    if (!cur || !nx || lo < q->s0 || hi > q->s1)
        return dm_err_set(err, "rank %d: an update of %s over [%lld, %lld) without its state's two buffers there (its "
                          "state: [%lld, %lld))", ex->rank, real_matrix_name(ex, q - G(ex)->p), (long long)lo,
                          (long long)hi, (long long)q->s0, (long long)q->s1);
    if (q->wr_hi[k] > q->wr_lo[k]) {
        *in = nx;
    } else {
        int64_t a = q->st_lo[k], b = q->st_hi[k], e1 = b < lo ? b : lo, s2 = a > hi ? a : hi;
        int64_t o = q->s0;
        if (a < e1) CU(cudaMemcpyAsync(nx + (a - o), cur + (a - o), (size_t)(e1 - a) * 4, cudaMemcpyDeviceToDevice, s));
        if (s2 < b) CU(cudaMemcpyAsync(nx + (s2 - o), cur + (s2 - o), (size_t)(b - s2) * 4, cudaMemcpyDeviceToDevice, s));
        *in = cur;
    }
    extend(&q->wr_lo[k], &q->wr_hi[k], lo, hi);
    *out = nx;
    return 0;
}

static int issue(real_exec *ex, int i, dm_err *err);

/* A skipped step's fetches that published its new weights (plan --publish: the first layers'
 * fetch after their updates, ops marked publish) wrote them into the working weights of every
 * rank they reached, which keeps no copy of what it does not update. end_step has put the
 * updaters' working weights back to their committed master, so the same fetches run again, on
 * every rank in list order (the ranks agreed to skip: the collectives match), and carry the
 * committed weights instead. Nothing when the program publishes nothing. */
static int republish(real_exec *ex, dm_err *err)
{
    gpu *g = G(ex);
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    cudaStream_t sc = g->st[DM_STREAM_COMPUTE];
    int any = 0;
    for (int i = 0; i < rp->n_ops; i++)
        if (rp->ops[i].publish) {
            OK(issue(ex, i, err)); /* (its deps' events are the step's, complete) */
            any = 1;
        }
    if (!any) return 0;
    for (int s = 0; s < DM_STREAM__COUNT; s++)
        if (s != DM_STREAM_COMPUTE) {
            CU(cudaEventRecord(g->flag_ev, g->st[s]));
            CU(cudaStreamWaitEvent(sc, g->flag_ev, 0));
        }
    CU(cudaEventRecord(g->step_e, sc));
    return gpu_wait(ex, g->step_e, "the skipped step's publishing fetches, run again", err);
}

/* The step's end (the streams idle), kept or skipped. Kept: the second buffer of every state
 * the step wrote becomes the committed one. Skipped: nothing committed was written; the bf16
 * working weights that this rank's updates wrote go back to bf16 of the committed master.
 * Either way a written state's second buffer now differs from the committed one only over what
 * the step wrote. */
static int end_step(real_exec *ex, int kept, dm_err *err)
{
    gpu *g = G(ex);
    cudaStream_t s = g->st[DM_STREAM_COMPUTE];
    for (int64_t i = 0; i < ex->n_mx; i++) {
        gparam *q = &g->p[i];
        if (!kept && q->wr_hi[ST_W32] > q->wr_lo[ST_W32])
            OK(ns_convert(q->W32 + (q->wr_lo[ST_W32] - q->s0), DM_DT_FP32, q->Wb + q->wr_lo[ST_W32], DM_DT_BF16,
                          q->wr_hi[ST_W32] - q->wr_lo[ST_W32], (ns_stream)s, err));
        if (kept) q->own_lo = q->wr_lo[ST_W32], q->own_hi = q->wr_hi[ST_W32];
        for (int k = 0; k < ST__N; k++) {
            if (q->wr_hi[k] <= q->wr_lo[k]) continue;
            if (kept) {
                float **c = state_cur(q, k), *t = *c;
                *c = q->nxt[k];
                q->nxt[k] = t;
            }
            q->st_lo[k] = q->wr_lo[k], q->st_hi[k] = q->wr_hi[k];
        }
    }
    CU(cudaStreamSynchronize(s));
    if (!kept) OK(republish(ex, err));
    note_mem(g);
    return 0;
}

static void gpu_memory(const real_exec *ex, double *est, double *peak_used, double *run)
{
    const gpu *g = G(ex);
    *est = g->est.total;
    *peak_used = g->mem_total - g->mem_free_min;
    *run = g->mem_free0 - g->mem_free_min;
}

/* An NS batch of m x n matrices may hold both orientations (rows x cols and its transpose);
 * each orientation runs as its own plan, in the batch's order. */
static int ns_op(real_exec *ex, const dm_op *op, cudaStream_t s, dm_err *err)
{
    gpu *g = G(ex);
    const ns_muon_params *mp = &ex->o.muon;
    if (op->n_params < 1) return 0;
    for (int pass = 0; pass < 2; pass++) {
        gparam *q0 = &g->p[op->params[0]];
        int64_t rows = pass == 0 ? q0->rows : q0->cols, cols = pass == 0 ? q0->cols : q0->rows;
        int cnt = 0;
        for (int j = 0; j < op->n_params; j++) {
            gparam *q = &g->p[op->params[j]];
            cnt += q->rows == rows && q->cols == cols;
        }
        if (!cnt || (pass == 1 && rows == cols)) continue;
        dm_dtype dt;
        ns_plan *pl = get_plan(ex, rows, cols, cnt, op->algo, &dt, err);
        if (!pl) return -1;
        char *in = ns_plan_input(pl), *outp = ns_plan_output(pl);
        size_t elt = dm_dtype_size(dt);
        int k = 0;
        for (int j = 0; j < op->n_params; j++) {
            gparam *q = &g->p[op->params[j]];
            if (q->rows != rows || q->cols != cols) continue;
            if (!q->mom)
                return dm_err_set(err, "rank %d: ns of %s, which has no Muon state on this rank", ex->rank,
                                  real_matrix_name(ex, op->params[j]));
            float *b_in, *b_out;
            OK(stage(ex, q, ST_MOM, 0, q->size, s, &b_in, &b_out, err));
            /* the reduced gradient this rank reads, checked as it is converted (an overflow in
             * the reduction shows here) */
            OK(sk_bf16_to_f32_check(q->G, g->g32, q->size, g->d_flag + 1, (int)(0x7fffffff - op->params[j]), s,
                                        err));
            OK(ns_muon_momentum(g->g32, b_in, b_out, in + (size_t)k * q->size * elt, dt, q->size,
                                (float)mp->momentum, mp->nesterov, (ns_stream)s, err));
            q->ns_out = outp + (size_t)k * q->size * elt;
            q->ns_dt = dt;
            k++;
        }
        OK(ns_plan_run(pl, (ns_stream)s, !op->eager, err)); /* eager: the PyTorch forms, no graph */
    }
    for (int j = 0; j < op->n_params; j++)
        if (!g->p[op->params[j]].ns_out)
            return dm_err_set(err, "rank %d: ns batch of %lld x %lld holds %s (%lld x %lld)", ex->rank, (long long)op->m,
                              (long long)op->n, real_matrix_name(ex, op->params[j]), (long long)g->p[op->params[j]].rows,
                              (long long)g->p[op->params[j]].cols);
    return 0;
}

static int update_op(real_exec *ex, const dm_op *op, cudaStream_t s, dm_err *err)
{
    gpu *g = G(ex);
    const ns_muon_params *mp = &ex->o.muon;
    const ns_adamw_params *ap = &ex->o.adamw;
    for (int j = 0; j < op->n_params; j++) {
        gparam *q = &g->p[op->params[j]];
        if (op->kind == DM_OP_MUON_UPDATE) {
            if (!q->ns_out || !q->W32)
                return dm_err_set(err, "rank %d: muon-update of %s without its ns", ex->rank,
                                  real_matrix_name(ex, op->params[j]));
            int64_t lo = q->rs_hi > q->rs_lo ? q->rs_lo : 0, hi = q->rs_hi > q->rs_lo ? q->rs_hi : q->size;
            float scale = (float)ns_muon_scale(mp, q->rows, q->cols);
            float *w_in, *w_out;
            OK(stage(ex, q, ST_W32, lo, hi, s, &w_in, &w_out, err));
            /* the new master and, in the same pass, its bf16 working copy */
            OK(ns_muon_apply(w_in + (lo - q->s0), w_out + (lo - q->s0), q->Wb + lo,
                             (char *)q->ns_out + lo * dm_dtype_size(q->ns_dt), q->ns_dt, hi - lo, (float)mp->lr,
                             (float)mp->weight_decay, scale, (ns_stream)s, err));
            q->ns_out = NULL;
        } else {
            if (q->gr_hi <= q->gr_lo) continue;
            if (!q->m1 || !q->W32)
                return dm_err_set(err, "rank %d: adamw of %s without state", ex->rank, real_matrix_name(ex, op->params[j]));
            int64_t lo = q->gr_lo, n = q->gr_hi - q->gr_lo;
            float *w_in, *w_out, *m_in, *m_out, *v_in, *v_out;
            OK(stage(ex, q, ST_W32, lo, lo + n, s, &w_in, &w_out, err));
            OK(stage(ex, q, ST_M1, lo, lo + n, s, &m_in, &m_out, err));
            OK(stage(ex, q, ST_M2, lo, lo + n, s, &v_in, &v_out, err));
            float *g32 = op->stream == DM_STREAM_COMPUTE_LO && g->g32_lo ? g->g32_lo : g->g32;
            OK(sk_bf16_to_f32_check(q->G + lo, g32, n, g->d_flag + 1, (int)(0x7fffffff - op->params[j]), s, err));
            int64_t o = lo - q->s0; /* in the states' range */
            OK(ns_adamw(w_in + o, w_out + o, q->Wb + lo, g32, m_in + o, m_out + o, v_in + o, v_out + o, n,
                        (float)ap->lr, (float)ap->beta1, (float)ap->beta2, (float)ap->eps, (float)ap->weight_decay,
                        (int)(ex->adam_t + 1), (ns_stream)s, err));
        }
    }
    return 0;
}

static void extend(int64_t *lo, int64_t *hi, int64_t a, int64_t b)
{
    if (*hi <= *lo) *lo = a, *hi = b;
    else {
        if (a < *lo) *lo = a;
        if (b > *hi) *hi = b;
    }
}

/* copy the flat range [lo, hi) of op's params (weights or gradients) to/from buf */
static int flat_move(real_exec *ex, const dm_op *op, int weights, int64_t lo, int64_t hi, bf16 *buf, int to_buf,
                     cudaStream_t s, dm_err *err)
{
    int64_t base = 0;
    for (int a = 0; a < op->n_params && base < hi; a++) {
        gparam *q = &G(ex)->p[op->params[a]];
        int64_t x = lo > base ? lo : base, y = hi < base + q->size ? hi : base + q->size;
        if (x < y) {
            bf16 *pp = (weights ? q->Wb : q->G) + (x - base), *bp = buf + (x - lo);
            CU(cudaMemcpyAsync(to_buf ? bp : pp, to_buf ? pp : bp, (size_t)(y - x) * 2, cudaMemcpyDeviceToDevice, s));
        }
        base += q->size;
    }
    return 0;
}

static int coll_op(real_exec *ex, int i, const dm_op *op, cudaStream_t s, dm_err *err)
{
    gpu *g = G(ex);
    ncclComm_t c = g->comm[op->group * DM_STREAM__COUNT + op->stream];
    const dm_group *gr = &ex->prog->groups[op->group];
    int n = gr->n, me = real_group_index(ex->prog, op->group, ex->rank), root = -1;
    if (!c || me < 0) return dm_err_set(err, "rank %d op %d: no communicator for group %d", ex->rank, i, op->group);
    if (op->root >= 0) root = real_group_index(ex->prog, op->group, op->root);
    int64_t total = 0;
    for (int a = 0; a < op->n_params; a++) total += g->p[op->params[a]].size;
    if (!op->n_params) return 0;
    /* in place on the arenas (the params' range, alignment gaps included) unless staged
     * (core/arena.h) */
    int64_t start = 0, span = 0;
    dm_arena_fit fit = dm_arena_fit_of(ex->model, ex->mx, g->off, op, &start, &span);
    int staged = real_staged(ex->prog, op, fit, span), in_span = !staged && fit == DM_ARENA_SPAN;
    bf16 *buf = g->cbuf[op->stream];
    const dm_coll *k = dm_coll_of(op->kind); /* the NCCL call and its size convention */
    switch (op->kind) {
    case DM_OP_ALLREDUCE:
    case DM_OP_REDUCE: {
        int64_t lo = 0, hi = total; /* a part (program.h): only that flat range */
        if (op->parts > 1) dm_flat_shard(total, op->parts, op->part, &lo, &hi);
        bf16 *b = !staged ? g->arena_g + start + lo : buf;
        if (staged) OK(flat_move(ex, op, 0, lo, hi, buf, 1, s, err));
        /* across gaps (parts <= 1, lo 0): the arena's range, gaps included */
        NC((ncclResult_t)real_nccl_call(k, b, b, (size_t)(in_span ? span : hi - lo), DM_DT_BF16, root, c, s));
        if (staged && (op->kind == DM_OP_ALLREDUCE || me == root)) OK(flat_move(ex, op, 0, lo, hi, buf, 0, s, err));
        if (op->kind == DM_OP_ALLREDUCE || me == root) {
            int64_t base = 0;
            for (int a = 0; a < op->n_params; a++) {
                gparam *q = &g->p[op->params[a]];
                int64_t x = lo > base ? lo : base, y = hi < base + q->size ? hi : base + q->size;
                if (op->parts <= 1) q->gr_lo = 0, q->gr_hi = q->size;
                else if (x < y) extend(&q->gr_lo, &q->gr_hi, x - base, y - base);
                if (op->parts > 1 && op->kind == DM_OP_REDUCE) q->rs_lo = q->rs_hi = 0; /* a whole update */
                base += q->size;
            }
        }
        break;
    }
    case DM_OP_BROADCAST: {
        int64_t lo = 0, hi = total;
        if (op->parts > 1) dm_flat_shard(total, op->parts, op->part, &lo, &hi);
        bf16 *b = !staged ? g->arena_w + start + lo : buf;
        if (staged && me == root) OK(flat_move(ex, op, 1, lo, hi, buf, 1, s, err));
        NC((ncclResult_t)real_nccl_call(k, b, b, (size_t)(in_span ? span : hi - lo), DM_DT_BF16, root, c, s));
        if (staged && me != root) OK(flat_move(ex, op, 1, lo, hi, buf, 0, s, err));
        break;
    }
    case DM_OP_REDUCESCATTER: {
        int64_t sh = (total + n - 1) / n, lo, hi;
        dm_flat_shard(total, n, me, &lo, &hi);
        if (!staged) { /* NCCL's in-place form: the params exact, total = n sh; or one rank, the span */
            bf16 *b = g->arena_g + start;
            NC((ncclResult_t)real_nccl_call(k, b, b + (size_t)me * sh, (size_t)span, DM_DT_BF16, root, c, s));
        } else {
            OK(flat_move(ex, op, 0, 0, total, buf, 1, s, err));
            if (sh * n > total) CU(cudaMemsetAsync(buf + total, 0, (size_t)(sh * n - total) * 2, s));
            NC((ncclResult_t)real_nccl_call(k, buf, buf + (size_t)me * sh, (size_t)(sh * n), DM_DT_BF16, root, c, s));
            if (lo < hi) OK(flat_move(ex, op, 0, lo, hi, buf + (size_t)me * sh, 0, s, err));
        }
        int64_t base = 0;
        for (int a = 0; a < op->n_params; a++) {
            gparam *q = &g->p[op->params[a]];
            int64_t x = lo > base ? lo : base, y = hi < base + q->size ? hi : base + q->size;
            if (x < y) q->rs_lo = x - base, q->rs_hi = y - base, q->gr_lo = x - base, q->gr_hi = y - base;
            base += q->size;
        }
        break;
    }
    case DM_OP_ALLGATHER: {
        int64_t S = ex->facts.ag_slot[op->coll];
        int grad = op->payload == DM_PAYLOAD_GRADS;
        if (!staged) { /* one rank: the gathered buffer is its own (the span, gaps included) */
            bf16 *b = (grad ? g->arena_g : g->arena_w) + start;
            NC((ncclResult_t)real_nccl_call(k, b, b, (size_t)span, DM_DT_BF16, root, c, s));
            break;
        }
        {
            const real_range *rg = ex->facts.ag[op->coll] + (size_t)me * op->n_params;
            int64_t off = 0;
            for (int a = 0; a < op->n_params; a++) {
                if (rg[a].hi <= rg[a].lo) continue;
                gparam *q = &g->p[op->params[a]];
                CU(cudaMemcpyAsync(buf + (size_t)me * S + off, (grad ? q->G : q->Wb) + rg[a].lo,
                                   (size_t)(rg[a].hi - rg[a].lo) * 2, cudaMemcpyDeviceToDevice, s));
                off += rg[a].hi - rg[a].lo;
            }
        }
        NC((ncclResult_t)real_nccl_call(k, buf + (size_t)me * S, buf, (size_t)(S * n), DM_DT_BF16, root, c, s));
        for (int j = 0; j < n; j++) {
            if (j == me) continue;
            const real_range *rg = ex->facts.ag[op->coll] + (size_t)j * op->n_params;
            int64_t off = 0;
            for (int a = 0; a < op->n_params; a++) {
                if (rg[a].hi <= rg[a].lo) continue;
                gparam *q = &g->p[op->params[a]];
                CU(cudaMemcpyAsync((grad ? q->G : q->Wb) + rg[a].lo, buf + (size_t)j * S + off,
                                   (size_t)(rg[a].hi - rg[a].lo) * 2, cudaMemcpyDeviceToDevice, s));
                off += rg[a].hi - rg[a].lo;
                if (grad) extend(&q->gr_lo, &q->gr_hi, rg[a].lo, rg[a].hi);
            }
        }
        break;
    }
    default: break;
    }
    return 0;
}

static int issue(real_exec *ex, int i, dm_err *err)
{
    gpu *g = G(ex);
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    int os = dm_run_stream(ex->nranks, op->stream); /* core/program.h: one rank, one stream for collectives */
    cudaStream_t s = g->st[os];
    cublasHandle_t h = g->blas[os];
    for (int d = 0; d < op->n_deps; d++) {
        const dm_op *dop = &ex->prog->ranks[ex->rank].ops[op->deps[d]];
        if (dm_run_stream(ex->nranks, dop->stream) != os) CU(cudaStreamWaitEvent(s, g->ev_e[op->deps[d]], 0));
    }
    CU(cudaEventRecord(g->ev_s[i], s));
    switch (op->kind) {
        case DM_OP_FORWARD:
        case DM_OP_BACKWARD: {
            OK(layer_op(ex, op, s, h, err));
            if (op->kind == DM_OP_FORWARD) break;
            int64_t *pl;
            int np, owned, rc = 0;
            if (real_op_params(ex, op, &pl, &np, &owned, err) < 0) return -1;
            for (int a = 0; a < np && rc == 0; a++) rc = backward_done(ex, pl[a], &g->p[pl[a]], s, err);
            if (owned) free(pl);
            if (rc) return -1;
            break;
        }
        case DM_OP_NS: OK(ns_op(ex, op, s, err)); break;
        case DM_OP_MUON_UPDATE:
        case DM_OP_ADAMW: OK(update_op(ex, op, s, err)); break;
        case DM_OP_WAIT: break;
        default: OK(coll_op(ex, i, op, s, err)); break;
        }
    CU(cudaEventRecord(g->ev_e[i], s));
    return 0;
}

/* Diagnostics: with DMUON_CLOCK_TRACE=FILE in the environment, the SM clock is read on the GPU
 * from the second step's start to the run's end (kernels/clock_probe.h: every
 * DMUON_CLOCK_PERIOD_US, default 20 us) and written to FILE with each step's start on the same
 * timeline; tools/clock_trace.py puts it beside the ops of the trace (--trace) and the kernels of
 * DMUON_KERNEL_TIMES. From the second step: the first makes the NS plans and buffers. The sampler
 * ends after 30 s at most (a call that synchronizes the device waits for it: the run stays
 * correct, only that slow). One process, one rank; nothing of it in the normal path. */
static int cp_step(real_exec *ex, cudaStream_t sc, dm_err *err)
{
    if (!clock_trace_path() || ex->step < 1) return 0;
    const char *per = getenv("DMUON_CLOCK_PERIOD_US");
    OK(cp_start(per && atof(per) > 0 ? atof(per) : 20, 30, err));
    return cp_mark(sc, err);
}

static int gpu_step_begin(real_exec *ex, dm_err *err)
{
    gpu *g = G(ex);
    cudaStream_t sc = g->st[DM_STREAM_COMPUTE];
    for (int64_t i = 0; i < ex->n_mx; i++) {
        gparam *q = &g->p[i];
        q->rs_lo = q->rs_hi = q->gr_lo = q->gr_hi = 0;
        for (int k = 0; k < ST__N; k++) q->wr_lo[k] = q->wr_hi[k] = 0;
        q->ns_out = NULL;
    }
    CU(cudaMemsetAsync(g->d_loss, 0, sizeof(float), sc));
    CU(cudaMemsetAsync(g->d_flag, 0, 2 * sizeof(int), sc));
    CU(cudaStreamSynchronize(sc));
    return 0;
}

/* Issue every op in list order (streams ordered by events only), then wait for the step's end
 * with the timeout; the ops' times come from their events. */
static int gpu_step_run(real_exec *ex, double t0, real_step_local *out, dm_err *err)
{
    gpu *g = G(ex);
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    cudaStream_t sc = g->st[DM_STREAM_COMPUTE];
    (void)t0;
    /* the GPU is idle here (step_begin synchronized), so it reaches step_s as the host records
     * it: the host's issue times below are on the ops' clock to within a launch latency */
    double h = dm_clock_us();
    CU(cudaEventRecord(g->step_s, sc));
    OK(cp_step(ex, sc, err));
    for (int s = 0; s < DM_STREAM__COUNT; s++)
        if (s != DM_STREAM_COMPUTE) CU(cudaStreamWaitEvent(g->st[s], g->step_s, 0));
    for (int i = 0; i < rp->n_ops; i++) {
        ex->op_h0[i] = dm_clock_us() - h;
        OK(issue(ex, i, err));
        ex->op_h1[i] = dm_clock_us() - h;
    }
    for (int s = 0; s < DM_STREAM__COUNT; s++)
        if (s != DM_STREAM_COMPUTE) {
            CU(cudaEventRecord(g->flag_ev, g->st[s]));
            CU(cudaStreamWaitEvent(sc, g->flag_ev, 0));
        }
    CU(cudaMemcpyAsync(g->h_loss, g->d_loss, sizeof(float), cudaMemcpyDeviceToHost, sc));
    CU(cudaMemcpyAsync(g->h_flag, g->d_flag, 2 * sizeof(int), cudaMemcpyDeviceToHost, sc));
    CU(cudaEventRecord(g->step_e, sc));
    OK(gpu_wait(ex, g->step_e, "the end of the step", err));
    kt_flush();
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, g->step_s, g->step_e));
    out->step_us = ms * 1e3;
    for (int i = 0; i < rp->n_ops; i++) {
        float a = 0, b = 0;
        CU(cudaEventElapsedTime(&a, g->step_s, g->ev_s[i]));
        CU(cudaEventElapsedTime(&b, g->ev_s[i], g->ev_e[i]));
        ex->op_t0[i] = a * 1e3;
        ex->op_dur[i] = b * 1e3;
    }
    ht_write(ex);
    /* the device flags hold INT_MAX - param (the first bad param wins the max), 0 for none */
    out->loss = *g->h_loss;
    out->bad_local = g->h_flag[0] ? 0x7fffffff - g->h_flag[0] : -1;
    out->bad_reduced = g->h_flag[1] ? 0x7fffffff - g->h_flag[1] : -1;
    return 0;
}

/* ---- state access (real_priv.h): checkpoints and real_exec_weights, between steps ---------- */

static void gpu_param_info(const real_exec *ex, int64_t i, real_pinfo *pi)
{
    const gparam *q = &G(ex)->p[i];
    *pi = (real_pinfo){q->size, q->own_lo, q->own_hi, q->mom != NULL, q->m1 != NULL};
}

static int gpu_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err)
{
    gpu *g = G(ex);
    gparam *q = &g->p[i];
    cudaStream_t s = g->st[DM_STREAM_COMPUTE];
    if (hi <= lo) return 0;
    CU(cudaDeviceSynchronize());
    /* the working copy, then the master over the range this rank owns */
    OK(ns_convert(q->Wb + lo, DM_DT_BF16, g->g32, DM_DT_FP32, hi - lo, (ns_stream)s, err));
    CU(cudaMemcpyAsync(dst, g->g32, (size_t)(hi - lo) * 4, cudaMemcpyDeviceToHost, s));
    int64_t a = q->own_lo > lo ? q->own_lo : lo, b = q->own_hi < hi ? q->own_hi : hi;
    if (a < q->s0) a = q->s0;
    if (b > q->s1) b = q->s1;
    if (q->W32 && a < b)
        CU(cudaMemcpyAsync(dst + (a - lo), q->W32 + (a - q->s0), (size_t)(b - a) * 4, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    return 0;
}

/* A state array over [s0, s1) to (to_host) or from a whole host array; zeros outside the range
 * on the way out. */
static int state_io(real_exec *ex, gparam *q, float *dev, float *host, int to_host, cudaStream_t s, dm_err *err)
{
    size_t n = (size_t)(q->s1 - q->s0) * 4;
    if (!to_host) {
        CU(cudaMemcpyAsync(dev, host + q->s0, n, cudaMemcpyHostToDevice, s));
        return 0;
    }
    memset(host, 0, (size_t)q->size * 4);
    CU(cudaMemcpyAsync(host + q->s0, dev, n, cudaMemcpyDeviceToHost, s));
    return 0;
}

static int gpu_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err)
{
    gpu *g = G(ex);
    gparam *q = &g->p[i];
    cudaStream_t s = g->st[DM_STREAM_COMPUTE];
    if (W) OK(gpu_param_weights(ex, i, 0, q->size, W, err));
    if (mom && q->mom) OK(state_io(ex, q, q->mom, mom, 1, s, err));
    if (m1 && q->m1) {
        OK(state_io(ex, q, q->m1, m1, 1, s, err));
        OK(state_io(ex, q, q->m2, m2, 1, s, err));
    }
    CU(cudaStreamSynchronize(s));
    return 0;
}

/* The master takes W over its range and the working copy bf16(W) whole: on the owned range that
 * is what the last update wrote (the same conversion), elsewhere W holds the working copy exactly. */
static int gpu_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                         int64_t own_lo, int64_t own_hi, dm_err *err)
{
    gpu *g = G(ex);
    gparam *q = &g->p[i];
    cudaStream_t s = g->st[DM_STREAM_COMPUTE];
    CU(cudaDeviceSynchronize());
    if (W) {
        CU(cudaMemcpyAsync(g->g32, W, (size_t)q->size * 4, cudaMemcpyHostToDevice, s));
        OK(ns_convert(g->g32, DM_DT_FP32, q->Wb, DM_DT_BF16, q->size, (ns_stream)s, err));
        if (q->W32)
            CU(cudaMemcpyAsync(q->W32, g->g32 + q->s0, (size_t)(q->s1 - q->s0) * 4, cudaMemcpyDeviceToDevice, s));
    }
    if (mom && q->mom) OK(state_io(ex, q, q->mom, (float *)mom, 0, s, err));
    if (m1 && q->m1) {
        OK(state_io(ex, q, q->m1, (float *)m1, 0, s, err));
        OK(state_io(ex, q, q->m2, (float *)m2, 0, s, err));
    }
    CU(cudaStreamSynchronize(s));
    q->own_lo = own_lo;
    q->own_hi = own_hi;
    state_stale(q);
    return 0;
}

const real_backend_ops real_backend_gpu = {
    .name = "gpu",
    .precheck = gpu_precheck,
    .create = gpu_create,
    .destroy = gpu_destroy,
    .step_begin = gpu_step_begin,
    .step_run = gpu_step_run,
    .step_end = end_step,
    .abort = gpu_abort,
    .memory = gpu_memory,
    .param_info = gpu_param_info,
    .param_weights = gpu_param_weights,
    .param_get = gpu_param_get,
    .param_put = gpu_param_put,
};
