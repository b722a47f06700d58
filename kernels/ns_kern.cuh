/* ns_kern.cuh: internal to the kernels/ CUDA sources: the CUDA/cuBLAS check macros and the elementwise
 * launchers that the NS plans call (normalization, diagonal shift, mirror, conversion). */
#ifndef DM_NS_KERN_CUH
#define DM_NS_KERN_CUH
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ns_cuda.h"

/* One check macro per API: evaluates the call once, names it with file and line, and returns
 * -1 from the enclosing function (which must have a dm_err *err in scope). */
#define NS_CUDA(call)                                                                         \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return dm_err_set(err, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                \
                              cudaGetErrorString(e_));                                        \
    } while (0)
#define NS_LT(call)                                                                           \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return dm_err_set(err, "%s:%d: %s: cuBLAS status %d (%s)", __FILE__, __LINE__,    \
                              #call, (int)s_, cublasLtGetStatusString(s_));                   \
    } while (0)
/* After a kernel launch: launch-configuration errors show up here. */
#define NS_LAUNCHED() NS_CUDA(cudaGetLastError())

static inline cudaDataType_t ns_cuda_type(dm_dtype t)
{
    return t == DM_DT_BF16 ? CUDA_R_16BF : t == DM_DT_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Per-matrix sum of squares, two passes without atomics (deterministic):
 * partial[b * nblk + i] = sum over block i's slice of matrix b. */
int nsk_sumsq_partial(const void *x, dm_dtype dt, int64_t per_mat, int batch, float *partial,
                      int nblk, cudaStream_t s, dm_err *err);
/* One matrix: the partial sums as above, then (last block) scal[0..3] = {inv^2, 0, inv,
 * a0 * inv} with inv = 1 / (||x||_F + eps), for plans that scale their first products instead
 * of normalizing x. cnt: a device counter, 0 before and after. */
int nsk_sumsq_scalars(const void *x, dm_dtype dt, int64_t per_mat, float *partial, int nblk,
                      unsigned *cnt, float *scal, float eps, float a0, cudaStream_t s, dm_err *err);
/* y = x / (sqrt(sum partial of its matrix) + eps), converted from dt_in to dt_out. */
int nsk_normalize(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t per_mat,
                  int batch, const float *partial, int nblk, float eps, cudaStream_t s,
                  dm_err *err);
/* Blocks per matrix for the two kernels above. */
int nsk_norm_blocks(int64_t per_mat);
/* a[i,i] += alpha for every m x m matrix of the batch (column-major, ld m). */
int nsk_add_diag(void *a, dm_dtype dt, int64_t m, int batch, float alpha, cudaStream_t s,
                 dm_err *err);
/* For m x m column-major matrices with rows/cols cut into blocks of size bs: every element in
 * a block strictly above the block diagonal is set from its transpose (lower) element. */
int nsk_mirror_blocks(void *a, dm_dtype dt, int64_t m, int64_t bs, int batch, cudaStream_t s,
                      dm_err *err);
/* y = x converted (n elements). */
int nsk_convert(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t n,
                cudaStream_t s, dm_err *err);
/* out = sum (a-b)^2 and sum b^2 over n elements (both device buffers of dtype dt), computed in
 * double and copied back (synchronizes). Non-finite values make the result NaN. */
int nsk_diff_norms(const void *a, const void *b, dm_dtype dt, int64_t n, double *diff2,
                   double *ref2, cudaStream_t s, dm_err *err);

#endif
