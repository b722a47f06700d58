/* block_reduce.cuh: the one block-wide reduction of the kernels (sums and maxima of a float
 * over a thread block), in one fixed order, so that every kernel that reduces is deterministic
 * the same way: a butterfly inside each warp, the warps' results through shared memory, a
 * butterfly of those in warp 0; every thread gets the result. Any block of whole warps, 1-D or
 * 2-D, up to 1024 threads. Used by the NS kernels (ns_elem.cu, ns_mma.cuh) and the step's
 * workload kernels (wk_cuda.cu). */
#ifndef DM_BLOCK_REDUCE_CUH
#define DM_BLOCK_REDUCE_CUH
#include <math.h>

struct red_sum {
    static __device__ __forceinline__ float op(float a, float b) { return a + b; }
    static __device__ __forceinline__ float ident() { return 0.f; }
};
struct red_max {
    static __device__ __forceinline__ float op(float a, float b) { return fmaxf(a, b); }
    static __device__ __forceinline__ float ident() { return -INFINITY; }
};

/* sh: at least 33 floats of shared memory; it may be reused by the next call at once (the
 * first barrier waits for every reader of the previous result). */
template <class R> __device__ __forceinline__ float block_reduce(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = R::op(v, __shfl_xor_sync(0xffffffffu, v, o));
    int tid = threadIdx.x + threadIdx.y * blockDim.x, nw = (blockDim.x * blockDim.y + 31) >> 5;
    int lane = tid & 31, w = tid >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        float x = lane < nw ? sh[lane] : R::ident();
        for (int o = 16; o > 0; o >>= 1) x = R::op(x, __shfl_xor_sync(0xffffffffu, x, o));
        if (lane == 0) sh[32] = x;
    }
    __syncthreads();
    return sh[32];
}

/* The same with its own shared memory (one array per reduction kind). */
template <class R> __device__ __forceinline__ float block_reduce(float v)
{
    __shared__ float sh[33];
    return block_reduce<R>(v, sh);
}

#endif
