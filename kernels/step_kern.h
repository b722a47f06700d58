/* step_kern.h: C launchers of the step's small kernels beside the workload (step_kern.cu): the
 * executor's gradient checks and fault injection, which the benchmarks time too. All data bf16
 * unless a float pointer says otherwise; every launcher enqueues on `stream` (a cudaStream_t)
 * and returns 0, or -1 with *err on a launch error. */
#ifndef DM_STEP_KERN_H
#define DM_STEP_KERN_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dm_error.h"

/* dst = src converted (dst may be NULL: no output), and *flag = max(*flag, code) if any of the n
 * elements is not finite: the check rides on the conversion's one read. */
int sk_bf16_to_f32_check(const void *src, float *dst, int64_t n, int *flag, int code, void *stream, dm_err *err);
/* *flag = max(*flag, code) if any of the n elements is not finite. */
int sk_nonfinite(const void *g, int64_t n, int *flag, int code, void *stream, dm_err *err);
/* g[i] = NaN / g[i] = v (fault injection). */
int sk_poison(void *g, int64_t i, void *stream, dm_err *err);
int sk_set(void *g, int64_t i, float v, void *stream, dm_err *err);
#ifdef __cplusplus
}
#endif
#endif
