/* ns_small.cu: the fused Newton-Schulz (ns_mma.h): the whole direct or Gram NS of a matrix or of
 * a batch of same-shape matrices in ONE persistent kernel, for the shapes where a plan of ~16-21
 * dependent launches is bound by launch gaps (~3-4 us per graph node) rather than by work.
 *
 * The program is a list of ops (ns_mma.h) built here from the same products, coefficients,
 * restarts and order as the plan's step list (ns_cuda.cu build_direct / build_gram): the
 * sum-of-squares partials first; the normalization folded into the first products' scalars when
 * the input is in the iteration dtype (else one normalizing conversion); Q = Z + aI as a second
 * output of the product that makes Z. Ops are grouped into phases (independent ops share one);
 * every CTA takes the units (output tiles x split-K pieces x batch entries) of a phase in turn,
 * then waits at a grid barrier. The launch is cooperative, so the driver guarantees that all
 * CTAs are resident together (the barrier waits for every one of them); the grid is at most the
 * number of CTAs that fit on the device at once. Data written in one phase and read in a later
 * one goes through L2 (cp.async.cg, ld.cg) past the barrier's fences. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_kern.cuh"
#include "ns_mma.cuh"

struct nsm_fused {
    nsm_op *ops;
    int n_ops, cap;
    nsm_op *ops_dev;
    float *partial, *ws;
    unsigned *cnt, *bar;
    int grid, threads, smem, n_barriers;
    nsm_tile tile;
    dm_dtype dt;
    unsigned long long *prof; /* nsm_fused_profile's, NULL otherwise */
    int prof_stride;
    double flops_exec, flops_full, flops_nominal;
};

/* ---- the grid barrier --------------------------------------------------------------------- */

/* One arrival counter whose top bit flips when every CTA has arrived (cooperative groups'
 * grid sync): CTA 0 adds 2^31 - (grid - 1), the others 1, so the count returns to its low bits
 * and the top bit flips once per barrier; each CTA spins until it differs from the value it saw
 * when it arrived. __syncthreads, then ONE fence by thread 0 before its arrival (cumulative: it
 * orders the CTA's writes that bar.sync made visible to it) and one after the spin. Run 9's
 * version fenced in every thread, read a generation word and fenced again before arriving, and
 * the last CTA reset the count: ~2 more dependent L2 round trips per phase. t (profiling, NULL
 * normally): thread 0's clock before arriving and after leaving. */
__device__ __forceinline__ void grid_barrier(unsigned *bar, unsigned long long *t)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        if (t) t[0] = clock64();
        unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        __threadfence();
        unsigned old = atomicAdd(bar, nb);
        volatile unsigned *v = bar;
        while (((old ^ *v) & 0x80000000u) == 0) {
        }
        __threadfence();
        if (t) t[1] = clock64();
    }
    __syncthreads();
}

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* prof (NULL normally): per CTA prof_stride words: its clock and the global time (ns) at the
 * start, the global time at the end, then per phase the clock when its work was done and when
 * it left the barrier after it (nsm_fused_profile reads them). */
template <class C, typename T>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
    k_fused(const nsm_op *ops, int n_ops, unsigned *bar, unsigned long long *prof, int prof_stride)
{
    extern __shared__ __align__(16) uint16_t smem[];
    __shared__ float sh[34];
    unsigned long long *pr = prof ? prof + (int64_t)blockIdx.x * prof_stride : NULL;
    if (pr && threadIdx.x == 0) pr[0] = clock64(), pr[1] = global_ns();
    int o = 0, ph = 0;
    while (o < n_ops) {
        int o2 = o;
        while (o2 < n_ops - 1 && !ops[o2].barrier_after) o2++;
        int64_t total = 0;
        for (int k = o; k <= o2; k++) total += ops[k].units;
        for (int64_t u = blockIdx.x; u < total; u += gridDim.x) {
            int k = o;
            int64_t lu = u;
            while (lu >= ops[k].units) lu -= ops[k].units, k++;
            const nsm_op &op = ops[k];
            if (op.kind == NSM_GEMM) nsm::gemm_unit<C, T>(op, lu, smem, sh);
            else if (op.kind == NSM_SUMSQ) nsm::sumsq_unit(op, lu, sh);
            else nsm::norm_unit(op, lu, sh);
        }
        o = o2 + 1;
        if (o < n_ops) {
            grid_barrier(bar, pr ? pr + 3 + 2 * ph : NULL);
        } else if (pr) {
            __syncthreads();
            if (threadIdx.x == 0) pr[3 + 2 * ph] = pr[4 + 2 * ph] = clock64(), pr[2] = global_ns();
        }
        ph++;
    }
}

/* ---- building the program ----------------------------------------------------------------- */

static nsm_op *push(nsm_fused *f, dm_err *err)
{
    if (f->n_ops == f->cap) {
        int nc = f->cap ? 2 * f->cap : 32;
        nsm_op *n = (nsm_op *)dm_realloc(f->ops, sizeof(nsm_op) * (size_t)nc, err);
        if (!n) return NULL;
        f->ops = n;
        f->cap = nc;
    }
    return &f->ops[f->n_ops++];
}

/* Append an op and run the statements on it (op_). */
#define PUSH(...)                                                                             \
    do {                                                                                      \
        nsm_op *op_ = push(f, err);                                                           \
        if (!op_) return -1;                                                                  \
        __VA_ARGS__;                                                                          \
    } while (0)

/* An elementwise op over the input (NSM_SUMSQ, or NSM_NORM into xbuf[0]). */
static int push_elem(nsm_fused *f, nsm_kind kind, const nsm_fused_args *a, int64_t len, dm_err *err)
{
    nsm_op *op = push(f, err);
    if (!op) return -1;
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->batch = a->g.batch;
    op->barrier_after = 1;
    op->x = a->in;
    op->dt_x = a->io;
    op->len = len;
    if (kind == NSM_NORM) {
        op->y = a->xbuf[0];
        op->dt = a->g.dt;
    }
    return 0;
}

static int build_direct(nsm_fused *f, const nsm_fused_args *a, const void *x0, int raw, dm_err *err)
{
    const nsm_geom *g = &a->g;
    const void *x = x0;
    void *A = a->sbuf[0], *B = a->sbuf[1];
    for (int it = 0; it < a->coeffs->n; it++) {
        float ca = (float)a->coeffs->a[it], cb = (float)a->coeffs->b[it], cc = (float)a->coeffs->c[it];
        int last = it == a->coeffs->n - 1;
        void *dst = last ? a->out : x == a->xbuf[0] ? a->xbuf[1] : a->xbuf[0];
        PUSH(nsm_op_syrk(op_, g, x, A, 1.f); op_->alpha_pow = raw ? 2 : 0);
        PUSH(nsm_op_mm(op_, g, A, A, cc, cb, A, 0.f, B, 1));
        PUSH(nsm_op_apply(op_, g, B, x, 1.f, ca, x, dst, last ? a->io : g->dt); op_->alpha_pow = op_->beta_pow = raw);
        x = dst;
        raw = 0;
    }
    return 0;
}

static int build_gram(nsm_fused *f, const nsm_fused_args *a, const void *x0, int raw, dm_err *err)
{
    const nsm_geom *g = &a->g;
    const void *x = x0;
    void *xn = x0 == a->xbuf[0] ? a->xbuf[1] : a->xbuf[0];
    void *R = a->sbuf[0], *Rn = a->sbuf[1], *Z = a->sbuf[2], *RZ = a->sbuf[3], *Q = a->sbuf[4], *Qn = a->sbuf[5], *t;
    int have_q = 0, n_it = a->coeffs->n;
    PUSH(nsm_op_syrk(op_, g, x, R, 1.f); op_->alpha_pow = raw ? 2 : 0);
    for (int it = 0; it < n_it; it++) {
        float ca = (float)a->coeffs->a[it], cb = (float)a->coeffs->b[it], cc = (float)a->coeffs->c[it];
        if (it > 0 && (a->restarts >> it & 1u) && have_q) { /* X <- Q X, R = X X^T, Q reset */
            PUSH(nsm_op_apply(op_, g, Q, x, 1.f, 0.f, NULL, xn, g->dt); op_->alpha_pow = raw);
            const void *old = x;
            x = xn;
            xn = old == a->in ? (x == a->xbuf[0] ? a->xbuf[1] : a->xbuf[0]) : (void *)old; /* never the input */
            raw = 0;
            PUSH(nsm_op_syrk(op_, g, x, R, 1.f));
            have_q = 0;
        }
        int need_r = it < n_it - 1 && !(a->restarts >> (it + 1) & 1u);
        if (!have_q && !need_r) { /* Z only makes Q: Q = c R R + b R + a I directly */
            PUSH(nsm_op_mm(op_, g, R, R, cc, cb, R, ca, Q, 1));
            have_q = 1;
            continue;
        }
        PUSH(nsm_op_mm(op_, g, R, R, cc, cb, R, 0.f, Z, 1);
             if (!have_q) op_->d2 = Q, op_->gamma2 = ca); /* and Q = Z + aI when Q starts here */
        int upd_q = have_q, n_phase = 0;
        /* R <- P R P (P = Z + aI) as R Z = R P, then Z (R Z) + a (R Z): a congruence, so R stays
         * symmetric to rounding whatever P's rounding error (R P is symmetric only in exact
         * arithmetic; mirroring its lower tiles costs nothing measurable, tools/ns_mma_emu.py).
         * Q <- P Q with every tile: Q = P_k ... P_1, applied in that order. Run 9 computed
         * Z (R P)^T + a R P and Q P, P_1 ... P_k X: 0.03-0.34 off (NOTES.md). */
        if (need_r) PUSH(nsm_op_mm(op_, g, R, Z, 1.f, ca, R, 0.f, RZ, 1); n_phase++);
        if (upd_q) PUSH(nsm_op_mm(op_, g, Z, Q, 1.f, ca, Q, 0.f, Qn, 0); n_phase++);
        if (n_phase == 2) f->ops[f->n_ops - 2].barrier_after = 0; /* R Z and P Q: one phase */
        if (need_r) {
            PUSH(nsm_op_mm(op_, g, Z, RZ, 1.f, ca, RZ, 0.f, Rn, 1));
            t = R, R = Rn, Rn = t;
        }
        if (upd_q) t = Q, Q = Qn, Qn = t;
        have_q = 1;
    }
    PUSH(nsm_op_apply(op_, g, Q, x, 1.f, 0.f, NULL, a->out, a->io); op_->alpha_pow = raw);
    return 0;
}

void nsm_fused_destroy(nsm_fused *f)
{
    if (!f) return;
    free(f->ops);
    cudaFree(f->ops_dev);
    cudaFree(f->partial);
    cudaFree(f->ws);
    cudaFree(f->cnt);
    cudaFree(f->bar);
    cudaFree(f->prof);
    free(f);
}

template <class C, typename T> static const void *fused_fn() { return (const void *)k_fused<C, T>; }

static const void *kernel_for(nsm_tile t, dm_dtype dt, int *threads, int *smem)
{
    int bf = dt == DM_DT_BF16;
    if (t == NSM_T32) {
        *threads = nsm::cfg32::THREADS;
        *smem = nsm::cfg32::SMEM_BYTES;
        return bf ? fused_fn<nsm::cfg32, __nv_bfloat16>() : fused_fn<nsm::cfg32, __half>();
    }
    if (t == NSM_T128) {
        *threads = nsm::cfg128::THREADS;
        *smem = nsm::cfg128::SMEM_BYTES;
        return bf ? fused_fn<nsm::cfg128, __nv_bfloat16>() : fused_fn<nsm::cfg128, __half>();
    }
    *threads = nsm::cfg64::THREADS;
    *smem = nsm::cfg64::SMEM_BYTES;
    return bf ? fused_fn<nsm::cfg64, __nv_bfloat16>() : fused_fn<nsm::cfg64, __half>();
}

int nsm_fused_create(const nsm_fused_args *a, nsm_fused **out, dm_err *err)
{
    *out = NULL;
    const nsm_geom *g = &a->g;
    if (!nsm_shape_ok(g->m, g->n) || g->batch < 1 || (a->tile != NSM_T32 && a->tile != NSM_T64 && a->tile != NSM_T128) ||
        (g->dt != DM_DT_BF16 && g->dt != DM_DT_FP16) || a->coeffs->n < 1)
        return dm_err_set(err, "nsm_fused_create: %lldx%lld batch %d not supported", (long long)g->m,
                          (long long)g->n, g->batch);
    nsm_fused *f = (nsm_fused *)dm_calloc(1, sizeof *f, err);
    if (!f) return -1;
    f->tile = a->tile;
    f->dt = g->dt;
    int64_t len = g->m * g->n;
    int nchunk = (int)(len / 16384);
    nchunk = nchunk < 1 ? 1 : nchunk > 64 ? 64 : nchunk;
    int dev = 0, n_sms = 0, per_sm = 0;
    const void *fn = kernel_for(a->tile, g->dt, &f->threads, &f->smem);
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, f->smem);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, f->threads, (size_t)f->smem);
    if (e == cudaSuccess) e = cudaMalloc((void **)&f->partial, sizeof(float) * (size_t)nchunk * g->batch);
    if (e == cudaSuccess) e = cudaMalloc((void **)&f->bar, sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemset(f->bar, 0, sizeof(unsigned));
    if (e != cudaSuccess || per_sm < 1) {
        dm_err_set(err, "nsm_fused_create: %s", e != cudaSuccess ? cudaGetErrorString(e) : "kernel does not fit an SM");
        cudaGetLastError();
        goto fail;
    }
    {
        /* DM_NSM_MAX_CTAS=N (read at each create; a diagnostic to time on a GPU): at most N CTAs,
         * so a small matrix's products run without split-K on few SMs and each grid barrier
         * waits for fewer CTAs (N = 1: the whole NS of a matrix in one CTA) */
        const char *cap_env = getenv("DM_NSM_MAX_CTAS");
        int cap = cap_env ? atoi(cap_env) : 0;
        const int resident = cap > 0 && cap < per_sm * n_sms ? cap : per_sm * n_sms;
        int fold = a->io == g->dt, rc;
        const void *x0 = fold ? a->in : a->xbuf[0];
        /* the sum of squares, then (input not in the iteration dtype) X0 = G / (||G|| + eps) */
        if (push_elem(f, NSM_SUMSQ, a, len, err) || (!fold && push_elem(f, NSM_NORM, a, len, err))) goto fail;
        f->ops[0].partial_out = f->partial;
        rc = a->algo == DM_NS_GRAM ? build_gram(f, a, x0, fold, err) : build_direct(f, a, x0, fold, err);
        if (rc) goto fail;
        /* scale inputs, split-K where a product has fewer tiles than the grid has CTAs, units */
        size_t ws_floats = 0, n_cnt = 0;
        int64_t max_units = 1;
        for (int i = 0; i < f->n_ops; i++) {
            nsm_op *q = &f->ops[i];
            q->partial = f->partial;
            q->nchunk = nchunk;
            q->eps = a->eps;
            if (q->kind == NSM_GEMM) {
                size_t wf, nc; /* counted per phase below */
                nsm_op_split(q, a->tile, resident, &wf, &nc);
                double full = 2.0 * q->M * q->N * q->K * q->batch;
                f->flops_exec += nsm_op_flops(q);
                f->flops_full += full;
                f->flops_nominal += q->sym ? full / 2 : full;
            } else {
                nsm_op_finish(q, a->tile);
            }
        }
        /* per phase: the largest bounds the useful grid; split-K scratch is reused from phase to
         * phase (the counters are back at 0 and the pieces summed by then) but two split ops of
         * one phase get regions of their own; offsets kept in ws/cnt until the allocation */
        for (int i = 0; i < f->n_ops;) {
            int64_t u = 0;
            size_t w_off = 0, c_off = 0;
            int j = i;
            for (; j < f->n_ops; j++) {
                nsm_op *q = &f->ops[j];
                u += q->units;
                if (q->kind == NSM_GEMM && q->splits > 1) {
                    q->ws = (float *)(uintptr_t)w_off;
                    q->cnt = (unsigned *)(uintptr_t)c_off;
                    w_off += (size_t)q->batch * q->tiles * q->splits * q->edge * q->edge;
                    c_off += (size_t)q->batch * q->tiles;
                }
                if (q->barrier_after || j == f->n_ops - 1) break;
            }
            max_units = u > max_units ? u : max_units;
            ws_floats = w_off > ws_floats ? w_off : ws_floats;
            n_cnt = c_off > n_cnt ? c_off : n_cnt;
            f->n_barriers += j + 1 < f->n_ops;
            i = j + 1;
        }
        f->grid = (int)(max_units < resident ? max_units : resident);
        if (ws_floats) e = cudaMalloc((void **)&f->ws, ws_floats * sizeof(float));
        if (e == cudaSuccess && n_cnt) e = cudaMalloc((void **)&f->cnt, n_cnt * sizeof(unsigned));
        if (e == cudaSuccess && n_cnt) e = cudaMemset(f->cnt, 0, n_cnt * sizeof(unsigned));
        for (int i = 0; i < f->n_ops; i++) {
            nsm_op *q = &f->ops[i];
            if (q->kind == NSM_GEMM && q->splits > 1) {
                q->ws = f->ws + (uintptr_t)q->ws;
                q->cnt = f->cnt + (uintptr_t)q->cnt;
            } else {
                q->ws = NULL;
                q->cnt = NULL;
            }
        }
        if (e == cudaSuccess) e = cudaMalloc((void **)&f->ops_dev, sizeof(nsm_op) * (size_t)f->n_ops);
        if (e == cudaSuccess)
            e = cudaMemcpy(f->ops_dev, f->ops, sizeof(nsm_op) * (size_t)f->n_ops, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            dm_err_set(err, "nsm_fused_create: scratch: %s", cudaGetErrorString(e));
            cudaGetLastError();
            goto fail;
        }
    }
    *out = f;
    return 0;
fail:
    nsm_fused_destroy(f);
    return -1;
}

int nsm_fused_run(nsm_fused *f, ns_stream s, dm_err *err)
{
    int th, sm;
    const void *fn = kernel_for(f->tile, f->dt, &th, &sm);
    void *args[] = {&f->ops_dev, &f->n_ops, &f->bar, &f->prof, &f->prof_stride};
    NS_CUDA(cudaLaunchCooperativeKernel(fn, dim3((unsigned)f->grid), dim3((unsigned)th), args, (size_t)sm, s));
    return 0;
}

void nsm_fused_info(const nsm_fused *f, int *n_ops, int *n_barriers, int *grid, int *threads,
                    double *flops_exec, double *flops_full, double *flops_nominal)
{
    *flops_full = f->flops_full;
    *flops_nominal = f->flops_nominal;
    *n_ops = f->n_ops;
    *n_barriers = f->n_barriers;
    *grid = f->grid;
    *threads = f->threads;
    *flops_exec = f->flops_exec;
}

/* ---- per-phase profile -------------------------------------------------------------------- */

static void describe_phase(const nsm_fused *f, int first, int last, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = first; k <= last && at < cap; k++) {
        const nsm_op *q = &f->ops[k];
        int w;
        if (q->kind == NSM_GEMM)
            w = snprintf(buf + at, cap - at, "%s%dx%dx%d%s%s%s x%d %lldu%s", k > first ? " + " : "", q->M, q->N, q->K,
                         q->sym ? " sym" : "", q->c ? " +C" : "", q->d2 ? " +D2" : "", q->batch, (long long)q->units,
                         q->splits > 1 ? " split" : "");
        else
            w = snprintf(buf + at, cap - at, "%s%s x%d %lldu", k > first ? " + " : "", q->kind == NSM_SUMSQ ? "sumsq" : "normalize",
                         q->batch, (long long)q->units);
        at += w > 0 ? (size_t)w : 0;
    }
}

int nsm_fused_profile(nsm_fused *f, ns_stream s, FILE *out, dm_err *err)
{
    const int np = f->n_barriers + 1, stride = 3 + 2 * np;
    size_t words = (size_t)f->grid * (size_t)stride;
    unsigned long long *h = (unsigned long long *)dm_calloc(2 * words, sizeof *h, err), *best = h + words;
    double best_ns = -1;
    int rc = -1;
    if (!h) return -1;
    if (cudaMalloc((void **)&f->prof, words * sizeof *h) != cudaSuccess) {
        dm_err_set(err, "nsm_fused_profile: cudaMalloc: %s", cudaGetErrorString(cudaGetLastError()));
        f->prof = NULL;
        free(h);
        return -1;
    }
    f->prof_stride = stride;
    for (int rep = 0; rep < 6; rep++) { /* the fastest of 5 after one warm-up */
        if (nsm_fused_run(f, s, err)) goto out;
        cudaError_t e = cudaStreamSynchronize(s);
        if (e == cudaSuccess) e = cudaMemcpy(h, f->prof, words * sizeof *h, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            dm_err_set(err, "nsm_fused_profile: %s", cudaGetErrorString(e));
            goto out;
        }
        unsigned long long t0 = ~0ull, t1 = 0;
        for (int b = 0; b < f->grid; b++) {
            t0 = h[b * stride + 1] < t0 ? h[b * stride + 1] : t0;
            t1 = h[b * stride + 2] > t1 ? h[b * stride + 2] : t1;
        }
        if (rep > 0 && (best_ns < 0 || (double)(t1 - t0) < best_ns)) {
            best_ns = (double)(t1 - t0);
            memcpy(best, h, words * sizeof *h);
        }
    }
    {
        /* CTA 0's clock over its global time: the SM clock of this run */
        unsigned long long c_all = best[3 + 2 * (np - 1)] - best[0], ns_all = best[2] - best[1];
        double ghz = ns_all ? (double)c_all / (double)ns_all : 1.0, sum_work = 0, sum_bar = 0;
        fprintf(out, "#   fused %d phases on %d CTAs x %d threads: %.1f us first start to last end (SM clock %.0f MHz)\n", np,
                f->grid, f->threads, best_ns / 1e3, ghz * 1e3);
        fprintf(out, "#   phase   work_max_us  work_mean_us  barrier_min_us  barrier_max_us  ops (MxNxK, units)\n");
        int first = 0;
        for (int p = 0; p < np; p++) {
            int last = first;
            while (last < f->n_ops - 1 && !f->ops[last].barrier_after) last++;
            double wmax = 0, wsum = 0, bmin = -1, bmax = 0;
            for (int b = 0; b < f->grid; b++) {
                const unsigned long long *r = best + (size_t)b * stride;
                unsigned long long from = p == 0 ? r[0] : r[4 + 2 * (p - 1)];
                double w = (double)(r[3 + 2 * p] - from) / ghz / 1e3, bw = (double)(r[4 + 2 * p] - r[3 + 2 * p]) / ghz / 1e3;
                wmax = w > wmax ? w : wmax;
                wsum += w;
                bmin = bmin < 0 || bw < bmin ? bw : bmin;
                bmax = bw > bmax ? bw : bmax;
            }
            char desc[512];
            describe_phase(f, first, last, desc, sizeof desc);
            fprintf(out, "#   %5d %13.2f %13.2f %15.2f %15.2f  %s\n", p, wmax, wsum / f->grid, bmin, bmax, desc);
            sum_work += wmax;
            sum_bar += p < np - 1 ? bmin : 0;
            first = last + 1;
        }
        fprintf(out, "#   sum over phases: slowest CTA's work %.1f us, barrier (last arrival's wait) %.1f us\n", sum_work, sum_bar);
    }
    rc = 0;
out:
    cudaFree(f->prof);
    f->prof = NULL;
    f->prof_stride = 0;
    free(h);
    return rc;
}
