/* ns_cuda.h: C launchers for the GPU Newton-Schulz kernels (direct and Gram NS over cuBLASLt,
 * symmetric lower-block products, strided batches, CUDA graph replay; our own tensor-core
 * symmetric products and fused small-matrix NS, ns_config.kernel) and the elementwise
 * optimizer kernels (Muon momentum/apply, AdamW). Callable from C; no CUDA header needed.
 *
 * Layout: matrices are row-major rows x cols (PyTorch nn.Linear layout, out x in), a batch is
 * `batch` such matrices back to back. NS works on m x n with m = min(rows, cols) <= n: on the
 * matrix itself when rows <= cols, on its transpose otherwise (no data is moved for that; the
 * GEMMs take transposed operands).
 *
 * Streams: every launcher takes a stream and enqueues work on it without host synchronization
 * (plan creation and the timing helpers excepted, which say so). A plan's buffers, cuBLASLt
 * workspace and graph belong to the plan: one plan must not run on two streams at once.
 *
 * Errors: 0 on success, -1 with *err filled (CUDA/cuBLAS call, file and line). */
#ifndef DM_NS_CUDA_H
#define DM_NS_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dm_error.h"
#include "ns_ref.h" /* dm_ns_algo, ns_coeffs, ns_coeffs_polar_express: the CPU reference's own */

typedef struct CUstream_st *ns_stream; /* == cudaStream_t; NULL is the legacy default stream */

/* Element types are program.h's dm_dtype (DM_DT_BF16, DM_DT_FP16, DM_DT_FP32; dm_dtype_name and
 * dm_dtype_size there). */
/* Which kernels a plan runs. Ours (ns_mma.h: mma.sync tensor-core tiles, bf16/fp16 in, fp32
 * accumulation, built for sm_80 and sm_90 alike) need m and n multiples of 8; a plan asked for
 * one it cannot run uses NS_KERNEL_LT and says so in ns_plan_config. */
typedef enum {
    NS_KERNEL_LT = 0,   /* "lt": cuBLASLt for every product, symmetric ones per sym_blocks */
    NS_KERNEL_SYM64,    /* "sym64": our symmetric-product kernel for X X^T and the m x m
                           products (only tiles on and below the diagonal, mirrored in the
                           epilogue, the scalars and the a I term fused), 64 x 64 tiles, 3
                           stages; cuBLASLt for the S X applies; sym_blocks unused */
    NS_KERNEL_SYM128,   /* "sym128": the same with 128 x 128 tiles, 4 stages */
    NS_KERNEL_SYM128S3, /* "sym128s3": 128 x 128 tiles, 3 stages */
    NS_KERNEL_FUSED32,  /* "fused32": the whole NS in one persistent kernel (grid barriers
                           between its products), 32 x 32 tiles */
    NS_KERNEL_FUSED64,  /* "fused64": the same with 64 x 64 tiles */
    NS_KERNEL_FUSED128, /* "fused128": the same with 128 x 128 tiles, 8 warps, 4 stages (large
                           batches: one CTA per SM) */
    NS_KERNEL_BLOCK,    /* "block": direct NS only, one CTA per matrix with the matrix and its
                           products in shared memory for every iteration (min(rows, cols) <=
                           128, the long side as far as the device's shared memory holds; any
                           sizes, no multiple-of-8 rule); a Gram plan asked for it runs "lt" */
    NS_KERNEL_BLOCK16,  /* "block16": the same matrices while one CTA's shared memory holds the
                           matrix twice (the long side up to 288 at 128 rows, 800 at 64), every
                           product whole in 16 x 16 warp tiles (all warps busy on small m);
                           direct NS only */
    NS_KERNEL_COUNT
} ns_kernel;
const char *ns_kernel_name(ns_kernel k);
int ns_kernel_parse(const char *name, ns_kernel *k); /* 0, or -1 for an unknown name */
/* 1 for the one-CTA-per-matrix kernels (NS_KERNEL_BLOCK, NS_KERNEL_BLOCK16: direct NS only). */
int ns_kernel_is_block(ns_kernel k);
/* 1 when a plan of batch x rows x cols runs kernel k as asked (NS_KERNEL_LT: always;
 * NS_KERNEL_BLOCK, NS_KERNEL_BLOCK16: on the current device, and in direct plans only). */
int ns_kernel_supported(ns_kernel k, int64_t rows, int64_t cols, int batch);

#define NS_MAX_PICKS 32 /* distinct GEMMs of a plan with their own heuristic pick */
#define NS_MAX_HEUR 16  /* cuBLASLt heuristic results asked for per GEMM */
typedef struct ns_config {
    dm_ns_algo algo;
    dm_dtype work;     /* iteration dtype: DM_DT_BF16 (direct default) or DM_DT_FP16 (Gram default) */
    int sym_blocks;    /* symmetric products: 1 = full cuBLAS GEMMs; k in 2..16 (rounded down
                          to a power of two that divides m) = recursive halving into k leaves:
                          per level one strided-batched GEMM of the off-diagonal blocks below
                          the diagonal, the leaves in full, then a mirror; (k+1)/(2k) of the
                          full work in log2(k)+1 launches; this one for R = X X^T */
    int sym_blocks_mm; /* the same for the m x m products (A A, R R, R Z, Q Z, ...) */
    int sym_flat;      /* 1: the same lower blocks (k x k tiles of m/k, those on and below the
                          diagonal) as ONE pointer-array GEMM instead of the recursive levels:
                          the same work in one launch of equal tiles; 0 (default): the levels */
    unsigned restarts; /* Gram: bit i = restart (Q applied to X, R recomputed) before iteration
                          i; default 1u << 2 */
    int heuristic;     /* index into cuBLASLt's heuristic list for every GEMM (0 = its best) */
    char gemm_picks[NS_MAX_PICKS + 1]; /* per distinct GEMM of the plan (in order of first use),
                          one hex digit: that GEMM's heuristic index, as ns_plan_tune_gemms
                          timed it; GEMMs past the string's end (or "") use `heuristic` */
    ns_coeffs coeffs;  /* 1..NS_MAX_ITERS iterations */
    double norm_eps;   /* X0 = G / (||G||_F + norm_eps); default 1e-7 */
    int norm_fold;     /* 1 (default): for one matrix whose input is already in the iteration
                          dtype, no normalized copy is made: the sum-of-squares kernel leaves
                          1/||G|| on the device and the products that read G scale by it in
                          their epilogue (cuBLASLt device-pointer alpha/beta); 0: always a
                          normalization pass */
    ns_kernel kernel;  /* default NS_KERNEL_LT */
} ns_config;

/* Defaults: the given algorithm, its default dtype, the coefficients of ns_coeffs_default (5
 * Polar Express iterations, safety NS_PE_SAFETY_DEFAULT), sym_blocks 1 and sym_blocks_mm 1, restart before iteration 2, heuristic 0, eps 1e-7,
 * norm_fold 1, kernel NS_KERNEL_LT. */
void ns_config_default(ns_config *cfg, dm_ns_algo algo);


typedef struct ns_device_info {
    char name[256];   /* "NVIDIA H200" */
    int sm_major, sm_minor, n_sms;
    size_t mem_bytes;
    int cuda_runtime; /* e.g. 13000 */
    int cuda_driver;
    size_t cublaslt_version; /* e.g. 130100 */
} ns_device_info;

/* 0 and info filled when a CUDA device is usable; -1 otherwise (no device, no driver). */
int ns_device_query(ns_device_info *info, dm_err *err);

/* ---- NS plans ----------------------------------------------------------------------------- */

typedef struct ns_plan ns_plan;

/* The cuBLASLt workspace each plan (and each product plan) allocates for its GEMMs; the memory
 * estimate counts one per NS plan (core/memory.c). */
#define NS_PLAN_WS_BYTES (32u << 20)

/* A plan for `batch` matrices of rows x cols whose input and output are in dtype `io`
 * (bf16/fp16/fp32). Allocates its device buffers (input, output, work), creates cuBLASLt
 * descriptors and picks algorithms; synchronizes the device. Returned plan owned by the caller
 * (ns_plan_destroy). */
int ns_plan_create(int64_t rows, int64_t cols, int batch, dm_dtype io, const ns_config *cfg,
                   ns_plan **out, dm_err *err);
void ns_plan_destroy(ns_plan *p); /* NULL ok */

/* Device buffers of batch*rows*cols elements of dtype io, owned by the plan (borrowed). The
 * producer writes the input there (e.g. the Nesterov kernel), the consumer reads the output.
 * Input and output are distinct; the input is not modified by a run. */
void *ns_plan_input(ns_plan *p);
void *ns_plan_output(ns_plan *p);

/* Enqueue the whole NS on stream s. With use_graph, the first call captures the launch
 * sequence into a CUDA graph (per plan: shape, batch, stream-independent) and every call
 * replays it; otherwise kernels are launched one by one. */
int ns_plan_run(ns_plan *p, ns_stream s, int use_graph, dm_err *err);

/* Pick each distinct GEMM's algorithm by timing: for every GEMM of the plan that differs from
 * the others (shape, transposes, leading dimensions, strides, batch, alignment, epilogue), every
 * result of cuBLASLt's heuristic list (up to NS_MAX_HEUR) is timed on the plan's own buffers, as
 * a CUDA graph of back-to-back launches replayed after a warm-up (best of 3 replays), and the
 * fastest is kept for every step with that GEMM. The picks land in the plan's configuration
 * (ns_plan_config: gemm_picks), so a plan made from it later uses the same algorithms without
 * timing (deterministic results). Only the first NS_MAX_PICKS distinct GEMMs are tuned (the rest
 * keep `heuristic`), and a plan made later uses the picks only if it has as many distinct GEMMs
 * (the same structure: the same io dtype, iterations and restarts), else `heuristic` throughout.
 * Overwrites the plan's input (random values), output and work buffers. Drops a captured graph.
 * Synchronizes. */
int ns_plan_tune_gemms(ns_plan *p, ns_stream s, dm_err *err);
/* One per-GEMM pick in gemm_picks: heuristic index h (0..15) <-> hex digit; -1 for a character
 * that is not a lowercase hex digit. */
static inline char ns_pick_digit(int h) { return "0123456789abcdef"[h & 15]; }
static inline int ns_pick_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}
/* The configuration the plan was made with, gemm_picks as tuned. */
void ns_plan_config(const ns_plan *p, ns_config *cfg);
/* Fill the plan's work buffers with NaN (tests: a product whose beta is zero must not read
 * them, also when beta comes from the device). Synchronizes. */
int ns_plan_poison_work(ns_plan *p, dm_err *err);

/* Time every step of the plan alone (events between steps, best of 5 runs, no graph) and
 * print one line per step to out, with a summary line. Synchronizes. */
int ns_plan_profile(ns_plan *p, ns_stream s, FILE *out, dm_err *err);

/* What the plan computes, for reports: m, n (m <= n), GEMM launches per run, and the FLOPs of
 * one run counted two ways: as executed (symmetric blocks only) and as full GEMMs. */
typedef struct ns_plan_stats {
    int64_t m, n;
    int batch;
    int n_gemms;
    int n_kernels;        /* elementwise launches */
    double flops_executed;
    double flops_full;    /* every product as a full GEMM */
    double flops_nominal; /* symmetric products at half their full FLOPs (the rule) */
} ns_plan_stats;
void ns_plan_get_stats(const ns_plan *p, ns_plan_stats *st);

/* ---- single products (for the benchmark and the symmetric-kernel comparison) -------------- */

typedef enum {
    NS_PROD_GEMM = 0, /* Y = S X: (m x m) times (m x n), the apply step of NS */
    NS_PROD_SYRK = 1, /* R = X X^T (m x m), symmetric output */
    NS_PROD_SYMM = 2  /* C = S1 S2 of two symmetric m x m that commute; symmetric output */
} ns_prod_kind;

typedef struct ns_prod ns_prod;
/* A product on random operands of the given shape, dtype bf16/fp16, sym_blocks as in
 * ns_config (ignored for NS_PROD_GEMM). Owned by the caller. */
int ns_prod_create(ns_prod_kind kind, int64_t m, int64_t n, int batch, dm_dtype dt,
                   int sym_blocks, ns_prod **out, dm_err *err);
/* The same with the kernel of ns_config.kernel for NS_PROD_SYRK and NS_PROD_SYMM (a fused
 * kernel means our symmetric kernel with 64 x 64 tiles here; NS_PROD_GEMM is always cuBLASLt):
 * -1 when the shape does not suit it. */
int ns_prod_create_kernel(ns_prod_kind kind, int64_t m, int64_t n, int batch, dm_dtype dt,
                          int sym_blocks, ns_kernel kernel, ns_prod **out, dm_err *err);
int ns_prod_run(ns_prod *p, ns_stream s, dm_err *err);
double ns_prod_flops(const ns_prod *p, int executed); /* executed or as full GEMM */
void ns_prod_destroy(ns_prod *p);
/* The product's device buffers (borrowed): X (m x n row-major, i.e. the operand of SYRK and
 * GEMM), S (m x m symmetric, the operand of SYMM and GEMM), D (the result: m x m, or m x n
 * row-major for GEMM); batch entries back to back. */
void ns_prod_buffers(ns_prod *p, void **x, void **s, void **d);
/* Relative Frobenius difference between this product's output and the full-GEMM result on
 * the same operands, computed on the device (synchronizes). */
int ns_prod_check(ns_prod *p, double *rel_err, dm_err *err);

/* y = x / (||x||_F + eps) per matrix of per_mat elements (batch of them), the norm in fp32,
 * x in dt_in, y in dt_out: the normalization NS starts with. Allocates a small scratch buffer
 * and synchronizes s (use plans for the asynchronous path). */
int ns_normalize(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t per_mat,
                 int batch, float eps, ns_stream s, dm_err *err);

/* y = x converted from dt_in to dt_out (n elements), enqueued on s. */
int ns_convert(const void *x, dm_dtype dt_in, void *y, dm_dtype dt_out, int64_t n, ns_stream s,
               dm_err *err);

/* ---- elementwise optimizer kernels --------------------------------------------------------- */

/* Each kernel reads the state it updates from *_in and writes the new state to *_out (n
 * elements each): in == out updates in place; otherwise the two must not overlap, and *_in is
 * left unchanged (the caller can keep it as the committed copy). The arithmetic is the same
 * either way, so out-of-place results equal in-place ones bit for bit. */

/* Muon momentum and Nesterov input for n elements (fp32 state):
 *   buf_out = mu*buf_in + g;  u = nesterov ? g + mu*buf_out : buf_out;  u written in dtype u_dt. */
int ns_muon_momentum(const float *g, const float *buf_in, float *buf_out, void *u, dm_dtype u_dt,
                     int64_t n, float mu, int nesterov, ns_stream s, dm_err *err);
/* Muon apply: w_out = w_in*(1 - lr*wd) - lr*scale*O, with O (the NS output) in dtype o_dt;
 * w_bf16 (NULL: none) receives w_out rounded to bf16 (the working copy), in the same pass. */
int ns_muon_apply(const float *w_in, float *w_out, void *w_bf16, const void *o, dm_dtype o_dt, int64_t n,
                  float lr, float wd, float scale, ns_stream s, dm_err *err);
/* AdamW (decoupled weight decay, bias correction for `step` >= 1), fp32 everything:
 *   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   w = w (1 - lr wd) - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps),
 * each of w, m, v read from *_in and written to *_out; w_bf16 (NULL: none) receives w_out
 * rounded to bf16 in the same pass. */
int ns_adamw(const float *w_in, float *w_out, void *w_bf16, const float *g, const float *m_in, float *m_out,
             const float *v_in, float *v_out, int64_t n, float lr, float b1, float b2, float eps,
             float wd, int step, ns_stream s, dm_err *err);

/* ---- device buffers and helpers for tests and the benchmark -------------------------------- */

int ns_dev_alloc(void **p, size_t bytes, dm_err *err);
void ns_dev_free(void *p);
int ns_copy_h2d(void *dst, const void *src, size_t bytes, dm_err *err); /* synchronous */
int ns_copy_d2h(void *dst, const void *src, size_t bytes, dm_err *err); /* synchronous */
/* Convert n host doubles to device dtype dt / device dtype dt to host doubles (synchronous). */
int ns_upload(void *dst, dm_dtype dt, const double *src, int64_t n, dm_err *err);
int ns_download(double *dst, const void *src, dm_dtype dt, int64_t n, dm_err *err);
/* Fill with N(0,1)-like values from a counter hash (seeded), or with a NaN poison pattern. */
int ns_fill_random(void *dst, dm_dtype dt, int64_t n, uint64_t seed, float scale, ns_stream s,
                   dm_err *err);
int ns_fill_poison(void *dst, dm_dtype dt, int64_t n, ns_stream s, dm_err *err);
/* ||a - b||_F / ||b||_F over n elements of dtype dt on the device, in double (synchronizes s);
 * NaN when either holds a non-finite value. */
int ns_rel_diff(const void *a, const void *b, dm_dtype dt, int64_t n, ns_stream s, double *rel,
                dm_err *err);
int ns_copy_d2d(void *dst, const void *src, size_t bytes, ns_stream s, dm_err *err);
int ns_sync(ns_stream s, dm_err *err);
int ns_stream_create(ns_stream *s, dm_err *err);
void ns_stream_destroy(ns_stream s);

/* Time `fn(arg)` enqueued on stream s with CUDA events: `warmup` untimed calls, then `reps`
 * calls each between two events, back to back behind a hold of the stream longer than the host
 * takes to enqueue them (the host ahead of the GPU, as in a busy step: a call launched kernel by
 * kernel is timed at the GPU's pace, not the host's); writes the per-call times (us) to
 * times_us[0..reps-1]. */
typedef int (*ns_enqueue_fn)(void *arg, ns_stream s, dm_err *err);
int ns_time_events(ns_enqueue_fn fn, void *arg, ns_stream s, int warmup, int reps,
                   double *times_us, dm_err *err);
/* The SM clock (MHz) of the last ns_time_events's timed calls, averaged over them: each SM's
 * cycle counter and the global timer marked right before the first timed call (by the hold) and
 * right after the last (a mark behind the last event), cycles over nanoseconds, the largest over
 * the SMs marked twice (they agree within about 1% on an H100: kernels/clock_window.h); 0 when
 * none was read. What a table row held while it was timed. */
double ns_time_last_mhz(void);
/* The least time (us) ns_time_events holds the stream idle before its timed calls (default 0:
 * as long as the host takes to enqueue them); bench kernels --rest-ms. */
void ns_time_set_rest_us(double us);

#ifdef __cplusplus
}
#endif
#endif
