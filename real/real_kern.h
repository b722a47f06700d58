/* real_kern.h: C launchers of the GPU executor's small kernels (real_kern.cu). All data bf16
 * unless a float pointer says otherwise; every launcher enqueues on `stream` (a cudaStream_t)
 * and returns 0, or -1 with *err on a launch error. */
#ifndef DM_REAL_KERN_H
#define DM_REAL_KERN_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dm_error.h"

/* R = R - Y over n elements; *loss += scale * sum of the new R squared (device float). */
int real_k_residual(void *R, const void *Y, int64_t n, float scale, float *loss, void *stream, dm_err *err);
/* 1-D params of n elements, T tokens: R = X * w (rows of X); g = s * sum_t R[t] * X[t]. */
int real_k_fwd1d(const void *X, const void *w, void *R, int64_t T, int64_t n, void *stream, dm_err *err);
int real_k_bwd1d(const void *R, const void *X, void *g, int64_t T, int64_t n, float s, void *stream, dm_err *err);
/* dst = src converted (dst may be NULL: no output), and *flag = max(*flag, code) if any of the n
 * elements is not finite: the check rides on the conversion's one read. */
int real_k_bf16_to_f32_check(const void *src, float *dst, int64_t n, int *flag, int code, void *stream, dm_err *err);
/* *flag = max(*flag, code) if any of the n elements is not finite. */
int real_k_nonfinite(const void *g, int64_t n, int *flag, int code, void *stream, dm_err *err);
/* g[i] = NaN / g[i] = v (fault injection). */
int real_k_poison(void *g, int64_t i, void *stream, dm_err *err);
int real_k_set(void *g, int64_t i, float v, void *stream, dm_err *err);
/* X (T x w, bf16) = real_hash_uniform(seed, kind, param, g0 + t, i) of real_work.h for row t,
 * column i: the CPU backend's counter hash keyed by global token index. */
int real_k_fill_hash(void *X, int64_t T, int64_t w, uint64_t seed, int kind, int64_t param, int64_t g0, void *stream,
                     dm_err *err);

#ifdef __cplusplus
}
#endif
#endif
