/* model.c: read, validate, expand and write model descriptions (format in model.h). */
#define _GNU_SOURCE
#include "model.h"

#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datadir.h"
#include "hf_import.h"
#include "json.h"
#include "outfile.h"

#define DM_MAX_DIM DM_MODEL_MAX_DIM
#define DM_MAX_ELEMS DM_MODEL_MAX_ELEMS
#define DM_MAX_COUNT DM_MODEL_MAX_COUNT

const char *dm_role_name(dm_role r) { return r == DM_ROLE_MUON ? "muon" : "adamw"; }

static const char *const use_names[DM_USE__COUNT] = {"linear", "expert", "embedding", "vector", "table"};

const char *dm_use_name(dm_use u) { return u >= 0 && u < DM_USE__COUNT ? use_names[u] : "?"; }

int dm_model_stream(const dm_model *m, const char *s)
{
    for (int i = 0; i < m->n_streams; i++)
        if (strcmp(m->streams[i].name, s) == 0) return i;
    return -1;
}

/* An optional stream name field: *out keeps its value when absent. */
static int opt_stream(const dm_model *m, const jv *obj, const char *key, const char *file, int *out, dm_err *err)
{
    const char *s = NULL;
    if (jv_opt_str(obj, key, file, &s, err)) return -1;
    if (!s) return 0;
    int i = dm_model_stream(m, s);
    if (i < 0) {
        const jv *v = jv_get(obj, key);
        return dm_err_set(err, "%s:%d:%d: expected \"%s\" to name one of the \"streams\", found \"%s\"", file, v->line,
                          v->col, key, s);
    }
    *out = i;
    return 0;
}

static int parse_streams(dm_model *m, const jv *root, const char *file, dm_err *err)
{
    const jv *arr = jv_get(root, "streams");
    if (!arr) {
        if (!(m->streams = dm_calloc(1, sizeof *m->streams, err)) || !(m->streams[0].name = dm_strdup("text", err)))
            return -1;
        m->n_streams = 1;
        return 0;
    }
    if (arr->type != JV_ARRAY || arr->n < 1)
        return dm_err_set(err, "%s:%d:%d: expected \"streams\" to be an array of at least one stream", file, arr->line,
                          arr->col);
    if (!(m->streams = dm_calloc((size_t)arr->n, sizeof *m->streams, err))) return -1;
    m->has_arch = 1;
    for (int i = 0; i < arr->n; i++) {
        const jv *o = arr->items[i];
        const char *name;
        int64_t tok = 0;
        if (o->type != JV_OBJECT)
            return dm_err_set(err, "%s:%d:%d: expected a stream object {\"name\", \"tokens\"}", file, o->line, o->col);
        if (jv_req_str(o, "name", file, &name, err)) return -1;
        if (dm_model_stream(m, name) >= 0)
            return dm_err_set(err, "%s:%d:%d: expected unique stream names, \"%s\" repeats", file, o->line, o->col, name);
        if (i == 0) {
            if (jv_get(o, "tokens"))
                return dm_err_set(err, "%s:%d:%d: expected no \"tokens\" on the main (first) stream \"%s\": its tokens per "
                                  "sample are the plan's --seq-len", file, o->line, o->col, name);
        } else if (jv_req_int(o, "tokens", 1, DM_MAX_DIM, file, &tok, err)) {
            return -1;
        }
        if (!(m->streams[i].name = dm_strdup(name, err))) return -1;
        m->streams[i].tokens = tok;
        m->n_streams = i + 1;
    }
    return 0;
}

static int parse_role(const jv *obj, const char *key, const char *file, dm_role *out, dm_err *err)
{
    const jv *v;
    if (jv_req(obj, key, JV_STRING, file, &v, err)) return -1;
    if (strcmp(v->str, "muon") == 0) *out = DM_ROLE_MUON;
    else if (strcmp(v->str, "adamw") == 0) *out = DM_ROLE_ADAMW;
    else
        return dm_err_set(err, "%s:%d:%d: expected \"%s\" to be \"muon\" or \"adamw\", found \"%s\"",
                          file, v->line, v->col, key, v->str);
    return 0;
}

void dm_model_free(dm_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_stacks; i++) {
        free(m->stacks[i].name);
        for (int k = 0; k < m->stacks[i].n_attn; k++) free(m->stacks[i].attn[k].window_layers);
        free(m->stacks[i].attn);
    }
    for (int i = 0; i < m->n_streams; i++) free(m->streams[i].name);
    free(m->streams);
    for (int i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free(m->tensors[i].note);
    }
    free(m->stacks);
    free(m->tensors);
    free(m->name);
    free(m->source);
    free(m->path);
    free(m);
}

/* Stack names in sorted order (index into m->stacks), for duplicates and look-ups in
 * O(n log n) rather than a scan per name. */
static int cmp_stack_idx(const void *a, const void *b, void *ctx)
{
    const dm_model *m = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(m->stacks[x].name, m->stacks[y].name);
    return c ? c : (x > y) - (x < y);
}

static int find_stack(const dm_model *m, const int *sorted, const char *name)
{
    int lo = 0, hi = m->n_stacks - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(m->stacks[sorted[mid]].name, name);
        if (c == 0) return sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int parse_stacks(dm_model *m, const jv *root, const char *file, int **sorted, dm_err *err)
{
    const jv *arr;
    if (jv_req(root, "stacks", JV_ARRAY, file, &arr, err)) return -1;
    if (arr->n == 0)
        return dm_err_set(err, "%s:%d:%d: expected at least one stack", file, arr->line, arr->col);
    m->stacks = dm_calloc((size_t)arr->n, sizeof *m->stacks, err);
    if (!m->stacks) return -1;
    for (int i = 0; i < arr->n; i++) {
        const jv *s = arr->items[i];
        const char *name;
        int64_t layers;
        if (s->type != JV_OBJECT)
            return dm_err_set(err, "%s:%d:%d: expected a stack object {\"name\", \"layers\"}",
                              file, s->line, s->col);
        if (jv_req_str(s, "name", file, &name, err) ||
            jv_req_int(s, "layers", 1, DM_MODEL_MAX_STACK_LAYERS, file, &layers, err))
            return -1;
        if (m->n_layers + layers > DM_MODEL_MAX_LAYERS)
            return dm_err_set(err, "%s:%d:%d: expected at most %d layers in all stacks, this one brings them to %lld",
                              file, s->line, s->col, DM_MODEL_MAX_LAYERS, (long long)(m->n_layers + layers));
        if (!(m->stacks[i].name = dm_strdup(name, err))) return -1;
        m->n_stacks = i + 1; /* owned from here: freed with the model if a later field fails */
        m->stacks[i].layers = (int)layers;
        m->stacks[i].tied_head = -1;
        if (opt_stream(m, s, "stream", file, &m->stacks[i].stream, err)) return -1;
        if (jv_get(s, "stream")) m->has_arch = 1;
        m->stacks[i].first_global = m->n_layers;
        m->n_layers += (int)layers;
        m->n_stacks = i + 1;
    }
    int *idx = *sorted = dm_malloc((size_t)m->n_stacks * sizeof *idx, err);
    if (!idx) return -1;
    for (int i = 0; i < m->n_stacks; i++) idx[i] = i;
    qsort_r(idx, (size_t)m->n_stacks, sizeof *idx, cmp_stack_idx, m);
    int rep = -1; /* the first stack (in file order) whose name an earlier one has */
    for (int k = 1; k < m->n_stacks; k++)
        if (strcmp(m->stacks[idx[k]].name, m->stacks[idx[k - 1]].name) == 0 && (rep < 0 || idx[k] < rep))
            rep = idx[k];
    if (rep >= 0)
        return dm_err_set(err, "%s:%d:%d: expected unique stack names, \"%s\" repeats", file, arr->items[rep]->line,
                          arr->items[rep]->col, m->stacks[rep].name);
    return 0;
}

static int parse_tensor(dm_model *m, const int *sorted, const jv *t, const char *file, dm_tensor *out, dm_err *err)
{
    const char *name, *stack, *note = "";
    const jv *shape;
    int64_t count, dims[2] = {1, 1};
    if (t->type != JV_OBJECT)
        return dm_err_set(err, "%s:%d:%d: expected a tensor object", file, t->line, t->col);
    if (jv_req_str(t, "name", file, &name, err) || jv_req(t, "shape", JV_ARRAY, file, &shape, err) ||
        jv_req_int(t, "count", 1, DM_MAX_COUNT, file, &count, err) ||
        jv_req_str(t, "stack", file, &stack, err) || parse_role(t, "role", file, &out->role, err) ||
        jv_opt_str(t, "note", file, &note, err))
        return -1;
    if (shape->n < 1 || shape->n > 2)
        return dm_err_set(err, "%s:%d:%d: expected \"shape\" to have 1 or 2 dimensions, found %d",
                          file, shape->line, shape->col, shape->n);
    for (int d = 0; d < shape->n; d++)
        if (jv_as_int(shape->items[d], 1, DM_MAX_DIM, file, "a dimension (positive, at most 16777216)",
                      &dims[d], err))
            return -1;
    if (dims[0] * dims[1] > DM_MAX_ELEMS)
        return dm_err_set(err, "%s:%d:%d: expected at most %" PRId64 " elements per tensor, found %" PRId64
                          " x %" PRId64, file, shape->line, shape->col, DM_MAX_ELEMS, dims[0], dims[1]);
    int si = find_stack(m, sorted, stack);
    if (si < 0) {
        const jv *sv = jv_get(t, "stack");
        return dm_err_set(err, "%s:%d:%d: expected \"stack\" to name one of the \"stacks\", found \"%s\"",
                          file, sv->line, sv->col, stack);
    }
    int64_t first = 0, span = m->stacks[si].layers;
    if (jv_opt_int(t, "first_layer", 0, m->stacks[si].layers - 1, file, &first, err)) return -1;
    span = m->stacks[si].layers - first;
    if (jv_opt_int(t, "layer_span", 1, m->stacks[si].layers - first, file, &span, err)) return -1;
    if (count % span != 0)
        return dm_err_set(err, "%s:%d:%d: expected \"count\" (%" PRId64 ") to be a multiple of the layer span (%" PRId64 ")",
                          file, t->line, t->col, count, span);
    out->use = shape->n == 2 ? DM_USE_LINEAR : DM_USE_VECTOR;
    out->stream = m->stacks[si].stream;
    const char *use = NULL;
    if (jv_opt_str(t, "use", file, &use, err) || opt_stream(m, t, "stream", file, &out->stream, err)) return -1;
    if (jv_get(t, "stream")) m->has_arch = 1;
    if (use) {
        const jv *uv = jv_get(t, "use");
        int u = -1;
        for (int k = 0; k < DM_USE__COUNT; k++)
            if (strcmp(use, use_names[k]) == 0) u = k;
        if (u < 0)
            return dm_err_set(err, "%s:%d:%d: expected \"use\" to be \"linear\", \"expert\", \"embedding\", \"vector\" or "
                              "\"table\", found \"%s\"", file, uv->line, uv->col, use);
        /* a 1-D tensor is a vector, or an expert's (its bias over the tokens routed to it) */
        if (shape->n == 1 ? u != DM_USE_VECTOR && u != DM_USE_EXPERT : u == DM_USE_VECTOR)
            return dm_err_set(err, "%s:%d:%d: expected \"use\": \"%s\" on a %s tensor (1-D tensors are vectors or "
                              "experts' biases, 2-D ones are not vectors)", file, uv->line, uv->col, use,
                              shape->n == 1 ? "2-D" : "1-D");
        out->use = (dm_use)u;
        m->has_arch = 1;
    }
    out->ndim = shape->n;
    out->rows = dims[0];
    out->cols = dims[1];
    out->count = count;
    out->stack = si;
    out->first_layer = (int)first;
    out->layer_span = (int)span;
    if (!(out->name = dm_strdup(name, err)) || !(out->note = dm_strdup(note, err))) return -1;
    return 0;
}

int64_t dm_attn_window(const dm_attention *a, int layer)
{
    if (!a->window) return 0;
    if (!a->window_layers) return a->window;
    size_t n = strlen(a->window_layers);
    return n && layer >= 0 && a->window_layers[(size_t)layer % n] == 's' ? a->window : 0;
}

/* "window" and "window_layers" of a causal self-attention block (model.h). */
static int parse_window(const jv *a, const dm_stack *st, const char *file, dm_attention *at, dm_err *err)
{
    const char *pat = NULL;
    if (jv_opt_int(a, "window", 1, DM_MAX_DIM, file, &at->window, err) || jv_opt_str(a, "window_layers", file, &pat, err))
        return -1;
    const jv *v = jv_get(a, "window");
    if (v && (!at->causal || at->kv_stream != at->stream))
        return dm_err_set(err, "%s:%d:%d: expected \"window\" only on a causal self-attention (this block is %s)", file,
                          v->line, v->col, at->causal ? "a cross-attention" : "not causal");
    if (!pat) return 0;
    v = jv_get(a, "window_layers");
    size_t n = strlen(pat);
    if (!at->window)
        return dm_err_set(err, "%s:%d:%d: expected \"window_layers\" only beside a \"window\"", file, v->line, v->col);
    if (n == 0 || n > (size_t)st->layers || strspn(pat, "sf") != n)
        return dm_err_set(err, "%s:%d:%d: expected \"window_layers\" to be 1 to %d (the stack's layers) characters, each "
                          "'s' (a sliding-window layer) or 'f' (full causal), found \"%s\"", file, v->line, v->col,
                          st->layers, pat);
    return (at->window_layers = dm_strdup(pat, err)) ? 0 : -1;
}

static int parse_attention(dm_model *m, int si, const jv *a, const char *file, dm_attention *at, dm_err *err)
{
    const dm_stack *st = &m->stacks[si];
    int64_t heads, kvh, hd, vd, len = 0, rope = 0;
    if (a->type != JV_OBJECT)
        return dm_err_set(err, "%s:%d:%d: expected an attention object {\"heads\", \"head_dim\", ...}", file, a->line, a->col);
    if (jv_req_int(a, "heads", 1, 65536, file, &heads, err)) return -1;
    kvh = heads;
    if (jv_opt_int(a, "kv_heads", 1, heads, file, &kvh, err) || jv_req_int(a, "head_dim", 1, 65536, file, &hd, err))
        return -1;
    vd = hd;
    if (jv_opt_int(a, "v_head_dim", 1, 65536, file, &vd, err) || jv_opt_int(a, "length", 1, DM_MAX_DIM, file, &len, err))
        return -1;
    if (jv_opt_int(a, "rope", 0, hd, file, &rope, err)) return -1;
    if (rope % 2) {
        const jv *v = jv_get(a, "rope");
        return dm_err_set(err, "%s:%d:%d: expected \"rope\" (the rotated dims of a head) to be even, found %" PRId64, file,
                          v->line, v->col, rope);
    }
    if (heads % kvh) {
        const jv *v = jv_get(a, "kv_heads");
        return dm_err_set(err, "%s:%d:%d: expected \"kv_heads\" (%" PRId64 ") to divide \"heads\" (%" PRId64 ")", file, v->line,
                          v->col, kvh, heads);
    }
    at->causal = 1;
    const jv *c = jv_get(a, "causal");
    if (c) {
        if (c->type != JV_BOOL) return dm_err_set(err, "%s:%d:%d: expected \"causal\" to be true or false", file, c->line, c->col);
        at->causal = c->b;
    }
    at->stream = st->stream;
    if (opt_stream(m, a, "stream", file, &at->stream, err)) return -1;
    at->kv_stream = at->stream;
    if (opt_stream(m, a, "kv_stream", file, &at->kv_stream, err)) return -1;
    at->heads = (int)heads;
    at->kv_heads = (int)kvh;
    at->head_dim = (int)hd;
    at->v_head_dim = (int)vd;
    at->rope = (int)rope;
    at->length = len;
    /* A window must divide a fixed stream's tokens per sample (the main stream is checked
     * against --seq-len when a plan is made). */
    int64_t per = m->streams[at->stream].tokens;
    if (len && per && per % len) {
        const jv *v = jv_get(a, "length");
        return dm_err_set(err, "%s:%d:%d: expected \"length\" (%" PRId64 ") to divide the %" PRId64 " tokens per sample of "
                          "stream \"%s\"", file, v->line, v->col, len, per, m->streams[at->stream].name);
    }
    if (parse_window(a, st, file, at, err)) return -1;
    /* The query projection must be there: a linear tensor of the stack over the query stream
     * with heads x head_dim outputs (or a fused q/k/v with (heads + 2 kv_heads) x head_dim). */
    int64_t q = heads * hd, qkv = (heads + 2 * kvh) * hd;
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        if (t->stack == si && t->use == DM_USE_LINEAR && t->stream == at->stream && (t->rows == q || t->rows == qkv))
            return 0;
    }
    return dm_err_set(err, "%s:%d:%d: expected a query projection for this attention: a linear tensor of stack \"%s\" on "
                      "stream \"%s\" with heads x head_dim = %" PRId64 " (or fused q/k/v: %" PRId64 ") rows; none has",
                      file, a->line, a->col, st->name, m->streams[at->stream].name, q, qkv);
}

/* The stacks' attention, routing and tied heads (they refer to tensors), and the checks that
 * tie tensors to them. */
static int parse_arch(dm_model *m, const jv *root, const char *file, dm_err *err)
{
    const jv *arr = jv_get(root, "stacks");
    for (int si = 0; si < m->n_stacks; si++) {
        const jv *s = arr->items[si];
        dm_stack *st = &m->stacks[si];
        const jv *a = jv_get(s, "attention");
        if (a) {
            int n = a->type == JV_ARRAY ? a->n : 1;
            if (a->type == JV_ARRAY && n == 0)
                return dm_err_set(err, "%s:%d:%d: expected at least one attention block", file, a->line, a->col);
            if (!(st->attn = dm_calloc((size_t)n, sizeof *st->attn, err))) return -1;
            for (int k = 0; k < n; k++) {
                st->n_attn = k + 1; /* (counted first: dm_model_free frees what a failed parse left) */
                if (parse_attention(m, si, a->type == JV_ARRAY ? a->items[k] : a, file, &st->attn[k], err)) return -1;
            }
            m->has_arch = 1;
        }
        const jv *moe = jv_get(s, "moe");
        if (moe) {
            int64_t e, k;
            if (moe->type != JV_OBJECT)
                return dm_err_set(err, "%s:%d:%d: expected \"moe\": {\"experts\": N, \"top_k\": K}", file, moe->line, moe->col);
            if (jv_req_int(moe, "experts", 1, 1 << 20, file, &e, err) || jv_req_int(moe, "top_k", 1, 1 << 20, file, &k, err))
                return -1;
            if (k > e) {
                const jv *v = jv_get(moe, "top_k");
                return dm_err_set(err, "%s:%d:%d: expected \"top_k\" (%" PRId64 ") at most \"experts\" (%" PRId64 ")", file,
                                  v->line, v->col, k, e);
            }
            st->moe_experts = (int)e;
            st->moe_top_k = (int)k;
            m->has_arch = 1;
        }
        const char *tied = NULL;
        if (jv_opt_str(s, "tied_head", file, &tied, err)) return -1;
        if (tied) {
            const jv *v = jv_get(s, "tied_head");
            for (int i = 0; i < m->n_tensors && st->tied_head < 0; i++)
                if (strcmp(m->tensors[i].name, tied) == 0 &&
                    (m->tensors[i].use == DM_USE_EMBEDDING || m->tensors[i].use == DM_USE_LINEAR))
                    st->tied_head = i;
            if (st->tied_head < 0)
                return dm_err_set(err, "%s:%d:%d: expected \"tied_head\" to name an embedding or linear tensor, found \"%s\"",
                                  file, v->line, v->col, tied);
            m->has_arch = 1;
        }
    }
    const jv *ts = jv_get(root, "tensors");
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        const dm_stack *st = &m->stacks[t->stack];
        if (t->use != DM_USE_EXPERT) continue;
        const jv *tv = ts->items[i];
        if (!st->moe_experts)
            return dm_err_set(err, "%s:%d:%d: expected stack \"%s\" of expert tensor \"%s\" to have \"moe\": {\"experts\", "
                              "\"top_k\"}", file, tv->line, tv->col, st->name, t->name);
        int64_t per = t->count / t->layer_span;
        if (per % st->moe_experts)
            return dm_err_set(err, "%s:%d:%d: expected the %" PRId64 " expert tensors per layer of \"%s\" to be a multiple of the "
                              "stack's %d experts", file, tv->line, tv->col, per, t->name, st->moe_experts);
    }
    return 0;
}

int dm_model_override_role(dm_model *m, const char *glob, dm_role role, dm_err *err)
{
    int hits = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (fnmatch(glob, m->tensors[i].name, 0) == 0) {
            m->tensors[i].role = role;
            hits++;
        }
    if (!hits) return dm_err_set(err, "role override \"%s\" matches no tensor of %s", glob, m->name);
    return 0;
}

/* The model in a parsed tree (taken over: freed here). */
static int load_tree(jv *root, const char *path, dm_model **out, dm_err *err)
{
    dm_model *m = NULL;
    int *sorted = NULL;
    const char *s;
    if (!root) return -1;
    if (root->type != JV_OBJECT) {
        dm_err_set(err, "%s:%d:%d: expected a model object", path, root->line, root->col);
        goto fail;
    }
    if (!(m = dm_calloc(1, sizeof *m, err))) goto fail;
    if (jv_req_str(root, "format", path, &s, err)) goto fail;
    if (strcmp(s, "dmuon-model-1") != 0) {
        const jv *f = jv_get(root, "format");
        dm_err_set(err, "%s:%d:%d: expected \"format\": \"dmuon-model-1\", found \"%s\"", path,
                   f->line, f->col, s);
        goto fail;
    }
    if (jv_req_str(root, "name", path, &s, err) || !(m->name = dm_strdup(s, err))) goto fail;
    s = "";
    if (jv_opt_str(root, "source", path, &s, err) || !(m->source = dm_strdup(s, err))) goto fail;
    if (!(m->path = dm_strdup(path, err))) goto fail;
    if (jv_opt_int(root, "published_params", 0, DM_MODEL_MAX_PARAMS, path, &m->published_params, err))
        goto fail;
    if (parse_streams(m, root, path, err) || parse_stacks(m, root, path, &sorted, err)) goto fail;
    const jv *ts;
    if (jv_req(root, "tensors", JV_ARRAY, path, &ts, err)) goto fail;
    if (ts->n == 0) {
        dm_err_set(err, "%s:%d:%d: expected at least one tensor", path, ts->line, ts->col);
        goto fail;
    }
    if (!(m->tensors = dm_calloc((size_t)ts->n, sizeof *m->tensors, err))) goto fail;
    int64_t params = 0, count = 0;
    for (int i = 0; i < ts->n; i++) {
        m->n_tensors = i + 1;
        dm_tensor *t = &m->tensors[i];
        if (parse_tensor(m, sorted, ts->items[i], path, t, err)) goto fail;
        /* each term is at most 2^36 x 2^24 = 2^60, and the sums stay under their caps: no overflow */
        params += t->rows * t->cols * t->count;
        count += t->count;
        if (params > DM_MODEL_MAX_PARAMS || count > DM_MODEL_MAX_COUNT) {
            dm_err_set(err, "%s:%d:%d: expected at most %" PRId64 " parameters and %" PRId64
                       " tensors in the model, this entry brings them to %" PRId64 " and %" PRId64,
                       path, ts->items[i]->line, ts->items[i]->col, DM_MODEL_MAX_PARAMS, DM_MODEL_MAX_COUNT, params,
                       count);
            goto fail;
        }
    }
    if (parse_arch(m, root, path, err)) goto fail;
    const jv *ov = jv_get(root, "role_overrides");
    if (ov) {
        if (ov->type != JV_ARRAY) {
            dm_err_set(err, "%s:%d:%d: expected \"role_overrides\" to be an array", path, ov->line, ov->col);
            goto fail;
        }
        if (ov->n > DM_MODEL_MAX_OVERRIDES) { /* each one is matched against every tensor */
            dm_err_set(err, "%s:%d:%d: expected at most %d role_overrides, found %d", path, ov->line, ov->col,
                       DM_MODEL_MAX_OVERRIDES, ov->n);
            goto fail;
        }
        for (int i = 0; i < ov->n; i++) {
            const jv *o = ov->items[i];
            const char *glob;
            dm_role r;
            if (o->type != JV_OBJECT) {
                dm_err_set(err, "%s:%d:%d: expected {\"match\": GLOB, \"role\": ROLE}", path, o->line, o->col);
                goto fail;
            }
            if (jv_req_str(o, "match", path, &glob, err) || parse_role(o, "role", path, &r, err))
                goto fail;
            if (dm_model_override_role(m, glob, r, err)) {
                char tmp[sizeof err->msg];
                snprintf(tmp, sizeof tmp, "%s", err->msg);
                dm_err_set(err, "%s:%d:%d: %s", path, o->line, o->col, tmp);
                goto fail;
            }
        }
    }
    free(sorted);
    jv_free(root);
    *out = m;
    return 0;
fail:
    free(sorted);
    jv_free(root);
    dm_model_free(m);
    return -1;
}

int dm_model_load_file(const char *path, dm_model **out, dm_err *err)
{
    jv *root = jv_parse_file(path, err);
    if (root && root->type == JV_OBJECT && !jv_get(root, "format")) {
        const jv *t = jv_get(root, "model_type");
        if (t && t->type == JV_STRING) { /* a HuggingFace config.json: imported as `model import` does */
            int rc = hf_import_tree(root, path, out, err);
            jv_free(root);
            if (rc) return -1;
            free((*out)->path);
            if (!((*out)->path = dm_strdup(path, err))) {
                dm_model_free(*out);
                *out = NULL;
                return -1;
            }
            return 0;
        }
    }
    return load_tree(root, path, out, err);
}

int dm_model_load_text(const char *text, size_t len, const char *name, dm_model **out, dm_err *err)
{
    return load_tree(jv_parse(text, len, name, err), name, out, err);
}

const char *dm_model_dir(void) { return dm_data_dir(DM_DATA_MODELS); }

int dm_model_load(const char *name, dm_model **out, dm_err *err)
{
    struct stat st;
    if (strchr(name, '/') || (stat(name, &st) == 0 && S_ISREG(st.st_mode)))
        return dm_model_load_file(name, out, err);
    const char *dir = dm_model_dir();
    if (!dir)
        return dm_err_set(err, "model \"%s\": no models folder found (set DMUON_MODELS)", name);
    char path[4096];
    DIR *d = opendir(dir);
    if (!d) return dm_err_set(err, "%s: cannot open models folder", dir);
    struct dirent *e;
    char found[1024] = "";
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        if (strncasecmp(e->d_name, name, n - 5) == 0 && strlen(name) == n - 5) {
            snprintf(found, sizeof found, "%s", e->d_name);
            break;
        }
    }
    closedir(d);
    if (!found[0]) {
        /* Fall back to matching the "name" field of each file (e.g. "WALL-OSS"). */
        d = opendir(dir);
        while (d && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
            dm_model *m;
            dm_err scan_err;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (dm_model_load_file(path, &m, &scan_err) != 0) {
                /* A broken neighbour file is skipped, but running out of memory is not "unknown". */
                if (strstr(scan_err.msg, "out of memory")) {
                    closedir(d);
                    return dm_err_set(err, "%s", scan_err.msg);
                }
            } else {
                int hit = strcasecmp(m->name, name) == 0;
                dm_model_free(m);
                if (hit) {
                    snprintf(found, sizeof found, "%s", e->d_name);
                    break;
                }
            }
        }
        if (d) closedir(d);
    }
    if (!found[0])
        return dm_err_set(err, "unknown model \"%s\" (see `dmuon models`, or give a file path)", name);
    snprintf(path, sizeof path, "%s/%s", dir, found);
    return dm_model_load_file(path, out, err);
}

int64_t dm_model_params(const dm_model *m)
{
    int64_t t = 0;
    for (int i = 0; i < m->n_tensors; i++) t += m->tensors[i].rows * m->tensors[i].cols * m->tensors[i].count;
    return t;
}

int64_t dm_model_params_role(const dm_model *m, dm_role r)
{
    int64_t t = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role == r) t += m->tensors[i].rows * m->tensors[i].cols * m->tensors[i].count;
    return t;
}

int64_t dm_model_count_role(const dm_model *m, dm_role r)
{
    int64_t t = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role == r) t += m->tensors[i].count;
    return t;
}

int64_t dm_matrix_elems(const dm_model *m, const dm_matrix *x)
{
    return x->rows * (m->tensors[x->tensor].ndim == 1 ? 1 : x->cols);
}

int dm_model_matrices(const dm_model *m, int r, dm_matrix **out, int64_t *n, dm_err *err)
{
    /* Order: by global layer, then by entry, then by index: forward order, deterministic. A
     * counting sort by layer, so the work is the matrices plus the layers, not their product. */
    int64_t total = 0, *at = dm_calloc((size_t)m->n_layers + 1, sizeof *at, err);
    if (!at) return -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        if (r >= 0 && (int)t->role != r) continue;
        int g0 = m->stacks[t->stack].first_global + t->first_layer;
        for (int l = g0; l < g0 + t->layer_span; l++) at[l + 1] += t->count / t->layer_span;
        total += t->count;
    }
    for (int l = 0; l < m->n_layers; l++) at[l + 1] += at[l];
    dm_matrix *v = dm_calloc((size_t)(total ? total : 1), sizeof *v, err);
    if (!v) {
        free(at);
        return -1;
    }
    for (int i = 0; i < m->n_tensors; i++) { /* entries in order: within a layer they come in order */
        const dm_tensor *t = &m->tensors[i];
        if (r >= 0 && (int)t->role != r) continue;
        int g0 = m->stacks[t->stack].first_global + t->first_layer;
        int64_t per = t->count / t->layer_span;
        for (int layer = g0; layer < g0 + t->layer_span; layer++)
            for (int64_t j = 0; j < per; j++) {
                dm_matrix *x = &v[at[layer]++];
                x->tensor = i;
                x->index = (int64_t)(layer - g0) * per + j;
                x->layer = layer;
                x->rows = t->rows;
                x->cols = t->cols;
                x->role = t->role;
            }
    }
    for (int64_t k = 0; k < total; k++) v[k].id = k;
    free(at);
    *out = v;
    *n = total;
    return 0;
}

static void write_text(const dm_model *m, FILE *f)
{
    fprintf(f, "{\n  \"format\": \"dmuon-model-1\",\n  \"name\": ");
    json_write_string(f, m->name);
    fprintf(f, ",\n  \"source\": ");
    json_write_string(f, m->source ? m->source : "");
    fprintf(f, ",\n  \"published_params\": %" PRId64 ",\n", m->published_params);
    if (m->has_arch) {
        fprintf(f, "  \"streams\": [");
        for (int i = 0; i < m->n_streams; i++) {
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            json_write_string(f, m->streams[i].name);
            if (i) fprintf(f, ", \"tokens\": %" PRId64, m->streams[i].tokens);
            fprintf(f, "}");
        }
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"stacks\": [\n");
    for (int i = 0; i < m->n_stacks; i++) {
        const dm_stack *st = &m->stacks[i];
        fprintf(f, "    {\"name\": ");
        json_write_string(f, st->name);
        fprintf(f, ", \"layers\": %d", st->layers);
        if (st->stream) {
            fprintf(f, ", \"stream\": ");
            json_write_string(f, m->streams[st->stream].name);
        }
        for (int k = 0; k < st->n_attn; k++) {
            const dm_attention *a = &st->attn[k];
            fprintf(f, "%s{\"heads\": %d", k ? ", " : ", \"attention\": [", a->heads);
            if (a->kv_heads != a->heads) fprintf(f, ", \"kv_heads\": %d", a->kv_heads);
            fprintf(f, ", \"head_dim\": %d", a->head_dim);
            if (a->v_head_dim != a->head_dim) fprintf(f, ", \"v_head_dim\": %d", a->v_head_dim);
            if (a->rope) fprintf(f, ", \"rope\": %d", a->rope);
            if (!a->causal) fprintf(f, ", \"causal\": false");
            if (a->stream != st->stream) {
                fprintf(f, ", \"stream\": ");
                json_write_string(f, m->streams[a->stream].name);
            }
            if (a->kv_stream != a->stream) {
                fprintf(f, ", \"kv_stream\": ");
                json_write_string(f, m->streams[a->kv_stream].name);
            }
            if (a->length) fprintf(f, ", \"length\": %" PRId64, a->length);
            if (a->window) fprintf(f, ", \"window\": %" PRId64, a->window);
            if (a->window_layers) {
                fprintf(f, ", \"window_layers\": ");
                json_write_string(f, a->window_layers);
            }
            fprintf(f, "}%s", k + 1 == st->n_attn ? "]" : "");
        }
        if (st->moe_experts) fprintf(f, ", \"moe\": {\"experts\": %d, \"top_k\": %d}", st->moe_experts, st->moe_top_k);
        if (st->tied_head >= 0) {
            fprintf(f, ", \"tied_head\": ");
            json_write_string(f, m->tensors[st->tied_head].name);
        }
        fprintf(f, "}%s\n", i + 1 < m->n_stacks ? "," : "");
    }
    fprintf(f, "  ],\n  \"tensors\": [\n");
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        fprintf(f, "    {\"name\": ");
        json_write_string(f, t->name);
        if (t->ndim == 1) fprintf(f, ", \"shape\": [%" PRId64 "]", t->rows);
        else fprintf(f, ", \"shape\": [%" PRId64 ", %" PRId64 "]", t->rows, t->cols);
        fprintf(f, ", \"count\": %" PRId64 ", \"stack\": ", t->count);
        json_write_string(f, m->stacks[t->stack].name);
        if (t->first_layer != 0 || t->layer_span != m->stacks[t->stack].layers)
            fprintf(f, ", \"first_layer\": %d, \"layer_span\": %d", t->first_layer, t->layer_span);
        fprintf(f, ", \"role\": \"%s\"", dm_role_name(t->role));
        if (t->use != (t->ndim == 2 ? DM_USE_LINEAR : DM_USE_VECTOR)) fprintf(f, ", \"use\": \"%s\"", dm_use_name(t->use));
        if (t->stream != m->stacks[t->stack].stream) {
            fprintf(f, ", \"stream\": ");
            json_write_string(f, m->streams[t->stream].name);
        }
        if (t->note && t->note[0]) {
            fprintf(f, ", \"note\": ");
            json_write_string(f, t->note);
        }
        fprintf(f, "}%s\n", i + 1 < m->n_tensors ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

int dm_model_write(const dm_model *m, const char *path, dm_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return dm_err_set(err, "%s: out of memory (the model's text)", path);
    write_text(m, f);
    if (fclose(f) != 0) {
        free(text);
        return dm_err_set(err, "%s: out of memory (the model's text)", path);
    }
    /* read back what would be written: never write a file the loader refuses */
    dm_model *back = NULL;
    dm_err why;
    if (dm_model_load_text(text, len, path, &back, &why)) {
        free(text);
        if (strstr(why.msg, "out of memory")) return dm_err_set(err, "%s", why.msg);
        return dm_err_set(err, "%s: the model would not load back, nothing written: %s", path, why.msg);
    }
    dm_model_free(back);
    dm_out *o = dm_out_open(path, err);
    if (!o) {
        free(text);
        return -1;
    }
    fwrite(text, 1, len, dm_out_file(o));
    free(text);
    return dm_out_commit(o, err);
}
