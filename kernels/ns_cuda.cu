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

/* ---- small helpers ------------------------------------------------------------------------ */

extern "C" const char *ns_dtype_name(ns_dtype t)
{
    return t == NS_BF16 ? "bf16" : t == NS_FP16 ? "fp16" : "fp32";
}
extern "C" size_t ns_dtype_size(ns_dtype t) { return t == NS_FP32 ? 4 : 2; }
extern "C" void ns_config_default(ns_config *cfg, ns_algo algo)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->algo = algo;
    cfg->work = algo == NS_ALGO_GRAM ? NS_FP16 : NS_BF16;
    cfg->sym_blocks = 1;
    cfg->sym_blocks_mm = 1;
    cfg->restarts = 1u << 2;
    cfg->heuristic = 0;
    ns_coeffs_polar_express(&cfg->coeffs, NS_PE_SAFETY_DEFAULT, NULL);
    cfg->norm_eps = 1e-7;
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

typedef enum { ST_GEMM, ST_SUMSQ, ST_NORMALIZE, ST_DIAG, ST_MIRROR, ST_CONVERT } step_kind;

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
    ns_dtype dt_in, dt_out;
    int64_t len, m, bs;
    int batch, nblk;
    float *partial;
    float f;
    char desc[80]; /* for profiles */
} step;

/* A sequence of steps with its cuBLASLt handle and workspace (shared by plans and products). */
typedef struct seq {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    int heuristic;
    step *steps;
    int n, cap;
    int n_gemms, n_kernels;
    double flops_exec, flops_full, flops_nominal;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} seq;

#define WS_BYTES (32u << 20)

static int seq_init(seq *q, int heuristic, dm_err *err)
{
    memset(q, 0, sizeof *q);
    q->heuristic = heuristic;
    q->ws_bytes = WS_BYTES;
    NS_LT(cublasLtCreate(&q->lt));
    NS_CUDA(cudaMalloc(&q->ws, q->ws_bytes));
    return 0;
}

static void seq_free(seq *q)
{
    for (int i = 0; i < q->n; i++) {
        step *t = &q->steps[i];
        if (t->kind != ST_GEMM) continue;
        cublasLtMatmulDescDestroy(t->op);
        cublasLtMatrixLayoutDestroy(t->la);
        cublasLtMatrixLayoutDestroy(t->lb);
        cublasLtMatrixLayoutDestroy(t->lc);
        cublasLtMatrixLayoutDestroy(t->ld);
    }
    free(q->steps);
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
                  int64_t ld, int batch, int64_t stride, dm_err *err)
{
    NS_LT(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t bc = batch;
        NS_LT(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
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
} gemm_args;

static int seq_gemm(seq *q, const gemm_args *g, ns_dtype dt, int batch, dm_err *err)
{
    step *t = seq_push(q, ST_GEMM, err);
    if (!t) return -1;
    cudaDataType_t ct = ns_cuda_type(dt);
    NS_LT(cublasLtMatmulDescCreate(&t->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    NS_LT(cublasLtMatmulDescSetAttribute(t->op, CUBLASLT_MATMUL_DESC_TRANSA, &g->ta, sizeof g->ta));
    NS_LT(cublasLtMatmulDescSetAttribute(t->op, CUBLASLT_MATMUL_DESC_TRANSB, &g->tb, sizeof g->tb));
    int64_t ar = g->ta == CUBLAS_OP_N ? g->M : g->K, ac = g->ta == CUBLAS_OP_N ? g->K : g->M;
    int64_t br = g->tb == CUBLAS_OP_N ? g->K : g->N, bc = g->tb == CUBLAS_OP_N ? g->N : g->K;
    if (layout(&t->la, ct, ar, ac, g->lda, batch, g->sa, err) ||
        layout(&t->lb, ct, br, bc, g->ldb, batch, g->sb, err) ||
        layout(&t->lc, ct, g->M, g->N, g->ldc, batch, g->sc, err) ||
        layout(&t->ld, ct, g->M, g->N, g->ldd, batch, g->sd, err))
        return -1;
    cublasLtMatmulPreference_t pref;
    NS_LT(cublasLtMatmulPreferenceCreate(&pref));
    size_t es = ns_dtype_size(dt);
    uint32_t al[4] = {ptr_align(g->a), ptr_align(g->b), ptr_align(g->c ? g->c : g->d), ptr_align(g->d)};
    if (batch > 1) { /* every batch entry's pointer must meet the alignment too */
        int64_t st[4] = {g->sa, g->sb, g->c ? g->sc : g->sd, g->sd};
        for (int i = 0; i < 4; i++) {
            uint32_t sa = ptr_align((const void *)(uintptr_t)((size_t)st[i] * es));
            if (sa < al[i]) al[i] = sa;
        }
    }
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &q->ws_bytes, sizeof q->ws_bytes);
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(
            pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
            &al[i], sizeof al[i]);
    cublasLtMatmulHeuristicResult_t res[8];
    int nres = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(q->lt, t->op, t->la, t->lb, t->lc, t->ld, pref, 8, res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    NS_LT(st);
    if (nres < 1)
        return dm_err_set(err, "cuBLASLt has no algorithm for %lldx%lldx%lld %s", (long long)g->M,
                          (long long)g->N, (long long)g->K, ns_dtype_name(dt));
    int h = q->heuristic < nres ? q->heuristic : nres - 1;
    snprintf(t->desc, sizeof t->desc, "gemm %c%c %lldx%lldx%lld x%d%s", g->ta == CUBLAS_OP_T ? 'T' : 'N',
             g->tb == CUBLAS_OP_T ? 'T' : 'N', (long long)g->M, (long long)g->N, (long long)g->K,
             batch, g->c && g->beta != 0.f ? " +C" : "");
    t->algo = res[h].algo;
    t->a = g->a;
    t->b = g->b;
    t->c = g->c ? g->c : g->d;
    t->d = g->d;
    t->alpha = g->alpha;
    t->beta = g->c ? g->beta : 0.f;
    q->flops_exec += 2.0 * (double)g->M * (double)g->N * (double)g->K * batch;
    return 0;
}

static int seq_run_step(seq *q, int i, cudaStream_t s, dm_err *err)
{
    {
        step *t = &q->steps[i];
        int rc = 0;
        switch (t->kind) {
        case ST_GEMM:
            NS_LT(cublasLtMatmul(q->lt, t->op, &t->alpha, t->a, t->la, t->b, t->lb, &t->beta,
                                 t->c, t->lc, t->d, t->ld, &t->algo, q->ws, q->ws_bytes, s));
            break;
        case ST_SUMSQ:
            rc = nsk_sumsq_partial(t->x, t->dt_in, t->len, t->batch, t->partial, t->nblk, s, err);
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
    if (!use_graph || s == NULL) return seq_run_steps(q, s, err);
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
    ns_dtype dt;
    int64_t bs_x; /* leaf size of X X^T; bs_x >= m means one full product */
    int64_t bs_s; /* leaf size of the m x m symmetric products */
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
static int emit_sym_levels(seq *q, const geom *g, int64_t bs, int sym_kind, const void *x1,
                           const void *x2, float alpha, float beta, const void *c, void *d,
                           dm_err *err)
{
    size_t es = ns_dtype_size(g->dt);
    int64_t m = g->m, n = g->n;
    int64_t K = sym_kind == 0 ? n : m;
    for (int b = 0; b < g->batch; b++) {
        const char *X1 = (const char *)x1 + (size_t)b * (size_t)(m * (sym_kind == 0 ? n : m)) * es;
        const char *X2 = (const char *)x2 + (size_t)b * (size_t)(m * (sym_kind == 0 ? n : m)) * es;
        const char *C = c ? (const char *)c + (size_t)b * (size_t)(m * m) * es : NULL;
        char *D = (char *)d + (size_t)b * (size_t)(m * m) * es;
        /* size > bs: an off-diagonal level; size == bs: the leaves (full blocks) */
        for (int64_t sz = m; sz >= bs; sz /= 2) {
            int leaf = sz == bs || bs >= m;
            int64_t h = leaf ? sz : sz / 2;   /* block edge */
            int64_t ro = leaf ? 0 : h;          /* row offset of the block in its diagonal block */
            int nb = (int)(m / sz);
            gemm_args a;
            memset(&a, 0, sizeof a);
            a.M = a.N = h;
            a.K = K;
            if (sym_kind == 0 && g->xT) { /* stored X^T (n x m, ld n): rows of X are columns */
                a.ta = CUBLAS_OP_T;
                a.tb = CUBLAS_OP_N;
                a.a = X1 + (size_t)(ro * n) * es;
                a.b = X2;
                a.lda = a.ldb = n;
                a.sa = a.sb = sz * n;
            } else if (sym_kind == 0) { /* stored X (m x n, ld m) */
                a.ta = CUBLAS_OP_N;
                a.tb = CUBLAS_OP_T;
                a.a = X1 + (size_t)ro * es;
                a.b = X2;
                a.lda = a.ldb = m;
                a.sa = a.sb = sz;
            } else { /* rows of S1 times columns of S2 */
                a.ta = a.tb = CUBLAS_OP_N;
                a.a = X1 + (size_t)ro * es;
                a.b = X2;
                a.lda = a.ldb = m;
                a.sa = sz;
                a.sb = sz * m;
            }
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

/* R = X X^T (symmetric). */
static int emit_syrk(seq *q, const geom *g, const void *x, void *r, dm_err *err)
{
    int rc;
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

/* D = alpha S1 S2 + beta C for m x m symmetric S1, S2 that commute (so D is symmetric). */
static int emit_symm(seq *q, const geom *g, const void *s1, const void *s2, float alpha,
                     float beta, const void *c, void *d, dm_err *err)
{
    int rc;
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
    ns_dtype io;
    ns_config cfg;
    void *in, *out;
    void *xbuf[2];  /* work dtype, m x n per entry */
    void *sbuf[6];  /* work dtype, m x m per entry */
    float *partial;
    seq q;
};

extern "C" void ns_plan_destroy(ns_plan *p)
{
    if (!p) return;
    seq_free(&p->q);
    cudaFree(p->in);
    cudaFree(p->out);
    for (int i = 0; i < 2; i++) cudaFree(p->xbuf[i]);
    for (int i = 0; i < 6; i++) cudaFree(p->sbuf[i]);
    cudaFree(p->partial);
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
    void *x = p->xbuf[0], *xn = p->xbuf[1], *A = p->sbuf[0], *B = p->sbuf[1];
    if (emit_normalize(p, x, err)) return -1;
    for (int it = 0; it < p->cfg.coeffs.n; it++) {
        float a = (float)p->cfg.coeffs.a[it], b = (float)p->cfg.coeffs.b[it],
              c = (float)p->cfg.coeffs.c[it];
        int last = it == p->cfg.coeffs.n - 1;
        void *dst = last && p->io == g->dt ? p->out : xn;
        if (emit_syrk(&p->q, g, x, A, err) ||
            emit_symm(&p->q, g, A, A, c, b, A, B, err) ||
            emit_apply(&p->q, g, B, x, 1.f, a, x, dst, err))
            return -1;
        xn = x;
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
    if (emit_normalize(p, x, err) || emit_syrk(&p->q, g, x, R, err)) return -1;
    for (int it = 0; it < n_it; it++) {
        float a = (float)p->cfg.coeffs.a[it], b = (float)p->cfg.coeffs.b[it],
              c = (float)p->cfg.coeffs.c[it];
        if (it > 0 && (p->cfg.restarts >> it & 1u) && have_q) {
            if (emit_apply(&p->q, g, Q, x, 1.f, 0.f, NULL, xn, err)) return -1;
            tmp = x, x = xn, xn = tmp;
            if (emit_syrk(&p->q, g, x, R, err)) return -1;
            have_q = 0;
        }
        if (emit_symm(&p->q, g, R, R, c, b, R, Z, err)) return -1;
        int need_r = it < n_it - 1 && !(p->cfg.restarts >> (it + 1) & 1u);
        if (need_r) {
            if (emit_symm(&p->q, g, R, Z, 1.f, a, R, RZ, err) ||
                emit_symm(&p->q, g, Z, RZ, 1.f, a, RZ, Rn, err))
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
            if (emit_symm(&p->q, g, Q, Z, 1.f, a, Q, Qn, err)) return -1;
            tmp = Q, Q = Qn, Qn = tmp;
        }
    }
    void *dst = p->io == g->dt ? p->out : xn;
    if (emit_apply(&p->q, g, Q, x, 1.f, 0.f, NULL, dst, err)) return -1;
    return emit_finish(p, dst, err);
}

extern "C" int ns_plan_create(int64_t rows, int64_t cols, int batch, ns_dtype io,
                              const ns_config *cfg, ns_plan **out, dm_err *err)
{
    *out = NULL;
    if (rows < 1 || cols < 1 || batch < 1)
        return dm_err_set(err, "ns_plan_create: bad shape %lldx%lld batch %d", (long long)rows,
                          (long long)cols, batch);
    if (cfg->coeffs.n < 1 || cfg->coeffs.n > NS_MAX_ITERS)
        return dm_err_set(err, "ns_plan_create: n_iters %d not in 1..%d", cfg->coeffs.n, NS_MAX_ITERS);
    if (cfg->work == NS_FP32)
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
    int64_t m = p->g.m, n = p->g.n;
    size_t ex = (size_t)(m * n) * batch, es = (size_t)(m * m) * batch, w = ns_dtype_size(cfg->work);
    int n_s = cfg->algo == NS_ALGO_GRAM ? 6 : 2;
    cudaError_t e = cudaMalloc(&p->in, ex * ns_dtype_size(io));
    if (e == cudaSuccess) e = cudaMalloc(&p->out, ex * ns_dtype_size(io));
    for (int i = 0; i < 2 && e == cudaSuccess; i++) e = cudaMalloc(&p->xbuf[i], ex * w);
    for (int i = 0; i < n_s && e == cudaSuccess; i++) e = cudaMalloc(&p->sbuf[i], es * w);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->partial, sizeof(float) * (size_t)nsk_norm_blocks(m * n) * batch);
    if (e != cudaSuccess) {
        dm_err_set(err, "ns_plan_create %lldx%lld batch %d: cudaMalloc: %s", (long long)rows,
                   (long long)cols, batch, cudaGetErrorString(e));
        cudaGetLastError();
        goto fail;
    }
    if (seq_init(&p->q, cfg->heuristic, err)) goto fail;
    if ((cfg->algo == NS_ALGO_GRAM ? build_gram(p, err) : build_direct(p, err))) goto fail;
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

static const char *step_name(const step *t)
{
    static const char *names[] = {"gemm", "sumsq", "normalize", "add_diag", "mirror", "convert"};
    return t->kind == ST_GEMM ? t->desc : names[t->kind];
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
                (long long)p->g.m, (long long)p->g.n, p->g.batch, ns_algo_name(p->cfg.algo),
                ns_dtype_name(p->g.dt), p->cfg.sym_blocks, p->cfg.sym_blocks_mm, q->n, total);
        for (int i = 0; i < q->n; i++)
            fprintf(out, "#   %3d %-44s %9.1f us\n", i, step_name(&q->steps[i]), best[i]);
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
    default: return emit_symm(q, g, p->s, p->s, 1.f, 0.f, NULL, d, err);
    }
}

extern "C" int ns_prod_create(ns_prod_kind kind, int64_t m, int64_t n, int batch, ns_dtype dt,
                              int sym_blocks, ns_prod **out, dm_err *err)
{
    *out = NULL;
    if (m < 1 || n < m || batch < 1 || dt == NS_FP32 || sym_blocks < 1 || sym_blocks > 16)
        return dm_err_set(err, "ns_prod_create: bad arguments (m %lld, n %lld, batch %d)",
                          (long long)m, (long long)n, batch);
    ns_prod *p = (ns_prod *)dm_calloc(1, sizeof *p, err);
    if (!p) return -1;
    p->kind = kind;
    p->g.m = m;
    p->g.n = kind == NS_PROD_SYMM ? m : n;
    p->g.xT = 1;
    p->g.batch = batch;
    p->g.dt = dt;
    p->g.bs_x = p->g.bs_s = kind == NS_PROD_GEMM ? m : sym_block_size(m, sym_blocks);
    size_t w = ns_dtype_size(dt), ex = (size_t)(m * p->g.n) * batch, es = (size_t)(m * m) * batch;
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
        NS_CUDA(cudaMalloc(&p->dref, (size_t)len * ns_dtype_size(p->g.dt)));
        if (seq_init(&p->qref, 0, err) || prod_emit(p, &p->qref, &gf, p->dref, err)) return -1;
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
