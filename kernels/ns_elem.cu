/* ns_elem.cu: elementwise and reduction kernels: NS normalization (fp32, deterministic two-pass
 * Frobenius norm), diagonal shift, block mirror for the symmetric products, dtype conversion,
 * Muon momentum/apply and AdamW, plus the device helpers for tests and the benchmark (fills,
 * copies, event timing). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "block_reduce.cuh"
#include "clock_window.h"
#include "ns_kern.cuh"

/* ---- typed loads and stores --------------------------------------------------------------- */

__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void st(__half *p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(float *p, int64_t i, float v) { p[i] = v; }

/* Call F<T>(args) with T the storage type of dtype dt. */
#define NS_DISPATCH(dt, F, ...)                                                               \
    ((dt) == DM_DT_BF16 ? F<__nv_bfloat16>(__VA_ARGS__)                                          \
                     : (dt) == DM_DT_FP16 ? F<__half>(__VA_ARGS__) : F<float>(__VA_ARGS__))

static int grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    int cap = 132 * 16; /* enough resident blocks to fill an H100/H200; loops cover the rest */
    return (int)(b < 1 ? 1 : b > cap ? cap : b);
}

__device__ __forceinline__ float block_sum(float v) { return block_reduce<red_sum>(v); }

/* ---- 8-wide vector access ------------------------------------------------------------------
 * Memory-bound kernels move 8 elements per thread per step: one 16-byte access for 2-byte types,
 * two for fp32. Used when the element count per matrix is a multiple of 8 and the buffers are
 * 16-byte aligned (plan buffers always are); otherwise the scalar loops run. */

template <typename T> struct vec8;
template <> struct vec8<float> {
    static __device__ __forceinline__ void load(const float *p, int64_t i, float v[8])
    {
        float4 a = *(const float4 *)(p + i), b = *(const float4 *)(p + i + 4);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    static __device__ __forceinline__ void store(float *p, int64_t i, const float v[8])
    {
        *(float4 *)(p + i) = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)(p + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
    }
};
template <typename H> struct vec8_16 {
    static __device__ __forceinline__ void load(const H *p, int64_t i, float v[8])
    {
        uint4 u = *(const uint4 *)(p + i);
        const H *h = (const H *)&u;
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = ld(h, k);
    }
    static __device__ __forceinline__ void store(H *p, int64_t i, const float v[8])
    {
        uint4 u;
        H *h = (H *)&u;
#pragma unroll
        for (int k = 0; k < 8; k++) st(h, k, v[k]);
        *(uint4 *)(p + i) = u;
    }
};
template <> struct vec8<__nv_bfloat16> : vec8_16<__nv_bfloat16> {};
template <> struct vec8<__half> : vec8_16<__half> {};

static int vec_ok(const void *a, const void *b, int64_t per_mat)
{
    return per_mat % 8 == 0 && ((uintptr_t)a | (uintptr_t)(b ? b : a)) % 16 == 0;
}

/* ---- normalization ------------------------------------------------------------------------ */

#define NORM_THREADS 256

/* Blocks per matrix: about 32 elements per thread, at most 1024 blocks. */
int nsk_norm_blocks(int64_t per_mat)
{
    int64_t b = (per_mat + NORM_THREADS * 32 - 1) / (NORM_THREADS * 32);
    return (int)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

/* With scal != NULL (one matrix): the last block to finish also turns the partial sums into
 * the scalars of a plan that folds the normalization into its first products:
 * inv = 1 / (sqrt(sum) + eps); scal = {inv^2, 0, inv, a0 * inv}; the partials are summed as
 * k_normalize sums them (same order, same result). cnt counts finished blocks; reset to 0. */
template <typename T, int VEC>
__global__ void k_sumsq(const T *x, int64_t per_mat, float *partial, int nblk, unsigned *cnt,
                        float *scal, float eps, float a0)
{
    int b = blockIdx.y;
    const T *xm = x + (int64_t)b * per_mat;
    float acc = 0.f;
    if (VEC) {
        for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < per_mat;
             i += (int64_t)nblk * blockDim.x * 8) {
            float v[8];
            vec8<T>::load(xm, i, v);
#pragma unroll
            for (int k = 0; k < 8; k++) acc += v[k] * v[k];
        }
    } else {
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < per_mat;
             i += (int64_t)nblk * blockDim.x) {
            float v = ld(xm, i);
            acc += v * v;
        }
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[(int64_t)b * nblk + blockIdx.x] = acc;
    if (!scal) return;
    __shared__ int last;
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(cnt, 1u) == (unsigned)nblk - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float v = 0.f;
    for (int i = threadIdx.x; i < nblk; i += blockDim.x) v += __ldcg(&partial[i]);
    v = block_sum(v);
    if (threadIdx.x == 0) {
        float inv = 1.f / (sqrtf(v) + eps);
        scal[0] = inv * inv;
        scal[1] = 0.f;
        scal[2] = inv;
        scal[3] = a0 * inv;
        *cnt = 0;
    }
}

template <typename T>
static int launch_sumsq(const void *x, int64_t per_mat, int batch, float *partial, int nblk,
                        unsigned *cnt, float *scal, float eps, float a0, cudaStream_t s)
{
    dim3 g(nblk, batch);
    if (vec_ok(x, NULL, per_mat))
        k_sumsq<T, 1><<<g, NORM_THREADS, 0, s>>>((const T *)x, per_mat, partial, nblk, cnt, scal, eps, a0);
    else
        k_sumsq<T, 0><<<g, NORM_THREADS, 0, s>>>((const T *)x, per_mat, partial, nblk, cnt, scal, eps, a0);
    return 0;
}

int nsk_sumsq_partial(const void *x, dm_dtype dt, int64_t per_mat, int batch, float *partial,
                      int nblk, cudaStream_t s, dm_err *err)
{
    NS_DISPATCH(dt, launch_sumsq, x, per_mat, batch, partial, nblk, NULL, NULL, 0.f, 0.f, s);
    NS_LAUNCHED();
    return 0;
}

int nsk_sumsq_scalars(const void *x, dm_dtype dt, int64_t per_mat, float *partial, int nblk,
                      unsigned *cnt, float *scal, float eps, float a0, cudaStream_t s, dm_err *err)
{
    NS_DISPATCH(dt, launch_sumsq, x, per_mat, 1, partial, nblk, cnt, scal, eps, a0, s);
    NS_LAUNCHED();
    return 0;
}

template <typename TI, typename TO, int VEC>
__global__ void k_normalize(const TI *x, TO *y, int64_t per_mat, const float *partial, int nblk,
                            int nblk_here, float eps)
{
    int b = blockIdx.y;
    __shared__ float inv;
    float v = 0.f;
    for (int i = threadIdx.x; i < nblk; i += blockDim.x) v += partial[(int64_t)b * nblk + i];
    v = block_sum(v);
    if (threadIdx.x == 0) inv = 1.f / (sqrtf(v) + eps);
    __syncthreads();
    float sc = inv;
    const TI *xm = x + (int64_t)b * per_mat;
    TO *ym = y + (int64_t)b * per_mat;
    if (VEC) {
        for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < per_mat;
             i += (int64_t)nblk_here * blockDim.x * 8) {
            float w[8];
            vec8<TI>::load(xm, i, w);
#pragma unroll
            for (int k = 0; k < 8; k++) w[k] *= sc;
            vec8<TO>::store(ym, i, w);
        }
    } else {
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < per_mat;
             i += (int64_t)nblk_here * blockDim.x)
            st(ym, i, ld(xm, i) * sc);
    }
}

template <typename TI, typename TO>
static void launch_norm_io(const void *x, void *y, int64_t per_mat, int batch,
                           const float *partial, int nblk, float eps, cudaStream_t s)
{
    int vec = vec_ok(x, y, per_mat);
    int nb = grid_for((per_mat + 31) / 32, NORM_THREADS);
    dim3 g(nb, batch);
    if (vec)
        k_normalize<TI, TO, 1><<<g, NORM_THREADS, 0, s>>>((const TI *)x, (TO *)y, per_mat, partial, nblk, nb, eps);
    else
        k_normalize<TI, TO, 0><<<g, NORM_THREADS, 0, s>>>((const TI *)x, (TO *)y, per_mat, partial, nblk, nb, eps);
}

template <typename TI>
static int launch_norm_in(const void *x, void *y, dm_dtype dto, int64_t per_mat, int batch,
                          const float *partial, int nblk, float eps, cudaStream_t s)
{
    if (dto == DM_DT_BF16) launch_norm_io<TI, __nv_bfloat16>(x, y, per_mat, batch, partial, nblk, eps, s);
    else if (dto == DM_DT_FP16) launch_norm_io<TI, __half>(x, y, per_mat, batch, partial, nblk, eps, s);
    else launch_norm_io<TI, float>(x, y, per_mat, batch, partial, nblk, eps, s);
    return 0;
}

int nsk_normalize(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t per_mat,
                  int batch, const float *partial, int nblk, float eps, cudaStream_t s,
                  dm_err *err)
{
    NS_DISPATCH(dt_in, launch_norm_in, x, y, dt_out, per_mat, batch, partial, nblk, eps, s);
    NS_LAUNCHED();
    return 0;
}

extern "C" int ns_normalize(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out,
                            int64_t per_mat, int batch, float eps, ns_stream s, dm_err *err)
{
    int nblk = nsk_norm_blocks(per_mat);
    float *partial = NULL;
    NS_CUDA(cudaMalloc((void **)&partial, sizeof(float) * (size_t)nblk * batch));
    int rc = nsk_sumsq_partial(x, dt_in, per_mat, batch, partial, nblk, (cudaStream_t)s, err) ||
             nsk_normalize(x, dt_in, y, dt_out, per_mat, batch, partial, nblk, eps, (cudaStream_t)s, err);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)s);
    cudaFree(partial);
    if (rc) return -1;
    if (e != cudaSuccess) return dm_err_set(err, "ns_normalize: %s", cudaGetErrorString(e));
    return 0;
}

/* ---- diagonal, mirror, conversion --------------------------------------------------------- */

template <typename T>
__global__ void k_add_diag(T *a, int64_t m, float alpha)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    T *am = a + (int64_t)blockIdx.y * m * m;
    if (i < m) st(am, i + i * m, ld(am, i + i * m) + alpha);
}

template <typename T>
static int launch_add_diag(void *a, int64_t m, int batch, float alpha, cudaStream_t s)
{
    k_add_diag<T><<<dim3((unsigned)((m + 255) / 256), batch), 256, 0, s>>>((T *)a, m, alpha);
    return 0;
}

int nsk_add_diag(void *a, dm_dtype dt, int64_t m, int batch, float alpha, cudaStream_t s,
                 dm_err *err)
{
    NS_DISPATCH(dt, launch_add_diag, a, m, batch, alpha, s);
    NS_LAUNCHED();
    return 0;
}

/* Tiled transpose copy restricted to the strictly-upper blocks. The element written, (r, c)
 * with blk(r) < blk(c), comes from (c, r), which lies in a strictly-lower block: reads and
 * writes never touch the same element, so tiles need no ordering between them. 64 x 64 tiles;
 * the block index of each of the tile's 64 rows and 64 columns is computed once into shared
 * memory (integer division per element cost more than the memory traffic); the tile is held
 * in 32-bit words with a padded row, so the transposed read is free of bank conflicts. */
template <typename U>
__global__ void k_mirror(U *a, int m, int bs)
{
    __shared__ uint32_t tile[64][65];
    __shared__ int rb[64], cb[64];
    int r0 = blockIdx.y * 64, c0 = blockIdx.x * 64;
    int cmax = c0 + 63 < m ? c0 + 63 : m - 1;
    if (r0 / bs >= cmax / bs) return; /* no element of this tile lies in an upper block */
    U *am = a + (int64_t)blockIdx.z * m * m;
    int tx = threadIdx.x, lin = threadIdx.y * blockDim.x + tx;
    if (lin < 64) rb[lin] = (r0 + lin) / bs;
    else if (lin < 128) cb[lin - 64] = (c0 + lin - 64) / bs;
    __syncthreads();
    for (int ty = threadIdx.y; ty < 64; ty += blockDim.y) {
        /* source element (c0+tx, r0+ty), needed when blk(r0+ty) < blk(c0+tx) */
        int sr = c0 + tx, sc = r0 + ty;
        if (sr < m && sc < m && rb[ty] < cb[tx]) tile[ty][tx] = am[sr + (int64_t)sc * m];
    }
    __syncthreads();
    for (int ty = threadIdx.y; ty < 64; ty += blockDim.y) {
        int r = r0 + tx, c = c0 + ty;
        if (r < m && c < m && rb[tx] < cb[ty]) am[r + (int64_t)c * m] = (U)tile[tx][ty];
    }
}

/* The same for 2-byte elements and even m, moving 32-bit words (two elements of a column) in
 * both directions: half the memory instructions of k_mirror. A 64 x 64 tile per block of 32 x 8
 * threads; only the tiles on or above the diagonal are launched (t (t + 1) / 2 of them). Word
 * w of source column j holds rows 2w and 2w+1; the destination word of column c pairs the same
 * row of two source columns, assembled from shared memory. bs is a multiple of 8 (plans make
 * leaves of whole 16-byte rows), so both rows of a word lie in the same block. */
__global__ void k_mirror2(uint32_t *a, int m, int bs, int t)
{
    __shared__ uint16_t tile[64][66]; /* [source column - r0][source row - c0] */
    __shared__ int rb[64], cb[64];
    /* blockIdx.x -> (tile row ti <= tile column tj) */
    int k = blockIdx.x, ti = 0, len = t;
    while (k >= len) k -= len, ti++, len--;
    int tj = ti + k;
    int r0 = ti * 64, c0 = tj * 64;
    int cmax = c0 + 63 < m ? c0 + 63 : m - 1;
    if (r0 / bs >= cmax / bs) return; /* no element of this tile lies in an upper block */
    int mw = m / 2;
    uint32_t *am = a + (int64_t)blockIdx.y * m * mw;
    int tx = threadIdx.x, lin = threadIdx.y * 32 + tx;
    if (lin < 64) rb[lin] = (r0 + lin) / bs;
    else if (lin < 128) cb[lin - 64] = (c0 + lin - 64) / bs;
    __syncthreads();
    /* load: source column r0 + j, rows c0 + 2tx, c0 + 2tx + 1 (one word). A tile wholly inside
     * the matrix and above the block diagonal (the common case) loads its 8 words per thread
     * unconditionally into registers first, so the loads overlap. */
    if (r0 + 63 < m && c0 + 63 < m && (r0 + 63) / bs < c0 / bs) {
        uint32_t w[8];
#pragma unroll
        for (int q = 0; q < 8; q++) w[q] = am[(int64_t)(r0 + threadIdx.y + 8 * q) * mw + c0 / 2 + tx];
#pragma unroll
        for (int q = 0; q < 8; q++) {
            tile[threadIdx.y + 8 * q][2 * tx] = (uint16_t)(w[q] & 0xffffu);
            tile[threadIdx.y + 8 * q][2 * tx + 1] = (uint16_t)(w[q] >> 16);
        }
    } else {
        for (int j = threadIdx.y; j < 64; j += 8) {
            int sc = r0 + j, sr = c0 + 2 * tx;
            if (sc < m && sr < m && rb[j] < cb[2 * tx]) {
                uint32_t w = am[(int64_t)sc * mw + sr / 2];
                tile[j][2 * tx] = (uint16_t)(w & 0xffffu);
                tile[j][2 * tx + 1] = (uint16_t)(w >> 16);
            }
        }
    }
    __syncthreads();
    /* store: destination column c0 + i, rows r0 + 2tx, r0 + 2tx + 1 = source (c0 + i, r0 + 2tx (+1)) */
    for (int i = threadIdx.y; i < 64; i += 8) {
        int c = c0 + i, r = r0 + 2 * tx;
        if (c < m && r < m && rb[2 * tx] < cb[i])
            am[(int64_t)c * mw + r / 2] = (uint32_t)tile[2 * tx][i] | ((uint32_t)tile[2 * tx + 1][i] << 16);
    }
}

int nsk_mirror_blocks(void *a, dm_dtype dt, int64_t m, int64_t bs, int batch, cudaStream_t s,
                      dm_err *err)
{
    unsigned t = (unsigned)((m + 63) / 64);
    dim3 g(t, t, batch), b(64, 8);
    if (dm_dtype_size(dt) == 2 && m % 2 == 0 && bs % 2 == 0 && ((uintptr_t)a & 3) == 0)
        k_mirror2<<<dim3(t * (t + 1) / 2, batch), dim3(32, 8), 0, s>>>((uint32_t *)a, (int)m, (int)bs, (int)t);
    else if (dm_dtype_size(dt) == 2)
        k_mirror<uint16_t><<<g, b, 0, s>>>((uint16_t *)a, (int)m, (int)bs);
    else
        k_mirror<uint32_t><<<g, b, 0, s>>>((uint32_t *)a, (int)m, (int)bs);
    NS_LAUNCHED();
    return 0;
}

template <typename TI, typename TO, int VEC>
__global__ void k_convert(const TI *x, TO *y, int64_t n)
{
    if (VEC) {
        for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n;
             i += (int64_t)gridDim.x * blockDim.x * 8) {
            float w[8];
            vec8<TI>::load(x, i, w);
            vec8<TO>::store(y, i, w);
        }
    } else {
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (int64_t)gridDim.x * blockDim.x)
            st(y, i, ld(x, i));
    }
}

template <typename TI, typename TO>
static void launch_convert_io(const void *x, void *y, int64_t n, cudaStream_t s)
{
    if (vec_ok(x, y, n))
        k_convert<TI, TO, 1><<<grid_for((n + 7) / 8, 256), 256, 0, s>>>((const TI *)x, (TO *)y, n);
    else
        k_convert<TI, TO, 0><<<grid_for(n, 256), 256, 0, s>>>((const TI *)x, (TO *)y, n);
}

template <typename TI>
static int launch_convert_in(const void *x, void *y, dm_dtype dto, int64_t n, cudaStream_t s)
{
    if (dto == DM_DT_BF16) launch_convert_io<TI, __nv_bfloat16>(x, y, n, s);
    else if (dto == DM_DT_FP16) launch_convert_io<TI, __half>(x, y, n, s);
    else launch_convert_io<TI, float>(x, y, n, s);
    return 0;
}

int nsk_convert(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t n,
                cudaStream_t s, dm_err *err)
{
    NS_DISPATCH(dt_in, launch_convert_in, x, y, dt_out, n, s);
    NS_LAUNCHED();
    return 0;
}

extern "C" int ns_convert(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t n,
                          ns_stream s, dm_err *err)
{
    return nsk_convert(x, dt_in, y, dt_out, n, (cudaStream_t)s, err);
}

/* ---- difference norms (device-side checks) ------------------------------------------------ */

template <typename T>
__global__ void k_diff_norms(const T *a, const T *b, int64_t n, double *out)
{
    double d2 = 0, r2 = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double x = ld(a, i), y = ld(b, i);
        if (!isfinite(x) || !isfinite(y)) d2 += NAN;
        d2 += (x - y) * (x - y);
        r2 += y * y;
    }
    for (int o = 16; o > 0; o >>= 1) {
        d2 += __shfl_xor_sync(0xffffffffu, d2, o);
        r2 += __shfl_xor_sync(0xffffffffu, r2, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out[0], d2);
        atomicAdd(&out[1], r2);
    }
}

template <typename T>
static int launch_diff(const void *a, const void *b, int64_t n, double *out, cudaStream_t s)
{
    k_diff_norms<T><<<grid_for(n, 256), 256, 0, s>>>((const T *)a, (const T *)b, n, out);
    return 0;
}

int nsk_diff_norms(const void *a, const void *b, dm_dtype dt, int64_t n, double *diff2,
                   double *ref2, cudaStream_t s, dm_err *err)
{
    double *d = NULL, h[2];
    NS_CUDA(cudaMalloc((void **)&d, 2 * sizeof(double)));
    cudaError_t e = cudaMemsetAsync(d, 0, 2 * sizeof(double), s);
    if (e == cudaSuccess) {
        NS_DISPATCH(dt, launch_diff, a, b, n, d, s);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaFree(d);
    if (e != cudaSuccess) return dm_err_set(err, "diff norms: %s", cudaGetErrorString(e));
    *diff2 = h[0];
    *ref2 = h[1];
    return 0;
}

extern "C" int ns_rel_diff(const void *a, const void *b, dm_dtype dt, int64_t n, ns_stream s,
                           double *rel, dm_err *err)
{
    double d2 = 0, r2 = 0;
    if (nsk_diff_norms(a, b, dt, n, &d2, &r2, (cudaStream_t)s, err)) return -1;
    *rel = sqrt(d2) / (r2 > 0 ? sqrt(r2) : 1.0);
    return 0;
}

extern "C" int ns_copy_d2d(void *dst, const void *src, size_t bytes, ns_stream s, dm_err *err)
{
    NS_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)s));
    return 0;
}

/* ---- optimizer kernels -------------------------------------------------------------------- */

template <typename TU>
__global__ void k_muon_momentum(const float *g, const float *buf_in, float *buf_out, TU *u,
                                int64_t n, float mu, int nesterov)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float gi = g[i], b = mu * buf_in[i] + gi;
        buf_out[i] = b;
        st(u, i, nesterov ? gi + mu * b : b);
    }
}

template <typename TU>
static int launch_momentum(const float *g, const float *buf_in, float *buf_out, void *u, int64_t n,
                           float mu, int nest, cudaStream_t s)
{
    k_muon_momentum<TU><<<grid_for(n, 256), 256, 0, s>>>(g, buf_in, buf_out, (TU *)u, n, mu, nest);
    return 0;
}

extern "C" int ns_muon_momentum(const float *g, const float *buf_in, float *buf_out, void *u,
                                dm_dtype u_dt, int64_t n, float mu, int nesterov, ns_stream s,
                                dm_err *err)
{
    if (n <= 0) return 0;
    NS_DISPATCH(u_dt, launch_momentum, g, buf_in, buf_out, u, n, mu, nesterov, (cudaStream_t)s);
    NS_LAUNCHED();
    return 0;
}

template <typename TO>
__global__ void k_muon_apply(const float *w_in, float *w_out, __nv_bfloat16 *wb, const TO *o, int64_t n,
                             float decay, float step)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float w = w_in[i] * decay - step * ld(o, i);
        w_out[i] = w;
        if (wb) wb[i] = __float2bfloat16_rn(w);
    }
}

template <typename TO>
static int launch_apply(const float *w_in, float *w_out, void *wb, const void *o, int64_t n, float decay,
                        float step, cudaStream_t s)
{
    k_muon_apply<TO><<<grid_for(n, 256), 256, 0, s>>>(w_in, w_out, (__nv_bfloat16 *)wb, (const TO *)o, n, decay,
                                                      step);
    return 0;
}

extern "C" int ns_muon_apply(const float *w_in, float *w_out, void *w_bf16, const void *o, dm_dtype o_dt,
                             int64_t n, float lr, float wd, float scale, ns_stream s, dm_err *err)
{
    if (n <= 0) return 0;
    NS_DISPATCH(o_dt, launch_apply, w_in, w_out, w_bf16, o, n, 1.f - lr * wd, lr * scale, (cudaStream_t)s);
    NS_LAUNCHED();
    return 0;
}

/* The state is read from the *_in arrays and written to the *_out arrays, element by element
 * by the thread that read it, so in == out (in place) is valid. */
__global__ void k_adamw(const float4 *w_in, float4 *w_out, uint2 *wb, const float4 *g, const float4 *m_in,
                        float4 *m_out, const float4 *v_in, float4 *v_out, int64_t n4, float lr,
                        float b1, float b2, float eps, float decay, float bc1, float bc2)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (int64_t)gridDim.x * blockDim.x) {
        float4 gi = g[i], mi = m_in[i], vi = v_in[i], wi = w_in[i];
#define ADAMW_LANE(c)                                                                         \
    mi.c = b1 * mi.c + (1.f - b1) * gi.c;                                                     \
    vi.c = b2 * vi.c + (1.f - b2) * gi.c * gi.c;                                              \
    wi.c = wi.c * decay - lr * (mi.c / bc1) / (sqrtf(vi.c / bc2) + eps);
        ADAMW_LANE(x) ADAMW_LANE(y) ADAMW_LANE(z) ADAMW_LANE(w)
#undef ADAMW_LANE
        m_out[i] = mi;
        v_out[i] = vi;
        w_out[i] = wi;
        if (wb) {
            uint2 u;
            __nv_bfloat16 *h = (__nv_bfloat16 *)&u;
            h[0] = __float2bfloat16_rn(wi.x), h[1] = __float2bfloat16_rn(wi.y);
            h[2] = __float2bfloat16_rn(wi.z), h[3] = __float2bfloat16_rn(wi.w);
            wb[i] = u;
        }
    }
}

__global__ void k_adamw_tail(const float *w_in, float *w_out, __nv_bfloat16 *wb, const float *g,
                             const float *m_in, float *m_out, const float *v_in, float *v_out, int64_t from,
                             int64_t n, float lr, float b1, float b2, float eps, float decay,
                             float bc1, float bc2)
{
    int64_t i = from + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = b1 * m_in[i] + (1.f - b1) * g[i], vi = b2 * v_in[i] + (1.f - b2) * g[i] * g[i];
    m_out[i] = mi;
    v_out[i] = vi;
    float w = w_in[i] * decay - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    w_out[i] = w;
    if (wb) wb[i] = __float2bfloat16_rn(w);
}

extern "C" int ns_adamw(const float *w_in, float *w_out, void *w_bf16, const float *g, const float *m_in,
                        float *m_out, const float *v_in, float *v_out, int64_t n, float lr,
                        float b1, float b2, float eps, float wd, int step, ns_stream s,
                        dm_err *err)
{
    if (n <= 0) return 0;
    if (step < 1) return dm_err_set(err, "ns_adamw: step must be >= 1 (got %d)", step);
    float bc1 = 1.f - powf(b1, (float)step), bc2 = 1.f - powf(b2, (float)step);
    float decay = 1.f - lr * wd;
    int aligned = ((uintptr_t)w_in | (uintptr_t)w_out | (uintptr_t)g | (uintptr_t)m_in |
                   (uintptr_t)m_out | (uintptr_t)v_in | (uintptr_t)v_out) % 16 == 0 &&
                  (uintptr_t)w_bf16 % 8 == 0;
    int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0)
        k_adamw<<<grid_for(n4, 256), 256, 0, (cudaStream_t)s>>>(
            (const float4 *)w_in, (float4 *)w_out, (uint2 *)w_bf16, (const float4 *)g, (const float4 *)m_in,
            (float4 *)m_out, (const float4 *)v_in, (float4 *)v_out, n4, lr, b1, b2, eps, decay,
            bc1, bc2);
    if (n4 * 4 < n) /* the tail (or everything, when a pointer is not 16-byte aligned) */
        k_adamw_tail<<<(unsigned)((n - n4 * 4 + 255) / 256), 256, 0, (cudaStream_t)s>>>(
            w_in, w_out, (__nv_bfloat16 *)w_bf16, g, m_in, m_out, v_in, v_out, n4 * 4, n, lr, b1, b2, eps, decay, bc1,
            bc2);
    NS_LAUNCHED();
    return 0;
}

/* ---- fills -------------------------------------------------------------------------------- */

__device__ __forceinline__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

template <typename T>
__global__ void k_fill_random(T *x, int64_t n, uint64_t seed, float scale)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = splitmix64(seed ^ splitmix64((uint64_t)i));
        float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f), u2 = ((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2); /* Box-Muller */
        st(x, i, z * scale);
    }
}

template <typename T>
static int launch_fill(void *x, int64_t n, uint64_t seed, float scale, cudaStream_t s)
{
    k_fill_random<T><<<grid_for(n, 256), 256, 0, s>>>((T *)x, n, seed, scale);
    return 0;
}

extern "C" int ns_fill_random(void *dst, dm_dtype dt, int64_t n, uint64_t seed, float scale,
                              ns_stream s, dm_err *err)
{
    if (n <= 0) return 0;
    NS_DISPATCH(dt, launch_fill, dst, n, seed, scale, (cudaStream_t)s);
    NS_LAUNCHED();
    return 0;
}

extern "C" int ns_fill_poison(void *dst, dm_dtype dt, int64_t n, ns_stream s, dm_err *err)
{
    /* 0xFF bytes are a NaN in bf16, fp16 and fp32 alike */
    NS_CUDA(cudaMemsetAsync(dst, 0xFF, (size_t)n * dm_dtype_size(dt), (cudaStream_t)s));
    return 0;
}

/* ---- buffers, copies, streams, timing ----------------------------------------------------- */

extern "C" int ns_dev_alloc(void **p, size_t bytes, dm_err *err)
{
    *p = NULL;
    NS_CUDA(cudaMalloc(p, bytes ? bytes : 1));
    return 0;
}

extern "C" void ns_dev_free(void *p)
{
    if (p) cudaFree(p);
}

extern "C" int ns_copy_h2d(void *dst, const void *src, size_t bytes, dm_err *err)
{
    NS_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

extern "C" int ns_copy_d2h(void *dst, const void *src, size_t bytes, dm_err *err)
{
    NS_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

template <typename T>
__global__ void k_from_double(const double *x, T *y, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st(y, i, (float)x[i]);
}
template <typename T>
__global__ void k_to_double(const T *x, double *y, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = ld(x, i);
}
template <typename T>
static int launch_from_double(const double *x, void *y, int64_t n)
{
    k_from_double<T><<<grid_for(n, 256), 256>>>(x, (T *)y, n);
    return 0;
}
template <typename T>
static int launch_to_double(const void *x, double *y, int64_t n)
{
    k_to_double<T><<<grid_for(n, 256), 256>>>((const T *)x, y, n);
    return 0;
}

extern "C" int ns_upload(void *dst, dm_dtype dt, const double *src, int64_t n, dm_err *err)
{
    double *d = NULL;
    NS_CUDA(cudaMalloc((void **)&d, (size_t)n * sizeof(double)));
    cudaError_t e = cudaMemcpy(d, src, (size_t)n * sizeof(double), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        NS_DISPATCH(dt, launch_from_double, d, dst, n);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    cudaFree(d);
    if (e != cudaSuccess) return dm_err_set(err, "ns_upload: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" int ns_download(double *dst, const void *src, dm_dtype dt, int64_t n, dm_err *err)
{
    double *d = NULL;
    NS_CUDA(cudaDeviceSynchronize());
    NS_CUDA(cudaMalloc((void **)&d, (size_t)n * sizeof(double)));
    NS_DISPATCH(dt, launch_to_double, src, d, n);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(dst, d, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess) return dm_err_set(err, "ns_download: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" int ns_sync(ns_stream s, dm_err *err)
{
    NS_CUDA(cudaStreamSynchronize((cudaStream_t)s));
    NS_CUDA(cudaGetLastError());
    return 0;
}

extern "C" int ns_stream_create(ns_stream *s, dm_err *err)
{
    cudaStream_t st;
    NS_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    *s = (ns_stream)st;
    return 0;
}

extern "C" void ns_stream_destroy(ns_stream s)
{
    if (s) cudaStreamDestroy((cudaStream_t)s);
}

/* Holds the stream for ns nanoseconds (each block's one thread spinning on the global timer). When
 * out is not NULL every block also writes, as it ends, its multiprocessor's id, the global timer
 * and that SM's cycle counter (out[3 * block + 0..2]); k_clk_mark does the same after the timed
 * calls. One SM's cycles between the two marks over the nanoseconds between them is the SM clock
 * averaged over the whole timed window (the clock is one for all SMs; a cycle counter is per SM,
 * hence the pairing by SM id; the largest over the SMs, dm_clock_window_mhz). Launched with twice as
 * many one-thread blocks as the GPU has SMs, so that nearly every SM holds a block of each. Block
 * 0 spins, the others sleep between reads of the timer: next to nothing of the GPU's power. */
__device__ static void clk_mark(unsigned long long *out)
{
    unsigned long long t, c, sm;
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    c = clock64();
    sm = smid;
    out[3 * blockIdx.x] = sm, out[3 * blockIdx.x + 1] = t, out[3 * blockIdx.x + 2] = c;
}

__global__ void k_hold(long long ns, unsigned long long *out)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        if (blockIdx.x) __nanosleep(2000); /* the markers wait asleep: a rest stays a rest */
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < ns);
    if (out) clk_mark(out);
}

__global__ void k_clk_mark(unsigned long long *out) { clk_mark(out); }

/* The clock of the last ns_time_events's timed calls (ns_time_last_mhz): the marks the hold leaves
 * just before them and k_clk_mark just after them (a device buffer made once: 2 x g_clk_blocks
 * marks of 3 words). */
static unsigned long long *g_clk_dev;
static int g_clk_blocks;
static double g_clk_mhz;

static double g_rest_us; /* ns_time_set_rest_us */

extern "C" void ns_time_set_rest_us(double us) { g_rest_us = us > 0 ? us : 0; }

extern "C" double ns_time_last_mhz(void) { return g_clk_mhz; }

static double host_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

extern "C" int ns_time_events(ns_enqueue_fn fn, void *arg, ns_stream s, int warmup, int reps,
                              double *times_us, dm_err *err)
{
    cudaEvent_t *ev = NULL;
    int rc = -1, made = 0;
    double host = 0; /* the host time to enqueue one call: the last warm-up's (the first pays set-up) */
    for (int i = 0; i < warmup; i++) {
        double t0 = host_us();
        if (fn(arg, s, err)) return -1;
        host = host_us() - t0;
    }
    ev = (cudaEvent_t *)dm_malloc(sizeof(cudaEvent_t) * (size_t)(reps + 1), err);
    if (!ev) return -1;
    for (; made <= reps; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) {
            dm_err_set(err, "cudaEventCreate failed");
            goto out;
        }
    /* back-to-back: rep i spans ev[i]..ev[i+1], as in a step where NS calls follow each other;
     * the stream held first for longer than the host takes to enqueue every rep, so that the
     * GPU never waits for a launch: the host is ahead, as it is in a step where the GPU is busy
     * with earlier ops (what matters for calls launched kernel by kernel, --no-graph; a graph
     * replay costs the host little) */
    g_clk_mhz = 0;
    if (!g_clk_dev) {
        int dev = 0, sms = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0) {
            g_clk_blocks = 2 * sms > 1024 ? 1024 : 2 * sms;
            if (cudaMalloc((void **)&g_clk_dev, 6 * (size_t)g_clk_blocks * sizeof *g_clk_dev) != cudaSuccess)
                g_clk_dev = NULL; /* no clock read (the row's clock then 0: not known) */
        }
        (void)cudaGetLastError();
    }
    if (cudaStreamSynchronize((cudaStream_t)s) != cudaSuccess) goto cuda_fail;
    {
        double hold_us = 1.5 * host * reps + 50;
        if (hold_us > 2e5) hold_us = 2e5;
        if (hold_us < g_rest_us) hold_us = g_rest_us; /* a rested card (--rest-ms) */
        k_hold<<<g_clk_dev ? g_clk_blocks : 1, 1, 0, (cudaStream_t)s>>>((long long)(1e3 * hold_us), g_clk_dev);
    }
    if (cudaEventRecord(ev[0], (cudaStream_t)s) != cudaSuccess) goto cuda_fail;
    for (int i = 0; i < reps; i++) {
        if (fn(arg, s, err)) goto out;
        if (cudaEventRecord(ev[i + 1], (cudaStream_t)s) != cudaSuccess) goto cuda_fail;
    }
    /* the marks right after the timed calls (outside their events) */
    if (g_clk_dev) k_clk_mark<<<g_clk_blocks, 1, 0, (cudaStream_t)s>>>(g_clk_dev + 3 * g_clk_blocks);
    if (cudaEventSynchronize(ev[reps]) != cudaSuccess) goto cuda_fail;
    if (g_clk_dev) {
        uint64_t w[6 * 1024]; /* (the device words are unsigned long long: the same 8 bytes) */
        size_t words = 6 * (size_t)g_clk_blocks;
        if (cudaMemcpyAsync(w, g_clk_dev, words * sizeof *w, cudaMemcpyDeviceToHost, (cudaStream_t)s) != cudaSuccess ||
            cudaStreamSynchronize((cudaStream_t)s) != cudaSuccess)
            goto cuda_fail;
        double lo, med;
        g_clk_mhz = dm_clock_window_mhz(w, w + 3 * g_clk_blocks, g_clk_blocks, &lo, &med);
        static int debug = -1; /* DMUON_CLOCK_DEBUG set: the SMs' spread on stderr */
        if (debug < 0) debug = getenv("DMUON_CLOCK_DEBUG") != NULL;
        if (debug && g_clk_mhz > 0)
            fprintf(stderr, "# clock over the timed calls: SMs min %.0f median %.0f max %.0f MHz\n", lo, med, g_clk_mhz);
    }
    for (int i = 0; i < reps; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, ev[i], ev[i + 1]) != cudaSuccess) goto cuda_fail;
        times_us[i] = ms * 1e3;
    }
    rc = 0;
    goto out;
cuda_fail:
    dm_err_set(err, "event timing: %s", cudaGetErrorString(cudaGetLastError()));
out:
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    return rc;
}
