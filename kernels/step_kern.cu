/* step_kern.cu: the step's small kernels beside the workload (the non-finite checks that ride on
 * a bf16 -> fp32 conversion, fault injection), behind C launchers that take a stream and return 0
 * or -1 with *err (step_kern.h); the GPU executor runs them, bench kernels and bench work time
 * them. The workload's kernels are kernels/wk_cuda.h's; NS, the
 * optimizer updates and plain conversions ns_cuda.h's. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "step_kern.h"

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

extern "C" int sk_bf16_to_f32_check(const void *src, float *dst, int64_t n, int *flag, int code, void *stream,
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

extern "C" int sk_nonfinite(const void *g, int64_t n, int *flag, int code, void *stream, dm_err *err)
{
    return sk_bf16_to_f32_check(g, NULL, n, flag, code, stream, err);
}

__global__ void k_set(__nv_bfloat16 *g, int64_t i, float v) { g[i] = __float2bfloat16_rn(v); }

extern "C" int sk_poison(void *g, int64_t i, void *stream, dm_err *err)
{
    return sk_set(g, i, nanf(""), stream, err);
}

extern "C" int sk_set(void *g, int64_t i, float v, void *stream, dm_err *err)
{
    k_set<<<1, 1, 0, (cudaStream_t)stream>>>((__nv_bfloat16 *)g, i, v);
    LAUNCHED("set-value kernel");
}
