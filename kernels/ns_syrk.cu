/* ns_syrk.cu: our tensor-core products as single launches (ns_mma.h): the op builders that the
 * plans and the fused NS share, and nsm_gemm, one product per launch with one CTA per output
 * tile (only the tiles on and below the diagonal of a symmetric result, each mirrored in its
 * epilogue), the scalars of NS (alpha, beta C, the a I term) fused in. */
#include <stdio.h>
#include <string.h>

#include "ns_kern.cuh"
#include "ns_mma.cuh"

int nsm_tile_edge(nsm_tile t) { return t == NSM_T32 ? 32 : t == NSM_T64 ? 64 : 128; }

int nsm_shape_ok(int64_t m, int64_t n)
{
    return m >= 8 && n >= m && m % 8 == 0 && n % 8 == 0 && n < (INT64_C(1) << 28) && m * n <= (INT64_C(1) << 34);
}

static void op_init(nsm_op *op, const nsm_geom *g)
{
    memset(op, 0, sizeof *op);
    op->kind = NSM_GEMM;
    op->batch = g->batch;
    op->dt = g->dt;
    op->dt_d = g->dt;
    op->splits = 1;
    op->barrier_after = 1;
}

void nsm_op_syrk(nsm_op *op, const nsm_geom *g, const void *x, void *r, float alpha)
{
    op_init(op, g);
    int64_t m = g->m, n = g->n;
    op->M = op->N = (int)m;
    op->K = (int)n;
    op->sym = 1;
    op->a = op->b = x;
    /* wide: X row-major (ld n), both operands K-contiguous; tall: X^T row-major (ld m) */
    op->ta = op->tb = g->xT ? 0 : 1;
    op->lda = op->ldb = g->xT ? n : m;
    op->sa = op->sb = m * n;
    op->d = r;
    op->ldc = op->ldd = m;
    op->sc = op->sd = m * m;
    op->alpha = alpha;
}

void nsm_op_mm(nsm_op *op, const nsm_geom *g, const void *s1, const void *s2, float alpha, float beta,
               const void *c, float gamma, void *d, int sym)
{
    op_init(op, g);
    int64_t m = g->m;
    op->M = op->N = op->K = (int)m;
    op->sym = sym != 0;
    op->a = s1;
    op->b = s2; /* B(k,j) = S2[k*m + j]: by rows, as stored (never "S2 is symmetric") */
    op->ta = 0;
    op->tb = 1;
    op->lda = op->ldb = op->ldc = op->ldd = m;
    op->sa = op->sb = op->sc = op->sd = m * m;
    op->alpha = alpha;
    op->beta = c ? beta : 0.f;
    op->c = c;
    op->gamma = gamma;
    op->d = d;
}

void nsm_op_apply(nsm_op *op, const nsm_geom *g, const void *s, const void *x, float alpha, float beta,
                  const void *c, void *d, dm_dtype dt_d)
{
    op_init(op, g);
    int64_t m = g->m, n = g->n;
    int w = g->xT;
    /* wide: D (m x n, ld n) = S X, A = S, B(k,j) = x[k*n + j];
     * tall: D^T (n x m, ld m) = X^T S, A(i,k) = x[i*m + k], B(k,j) = S[j*m + k] */
    op->M = (int)(w ? m : n);
    op->N = (int)(w ? n : m);
    op->K = (int)m;
    op->a = w ? s : x;
    op->b = w ? x : s;
    op->ta = 0;
    op->tb = w ? 1 : 0;
    op->lda = m;
    op->ldb = w ? n : m;
    op->sa = w ? m * m : m * n;
    op->sb = w ? m * n : m * m;
    op->ldc = op->ldd = w ? n : m;
    op->sc = op->sd = m * n;
    op->alpha = alpha;
    op->beta = c ? beta : 0.f;
    op->c = c;
    op->d = d;
    op->dt_d = dt_d;
}

void nsm_op_finish(nsm_op *op, nsm_tile t)
{
    op->edge = nsm_tile_edge(t);
    if (op->kind != NSM_GEMM) {
        op->units = (int64_t)op->batch * op->nchunk;
        return;
    }
    op->tiles_m = (op->M + op->edge - 1) / op->edge;
    op->tiles_n = (op->N + op->edge - 1) / op->edge;
    op->tiles = op->sym ? op->tiles_m * (op->tiles_m + 1) / 2 : op->tiles_m * op->tiles_n;
    int ksteps = (op->K + 31) / 32; /* BK is 32 in every tile shape */
    if (op->splits < 1) op->splits = 1;
    if (op->splits > ksteps) op->splits = ksteps;
    op->units = (int64_t)op->batch * op->tiles * op->splits;
}

void nsm_op_split(nsm_op *op, nsm_tile t, int64_t resident, size_t *ws_floats, size_t *n_cnt)
{
    *ws_floats = *n_cnt = 0;
    op->splits = 1;
    nsm_op_finish(op, t);
    if (op->kind != NSM_GEMM) return;
    int64_t tiles = (int64_t)op->batch * op->tiles, sp = resident / tiles, kmax = op->K / 256;
    sp = sp > kmax ? kmax : sp;
    op->splits = (int)(sp > 16 ? 16 : sp < 1 ? 1 : sp);
    nsm_op_finish(op, t);
    if (op->splits > 1) {
        *ws_floats = (size_t)tiles * (size_t)op->splits * (size_t)op->edge * (size_t)op->edge;
        *n_cnt = (size_t)tiles;
    }
}

double nsm_op_flops(const nsm_op *op)
{
    if (op->kind != NSM_GEMM) return 0;
    double area = 0;
    for (int tm = 0; tm < op->tiles_m; tm++)
        for (int tn = 0; tn < (op->sym ? tm + 1 : op->tiles_n); tn++) {
            int64_t h = op->M - (int64_t)tm * op->edge, w = op->N - (int64_t)tn * op->edge;
            area += (double)(h < op->edge ? h : op->edge) * (double)(w < op->edge ? w : op->edge);
        }
    return 2.0 * area * op->K * op->batch;
}

template <class C, typename T> __global__ void __launch_bounds__(C::THREADS, C::MINB) k_gemm(const __grid_constant__ nsm_op op)
{
    extern __shared__ __align__(16) uint16_t smem[];
    __shared__ float sh[34];
    for (int64_t u = blockIdx.x; u < op.units; u += gridDim.x) nsm::gemm_unit<C, T>(op, u, smem, sh);
}

/* The dynamic shared memory limit of one instantiation, once (nsm_gemm_setup: before any
 * stream capture). */
template <class C, typename T> static int setup_gemm(dm_err *err)
{
    static bool attr_set = false;
    if (!attr_set) {
        NS_CUDA(cudaFuncSetAttribute(k_gemm<C, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES));
        attr_set = true;
    }
    return 0;
}

template <class C, typename T> static int launch_gemm(const nsm_op *op, cudaStream_t s, dm_err *err)
{
    if (setup_gemm<C, T>(err)) return -1;
    int64_t grid = op->units < (INT64_C(1) << 30) ? op->units : (INT64_C(1) << 30);
    if (grid < 1) return 0;
    k_gemm<C, T><<<(unsigned)grid, C::THREADS, C::SMEM_BYTES, s>>>(*op);
    NS_LAUNCHED();
    return 0;
}

int nsm_gemm_setup(nsm_tile t, dm_dtype dt, dm_err *err)
{
    int bf = dt == DM_DT_BF16;
    switch (t) {
    case NSM_T32: return bf ? setup_gemm<nsm::cfg32, __nv_bfloat16>(err) : setup_gemm<nsm::cfg32, __half>(err);
    case NSM_T64: return bf ? setup_gemm<nsm::cfg64, __nv_bfloat16>(err) : setup_gemm<nsm::cfg64, __half>(err);
    case NSM_T128: return bf ? setup_gemm<nsm::cfg128, __nv_bfloat16>(err) : setup_gemm<nsm::cfg128, __half>(err);
    case NSM_T128S3: return bf ? setup_gemm<nsm::cfg128s3, __nv_bfloat16>(err) : setup_gemm<nsm::cfg128s3, __half>(err);
    }
    return dm_err_set(err, "nsm_gemm_setup: unknown tile %d", (int)t);
}

template <class C, typename T> static int resident_gemm(int64_t *resident, dm_err *err)
{
    int dev = 0, n_sms = 0, per_sm = 0;
    if (setup_gemm<C, T>(err)) return -1;
    NS_CUDA(cudaGetDevice(&dev));
    NS_CUDA(cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, dev));
    NS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_gemm<C, T>, C::THREADS, C::SMEM_BYTES));
    *resident = (int64_t)per_sm * n_sms;
    return 0;
}

int nsm_gemm_resident(nsm_tile t, dm_dtype dt, int64_t *resident, dm_err *err)
{
    int bf = dt == DM_DT_BF16;
    switch (t) {
    case NSM_T32: return bf ? resident_gemm<nsm::cfg32, __nv_bfloat16>(resident, err) : resident_gemm<nsm::cfg32, __half>(resident, err);
    case NSM_T64: return bf ? resident_gemm<nsm::cfg64, __nv_bfloat16>(resident, err) : resident_gemm<nsm::cfg64, __half>(resident, err);
    case NSM_T128: return bf ? resident_gemm<nsm::cfg128, __nv_bfloat16>(resident, err) : resident_gemm<nsm::cfg128, __half>(resident, err);
    case NSM_T128S3:
        return bf ? resident_gemm<nsm::cfg128s3, __nv_bfloat16>(resident, err) : resident_gemm<nsm::cfg128s3, __half>(resident, err);
    }
    return dm_err_set(err, "nsm_gemm_resident: unknown tile %d", (int)t);
}

int nsm_gemm(const nsm_op *op, nsm_tile t, ns_stream s, dm_err *err)
{
    if (op->kind != NSM_GEMM || op->edge != nsm_tile_edge(t) || (op->splits > 1 && (!op->ws || !op->cnt)))
        return dm_err_set(err, "nsm_gemm: op not finished for tile %d (or split without scratch)", (int)t);
    int bf = op->dt == DM_DT_BF16;
    switch (t) {
    case NSM_T32: return bf ? launch_gemm<nsm::cfg32, __nv_bfloat16>(op, s, err) : launch_gemm<nsm::cfg32, __half>(op, s, err);
    case NSM_T64: return bf ? launch_gemm<nsm::cfg64, __nv_bfloat16>(op, s, err) : launch_gemm<nsm::cfg64, __half>(op, s, err);
    case NSM_T128: return bf ? launch_gemm<nsm::cfg128, __nv_bfloat16>(op, s, err) : launch_gemm<nsm::cfg128, __half>(op, s, err);
    case NSM_T128S3:
        return bf ? launch_gemm<nsm::cfg128s3, __nv_bfloat16>(op, s, err) : launch_gemm<nsm::cfg128s3, __half>(op, s, err);
    }
    return dm_err_set(err, "nsm_gemm: unknown tile %d", (int)t);
}
