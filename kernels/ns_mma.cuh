/* ns_mma.cuh: internal to kernels/: the device side of ns_mma.h, shared by ns_syrk.cu (one
 * product per launch) and ns_small.cu (the fused persistent NS). Device templates, so they
 * live in a header that each of the two translation units instantiates (the build has no
 * separate device linking).
 *
 * One unit of work is one output tile (of one split-K piece) of one batch entry:
 *   mainloop: a STAGES-deep cp.async pipeline (16-byte pieces, L2 only: .cg, so data another
 *   CTA wrote earlier in the same launch is never read from a stale L1) into padded shared
 *   tiles (rows of an odd number of 16-byte words: ldmatrix reads them without bank
 *   conflicts); ldmatrix(.trans) to fragments; mma.sync m16n8k16 with fp32 accumulators;
 *   split-K: every piece stores its partial tile, the last to arrive (a per-tile counter) sums
 *   them all in piece order (deterministic) and runs the epilogue;
 *   epilogue: D = alpha acc + beta C + gamma on the diagonal, D2 = D + gamma2 on the diagonal,
 *   stored from registers; a symmetric product's off-diagonal tile also stores its transpose.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16): lane l, g = l/4, t = l%4;
 * A (16x16, row): a0a1 (g, 2t..2t+1), a2a3 (g+8, 2t..), a4a5 (g, 2t+8..), a6a7 (g+8, 2t+8..);
 * B (16x8, col): b0b1 (k 2t..2t+1, n g), b2b3 (k 2t+8.., n g); C: c0c1 (g, 2t..), c2c3 (g+8, 2t..).
 * ldmatrix.x4 gives register j the 8x8 matrix whose row addresses lanes 8j..8j+7 supply: each
 * lane gets (row g, cols 2t..2t+1) of it, or with .trans (rows 2t..2t+1, col g). */
#ifndef DM_NS_MMA_CUH
#define DM_NS_MMA_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "block_reduce.cuh"
#include <stdint.h>

#include "ns_mma.h"

namespace nsm {

template <int BM_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MINB_> struct tile_cfg {
    static constexpr int BM = BM_, BN = BM_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int STAGES = STAGES_;
    static constexpr int MINB = MINB_; /* __launch_bounds__ CTAs per SM: 1 lets 128 x 128 keep
                                          its 64 accumulators without spills */
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N; /* one warp's tile */
    static constexpr int MF = WTM / 16, NF = WTN / 8;
    static constexpr int PAD = 8; /* elements: a row of BK+8 or BM+8 is an odd number of 16-byte words */
    static constexpr int KROW = BK + PAD, MROW = BM + PAD;
    static constexpr int OP_ELEMS = BM * KROW > BK * MROW ? BM * KROW : BK * MROW;
    static constexpr int STAGE_ELEMS = 2 * OP_ELEMS;
    static constexpr int SMEM_BYTES = STAGES * STAGE_ELEMS * 2;
    static constexpr int ACC = MF * NF * 4; /* accumulators per thread */
    static_assert(NF % 2 == 0, "B fragments are loaded in pairs");
    static_assert(BK % 16 == 0 && BM % 16 == 0, "tile");
    static_assert((KROW * 2 / 16) % 2 == 1 && (MROW * 2 / 16) % 2 == 1, "odd 16-byte words per row");
    static_assert(STAGE_ELEMS * 2 % 16 == 0, "stages 16-byte aligned");
};
/* Stages: what one CTA keeps in flight must cover the L2 latency (~1 us under load) when a
 * product has about one CTA per SM (small products, the fused NS): run 9's 3 stages kept 2
 * k-steps (16 KB for 64-tiles) in flight, ~30% of the mma rate at 1024^2 (our X X^T 5x slower
 * than cuBLASLt's); a K of 128 (128^2 NS) now loads whole in the prologue. */
typedef tile_cfg<32, 32, 2, 2, 6, 4> cfg32;   /* warp 16 x 16; 5 KB per stage */
typedef tile_cfg<64, 32, 2, 2, 5, 2> cfg64;   /* warp 32 x 32; 10 KB per stage */
typedef tile_cfg<128, 32, 2, 4, 4, 1> cfg128; /* warp 64 x 32 */
typedef tile_cfg<128, 32, 2, 4, 3, 1> cfg128s3;

/* ---- PTX wrappers ------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, through L2 only; zero-filled when !pred (src not read). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool pred)
{
    int n = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* D = A B + D for one m16n8k16 fragment set; TY the PTX operand type (bf16 or f16). */
#define NSM_MMA(TY, c, a, b0, b1)                                                              \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "   \
                 "{%8,%9}, {%0,%1,%2,%3};\n"                                                   \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <typename T> struct mma_op;
template <> struct mma_op<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
    {
        NSM_MMA("bf16", c, a, b0, b1);
    }
};
template <> struct mma_op<__half> {
    static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
    {
        NSM_MMA("f16", c, a, b0, b1);
    }
};

/* ---- element conversions ------------------------------------------------------------------ */

__device__ __forceinline__ float2 to_f2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ float2 to_f2(__half2 v) { return __half22float2(v); }
template <typename T> struct pair_of;
template <> struct pair_of<__nv_bfloat16> { typedef __nv_bfloat162 t; };
template <> struct pair_of<__half> { typedef __half2 t; };

/* Two consecutive elements of dtype dt (bf16, fp16, fp32) at p + i. */
__device__ __forceinline__ void store2(void *p, int64_t i, int dt, float v0, float v1)
{
    if (dt == DM_DT_FP32) {
        *(float2 *)((float *)p + i) = make_float2(v0, v1);
    } else if (dt == DM_DT_BF16) {
        *(__nv_bfloat162 *)((__nv_bfloat16 *)p + i) = __floats2bfloat162_rn(v0, v1);
    } else {
        *(__half2 *)((__half *)p + i) = __floats2half2_rn(v0, v1);
    }
}
__device__ __forceinline__ void store1(void *p, int64_t i, int dt, float v)
{
    if (dt == DM_DT_FP32) ((float *)p)[i] = v;
    else if (dt == DM_DT_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else ((__half *)p)[i] = __float2half_rn(v);
}
/* Two consecutive elements of T read through L2 (written earlier in this launch by another
 * CTA, perhaps). */
template <typename T> __device__ __forceinline__ float2 load2_cg(const T *p)
{
    unsigned u = __ldcg((const unsigned *)p);
    typename pair_of<T>::t v = *(const typename pair_of<T>::t *)&u;
    return to_f2(v);
}
/* 8 elements of dtype dt at p (16-byte aligned; fp32: two 16-byte words), to float. */
__device__ __forceinline__ void load8(const void *p, int dt, float v[8])
{
    if (dt == DM_DT_FP32) {
        float4 a = __ldcg((const float4 *)p), b = __ldcg((const float4 *)p + 1);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        return;
    }
    uint4 u = __ldcg((const uint4 *)p);
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 f = dt == DM_DT_BF16 ? to_f2(*(const __nv_bfloat162 *)&w[k]) : to_f2(*(const __half2 *)&w[k]);
        v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
}

/* ---- block-wide helpers ------------------------------------------------------------------- */

/* Sum over the block's threads; every thread gets it. sh: 33 floats of shared memory. */
__device__ __forceinline__ float block_sum_all(float v, float *sh) { return block_reduce<red_sum>(v, sh); }

/* The entry's scale 1 / (sqrt(sum of its chunk partials) + eps), the same value in every
 * thread (summed in a fixed order: deterministic). */
__device__ __forceinline__ float entry_scale(const nsm_op &op, int e, float *sh)
{
    float v = 0.f;
    for (int c = threadIdx.x; c < op.nchunk; c += blockDim.x) v += __ldcg(op.partial + (int64_t)e * op.nchunk + c);
    float ss = block_sum_all(v, sh);
    return 1.f / (sqrtf(ss) + op.eps);
}

/* Tile t of the lower triangle (row-wise: (0,0), (1,0), (1,1), (2,0), ...) -> (tm, tn). */
__device__ __forceinline__ void lower_tile(int t, int *tm, int *tn)
{
    int r = (int)((sqrtf(8.f * (float)t + 1.f) - 1.f) * 0.5f);
    while (r * (r + 1) / 2 > t) r--;
    while ((r + 1) * (r + 2) / 2 <= t) r++;
    *tm = r;
    *tn = t - r * (r + 1) / 2;
}

/* ---- the mainloop ------------------------------------------------------------------------- */

/* One operand's tile of stage memory s: rows `lim`-bounded along the major dimension (M for A,
 * N for B) starting at r0, and K in [k0, klim). KC: the operand is K-contiguous in memory
 * (smem [BM][KROW]); else major-contiguous (smem [BK][MROW]). */
template <class C, bool KC>
__device__ __forceinline__ void load_operand(uint16_t *s, const uint16_t *g, int64_t ld, int r0, int lim, int k0,
                                             int klim)
{
    /* the shared tile's rows and columns: (major, k) when K-contiguous, else (k, major) */
    constexpr int COLS = KC ? C::BK : C::BM, ROWS = KC ? C::BM : C::BK, SROW = KC ? C::KROW : C::MROW;
    constexpr int CPR = COLS / 8, CH = ROWS * CPR;
    static_assert(CH % C::THREADS == 0, "whole passes");
#pragma unroll
    for (int it = 0; it < CH / C::THREADS; it++) {
        int c = threadIdx.x + it * C::THREADS;
        int row = c / CPR, col = (c % CPR) * 8;
        int gr = r0 + (KC ? row : col), gk = k0 + (KC ? col : row);
        bool ok = gr < lim && gk < klim;
        const uint16_t *src = !ok ? g : KC ? g + (int64_t)gr * ld + gk : g + (int64_t)gk * ld + gr;
        cp_async16(smem_addr(s + row * SROW + col), src, ok);
    }
}

/* The accumulators as one flat array (indexed only by unrolled constants: they stay in
 * registers). */
template <class C> __device__ __forceinline__ void zero_acc(float (&acc)[C::MF][C::NF][4])
{
    float *f = &acc[0][0][0];
#pragma unroll
    for (int q = 0; q < C::ACC; q++) f[q] = 0.f;
}

/* acc = A[m0.., kb..ke) B[kb..ke), n0..] for the CTA's tile; leaves shared memory free. */
template <class C, typename T, bool AK, bool BKC>
__device__ __forceinline__ void mainloop(float (&acc)[C::MF][C::NF][4], const T *A, int64_t lda, const T *B,
                                         int64_t ldb, int m0, int M, int n0, int N, int kb, int ke, uint16_t *smem)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
    const uint16_t *a16 = (const uint16_t *)A, *b16 = (const uint16_t *)B;
    zero_acc<C>(acc);
    const int KT = (ke - kb + C::BK - 1) / C::BK;
#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (s < KT) {
            uint16_t *st = smem + s * C::STAGE_ELEMS;
            load_operand<C, AK>(st, a16, lda, m0, M, kb + s * C::BK, ke);
            load_operand<C, BKC>(st + C::OP_ELEMS, b16, ldb, n0, N, kb + s * C::BK, ke);
        }
        cp_commit();
    }
    /* per-lane ldmatrix offsets (elements) inside a stage, for k-step 0 */
    int a_off[C::MF], b_off[C::NF / 2];
#pragma unroll
    for (int i = 0; i < C::MF; i++) {
        int mb = wm * C::WTM + i * 16;
        a_off[i] = AK ? (mb + (lane & 7) + 8 * ((lane >> 3) & 1)) * C::KROW + 8 * (lane >> 4)
                      : ((lane & 7) + 8 * (lane >> 4)) * C::MROW + mb + 8 * ((lane >> 3) & 1);
    }
#pragma unroll
    for (int j = 0; j < C::NF / 2; j++) {
        int nb = wn * C::WTN + j * 16;
        b_off[j] = BKC ? (nb + (lane & 7) + 8 * (lane >> 4)) * C::KROW + 8 * ((lane >> 3) & 1)
                       : ((lane & 7) + 8 * ((lane >> 3) & 1)) * C::MROW + nb + 8 * (lane >> 4);
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_wait<C::STAGES - 2>();
        __syncthreads(); /* stage kt landed for every thread; stage kt-1 is no longer read */
        int nk = kt + C::STAGES - 1;
        if (nk < KT) {
            uint16_t *st = smem + (nk % C::STAGES) * C::STAGE_ELEMS;
            load_operand<C, AK>(st, a16, lda, m0, M, kb + nk * C::BK, ke);
            load_operand<C, BKC>(st + C::OP_ELEMS, b16, ldb, n0, N, kb + nk * C::BK, ke);
        }
        cp_commit();
        const uint16_t *sa = smem + (kt % C::STAGES) * C::STAGE_ELEMS, *sb = sa + C::OP_ELEMS;
#pragma unroll
        for (int kk = 0; kk < C::BK / 16; kk++) {
            uint32_t af[C::MF][4], bf[C::NF][2];
#pragma unroll
            for (int i = 0; i < C::MF; i++) {
                /* K-contiguous: the k-step moves along a row; else down the rows */
                int off = a_off[i] + (AK ? kk * 16 : kk * 16 * C::MROW);
                if (AK) ldsm_x4(af[i], smem_addr(sa + off));
                else ldsm_x4_t(af[i], smem_addr(sa + off));
            }
#pragma unroll
            for (int j = 0; j < C::NF / 2; j++) {
                uint32_t r[4];
                int off = b_off[j] + (BKC ? kk * 16 : kk * 16 * C::MROW);
                if (BKC) ldsm_x4(r, smem_addr(sb + off));
                else ldsm_x4_t(r, smem_addr(sb + off));
                bf[2 * j][0] = r[0], bf[2 * j][1] = r[1], bf[2 * j + 1][0] = r[2], bf[2 * j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < C::MF; i++)
#pragma unroll
                for (int j = 0; j < C::NF; j++) mma_op<T>::run(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
    cp_wait<0>();
    __syncthreads(); /* shared memory free for the next unit */
}

/* ---- one GEMM unit ------------------------------------------------------------------------ */

/* f(i, j, h, rl, cl) for each of the thread's accumulator pairs acc[i][j][2h..2h+1], at (rl, cl)
 * and (rl, cl + 1) of the tile (unrolled: the indices are constants, acc stays in registers). */
template <class C, class F> __device__ __forceinline__ void each_pair(F f)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wr = (warp / C::WARPS_N) * C::WTM + (lane >> 2), wc = (warp % C::WARPS_N) * C::WTN + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < C::MF; i++)
#pragma unroll
        for (int j = 0; j < C::NF; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) f(i, j, h, wr + i * 16 + 8 * h, wc + j * 8);
}

/* A 16-bit value of dtype dt (bf16 or fp16) and back. */
__device__ __forceinline__ uint32_t pack2(int dt, float v0, float v1)
{
    if (dt == DM_DT_BF16) {
        __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
        return *(const uint32_t *)&h;
    }
    __half2 h = __floats2half2_rn(v0, v1);
    return *(const uint32_t *)&h;
}
__device__ __forceinline__ float from16(int dt, uint16_t u)
{
    return dt == DM_DT_BF16 ? __bfloat162float(__ushort_as_bfloat16(u)) : __half2float(__ushort_as_half(u));
}
__device__ __forceinline__ uint16_t to16(int dt, float v)
{
    return dt == DM_DT_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

/* D = alpha acc + beta C + gamma I (and D2 = D + gamma2 I) for the CTA's tile.
 * Pass 1: every read of C, folded into the accumulators (no store between the loads: they are
 * all in flight at once; run 9 interleaved them with the stores to D, which may alias C for the
 * compiler, so a thread's 4 (32-tiles) to 32 (128-tiles) C reads ran one L2 round trip after
 * another). Pass 2, a 16-bit D: the tile staged in shared memory (the pipeline's, free after
 * the mainloop) in D's dtype, then written as 16-byte pieces along D's rows, and (a mirrored
 * tile) gathered down its columns and written along the transposed tile's rows: run 9 stored
 * the transpose element by element (2-byte stores, 32 rows per warp instruction). D2's
 * diagonal is D's stored value + gamma2. An fp32 D (an apply's io) is stored from registers.
 * The op's fields are copied to registers first: a fused program's ops live in global memory,
 * which the compiler must assume the stores to D may change. */
template <class C, typename T>
__device__ __forceinline__ void epilogue(const nsm_op &op, int e, int tm, int tn, float (&acc)[C::MF][C::NF][4],
                                         uint16_t *smem, float *sh)
{
    float alpha = op.alpha, beta = op.beta;
    if (op.alpha_dev) alpha = __ldcg(op.alpha_dev);
    if (op.beta_dev) beta = __ldcg(op.beta_dev);
    if (op.alpha_pow || op.beta_pow) {
        float s = entry_scale(op, e, sh);
        for (int p = 0; p < op.alpha_pow; p++) alpha *= s;
        for (int p = 0; p < op.beta_pow; p++) beta *= s;
    }
    const int M = op.M, N = op.N, dt = op.dt, dt_d = op.dt_d;
    const int64_t ldc = op.ldc, ldd = op.ldd;
    const float gamma = op.gamma, gamma2 = op.gamma2;
    const T *Cm = op.c && beta != 0.f ? (const T *)op.c + (int64_t)e * op.sc : NULL;
    char *D = (char *)op.d + (int64_t)e * op.sd * (dt_d == DM_DT_FP32 ? 4 : 2);
    uint16_t *D2 = op.d2 ? (uint16_t *)op.d2 + (int64_t)e * op.sd : NULL;
    const bool mirror = op.sym && tm != tn;
    const int R0 = tm * C::BM, C0 = tn * C::BN;
    each_pair<C>([&](int i, int j, int h, int rl, int cl) {
        int r = R0 + rl, c = C0 + cl;
        float v0 = alpha * acc[i][j][2 * h], v1 = alpha * acc[i][j][2 * h + 1];
        if (Cm && r < M && c < N) { /* N is a multiple of 8: c + 1 < N too */
            float2 cv = load2_cg(Cm + (int64_t)r * ldc + c);
            v0 += beta * cv.x;
            v1 += beta * cv.y;
        }
        if (r == c) v0 += gamma;
        if (r == c + 1) v1 += gamma;
        acc[i][j][2 * h] = v0;
        acc[i][j][2 * h + 1] = v1;
    });
    if (dt_d == DM_DT_FP32) {
        each_pair<C>([&](int i, int j, int h, int rl, int cl) {
            int r = R0 + rl, c = C0 + cl;
            if (r >= M || c >= N) return;
            float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
            store2(D, (int64_t)r * ldd + c, DM_DT_FP32, v0, v1);
            if (D2) store2(D2, (int64_t)r * ldd + c, dt, v0 + (r == c ? gamma2 : 0.f), v1 + (r == c + 1 ? gamma2 : 0.f));
            if (mirror) {
                store1(D, (int64_t)c * ldd + r, DM_DT_FP32, v0);
                store1(D, (int64_t)(c + 1) * ldd + r, DM_DT_FP32, v1);
                if (D2) {
                    store1(D2, (int64_t)c * ldd + r, dt, v0);
                    store1(D2, (int64_t)(c + 1) * ldd + r, dt, v1);
                }
            }
        });
        return;
    }
    constexpr int SROW = C::BN + 8; /* elements: an odd number of 16-byte words per row */
    static_assert(C::BM * SROW * 2 <= C::SMEM_BYTES, "the staged tile fits the pipeline's memory");
    each_pair<C>([&](int i, int j, int h, int rl, int cl) {
        *(uint32_t *)(smem + rl * SROW + cl) = pack2(dt_d, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    });
    __syncthreads();
    const int rows = M - R0 < C::BM ? M - R0 : C::BM, cols = N - C0 < C::BN ? N - C0 : C::BN; /* multiples of 8 */
    uint16_t *D16 = (uint16_t *)D;
    constexpr int CPR = C::BN / 8;
    for (int q = threadIdx.x; q < C::BM * CPR; q += C::THREADS) { /* the tile, along its rows */
        int rl = q / CPR, cl = (q % CPR) * 8;
        if (rl >= rows || cl >= cols) continue;
        uint4 w = *(const uint4 *)(smem + rl * SROW + cl);
        int64_t off = (int64_t)(R0 + rl) * ldd + C0 + cl;
        *(uint4 *)(D16 + off) = w;
        if (D2) {
            int dk = R0 + rl - (C0 + cl); /* the diagonal's place in these 8, if there */
            uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int k = 0; k < 8; k++) /* constant indices: ws stays in registers */
                if (k == dk) {
                    const int sh16 = (k & 1) * 16;
                    uint16_t v = to16(dt, from16(dt, (uint16_t)(ws[k >> 1] >> sh16)) + gamma2);
                    ws[k >> 1] = (ws[k >> 1] & ~(0xffffu << sh16)) | (uint32_t)v << sh16;
                }
            w = make_uint4(ws[0], ws[1], ws[2], ws[3]);
            *(uint4 *)(D2 + off) = w;
        }
    }
    if (mirror) { /* the transposed tile (above the diagonal: no diagonal element), along its rows */
        for (int q = threadIdx.x; q < C::BN * (C::BM / 8); q += C::THREADS) {
            int jl = q % C::BN, il = (q / C::BN) * 8; /* consecutive threads: consecutive columns of the
                                                         staged tile (conflict-free gathers) */
            if (jl >= cols || il >= rows) continue;
            uint16_t p[8];
#pragma unroll
            for (int k = 0; k < 8; k++) p[k] = smem[(il + k) * SROW + jl];
            uint4 w;
            w.x = p[0] | (uint32_t)p[1] << 16, w.y = p[2] | (uint32_t)p[3] << 16;
            w.z = p[4] | (uint32_t)p[5] << 16, w.w = p[6] | (uint32_t)p[7] << 16;
            int64_t off = (int64_t)(C0 + jl) * ldd + R0 + il;
            *(uint4 *)(D16 + off) = w;
            if (D2) *(uint4 *)(D2 + off) = w;
        }
    }
    __syncthreads(); /* the staged tile is the next unit's pipeline memory */
}

/* Unit u of a GEMM op: (entry, tile, split piece), the piece fastest. sh: 34 floats of shared
 * memory (33 for the sums, one flag). */
template <class C, typename T>
__device__ void gemm_unit(const nsm_op &op, int64_t u, uint16_t *smem, float *sh)
{
    const int per = op.tiles * op.splits;
    const int e = (int)(u / per), rem = (int)(u % per), tile = rem / op.splits, sp = rem % op.splits;
    int tm, tn;
    if (op.sym) lower_tile(tile, &tm, &tn);
    else tm = tile / op.tiles_n, tn = tile % op.tiles_n;
    const T *A = (const T *)op.a + (int64_t)e * op.sa, *B = (const T *)op.b + (int64_t)e * op.sb;
    const int ksteps = (op.K + C::BK - 1) / C::BK, per_piece = (ksteps + op.splits - 1) / op.splits;
    const int kb = sp * per_piece * C::BK;
    int ke = kb + per_piece * C::BK;
    if (ke > op.K) ke = op.K;
    float acc[C::MF][C::NF][4];
    const int m0 = tm * C::BM, n0 = tn * C::BN;
    if (op.ta == 0 && op.tb == 0) mainloop<C, T, true, true>(acc, A, op.lda, B, op.ldb, m0, op.M, n0, op.N, kb, ke, smem);
    else if (op.ta == 0) mainloop<C, T, true, false>(acc, A, op.lda, B, op.ldb, m0, op.M, n0, op.N, kb, ke, smem);
    else if (op.tb == 0) mainloop<C, T, false, true>(acc, A, op.lda, B, op.ldb, m0, op.M, n0, op.N, kb, ke, smem);
    else mainloop<C, T, false, false>(acc, A, op.lda, B, op.ldb, m0, op.M, n0, op.N, kb, ke, smem);
    if (op.splits > 1) {
        const int64_t slot = (int64_t)e * op.tiles + tile;
        float *ws = op.ws + slot * op.splits * (C::BM * C::BN);
        float *mine = ws + (int64_t)sp * (C::BM * C::BN), *f = &acc[0][0][0];
#pragma unroll
        for (int q = 0; q < C::ACC; q++) __stcg(mine + q * C::THREADS + threadIdx.x, f[q]);
        __threadfence();
        __syncthreads();
        int *flag = (int *)(sh + 33);
        if (threadIdx.x == 0) *flag = atomicAdd(op.cnt + slot, 1u) == (unsigned)(op.splits - 1);
        __syncthreads();
        if (!*flag) return; /* another piece finishes this tile */
        __threadfence();
        zero_acc<C>(acc);
        for (int p = 0; p < op.splits; p++) {
            const float *w = ws + (int64_t)p * (C::BM * C::BN);
#pragma unroll
            for (int q = 0; q < C::ACC; q++) f[q] += __ldcg(w + q * C::THREADS + threadIdx.x);
        }
        if (threadIdx.x == 0) atomicExch(op.cnt + slot, 0u); /* ready for the next use */
    }
    epilogue<C, T>(op, e, tm, tn, acc, smem, sh);
}

/* ---- elementwise units -------------------------------------------------------------------- */

/* Chunk c of entry e: [c*csz, min(len, (c+1)*csz)), csz a multiple of 8. */
__device__ __forceinline__ void chunk_range(const nsm_op &op, int c, int64_t *lo, int64_t *hi)
{
    int64_t csz = ((op.len + op.nchunk - 1) / op.nchunk + 7) / 8 * 8;
    *lo = (int64_t)c * csz;
    *hi = *lo + csz < op.len ? *lo + csz : op.len;
}

static __device__ void sumsq_unit(const nsm_op &op, int64_t u, float *sh)
{
    int e = (int)(u / op.nchunk), c = (int)(u % op.nchunk);
    int64_t lo, hi;
    chunk_range(op, c, &lo, &hi);
    int es = op.dt_x == DM_DT_FP32 ? 4 : 2;
    const char *x = (const char *)op.x + (int64_t)e * op.len * es;
    float v = 0.f;
    for (int64_t i = lo + 8 * (int64_t)threadIdx.x; i < hi; i += 8 * (int64_t)blockDim.x) {
        float f[8];
        load8(x + i * es, op.dt_x, f);
#pragma unroll
        for (int k = 0; k < 8; k++) v += f[k] * f[k];
    }
    float s = block_sum_all(v, sh);
    if (threadIdx.x == 0) op.partial_out[u] = s;
}

static __device__ void norm_unit(const nsm_op &op, int64_t u, float *sh)
{
    int e = (int)(u / op.nchunk), c = (int)(u % op.nchunk);
    int64_t lo, hi;
    chunk_range(op, c, &lo, &hi);
    float s = entry_scale(op, e, sh);
    int es = op.dt_x == DM_DT_FP32 ? 4 : 2;
    const char *x = (const char *)op.x + (int64_t)e * op.len * es;
    char *y = (char *)op.y + (int64_t)e * op.len * 2;
    for (int64_t i = lo + 8 * (int64_t)threadIdx.x; i < hi; i += 8 * (int64_t)blockDim.x) {
        float f[8];
        load8(x + i * es, op.dt_x, f);
#pragma unroll
        for (int k = 0; k < 8; k += 2) store2(y, i + k, op.dt, f[k] * s, f[k + 1] * s);
    }
}

} /* namespace nsm */
#endif
