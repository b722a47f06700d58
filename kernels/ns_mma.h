/* ns_mma.h: internal to kernels/: our own tensor-core products for the NS plans (mma.sync
 * m16n8k16, bf16 or fp16 operands, fp32 accumulation; the same code for sm_80 and sm_90):
 *   - one product description, nsm_op: D = alpha A B + beta C + gamma I (and optionally a
 *     second output D2 = that + gamma2 I), over a batch, with only the tiles on and below the
 *     diagonal computed when the caller declares the result symmetric (each off-diagonal tile
 *     written to both places by the CTA that computed it: no tile is written by two CTAs);
 *   - nsm_gemm (ns_syrk.cu): one such product as one launch, the plans' symmetric products;
 *   - nsm_fused (ns_small.cu): a whole direct or Gram NS of a matrix or a batch of same-shape
 *     matrices in one persistent kernel that steps through the products with a grid barrier;
 *   - nsm_block (ns_block.cu): the direct NS of small matrices, one CTA per matrix, everything
 *     in shared memory.
 * Plain C declarations (no CUDA header: tests/test_ns_gpu.c calls nsm_gemm on its own
 * operands); the device engine is ns_mma.cuh.
 *
 * Layouts (elements, row-major words): A(i,k) = a[i*lda + k] when ta == 0 (K contiguous),
 * a[k*lda + i] when ta == 1; B(k,j) = b[j*ldb + k] when tb == 0 (K contiguous), b[k*ldb + j]
 * when tb == 1; C(i,j) = c[i*ldc + j]; D(i,j) = d[i*ldd + j] and D2 likewise. Batch entry e
 * starts at a + e*sa (and so on). M, N, K, the leading dimensions and the batch strides must be
 * multiples of 8 and the pointers 16-byte aligned (nsm_shape_ok): operands move in 16-byte
 * pieces that are wholly inside or wholly outside a matrix. D must not overlap A, B or C. */
#ifndef DM_NS_MMA_H
#define DM_NS_MMA_H
#include <stdint.h>
#include <stdio.h>

#include "dm_error.h"
#include "ns_cuda.h" /* ns_stream (== cudaStream_t), dm_dtype, ns_coeffs */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { NSM_GEMM = 0, NSM_SUMSQ = 1, NSM_NORM = 2 } nsm_kind;

/* Tile shapes of the engine: output tile edge, warps, k-step and pipeline stages. */
typedef enum {
    NSM_T32 = 0,   /* 32 x 32, 4 warps, BK 32, 6 stages (small matrices: more CTAs per product) */
    NSM_T64 = 1,   /* 64 x 64, 4 warps, BK 32, 5 stages */
    NSM_T128 = 2,  /* 128 x 128, 8 warps, BK 32, 4 stages */
    NSM_T128S3 = 3 /* 128 x 128, 8 warps, BK 32, 3 stages */
} nsm_tile;
int nsm_tile_edge(nsm_tile t);

typedef struct nsm_op {
    int kind;    /* nsm_kind */
    int batch;
    int barrier_after; /* fused program: 1 = a grid barrier after this op (0: the next op is
                          independent of it and runs in the same phase) */
    /* NSM_GEMM */
    int M, N, K, ta, tb, sym;
    int dt;   /* operands, C and D2: DM_DT_BF16 or DM_DT_FP16 */
    int dt_d; /* D: bf16, fp16 or fp32 */
    const void *a, *b, *c;
    void *d, *d2;
    int64_t lda, ldb, ldc, ldd, sa, sb, sc, sd;
    float alpha, beta, gamma, gamma2;
    const float *alpha_dev, *beta_dev; /* when set, alpha and beta are read there instead
                                          (batch 1); a beta of zero never reads C */
    int alpha_pow, beta_pow;           /* alpha and beta times s^pow, s the entry's scale */
    /* the entry's scale s = 1 / (sqrt(sum of partial[e*nchunk .. +nchunk]) + eps): the
       normalization 1/(||G||_F + eps) from an NSM_SUMSQ op (NSM_GEMM with a pow, NSM_NORM) */
    const float *partial;
    int nchunk;
    float eps;
    int splits;    /* split-K pieces; > 1 needs ws and cnt */
    float *ws;     /* batch*tiles*splits*edge^2 floats: the pieces' partial sums */
    unsigned *cnt; /* batch*tiles counters, 0 before and after */
    /* NSM_SUMSQ: partial_out[e*nchunk + c] = sum of squares of chunk c of x's entry e;
       NSM_NORM: y = s * x converted to dt (len elements per entry, entry stride len) */
    const void *x;
    int dt_x;
    void *y;
    float *partial_out;
    int64_t len;
    /* derived by nsm_op_finish */
    int tiles_m, tiles_n, tiles; /* tiles per entry: tiles_m*(tiles_m+1)/2 when sym */
    int edge;                    /* tile edge the units were counted for */
    int64_t units;               /* batch * tiles * splits, or batch * nchunk */
} nsm_op;

/* The plan geometry the op builders below take: X is m x n (m <= n), stored as the plan's
 * input is: xT = 1: row-major m x n (ld n); xT = 0: the transpose of a tall row-major n x m
 * (ld m). m x m matrices are row-major ld m: the Gram NS's Q and R Z are symmetric only in exact
 * arithmetic, so the layout matters (ns_cuda.cu's plans, column-major for cuBLASLt, map their
 * products onto these row-major ones explicitly). */
typedef struct nsm_geom {
    int64_t m, n;
    int xT, batch;
    dm_dtype dt; /* the iteration dtype */
} nsm_geom;

/* 1 when our kernels take this geometry: m and n multiples of 8, n < 2^28, m n <= 2^34. */
int nsm_shape_ok(int64_t m, int64_t n);

/* Op builders (splits 1, no scale powers, no device scalars; set those fields after):
 *   syrk:  R = alpha X X^T (m x m, symmetric)
 *   mm:    D = alpha S1 S2 + beta C + gamma I (m x m, row-major as stored: S2 is read by rows,
 *          no operand is assumed symmetric); sym = 1: only the tiles on and below the diagonal,
 *          each mirrored, for results symmetric by construction (the operands commute: products
 *          of polynomials in R, P R P), whose rounding-level asymmetry may be dropped; sym = 0:
 *          every tile (the accumulated Q = P_k ... P_1 of Gram NS, and anything else)
 *   apply: D = alpha S X + beta C (X's layout, dtype dt_d; C in X's layout and dtype)
 * Run 9 (traces/kernels/NOTES.md): nsm_op_symm read S2 transposed ("S2 is symmetric"), which
 * is exact only for exactly symmetric S2; Gram NS's R Z and Q are symmetric in exact
 * arithmetic only, and the iteration amplifies the difference: 0.03-0.34 off. */
void nsm_op_syrk(nsm_op *op, const nsm_geom *g, const void *x, void *r, float alpha);
void nsm_op_mm(nsm_op *op, const nsm_geom *g, const void *s1, const void *s2, float alpha, float beta,
               const void *c, float gamma, void *d, int sym);
void nsm_op_apply(nsm_op *op, const nsm_geom *g, const void *s, const void *x, float alpha,
                  float beta, const void *c, void *d, dm_dtype dt_d);
/* Tiles and units for tile shape t (splits as set). */
void nsm_op_finish(nsm_op *op, nsm_tile t);

/* Split-K where the op has fewer output tiles (over its batch) than `resident` CTAs: pieces of
 * at least 256 of K, at most 16 (the fused NS and the plans' products of ours share the rule);
 * finishes the op for t. *ws_floats, *n_cnt: the scratch it then needs in op->ws and op->cnt
 * (0 when it stays whole). */
void nsm_op_split(nsm_op *op, nsm_tile t, int64_t resident, size_t *ws_floats, size_t *n_cnt);

/* FLOPs the op executes (2 M N K per entry over the tiles it computes, clipped to the matrix). */
double nsm_op_flops(const nsm_op *op);

/* One NSM_GEMM op as one launch on s; finish it with the same tile first. nsm_gemm_setup (once
 * per tile and dtype, outside any stream capture: it sets the kernel's shared-memory limit)
 * first. */
int nsm_gemm_setup(nsm_tile t, dm_dtype dt, dm_err *err);
int nsm_gemm(const nsm_op *op, nsm_tile t, ns_stream s, dm_err *err);
/* CTAs of nsm_gemm's kernel for tile t that fit on the current device at once (sets up the
 * kernel as nsm_gemm_setup does). */
int nsm_gemm_resident(nsm_tile t, dm_dtype dt, int64_t *resident, dm_err *err);

/* ---- the fused NS ------------------------------------------------------------------------ */

typedef struct nsm_fused_args {
    nsm_geom g;       /* g.dt: the iteration dtype (bf16 direct, fp16 Gram) */
    dm_dtype io;      /* input and output dtype */
    const void *in;   /* borrowed: the plan's buffers */
    void *out;
    void *xbuf[2];    /* m x n work buffers (dtype g.dt) */
    void *sbuf[6];    /* m x m work buffers */
    dm_ns_algo algo;
    const ns_coeffs *coeffs;
    unsigned restarts; /* Gram */
    float eps;
    nsm_tile tile;     /* NSM_T32, NSM_T64 or NSM_T128 */
} nsm_fused_args;

typedef struct nsm_fused nsm_fused;
/* Build the program (the same products, coefficients and order as the plan's step list),
 * allocate its scratch (partial sums, split-K pieces, counters, the barrier) and size the
 * grid: all CTAs resident at once (a cooperative launch). Owned by the caller. */
int nsm_fused_create(const nsm_fused_args *a, nsm_fused **out, dm_err *err);
int nsm_fused_run(nsm_fused *f, ns_stream s, dm_err *err);
void nsm_fused_destroy(nsm_fused *f); /* NULL ok */
/* Run f 6 times on s with per-phase clocks on (the fastest of the last 5 kept) and print, per
 * phase, the slowest CTA's work, the barrier wait (min: the last CTA to arrive, i.e. the
 * barrier's own cost; max) and the ops, as '#'-comment lines on out. For the benchmark's
 * --profile; the normal launch records nothing. */
int nsm_fused_profile(nsm_fused *f, ns_stream s, FILE *out, dm_err *err);
/* For reports: ops, barriers, CTAs and threads of the launch; FLOPs as executed, with every
 * product in full, and with the symmetric ones at half (as ns_plan_stats counts them). */
void nsm_fused_info(const nsm_fused *f, int *n_ops, int *n_barriers, int *grid, int *threads,
                    double *flops_exec, double *flops_full, double *flops_nominal);

/* ---- one CTA per small matrix (ns_block.cu) -------------------------------------------- */

/* The direct NS of each matrix of a batch in one CTA, X, X X^T and the polynomial in shared
 * memory for all iterations: min(m, n) <= 128 and as long a side as the shared memory holds
 * (any m, n: zero-padded to multiples of 32 inside). */
typedef struct nsm_block_args {
    nsm_geom g;       /* g.dt: the iteration dtype (bf16 or fp16) */
    dm_dtype io;      /* input and output dtype (bf16, fp16, fp32) */
    const void *in;   /* batch entries of m x n (xT) or n x m (!xT), row-major, back to back */
    void *out;
    const ns_coeffs *coeffs;
    float eps;        /* X0 = G / (||G||_F + eps) */
    int b16;          /* 0: kernel "block" (32 x 32 lower tiles of the symmetric products; a
                         cluster splits X's columns where one CTA cannot hold them); 1:
                         "block16" (every product whole in 16 x 16 tiles, one CTA) */
} nsm_block_args;
/* Bytes of shared memory a CTA of kernel "block" (b16 0) or "block16" (b16 1) needs for a batch
 * of matrices of m x n (either orientation) on the current device; 0 when it does not take them
 * (min > 128, or too long). */
int64_t nsm_block_smem(int64_t m, int64_t n, int batch, int b16);
/* 1 when the current device runs it: min(m, n) <= 128 and the long side in the shared memory of
 * one CTA, or ("block" on sm_90) of a cluster of up to 16 CTAs, each its own columns of X;
 * "block16" needs the whole matrix twice in one CTA. */
int nsm_block_fits(int64_t m, int64_t n, int batch, int b16);
typedef struct nsm_block nsm_block;
/* Set up the kernel (outside any stream capture) and its launch over a's buffers; owned by the
 * caller. */
int nsm_block_create(const nsm_block_args *a, nsm_block **out, dm_err *err);
int nsm_block_run(const nsm_block *b, ns_stream s, dm_err *err);
void nsm_block_destroy(nsm_block *b); /* NULL ok */
/* For reports: CTAs per matrix, columns of X per CTA, shared memory per CTA; FLOPs as executed
 * (padded, lower tiles, the cluster's repeated c A A + b A), every product in full, and the
 * symmetric ones at half (as nsm_fused_info counts them). */
void nsm_block_info(const nsm_block *b, int *ctas_per_matrix, int *cols, int64_t *smem, double *flops_exec,
                    double *flops_full, double *flops_nominal);
/* Run it 6 times with CTA 0's SM clock read after the load and after every product; print the
 * fastest of the last 5 as '#'-comment lines (the benchmark's --profile). */
int nsm_block_profile(const nsm_block *b, ns_stream s, FILE *out, dm_err *err);

#ifdef __cplusplus
}
#endif
#endif
