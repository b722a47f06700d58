/* model.h: model descriptions (the models/ JSON format) and their expansion into matrices.
 *
 * File format "dmuon-model-1" (documented in models/README.md):
 *   { "format": "dmuon-model-1", "name": "...", "source": "...", "published_params": N,
 *     "stacks":  [ {"name": "layers", "layers": 28}, ... ]          (forward order)
 *     "tensors": [ {"name": "layers.*.mlp.up_proj.weight", "shape": [18944, 3584], "count": 28,
 *                   "stack": "layers", "role": "muon",
 *                   "first_layer": 0, "layer_span": 28, "note": "..."}, ... ],
 *     "role_overrides": [ {"match": "GLOB", "role": "adamw"} ] }            (optional)
 * shape is out x in (PyTorch nn.Linear layout), 1 or 2 positive dimensions; count tensors of
 * that shape spread evenly over layers [first_layer, first_layer + layer_span) of the stack
 * (defaults: 0 and the stack's layer count; count must be a multiple of layer_span).
 *
 * Limits (checked with FILE:LINE:COL errors, so no total overflows and no expansion runs away):
 * a dimension at most DM_MODEL_MAX_DIM, a tensor at most DM_MODEL_MAX_ELEMS elements, count at
 * most DM_MODEL_MAX_COUNT per entry and in all, a stack at most DM_MODEL_MAX_STACK_LAYERS
 * layers and all stacks DM_MODEL_MAX_LAYERS, the whole model at most DM_MODEL_MAX_PARAMS
 * parameters, at most DM_MODEL_MAX_OVERRIDES role_overrides; stack names unique.

 * Architecture (optional; models/README.md "Architecture"):
 *     "streams": [ {"name": "text"}, {"name": "vision", "tokens": 1024}, ... ]  (main first)
 *     stack:  "stream": S, "attention": [ {"heads", "kv_heads", "head_dim", "v_head_dim",
 *             "causal", "stream", "kv_stream", "length", "window", "window_layers"} ],
 *             "moe": {"experts", "top_k"},
 *             "tied_head": TENSOR
 *     tensor: "use": "linear"|"expert"|"embedding"|"vector"|"table", "stream": S */
#ifndef DM_MODEL_H
#define DM_MODEL_H
#include <stddef.h>
#include <stdint.h>

#include "dm_error.h"

#define DM_MODEL_MAX_DIM ((int64_t)1 << 24)    /* 16 M rows or columns: no real weight is wider */
#define DM_MODEL_MAX_ELEMS ((int64_t)1 << 36)  /* 64 G elements in one tensor */
#define DM_MODEL_MAX_COUNT ((int64_t)1 << 24)  /* tensors per entry, and in the whole model */
#define DM_MODEL_MAX_STACK_LAYERS 100000
#define DM_MODEL_MAX_LAYERS 1000000
#define DM_MODEL_MAX_PARAMS ((int64_t)1 << 50) /* 1.1 P parameters */
#define DM_MODEL_MAX_OVERRIDES 4096

typedef enum { DM_ROLE_MUON = 0, DM_ROLE_ADAMW = 1 } dm_role;

/* What a tensor does in the step (models/README.md "Architecture"): a projection over its
 * stream's tokens, a routed MoE expert (1-D: an expert's bias, applied over the tokens routed to
 * it), an embedding table looked up by token, a 1-D parameter
 * applied elementwise (norm scale, bias), or a small 2-D table applied elementwise
 * (positional table, adaLN modulation). Default: linear for 2-D, vector for 1-D. */
typedef enum { DM_USE_LINEAR, DM_USE_EXPERT, DM_USE_EMBEDDING, DM_USE_VECTOR, DM_USE_TABLE, DM_USE__COUNT } dm_use;

/* A token stream: tokens of one kind per sample (text, image patches, actions). The first
 * stream is the main one: its tokens per sample are the plan's --seq-len (tokens = 0 here). */
typedef struct dm_token_stream {
    char *name;
    int64_t tokens;   /* per sample; 0 for the main stream */
} dm_token_stream;

/* One attention block of every layer of a stack: scores and values of `heads` heads over
 * windows of `length` query tokens (0: the query stream's tokens per sample) against the
 * sample's key/value tokens (kv_stream; the window itself when it is the query stream). */
typedef struct dm_attention {
    int stream, kv_stream;     /* model stream indices */
    int heads, kv_heads;
    int head_dim, v_head_dim;  /* query/key width and value width per head */
    int causal;                /* 1: causal mask (recorded; the products are computed whole) */
    int rope;                  /* rotary embedding: the dims of each query and key head it rotates
                                  (0: none; at most head_dim, even) */
    int64_t length;            /* query window, tokens; 0 = tokens per sample */
    int64_t window;            /* sliding window of a causal self-attention: a query sees the
                                  `window` keys up to itself (0: none) ... */
    char *window_layers;       /* ... in the layers of the stack that this pattern marks 's'
                                  (cycled over the stack's layers: "sf" every other layer from
                                  the first; 'f' full causal); NULL: every layer */
} dm_attention;

/* The sliding window of attention block a in layer `layer` of its stack (0: none). */
int64_t dm_attn_window(const dm_attention *a, int layer);

typedef struct dm_stack {
    char *name;
    int layers;     /* layer instances in this stack */
    int first_global; /* global layer index of this stack's layer 0 (sum of earlier stacks) */
    int stream;     /* its tensors' default stream */
    int n_attn;
    dm_attention *attn;
    int moe_experts, moe_top_k; /* routing of its expert tensors (0: none) */
    int tied_head;  /* tensor index of an embedding this stack also uses as its output GEMM, -1 */
} dm_stack;

typedef struct dm_tensor {
    char *name;     /* as in the file; '*' stands for the layer index */
    char *note;     /* may be "" */
    int ndim;       /* 1 or 2 */
    int64_t rows;   /* out (shape[0]) */
    int64_t cols;   /* in (shape[1]); 1 for 1-D tensors */
    int64_t count;  /* tensors this entry stands for */
    int stack;      /* index into dm_model.stacks */
    int first_layer, layer_span; /* within the stack */
    dm_role role;   /* after role_overrides */
    dm_use use;
    int stream;     /* model stream index (the stack's unless the file says otherwise) */
} dm_tensor;

typedef struct dm_model {
    char *name;
    char *source;
    char *path;               /* file it was read from ("" if built in memory) */
    int64_t published_params; /* 0 if unknown */
    dm_stack *stacks;
    int n_stacks;
    int n_layers;             /* total global layers */
    dm_tensor *tensors;
    int n_tensors;
    dm_token_stream *streams; /* at least one (a default "text" stream when the file has none) */
    int n_streams;
    int has_arch;             /* the file describes streams, attention, routing or uses */
} dm_model;

/* One concrete matrix (one of an entry's `count` tensors). */
typedef struct dm_matrix {
    int64_t id;     /* position in the expanded list: stable across runs for one model file */
    int tensor;     /* index into dm_model.tensors */
    int64_t index;  /* 0 .. count-1 within that entry */
    int layer;      /* global layer index (forward order) */
    int64_t rows, cols;
    dm_role role;
} dm_matrix;

/* Read and validate a model file. On error returns -1 with "FILE:LINE:COL: expected ..." in err.
 * *out is owned by the caller (dm_model_free). A HuggingFace config.json (an object with a
 * "model_type" and no "format") is imported as `dmuon model import` would (core/hf_import.h),
 * m->path the file. */
int dm_model_load_file(const char *path, dm_model **out, dm_err *err);
/* The same from text in memory; `name` stands for the file in messages and in m->path. */
int dm_model_load_text(const char *text, size_t len, const char *name, dm_model **out, dm_err *err);

/* Resolve NAME (case-insensitive file stem or model name among bundled models) or a path:
 * an existing path, else NAME in dm_model_dir(). */
int dm_model_load(const char *name_or_path, dm_model **out, dm_err *err);

/* The folder of the bundled models: the first that exists of $DMUON_MODELS, the installed
 * models/ and the source tree's (datadir.h: the source tree's first for a program run from its
 * build tree); NULL when none does. */
const char *dm_model_dir(void);

void dm_model_free(dm_model *m); /* accepts NULL */

/* Apply "GLOB=muon|adamw" overrides (fnmatch on tensor names) after loading. */
int dm_model_override_role(dm_model *m, const char *glob, dm_role role, dm_err *err);

int64_t dm_model_params(const dm_model *m);                 /* total parameters */
int64_t dm_model_params_role(const dm_model *m, dm_role r); /* parameters with that role */
int64_t dm_model_count_role(const dm_model *m, dm_role r);  /* tensors with that role */

/* Expand every tensor of role r (or all when r < 0) into matrices, sorted by (layer, entry,
 * index). *out owned by the caller (free()). */
int dm_model_matrices(const dm_model *m, int r, dm_matrix **out, int64_t *n, dm_err *err);
/* Elements of matrix x of m: rows x cols, or rows for a 1-D tensor. */
int64_t dm_matrix_elems(const dm_model *m, const dm_matrix *x);

/* Write a model to a JSON file in the format above (atomically: temp file then rename). The
 * text is read back with the loader first: a model the loader would refuse is not written
 * ("PATH: the model would not load back: PATH:LINE:COL: expected ...; nothing written"). */
int dm_model_write(const dm_model *m, const char *path, dm_err *err);

const char *dm_role_name(dm_role r); /* "muon" / "adamw" */
const char *dm_use_name(dm_use u);   /* "linear", "expert", "embedding", "vector", "table" */
/* Index of the stream named s, -1 when none. */
int dm_model_stream(const dm_model *m, const char *s);

#endif
