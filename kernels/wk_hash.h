/* wk_hash.h: the proxy workload's counter hash, one definition for the host (wk_ref.c) and the
 * device (wk_cuda.cu), so the CPU and GPU backends draw bit-identical activations, targets and
 * token ids (wk_ref.h describes it). Static inline and __host__ __device__ under nvcc: the only
 * way one function body serves both compilers. */
#ifndef DM_WK_HASH_H
#define DM_WK_HASH_H
#include <stdint.h>

#ifdef __CUDACC__
#define WK_HD __host__ __device__
#else
#define WK_HD
#endif

/* SplitMix64's finalizer */
static inline WK_HD uint64_t wk_mix64_(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* a row's 32-bit hash from the (seed, kind, param) prefix and the row key */
static inline WK_HD uint32_t wk_row_(uint64_t prefix, int64_t a)
{
    uint64_t h = wk_mix64_(prefix ^ (uint64_t)a);
    return (uint32_t)(h ^ (h >> 32));
}

/* column b of a row: murmur3's 32-bit finalizer, then 24 bits as (i - 2^23) 2^-23 (exact in float) */
static inline WK_HD float wk_col_(uint32_t row, int64_t b)
{
    uint32_t x = row ^ ((uint32_t)b * 0x9e3779b9u);
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return (float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

#endif
