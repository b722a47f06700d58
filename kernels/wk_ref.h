/* wk_ref.h: the step's work kernels (core/workload.h) as the executor computes them, on the CPU
 * in float (wk_ref.c): the one statement of what every kernel kind does to data, which the GPU
 * launchers (wk_cuda.h, bf16 storage, fp32 accumulation) compute too, and the counter hash that
 * makes the proxy's data (activations, targets, token ids) a function of global row indices, so
 * runs on different rank counts see the same data.
 *
 * Layouts are row-major. A kernel over `count` consecutive matrices (workload.h) has their
 * buffers back to back (matrix i at i * rows * width) unless a launcher says otherwise.
 *
 * Products C (m x n) by the pass (workload.h's shapes):
 *   NT  C = A B^T   A m x k, B n x k   fwd (A = X, B = W, C = Y), attn-score (Q, K, S),
 *                                      attn-dscore (dO, V, dS)
 *   NN  C = A B     A m x k, B k x n   dgrad (dY, W, dX), attn-value (S, V, O), attn-dquery (dS, K, dQ)
 *   TN  C = A^T B   A k x m, B k x n   wgrad (dY, X, dW), attn-dvalue (S, dO, dV), attn-dkey (dS, Q, dK)
 *   C = alpha * product (wgrad: alpha = 1 / (N out), N = the stream's rows over all ranks).
 *
 * Elementwise kernels (R: a residual, kept from forward to backward; x: the layer's input
 * activation of the kernel's slot; target(p, r, c) = wk_hash_uniform(seed, WK_H_TARGET, p, r, c)
 * with r the global row key: no target is ever stored):
 *   loss        R[i][r][c] -= target(param + i, row0 + r, c);   loss += scale * sum R^2
 *   vector      R[i][t][c]  = x[t][c] * w_i[c] - target(param + i, row0 + t, c);  loss likewise
 *   vector-bwd  g_i[c] = scale * sum_t R_i[t][c] x[t][c] (in token order); dx[t][c] = R_i[t][c] w_i[c]
 *   table       R[t][c] = x[t][c] * W[pos(t)][c] - target(param, row0 + t, c), pos(t) =
 *               (t mod period) mod positions (period: tokens per sample of its stream)
 *   table-bwd   G[p][c] = scale * sum over t with pos(t) = p of R[t][c] x[t][c]; dx = R * W[pos]
 *   embed       R[t][c] = E[id[t]][c]   (the loss kernel after it subtracts the target)
 *   embed-bwd   G = 0 (unless it accumulates onto a tied head's part), then
 *               G[id[t]][c] += scale * R[t][c] for t in order
 *   route       D[q][c] = src[q] >= 0 ? X[src[q]][c] : 0   (dispatch of the routed rows)
 *   route-bwd   dX[t][c] = sum over k < K of dD[inv[t K + k]][c] (entries -1 skipped; cost only)
 *   softmax     S[r][c] = exp(a S[r][c] - max_c' a S[r][c']) / sum over the row, a = 1 / sqrt(head_dim),
 *               in place over the attention scores (cost only, as the products)
 *   softmax-bwd dP[r][c] = P[r][c] (dP[r][c] - sum_c' P[r][c'] dP[r][c']), in place over dP
 * The layer passes (cost only: each writes the executor's pass scratch E, which nothing reads back
 * for the step's result; a real step would feed them to the next projection):
 *   act         E[r][c] = gelu(A[r][c]) (tanh form), A the input projection's residual (row stride ld)
 *   act-bwd     E[r][c] = dH[r][c] gelu'(A[r][c]), dH the consumer's input gradient (dx)
 *   glu         E[r][c] = silu(G[r][c]) U[r][c], G and U the gate's and the up's residuals (row
 *               stride ld: 2 n when one projection holds both, U = G + n)
 *   glu-bwd     E[r][c] = dH U silu'(G), E[rows n + r n + c] = dH silu(G)
 *   rope        in place over E, m rows of n: each pair (2i, 2i+1) turned by the angle r f_j, f_j =
 *               10000^(-2j / d), j = i mod (d / 2), d the rotated dims per head (the kernel's k);
 *               rope-bwd turns it back (-angle)
 *   resid       E[0 .. m n) = X + E[m n .. 2 m n), X the layer's input activation; resid-bwd alike
 * dx and dX outputs are computed for their cost and discarded, as the input gradients of the
 * product kernels are. The reductions are deterministic on both devices (fixed order). */
#ifndef DM_WK_REF_H
#define DM_WK_REF_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "workload.h"

/* The counter hash: a value in [-1, 1) (24 random bits, exact in float) of (seed, kind, param,
 * a, b). The executor's kinds: */
enum {
    WK_H_ACT = 1,      /* activations: param = the slot's key, a = global row, b = column */
    WK_H_WEIGHT = 3,   /* initial weights (CPU backend) */
    WK_H_TARGET = 4,   /* least-squares targets: param = matrix id, a = row key, b = column */
    WK_H_TOKEN = 5,    /* embedding token ids: param = matrix id, a = global token, b = 0 */
    WK_H_ROUTED = 6    /* routed activations: param = key x 65536 + expert, a = position, b = column */
};
float wk_hash_uniform(uint64_t seed, int kind, int64_t param, int64_t a, int64_t b);
/* The hash in parts, as the GPU kernels compute it: wk_hash_kind of (seed, kind) on the host,
 * wk_hash_param(that, param) = wk_hash_prefix(seed, kind, param); per row a (64-bit mixing)
 * wk_hash_row(prefix, a), per column b a 32-bit finalizer wk_hash_col(row, b);
 * wk_hash_finish(prefix, a, b) = wk_hash_col(wk_hash_row(prefix, a), b). */
uint64_t wk_hash_kind(uint64_t seed, int kind);
uint64_t wk_hash_param(uint64_t hk, int64_t param);
uint64_t wk_hash_prefix(uint64_t seed, int kind, int64_t param);
uint32_t wk_hash_row(uint64_t prefix, int64_t a);
float wk_hash_col(uint32_t row, int64_t b);
float wk_hash_finish(uint64_t prefix, int64_t a, int64_t b);
uint64_t wk_mix64(uint64_t z);

/* A token id in [0, rows) from the hash (embedding lookups). */
int32_t wk_token_id(uint64_t seed, int64_t param, int64_t global_token, int64_t rows);

typedef enum { WK_NT = 0, WK_NN = 1, WK_TN = 2 } wk_form;
/* The product form of a GEMM pass or attention product (workload.h's op); -1 for others. */
int wk_form_of(dm_kern_op op);

/* C = alpha op(A, B) of one product (float, CBLAS). */
void wk_ref_gemm(wk_form f, int64_t m, int64_t n, int64_t k, float alpha, const float *A, const float *B, float *C);
/* ... accumulating (C += alpha op(A, B)). */
void wk_ref_gemm_acc(wk_form f, int64_t m, int64_t n, int64_t k, float alpha, const float *A, const float *B, float *C);

/* The elementwise kernels above on one matrix (the caller loops over count). Returns the loss
 * sum in double where the kernel has one. */
double wk_ref_loss(float *R, int64_t rows, int64_t n, uint64_t seed, int64_t param, int64_t row0, double scale);
double wk_ref_vector(const float *x, const float *w, float *R, int64_t rows, int64_t n, uint64_t seed,
                     int64_t param, int64_t row0, double scale);
/* Rows [t0, t1) of the reduction into g (overwritten); dx over the same rows when not NULL. */
void wk_ref_vector_bwd(const float *R, const float *x, const float *w, float *g, float *dx, int64_t t0, int64_t t1,
                       int64_t n, float scale);
double wk_ref_table(const float *x, const float *W, float *R, int64_t rows, int64_t n, int64_t period,
                    int64_t positions, uint64_t seed, int64_t param, int64_t row0, double scale);
void wk_ref_table_bwd(const float *R, const float *x, const float *W, float *G, float *dx, int64_t t0, int64_t t1,
                      int64_t n, int64_t period, int64_t positions, float scale);
void wk_ref_embed(const float *E, const int32_t *id, float *R, int64_t rows, int64_t n);
/* Rows [t0, t1): G[id[t]] += scale R[t] (the caller zeroes G first unless it accumulates). */
void wk_ref_embed_bwd(const float *R, const int32_t *id, float *G, int64_t t0, int64_t t1, int64_t n, float scale);
void wk_ref_route(const float *X, const int32_t *src, float *D, int64_t rows, int64_t n);
void wk_ref_route_bwd(const float *dD, const int32_t *inv, float *dX, int64_t tokens, int64_t top_k, int64_t n);

void wk_ref_act(const float *A, int64_t ld, float *E, int64_t rows, int64_t n);
void wk_ref_act_bwd(const float *A, int64_t ld, const float *dH, float *E, int64_t rows, int64_t n);
void wk_ref_glu(const float *G, const float *U, int64_t ld, float *E, int64_t rows, int64_t n);
void wk_ref_glu_bwd(const float *G, const float *U, int64_t ld, const float *dH, float *dG, float *dU, int64_t rows,
                    int64_t n);
void wk_ref_rope(float *E, int64_t rows, int64_t n, int64_t d, int inverse);
void wk_ref_add(const float *X, const float *Y, float *E, int64_t elems);
/* The activations' functions, as both devices compute them (float). */
float wk_gelu(float x);
float wk_gelu_grad(float x);
float wk_silu(float x);
float wk_silu_grad(float x);

void wk_ref_softmax(float *S, int64_t rows, int64_t n, float a);
void wk_ref_softmax_bwd(const float *P, float *dP, int64_t rows, int64_t n);
/* The score scale of a block with query/key width hd: 1 / sqrt(hd). */
float wk_softmax_scale(int64_t hd);

/* Rows one thread sums in the GPU's two-pass reductions (vector-bwd, table-bwd), and the fp32
 * workspace they need for count matrices of rows x n (rows per matrix; tables: period and
 * positions as above, vectors 1 and 1). */
#define WK_GROUP 16
int64_t wk_ws_floats(int64_t count, int64_t rows, int64_t n, int64_t period, int64_t positions);

/* Attention (cost only: the products' inputs are buffers of the right size, their outputs are
 * discarded). One product group's geometry is core/workload.h's dm_attn_geom (batch = windows x
 * heads x rects): query head h of window w reads key/value head h / (heads / kv_heads) of key
 * window w / (win / kv_win). Buffers are [window][head][rows][width]: q (rows x hd), k (rows x
 * hd), v (rows x vd), dout (rows x vd), s and ds (rects x lq x lk each entry), and one for the
 * outputs O, dV, dQ, dK; rows: the geometry's rows (whole: lq for q, lk for k). */
typedef dm_attn_geom wk_attn_geom;
enum { WK_AQ, WK_AK, WK_AV, WK_ADO, WK_AS, WK_ADS, WK_AOUT, WK_A__N };
/* Entries (products) of one of its batched GEMMs: windows x heads x rects. */
int64_t wk_attn_entries(const wk_attn_geom *g);
/* Elements of each buffer (indexed by WK_AQ ...). */
void wk_attn_sizes(const wk_attn_geom *g, int64_t size[WK_A__N]);
/* 1 when one stride per operand describes every entry (one key head per query head, one key
 * window per query window, a window's rectangles filling its rows): a strided batch then runs
 * the products. */
int wk_attn_strided(const wk_attn_geom *g);
/* The operands A, B, C of entry e of product op: which buffers, and their element offsets. */
void wk_attn_entry(const wk_attn_geom *g, dm_kern_op op, int64_t e, int which[3], int64_t off[3]);

#ifdef __cplusplus
}
#endif
#endif
