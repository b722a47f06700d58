/* workload.h: the work of one training step, layer by layer, as the kernels that compute it.
 * One function expands a model layer (model.h: its tensors, token streams, attention blocks,
 * MoE routing) into forward or backward kernels: GEMMs of the projections (forward, input
 * gradient, weight gradient), batched GEMMs of the attention products, batched GEMMs of the
 * routed experts, and elementwise passes (norms, biases, lookups, the proxy loss). The scheduler
 * stores these lists in the step program; the simulator prices exactly these kernels from the
 * measured cost tables and the real executor runs exactly these kernels; `model show` sums
 * them. See models/README.md ("Architecture") for the model fields and docs there for the rules.
 *
 * Conventions (row-major, as the executor lays buffers out; T_s = tokens of the tensor's stream
 * on this rank, a weight W is out x in):
 *   gemm fwd    Y[T_s x out] = X[T_s x in] W^T         m = T_s,  n = out, k = in
 *   gemm dgrad  dX[T_s x in] = dY[T_s x out] W         m = T_s,  n = in,  k = out
 *   gemm wgrad  dW[out x in] = dY^T X                  m = out,  n = in,  k = T_s
 *   experts: the same per expert with T_e = ceil(T_s x top_k / experts) routed tokens, one
 *   batched GEMM over the layer's `batch` experts of the entry (consecutive matrix ids); an
 *   expert's bias (a 1-D expert tensor) a vector pass over its T_e routed rows, `count` experts;
 *   attention per window of L_q queries over L_k keys, batch = windows x heads:
 *   score  S = Q K^T (m L_q, n L_k, k head_dim); softmax P = softmax(S / sqrt(head_dim)) in
 *   place (elementwise, m batch L_q rows, n L_k); value O = P V (m L_q, n v_head_dim, k L_k);
 *   backward recomputes S and P, then dV = P^T dO (m L_k, n v_dim, k L_q), dP = dO V^T (m L_q,
 *   n L_k, k v_dim), softmax-bwd dS = P (dP - rowsum(P dP)) in place, dQ = dS K (m L_q, n
 *   head_dim, k L_k), dK = dS^T Q (m L_k, n head_dim, k L_q). The products are computed whole
 *   (a causal mask and a sliding window are recorded, not exploited), unless causal_tile is
 *   set: then a causal self-attention block runs as its lower triangle, or the band of its
 *   sliding window (dm_attn_block_geoms: score, softmax and value groups per block, each at its
 *   own rows and batch = windows x heads x rectangles, the softmax over each rectangle's rows);
 *   S is materialized (no fused attention).
 * Elementwise kernels carry `elems` (elements touched) and `bytes` (HBM bytes moved at 2 bytes
 * per activation element, the parameter in its own precision). Times are never computed here. */
#ifndef DM_WORKLOAD_H
#define DM_WORKLOAD_H
#include <stdint.h>

#include "dm_error.h"
#include "model.h"

typedef enum {
    DM_KERN_GEMM,   /* one GEMM per matrix: `count` of them over consecutive matrix ids */
    DM_KERN_BGEMM,  /* one batched GEMM of `batch` equal products (experts, attention) */
    DM_KERN_ELEM,   /* an elementwise pass (with reductions where its kind says so) */
    DM_KERN__COUNT
} dm_kern_kind;

typedef enum {
    /* GEMM passes (DM_KERN_GEMM and expert DM_KERN_BGEMM) */
    DM_KOP_FWD, DM_KOP_DGRAD, DM_KOP_WGRAD,
    /* attention products (DM_KERN_BGEMM) */
    DM_KOP_ATTN_SCORE, DM_KOP_ATTN_VALUE, DM_KOP_ATTN_DVALUE, DM_KOP_ATTN_DSCORE, DM_KOP_ATTN_DQUERY,
    DM_KOP_ATTN_DKEY,
    /* elementwise (DM_KERN_ELEM) */
    DM_KOP_LOSS,        /* proxy loss of a projection: R = Y - target, loss += |R|^2 (T_s x out) */
    DM_KOP_VECTOR,      /* a 1-D parameter over its tokens (norm scale, bias): y = x * w - target */
    DM_KOP_VECTOR_BWD,  /* its backward: dw = sum over tokens (a reduction), dx */
    DM_KOP_EMBED,       /* lookup: T_s rows of the table gathered */
    DM_KOP_EMBED_BWD,   /* gradient: zeroed, T_s rows scattered-added */
    DM_KOP_TABLE,       /* a small 2-D table applied to the tokens (positional, modulation) */
    DM_KOP_TABLE_BWD,
    DM_KOP_ROUTE,       /* MoE dispatch and combine of T_s x top_k rows of width `n` */
    DM_KOP_ROUTE_BWD,
    DM_KOP_SOFTMAX,     /* attention probabilities: P = softmax(S / sqrt(head_dim)) per row, in place
                           (m = batch x L_q rows of n = L_k scores) */
    DM_KOP_SOFTMAX_BWD, /* its backward: dS = P (dP - sum_j P_j dP_j) per row, in place over dP */
    DM_KOP_GRAD_CHECK,  /* the executor's non-finite check of one gradient after its backward op:
                           one read of m x n bf16 elements (1-D parameters m 1); in no layer's
                           kernel list: dm_grad_check_kernel derives it from the kernel that
                           writes the gradient */
    DM_KOP_ADAMW,       /* the executor's AdamW update of one tensor (or its shard), m elements,
                           n 1: the gradient converted and checked, then the update with its bf16
                           copy (real/real_gpu.c update_op); only in the works of adamw ops, priced
                           from the cost table's `adamw` rows, which time that pair
                           (dm_costs_update_op_us) */
    DM_KOP_MUON_UPDATE, /* the executor's Muon update of one matrix (or its shard), m elements, n 1:
                           only in the works of muon-update ops, priced from the `muon_update` rows */
    /* a layer's passes between its projections (elementwise, m rows of n; dm_layer_work_build
       says where each comes from): */
    DM_KOP_ACT,         /* an MLP's activation, not gated: h = gelu(a) (reads a, writes h) */
    DM_KOP_ACT_BWD,     /* da = dh gelu'(a) (reads a and dh, writes da) */
    DM_KOP_GLU,         /* a gated MLP's activation: h = silu(g) u (reads g and u, writes h) */
    DM_KOP_GLU_BWD,     /* dg = dh u silu'(g), du = dh silu(g) (reads g, u, dh; writes dg, du) */
    DM_KOP_ROPE,        /* rotary embedding of the queries and keys, in place: m tokens, n = (heads +
                           kv_heads) x the rotated dims per head */
    DM_KOP_ROPE_BWD,    /* the inverse rotation of their gradients, in place */
    DM_KOP_RESID,       /* a residual add: y = x + f(x) (reads two m x n, writes one) */
    DM_KOP_RESID_BWD,   /* the gradient's sum at the branch point (reads two, writes one) */
    DM_KOP__COUNT
} dm_kern_op;

typedef struct dm_kernel {
    dm_kern_kind kind;
    dm_kern_op op;
    int64_t m, n, k;      /* GEMM shapes (see above); ELEM: m = rows (tokens), n = width */
    int64_t batch;        /* BGEMM: products in the one call; else 1 */
    int64_t count;        /* GEMM and ELEM on parameters: how many consecutive matrices; else 1 */
    int64_t param;        /* first matrix id (dm_model_matrices(m, -1) order), -1 for none */
    int slot;             /* the layer's input activation slot it reads (dm_layer_work.slots), -1 */
    double flops;         /* all of it: 2 m n k batch count for products */
    double bytes;         /* HBM bytes, the same convention for every kind (see above) */
    double elems;         /* ELEM: elements processed; products: 0 */
} dm_kernel;

/* One input activation a layer's kernels share: the tokens of one stream at one width (q, k
 * and v read the same X; gate and up the same X); routed rows of an MoE layer are their own. */
typedef struct dm_act_slot {
    int stream;           /* model stream index */
    int64_t rows, cols;   /* rows = tokens on this rank (routed: T_s x top_k) */
    int routed;
} dm_act_slot;

typedef struct dm_workload_opts {
    int64_t tokens;       /* tokens of the main stream per rank (sequences x seq_len) */
    int64_t seq_len;      /* tokens per sample of the main stream (0: tokens, one sample) */
    int dtype_bytes;      /* bytes per activation/weight element (2 for bf16) */
    int64_t causal_tile;  /* 0: every attention block's products whole; T > 0: a causal
                             self-attention block's as its lower triangle, or its sliding
                             window's band (dm_attn_block_geoms) */
    int no_passes;        /* 1: no layer passes (rope, act, glu, resid): a program from before them, or
                             plan option --layer-passes off (dm_program's layer_passes) */
} dm_workload_opts;

/* The tile of plan option --attention causal (the program records the one it was made with):
 * 512 rows, not 256, because the smaller tiles' extra launches priced longer than they saved at
 * 1024 tokens while 512 saves as much at 4096 (traces/validate/causal-predictions-2026-12-05);
 * to be set from the GPU's own rows when they are measured. */
#define DM_ATTN_CAUSAL_TILE 512

/* One product group of an attention block, as both interpreters run it (workload.h's batched
 * products; the executor binds its operands from it: kernels/wk_ref.h). Per query window and head,
 * `rects` rectangles of lq queries against lk keys, `step` rows apart, the queries `qoff` rows
 * after the keys (rectangle r: keys [r step, r step + lk), queries [r step + qoff, ... + lq)); the
 * operand buffers hold `rows` query (= key) rows a window. Whole: rects 1, step 0, qoff 0, rows 0
 * (the window's rows are lq and lk). */
typedef struct dm_attn_geom {
    int64_t lq, lk, hd, vd;    /* queries and keys per product, query/key and value widths */
    int64_t heads, kv_heads;
    int64_t win, kv_win;       /* query windows, key windows (this rank) */
    int64_t rects, step, qoff; /* see above */
    int64_t rows;              /* 0: lq and lk (whole; or, with step > 0, rects x step) */
} dm_attn_geom;

/* The product groups of attention block a in layer `layer` of its stack under o (the most there
 * can be: DM_ATTN_MAX_PRODS), into out; returns how many (0: the block has no window on this rank).
 * Whole (causal_tile 0, a block that is not causal self-attention, or one too short to cut): one
 * group, lq x lk. Causal (causal_tile T > 0): the lower triangle of each window's L x L scores as
 * rectangles that halve, K of them, K the most halvings that keep L / 2^K a whole number of at
 * least T rows: group j < K, 2^j rectangles of s = L / 2^(j+1) rows (queries [2rs + s, 2rs + 2s)
 * against keys [2rs, 2rs + s)); then the 2^K diagonal tiles of L / 2^K rows, computed whole:
 * L^2 / 2 + L^2 / 2^(K+1) scores. A sliding window W < L in this layer (dm_attn_window): in tiles
 * of t rows (the smallest divisor of L of at least T), each query tile against the w = ceil((W-1)/t)
 * tiles before it and itself: the first w tiles as a causal triangle of P = w t rows (as above),
 * the other L/t - w as one group of t x (w+1) t rectangles; taken when it has fewer scores than
 * the causal triangle. Each group is one batched score, softmax and value product (and its five
 * backward products); above the diagonal the scores are masked work, computed. */
#define DM_ATTN_MAX_PRODS 64
int dm_attn_block_geoms(const dm_model *m, const dm_workload_opts *o, const dm_attention *a, int layer,
                        dm_attn_geom out[DM_ATTN_MAX_PRODS]);
/* Rows of a window's queries and of its keys in the operand buffers. */
void dm_attn_geom_rows(const dm_attn_geom *g, int64_t *rq, int64_t *rk);
/* Entries of one of its batched products: windows x heads x rects. */
int64_t dm_attn_geom_entries(const dm_attn_geom *g);
/* 1 when its rectangles' keys overlap (a band: each query tile against the tiles before it): the
 * key-side outputs dK and dV are then each rectangle's own (partial sums a real kernel would
 * add), not the window's rows. */
int dm_attn_geom_key_overlap(const dm_attn_geom *g);
/* Elements of its buffers: queries, keys, values, the output gradient dO (each window's rows),
 * the scores (every entry's lq x lk), and the one output buffer of O, dQ, dK and dV. */
void dm_attn_geom_elems(const dm_attn_geom *g, int64_t *q, int64_t *k, int64_t *v, int64_t *dout, int64_t *scores,
                        int64_t *out);

typedef struct dm_layer_work {
    int layer;
    int n_fwd, n_bwd;
    dm_kernel *fwd, *bwd; /* forward list; backward list (in the order it runs) */
    int n_slots;
    dm_act_slot *slots;
    double fwd_flops, bwd_flops, fwd_bytes, bwd_bytes;
    double kept_bytes;    /* activations forward keeps for backward (slots and outputs) */
    int64_t attn_max[6];  /* the largest of each attention buffer over the layer's product groups,
                             in dm_attn_geom_elems's order (q, k, v, dO, scores, output) */
} dm_layer_work;

/* Samples per rank and tokens per rank of stream s, after dm_workload_check. */
int64_t dm_workload_samples(const dm_model *m, const dm_workload_opts *o);
int64_t dm_workload_stream_tokens(const dm_model *m, const dm_workload_opts *o, int s);

/* Refuse options the model cannot run: tokens not a multiple of seq_len, an attention window
 * that does not divide its stream's tokens. The message names the option and the model. */
int dm_workload_check(const dm_model *m, const dm_workload_opts *o, dm_err *err);

/* Expand global layer `layer`. mats: dm_model_matrices(m, -1) (n of them; its ids are the
 * kernels' params). *out is filled (owned by the caller: dm_layer_work_free). */
int dm_layer_work_build(const dm_model *m, const dm_matrix *mats, int64_t n, int layer, const dm_workload_opts *o,
                        dm_layer_work *out, dm_err *err);
void dm_layer_work_free(dm_layer_work *w); /* accepts a zeroed struct */

/* The executor checks every gradient for non-finite values after its backward op (one read of
 * the bf16 gradient, one launch per tensor: real/real_gpu.c backward_done). When backward
 * kernel x writes parameter gradients (a weight-gradient GEMM, the experts' batched one, a 1-D
 * parameter's or a table's reduction, the embedding's backward), *chk is their check as an
 * elementwise kernel of op grad-check: m x n per launch (1-D parameters and a tied table, whose
 * rows are not on the kernel: m 1), count launches (experts: one per expert), bytes one bf16
 * read of them all; returns 1. Else 0. `bench work` times these kernels, and the simulator and
 * the calibration price them like every other (dm_work_grad_check_us, costs.h). */
int dm_grad_check_kernel(const dm_kernel *x, dm_kernel *chk);

/* Totals of a whole step (all layers): FLOPs forward and backward, and the active parameters
 * per token (every parameter a token passes through: experts at top_k / experts). */
typedef struct dm_step_work {
    double fwd_flops, bwd_flops;
    double attn_flops;        /* of which attention products, forward + backward */
    double active_params;     /* per token of the main stream */
    double kept_bytes;        /* activations kept, summed over layers */
} dm_step_work;
int dm_step_work_sum(const dm_model *m, const dm_workload_opts *o, dm_step_work *out, dm_err *err);

/* HBM passes of an elementwise kernel op over its elements (read or written, each at the
 * element's size): 2 for the forward kinds, route-bwd and softmax, 3 for the backward kinds with
 * a reduction, a scatter or softmax-bwd (embed-bwd also zeroes its table: not counted here);
 * the layer's passes: act 2, act-bwd 3, glu 3, glu-bwd 5, rope and rope-bwd 2 (in place),
 * resid and resid-bwd 3; 0 for a product op. The one rule of the kernels' bytes: the workload and the cost table's
 * rows (dm_elem_launch_bytes) take it from here. */
double dm_elem_passes(dm_kern_op op);


/* Elements of the executor's pass scratch (one bf16 buffer shared by every layer) that kernel k
 * needs: act, glu, rope and their backward write their output there (glu-bwd two of them), resid
 * and resid-bwd also read their second operand from there; 0 for any other kernel. The executor
 * (kernels/wk_plan.c) and the memory estimate (core/memory.c) size it from here. */
int64_t dm_pass_scratch(const dm_kernel *k);

const char *dm_kern_kind_name(dm_kern_kind k); /* "gemm", "bgemm", "elem" */
const char *dm_kern_op_name(dm_kern_op op);    /* "fwd", "dgrad", ..., "attn-score", ..., "loss", ... */
int dm_kern_op_from_name(const char *s);        /* -1 when unknown */

#endif
