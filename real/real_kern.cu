/* real_kern.cu: the GPU executor's own small kernels around the proxy workload (residual and
 * loss, 1-D parameter forward/backward, the non-finite checks that ride on a bf16 -> fp32
 * conversion), behind C launchers that take a stream and return 0 or -1 with *err
 * (real_kern.h). NS, the optimizer updates and plain conversions are the kernels' (ns_cuda.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "real_kern.h"

static uint64_t real_k_mix64_host(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int grid(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (int)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

#define LAUNCHED(what)                                                                         \
    do {                                                                                       \
        cudaError_t e_ = cudaGetLastError();                                                   \
        if (e_ != cudaSuccess)                                                                 \
            return dm_err_set(err, "%s: %s (%s:%d)", what, cudaGetErrorString(e_), __FILE__, __LINE__); \
        return 0;                                                                              \
    } while (0)

/* R = R - Y (bf16, in place); *loss += scale * sum R^2 (one atomic per block) */
__global__ void k_residual(__nv_bfloat16 *R, const __nv_bfloat16 *Y, int64_t n, float scale, float *loss)
{
    __shared__ float part[32];
    float acc = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float r = __bfloat162float(R[i]) - __bfloat162float(Y[i]);
        R[i] = __float2bfloat16_rn(r);
        acc += r * r;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) s += part[w];
        atomicAdd(loss, s * scale);
    }
}

extern "C" int real_k_residual(void *R, const void *Y, int64_t n, float scale, float *loss, void *stream, dm_err *err)
{
    k_residual<<<grid(n, 256), 256, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)R, (const __nv_bfloat16 *)Y, n,
                                                              scale, loss);
    LAUNCHED("residual kernel");
}

/* 1-D params: R[t, i] = X[t, i] * w[i] (T x n) */
__global__ void k_fwd1d(const __nv_bfloat16 *X, const __nv_bfloat16 *w, __nv_bfloat16 *R, int64_t T, int64_t n)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < T * n; k += (int64_t)gridDim.x * blockDim.x)
        R[k] = __float2bfloat16_rn(__bfloat162float(X[k]) * __bfloat162float(w[k % n]));
}

extern "C" int real_k_fwd1d(const void *X, const void *w, void *R, int64_t T, int64_t n, void *stream, dm_err *err)
{
    k_fwd1d<<<grid(T * n, 256), 256, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)X, (const __nv_bfloat16 *)w,
                                                                (__nv_bfloat16 *)R, T, n);
    LAUNCHED("1-D forward kernel");
}

/* g[i] = s * sum_t R[t, i] X[t, i] */
__global__ void k_bwd1d(const __nv_bfloat16 *R, const __nv_bfloat16 *X, __nv_bfloat16 *g, int64_t T, int64_t n, float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float acc = 0;
        for (int64_t t = 0; t < T; t++) acc += __bfloat162float(R[t * n + i]) * __bfloat162float(X[t * n + i]);
        g[i] = __float2bfloat16_rn(s * acc);
    }
}

extern "C" int real_k_bwd1d(const void *R, const void *X, void *g, int64_t T, int64_t n, float s, void *stream,
                            dm_err *err)
{
    k_bwd1d<<<grid(n, 128), 128, 0, (cudaStream_t)stream>>>((const __nv_bfloat16 *)R, (const __nv_bfloat16 *)X,
                                                            (__nv_bfloat16 *)g, T, n, s);
    LAUNCHED("1-D backward kernel");
}

/* The non-finite check, riding on a bf16 -> fp32 conversion: 8 elements per thread and step (one
 * 16-byte access of bf16, two of fp32) when both pointers are 16-byte aligned; the tail past the
 * last multiple of 8, and unaligned ranges, go element by element. *flag = max(*flag, code) when
 * a value is not finite (one atomic per thread at most). dst == NULL: the check alone. (Plain
 * conversions are ns_convert's.) */
__device__ __forceinline__ void bf16x8_to_f32(uint4 u, float v[8])
{
    const __nv_bfloat16 *h = (const __nv_bfloat16 *)&u;
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = __bfloat162float(h[k]);
}

template <int VEC>
__global__ void k_bf16_to_f32(const __nv_bfloat16 *a, float *b, int64_t n, int *flag, int code)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    int bad = 0;
    int64_t n8 = VEC ? n / 8 * 8 : 0;
    for (int64_t i = t * 8; i < n8; i += stride * 8) {
        float v[8];
        bf16x8_to_f32(*(const uint4 *)(a + i), v);
#pragma unroll
        for (int k = 0; k < 8; k++) bad |= !isfinite(v[k]);
        if (b) {
            *(float4 *)(b + i) = make_float4(v[0], v[1], v[2], v[3]);
            *(float4 *)(b + i + 4) = make_float4(v[4], v[5], v[6], v[7]);
        }
    }
    for (int64_t i = n8 + t; i < n; i += stride) {
        float v = __bfloat162float(a[i]);
        bad |= !isfinite(v);
        if (b) b[i] = v;
    }
    if (flag && bad) atomicMax(flag, code);
}

static int aligned16(const void *a, const void *b)
{
    return ((uintptr_t)a % 16 == 0) && ((uintptr_t)b % 16 == 0);
}

static int conv_grid(int64_t n) { return grid((n + 7) / 8, 256); }

extern "C" int real_k_bf16_to_f32_check(const void *src, float *dst, int64_t n, int *flag, int code, void *stream,
                                        dm_err *err)
{
    if (n <= 0) return 0;
    const char *what = dst ? "bf16 to fp32 kernel" : "non-finite check kernel";
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)src;
    if (aligned16(src, dst ? (const void *)dst : src))
        k_bf16_to_f32<1><<<conv_grid(n), 256, 0, (cudaStream_t)stream>>>(a, dst, n, flag, code);
    else
        k_bf16_to_f32<0><<<grid(n, 256), 256, 0, (cudaStream_t)stream>>>(a, dst, n, flag, code);
    LAUNCHED(what);
}

extern "C" int real_k_nonfinite(const void *g, int64_t n, int *flag, int code, void *stream, dm_err *err)
{
    return real_k_bf16_to_f32_check(g, NULL, n, flag, code, stream, err);
}

__global__ void k_set(__nv_bfloat16 *g, int64_t i, float v) { g[i] = __float2bfloat16_rn(v); }

extern "C" int real_k_poison(void *g, int64_t i, void *stream, dm_err *err)
{
    return real_k_set(g, i, nanf(""), stream, err);
}

extern "C" int real_k_set(void *g, int64_t i, float v, void *stream, dm_err *err)
{
    k_set<<<1, 1, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)g, i, v);
    LAUNCHED("set-value kernel");
}

/* real_hash_uniform of real_work.c, bit for bit (integer hash; the final conversion is exact) */
__device__ static uint64_t d_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void k_fill_hash(__nv_bfloat16 *X, int64_t T, int64_t w, uint64_t h0, int64_t g0)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < T * w; k += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = d_mix64(h0 ^ (uint64_t)(g0 + k / w));
        h = d_mix64(h ^ (uint64_t)(k % w));
        X[k] = __float2bfloat16_rn((float)((double)(h >> 40) / 8388608.0 - 1.0));
    }
}

extern "C" int real_k_fill_hash(void *X, int64_t T, int64_t w, uint64_t seed, int kind, int64_t param, int64_t g0,
                                void *stream, dm_err *err)
{
    if (T * w <= 0) return 0;
    /* the first two mixing rounds do not depend on the element: on the host */
    uint64_t h = seed ^ real_k_mix64_host((uint64_t)kind * 0x100000001b3ull);
    h = real_k_mix64_host(h);
    h = real_k_mix64_host(h ^ (uint64_t)param);
    k_fill_hash<<<grid(T * w, 256), 256, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)X, T, w, h, g0);
    LAUNCHED("token fill kernel");
}
