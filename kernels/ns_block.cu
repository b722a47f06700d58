/* ns_block.cu: the direct Newton-Schulz of small matrices with one CTA per matrix, the whole
 * iteration in shared memory (ns_mma.h's nsm_block; the plans' kernels "block" and, below,
 * "block16", the same in 16 x 16 tiles over whole products).
 *
 * Why: a small matrix's NS is ~16 dependent products of a few MFLOP each. As a plan it is bound
 * by launch gaps (~3-4 us per graph node); the fused persistent kernel (ns_small.cu) spreads
 * each product over many CTAs that re-read their operands from L2 every phase and meet at grid
 * barriers, so one CTA of it runs at ~1/20 of an SM's tensor rate (traces/kernels/
 * nssmall-2026-12-03). Here X (m x n, m <= 128), A = X X^T and B = c A A + b A stay in shared
 * memory for all iterations; each product is mma.sync m16n8k16 (bf16 or fp16 operands, fp32
 * accumulation; the same code for sm_80 and sm_90) from ldmatrix fragments, 16 warps each owning
 * 32 x 32 output tiles. A batch runs one CTA per entry.
 *
 * A long side that one CTA's shared memory cannot hold, or that would leave it most of the work,
 * is split over a cluster of up to 16 CTAs (sm_90, distributed shared memory; block_shape picks
 * the size): each CTA holds its own columns of X, computes its part of X X^T (in fp32, K split
 * over warps when the tiles alone would idle most of them), the cluster sums the parts (each CTA
 * a slab of rows, reading every CTA's part in rank order: the same bits everywhere) and copies
 * the slabs back, then every CTA forms c A A + b A itself (m x m: small) and updates its columns.
 *
 * The math is the plans' direct NS (ns_cuda.cu build_direct): X0 = G / (||G||_F + eps) in the
 * iteration dtype; per iteration A = X X^T, B = c A A + b A, X = a X + B X, every product's
 * result rounded to the iteration dtype as the plans store it, the last X written in the io
 * dtype. The matrices are zero-padded to multiples of 32 (exact: the padded rows and columns of
 * X, A and B stay zero), so any m <= 128 and any n that fits is taken. A and B are symmetric:
 * only the tiles on and below the diagonal are computed, each element stored at (i, j) and
 * (j, i) (the diagonal tiles keep their lower half), so the next product may read A's rows as
 * its columns. X = a X + B X is done in place, one panel of columns at a time: every read of a
 * panel precedes the barrier after which that panel is written, and no panel reads another's
 * columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>

#include "ns_kern.cuh"
#include "ns_mma.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int BLK_WARPS = 16, BLK_THREADS = 32 * BLK_WARPS;
constexpr int BLK_MAX_M = 128;

struct blk_params {
    const void *in;
    void *out;
    int io, m, n, xT, Mp, iters;
    int C, W; /* CTAs per matrix (a cluster; 1 on sm_80) and the columns of X each takes (a
                 multiple of 32: CTA k has columns [k W, min((k + 1) W, n))) */
    float eps;
    float a[NS_MAX_ITERS], b[NS_MAX_ITERS], c[NS_MAX_ITERS];
    unsigned long long *prof; /* nsm_block_profile's (NULL normally): CTA 0's SM clock at the
                                 start, after the load, after every product */
};

template <typename T> struct dt_of;
template <> struct dt_of<__nv_bfloat16> { static constexpr int v = DM_DT_BF16; };
template <> struct dt_of<__half> { static constexpr int v = DM_DT_FP16; };

/* ---- the cluster (sm_90; on sm_80 a matrix is one CTA and these are the CTA's own) ---------- */

__device__ __forceinline__ int cl_rank()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return (int)cg::this_cluster().block_rank();
#else
    return 0;
#endif
}
/* Every CTA of the cluster here; their shared-memory writes before it visible to all after. */
__device__ __forceinline__ void cl_sync()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().sync();
#else
    __syncthreads();
#endif
}
/* The same shared-memory object in CTA j of the cluster. */
template <typename V> __device__ __forceinline__ V *peer(V *p, int j)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return cg::this_cluster().map_shared_rank(p, (unsigned)j);
#else
    (void)j;
    return p;
#endif
}

/* ---- the CTA's part of the input and output ------------------------------------------------ */

/* The CTA's elements in the input's memory order, as 8-element chunks: a row-major m x n input
 * (xT) gives each of its m rows' run [c_lo, c_lo + w); a tall one (n x m, X(r, c) at c m + r)
 * one run of w m elements from c_lo m. */
struct part {
    int64_t base; /* the entry's first element */
    int c_lo, w;  /* columns of X */
    int cpr;      /* chunks per run */
    int n_ch;     /* chunks */
    bool vec;     /* every chunk whole and 16-byte aligned */
};

__device__ __forceinline__ part make_part(const blk_params &P, int64_t base, int c_lo, int w)
{
    part q;
    q.base = base, q.c_lo = c_lo, q.w = w;
    int64_t len = (int64_t)P.m * P.n;
    if (P.xT) {
        q.cpr = (w + 7) / 8;
        q.n_ch = w > 0 ? P.m * q.cpr : 0;
        q.vec = P.n % 8 == 0 && len % 8 == 0;
    } else {
        q.cpr = (w * P.m + 7) / 8;
        q.n_ch = w > 0 ? q.cpr : 0;
        q.vec = (w * P.m) % 8 == 0 && len % 8 == 0;
    }
    return q;
}

/* Chunk q: its offset in the input, valid elements, and its first element's (r, c) in X (c local). */
__device__ __forceinline__ void chunk(const blk_params &P, const part &pt, int q, int64_t *off, int *cnt, int *r, int *c)
{
    if (P.xT) {
        int run = q / pt.cpr, j0 = 8 * (q - run * pt.cpr);
        *off = pt.base + (int64_t)run * P.n + pt.c_lo + j0;
        *cnt = min(8, pt.w - j0);
        *r = run, *c = j0;
    } else {
        int j0 = 8 * q;
        *off = pt.base + (int64_t)pt.c_lo * P.m + j0;
        *cnt = min(8, pt.w * P.m - j0);
        *c = j0 / P.m, *r = j0 - *c * P.m;
    }
}
/* The next element's (r, c) in memory order. */
__device__ __forceinline__ void rc_next(const blk_params &P, int *r, int *c)
{
    if (P.xT) ++*c; /* a chunk never leaves its run */
    else if (++*r == P.m) *r = 0, ++*c;
}

/* The 8 elements at p[off .. off+8) (the first cnt; the rest 0) as floats: one 16-byte load
 * (two for fp32) when vec, else one by one. The input is read-only for the kernel's lifetime
 * (non-coherent loads). */
__device__ __forceinline__ void load8(const void *p, int64_t off, int cnt, int dt, bool vec, float v[8])
{
    if (vec) {
        if (dt == DM_DT_FP32) {
            const float4 *q = (const float4 *)((const float *)p + off);
            float4 x = __ldg(q), y = __ldg(q + 1);
            v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
        } else {
            uint4 u = __ldg((const uint4 *)((const uint16_t *)p + off));
            const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                v[2 * k] = nsm::from16(dt, (uint16_t)(w[k] & 0xffffu));
                v[2 * k + 1] = nsm::from16(dt, (uint16_t)(w[k] >> 16));
            }
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        v[k] = k >= cnt ? 0.f
               : dt == DM_DT_FP32 ? __ldg((const float *)p + off + k)
                                  : nsm::from16(dt, __ldg((const unsigned short *)p + off + k));
}

/* The CTA's part of the input into X (stride XR) as s v in dtype dt (when store), the sum of
 * squares of v into *ss (the thread's share, in a fixed order); U chunks' loads in flight per
 * thread before any is used (a loop of single dependent loads ran at ~0.5 us per element per
 * thread; "block" takes 2: 4 spill its registers on sm_90). A chunk of a row-major input's row
 * goes in as one 16-byte store. */
template <int U>
__device__ __forceinline__ void load_input(const blk_params &P, const part &pt, int dt, float s, bool store, uint16_t *X,
                                           int XR, float *ss)
{
    for (int q0 = threadIdx.x; q0 < pt.n_ch; q0 += U * blockDim.x) {
        float v[U][8];
        int cnt[U], r[U], c[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int q = q0 + u * (int)blockDim.x;
            int64_t off;
            if (q < pt.n_ch) {
                chunk(P, pt, q, &off, &cnt[u], &r[u], &c[u]);
                load8(P.in, off, cnt[u], P.io, pt.vec, v[u]);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int q = q0 + u * (int)blockDim.x;
            if (q >= pt.n_ch) continue;
#pragma unroll
            for (int k = 0; k < 8; k++) *ss += v[u][k] * v[u][k]; /* past cnt: zeros */
            if (!store) continue;
            if (P.xT && pt.vec) {
                uint32_t w[4];
#pragma unroll
                for (int k = 0; k < 4; k++) w[k] = nsm::pack2(dt, s * v[u][2 * k], s * v[u][2 * k + 1]);
                *(uint4 *)(X + r[u] * XR + c[u]) = make_uint4(w[0], w[1], w[2], w[3]);
            } else {
                int rr = r[u], cc = c[u];
#pragma unroll
                for (int k = 0; k < 8; k++) /* constant indices: v stays in registers */
                    if (k < cnt[u]) {
                        X[rr * XR + cc] = nsm::to16(dt, s * v[u][k]);
                        rc_next(P, &rr, &cc);
                    }
            }
        }
    }
}

/* X's rows < m, columns < w (stride XR) to the CTA's part of the output in the io dtype and
 * the input's layout, along the output's rows (one 16-byte store per chunk of a row-major
 * 16-bit output's row). */
__device__ __forceinline__ void store_output(const blk_params &P, const part &pt, int dt, const uint16_t *X, int XR)
{
    for (int q = threadIdx.x; q < pt.n_ch; q += blockDim.x) {
        int64_t off;
        int cnt, r, c;
        chunk(P, pt, q, &off, &cnt, &r, &c);
        if (P.xT && pt.vec && P.io != DM_DT_FP32) {
            uint4 u = *(const uint4 *)(X + r * XR + c);
            if (P.io != dt) { /* the other 16-bit type */
                uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int k = 0; k < 4; k++)
                    w[k] = nsm::pack2(P.io, nsm::from16(dt, (uint16_t)(w[k] & 0xffffu)), nsm::from16(dt, (uint16_t)(w[k] >> 16)));
                u = make_uint4(w[0], w[1], w[2], w[3]);
            }
            *(uint4 *)((uint16_t *)P.out + off) = u;
            continue;
        }
        for (int k = 0; k < cnt; k++) {
            nsm::store1(P.out, off + k, P.io, nsm::from16(dt, X[r * XR + c]));
            rc_next(P, &r, &c);
        }
    }
}

__device__ __forceinline__ void stamp(const blk_params &P, int at)
{
    if (P.prof && blockIdx.x == 0 && threadIdx.x == 0) P.prof[at] = (unsigned long long)clock64();
}

/* X0 = G / (||G||_F + eps) into X (x_elems elements, stride XR) from the CTA's part pt of the
 * input: the sum of squares in a fixed order (deterministic: with C > 1 the cluster's CTAs' sums
 * added in rank order by each; C = 1 the CTA's part alone); G scaled and rounded once into X (an
 * input already in the iteration dtype is stored raw by the first pass and scaled in place;
 * another is read again); the rest of X zero. Ends with a __syncthreads. */
template <int dt, int U>
__device__ __forceinline__ void load_normalized(const blk_params &P, const part &pt, uint16_t *X, int x_elems, int XR, int C,
                                                float *red, float *ss_cta)
{
    const int tid = threadIdx.x, m = P.m, w = pt.w;
    for (int idx = tid; idx < x_elems / 8; idx += BLK_THREADS) ((uint4 *)X)[idx] = make_uint4(0, 0, 0, 0);
    __syncthreads();
    const bool raw = P.io == dt;
    float ss = 0.f;
    load_input<U>(P, pt, dt, 1.f, raw, X, XR, &ss);
    ss = block_reduce<red_sum>(ss, red); /* its barriers also order the stores above */
    if (C > 1) {
        if (tid == 0) *ss_cta = ss;
        cl_sync();
        ss = 0.f;
        for (int j = 0; j < C; j++) ss += *peer(ss_cta, j);
    }
    const float s = 1.f / (sqrtf(ss) + P.eps);
    if (raw) { /* in place, a row's 8-element pieces (rows are whole 16-byte words) */
        const int pr = (w + 7) / 8;
        for (int idx = tid; idx < m * pr; idx += BLK_THREADS) {
            int r = idx / pr, c = 8 * (idx - r * pr);
            uint4 *wp = (uint4 *)(X + r * XR + c);
            uint4 u = *wp;
            uint32_t q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                q[j] = nsm::pack2(dt, s * nsm::from16(dt, (uint16_t)(q[j] & 0xffffu)), s * nsm::from16(dt, (uint16_t)(q[j] >> 16)));
            *wp = make_uint4(q[0], q[1], q[2], q[3]); /* past w: the zeros stay zero */
        }
    } else {
        float unused = 0.f;
        load_input<U>(P, pt, dt, s, true, X, XR, &unused);
    }
    __syncthreads();
}

/* acc = S1[r0..r0+16 MI) x S2 over K (a multiple of 16) for one warp's 16 MI x 16 NJ tile at
 * (r0, c0) (MI, NJ 1 or 2; 32 x 32 by default). S1: rows of K contiguous elements (stride l1).
 * S2 when KC: the tile's columns as rows of K contiguous elements (S2's rows c0.. : S2^T's
 * columns), stride l2; else K rows of the tile's columns contiguous (ldmatrix.trans), stride l2. */
template <typename T, bool KC, int MI = 2, int NJ = 2>
__device__ __forceinline__ void warp_tile(float (&acc)[MI][2 * NJ][4], const uint16_t *s1, int l1, int r0,
                                          const uint16_t *s2, int l2, int c0, int K)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < 2 * NJ; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;
    uint32_t a0[MI], b0[NJ];
#pragma unroll
    for (int i = 0; i < MI; i++) a0[i] = nsm::smem_addr(s1 + (r0 + i * 16 + (lane & 15)) * l1 + 8 * (lane >> 4));
#pragma unroll
    for (int j = 0; j < NJ; j++)
        b0[j] = KC ? nsm::smem_addr(s2 + (c0 + j * 16 + (lane & 7) + 8 * (lane >> 4)) * l2 + 8 * ((lane >> 3) & 1))
                   : nsm::smem_addr(s2 + (lane & 15) * l2 + c0 + j * 16 + 8 * (lane >> 4));
#pragma unroll 2
    for (int k = 0; k < K; k += 16) {
        uint32_t af[MI][4], bf[2 * NJ][2];
#pragma unroll
        for (int i = 0; i < MI; i++) nsm::ldsm_x4(af[i], a0[i] + 2 * k);
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            uint32_t r[4];
            if (KC) nsm::ldsm_x4(r, b0[j] + 2 * k);
            else nsm::ldsm_x4_t(r, b0[j] + 2 * k * l2);
            bf[2 * j][0] = r[0], bf[2 * j][1] = r[1], bf[2 * j + 1][0] = r[2], bf[2 * j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < 2 * NJ; j++) nsm::mma_op<T>::run(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
}

/* f(i, j, h, r, c): each pair acc[i][j][2h], acc[i][j][2h + 1] of the thread and the (row,
 * column) of its first element in the 16 MI x 8 J8 tile at (r0, c0); the second is at (r, c + 1). */
template <int MI = 2, int J8 = 4, class F> __device__ __forceinline__ void each_pair(int r0, int c0, F f)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < J8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) f(i, j, h, r0 + i * 16 + (lane >> 2) + 8 * h, c0 + j * 8 + 2 * (lane & 3));
}

/* f(i, j, q, r, c): each accumulator acc[i][j][q] of the thread and its (row, column) in the
 * 32 x 32 tile at (r0, c0) (mma.m16n8k16's C layout). */
template <class F> __device__ __forceinline__ void each_acc(int r0, int c0, F f)
{
    each_pair(r0, c0, [&](int i, int j, int h, int r, int c) {
        f(i, j, 2 * h, r, c);
        f(i, j, 2 * h + 1, r, c + 1);
    });
}

/* acc = alpha acc + beta C for the tile at (r0, c0), C in shared memory (stride ld): every C
 * value read before any is used (the reads pipeline; interleaved with stores to the same
 * array they would wait one by one). */
template <int MI, int J8>
__device__ __forceinline__ void fold_c(float (&acc)[MI][J8][4], float alpha, float beta, const uint16_t *C, int ld, int r0,
                                       int c0, int dt)
{
    uint32_t cv[MI][J8][2];
    each_pair<MI, J8>(r0, c0, [&](int i, int j, int h, int r, int c) { cv[i][j][h] = *(const uint32_t *)(C + r * ld + c); });
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < J8; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                uint32_t w = cv[i][j][q >> 1];
                acc[i][j][q] = alpha * acc[i][j][q] + beta * nsm::from16(dt, (uint16_t)(q & 1 ? w >> 16 : w & 0xffffu));
            }
}

/* A symmetric result's tile (tm >= tn) into D (stride ld) at (i, j) and (j, i); a diagonal tile
 * only from its lower half, so D is exactly symmetric. */
__device__ __forceinline__ void store_sym(const float (&acc)[2][4][4], uint16_t *d, int ld, int tm, int tn, int dt)
{
    if (tm == tn) {
        each_acc(32 * tm, 32 * tn, [&](int i, int j, int q, int r, int c) {
            if (c > r) return;
            uint16_t u = nsm::to16(dt, acc[i][j][q]);
            d[r * ld + c] = u;
            d[c * ld + r] = u;
        });
        return;
    }
    each_pair(32 * tm, 32 * tn, [&](int i, int j, int h, int r, int c) { /* off the diagonal: pairs along the rows, singles down the columns */
        const uint32_t w = nsm::pack2(dt, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        *(uint32_t *)(d + r * ld + c) = w;
        d[c * ld + r] = (uint16_t)(w & 0xffffu);
        d[(c + 1) * ld + r] = (uint16_t)(w >> 16);
    });
}

/* A tile into D (stride ld), pairs of columns as 32-bit stores. */
template <int MI, int J8>
__device__ __forceinline__ void store_tile(const float (&acc)[MI][J8][4], uint16_t *d, int ld, int r0, int c0, int dt)
{
    each_pair<MI, J8>(r0, c0, [&](int i, int j, int h, int r, int c) {
        *(uint32_t *)(d + r * ld + c) = nsm::pack2(dt, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    });
}

/* A symmetric fp32 tile (tm >= tn) into d (stride ld) at (i, j) and (j, i); a diagonal tile only
 * from its lower half. */
__device__ __forceinline__ void store_f32_sym(const float (&acc)[2][4][4], float *d, int ld, int tm, int tn)
{
    each_acc(32 * tm, 32 * tn, [&](int i, int j, int q, int r, int c) {
        if (tm == tn && c > r) return;
        d[r * ld + c] = acc[i][j][q];
        d[c * ld + r] = acc[i][j][q];
    });
}

/* X X^T's K (the CTA's columns, Np) split into S pieces, one warp each, when its lower tiles
 * alone would leave most warps idle (Mp <= 96) and K is long (each piece at least 128: shorter
 * pieces lose more to the sum than they gain): S a power of two, n_low S <= 16 warps, each
 * piece whole k-steps. The pieces' fp32 tiles (32 x PW_LD each) are summed in piece order. */
constexpr int PW_LD = 40; /* floats per row of a piece's tile: rows 8 banks apart */
__host__ __device__ inline int xx_splits(int n_low, int Np)
{
    int S = 1;
    while (2 * S * n_low <= BLK_WARPS && (Np / 16) % (2 * S) == 0 && Np / (2 * S) >= 128) S *= 2;
    return S;
}

/* An fp32 tile (tm, tn) of the accumulators into d (stride ld) at (r0, c0). */
__device__ __forceinline__ void store_f32(const float (&acc)[2][4][4], float *d, int ld, int r0, int c0)
{
    each_pair(r0, c0, [&](int i, int j, int h, int r, int c) {
        *(float2 *)(d + r * ld + c) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
    });
}

/* One matrix per CTA, or per cluster of C CTAs (each its own columns of X): blockIdx.x / C is
 * the batch entry. Dynamic shared memory: X (Mp x (W + 8)), A and B (Mp x (Mp + 8)) in the
 * iteration dtype (rows of an odd number of 16-byte words: ldmatrix without bank conflicts),
 * and with C > 1 the CTA's partial X X^T in fp32 (Mp x (Mp + 8)). A cluster sums the partials
 * (each CTA an equal share of the lower tiles' elements, from every CTA's scratch in rank order:
 * the same bits in all of them) and writes the rounded A into every CTA; each then computes B
 * itself (m x m, small) and updates its own columns. */
template <typename T> __global__ void __launch_bounds__(BLK_THREADS, 1) k_block(const blk_params P)
{
    extern __shared__ __align__(16) uint16_t sm[];
    __shared__ float red[34];
    __shared__ float ss_cta;
    constexpr int dt = dt_of<T>::v;
    const int tid = threadIdx.x, warp = tid >> 5;
    const int C = P.C, k = C > 1 ? cl_rank() : 0;
    const int Mp = P.Mp, Np = P.W, XR = Np + 8, SR = Mp + 8, PS = Mp + 8, m = P.m, n = P.n;
    uint16_t *X = sm, *A = X + Mp * XR, *B = A + Mp * SR;
    const int T32 = Mp / 32, n_low = T32 * (T32 + 1) / 2, S = xx_splits(n_low, Np);
    float *Pm = (float *)(B + Mp * SR);               /* C > 1: Mp x PS */
    float *Pw = Pm + (C > 1 ? Mp * PS : 0);           /* S > 1: n_low S tiles of 32 x PW_LD */
    const int c_lo = k * P.W, w = max(0, min(P.W, n - c_lo));
    const part pt = make_part(P, (int64_t)(blockIdx.x / C) * ((int64_t)m * n), c_lo, w);

    stamp(P, 0);
    load_normalized<dt, 2>(P, pt, X, Mp * XR, XR, C, red, &ss_cta);
    stamp(P, 1);

    const int per_panel = BLK_WARPS / T32, panel = 32 * per_panel; /* X = a X + B X: columns per panel */
    for (int it = 0; it < P.iters; it++) {
        const float ca = P.a[it], cb = P.b[it], cc = P.c[it];
        float acc[2][4][4];
        if (S == 1) {
            for (int t = warp; t < n_low; t += BLK_WARPS) { /* A = X X^T (C > 1: this CTA's columns' part) */
                int tm, tn;
                nsm::lower_tile(t, &tm, &tn);
                warp_tile<T, true>(acc, X, XR, 32 * tm, X, XR, 32 * tn, Np);
                if (C > 1) store_f32_sym(acc, Pm, PS, tm, tn);
                else store_sym(acc, A, SR, tm, tn, dt);
            }
        } else { /* K in S pieces: warp w has tile w / S, piece w % S; summed in piece order */
            if (warp < n_low * S) {
                int tm, tn;
                const int t = warp / S, kp = Np / S, kb = (warp % S) * kp;
                nsm::lower_tile(t, &tm, &tn);
                warp_tile<T, true>(acc, X + kb, XR, 32 * tm, X + kb, XR, 32 * tn, kp);
                store_f32(acc, Pw + warp * 32 * PW_LD, PW_LD, 0, 0);
            }
            __syncthreads();
            for (int x = tid; x < n_low * 1024; x += BLK_THREADS) {
                int tm, tn;
                nsm::lower_tile(x >> 10, &tm, &tn);
                const int lr = (x >> 5) & 31, lc = x & 31, r = 32 * tm + lr, c = 32 * tn + lc;
                if (tm == tn && c > r) continue;
                const float *pw = Pw + (x >> 10) * S * 32 * PW_LD + lr * PW_LD + lc;
                float v = 0.f;
                for (int j = 0; j < S; j++) v += pw[j * 32 * PW_LD];
                if (C > 1) {
                    Pm[r * PS + c] = v;
                    Pm[c * PS + r] = v;
                } else {
                    const uint16_t u = nsm::to16(dt, v);
                    A[r * SR + c] = u;
                    A[c * SR + r] = u;
                }
            }
        }
        if (C > 1) { /* the cluster's sum: CTA k sums its rows' slab, rounded into its own A; each
                        then copies the other slabs from their owners (16-byte reads) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
            __trap(); /* no clusters before sm_90: block_shape never picks C > 1 there */
#else
            cl_sync();
            const int rows = Mp / C, q4 = Mp / 4; /* rows per CTA (Mp and C powers of two times 32, <= 16) */
            for (int x = tid; x < rows * q4; x += BLK_THREADS) {
                const int r = k * rows + x / q4, c = 4 * (x % q4);
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                for (int j0 = 0; j0 < C; j0 += 4) { /* 4 peers' loads in flight, then their sum in rank order */
                    float4 pv[4];
#pragma unroll
                    for (int u = 0; u < 4; u++)
                        if (j0 + u < C) pv[u] = *(const float4 *)peer(Pm + r * PS + c, j0 + u);
#pragma unroll
                    for (int u = 0; u < 4; u++)
                        if (j0 + u < C) v.x += pv[u].x, v.y += pv[u].y, v.z += pv[u].z, v.w += pv[u].w;
                }
                *(uint2 *)(A + r * SR + c) = make_uint2(nsm::pack2(dt, v.x, v.y), nsm::pack2(dt, v.z, v.w));
            }
            cl_sync();
            const int q8 = Mp / 8; /* 16-byte pieces per row */
            for (int x = tid; x < (Mp - rows) * q8; x += BLK_THREADS) {
                int r = x / q8, c = 8 * (x % q8);
                r += r >= k * rows ? rows : 0; /* skip the CTA's own slab */
                *(uint4 *)(A + r * SR + c) = *(const uint4 *)peer(A + r * SR + c, r / rows);
            }
            __syncthreads();
#endif
        } else {
            __syncthreads();
        }
        stamp(P, 2 + 3 * it);
        for (int t = warp; t < n_low; t += BLK_WARPS) { /* B = c A A + b A (A's rows are its columns) */
            int tm, tn;
            nsm::lower_tile(t, &tm, &tn);
            warp_tile<T, true>(acc, A, SR, 32 * tm, A, SR, 32 * tn, Mp);
            fold_c(acc, cc, cb, A, SR, 32 * tm, 32 * tn, dt);
            store_sym(acc, B, SR, tm, tn, dt);
        }
        __syncthreads();
        stamp(P, 3 + 3 * it);
        for (int p0 = 0; p0 < Np; p0 += panel) { /* X = a X + B X */
            const int tm = warp % T32, c0 = p0 + 32 * (warp / T32);
            const bool active = warp < T32 * per_panel && c0 < Np;
            if (active) {
                warp_tile<T, false>(acc, B, SR, 32 * tm, X, XR, c0, Mp);
                fold_c(acc, 1.f, ca, X, XR, 32 * tm, c0, dt);
            }
            __syncthreads(); /* every read of this panel done */
            if (active) store_tile(acc, X, XR, 32 * tm, c0, dt);
        }
        __syncthreads();
        stamp(P, 4 + 3 * it);
    }
    if (C > 1) cl_sync(); /* no CTA leaves while another may read its memory */
    store_output(P, pt, dt, X, XR);
}

/* Kernel "block16": the same NS (min(m, n) <= 128, one CTA per matrix, everything in shared
 * memory) with every product computed whole in 16 x 16 warp tiles: X X^T and c A A + b A as
 * (Mp / 16)^2 tiles, the next X as (Mp / 16) (Np / 16), over the 16 warps. Where "block" keeps
 * its 32 x 32 lower tiles (3 of them at m = 64: 3 of 16 warps busy in the symmetric products, 4
 * in the update), this keeps every warp busy on small m at the price of the full products and
 * of the shorter tiles' lower mma density per ldmatrix; the autotuner keeps the faster
 * (traces/kernels/blockrow-2026-12-07: on an H100 32 x 32 12.7 us against block's 26.5, 64 x 64
 * 19.6 against 28.3; from 96 x 96 and on long sides block is faster). A and B are read as
 * stored (no symmetry assumed: B's and the update's right operands through ldmatrix.trans). X
 * has two buffers, this iteration's and the next (the update's tiles read whole columns of X),
 * so no product writes what it reads. (A cluster that split each product's rows over up to 8
 * CTAs, each then copying the others' slabs, was tried and measured ~2 us a product whatever the
 * split: moving the m x m result between SMs costs more than the product; same trace.) */
template <typename T> __global__ void __launch_bounds__(BLK_THREADS, 1) k_b16(const blk_params P)
{
    extern __shared__ __align__(16) uint16_t sm[];
    __shared__ float red[34];
    __shared__ float ss_unused;
    constexpr int dt = dt_of<T>::v;
    const int warp = threadIdx.x >> 5;
    const int Mp = P.Mp, Np = P.W, XR = Np + 8, SR = Mp + 8, tr = Mp / 16;
    uint16_t *A = sm + 2 * Mp * XR, *B = A + Mp * SR; /* X0 at 0, X1 at Mp XR */
    const part pt = make_part(P, (int64_t)blockIdx.x * ((int64_t)P.m * P.n), 0, P.n);
    stamp(P, 0);
    load_normalized<dt, 4>(P, pt, sm, Mp * XR, XR, 1, red, &ss_unused);
    stamp(P, 1);
    const int tA = tr * tr, tX = tr * (Np / 16);
    for (int it = 0; it < P.iters; it++) {
        const float ca = P.a[it], cb = P.b[it], cc = P.c[it];
        const uint16_t *X = sm + (it & 1) * Mp * XR;
        uint16_t *Xn = sm + ((it + 1) & 1) * Mp * XR;
        float acc[1][2][4];
        for (int t = warp; t < tA; t += BLK_WARPS) { /* A = X X^T */
            const int r0 = 16 * (t % tr), c0 = 16 * (t / tr);
            warp_tile<T, true, 1, 1>(acc, X, XR, r0, X, XR, c0, Np);
            store_tile(acc, A, SR, r0, c0, dt);
        }
        __syncthreads();
        stamp(P, 2 + 3 * it);
        for (int t = warp; t < tA; t += BLK_WARPS) { /* B = c A A + b A */
            const int r0 = 16 * (t % tr), c0 = 16 * (t / tr);
            warp_tile<T, false, 1, 1>(acc, A, SR, r0, A, SR, c0, Mp);
            fold_c(acc, cc, cb, A, SR, r0, c0, dt);
            store_tile(acc, B, SR, r0, c0, dt);
        }
        __syncthreads();
        stamp(P, 3 + 3 * it);
        for (int t = warp; t < tX; t += BLK_WARPS) { /* the next X = a X + B X */
            const int r0 = 16 * (t % tr), c0 = 16 * (t / tr);
            warp_tile<T, false, 1, 1>(acc, B, SR, r0, X, XR, c0, Mp);
            fold_c(acc, 1.f, ca, X, XR, r0, c0, dt);
            store_tile(acc, Xn, XR, r0, c0, dt);
        }
        __syncthreads();
        stamp(P, 4 + 3 * it);
    }
    store_output(P, pt, dt, sm + (P.iters & 1) * Mp * XR, XR);
}

int round32(int64_t v) { return (int)((v + 31) / 32 * 32); }

/* The device's per-block shared-memory limit (opt-in) and compute capability, once. */
struct dev_caps {
    int smem, major;
};
dev_caps caps()
{
    static dev_caps c = {-1, 0};
    if (c.smem < 0) {
        int dev = 0, v = 0, mj = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&mj, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
            cudaGetLastError();
            v = 0;
        }
        c.smem = v, c.major = mj;
    }
    return c;
}

/* The kernel of dtype dt: "block" (b16 0) or "block16" (b16 1). */
const void *kernel_fn(dm_dtype dt, int b16)
{
    if (b16) return dt == DM_DT_BF16 ? (const void *)k_b16<__nv_bfloat16> : (const void *)k_b16<__half>;
    return dt == DM_DT_BF16 ? (const void *)k_block<__nv_bfloat16> : (const void *)k_block<__half>;
}

/* The kernels' attributes (shared-memory limit, clusters of up to 16), once per process. */
int setup_once()
{
    static int done = 0;
    if (!done) {
        dev_caps d = caps();
        if (d.smem <= 1024) return -1;
        for (int i = 0; i < 4; i++) {
            const void *fn = kernel_fn(i & 1 ? DM_DT_FP16 : DM_DT_BF16, i >> 1);
            if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, d.smem - 1024) != cudaSuccess ||
                (d.major >= 9 && cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)) {
                cudaGetLastError();
                return -1;
            }
        }
        done = 1;
    }
    return 0;
}

int64_t smem_bytes(int Mp, int W, int C)
{
    const int t = Mp / 32, n_low = t * (t + 1) / 2, S = xx_splits(n_low, W);
    return 2 * ((int64_t)Mp * (W + 8) + 2 * (int64_t)Mp * (Mp + 8)) + (C > 1 ? 4 * (int64_t)Mp * (Mp + 8) : 0) +
           (S > 1 ? 4 * (int64_t)n_low * S * 32 * PW_LD : 0);
}

/* How many clusters of C CTAs of kernel "block" (b16 0) or "block16" (b16 1) with `smem`
 * bytes each this device holds at once (C = 1: CTAs); 0 when none (or it cannot tell). */
int resident(int C, int64_t smem, int b16)
{
    if (setup_once()) return 0;
    int least = -1;
    for (int i = 0; i < 2; i++) { /* both dtypes' kernels */
        const void *fn = kernel_fn(i ? DM_DT_FP16 : DM_DT_BF16, b16);
        int nc = 0;
        cudaError_t e;
        if (C == 1) {
            int dev = 0, sms = 0;
            e = cudaGetDevice(&dev);
            if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
            if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nc, fn, BLK_THREADS, (size_t)smem);
            nc *= sms;
        } else {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = (unsigned)C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
            cfg.gridDim = dim3((unsigned)C);
            cfg.blockDim = dim3(BLK_THREADS);
            cfg.dynamicSmemBytes = (size_t)smem;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            e = cudaOccupancyMaxActiveClusters(&nc, fn, &cfg);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        least = least < 0 || nc < least ? nc : least;
    }
    return least < 0 ? 0 : least;
}

/* How a batch of matrices of m x n (either orientation) runs: C CTAs per matrix (a power of
 * two, at most 16; 1 on sm_80) of W columns and smem bytes each. The largest C up to about 256
 * columns of X per CTA under which the whole batch is resident at once (several waves of
 * clusters took as long each as one), but never fewer than the shared memory needs. 0 when it
 * cannot (min > 128, or no C fits). */
int block_shape(int64_t m, int64_t n, int batch, int *C_out, int *W_out, int64_t *smem_out)
{
    if (m > n) {
        int64_t t = m;
        m = n, n = t;
    }
    if (m < 1 || m > BLK_MAX_M || n > (INT64_C(1) << 24) || batch < 1) return 0;
    dev_caps d = caps();
    if (d.smem <= 1024) return 0;
    const int Mp = round32(m), max_c = d.major >= 9 ? 16 : 1;
    int lo = 0, target = 1; /* lo: the fewest CTAs that fit */
    for (int C = 1; C <= max_c && !lo; C *= 2) {
        int64_t b = smem_bytes(Mp, round32((n + C - 1) / C), C);
        if (b + 1024 <= d.smem && resident(C, b, 0) > 0) lo = C;
    }
    if (!lo) return 0;
    while (target < max_c && (int64_t)target * 256 < n) target *= 2;
    int C = target > lo ? target : lo;
    for (; C > lo; C /= 2) {
        int64_t b = smem_bytes(Mp, round32((n + C - 1) / C), C);
        if (b + 1024 <= d.smem && resident(C, b, 0) >= batch) break;
    }
    *C_out = C;
    *W_out = round32((n + C - 1) / C);
    *smem_out = smem_bytes(Mp, *W_out, C);
    return 1;
}

/* Kernel "block16"'s shared memory: X twice (Mp x (Np + 8)), A and B (Mp x (Mp + 8)). */
int64_t b16_smem(int Mp, int64_t Np) { return 2 * (2 * (int64_t)Mp * (Np + 8) + 2 * (int64_t)Mp * (Mp + 8)); }

/* How a batch of m x n matrices (either orientation) runs under kernel "block16": one CTA each,
 * W = the padded n columns, smem bytes; 0 when it cannot (min > 128, or the matrix twice is
 * more than a CTA's shared memory: the long side up to 288 at m = 128, 800 at 64). */
int b16_shape(int64_t m, int64_t n, int *C_out, int *W_out, int64_t *smem_out)
{
    if (m > n) {
        int64_t t = m;
        m = n, n = t;
    }
    if (m < 1 || m > BLK_MAX_M || n > 4096) return 0;
    dev_caps d = caps();
    if (d.smem <= 1024) return 0;
    const int Mp = round32(m), W = round32(n);
    const int64_t b = b16_smem(Mp, W);
    if (b + 1024 > d.smem || resident(1, b, 1) < 1) return 0;
    *C_out = 1;
    *W_out = W;
    *smem_out = b;
    return 1;
}

/* The shape of either kernel (b16: "block16"). */
int any_shape(int64_t m, int64_t n, int batch, int b16, int *C, int *W, int64_t *smem)
{
    if (batch < 1) return 0;
    return b16 ? b16_shape(m, n, C, W, smem) : block_shape(m, n, batch, C, W, smem);
}

} // namespace

extern "C" int64_t nsm_block_smem(int64_t m, int64_t n, int batch, int b16)
{
    int C, W;
    int64_t b;
    return any_shape(m, n, batch, b16, &C, &W, &b) ? b : 0;
}

extern "C" int nsm_block_fits(int64_t m, int64_t n, int batch, int b16)
{
    int C, W;
    int64_t b;
    return any_shape(m, n, batch, b16, &C, &W, &b);
}

struct nsm_block {
    blk_params P;
    const void *fn;
    int64_t smem;
    int batch, b16;
    double exec, full, nominal;
};

extern "C" int nsm_block_create(const nsm_block_args *a, nsm_block **out, dm_err *err)
{
    *out = NULL;
    const nsm_geom *g = &a->g;
    int C = 1, W = 0;
    int64_t smem = 0;
    if (!any_shape(g->m, g->n, g->batch, a->b16, &C, &W, &smem) || g->batch < 1 || a->coeffs->n < 1 || a->coeffs->n > NS_MAX_ITERS ||
        (g->dt != DM_DT_BF16 && g->dt != DM_DT_FP16) || (int64_t)g->batch * C > INT32_MAX)
        return dm_err_set(err, "nsm_block_create: %lldx%lld batch %d not supported on this device", (long long)g->m,
                          (long long)g->n, g->batch);
    if (setup_once()) return dm_err_set(err, "nsm_block_create: the kernel's attributes (shared memory, clusters) could not be set");
    nsm_block *b = (nsm_block *)dm_calloc(1, sizeof *b, err);
    if (!b) return -1;
    blk_params *P = &b->P;
    P->in = a->in;
    P->out = a->out;
    P->io = (int)a->io;
    P->m = (int)g->m;
    P->n = (int)g->n;
    P->xT = g->xT;
    P->Mp = round32(g->m);
    P->C = C;
    P->W = W;
    P->iters = a->coeffs->n;
    P->eps = a->eps;
    for (int i = 0; i < P->iters; i++) {
        P->a[i] = (float)a->coeffs->a[i];
        P->b[i] = (float)a->coeffs->b[i];
        P->c[i] = (float)a->coeffs->c[i];
    }
    b->fn = kernel_fn(g->dt, a->b16);
    b->smem = smem;
    b->batch = g->batch;
    b->b16 = a->b16;
    double m = (double)g->m, n = (double)g->n, Mp = P->Mp, t = Mp / 32;
    double low = t * (t + 1) / 2 * 32.0 * 32.0; /* elements of the lower tiles */
    double it = (double)g->batch * P->iters;
    /* "block", per CTA: its part of X X^T, the whole c A A + b A, its columns of B X; "block16":
       every product whole (padded) */
    b->exec = a->b16 ? it * (2.0 * Mp * Mp * W + 2.0 * Mp * Mp * Mp + 2.0 * Mp * Mp * W)
                      : it * C * (2.0 * low * W + 2.0 * low * Mp + 2.0 * Mp * Mp * W);
    b->full = it * (2.0 * m * m * n + 2.0 * m * m * m + 2.0 * m * m * n);
    b->nominal = it * (m * m * n + m * m * m + 2.0 * m * m * n);
    *out = b;
    return 0;
}

extern "C" void nsm_block_destroy(nsm_block *b) { free(b); }

extern "C" void nsm_block_info(const nsm_block *b, int *ctas_per_matrix, int *cols, int64_t *smem, double *flops_exec,
                               double *flops_full, double *flops_nominal)
{
    *ctas_per_matrix = b->P.C;
    *cols = b->P.W;
    *smem = b->smem;
    *flops_exec = b->exec;
    *flops_full = b->full;
    *flops_nominal = b->nominal;
}

static cudaError_t launch(const blk_params *P, const void *fn, int batch, int64_t smem, cudaStream_t s)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)P->C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)(batch * P->C));
    cfg.blockDim = dim3(BLK_THREADS);
    cfg.dynamicSmemBytes = (size_t)smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = P->C > 1 ? 1 : 0;
    void *args[] = {(void *)P};
    return cudaLaunchKernelExC(&cfg, fn, args);
}

extern "C" int nsm_block_run(const nsm_block *b, ns_stream s, dm_err *err)
{
    NS_CUDA(launch(&b->P, b->fn, b->batch, b->smem, s));
    return 0;
}

extern "C" int nsm_block_profile(const nsm_block *b, ns_stream s, FILE *out, dm_err *err)
{
    blk_params P = b->P;
    const int n = 2 + 3 * P.iters;
    unsigned long long h[2 + 3 * NS_MAX_ITERS], best[2 + 3 * NS_MAX_ITERS];
    NS_CUDA(cudaMalloc((void **)&P.prof, sizeof h));
    int rc = -1;
    for (int rep = 0; rep < 6; rep++) { /* the fastest of 5 after one warm-up */
        cudaError_t e = launch(&P, b->fn, b->batch, b->smem, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (e == cudaSuccess) e = cudaMemcpy(h, P.prof, sizeof(h[0]) * (size_t)n, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            dm_err_set(err, "nsm_block_profile: %s", cudaGetErrorString(e));
            goto out;
        }
        if (rep == 1 || (rep > 1 && h[n - 1] - h[0] < best[n - 1] - best[0])) memcpy(best, h, sizeof h);
    }
    {
        int dev = 0, khz = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess || khz <= 0)
            cudaGetLastError(), khz = 1000000;
        const double us = 1e3 / khz; /* per clock at the device's rated clock */
        fprintf(out, "#     %s (%d CTAs per matrix of %d columns, %lld B shared; CTA 0's SM clock, the fastest of 5, us at %.0f MHz): "
                     "%.1f us in the kernel; load and normalize %.2f us\n",
                b->b16 ? "block16" : "block", P.C, P.W, (long long)b->smem, khz / 1e3, (double)(best[n - 1] - best[0]) * us, (double)(best[1] - best[0]) * us);
        for (int it = 0; it < P.iters; it++)
            fprintf(out, "#       iteration %d: X X^T %.2f us, c A A + b A %.2f us, a X + B X %.2f us\n", it,
                    (double)(best[2 + 3 * it] - best[1 + 3 * it]) * us, (double)(best[3 + 3 * it] - best[2 + 3 * it]) * us,
                    (double)(best[4 + 3 * it] - best[3 + 3 * it]) * us);
    }
    rc = 0;
out:
    cudaFree(P.prof);
    return rc;
}
