/* wk_cuda.h: the GPU launchers of the step's work kernels (core/workload.h; what each computes
 * is wk_ref.h's statement): products through cuBLAS (bf16 operands, fp32 compute, bf16 out),
 * elementwise kernels and deterministic reductions of our own (bf16 storage, fp32 arithmetic,
 * 16-byte accesses where the rows allow). One dispatcher, wk_run, takes a workload kernel and
 * its bound buffers: the executor (real/real_gpu.c) runs every forward/backward kernel through
 * it and `dmuon bench work` (wk_bench.c) times every kernel through it, so the benchmark
 * measures what the executor runs. Callable from C; every launcher enqueues on the stream it
 * is given and returns 0, or -1 with *err (the call, file and line). */
#ifndef DM_WK_CUDA_H
#define DM_WK_CUDA_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dm_error.h"
#include "ns_cuda.h"
#include "wk_plan.h"
#include "wk_ref.h"
#include "workload.h"

/* A cuBLAS handle (cublasHandle_t) for the products; wk_run binds it to the kernel's stream. */
typedef struct cublasContext *wk_blas;
int wk_blas_create(wk_blas *h, dm_err *err);
void wk_blas_destroy(wk_blas h);

/* The buffers and scalars of one kernel (device pointers; bf16 unless float). Which fields a
 * kernel reads is in the comments; the rest are ignored. */
typedef struct wk_args {
    /* products (gemm, bgemm): C = alpha op(A, B) (wk_ref.h's forms); consecutive matrices of a
     * gemm kernel of count > 1, or the entries of a strided bgemm, are sa, sb, sc elements apart
     * (0: the same operand for all, e.g. the shared X of q, k and v) */
    const void *a, *b;
    void *c;
    int64_t sa, sb, sc;
    const void *const *pa, *const *pb; /* bgemm with pointer arrays (grouped-query attention): */
    void *const *pc;                   /* device arrays of `batch` pointers; NULL: the strides */
    float alpha;                       /* 0 is taken as 1 */
    /* elementwise */
    void *r;              /* loss: R in place; vector, table, embed: R out; *-bwd: R (dy) in;
                             softmax: the scores in place; softmax-bwd: dP in place */
    const void *x;        /* the input activation (vector, table, their bwd); route: the tokens;
                             softmax-bwd: the probabilities P */
    const void *w;        /* vector: count vectors of n back to back; table, embed: the table */
    void *g;              /* *-bwd: the parameter's gradient; route: the routed rows out */
    void *dx;             /* *-bwd: the cost-only input gradient (count x rows x n) */
    const int32_t *idx;   /* embed: token ids [rows]; route: source row per routed row (-1: none);
                             route-bwd: the routed rows of each token [rows x top_k] (-1: none) */
    const int32_t *csr_id, *csr_off, *csr_tok; /* embed-bwd: distinct ids, their tokens' offsets */
    int64_t csr_n;                             /* (csr_n + 1) and the tokens (in order) */
    float *ws;            /* vector-bwd, table-bwd: fp32 workspace of wk_ws_floats() */
    float *loss;          /* loss, vector, table: device accumulator (+= scale sum R^2) */
    float scale;          /* loss scale; *-bwd: gradient scale; softmax: the score scale */
    uint64_t seed;        /* targets: wk_hash_uniform(seed, WK_H_TARGET, param + i, row0 + r, c) */
    int64_t param, row0;
    int64_t rows, count;  /* elementwise: rows per matrix and matrices (0: the kernel's m, count);
                             the loss of routed experts (a kernel of count 1) runs as one launch of
                             count = experts, rows = per expert */
    int64_t period, positions; /* table, table-bwd: tokens per sample, table rows */
    int64_t top_k;        /* route-bwd */
    int64_t table_rows;   /* embed-bwd: rows of the table (what the zeroing clears) */
    int accumulate;       /* the gradient already holds another layer's part (a tied head): products
                             add to C (wgrad), embed-bwd skips the zeroing, reductions add to G */
    /* the layer passes (wk_ref.h): act, glu and their bwd read x (A or G) and w (U) at row
     * stride ld (0: n), the bwd dH from dx, and write r (the pass scratch); rope turns r in
     * place; resid and resid-bwd add x and w into r */
    int64_t ld;
} wk_args;

/* X (rows x w, bf16) = wk_hash_uniform(seed, kind, param, row0 + r, c) for row r, column c: the
 * proxy's activations, bit for bit the CPU's values before the bf16 rounding. */
int wk_fill_hash(void *X, int64_t rows, int64_t w, uint64_t seed, int kind, int64_t param, int64_t row0, ns_stream s,
                 dm_err *err);

/* The scalars of a plan's kernel into *a (zeroed first): seed, param, row0, rows, count, scale, ld,
 * period, positions, top_k, table_rows, accumulate; the caller binds the buffers. */
void wk_args_scalars(wk_args *a, const wk_kb *b, uint64_t seed);

/* X (rows x w, fp32) = offset + scale wk_hash_uniform(seed, kind, param, r, c): the CPU backend's
 * initial weights (real_fill_weights), bit for bit. */
int wk_fill_hash_f32(float *X, int64_t rows, int64_t w, uint64_t seed, int kind, int64_t param, float scale,
                     float offset, ns_stream s, dm_err *err);

/* Run kernel k with args a on stream s (blas may be NULL for elementwise kernels). A kernel of
 * count c > 1 is c launches, one per matrix (a gemm's c products, an elementwise kernel's c
 * passes: what a cost row of core/costs.h times once). */
int wk_run(wk_blas blas, const dm_kernel *k, const wk_args *a, ns_stream s, dm_err *err);

/* Attention with the geometry of wk_ref.h: bind the operands of product op over the buffers
 * buf[WK_AQ ...] (device): strided (a->a, b, c and strides) when wk_attn_strided, else the 3 x
 * batch pointers (A's, B's, C's) into host array p (the caller uploads it and sets a->pa, pb,
 * pc to the device copy). */
void wk_attn_bind(const wk_attn_geom *g, void *const buf[WK_A__N], dm_kern_op op, void **p, wk_args *a);

#ifdef __cplusplus
}
#endif
#endif
