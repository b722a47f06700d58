/* wk_cuda.cu: the GPU launchers of the step's work kernels (wk_cuda.h; the semantics are
 * wk_ref.h's): products through cuBLAS, elementwise kernels and deterministic two-pass
 * reductions of our own, and the one dispatcher wk_run. Elementwise kernels move 8 bf16 (16
 * bytes) per access when every row they touch starts 16-byte aligned, else one element. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <climits>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block_reduce.cuh"
#include "wk_cuda.h"
#include "wk_hash.h"
#include "wk_ref.h"
/* the executor's gradient check (step_kern.cu), so that `bench work` times the very kernel
 * the step runs after each backward op (DM_KOP_GRAD_CHECK) */
#include "step_kern.h"

typedef __nv_bfloat16 bf;

#define CHECK_LAUNCH(what)                                                                     \
    do {                                                                                       \
        cudaError_t e_ = cudaGetLastError();                                                   \
        if (e_ != cudaSuccess)                                                                 \
            return dm_err_set(err, "%s: %s (%s:%d)", what, cudaGetErrorString(e_), __FILE__, __LINE__); \
    } while (0)
#define CUBLAS(call)                                                                           \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            return dm_err_set(err, "%s: cuBLAS status %d (%s:%d)", #call, (int)s_, __FILE__, __LINE__); \
    } while (0)

/* WK_GROUP (wk_ref.h): the rows one thread of the reductions (vector-bwd, table-bwd) sums before
 * a second pass sums the groups in order; 16 rows and a 4-deep unroll keep enough loads in
 * flight for HBM at a few thousand tokens. */

extern "C" int wk_blas_create(wk_blas *h, dm_err *err)
{
    CUBLAS(cublasCreate((cublasHandle_t *)h));
    return 0;
}

extern "C" void wk_blas_destroy(wk_blas h)
{
    if (h) cublasDestroy((cublasHandle_t)h);
}

/* ---- device helpers -------------------------------------------------------------------- */

/* the counter hash of wk_hash.h, the host's own */
#define dmix wk_mix64_
#define drow wk_row_
#define dcol wk_col_

template <int V> __device__ __forceinline__ void ldv(const bf *p, float *v)
{
    if (V == 8) {
        uint4 u = *(const uint4 *)p;
        const bf *h = (const bf *)&u;
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = __bfloat162float(h[k]);
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) v[k] = __bfloat162float(p[k]);
    }
}

template <int V> __device__ __forceinline__ void stv(bf *p, const float *v)
{
    if (V == 8) {
        uint4 u;
        bf *h = (bf *)&u;
#pragma unroll
        for (int k = 0; k < 8; k++) h[k] = __float2bfloat16_rn(v[k]);
        *(uint4 *)p = u;
    } else {
#pragma unroll
        for (int k = 0; k < V; k++) p[k] = __float2bfloat16_rn(v[k]);
    }
}

/* one atomic per block of the block's sum (any block shape of whole warps) */
__device__ __forceinline__ void block_add(float acc, float *out)
{
    float s = block_reduce<red_sum>(acc);
    if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(out, s);
}

static int aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

static int blocks_for(int64_t work, int threads, int64_t cap)
{
    int64_t b = (work + threads - 1) / threads;
    return (int)(b < 1 ? 1 : b > cap ? cap : b);
}

/* Row-wise kernels run blocks of 256 threads as (columns) x (rows): a row's vectors across
 * threadIdx.x, rows across threadIdx.y and the grid; what depends on the row only (its hash,
 * its index) is computed once per row. */
#define ROW_LOOP(nrows)                                                                            \
    for (int64_t row = blockIdx.x * (int64_t)blockDim.y + threadIdx.y; row < (nrows);                \
         row += (int64_t)gridDim.x * blockDim.y)
#define COL_LOOP(nv) for (int64_t cv = threadIdx.x; cv < (nv); cv += blockDim.x)

/* ---- elementwise kernels ------------------------------------------------------------------ */

/* loss: R[i][r][c] -= target(param0 + i, row0 + r, c); loss += scale sum R^2 */
template <int V>
__global__ void k_loss(bf *R, int64_t count, int64_t rows, int64_t n, uint64_t hk, int64_t param0, int64_t row0,
                       float scale, float *loss)
{
    int64_t nv = n / V;
    float acc = 0;
    ROW_LOOP(count * rows)
    {
        int64_t i = row / rows, r = row - i * rows;
        uint32_t hr = drow(dmix(hk ^ (uint64_t)(param0 + i)), row0 + r);
        bf *p = R + row * n;
        COL_LOOP(nv)
        {
            float v[V];
            ldv<V>(p + cv * V, v);
#pragma unroll
            for (int k = 0; k < V; k++) {
                v[k] -= dcol(hr, cv * V + k);
                acc += v[k] * v[k];
            }
            stv<V>(p + cv * V, v);
        }
    }
    block_add(acc * scale, loss);
}

/* vector (positions 1) and table: R[i][t][c] = x[t][c] W_i[pos(t)][c] - target; the loss */
template <int V>
__global__ void k_scale(const bf *x, const bf *W, bf *R, int64_t count, int64_t rows, int64_t n, int64_t period,
                        int64_t positions, uint64_t hk, int64_t param0, int64_t row0, float scale, float *loss)
{
    int64_t nv = n / V;
    float acc = 0;
    ROW_LOOP(count * rows)
    {
        int64_t i = row / rows, t = row - i * rows, pos = (t % period) % positions;
        uint32_t hr = drow(dmix(hk ^ (uint64_t)(param0 + i)), row0 + t);
        const bf *xr = x + t * n, *wr = W + (i * positions + pos) * n;
        bf *rr = R + row * n;
        COL_LOOP(nv)
        {
            float xv[V], wv[V], v[V];
            ldv<V>(xr + cv * V, xv);
            ldv<V>(wr + cv * V, wv);
#pragma unroll
            for (int k = 0; k < V; k++) {
                v[k] = xv[k] * wv[k] - dcol(hr, cv * V + k);
                acc += v[k] * v[k];
            }
            stv<V>(rr + cv * V, v);
        }
    }
    block_add(acc * scale, loss);
}

/* Rows of position p in a reduction: per sample cnt = ceil((period - p) / positions) of them. */
__device__ __forceinline__ int64_t terms_per_sample(int64_t p, int64_t period, int64_t positions)
{
    return (period - p + positions - 1) / positions;
}

/* vector-bwd / table-bwd pass 1: thread (i, group, p, column vector) sums R x over its WK_GROUP
 * rows of position p (in row order) into ws, and writes dx = R W there */
template <int V>
__global__ void k_red1(const bf *R, const bf *x, const bf *W, bf *dx, float *ws, int64_t count, int64_t rows,
                       int64_t n, int64_t period, int64_t positions, int64_t np, int64_t ngroups)
{
    int64_t nv = n / V, q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (q >= count * ngroups * np * nv) return;
    int64_t cv = q % nv, rest = q / nv, p = rest % np, grp = (rest / np) % ngroups, i = rest / np / ngroups;
    int64_t cnt = terms_per_sample(p, period, positions);
    int64_t samples = (rows + period - 1) / period, N = samples * cnt;
    int64_t u0 = grp * WK_GROUP, u1 = u0 + WK_GROUP < N ? u0 + WK_GROUP : N;
    float acc[V], wv[V];
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = 0;
    ldv<V>(W + (i * positions + p) * n + cv * V, wv);
    const bf *Ri = R + i * rows * n + cv * V, *xc = x + cv * V;
    bf *dxi = dx ? dx + i * rows * n + cv * V : NULL;
    /* term u is row (u / cnt) period + p + (u % cnt) positions: walked without dividing */
    int64_t smp = u0 / cnt, j = u0 - smp * cnt;
#pragma unroll 4
    for (int64_t u = u0; u < u1; u++) {
        int64_t t = smp * period + p + j * positions;
        if (++j == cnt) j = 0, smp++;
        if (t >= rows) continue;
        float rv[V], xv[V], d[V];
        ldv<V>(Ri + t * n, rv);
        ldv<V>(xc + t * n, xv);
#pragma unroll
        for (int k = 0; k < V; k++) {
            acc[k] += rv[k] * xv[k];
            d[k] = rv[k] * wv[k];
        }
        if (dxi) stv<V>(dxi + t * n, d);
    }
    float *o = ws + ((i * ngroups + grp) * np + p) * n + cv * V;
#pragma unroll
    for (int k = 0; k < V; k++) o[k] = acc[k];
}

/* pass 2: G_i[p][c] = scale * the sum of the groups (0 for positions no row has; added to G when
 * it accumulates). A block of 32 columns x 8 lanes: lane y sums the groups y, y + 8, ... in
 * order (coalesced across the columns), then the 8 lanes are added in order: the same sums in
 * the same order every run. */
#define RED2_LANES 8
__global__ void k_red2(const float *ws, bf *G, int64_t count, int64_t n, int64_t positions, int64_t np,
                       int64_t ngroups, float scale, int accumulate)
{
    __shared__ float part[RED2_LANES][33];
    int64_t c = blockIdx.x * 32 + threadIdx.x, stride = np * n;
    for (int64_t ip = blockIdx.y; ip < count * positions; ip += gridDim.y) {
        int64_t i = ip / positions, p = ip - i * positions;
        float s = 0;
        if (c < n && p < np) {
            const float *w = ws + (i * ngroups * np + p) * n + c;
#pragma unroll 4
            for (int64_t g = threadIdx.y; g < ngroups; g += RED2_LANES) s += w[g * stride];
        }
        part[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && c < n) {
            float t = 0;
            for (int y = 0; y < RED2_LANES; y++) t += part[y][threadIdx.x];
            bf *gp = G + ip * n + c;
            *gp = __float2bfloat16_rn(scale * t + (accumulate ? __bfloat162float(*gp) : 0.0f));
        }
        __syncthreads();
    }
}

/* embed: R[t] = E[id[t]] */
template <int V> __global__ void k_embed(const bf *E, const int32_t *id, bf *R, int64_t rows, int64_t n)
{
    int64_t nv = n / V;
    ROW_LOOP(rows)
    {
        const bf *src = E + (int64_t)id[row] * n;
        COL_LOOP(nv)
        {
            float v[V];
            ldv<V>(src + cv * V, v);
            stv<V>(R + row * n + cv * V, v);
        }
    }
}

/* embed-bwd after the zeroing: G[id] += scale * the sum of its tokens' rows, in token order */
template <int V>
__global__ void k_embed_bwd(const bf *R, const int32_t *ids, const int32_t *off, const int32_t *tok, bf *G,
                            int64_t nids, int64_t n, float scale)
{
    int64_t nv = n / V;
    ROW_LOOP(nids)
    {
        bf *gp = G + (int64_t)ids[row] * n;
        int32_t j0 = off[row], j1 = off[row + 1];
        COL_LOOP(nv)
        {
            float acc[V], g[V];
#pragma unroll
            for (int k = 0; k < V; k++) acc[k] = 0;
            for (int32_t j = j0; j < j1; j++) {
                float v[V];
                ldv<V>(R + (int64_t)tok[j] * n + cv * V, v);
#pragma unroll
                for (int k = 0; k < V; k++) acc[k] += v[k];
            }
            ldv<V>(gp + cv * V, g);
#pragma unroll
            for (int k = 0; k < V; k++) g[k] += scale * acc[k];
            stv<V>(gp + cv * V, g);
        }
    }
}

/* route: D[q] = X[src[q]] or a zero row */
template <int V> __global__ void k_route(const bf *X, const int32_t *src, bf *D, int64_t rows, int64_t n)
{
    int64_t nv = n / V;
    ROW_LOOP(rows)
    {
        int32_t s = src[row];
        COL_LOOP(nv)
        {
            float v[V];
            if (s >= 0) {
                ldv<V>(X + (int64_t)s * n + cv * V, v);
            } else {
#pragma unroll
                for (int k = 0; k < V; k++) v[k] = 0;
            }
            stv<V>(D + row * n + cv * V, v);
        }
    }
}

/* route-bwd: dX[t] = the sum of the token's routed rows */
template <int V>
__global__ void k_route_bwd(const bf *dD, const int32_t *inv, bf *dX, int64_t tokens, int64_t top_k, int64_t n)
{
    int64_t nv = n / V;
    ROW_LOOP(tokens)
    {
        const int32_t *rr = inv + row * top_k;
        COL_LOOP(nv)
        {
            float acc[V];
#pragma unroll
            for (int k = 0; k < V; k++) acc[k] = 0;
            for (int64_t j = 0; j < top_k; j++) {
                if (rr[j] < 0) continue;
                float v[V];
                ldv<V>(dD + (int64_t)rr[j] * n + cv * V, v);
#pragma unroll
                for (int k = 0; k < V; k++) acc[k] += v[k];
            }
            stv<V>(dX + row * n + cv * V, acc);
        }
    }
}

/* X (rows x w) = offset + scale wk_hash_uniform(seed, kind, param, row0 + r, c), bf16 or fp32 */
__device__ __forceinline__ void put(bf *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void put(float *p, float v) { *p = v; }
template <typename T>
__global__ void k_fill_hash(T *X, int64_t rows, int64_t w, uint64_t hp, int64_t row0, float scale, float offset)
{
    ROW_LOOP(rows)
    {
        uint32_t hr = drow(hp, row0 + row);
        /* rounded as the host rounds it (no fused multiply-add) */
        COL_LOOP(w) put(X + row * w + cv, __fadd_rn(offset, __fmul_rn(scale, dcol(hr, cv))));
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

#define THREADS 256
#define GRID_CAP 8192

/* V = 8 when n is a multiple of 8 and every pointer is 16-byte aligned (rows then all are);
 * NULL pointers (an unused output) do not count */
static int al(const void *p) { return !p || aligned(p); }
static int vec8(int64_t n, const void *p, const void *q = NULL, const void *r = NULL, const void *t = NULL)
{
    return n % 8 == 0 && al(p) && al(q) && al(r) && al(t);
}

/* The launch of a row-wise kernel over nrows rows of nv vectors: 256 threads, as many of them
 * across a row as its vectors need (32..256), the rest over rows. */
typedef struct rowcfg {
    dim3 grid, block;
} rowcfg;
static rowcfg rows_of(int64_t nrows, int64_t nv)
{
    int bx = 32;
    while (bx < nv && bx < THREADS) bx *= 2;
    int by = THREADS / bx;
    int64_t g = (nrows + by - 1) / by;
    rowcfg c = {dim3((unsigned)(g < 1 ? 1 : g > GRID_CAP ? GRID_CAP : g)), dim3((unsigned)bx, (unsigned)by)};
    return c;
}
#define ROWS(nrows, nv, s) rows_of(nrows, nv).grid, rows_of(nrows, nv).block, 0, s

static int elem_loss(const wk_args *a, int64_t count, int64_t rows, int64_t n, cudaStream_t s, dm_err *err)
{
    uint64_t hk = wk_hash_kind(a->seed, WK_H_TARGET);
    if (vec8(n, a->r))
        k_loss<8><<<ROWS(count * rows, n / 8, s)>>>((bf *)a->r, count, rows, n, hk, a->param, a->row0, a->scale, a->loss);
    else
        k_loss<1><<<ROWS(count * rows, n, s)>>>((bf *)a->r, count, rows, n, hk, a->param, a->row0, a->scale, a->loss);
    CHECK_LAUNCH("loss kernel");
    return 0;
}

static int elem_scale(const wk_args *a, int64_t count, int64_t rows, int64_t n, int64_t period, int64_t positions,
                      cudaStream_t s, dm_err *err)
{
    uint64_t hk = wk_hash_kind(a->seed, WK_H_TARGET);
    if (period < 1) period = 1;
    if (positions < 1) positions = 1;
    if (vec8(n, a->x, a->w, a->r))
        k_scale<8><<<ROWS(count * rows, n / 8, s)>>>((const bf *)a->x, (const bf *)a->w, (bf *)a->r, count, rows, n,
                                                      period, positions, hk, a->param, a->row0, a->scale, a->loss);
    else
        k_scale<1><<<ROWS(count * rows, n, s)>>>((const bf *)a->x, (const bf *)a->w, (bf *)a->r, count, rows, n, period,
                                                  positions, hk, a->param, a->row0, a->scale, a->loss);
    CHECK_LAUNCH(positions > 1 ? "table kernel" : "vector kernel");
    return 0;
}

static int elem_red(const wk_args *a, int64_t count, int64_t rows, int64_t n, int64_t period, int64_t positions,
                    cudaStream_t s, dm_err *err)
{
    if (period < 1) period = 1;
    if (positions < 1) positions = 1;
    int64_t np = positions < period ? positions : period;
    int64_t ng = wk_ws_floats(1, rows, 1, period, positions) / np;
    if (!a->ws) return dm_err_set(err, "reduction kernel: no workspace (%lld floats needed)",
                                  (long long)wk_ws_floats(count, rows, n, period, positions));
    int64_t threads1 = count * ng * np * n;
    if (vec8(n, a->r, a->x, a->w, a->dx))
        k_red1<8><<<blocks_for(threads1 / 8, THREADS, INT32_MAX), THREADS, 0, s>>>(
            (const bf *)a->r, (const bf *)a->x, (const bf *)a->w, (bf *)a->dx, a->ws, count, rows, n, period, positions,
            np, ng);
    else
        k_red1<1><<<blocks_for(threads1, THREADS, INT32_MAX), THREADS, 0, s>>>(
            (const bf *)a->r, (const bf *)a->x, (const bf *)a->w, (bf *)a->dx, a->ws, count, rows, n, period, positions,
            np, ng);
    CHECK_LAUNCH("reduction kernel (rows)");
    int64_t rows2 = count * positions;
    dim3 g2((unsigned)((n + 31) / 32), (unsigned)(rows2 < 65535 ? rows2 : 65535)), b2(32, RED2_LANES);
    k_red2<<<g2, b2, 0, s>>>(a->ws, (bf *)a->g, count, n, positions, np, ng, a->scale, a->accumulate);
    CHECK_LAUNCH("reduction kernel (groups)");
    return 0;
}

static int elem_embed(const wk_args *a, int64_t rows, int64_t n, cudaStream_t s, dm_err *err)
{
    if (vec8(n, a->w, a->r))
        k_embed<8><<<ROWS(rows, n / 8, s)>>>((const bf *)a->w, a->idx, (bf *)a->r, rows, n);
    else
        k_embed<1><<<ROWS(rows, n, s)>>>((const bf *)a->w, a->idx, (bf *)a->r, rows, n);
    CHECK_LAUNCH("embedding gather kernel");
    return 0;
}

static int elem_embed_bwd(const wk_args *a, int64_t n, cudaStream_t s, dm_err *err)
{
    if (!a->accumulate) {
        cudaError_t e = cudaMemsetAsync(a->g, 0, (size_t)(a->table_rows * n) * sizeof(bf), s);
        if (e != cudaSuccess) return dm_err_set(err, "embedding gradient zeroing: %s", cudaGetErrorString(e));
    }
    if (a->csr_n < 1) return 0;
    if (vec8(n, a->r, a->g))
        k_embed_bwd<8><<<ROWS(a->csr_n, n / 8, s)>>>((const bf *)a->r, a->csr_id, a->csr_off, a->csr_tok, (bf *)a->g,
                                                     a->csr_n, n, a->scale);
    else
        k_embed_bwd<1><<<ROWS(a->csr_n, n, s)>>>((const bf *)a->r, a->csr_id, a->csr_off, a->csr_tok, (bf *)a->g,
                                                 a->csr_n, n, a->scale);
    CHECK_LAUNCH("embedding scatter-add kernel");
    return 0;
}

static int elem_route(const wk_args *a, const dm_kernel *k, int64_t rows, int64_t n, cudaStream_t s, dm_err *err)
{
    if (k->op == DM_KOP_ROUTE) {
        if (vec8(n, a->x, a->g))
            k_route<8><<<ROWS(rows, n / 8, s)>>>((const bf *)a->x, a->idx, (bf *)a->g, rows, n);
        else
            k_route<1><<<ROWS(rows, n, s)>>>((const bf *)a->x, a->idx, (bf *)a->g, rows, n);
        CHECK_LAUNCH("dispatch kernel");
    } else {
        int64_t K = a->top_k > 0 ? a->top_k : 1;
        if (vec8(n, a->r, a->dx))
            k_route_bwd<8><<<ROWS(rows, n / 8, s)>>>((const bf *)a->r, a->idx, (bf *)a->dx, rows, K, n);
        else
            k_route_bwd<1><<<ROWS(rows, n, s)>>>((const bf *)a->r, a->idx, (bf *)a->dx, rows, K, n);
        CHECK_LAUNCH("combine kernel");
    }
    return 0;
}

/* ---- attention softmax ------------------------------------------------------------------- */

/* One block per row of n scores, SMX_THREADS threads over it in V-wide accesses. Rows of up to
 * SMX_BIG x 8 x SMX_PER scores whose accesses can be 16 bytes wide are held in registers (blocks
 * of NT threads, PER chunks of 8 per thread: a row's read, two reductions and write run one after
 * the other, so the bytes in flight per SM grow with the rows resident on it): one read, the
 * block's maximum, one exponential per score, the block's sum, one write (the HBM floor: 2 bytes
 * read and 2 written per score). Rows up to 4096 scores take blocks of SMX_REG threads (more
 * rows in flight per SM), rows up to 8192 blocks of SMX_BIG threads (2 chunks a thread). Measured
 * on an H200 (traces/device/softmax-2026-12-02, 196608 rows): at 8192 scores 128 / 256 / 512
 * threads reach 51 / 60 / 66% of HBM; at 16384 the two passes reach 70% (the second read from
 * L2), the register forms 42-55%. The backward holds P and dP of rows up to SMX_BWD_BIG x 32
 * scores the same way (one read of each, the dot, one write: 3 passes, the floor): 81 / 80 / 58%
 * of HBM at 4096 / 8192 / 16384 scores against 61 / 57 / 32% for two passes. Other rows take two passes: the first
 * reads the row for its maximum and sum (each thread online, then a fixed-order block combine),
 * the second reads it again and writes the probabilities. Every reduction has a fixed order:
 * deterministic. DM_SMX_NT (128, 256, 512; read once) overrides the block size of the rows over
 * 4096 scores and DM_SMX_BWD_REG=0 turns the backward's register form off, for timing the forms
 * against each other on a GPU (bench work). */
#define SMX_THREADS 256
#define SMX_REG 128 /* threads per row held in registers up to 4096 scores */
#define SMX_BIG 512     /* ... and beyond, up to SMX_BIG_MAX scores */
#define SMX_BIG_MAX 8192 /* longer rows: two passes (faster there, below) */
#define SMX_PER 8
#define SMX_BWD_BIG 512 /* the backward's blocks for rows over 2048 scores, up to 512 x 32 */

/* the block's (max, sum) pair combined in a fixed order; every thread gets the result */
__device__ __forceinline__ void smx_combine(float &m, float &s)
{
    __shared__ float pm[SMX_THREADS / 32], ps[SMX_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mx = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.f : s * __expf(m - mx)) + (m2 == -INFINITY ? 0.f : s2 * __expf(m2 - mx));
        m = mx;
    }
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) pm[w] = m, ps[w] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float M = pm[0], S = ps[0];
        for (int i = 1; i < SMX_THREADS / 32; i++) {
            float mx = fmaxf(M, pm[i]);
            S = (M == -INFINITY ? 0.f : S * __expf(M - mx)) + (pm[i] == -INFINITY ? 0.f : ps[i] * __expf(pm[i] - mx));
            M = mx;
        }
        pm[0] = M, ps[0] = S;
    }
    __syncthreads();
    m = pm[0], s = ps[0];
}

/* the block's sum and maximum (block_reduce.cuh); every thread gets them */
__device__ __forceinline__ float smx_sum(float v) { return block_reduce<red_sum>(v); }
__device__ __forceinline__ float smx_max(float v) { return block_reduce<red_max>(v); }

/* rows of n <= SMX_REG x 8 x PER, n a multiple of 8 and 16-byte aligned rows; PER the fewest
 * chunks that hold the row (8 PER floats per thread) */
template <int PER, int NT> __global__ void __launch_bounds__(NT) k_softmax_reg(bf *S, int64_t rows, int64_t n, float a)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        bf *row = S + r * n;
        float v[PER][8], m = -INFINITY;
#pragma unroll
        for (int p = 0; p < PER; p++) {
            int64_t c = ((int64_t)p * NT + threadIdx.x) * 8;
            if (c < n) {
                ldv<8>(row + c, v[p]);
#pragma unroll
                for (int k = 0; k < 8; k++) m = fmaxf(m, v[p][k] *= a);
            }
        }
        m = smx_max(m);
        float sum = 0;
#pragma unroll
        for (int p = 0; p < PER; p++)
            if (((int64_t)p * NT + threadIdx.x) * 8 < n) {
#pragma unroll
                for (int k = 0; k < 8; k++) sum += (v[p][k] = __expf(v[p][k] - m));
            }
        sum = smx_sum(sum);
        float inv = 1.f / sum;
#pragma unroll
        for (int p = 0; p < PER; p++) {
            int64_t c = ((int64_t)p * NT + threadIdx.x) * 8;
            if (c < n) {
#pragma unroll
                for (int k = 0; k < 8; k++) v[p][k] *= inv;
                stv<8>(row + c, v[p]);
            }
        }
        __syncthreads(); /* the shared partials are reused by the next row */
    }
}

template <int V> __global__ void __launch_bounds__(SMX_THREADS) k_softmax(bf *S, int64_t rows, int64_t n, float a)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        bf *row = S + r * n;
        float m = -INFINITY, sum = 0;
        for (int64_t c = (int64_t)threadIdx.x * V; c < n; c += (int64_t)SMX_THREADS * V) {
            float v[V];
            ldv<V>(row + c, v);
#pragma unroll
            for (int k = 0; k < V; k++) {
                float x = a * v[k];
                if (x > m) sum = sum * __expf(m - x) + 1.f, m = x;
                else sum += __expf(x - m);
            }
        }
        smx_combine(m, sum);
        float inv = 1.f / sum;
        for (int64_t c = (int64_t)threadIdx.x * V; c < n; c += (int64_t)SMX_THREADS * V) {
            float v[V];
            ldv<V>(row + c, v);
#pragma unroll
            for (int k = 0; k < V; k++) v[k] = __expf(a * v[k] - m) * inv;
            stv<V>(row + c, v);
        }
        __syncthreads(); /* the shared partials are reused by the next row */
    }
}

template <int V> __global__ void __launch_bounds__(SMX_THREADS) k_softmax_bwd(const bf *P, bf *dP, int64_t rows, int64_t n)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const bf *p = P + r * n;
        bf *d = dP + r * n;
        float dot = 0;
        for (int64_t c = (int64_t)threadIdx.x * V; c < n; c += (int64_t)SMX_THREADS * V) {
            float pv[V], dv[V];
            ldv<V>(p + c, pv);
            ldv<V>(d + c, dv);
#pragma unroll
            for (int k = 0; k < V; k++) dot += pv[k] * dv[k];
        }
        dot = smx_sum(dot);
        for (int64_t c = (int64_t)threadIdx.x * V; c < n; c += (int64_t)SMX_THREADS * V) {
            float pv[V], dv[V];
            ldv<V>(p + c, pv);
            ldv<V>(d + c, dv);
#pragma unroll
            for (int k = 0; k < V; k++) dv[k] = pv[k] * (dv[k] - dot);
            stv<V>(d + c, dv);
        }
        __syncthreads();
    }
}

/* rows of n <= NT x 8 x PER (n a multiple of 8, 16-byte aligned rows): P and dP in registers */
template <int PER, int NT>
__global__ void __launch_bounds__(NT) k_softmax_bwd_reg(const bf *P, bf *dP, int64_t rows, int64_t n)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const bf *p = P + r * n;
        bf *d = dP + r * n;
        float pv[PER][8], dv[PER][8], dot = 0;
#pragma unroll
        for (int q = 0; q < PER; q++) {
            int64_t c = ((int64_t)q * NT + threadIdx.x) * 8;
            if (c < n) {
                ldv<8>(p + c, pv[q]);
                ldv<8>(d + c, dv[q]);
#pragma unroll
                for (int k = 0; k < 8; k++) dot += pv[q][k] * dv[q][k];
            }
        }
        dot = smx_sum(dot);
#pragma unroll
        for (int q = 0; q < PER; q++) {
            int64_t c = ((int64_t)q * NT + threadIdx.x) * 8;
            if (c < n) {
#pragma unroll
                for (int k = 0; k < 8; k++) dv[q][k] = pv[q][k] * (dv[q][k] - dot);
                stv<8>(d + c, dv[q]);
            }
        }
    }
}

/* DM_SMX_NT's block size for the forward's rows over 4096 scores (0: unset, the rule below) */
static int smx_big_nt(void)
{
    static int nt = -1;
    if (nt < 0) {
        const char *e = getenv("DM_SMX_NT");
        int v = e ? atoi(e) : 0;
        nt = v == 128 || v == 256 || v == 512 ? v : 0;
    }
    return nt;
}

/* DM_SMX_BWD_REG=0 (read once) turns the backward's register form off: the two-pass kernel for
 * every row, to time the two on a GPU */
static int smx_bwd_reg(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DM_SMX_BWD_REG");
        on = !(e && !strcmp(e, "0"));
    }
    return on;
}

/* The forward in registers at NT threads: the fewest chunks of NT x 8 that hold the row. */
template <int NT> static int smx_reg_launch(bf *S, int64_t rows, int64_t n, float a, unsigned grid, cudaStream_t s)
{
    int64_t chunk = (int64_t)NT * 8;
    if (n <= chunk) k_softmax_reg<1, NT><<<grid, NT, 0, s>>>(S, rows, n, a);
    else if (n <= 2 * chunk) k_softmax_reg<2, NT><<<grid, NT, 0, s>>>(S, rows, n, a);
    else if (n <= 4 * chunk) k_softmax_reg<4, NT><<<grid, NT, 0, s>>>(S, rows, n, a);
    else if (n <= SMX_PER * chunk) k_softmax_reg<SMX_PER, NT><<<grid, NT, 0, s>>>(S, rows, n, a);
    else return 0;
    return 1;
}

static int elem_softmax(const wk_args *a, const dm_kernel *k, int64_t rows, int64_t n, cudaStream_t s, dm_err *err)
{
    unsigned grid = (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
    if (k->op == DM_KOP_SOFTMAX) {
        float sc = a->scale != 0 ? a->scale : 1.0f;
        bf *S = (bf *)a->r;
        int v8 = vec8(n, a->r, a->r), done = 0, big = smx_big_nt();
        if (v8 && n <= (int64_t)SMX_REG * 8 * 4) done = smx_reg_launch<SMX_REG>(S, rows, n, sc, grid, s);
        else if (v8 && big == 128) done = smx_reg_launch<128>(S, rows, n, sc, grid, s);
        else if (v8 && big == 256) done = smx_reg_launch<256>(S, rows, n, sc, grid, s);
        else if (v8 && big == 512) done = smx_reg_launch<512>(S, rows, n, sc, grid, s);
        else if (v8 && n <= SMX_BIG_MAX) done = smx_reg_launch<SMX_BIG>(S, rows, n, sc, grid, s);
        if (!done && v8) k_softmax<8><<<grid, SMX_THREADS, 0, s>>>(S, rows, n, sc);
        else if (!done) k_softmax<1><<<grid, SMX_THREADS, 0, s>>>(S, rows, n, sc);
        CHECK_LAUNCH("softmax kernel");
    } else {
        const bf *P = (const bf *)a->x;
        bf *dP = (bf *)a->r;
        int v8 = vec8(n, a->x, a->r) && vec8(n, a->r, a->r) && smx_bwd_reg();
        if (v8 && n <= 2048) k_softmax_bwd_reg<1, 256><<<grid, 256, 0, s>>>(P, dP, rows, n);
        else if (v8 && n <= 4096) k_softmax_bwd_reg<2, 256><<<grid, 256, 0, s>>>(P, dP, rows, n);
        else if (v8 && n <= (int64_t)SMX_BWD_BIG * 8 * 2) k_softmax_bwd_reg<2, SMX_BWD_BIG><<<grid, SMX_BWD_BIG, 0, s>>>(P, dP, rows, n);
        else if (v8 && n <= (int64_t)SMX_BWD_BIG * 8 * 4) k_softmax_bwd_reg<4, SMX_BWD_BIG><<<grid, SMX_BWD_BIG, 0, s>>>(P, dP, rows, n);
        else if (v8) k_softmax_bwd<8><<<grid, SMX_THREADS, 0, s>>>(P, dP, rows, n);
        else k_softmax_bwd<1><<<grid, SMX_THREADS, 0, s>>>(P, dP, rows, n);
        CHECK_LAUNCH("softmax backward kernel");
    }
    return 0;
}

/* ---- the layer passes (wk_ref.h): activations, rotary embeddings, residual adds ------------- */

__device__ __forceinline__ float d_silu(float x) { return x / (1.0f + __expf(-x)); }
__device__ __forceinline__ float d_silu_grad(float x)
{
    float s = 1.0f / (1.0f + __expf(-x));
    return s * (1.0f + x * (1.0f - s));
}
__device__ __forceinline__ float d_gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float d_gelu_grad(float x)
{
    float t = tanhf(0.7978845608f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

/* op: 0 act, 1 act-bwd, 2 glu, 3 glu-bwd, 4 add. A and U at row stride ld, dH and E at n; glu-bwd
 * writes dG to E and dU to E + rows n. */
template <int V, int OP>
__global__ void k_pass(const bf *A, const bf *U, const bf *dH, bf *E, int64_t rows, int64_t n, int64_t ld)
{
    int64_t nv = n / V;
    ROW_LOOP(rows)
    {
        COL_LOOP(nv)
        {
            int64_t c = cv * V;
            float a[V], u[V], d[V], e[V], f[V];
            ldv<V>(A + row * ld + c, a);
            if (OP >= 2) ldv<V>(U + row * ld + c, u);
            if (OP == 1 || OP == 3) ldv<V>(dH + row * n + c, d);
#pragma unroll
            for (int k = 0; k < V; k++) {
                if (OP == 0) e[k] = d_gelu(a[k]);
                else if (OP == 1) e[k] = d[k] * d_gelu_grad(a[k]);
                else if (OP == 2) e[k] = d_silu(a[k]) * u[k];
                else if (OP == 3) e[k] = d[k] * u[k] * d_silu_grad(a[k]), f[k] = d[k] * d_silu(a[k]);
                else e[k] = a[k] + u[k];
            }
            stv<V>(E + row * n + c, e);
            if (OP == 3) stv<V>(E + rows * n + row * n + c, f);
        }
    }
}

/* rope in place: each pair (2i, 2i+1) of row r turned by r f_j (sign -1: back), j = i mod half.
 * The pair index in 32 bits, one modulo per V elements (the next pairs step j on): a 64-bit
 * modulo per pair held it at 39-51% of HBM bandwidth on the H200. */
template <int V>
__global__ void k_rope(bf *E, int64_t rows, int n, int half, float sign)
{
    int nv = n / V;
    float lf = 9.210340372f / (float)half;
    ROW_LOOP(rows)
    {
        float pos = (float)row;
        bf *e = E + row * n;
        for (int cv = threadIdx.x; cv < nv; cv += blockDim.x) {
            int c = cv * V, j = (c >> 1) % half;
            float v[V];
            ldv<V>(e + c, v);
#pragma unroll
            for (int k = 0; k + 1 < V; k += 2) {
                float sn, cs;
                __sincosf(pos * __expf(-(float)j * lf), &sn, &cs);
                sn *= sign;
                float x = v[k], y = v[k + 1];
                v[k] = x * cs - y * sn;
                v[k + 1] = x * sn + y * cs;
                if (++j == half) j = 0;
            }
            stv<V>(e + c, v);
        }
    }
}

template <int OP> static void pass_launch(const wk_args *a, int64_t rows, int64_t n, int64_t ld, int v8, cudaStream_t s)
{
    const bf *A = (const bf *)a->x, *U = (const bf *)a->w, *dH = (const bf *)a->dx;
    bf *E = (bf *)a->r;
    if (v8) k_pass<8, OP><<<ROWS(rows, n / 8, s)>>>(A, U, dH, E, rows, n, ld);
    else k_pass<1, OP><<<ROWS(rows, n, s)>>>(A, U, dH, E, rows, n, ld);
}

static int elem_pass(const wk_args *a, const dm_kernel *k, int64_t rows, int64_t n, cudaStream_t s, dm_err *err)
{
    int64_t ld = a->ld > 0 ? a->ld : n;
    int v8 = n % 8 == 0 && ld % 8 == 0 && al(a->x) && al(a->w) && al(a->dx) && al(a->r);
    switch (k->op) {
    case DM_KOP_ACT: pass_launch<0>(a, rows, n, ld, v8, s); break;
    case DM_KOP_ACT_BWD: pass_launch<1>(a, rows, n, ld, v8, s); break;
    case DM_KOP_GLU: pass_launch<2>(a, rows, n, ld, v8, s); break;
    case DM_KOP_GLU_BWD: pass_launch<3>(a, rows, n, ld, v8, s); break;
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: pass_launch<4>(a, rows, n, n, v8, s); break;
    default: {
        if (n > INT_MAX - 8 || k->k / 2 > INT_MAX)
            return dm_err_set(err, "rope: a row of %lld values, %lld rotated (at most %d)", (long long)n, (long long)k->k,
                              INT_MAX - 8);
        int half = k->k >= 2 ? (int)(k->k / 2) : 1;
        float sign = k->op == DM_KOP_ROPE_BWD ? -1.0f : 1.0f;
        if (n % 8 == 0 && al(a->r)) k_rope<8><<<ROWS(rows, n / 8, s)>>>((bf *)a->r, rows, (int)n, half, sign);
        else k_rope<2><<<ROWS(rows, n / 2, s)>>>((bf *)a->r, rows, (int)n, half, sign);
    }
    }
    CHECK_LAUNCH("layer pass kernel");
    return 0;
}

extern "C" int wk_fill_hash(void *X, int64_t rows, int64_t w, uint64_t seed, int kind, int64_t param, int64_t row0,
                            ns_stream s, dm_err *err)
{
    if (rows * w <= 0) return 0;
    uint64_t hp = wk_hash_prefix(seed, kind, param);
    k_fill_hash<bf><<<ROWS(rows, w, (cudaStream_t)s)>>>((bf *)X, rows, w, hp, row0, 1.0f, 0.0f);
    CHECK_LAUNCH("hash fill kernel");
    return 0;
}

extern "C" int wk_fill_hash_f32(float *X, int64_t rows, int64_t w, uint64_t seed, int kind, int64_t param,
                                float scale, float offset, ns_stream s, dm_err *err)
{
    if (rows * w <= 0) return 0;
    uint64_t hp = wk_hash_prefix(seed, kind, param);
    k_fill_hash<float><<<ROWS(rows, w, (cudaStream_t)s)>>>(X, rows, w, hp, 0, scale, offset);
    CHECK_LAUNCH("hash fill kernel");
    return 0;
}

/* ---- products ------------------------------------------------------------------------------ */

/* Row-major C = op(A, B) as cuBLAS's column-major C^T = op(B)^T op(A)^T: the operands swap. */
typedef struct cb_form {
    cublasOperation_t tb, ta; /* cuBLAS's first operand is our B */
    int64_t ldb, lda;
} cb_form;

static cb_form form_of(wk_form f, int64_t m, int64_t n, int64_t k)
{
    switch (f) {
    case WK_NT: return (cb_form){CUBLAS_OP_T, CUBLAS_OP_N, k, k};
    case WK_NN: return (cb_form){CUBLAS_OP_N, CUBLAS_OP_N, n, k};
    default: return (cb_form){CUBLAS_OP_N, CUBLAS_OP_T, n, m};
    }
}

static int products(wk_blas blas, const dm_kernel *k, const wk_args *a, cudaStream_t s, dm_err *err)
{
    cublasHandle_t h = (cublasHandle_t)blas;
    int f = wk_form_of(k->op);
    if (!h || f < 0) return dm_err_set(err, "%s %s: not a product, or no cuBLAS handle", dm_kern_kind_name(k->kind),
                                       dm_kern_op_name(k->op));
    cudaStream_t cur = NULL;
    CUBLAS(cublasGetStream(h, &cur));
    if (cur != s) CUBLAS(cublasSetStream(h, s));
    float alpha = a->alpha != 0 ? a->alpha : 1.0f, beta = a->accumulate ? 1.0f : 0.0f;
    int m = (int)k->m, n = (int)k->n, kk = (int)k->k;
    cb_form c = form_of((wk_form)f, k->m, k->n, k->k);
    if (k->kind == DM_KERN_GEMM) {
        for (int64_t i = 0; i < k->count; i++)
            CUBLAS(cublasGemmEx(h, c.tb, c.ta, n, m, kk, &alpha, (const bf *)a->b + i * a->sb, CUDA_R_16BF, (int)c.ldb,
                                (const bf *)a->a + i * a->sa, CUDA_R_16BF, (int)c.lda, &beta, (bf *)a->c + i * a->sc,
                                CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else if (a->pa) {
        CUBLAS(cublasGemmBatchedEx(h, c.tb, c.ta, n, m, kk, &alpha, (const void *const *)a->pb, CUDA_R_16BF, (int)c.ldb,
                                   (const void *const *)a->pa, CUDA_R_16BF, (int)c.lda, &beta, (void *const *)a->pc,
                                   CUDA_R_16BF, n, (int)k->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
        CUBLAS(cublasGemmStridedBatchedEx(h, c.tb, c.ta, n, m, kk, &alpha, a->b, CUDA_R_16BF, (int)c.ldb, a->sb, a->a,
                                          CUDA_R_16BF, (int)c.lda, a->sa, &beta, a->c, CUDA_R_16BF, n, a->sc,
                                          (int)k->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return 0;
}

extern "C" void wk_args_scalars(wk_args *a, const wk_kb *b, uint64_t seed)
{
    memset(a, 0, sizeof *a);
    a->seed = seed;
    a->param = b->k.param;
    a->row0 = b->row0;
    a->rows = b->rows;
    a->count = b->count;
    a->scale = (float)b->scale;
    a->period = b->period;
    a->positions = b->positions;
    a->top_k = b->top_k;
    a->table_rows = b->table_rows;
    a->accumulate = b->accumulate;
    a->ld = b->ld;
}

/* One elementwise launch (count matrices only where one launch covers them: the loss of a
 * layer's experts). */
static int elem_one(const dm_kernel *k, const wk_args *a, int64_t count, int64_t rows, cudaStream_t s, dm_err *err)
{
    int64_t n = k->n;
    if (rows * n * count <= 0) return 0;
    switch (k->op) {
    case DM_KOP_LOSS: return elem_loss(a, count, rows, n, s, err);
    case DM_KOP_VECTOR: return elem_scale(a, count, rows, n, 1, 1, s, err);
    case DM_KOP_TABLE: return elem_scale(a, count, rows, n, a->period, a->positions, s, err);
    case DM_KOP_VECTOR_BWD: return elem_red(a, count, rows, n, 1, 1, s, err);
    case DM_KOP_TABLE_BWD: return elem_red(a, count, rows, n, a->period, a->positions, s, err);
    case DM_KOP_EMBED: return elem_embed(a, rows, n, s, err);
    case DM_KOP_EMBED_BWD: return elem_embed_bwd(a, n, s, err);
    case DM_KOP_ROUTE:
    case DM_KOP_ROUTE_BWD: return elem_route(a, k, rows, n, s, err);
    case DM_KOP_SOFTMAX:
    case DM_KOP_SOFTMAX_BWD: return elem_softmax(a, k, rows, n, s, err);
    case DM_KOP_GRAD_CHECK: return sk_nonfinite(a->r, rows * n * count, (int *)a->loss, 1, s, err);
    case DM_KOP_ACT:
    case DM_KOP_ACT_BWD:
    case DM_KOP_GLU:
    case DM_KOP_GLU_BWD:
    case DM_KOP_ROPE:
    case DM_KOP_ROPE_BWD:
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: return elem_pass(a, k, rows * count, n, s, err);
    default: return dm_err_set(err, "elem %s: no launcher", dm_kern_op_name(k->op));
    }
}

extern "C" int wk_run(wk_blas blas, const dm_kernel *k, const wk_args *a, ns_stream stream, dm_err *err)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (k->kind == DM_KERN_GEMM || k->kind == DM_KERN_BGEMM) return products(blas, k, a, s, err);
    int64_t rows = a->rows > 0 ? a->rows : k->m, count = a->count > 0 ? a->count : k->count;
    if (k->count <= 1) return elem_one(k, a, count, rows, s, err);
    /* a kernel over count matrices is count launches, one per matrix (costs.h's rows are per
     * matrix): each its own residual, parameter, gradient and dx; the input x is shared */
    int64_t pos = a->positions > 0 ? a->positions : 1;
    for (int64_t i = 0; i < k->count; i++) {
        wk_args b = *a;
        b.param = a->param + i;
        if (a->r) b.r = (bf *)a->r + i * rows * k->n;
        if (a->dx) b.dx = (bf *)a->dx + i * rows * k->n;
        if (a->w) b.w = (const bf *)a->w + i * pos * k->n;
        if (a->g) b.g = (bf *)a->g + i * pos * k->n;
        if (elem_one(k, &b, 1, rows, s, err)) return -1;
    }
    return 0;
}

/* ---- attention ------------------------------------------------------------------------------ */

extern "C" void wk_attn_bind(const wk_attn_geom *g, void *const buf[WK_A__N], dm_kern_op op, void **p, wk_args *a)
{
    int which[3];
    int64_t o0[3], o1[3];
    int64_t b = wk_attn_entries(g);
    wk_attn_entry(g, op, 0, which, o0);
    wk_attn_entry(g, op, b > 1 ? 1 : 0, which, o1);
    a->a = (bf *)buf[which[0]] + o0[0];
    a->b = (bf *)buf[which[1]] + o0[1];
    a->c = (bf *)buf[which[2]] + o0[2];
    a->sa = o1[0] - o0[0], a->sb = o1[1] - o0[1], a->sc = o1[2] - o0[2];
    a->pa = a->pb = NULL;
    a->pc = NULL;
    if (wk_attn_strided(g) || !p) return;
    for (int64_t e = 0; e < b; e++) {
        int64_t off[3];
        wk_attn_entry(g, op, e, which, off);
        for (int j = 0; j < 3; j++) p[j * b + e] = (bf *)buf[which[j]] + off[j];
    }
}
