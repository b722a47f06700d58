/* ns_cuda.cu: Newton-Schulz plans on the GPU. A plan is a fixed list of steps (cuBLASLt
 * matmuls with prebuilt descriptors and algorithms, and elementwise kernels) over buffers the
 * plan owns, so a run is a replay: of the list, or of a CUDA graph captured from it.
 *
 * Direct NS (bf16): per iteration A = X X^T, B = c A A + b A, X = a X + B X; the a, b scalings
 * ride in the matmul epilogues (D = alpha A B + beta C with C != D), so no elementwise pass.
 * Gram NS (fp16, after an fp32 normalization): R = X X^T; per iteration Z = c R R + b R,
 * R <- (Z + aI) R (Z + aI) as RZ = R Z + a R, R = Z RZ + a RZ, Q <- Q (Z + aI) = Q Z + a Q
 * (the first Q is Z + aI: one diagonal kernel); at a restart X <- Q X, R = X X^T, Q reset;
 * the output is Q X.
 * Symmetric products (X X^T and the products of polynomials in R) compute only the blocks on
 * and below the diagonal of a k x k block grid and mirror the rest: (k+1)/(2k) of the work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_kern.cuh"
#include "ns_mma.h"

/* ---- small helpers ------------------------------------------------------------------------ */

extern "C" void ns_config_default(ns_config *cfg, dm_ns_algo algo)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->algo = algo;
    cfg->work = algo == DM_NS_GRAM ? DM_DT_FP16 : DM_DT_BF16;
    cfg->sym_blocks = 1;
    cfg->sym_blocks_mm = 1;
    cfg->restarts = 1u << 2;
    cfg->heuristic = 0;
    ns_coeffs_default(&cfg->coeffs);
    cfg->norm_eps = 1e-7;
    cfg->norm_fold = 1;
    cfg->kernel = NS_KERNEL_LT;
}

static const char *const kernel_names[NS_KERNEL_COUNT] = {"lt", "sym64", "sym128", "sym128s3", "fused32", "fused64", "fused128", "block", "block16"};

extern "C" const char *ns_kernel_name(ns_kernel k)
{
    return (int)k >= 0 && k < NS_KERNEL_COUNT ? kernel_names[k] : "?";
}

extern "C" int ns_kernel_parse(const char *name, ns_kernel *k)
{
    for (int i = 0; i < NS_KERNEL_COUNT; i++)
        if (!strcmp(name, kernel_names[i])) {
            *k = (ns_kernel)i;
            return 0;
        }
    return -1;
}

extern "C" int ns_kernel_is_block(ns_kernel k) { return k == NS_KERNEL_BLOCK || k == NS_KERNEL_BLOCK16; }

extern "C" int ns_kernel_supported(ns_kernel k, int64_t rows, int64_t cols, int batch)
{
    int64_t m = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
    if (k == NS_KERNEL_LT) return 1;
    if (ns_kernel_is_block(k)) return batch >= 1 && nsm_block_fits(m, n, batch, k == NS_KERNEL_BLOCK16);
    return (int)k > 0 && k < NS_KERNEL_COUNT && batch >= 1 && nsm_shape_ok(m, n);
}

static int kernel_is_sym(ns_kernel k) { return k == NS_KERNEL_SYM64 || k == NS_KERNEL_SYM128 || k == NS_KERNEL_SYM128S3; }
static int kernel_is_fused(ns_kernel k)
{
    return k == NS_KERNEL_FUSED32 || k == NS_KERNEL_FUSED64 || k == NS_KERNEL_FUSED128;
}
static nsm_tile kernel_tile(ns_kernel k)
{
    return k == NS_KERNEL_SYM128 || k == NS_KERNEL_FUSED128 ? NSM_T128
           : k == NS_KERNEL_SYM128S3                       ? NSM_T128S3
           : k == NS_KERNEL_FUSED32                        ? NSM_T32
                                                           : NSM_T64;
}

extern "C" int ns_device_query(ns_device_info *info, dm_err *err)
{
    int dev = 0, n = 0;
    cudaDeviceProp pr;
    memset(info, 0, sizeof *info);
    NS_CUDA(cudaGetDeviceCount(&n));
    if (n < 1) return dm_err_set(err, "no CUDA device");
    NS_CUDA(cudaGetDevice(&dev));
    NS_CUDA(cudaGetDeviceProperties(&pr, dev));
    snprintf(info->name, sizeof info->name, "%s", pr.name);
    info->sm_major = pr.major;
    info->sm_minor = pr.minor;
    info->n_sms = pr.multiProcessorCount;
    info->mem_bytes = pr.totalGlobalMem;
    NS_CUDA(cudaRuntimeGetVersion(&info->cuda_runtime));
    NS_CUDA(cudaDriverGetVersion(&info->cuda_driver));
    info->cublaslt_version = cublasLtGetVersion();
    return 0;
}

/* ---- step lists --------------------------------------------------------------------------- */

typedef enum { ST_GEMM, ST_SUMSQ, ST_NORMALIZE, ST_DIAG, ST_MIRROR, ST_CONVERT, ST_SYMK, ST_FUSED, ST_BLOCK } step_kind;

typedef struct step {
    step_kind kind;
    /* ST_GEMM */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
    const void *a, *b, *c;
    void *d;
    float alpha, beta;
    /* elementwise */
    const void *x;
    void *y;
    dm_dtype dt_in, dt_out;
    int64_t len, m, bs;
    int batch, nblk;
    float *partial;
    float f;
    const float *alpha_dev, *beta_dev; /* ST_GEMM: device scalars instead of alpha/beta */
    unsigned *cnt;                     /* ST_SUMSQ with scal: the block counter */
    float *scal;                       /* ST_SUMSQ: the scalars it leaves (NULL: partials only) */
    int sig;       /* ST_GEMM: index of its distinct GEMM in seq.sigs */
    void **parr;   /* ST_GEMM in pointer-array mode: its A, B, C, D arrays on the device (freed with it) */
    char desc[80]; /* for profiles */
    nsm_op mop;    /* ST_SYMK: our symmetric product */
    nsm_tile mtile;
    nsm_fused *fused; /* ST_FUSED: the whole NS (borrowed from the plan) */
    nsm_block *blk;   /* ST_BLOCK: the whole NS, one CTA (or cluster) per matrix (borrowed) */
} step;

/* What makes two GEMMs the same problem for cuBLASLt's heuristic (pointers aside): steps with
 * equal keys share one heuristic list and one pick. Compared bytewise (memset first). */
typedef struct gemm_key {
    int64_t M, N, K, lda, ldb, ldc, ldd, sa, sb, sc, sd;
    int32_t ta, tb, batch, dt, has_c, dev_scal, ptr_array;
    uint32_t al[4];
} gemm_key;

typedef struct gemm_sig {
    gemm_key key;
    int nres, pick;
    cublasLtMatmulAlgo_t algo[NS_MAX_HEUR];
} gemm_sig;

/* A sequence of steps with its cuBLASLt handle and workspace (shared by plans and products). */
typedef struct seq {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    int heuristic;
    step *steps;
    int n, cap;
    gemm_sig *sigs;
    int n_sigs, cap_sigs;
    const float *scal_alpha, *scal_beta; /* while set, GEMMs emitted take alpha and beta from
                                            these device scalars */
    int n_gemms, n_kernels;
    double flops_exec, flops_full, flops_nominal;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} seq;

static int seq_init(seq *q, int heuristic, dm_err *err)
{
    memset(q, 0, sizeof *q);
    q->heuristic = heuristic;
    q->ws_bytes = NS_PLAN_WS_BYTES;
    NS_LT(cublasLtCreate(&q->lt));
    NS_CUDA(cudaMalloc(&q->ws, q->ws_bytes));
    return 0;
}

static void seq_free(seq *q)
{
    for (int i = 0; i < q->n; i++) {
        step *t = &q->steps[i];
        if (t->kind == ST_SYMK) { /* its split-K scratch (NULL when whole) */
            cudaFree(t->mop.ws);
            cudaFree(t->mop.cnt);
        }
        if (t->kind != ST_GEMM) continue;
        cudaFree(t->parr);
        cublasLtMatmulDescDestroy(t->op);
        cublasLtMatrixLayoutDestroy(t->la);
        cublasLtMatrixLayoutDestroy(t->lb);
        cublasLtMatrixLayoutDestroy(t->lc);
        cublasLtMatrixLayoutDestroy(t->ld);
    }
    free(q->steps);
    free(q->sigs);
    if (q->exec) cudaGraphExecDestroy(q->exec);
    if (q->graph) cudaGraphDestroy(q->graph);
    if (q->ws) cudaFree(q->ws);
    if (q->lt) cublasLtDestroy(q->lt);
    memset(q, 0, sizeof *q);
}

static step *seq_push(seq *q, step_kind kind, dm_err *err)
{
    if (q->n == q->cap) {
        int nc = q->cap ? 2 * q->cap : 64;
        step *ns = (step *)dm_realloc(q->steps, sizeof(step) * (size_t)nc, err);
        if (!ns) return NULL;
        q->steps = ns;
        q->cap = nc;
    }
    step *t = &q->steps[q->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    if (kind == ST_GEMM) q->n_gemms++;
    else q->n_kernels++;
    return t;
}

static uint32_t ptr_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al >>= 1;
    return al;
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols,
                  int64_t ld, int batch, int64_t stride, int ptr_array, dm_err *err)
{
    NS_LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (ptr_array || batch > 1) {
        int32_t bc = batch;
        NS_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    }
    if (ptr_array) { /* every instance's address from the step's device arrays */
        uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        NS_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof mode));
    } else if (batch > 1) {
        NS_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return 0;
}

/* One matmul, column-major: D (M x N) = alpha op(A) op(B) + beta C, K the inner size; the
 * operands share dtype dt, fp32 accumulation and scaling; strides are per batch entry.
 * `full_flops` is what this step stands for when counted as a full product, `sym` says it is
 * part of a symmetric product (counted at half of full_flops in the nominal count). */
typedef struct gemm_args {
    cublasOperation_t ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const void *a, *b, *c;
    void *d;
    int64_t lda, ldb, ldc, ldd;
    int64_t sa, sb, sc, sd;
    /* pointer-array mode (NULL: strided): batch instances' A, B, C, D addresses, 4 x batch
     * host entries (all A first, then B, C, D); a..d and the strides are then unused */
    const void *const *ptrs;
} gemm_args;

static int seq_gemm(seq *q, const gemm_args *g, dm_dtype dt, int batch, dm_err *err)
{
    step *t = seq_push(q, ST_GEMM, err);
    if (!t) return -1;
    cudaDataType_t ct = ns_cuda_type(dt);
    NS_LT(cublasLtMatmulDescCreate(&t->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    NS_LT(cublasLtMatmulDescSetAttribute(t->op, CUBLASLT_MATMUL_DESC_TRANSA, &g->ta, sizeof g->ta));
    NS_LT(cublasLtMatmulDescSetAttribute(t->op, CUBLASLT_MATMUL_DESC_TRANSB, &g->tb, sizeof g->tb));
    if (q->scal_alpha) {
        cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        NS_LT(cublasLtMatmulDescSetAttribute(t->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
        t->alpha_dev = q->scal_alpha;
        t->beta_dev = q->scal_beta;
    }
    int64_t ar = g->ta == CUBLAS_OP_N ? g->M : g->K, ac = g->ta == CUBLAS_OP_N ? g->K : g->M;
    int64_t br = g->tb == CUBLAS_OP_N ? g->K : g->N, bc = g->tb == CUBLAS_OP_N ? g->N : g->K;
    int pa = g->ptrs != NULL;
    if (layout(&t->la, ct, ar, ac, g->lda, batch, g->sa, pa, err) ||
        layout(&t->lb, ct, br, bc, g->ldb, batch, g->sb, pa, err) ||
        layout(&t->lc, ct, g->M, g->N, g->ldc, batch, g->sc, pa, err) ||
        layout(&t->ld, ct, g->M, g->N, g->ldd, batch, g->sd, pa, err))
        return -1;
    size_t es = dm_dtype_size(dt);
    uint32_t al[4] = {ptr_align(g->a), ptr_align(g->b), ptr_align(g->c ? g->c : g->d), ptr_align(g->d)};
    if (pa) { /* the arrays to the device; the alignment every instance meets */
        for (int i = 0; i < 4; i++) {
            al[i] = 256;
            for (int e = 0; e < batch; e++) {
                uint32_t x = ptr_align(g->ptrs[i * batch + e]);
                if (x < al[i]) al[i] = x;
            }
        }
        NS_CUDA(cudaMalloc((void **)&t->parr, 4 * (size_t)batch * sizeof(void *)));
        NS_CUDA(cudaMemcpy(t->parr, g->ptrs, 4 * (size_t)batch * sizeof(void *), cudaMemcpyHostToDevice));
    } else if (batch > 1) { /* every batch entry's pointer must meet the alignment too */
        int64_t st[4] = {g->sa, g->sb, g->c ? g->sc : g->sd, g->sd};
        for (int i = 0; i < 4; i++) {
            uint32_t sa = ptr_align((const void *)(uintptr_t)((size_t)st[i] * es));
            if (sa < al[i]) al[i] = sa;
        }
    }
    gemm_key key;
    memset(&key, 0, sizeof key);
    key.M = g->M, key.N = g->N, key.K = g->K, key.lda = g->lda, key.ldb = g->ldb, key.ldc = g->ldc;
    key.ldd = g->ldd, key.sa = g->sa, key.sb = g->sb, key.sc = g->sc, key.sd = g->sd;
    key.ta = (int32_t)g->ta, key.tb = (int32_t)g->tb, key.batch = batch, key.dt = (int32_t)dt;
    key.has_c = g->c && (g->beta != 0.f || q->scal_alpha);
    key.dev_scal = q->scal_alpha != NULL;
    key.ptr_array = pa;
    memcpy(key.al, al, sizeof al);
    int si = 0;
    while (si < q->n_sigs && memcmp(&q->sigs[si].key, &key, sizeof key)) si++;
    if (si == q->n_sigs) { /* a GEMM not seen before in this sequence: ask the heuristic */
        if (q->n_sigs == q->cap_sigs) {
            int nc = q->cap_sigs ? 2 * q->cap_sigs : 16;
            gemm_sig *ns = (gemm_sig *)dm_realloc(q->sigs, sizeof(gemm_sig) * (size_t)nc, err);
            if (!ns) return -1;
            q->sigs = ns;
            q->cap_sigs = nc;
        }
        gemm_sig *sg = &q->sigs[q->n_sigs];
        memset(sg, 0, sizeof *sg);
        sg->key = key;
        cublasLtMatmulPreference_t pref;
        NS_LT(cublasLtMatmulPreferenceCreate(&pref));
        cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &q->ws_bytes, sizeof q->ws_bytes);
        for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
            st = cublasLtMatmulPreferenceSetAttribute(
                pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
                &al[i], sizeof al[i]);
        cublasLtMatmulHeuristicResult_t res[NS_MAX_HEUR];
        int nres = 0;
        if (st == CUBLAS_STATUS_SUCCESS)
            st = cublasLtMatmulAlgoGetHeuristic(q->lt, t->op, t->la, t->lb, t->lc, t->ld, pref, NS_MAX_HEUR, res, &nres);
        cublasLtMatmulPreferenceDestroy(pref);
        NS_LT(st);
        if (nres < 1)
            return dm_err_set(err, "cuBLASLt has no algorithm for %lldx%lldx%lld %s", (long long)g->M,
                              (long long)g->N, (long long)g->K, dm_dtype_name(dt));
        sg->nres = nres;
        for (int i = 0; i < nres; i++) sg->algo[i] = res[i].algo;
        sg->pick = q->heuristic < nres ? q->heuristic : nres - 1;
        q->n_sigs++;
    }
    t->sig = si;
    snprintf(t->desc, sizeof t->desc, "gemm %c%c %lldx%lldx%lld x%d%s", g->ta == CUBLAS_OP_T ? 'T' : 'N',
             g->tb == CUBLAS_OP_T ? 'T' : 'N', (long long)g->M, (long long)g->N, (long long)g->K,
             batch, g->c && g->beta != 0.f ? " +C" : "");
    t->algo = q->sigs[si].algo[q->sigs[si].pick];
    t->a = g->a;
    t->b = g->b;
    t->c = g->c ? g->c : g->d;
    t->d = g->d;
    if (pa) { /* cublasLtMatmul takes the arrays' device addresses */
        t->a = t->parr;
        t->b = t->parr + batch;
        t->c = t->parr + 2 * batch;
        t->d = t->parr + 3 * batch;
    }
    t->alpha = g->alpha;
    t->beta = g->c ? g->beta : 0.f; /* with device scalars, beta is read there (zero: C unread) */
    q->flops_exec += 2.0 * (double)g->M * (double)g->N * (double)g->K * batch;
    return 0;
}

/* Distinct GEMM si runs heuristic result h (clamped to its list), in every step that is it. */
static void seq_set_pick(seq *q, int si, int h)
{
    gemm_sig *sg = &q->sigs[si];
    sg->pick = h < 0 ? 0 : h < sg->nres ? h : sg->nres - 1;
    for (int i = 0; i < q->n; i++)
        if (q->steps[i].kind == ST_GEMM && q->steps[i].sig == si) q->steps[i].algo = sg->algo[sg->pick];
}

static int seq_run_step(seq *q, int i, cudaStream_t s, dm_err *err)
{
    {
        step *t = &q->steps[i];
        int rc = 0;
        switch (t->kind) {
        case ST_GEMM:
            NS_LT(cublasLtMatmul(q->lt, t->op, t->alpha_dev ? (const void *)t->alpha_dev : &t->alpha, t->a, t->la,
                                 t->b, t->lb, t->beta_dev ? (const void *)t->beta_dev : &t->beta, t->c, t->lc,
                                 t->d, t->ld, &t->algo, q->ws, q->ws_bytes, s));
            break;
        case ST_SUMSQ:
            rc = t->scal ? nsk_sumsq_scalars(t->x, t->dt_in, t->len, t->partial, t->nblk, t->cnt, t->scal,
                                             t->f, t->alpha, s, err)
                         : nsk_sumsq_partial(t->x, t->dt_in, t->len, t->batch, t->partial, t->nblk, s, err);
            break;
        case ST_NORMALIZE:
            rc = nsk_normalize(t->x, t->dt_in, t->y, t->dt_out, t->len, t->batch, t->partial,
                               t->nblk, t->f, s, err);
            break;
        case ST_DIAG:
            rc = nsk_add_diag(t->y, t->dt_in, t->m, t->batch, t->f, s, err);
            break;
        case ST_MIRROR:
            rc = nsk_mirror_blocks(t->y, t->dt_in, t->m, t->bs, t->batch, s, err);
            break;
        case ST_CONVERT:
            rc = nsk_convert(t->x, t->dt_in, t->y, t->dt_out, t->len, s, err);
            break;
        case ST_SYMK:
            rc = nsm_gemm(&t->mop, t->mtile, s, err);
            break;
        case ST_FUSED:
            rc = nsm_fused_run(t->fused, s, err);
            break;
        case ST_BLOCK:
            rc = nsm_block_run(t->blk, s, err);
            break;
        }
        if (rc) return -1;
    }
    return 0;
}

static int seq_run_steps(seq *q, cudaStream_t s, dm_err *err)
{
    for (int i = 0; i < q->n; i++)
        if (seq_run_step(q, i, s, err)) return -1;
    return 0;
}

static int seq_run(seq *q, cudaStream_t s, int use_graph, dm_err *err)
{
    /* a fused or block plan is one launch: a graph would save nothing (and fused is cooperative) */
    if (!use_graph || s == NULL || (q->n == 1 && (q->steps[0].kind == ST_FUSED || q->steps[0].kind == ST_BLOCK)))
        return seq_run_steps(q, s, err);
    if (!q->exec) {
        NS_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        int rc = seq_run_steps(q, s, err);
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(s, &g);
        if (rc) {
            if (g) cudaGraphDestroy(g);
            return -1;
        }
        if (e != cudaSuccess) return dm_err_set(err, "graph capture: %s", cudaGetErrorString(e));
        q->graph = g;
        NS_CUDA(cudaGraphInstantiate(&q->exec, q->graph, 0));
    }
    NS_CUDA(cudaGraphLaunch(q->exec, s));
    return 0;
}

/* ---- the products NS is made of ----------------------------------------------------------- */

/* Geometry of one NS problem: X is m x n (m <= n); in memory either X^T column-major (xT: the
 * row-major matrix with rows <= cols) or X column-major (the transpose of a tall row-major
 * matrix). m x m matrices are column-major, ld m. Strides per batch entry. */
typedef struct geom {
    int64_t m, n;
    int xT;
    int batch;
    dm_dtype dt;
    int64_t bs_x; /* leaf size of X X^T; bs_x >= m means one full product */
    int64_t bs_s; /* leaf size of the m x m symmetric products */
    int flat;     /* the lower blocks as one pointer-array GEMM (ns_config.sym_flat) */
    ns_kernel kern; /* a symmetric kernel of ours: X X^T and the m x m products through it */
} geom;

/* Leaf size of the symmetric scheme with k leaves: k is rounded down to a power of two, then
 * halved until it divides m; m (full products) when no k > 1 does. */
static int64_t sym_block_size(int64_t m, int k)
{
    int p2 = 1;
    while (p2 * 2 <= k) p2 *= 2;
    k = p2;
    while (k > 1 && (m % k || (m / k) % 8)) k >>= 1; /* leaves of whole 16-byte rows */
    return k > 1 ? m / k : m;
}

static void count_sym(seq *q, const geom *g, double k_inner)
{
    double full = 2.0 * (double)g->m * (double)g->m * k_inner * g->batch;
    q->flops_full += full;
    q->flops_nominal += full / 2;
}

static int emit_mirror(seq *q, const geom *g, int64_t bs, void *s, dm_err *err)
{
    if (bs >= g->m) return 0;
    step *t = seq_push(q, ST_MIRROR, err);
    if (!t) return -1;
    t->y = s;
    t->dt_in = g->dt;
    t->m = g->m;
    t->bs = bs;
    t->batch = g->batch;
    return 0;
}

/* The symmetric scheme, recursive halving: at level l (0..L-1) every diagonal block of size
 * s = m / 2^l contributes its lower-left off-diagonal block (h x h, h = s/2); the 2^l such
 * blocks sit at a constant stride s*(1+m) in D, and their operands at constant strides too, so
 * each level is ONE strided-batched GEMM (per matrix of the batch). The 2^L diagonal leaves of
 * size bs are one more. Work: (1/2 + 1/2^(L+1)) of the full product, in L+1 launches.
 *
 * sym_kind 0: R = X X^T from X (m x n, layout g->xT); 1: D = alpha S1 S2 + beta C (m x m). */
/* The operands of a symmetric product's block, as both schemes below cut it (column-major, as
 * cuBLASLt sees the storage): the block of rows R.. and columns C.. of the m x m result is
 * op(A) op(B) with A at x1 + R * ua elements and B at x2 + C * ub; *a gets the transposes, the
 * leading dimensions and the inner size K. sym_kind 0: R = X X^T from X (m x n, layout g->xT);
 * 1: rows of S1 times columns of S2 (m x m). */
static void sym_operands(const geom *g, int sym_kind, gemm_args *a, int64_t *ua, int64_t *ub)
{
    int64_t m = g->m, n = g->n;
    a->K = sym_kind == 0 ? n : m;
    if (sym_kind == 0 && g->xT) { /* stored X^T (n x m, ld n): rows of X are columns */
        a->ta = CUBLAS_OP_T, a->tb = CUBLAS_OP_N, a->lda = a->ldb = n;
        *ua = *ub = n;
    } else if (sym_kind == 0) { /* stored X (m x n, ld m) */
        a->ta = CUBLAS_OP_N, a->tb = CUBLAS_OP_T, a->lda = a->ldb = m;
        *ua = *ub = 1;
    } else {
        a->ta = a->tb = CUBLAS_OP_N, a->lda = a->ldb = m;
        *ua = 1, *ub = m;
    }
}

/* The same lower tiles as the levels below, flat (ns_config.sym_flat): the m x m result cut
 * into p x p tiles of bs (p = m / bs), the p (p + 1) / 2 on and below the diagonal of every
 * matrix of the batch in ONE pointer-array GEMM (the same work as the levels with leaves of bs,
 * in one launch of equal tiles instead of L + 1 launches of shrinking ones: up to 2x faster
 * products from 1024 to 5120, traces/kernels/symflat-2026-12-04). Column-major, as cuBLASLt sees
 * the storage: tile (i, j), i >= j, is rows i bs.., columns j bs.. of D. */

static int emit_sym_flat(seq *q, const geom *g, int64_t bs, int sym_kind, const void *x1, const void *x2,
                         float alpha, float beta, const void *c, void *d, dm_err *err)
{
    size_t es = dm_dtype_size(g->dt);
    int64_t m = g->m, p = m / bs, ua, ub;
    gemm_args a;
    memset(&a, 0, sizeof a);
    sym_operands(g, sym_kind, &a, &ua, &ub);
    int64_t xs = m * a.K; /* one matrix of the batch (X: m x n; S: m x m) */
    int cnt = (int)(p * (p + 1) / 2) * g->batch, e = 0;
    const void **ptrs = (const void **)dm_malloc(4 * (size_t)cnt * sizeof *ptrs, err);
    if (!ptrs) return -1;
    for (int b = 0; b < g->batch; b++)
        for (int64_t i = 0; i < p; i++)
            for (int64_t j = 0; j <= i; j++, e++) {
                int64_t R = i * bs, C = j * bs; /* the tile's first row and column */
                size_t od = (size_t)(b * m * m + R + C * m) * es;
                ptrs[e] = (const char *)x1 + (size_t)(b * xs + R * ua) * es;
                ptrs[cnt + e] = (const char *)x2 + (size_t)(b * xs + C * ub) * es;
                ptrs[2 * cnt + e] = c ? (const void *)((const char *)c + od) : (const void *)((char *)d + od);
                ptrs[3 * cnt + e] = (char *)d + od;
            }
    a.M = a.N = bs;
    a.alpha = alpha;
    a.beta = beta;
    a.a = x1, a.b = x2, a.c = c, a.d = d;
    a.ldc = a.ldd = m;
    a.ptrs = ptrs;
    int rc = seq_gemm(q, &a, g->dt, cnt, err);
    free(ptrs);
    return rc;
}

static int emit_sym_levels(seq *q, const geom *g, int64_t bs, int sym_kind, const void *x1,
                           const void *x2, float alpha, float beta, const void *c, void *d,
                           dm_err *err)
{
    size_t es = dm_dtype_size(g->dt);
    int64_t m = g->m;
    if (bs < m && g->flat) return emit_sym_flat(q, g, bs, sym_kind, x1, x2, alpha, beta, c, d, err);
    for (int b = 0; b < g->batch; b++) {
        /* size > bs: an off-diagonal level; size == bs: the leaves (full blocks) */
        for (int64_t sz = m; sz >= bs; sz /= 2) {
            int leaf = sz == bs || bs >= m;
            int64_t h = leaf ? sz : sz / 2;   /* block edge */
            int64_t ro = leaf ? 0 : h;          /* row offset of the block in its diagonal block */
            int nb = (int)(m / sz);
            gemm_args a;
            int64_t ua, ub;
            memset(&a, 0, sizeof a);
            sym_operands(g, sym_kind, &a, &ua, &ub); /* block t: rows t sz + ro.., columns t sz.. */
            const char *X1 = (const char *)x1 + (size_t)(b * m * a.K) * es;
            const char *X2 = (const char *)x2 + (size_t)(b * m * a.K) * es;
            const char *C = c ? (const char *)c + (size_t)(b * m * m) * es : NULL;
            char *D = (char *)d + (size_t)(b * m * m) * es;
            a.M = a.N = h;
            a.a = X1 + (size_t)(ro * ua) * es;
            a.b = X2;
            a.sa = sz * ua;
            a.sb = sz * ub;
            a.alpha = alpha;
            a.beta = beta;
            a.c = C ? C + (size_t)ro * es : NULL;
            a.d = D + (size_t)ro * es;
            a.ldc = a.ldd = m;
            a.sc = a.sd = sz * (1 + m);
            if (seq_gemm(q, &a, g->dt, nb, err)) return -1;
            if (leaf) break;
        }
    }
    return 0;
}

/* One of our symmetric products as a step (device scalars when the sequence has them on). */
static int emit_symk(seq *q, const geom *g, const nsm_op *op, dm_err *err)
{
    step *t = seq_push(q, ST_SYMK, err);
    if (!t) return -1;
    t->mop = *op;
    if (q->scal_alpha) {
        t->mop.alpha_dev = q->scal_alpha;
        t->mop.beta_dev = q->scal_beta;
    }
    t->mtile = kernel_tile(g->kern);
    /* split-K where the product has fewer tiles than the GPU holds CTAs (X X^T of a wide matrix:
     * run 9's 256x1536 one ran 10 CTAs through 48 k-steps each, 3x cuBLASLt's time); the
     * scratch is the step's (seq_free) */
    int64_t resident = 0;
    size_t wf = 0, nc = 0;
    if (nsm_gemm_resident(t->mtile, g->dt, &resident, err)) return -1;
    nsm_op_split(&t->mop, t->mtile, resident, &wf, &nc);
    if (wf) {
        NS_CUDA(cudaMalloc((void **)&t->mop.ws, wf * sizeof(float)));
        NS_CUDA(cudaMalloc((void **)&t->mop.cnt, nc * sizeof(unsigned)));
        NS_CUDA(cudaMemset(t->mop.cnt, 0, nc * sizeof(unsigned))); /* before any stream uses it: the plan syncs */
    }
    snprintf(t->desc, sizeof t->desc, "%s %dx%dx%d x%d%s%s split %d", ns_kernel_name(g->kern), op->M, op->N, op->K,
             op->batch, op->c ? " +C" : "", op->sym ? "" : " all tiles", t->mop.splits);
    q->flops_exec += nsm_op_flops(&t->mop);
    return 0;
}

static nsm_geom mgeom(const geom *g)
{
    nsm_geom m = {g->m, g->n, g->xT, g->batch, g->dt};
    return m;
}

/* R = X X^T (symmetric). */
static int emit_syrk(seq *q, const geom *g, const void *x, void *r, dm_err *err)
{
    int rc;
    if (kernel_is_sym(g->kern)) {
        nsm_op op;
        nsm_geom mg = mgeom(g);
        nsm_op_syrk(&op, &mg, x, r, 1.f);
        if (emit_symk(q, g, &op, err)) return -1;
        count_sym(q, g, (double)g->n);
        return 0;
    }
    if (g->bs_x >= g->m) { /* one full (batched) product */
        geom f = *g;
        gemm_args a;
        memset(&a, 0, sizeof a);
        int64_t m = f.m, n = f.n;
        a.M = a.N = m;
        a.K = n;
        if (f.xT) {
            a.ta = CUBLAS_OP_T;
            a.tb = CUBLAS_OP_N;
            a.lda = a.ldb = n;
        } else {
            a.ta = CUBLAS_OP_N;
            a.tb = CUBLAS_OP_T;
            a.lda = a.ldb = m;
        }
        a.a = a.b = x;
        a.alpha = 1.f;
        a.d = r;
        a.ldc = a.ldd = m;
        a.sa = a.sb = m * n;
        a.sc = a.sd = m * m;
        rc = seq_gemm(q, &a, g->dt, g->batch, err);
    } else {
        rc = emit_sym_levels(q, g, g->bs_x, 0, x, x, 1.f, 0.f, NULL, r, err);
    }
    if (rc) return -1;
    count_sym(q, g, (double)g->n);
    return emit_mirror(q, g, g->bs_x, r, err);
}

/* D = alpha S1 S2 + beta C for m x m S1, S2 that commute (so D is symmetric in exact arithmetic),
 * as cuBLASLt computes it here: column-major, so on the row-major storage D = S2 S1 + C. sym:
 * our kernels may mirror the result's lower tiles (the result is symmetric to rounding: X X^T,
 * polynomials in R, P R P); 0: they compute every tile, the operand order kept (R Z and Q of
 * the Gram NS, whose rounding-level asymmetry the iteration amplifies: run 9, NOTES.md).
 * cuBLASLt's block scheme (bs_s < m) mirrors every one as before. */
static int emit_symm(seq *q, const geom *g, const void *s1, const void *s2, float alpha,
                     float beta, const void *c, void *d, int sym, dm_err *err)
{
    int rc;
    if (kernel_is_sym(g->kern)) {
        nsm_op op;
        nsm_geom mg = mgeom(g);
        nsm_op_mm(&op, &mg, s2, s1, alpha, beta, c, 0.f, d, sym); /* row-major S2 S1: cuBLASLt's product */
        if (emit_symk(q, g, &op, err)) return -1;
        count_sym(q, g, (double)g->m);
        return 0;
    }
    if (g->bs_s >= g->m) {
        gemm_args a;
        memset(&a, 0, sizeof a);
        int64_t m = g->m;
        a.M = a.N = a.K = m;
        a.ta = a.tb = CUBLAS_OP_N;
        a.a = s1;
        a.b = s2;
        a.lda = a.ldb = a.ldc = a.ldd = m;
        a.alpha = alpha;
        a.beta = beta;
        a.c = c;
        a.d = d;
        a.sa = a.sb = a.sc = a.sd = m * m;
        rc = seq_gemm(q, &a, g->dt, g->batch, err);
    } else {
        rc = emit_sym_levels(q, g, g->bs_s, 1, s1, s2, alpha, beta, c, d, err);
    }
    if (rc) return -1;
    count_sym(q, g, (double)g->m);
    return emit_mirror(q, g, g->bs_s, d, err);
}

/* D = alpha S X + beta C (m x n, X's layout); a full product. dt_d: D's (and C's) dtype. */
static int emit_apply(seq *q, const geom *g, const void *s, const void *x, float alpha,
                      float beta, const void *c, void *d, dm_err *err)
{
    gemm_args a;
    memset(&a, 0, sizeof a);
    int64_t m = g->m, n = g->n;
    if (g->xT) { /* (S X)^T = X^T S^T: A = stored X^T (n x m, ld n), B = S transposed */
        a.M = n;
        a.N = m;
        a.K = m;
        a.ta = CUBLAS_OP_N;
        a.tb = CUBLAS_OP_T;
        a.a = x;
        a.lda = n;
        a.b = s;
        a.ldb = m;
        a.ldc = a.ldd = n;
    } else {
        a.M = m;
        a.N = n;
        a.K = m;
        a.ta = a.tb = CUBLAS_OP_N;
        a.a = s;
        a.lda = m;
        a.b = x;
        a.ldb = m;
        a.ldc = a.ldd = m;
    }
    a.sa = g->xT ? m * n : m * m;
    a.sb = g->xT ? m * m : m * n;
    a.sc = a.sd = m * n;
    a.alpha = alpha;
    a.beta = beta;
    a.c = c;
    a.d = d;
    double f = 2.0 * (double)m * (double)m * (double)n * g->batch;
    q->flops_full += f;
    q->flops_nominal += f;
    return seq_gemm(q, &a, g->dt, g->batch, err);
}

/* ---- plans -------------------------------------------------------------------------------- */

struct ns_plan {
    int64_t rows, cols;
    geom g;
    dm_dtype io;
    ns_config cfg;
    void *in, *out;
    void *xbuf[2];  /* work dtype, m x n per entry */
    void *sbuf[6];  /* work dtype, m x m per entry */
    float *partial;
    float *scal;   /* folded normalization: {1/s^2, 0, 1/s, a0/s}, s = ||G|| + eps */
    unsigned *cnt; /* its block counter */
    int fold;      /* normalization folded into the first products */
    nsm_fused *fused; /* kernel fused*: the whole NS */
    nsm_block *block; /* kernel block: the whole NS */
    seq q;
};

extern "C" void ns_plan_destroy(ns_plan *p)
{
    if (!p) return;
    seq_free(&p->q);
    nsm_fused_destroy(p->fused);
    nsm_block_destroy(p->block);
    cudaFree(p->in);
    cudaFree(p->out);
    for (int i = 0; i < 2; i++) cudaFree(p->xbuf[i]);
    for (int i = 0; i < 6; i++) cudaFree(p->sbuf[i]);
    cudaFree(p->partial);
    cudaFree(p->scal);
    cudaFree(p->cnt);
    free(p);
}

extern "C" void *ns_plan_input(ns_plan *p) { return p->in; }
extern "C" void *ns_plan_output(ns_plan *p) { return p->out; }

static int emit_normalize(ns_plan *p, void *dst, dm_err *err)
{
    int64_t per = p->g.m * p->g.n;
    int nblk = nsk_norm_blocks(per);
    step *t = seq_push(&p->q, ST_SUMSQ, err);
    if (!t) return -1;
    t->x = p->in;
    t->dt_in = p->io;
    t->len = per;
    t->batch = p->g.batch;
    t->partial = p->partial;
    t->nblk = nblk;
    t = seq_push(&p->q, ST_NORMALIZE, err);
    if (!t) return -1;
    t->x = p->in;
    t->dt_in = p->io;
    t->y = dst;
    t->dt_out = p->g.dt;
    t->len = per;
    t->batch = p->g.batch;
    t->partial = p->partial;
    t->nblk = nblk;
    t->f = (float)p->cfg.norm_eps;
    return 0;
}

/* Folded normalization: the sum of squares of the input, leaving the device scalars (a0: the
 * first iteration's a, for the direct plan's first apply). */
static int emit_scalars(ns_plan *p, float a0, dm_err *err)
{
    int64_t per = p->g.m * p->g.n;
    step *t = seq_push(&p->q, ST_SUMSQ, err);
    if (!t) return -1;
    t->x = p->in;
    t->dt_in = p->io;
    t->len = per;
    t->batch = 1;
    t->partial = p->partial;
    t->nblk = nsk_norm_blocks(per);
    t->cnt = p->cnt;
    t->scal = p->scal;
    t->f = (float)p->cfg.norm_eps;
    t->alpha = a0;
    return 0;
}

/* Emit GEMMs scaled by the device scalars scal[ia] (alpha) and scal[ib] (beta) until
 * scal_off. */
static void scal_on(ns_plan *p, int ia, int ib)
{
    p->q.scal_alpha = p->scal + ia;
    p->q.scal_beta = p->scal + ib;
}
static void scal_off(ns_plan *p) { p->q.scal_alpha = p->q.scal_beta = NULL; }

/* The last product writes straight into the output when the dtypes agree, else into a work
 * buffer followed by a conversion. */
static int emit_finish(ns_plan *p, void *work_result, dm_err *err)
{
    if (work_result == p->out) return 0;
    step *t = seq_push(&p->q, ST_CONVERT, err);
    if (!t) return -1;
    t->x = work_result;
    t->dt_in = p->g.dt;
    t->y = p->out;
    t->dt_out = p->io;
    t->len = p->g.m * p->g.n * p->g.batch;
    return 0;
}

static int build_direct(ns_plan *p, dm_err *err)
{
    const geom *g = &p->g;
    void *x = p->xbuf[0], *A = p->sbuf[0], *B = p->sbuf[1];
    if (p->fold) {
        x = p->in; /* G itself; the first syrk and apply scale by 1/||G|| */
        if (emit_scalars(p, (float)p->cfg.coeffs.a[0], err)) return -1;
    } else if (emit_normalize(p, x, err)) {
        return -1;
    }
    for (int it = 0; it < p->cfg.coeffs.n; it++) {
        float a = (float)p->cfg.coeffs.a[it], b = (float)p->cfg.coeffs.b[it],
              c = (float)p->cfg.coeffs.c[it];
        int last = it == p->cfg.coeffs.n - 1, raw = x == p->in;
        void *dst = last && p->io == g->dt ? p->out : x == p->xbuf[0] ? p->xbuf[1] : p->xbuf[0];
        if (raw) scal_on(p, 0, 1); /* A = (G G^T) / s^2 */
        int rc = emit_syrk(&p->q, g, x, A, err);
        scal_off(p);
        if (rc || emit_symm(&p->q, g, A, A, c, b, A, B, 1, err)) return -1;
        if (raw) scal_on(p, 2, 3); /* X1 = (B G) / s + (a / s) G */
        rc = emit_apply(&p->q, g, B, x, 1.f, a, x, dst, err);
        scal_off(p);
        if (rc) return -1;
        x = dst;
    }
    return emit_finish(p, x, err);
}

static int build_gram(ns_plan *p, dm_err *err)
{
    const geom *g = &p->g;
    void *x = p->xbuf[0], *xn = p->xbuf[1];
    void *R = p->sbuf[0], *Rn = p->sbuf[1], *Z = p->sbuf[2], *RZ = p->sbuf[3], *Q = p->sbuf[4],
         *Qn = p->sbuf[5], *tmp;
    int have_q = 0, n_it = p->cfg.coeffs.n;
    if (p->fold) {
        x = p->in; /* G itself: R = G G^T / s^2, and Q G / s where Q is applied to it */
        if (emit_scalars(p, 0.f, err)) return -1;
        scal_on(p, 0, 1);
    } else if (emit_normalize(p, x, err)) {
        return -1;
    }
    int rc0 = emit_syrk(&p->q, g, x, R, err);
    scal_off(p);
    if (rc0) return -1;
    for (int it = 0; it < n_it; it++) {
        float a = (float)p->cfg.coeffs.a[it], b = (float)p->cfg.coeffs.b[it],
              c = (float)p->cfg.coeffs.c[it];
        if (it > 0 && (p->cfg.restarts >> it & 1u) && have_q) {
            if (x == p->in) scal_on(p, 2, 1);
            int rc = emit_apply(&p->q, g, Q, x, 1.f, 0.f, NULL, xn, err);
            scal_off(p);
            if (rc) return -1;
            tmp = x, x = xn, xn = tmp == p->in ? p->xbuf[0] : tmp; /* never write the input */
            if (emit_syrk(&p->q, g, x, R, err)) return -1;
            have_q = 0;
        }
        if (emit_symm(&p->q, g, R, R, c, b, R, Z, 1, err)) return -1;
        int need_r = it < n_it - 1 && !(p->cfg.restarts >> (it + 1) & 1u);
        if (need_r) {
            if (emit_symm(&p->q, g, R, Z, 1.f, a, R, RZ, 0, err) ||
                emit_symm(&p->q, g, Z, RZ, 1.f, a, RZ, Rn, 1, err))
                return -1;
            tmp = R, R = Rn, Rn = tmp;
        }
        if (!have_q) { /* Q = Z + aI, in Z's buffer */
            tmp = Q, Q = Z, Z = tmp;
            step *t = seq_push(&p->q, ST_DIAG, err);
            if (!t) return -1;
            t->y = Q;
            t->dt_in = g->dt;
            t->m = g->m;
            t->batch = g->batch;
            t->f = a;
            have_q = 1;
        } else {
            if (emit_symm(&p->q, g, Q, Z, 1.f, a, Q, Qn, 0, err)) return -1;
            tmp = Q, Q = Qn, Qn = tmp;
        }
    }
    void *dst = p->io == g->dt ? p->out : xn;
    if (x == p->in) scal_on(p, 2, 1);
    int rc = emit_apply(&p->q, g, Q, x, 1.f, 0.f, NULL, dst, err);
    scal_off(p);
    if (rc) return -1;
    return emit_finish(p, dst, err);
}

/* The whole NS as one step: the fused kernel over the plan's own buffers. */
static int build_fused(ns_plan *p, dm_err *err)
{
    nsm_fused_args a;
    memset(&a, 0, sizeof a);
    a.g = mgeom(&p->g);
    a.io = p->io;
    a.in = p->in;
    a.out = p->out;
    for (int i = 0; i < 2; i++) a.xbuf[i] = p->xbuf[i];
    for (int i = 0; i < 6; i++) a.sbuf[i] = p->sbuf[i];
    a.algo = p->cfg.algo;
    a.coeffs = &p->cfg.coeffs;
    a.restarts = p->cfg.restarts;
    a.eps = (float)p->cfg.norm_eps;
    a.tile = kernel_tile(p->cfg.kernel);
    if (nsm_fused_create(&a, &p->fused, err)) return -1;
    step *t = seq_push(&p->q, ST_FUSED, err);
    if (!t) return -1;
    t->fused = p->fused;
    int n_ops, n_bar, grid, threads;
    double fe, ff, fn;
    nsm_fused_info(p->fused, &n_ops, &n_bar, &grid, &threads, &fe, &ff, &fn);
    snprintf(t->desc, sizeof t->desc, "%s: %d ops, %d barriers, %d CTAs x %d", ns_kernel_name(p->cfg.kernel), n_ops,
             n_bar, grid, threads);
    p->q.flops_exec += fe;
    p->q.flops_full += ff;
    p->q.flops_nominal += fn;
    return 0;
}

/* The whole direct NS as one step: one CTA (or cluster) per matrix (ns_block.cu), from the
 * plan's input to its output. */
static int build_block(ns_plan *p, dm_err *err)
{
    nsm_block_args a;
    memset(&a, 0, sizeof a);
    a.g = mgeom(&p->g);
    a.io = p->io;
    a.in = p->in;
    a.out = p->out;
    a.coeffs = &p->cfg.coeffs;
    a.eps = (float)p->cfg.norm_eps;
    a.b16 = p->cfg.kernel == NS_KERNEL_BLOCK16;
    if (nsm_block_create(&a, &p->block, err)) return -1;
    step *t = seq_push(&p->q, ST_BLOCK, err);
    if (!t) return -1;
    t->blk = p->block;
    int ctas, cols;
    int64_t smem;
    double fe, ff, fn;
    nsm_block_info(p->block, &ctas, &cols, &smem, &fe, &ff, &fn);
    snprintf(t->desc, sizeof t->desc, "%s: %d x %d CTAs of %d columns, %lld B shared", ns_kernel_name(p->cfg.kernel),
             p->g.batch, ctas, cols, (long long)smem);
    p->q.flops_exec += fe;
    p->q.flops_full += ff;
    p->q.flops_nominal += fn;
    return 0;
}

extern "C" int ns_plan_create(int64_t rows, int64_t cols, int batch, dm_dtype io,
                              const ns_config *cfg, ns_plan **out, dm_err *err)
{
    *out = NULL;
    if (rows < 1 || cols < 1 || batch < 1)
        return dm_err_set(err, "ns_plan_create: bad shape %lldx%lld batch %d", (long long)rows,
                          (long long)cols, batch);
    if (cfg->coeffs.n < 1 || cfg->coeffs.n > NS_MAX_ITERS)
        return dm_err_set(err, "ns_plan_create: n_iters %d not in 1..%d", cfg->coeffs.n, NS_MAX_ITERS);
    if (cfg->work == DM_DT_FP32)
        return dm_err_set(err, "ns_plan_create: the work dtype must be bf16 or fp16");
    if (cfg->sym_blocks < 1 || cfg->sym_blocks > 16 || cfg->sym_blocks_mm < 1 || cfg->sym_blocks_mm > 16)
        return dm_err_set(err, "ns_plan_create: sym_blocks %d / sym_blocks_mm %d not in 1..16",
                          cfg->sym_blocks, cfg->sym_blocks_mm);
    ns_plan *p = (ns_plan *)dm_calloc(1, sizeof *p, err);
    if (!p) return -1;
    p->rows = rows;
    p->cols = cols;
    p->io = io;
    p->cfg = *cfg;
    p->g.m = rows <= cols ? rows : cols;
    p->g.n = rows <= cols ? cols : rows;
    p->g.xT = rows <= cols;
    p->g.batch = batch;
    p->g.dt = cfg->work;
    p->g.bs_x = sym_block_size(p->g.m, cfg->sym_blocks);
    p->g.bs_s = sym_block_size(p->g.m, cfg->sym_blocks_mm);
    p->g.flat = cfg->sym_flat != 0;
    if (!ns_kernel_supported(cfg->kernel, rows, cols, batch) || (ns_kernel_is_block(cfg->kernel) && cfg->algo != DM_NS_DIRECT))
        p->cfg.kernel = NS_KERNEL_LT; /* ours cannot: cuBLASLt */
    p->g.kern = kernel_is_sym(p->cfg.kernel) ? p->cfg.kernel : NS_KERNEL_LT;
    int64_t m = p->g.m, n = p->g.n;
    size_t ex = (size_t)(m * n) * batch, es = (size_t)(m * m) * batch, w = dm_dtype_size(cfg->work);
    /* a block plan's one kernel keeps everything in shared memory: only its input and output */
    int blk = ns_kernel_is_block(p->cfg.kernel);
    int n_x = blk ? 0 : 2, n_s = blk ? 0 : cfg->algo == DM_NS_GRAM ? 6 : 2;
    cudaError_t e = cudaMalloc(&p->in, ex * dm_dtype_size(io));
    if (e == cudaSuccess) e = cudaMalloc(&p->out, ex * dm_dtype_size(io));
    for (int i = 0; i < n_x && e == cudaSuccess; i++) e = cudaMalloc(&p->xbuf[i], ex * w);
    for (int i = 0; i < n_s && e == cudaSuccess; i++) e = cudaMalloc(&p->sbuf[i], es * w);
    if (e == cudaSuccess && !blk)
        e = cudaMalloc((void **)&p->partial, sizeof(float) * (size_t)nsk_norm_blocks(m * n) * batch);
    p->fold = !blk && cfg->norm_fold && batch == 1 && io == cfg->work;
    if (e == cudaSuccess && p->fold) e = cudaMalloc((void **)&p->scal, 4 * sizeof(float));
    if (e == cudaSuccess && p->fold) e = cudaMalloc((void **)&p->cnt, sizeof(unsigned));
    if (e == cudaSuccess && p->fold) e = cudaMemset(p->cnt, 0, sizeof(unsigned));
    if (e != cudaSuccess) {
        dm_err_set(err, "ns_plan_create %lldx%lld batch %d: device buffers (cudaMalloc/cudaMemset): %s",
                   (long long)rows, (long long)cols, batch, cudaGetErrorString(e));
        cudaGetLastError();
        goto fail;
    }
    if (seq_init(&p->q, cfg->heuristic, err)) goto fail;
    if (blk) {
        if (build_block(p, err)) goto fail;
    } else if (kernel_is_fused(p->cfg.kernel)) {
        if (build_fused(p, err)) goto fail;
    } else if ((cfg->algo == DM_NS_GRAM ? build_gram(p, err) : build_direct(p, err))) {
        goto fail;
    }
    { /* picks are per position in the plan's list of distinct GEMMs: they belong to a plan of
         the same structure, which has as many distinct GEMMs (up to NS_MAX_PICKS); any other
         plan (another io dtype, so no folded normalization; other iterations or restarts) drops
         them and keeps `heuristic` for every GEMM */
        seq *q = &p->q;
        int np = (int)strlen(cfg->gemm_picks), want = q->n_sigs < NS_MAX_PICKS ? q->n_sigs : NS_MAX_PICKS;
        if (np == want)
            for (int si = 0; si < np; si++) {
                int h = ns_pick_value(cfg->gemm_picks[si]);
                seq_set_pick(q, si, h < 0 ? q->heuristic : h);
            }
        else
            p->cfg.gemm_picks[0] = 0;
    }
    /* the buffers' zeroed counter (cudaMemset on the legacy stream) before any stream uses it */
    if (cudaDeviceSynchronize() != cudaSuccess) {
        dm_err_set(err, "ns_plan_create: %s", cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    *out = p;
    return 0;
fail:
    ns_plan_destroy(p);
    return -1;
}

extern "C" int ns_plan_run(ns_plan *p, ns_stream s, int use_graph, dm_err *err)
{
    return seq_run(&p->q, (cudaStream_t)s, use_graph, err);
}

/* Drop a captured graph (the steps changed). */
static void seq_drop_graph(seq *q)
{
    if (q->exec) cudaGraphExecDestroy(q->exec);
    if (q->graph) cudaGraphDestroy(q->graph);
    q->exec = NULL;
    q->graph = NULL;
}

/* Time step i alone: a graph of `reps` back-to-back launches, replayed once to warm up, then 3
 * times between events; the best replay over reps, in us. Returns 1 (and no time) when the
 * step cannot be captured or run with its current algorithm. */
static int time_step(seq *q, int i, cudaStream_t s, int reps, double *us, dm_err *err)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = 1, ok = 1;
    dm_err ignored;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) goto cuda_fail;
    for (int r = 0; r < reps && ok; r++) ok = seq_run_step(q, i, s, &ignored) == 0;
    if (cudaStreamEndCapture(s, &g) != cudaSuccess || !ok || !g ||
        cudaGraphInstantiate(&ge, g, 0) != cudaSuccess || cudaGraphLaunch(ge, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess) {
        cudaGetLastError(); /* this algorithm does not run here: not a candidate */
        goto out;
    }
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) goto cuda_fail;
    *us = -1;
    for (int k = 0; k < 3; k++) {
        float ms;
        if (cudaEventRecord(e0, s) != cudaSuccess || cudaGraphLaunch(ge, s) != cudaSuccess ||
            cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            goto cuda_fail;
        if (*us < 0 || ms * 1e3 / reps < *us) *us = ms * 1e3 / reps;
    }
    rc = 0;
    goto out;
cuda_fail:
    rc = -1;
    dm_err_set(err, "ns_plan_tune_gemms: %s", cudaGetErrorString(cudaGetLastError()));
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    return rc;
}

extern "C" int ns_plan_tune_gemms(ns_plan *p, ns_stream s_in, dm_err *err)
{
    seq *q = &p->q;
    cudaStream_t s = (cudaStream_t)s_in;
    cudaStream_t own = NULL;
    if (!s) { /* capture needs a stream of our own */
        NS_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
        s = own;
    }
    int rc = -1;
    seq_drop_graph(q);
    /* buffers of finite values (the timed GEMMs read what earlier steps would have written) */
    if (ns_fill_random(p->in, p->io, p->g.m * p->g.n * p->g.batch, 0x7e57u, 1.f, (ns_stream)s, err) ||
        seq_run_steps(q, s, err))
        goto out;
    for (int si = 0; si < q->n_sigs && si < NS_MAX_PICKS; si++) { /* those a picks string can hold */
        gemm_sig *sg = &q->sigs[si];
        int i0 = 0;
        while (i0 < q->n && !(q->steps[i0].kind == ST_GEMM && q->steps[i0].sig == si)) i0++;
        if (i0 == q->n || sg->nres < 2) continue;
        step *t = &q->steps[i0];
        /* launches per replay: about 1 ms of work, 1..64 */
        double t0 = 0;
        t->algo = sg->algo[0];
        int r0 = time_step(q, i0, s, 2, &t0, err);
        if (r0 < 0) {
            seq_set_pick(q, si, sg->pick); /* the step runs what the plan names again */
            goto out;
        }
        int reps = r0 == 0 && t0 > 0 ? (int)(1000.0 / t0) : 8;
        reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        int best = sg->pick;
        double best_us = -1;
        for (int h = 0; h < sg->nres; h++) {
            double us;
            t->algo = sg->algo[h];
            int r = time_step(q, i0, s, reps, &us, err);
            if (r < 0) {
                seq_set_pick(q, si, sg->pick);
                goto out;
            }
            if (r == 0 && (best_us < 0 || us < best_us)) best_us = us, best = h;
        }
        seq_set_pick(q, si, best);
    }
    { /* the picks, as ns_config keeps them */
        int np = q->n_sigs < NS_MAX_PICKS ? q->n_sigs : NS_MAX_PICKS;
        for (int i = 0; i < np; i++) p->cfg.gemm_picks[i] = ns_pick_digit(q->sigs[i].pick);
        p->cfg.gemm_picks[np] = 0;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess) {
        dm_err_set(err, "ns_plan_tune_gemms: %s", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    rc = 0;
out:
    if (own) cudaStreamDestroy(own);
    return rc;
}

extern "C" void ns_plan_config(const ns_plan *p, ns_config *cfg) { *cfg = p->cfg; }

extern "C" int ns_plan_poison_work(ns_plan *p, dm_err *err)
{
    size_t ex = (size_t)(p->g.m * p->g.n) * p->g.batch, es = (size_t)(p->g.m * p->g.m) * p->g.batch;
    for (int i = 0; i < 2; i++)
        if (p->xbuf[i] && ns_fill_poison(p->xbuf[i], p->g.dt, (int64_t)ex, NULL, err)) return -1;
    for (int i = 0; i < 6; i++)
        if (p->sbuf[i] && ns_fill_poison(p->sbuf[i], p->g.dt, (int64_t)es, NULL, err)) return -1;
    NS_CUDA(cudaDeviceSynchronize());
    return 0;
}

static const char *step_name(const step *t)
{
    static const char *names[] = {"gemm", "sumsq", "normalize", "add_diag", "mirror", "convert", "symk", "fused", "block"};
    return t->kind == ST_GEMM || t->kind == ST_SYMK || t->kind == ST_FUSED || t->kind == ST_BLOCK ? t->desc : names[t->kind];
}

extern "C" int ns_plan_profile(ns_plan *p, ns_stream s, FILE *out, dm_err *err)
{
    seq *q = &p->q;
    cudaEvent_t *ev = (cudaEvent_t *)dm_calloc((size_t)q->n + 1, sizeof *ev, err);
    double *best = (double *)dm_calloc((size_t)q->n, sizeof *best, err);
    int made = 0, rc = -1;
    if (!ev || !best) goto out;
    for (; made <= q->n; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) {
            dm_err_set(err, "ns_plan_profile: cudaEventCreate failed");
            goto out;
        }
    for (int rep = 0; rep < 5; rep++) { /* the best of 5 per step: launch gaps excluded */
        if (cudaEventRecord(ev[0], (cudaStream_t)s) != cudaSuccess) goto cuda_fail;
        for (int i = 0; i < q->n; i++) {
            if (seq_run_step(q, i, (cudaStream_t)s, err)) goto out;
            if (cudaEventRecord(ev[i + 1], (cudaStream_t)s) != cudaSuccess) goto cuda_fail;
        }
        if (cudaEventSynchronize(ev[q->n]) != cudaSuccess) goto cuda_fail;
        for (int i = 0; i < q->n; i++) {
            float ms;
            if (cudaEventElapsedTime(&ms, ev[i], ev[i + 1]) != cudaSuccess) goto cuda_fail;
            if (rep == 0 || ms * 1e3 < best[i]) best[i] = ms * 1e3;
        }
    }
    {
        double total = 0;
        for (int i = 0; i < q->n; i++) total += best[i];
        fprintf(out, "# profile %lldx%lld batch %d %s %s sym_blocks %d/%d: %d steps, sum of steps %.1f us\n",
                (long long)p->g.m, (long long)p->g.n, p->g.batch, dm_ns_algo_name(p->cfg.algo),
                dm_dtype_name(p->g.dt), p->cfg.sym_blocks, p->cfg.sym_blocks_mm, q->n, total);
        for (int i = 0; i < q->n; i++)
            if (q->steps[i].kind == ST_GEMM)
                fprintf(out, "#   %3d %-44s %9.1f us  h%d\n", i, step_name(&q->steps[i]), best[i],
                        q->sigs[q->steps[i].sig].pick);
            else
                fprintf(out, "#   %3d %-44s %9.1f us\n", i, step_name(&q->steps[i]), best[i]);
        for (int i = 0; i < q->n; i++) /* our fused or block NS: its phases */
            if ((q->steps[i].kind == ST_FUSED && nsm_fused_profile(q->steps[i].fused, (cudaStream_t)s, out, err)) ||
                (q->steps[i].kind == ST_BLOCK && nsm_block_profile(q->steps[i].blk, (cudaStream_t)s, out, err)))
                goto out;
    }
    rc = 0;
    goto out;
cuda_fail:
    dm_err_set(err, "ns_plan_profile: %s", cudaGetErrorString(cudaGetLastError()));
out:
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    free(best);
    return rc;
}

extern "C" void ns_plan_get_stats(const ns_plan *p, ns_plan_stats *st)
{
    st->m = p->g.m;
    st->n = p->g.n;
    st->batch = p->g.batch;
    st->n_gemms = p->q.n_gemms;
    st->n_kernels = p->q.n_kernels;
    st->flops_executed = p->q.flops_exec;
    st->flops_full = p->q.flops_full;
    st->flops_nominal = p->q.flops_nominal;
}

/* ---- single products ---------------------------------------------------------------------- */

struct ns_prod {
    ns_prod_kind kind;
    geom g;
    void *x, *s, *d, *dref;
    seq q, qref; /* this product, and the full-GEMM version into dref (made by ns_prod_check) */
    int have_ref;
};

extern "C" void ns_prod_destroy(ns_prod *p)
{
    if (!p) return;
    seq_free(&p->q);
    seq_free(&p->qref);
    cudaFree(p->x);
    cudaFree(p->s);
    cudaFree(p->d);
    cudaFree(p->dref);
    free(p);
}

static int prod_emit(ns_prod *p, seq *q, const geom *g, void *d, dm_err *err)
{
    switch (p->kind) {
    case NS_PROD_GEMM: return emit_apply(q, g, p->s, p->x, 1.f, 0.f, NULL, d, err);
    case NS_PROD_SYRK: return emit_syrk(q, g, p->x, d, err);
    default: return emit_symm(q, g, p->s, p->s, 1.f, 0.f, NULL, d, 1, err);
    }
}

extern "C" int ns_prod_create(ns_prod_kind kind, int64_t m, int64_t n, int batch, dm_dtype dt,
                              int sym_blocks, ns_prod **out, dm_err *err)
{
    return ns_prod_create_kernel(kind, m, n, batch, dt, sym_blocks, NS_KERNEL_LT, out, err);
}

extern "C" int ns_prod_create_kernel(ns_prod_kind kind, int64_t m, int64_t n, int batch, dm_dtype dt,
                                     int sym_blocks, ns_kernel kernel, ns_prod **out, dm_err *err)
{
    *out = NULL;
    if (m < 1 || n < m || batch < 1 || dt == DM_DT_FP32 || sym_blocks < 1 || sym_blocks > 16)
        return dm_err_set(err, "ns_prod_create: bad arguments (m %lld, n %lld, batch %d)",
                          (long long)m, (long long)n, batch);
    if (kernel != NS_KERNEL_LT && (kind == NS_PROD_GEMM || ns_kernel_is_block(kernel) ||
                                  !ns_kernel_supported(kernel, m, n, batch)))
        return dm_err_set(err, "ns_prod_create: kernel %s does not take this product (%lldx%lld)",
                          ns_kernel_name(kernel), (long long)m, (long long)n);
    ns_prod *p = (ns_prod *)dm_calloc(1, sizeof *p, err);
    if (!p) return -1;
    p->kind = kind;
    p->g.m = m;
    p->g.n = kind == NS_PROD_SYMM ? m : n;
    p->g.xT = 1;
    p->g.batch = batch;
    p->g.dt = dt;
    p->g.bs_x = p->g.bs_s = kind == NS_PROD_GEMM ? m : sym_block_size(m, sym_blocks);
    p->g.kern = kernel_is_fused(kernel) ? NS_KERNEL_SYM64 : kernel;
    size_t w = dm_dtype_size(dt), ex = (size_t)(m * p->g.n) * batch, es = (size_t)(m * m) * batch;
    size_t dsz = kind == NS_PROD_GEMM ? ex : es;
    cudaError_t e = cudaMalloc(&p->x, ex * w);
    if (e == cudaSuccess) e = cudaMalloc(&p->s, es * w);
    if (e == cudaSuccess) e = cudaMalloc(&p->d, dsz * w);
    if (e != cudaSuccess) {
        dm_err_set(err, "ns_prod_create: cudaMalloc: %s", cudaGetErrorString(e));
        cudaGetLastError();
        goto fail;
    }
    /* operands of unit-ish scale: X ~ N(0, 1/n); S symmetric ~ N(0, 1/m) */
    if (ns_fill_random(p->x, dt, (int64_t)ex, 0x5eed0001u, 1.f / sqrtf((float)p->g.n), NULL, err) ||
        ns_fill_random(p->s, dt, (int64_t)es, 0x5eed0002u, 1.f / sqrtf((float)m), NULL, err) ||
        nsk_mirror_blocks(p->s, dt, m, 1, batch, NULL, err) ||
        ns_fill_poison(p->d, dt, (int64_t)dsz, NULL, err))
        goto fail;
    if (seq_init(&p->q, 0, err) || prod_emit(p, &p->q, &p->g, p->d, err)) goto fail;
    if (cudaDeviceSynchronize() != cudaSuccess) {
        dm_err_set(err, "ns_prod_create: %s", cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    *out = p;
    return 0;
fail:
    ns_prod_destroy(p);
    return -1;
}

extern "C" int ns_prod_run(ns_prod *p, ns_stream s, dm_err *err)
{
    return seq_run(&p->q, (cudaStream_t)s, 0, err);
}

extern "C" void ns_prod_buffers(ns_prod *p, void **x, void **s, void **d)
{
    *x = p->x;
    *s = p->s;
    *d = p->d;
}

extern "C" double ns_prod_flops(const ns_prod *p, int executed)
{
    return executed ? p->q.flops_exec : p->q.flops_full;
}

extern "C" int ns_prod_check(ns_prod *p, double *rel_err, dm_err *err)
{
    int64_t len = (p->kind == NS_PROD_GEMM ? p->g.m * p->g.n : p->g.m * p->g.m) * p->g.batch;
    if (!p->have_ref) {
        geom gf = p->g;
        gf.bs_x = gf.bs_s = gf.m;
        gf.kern = NS_KERNEL_LT;
        if (!p->dref) NS_CUDA(cudaMalloc(&p->dref, (size_t)len * dm_dtype_size(p->g.dt)));
        if (seq_init(&p->qref, 0, err) || prod_emit(p, &p->qref, &gf, p->dref, err)) {
            seq_free(&p->qref); /* a later call starts over (dref is kept, freed by the destroy) */
            return -1;
        }
        p->have_ref = 1;
    }
    if (ns_fill_poison(p->d, p->g.dt, len, NULL, err) ||
        ns_fill_poison(p->dref, p->g.dt, len, NULL, err) ||
        seq_run(&p->q, NULL, 0, err) || seq_run(&p->qref, NULL, 0, err))
        return -1;
    double d2, r2;
    if (nsk_diff_norms(p->d, p->dref, p->g.dt, len, &d2, &r2, NULL, err)) return -1;
    *rel_err = sqrt(d2) / (sqrt(r2) > 0 ? sqrt(r2) : 1.0);
    return 0;
}
