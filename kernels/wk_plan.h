/* wk_plan.h: the work of a step as the executor runs it (program.h's works, core/workload.h):
 * per layer the kernels its forward and backward ops run, each bound to the layer's buffers
 * (one input activation per slot, the residuals forward keeps for backward), the attention
 * geometries, the index maps of lookups and routing, and the sizes of the shared scratch. Both
 * backends of the executor (real/) run these plans kernel by kernel, the GPU memory estimate
 * counts them, and `dmuon bench work` (wk_bench.c) times their kernels bound the same way. Everything
 * is a function of global rows (rank, tokens per rank, the token offset), so a one-rank run
 * over the union of the ranks' tokens sees the same data as the ranks together:
 *   - activations: wk_hash_uniform(seed, WK_H_ACT, key(layer, slot), global row, column), filled
 *     once; routed slots are [expert][row] with expert e's rows at global positions p0 + j
 *     (the dispatch gathers the one of the router's width from the layer's tokens each step:
 *     position j of expert e holds routed index (p0 + j) E + e, token index / top_k; the others
 *     are hashed by (key x 65536 + e, p0 + j));
 *   - targets: on the fly by the loss kernels (wk_ref.h);
 *   - token ids of lookups: wk_token_id(seed, matrix id, global token, table rows).
 * Balanced routing as the workload states it: every expert gets ceil(T top_k / experts) rows. */
#ifndef DM_WK_PLAN_H
#define DM_WK_PLAN_H
#include <stdint.h>

#include "dm_error.h"
#include "model.h"
#include "program.h"
#include "wk_ref.h"
#include "workload.h"

/* One kernel bound to buffers. Offsets are elements; -1 for none. */
typedef struct wk_kb {
    dm_kernel k;              /* the kernel (the model's expansion, equal to the program's work) */
    int64_t x;                /* its input activation (offset in the layer's activations) */
    int64_t r;                /* its residual (offset in the layer's residuals): forward products,
                                 vector, table, embed write it; loss and the backward read it */
    int64_t dst;              /* route: the routed slot it fills (activations offset) */
    int src;                  /* backward kernels: the forward kernel they follow (index), -1 */
    int attn;                 /* attention products: the geometry (wk_plan.attn), -1 */
    int map;                  /* embed, embed-bwd, route, route-bwd: the index map, -1 */
    int64_t count, rows, row0;/* elementwise: matrices, rows per matrix, global row key of row 0 */
    int64_t period, positions;/* table kernels: tokens per sample of the stream, table rows */
    int64_t top_k;            /* route-bwd */
    int64_t table_rows;       /* embed-bwd */
    double scale;             /* loss kernels 1 / (2 N width); gradients 1 / (N width): N the
                                 stream's rows over all ranks */
    int accumulate;           /* the gradient it writes holds a later layer's part (tied heads) */
    int64_t r2, ld;           /* glu and its backward: the up projection's residual (the gate's is r),
                                 and the row stride of both (2 n when one projection holds the two
                                 halves); act: ld of r. Their outputs go to the pass scratch */
} wk_kb;

typedef struct wk_slot {
    int stream, routed;
    int64_t rows, cols;       /* rows allocated (routed: experts x rows per expert) */
    int64_t off;              /* in the layer's activations */
    int64_t row0;             /* global row (or expert position) of row 0 */
    int64_t key;              /* hash key */
    int64_t experts;          /* routed: experts of the routing (E) */
    int64_t per, nexp;        /* routed: rows per expert, experts in the buffer */
    int gathered;             /* routed: filled by the layer's dispatch each step */
} wk_slot;

typedef struct wk_layer {
    int layer;
    int n_fwd, n_bwd, n_slots;
    wk_kb *fwd, *bwd;
    wk_slot *slots;
    int64_t n_act, n_res;     /* elements of the layer's activations and residuals */
    double kept_bytes;        /* the workload's (bf16) */
} wk_layer;

/* An index map (host arrays, owned). Embeddings: ids[rows] and the tokens grouped by id
 * (n_uniq distinct ids uniq[], their tokens tok[off[u] .. off[u+1]) in order). Routing: src[rows]
 * (the token of each routed row, -1) and inv[tokens x top_k] (each token's routed rows, -1). */
typedef struct wk_map {
    int embed;
    int64_t n;                /* rows of ids / src */
    int32_t *a;               /* ids or src */
    int64_t n_inv;
    int32_t *inv;
    int64_t n_uniq;
    int32_t *uniq, *off, *tok;
} wk_map;

void wk_map_free(wk_map *m);                                  /* a zeroed map is fine */
int wk_map_copy(wk_map *dst, const wk_map *src, dm_err *err); /* a deep copy, owned by the caller */

typedef struct wk_plan {
    int64_t tokens, seq_len;  /* what the plans are for */
    int n_layers;
    wk_layer *L;
    int n_attn;
    wk_attn_geom *attn;
    int n_maps;
    wk_map *maps;
    int64_t max_dx;           /* elements of the largest cost-only output (input gradients, dx) */
    int64_t max_dx2;          /* ... of the combine's (route-bwd reads the experts' input gradient) */
    int64_t max_ws;           /* fp32 workspace of the reductions */
    int64_t max_ew;           /* elements of the layer passes' scratch (workload.h dm_pass_scratch) */
    int64_t attn_size[WK_A__N]; /* the largest attention buffers */
    int64_t n_act, n_res;     /* all layers */
    int64_t max_act_layer, max_res_layer;
    double kept_bytes;
    int64_t map_ints;         /* int32 entries of every map */
} wk_plan;

typedef struct wk_plan_opts {
    int64_t tokens, seq_len;  /* per rank; the program's seq_len (0: tokens) */
    int rank, nranks;
    int64_t token_offset;     /* global index of rank 0's first token */
    uint64_t seed;
    int64_t causal_tile;      /* the program's (workload.h dm_workload_opts) */
    int no_passes;            /* !the program's layer_passes */
} wk_plan_opts;

/* Plans of every layer of model m (mx: dm_model_matrices(m, -1), n of them). *out owned by
 * the caller (wk_plan_free). */
int wk_plan_build(const dm_model *m, const dm_matrix *mx, int64_t n, const wk_plan_opts *o, wk_plan *out, dm_err *err);
void wk_plan_free(wk_plan *w); /* a zeroed struct is fine */

/* Rank r's forward and backward ops against the plans: an op with work must carry exactly the
 * layer's kernels (the program was planned for other tokens or another seq-len otherwise), one
 * with params must name exactly its layer's matrices. -1 with the op and kernel named. */
int wk_plan_check(const wk_plan *w, const dm_program *p, int r, const dm_matrix *mx, int64_t n, dm_err *err);

/* The seed of every hash of layer l's slot s. */
int64_t wk_plan_slot_key(int layer, int slot);

#endif
