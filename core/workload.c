/* workload.c: a model layer's forward and backward kernels (workload.h), and a step's totals. */
#include "workload.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[DM_KERN__COUNT] = {"gemm", "bgemm", "elem"};
static const char *const op_names[DM_KOP__COUNT] = {
    "fwd",        "dgrad",     "wgrad",      "attn-score", "attn-value", "attn-dvalue", "attn-dscore",
    "attn-dquery", "attn-dkey", "loss",      "vector",     "vector-bwd", "embed",       "embed-bwd",
    "table",      "table-bwd", "route",      "route-bwd",  "softmax",     "softmax-bwd", "grad-check",
    "adamw",      "muon-update", "act",        "act-bwd",     "glu",        "glu-bwd",     "rope",
    "rope-bwd",   "resid",     "resid-bwd"};

const char *dm_kern_kind_name(dm_kern_kind k) { return k >= 0 && k < DM_KERN__COUNT ? kind_names[k] : "?"; }
const char *dm_kern_op_name(dm_kern_op op) { return op >= 0 && op < DM_KOP__COUNT ? op_names[op] : "?"; }

int dm_kern_op_from_name(const char *s)
{
    for (int i = 0; i < DM_KOP__COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) return i;
    return -1;
}

static int64_t seq_of(const dm_workload_opts *o) { return o->seq_len > 0 ? o->seq_len : o->tokens; }

int64_t dm_workload_samples(const dm_model *m, const dm_workload_opts *o)
{
    (void)m;
    int64_t s = seq_of(o);
    return s > 0 ? o->tokens / s : 0;
}

/* Tokens per sample of stream s. */
static int64_t per_sample(const dm_model *m, const dm_workload_opts *o, int s)
{
    return s == 0 ? seq_of(o) : m->streams[s].tokens;
}

int64_t dm_workload_stream_tokens(const dm_model *m, const dm_workload_opts *o, int s)
{
    return s == 0 ? o->tokens : dm_workload_samples(m, o) * m->streams[s].tokens;
}

int dm_workload_check(const dm_model *m, const dm_workload_opts *o, dm_err *err)
{
    if (o->tokens < 1) return dm_err_set(err, "--tokens: expected a positive number, found %lld", (long long)o->tokens);
    int64_t s = seq_of(o);
    if (s < 1 || s > o->tokens || o->tokens % s)
        return dm_err_set(err, "--tokens (%lld) must be a multiple of --seq-len (%lld): tokens per rank are sequences x "
                          "seq-len", (long long)o->tokens, (long long)s);
    for (int i = 0; i < m->n_stacks; i++)
        for (int k = 0; k < m->stacks[i].n_attn; k++) {
            const dm_attention *a = &m->stacks[i].attn[k];
            if (a->stream == 0 && a->length && s % a->length)
                return dm_err_set(err, "--seq-len (%lld) must be a multiple of the attention window of stack \"%s\" of %s "
                                  "(%lld tokens)", (long long)s, m->stacks[i].name, m->name, (long long)a->length);
        }
    return 0;
}

void dm_layer_work_free(dm_layer_work *w)
{
    if (!w) return;
    free(w->fwd);
    free(w->bwd);
    free(w->slots);
    memset(w, 0, sizeof *w);
}

typedef struct kvec {
    dm_kernel *v;
    int n, cap;
} kvec;

static dm_kernel *kpush(kvec *k, dm_err *err)
{
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 32;
        dm_kernel *v = dm_realloc(k->v, (size_t)cap * sizeof *v, err);
        if (!v) return NULL;
        k->v = v;
        k->cap = cap;
    }
    dm_kernel *x = &k->v[k->n++];
    memset(x, 0, sizeof *x);
    x->batch = x->count = 1;
    x->param = -1;
    x->slot = -1;
    return x;
}

typedef struct wctx {
    const dm_model *m;
    const dm_workload_opts *o;
    dm_layer_work *w;
    dm_err *err;
    double elt;
    int cap_slots;
    int embed_tied; /* backward_of of an embedding: some stack uses its table as a tied head */
} wctx;

static int slot_of(wctx *c, int stream, int64_t rows, int64_t cols, int routed)
{
    dm_layer_work *w = c->w;
    for (int i = 0; i < w->n_slots; i++)
        if (w->slots[i].stream == stream && w->slots[i].rows == rows && w->slots[i].cols == cols &&
            w->slots[i].routed == routed)
            return i;
    if (w->n_slots == c->cap_slots) {
        int cap = c->cap_slots ? 2 * c->cap_slots : 8;
        dm_act_slot *s = dm_realloc(w->slots, (size_t)cap * sizeof *s, c->err);
        if (!s) return -1;
        w->slots = s;
        c->cap_slots = cap;
    }
    w->slots[w->n_slots] = (dm_act_slot){stream, rows, cols, routed};
    return w->n_slots++;
}

static void gemm_cost(dm_kernel *k, double elt)
{
    double m = (double)k->m, n = (double)k->n, kk = (double)k->k, reps = (double)k->batch * (double)k->count;
    k->flops = 2 * m * n * kk * reps;
    k->bytes = (m * kk + kk * n + m * n) * elt * reps;
    k->elems = 0;
}

double dm_elem_passes(dm_kern_op op)
{
    switch (op) {
    case DM_KOP_LOSS:
    case DM_KOP_VECTOR:
    case DM_KOP_EMBED:
    case DM_KOP_TABLE:
    case DM_KOP_ROUTE:
    case DM_KOP_ROUTE_BWD:
    case DM_KOP_SOFTMAX:
    case DM_KOP_ACT:
    case DM_KOP_ROPE:
    case DM_KOP_ROPE_BWD: return 2;
    case DM_KOP_GRAD_CHECK: return 1;
    case DM_KOP_VECTOR_BWD:
    case DM_KOP_TABLE_BWD:
    case DM_KOP_EMBED_BWD:
    case DM_KOP_SOFTMAX_BWD:
    case DM_KOP_ACT_BWD:
    case DM_KOP_GLU:
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: return 3;
    case DM_KOP_GLU_BWD: return 5;
    default: return 0;
    }
}

int64_t dm_pass_scratch(const dm_kernel *k)
{
    if (k->kind != DM_KERN_ELEM) return 0;
    int64_t e = k->m * k->n * (k->count > 0 ? k->count : 1);
    switch (k->op) {
    case DM_KOP_ACT:
    case DM_KOP_ACT_BWD:
    case DM_KOP_GLU:
    case DM_KOP_ROPE:
    case DM_KOP_ROPE_BWD: return e;
    case DM_KOP_GLU_BWD:
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: return 2 * e;
    default: return 0;
    }
}

/* An elementwise kernel over m x n elements per matrix, dm_elem_passes of them read or written. */
static void elem_cost(dm_kernel *k, double elt)
{
    k->elems = (double)k->m * (double)k->n * (double)k->count;
    k->bytes = k->elems * elt * dm_elem_passes(k->op);
    k->flops = 0;
}

static dm_kernel *add_gemm(wctx *c, kvec *kv, dm_kern_kind kind, dm_kern_op op, int64_t m, int64_t n, int64_t k,
                           int64_t batch, int64_t count, int64_t param, int slot)
{
    dm_kernel *x = kpush(kv, c->err);
    if (!x) return NULL;
    x->kind = kind;
    x->op = op;
    x->m = m, x->n = n, x->k = k;
    x->batch = batch;
    x->count = count;
    x->param = param;
    x->slot = slot;
    gemm_cost(x, c->elt);
    return x;
}

static dm_kernel *add_elem(wctx *c, kvec *kv, dm_kern_op op, int64_t m, int64_t n, int64_t count, int64_t param, int slot)
{
    dm_kernel *x = kpush(kv, c->err);
    if (!x) return NULL;
    x->kind = DM_KERN_ELEM;
    x->op = op;
    x->m = m, x->n = n;
    x->count = count;
    x->param = param;
    x->slot = slot;
    elem_cost(x, c->elt);
    return x;
}

/* Halvings of a causal triangle of L rows down to tiles of at least `tile` whole rows (at most
 * 30: a triangle and a band's leading triangle then fit DM_ATTN_MAX_PRODS). */
static int causal_levels(int64_t L, int64_t tile)
{
    int K = 0;
    while (K < 30 && L % ((int64_t)2 << K) == 0 && (L >> (K + 1)) >= tile) K++;
    return K;
}

/* The causal triangle of the first P rows of windows of L rows (workload.h), appended at out[n];
 * returns the new count. K = 0: the P x P square whole. */
static int causal_geoms(dm_attn_geom base, int64_t P, int64_t L, int64_t tile, dm_attn_geom *out, int n)
{
    int K = causal_levels(P, tile);
    for (int j = 0; j <= K; j++) {
        dm_attn_geom g = base;
        g.rows = P == L && !K ? 0 : L;
        if (j < K) g.lq = g.lk = P >> (j + 1), g.rects = (int64_t)1 << j, g.step = 2 * g.lq, g.qoff = g.lq;
        else g.lq = g.lk = P >> K, g.rects = (int64_t)1 << K, g.step = K ? g.lq : 0, g.qoff = 0;
        out[n++] = g;
    }
    return n;
}

/* Scores of products out[from..n) per window and head. */
static double geom_scores(const dm_attn_geom *g, int from, int n)
{
    double s = 0;
    for (int i = from; i < n; i++) s += (double)g[i].rects * (double)g[i].lq * (double)g[i].lk;
    return s;
}

/* The smallest divisor of L of at least t (L itself when none is smaller). */
static int64_t tile_of(int64_t L, int64_t t)
{
    int64_t best = L;
    for (int64_t d = 1; d * d <= L; d++)
        if (L % d == 0) {
            if (d >= t && d < best) best = d;
            if (L / d >= t && L / d < best) best = L / d;
        }
    return best;
}

int dm_attn_block_geoms(const dm_model *m, const dm_workload_opts *o, const dm_attention *a, int layer,
                        dm_attn_geom out[DM_ATTN_MAX_PRODS])
{
    int64_t lq = a->length ? a->length : per_sample(m, o, a->stream), tq = dm_workload_stream_tokens(m, o, a->stream);
    int64_t lk = a->kv_stream == a->stream ? lq : per_sample(m, o, a->kv_stream), win = lq > 0 ? tq / lq : 0;
    if (win * a->heads < 1) return 0;
    int64_t kv_win = a->kv_stream == a->stream ? win : dm_workload_samples(m, o), T = o->causal_tile;
    dm_attn_geom base = {lq, lk, a->head_dim, a->v_head_dim, a->heads, a->kv_heads, win, kv_win, 1, 0, 0, 0};
    if (T <= 0 || !a->causal || a->kv_stream != a->stream) return out[0] = base, 1;
    int n = causal_geoms(base, lq, lq, T, out, 0);
    int64_t W = dm_attn_window(a, layer), t = W > 0 && W < lq ? tile_of(lq, T) : lq, w = W > 1 ? (W - 2) / t + 1 : 0;
    if (t < lq && w + 1 < lq / t) {
        /* the band: the first w tiles' triangle, then every later tile against its w + 1 */
        int nb = w ? causal_geoms(base, w * t, lq, T, out, n) : n;
        dm_attn_geom g = base;
        g.lq = t, g.lk = (w + 1) * t, g.rects = lq / t - w, g.step = t, g.qoff = w * t, g.rows = lq;
        out[nb++] = g;
        if (geom_scores(out, n, nb) < geom_scores(out, 0, n)) {
            memmove(out, out + n, (size_t)(nb - n) * sizeof *out);
            n = nb - n;
        }
    }
    return n;
}

int64_t dm_attn_geom_entries(const dm_attn_geom *g) { return g->win * g->heads * (g->rects > 1 ? g->rects : 1); }

void dm_attn_geom_rows(const dm_attn_geom *g, int64_t *rq, int64_t *rk)
{
    *rq = g->rows > 0 ? g->rows : g->step > 0 ? g->rects * g->step : g->lq;
    *rk = g->rows > 0 ? g->rows : g->step > 0 ? g->rects * g->step : g->lk;
}

int dm_attn_geom_key_overlap(const dm_attn_geom *g) { return g->rects > 1 && g->step > 0 && g->step < g->lk; }

void dm_attn_geom_elems(const dm_attn_geom *g, int64_t *q, int64_t *k, int64_t *v, int64_t *dout, int64_t *scores,
                        int64_t *out)
{
    int64_t rq, rk;
    dm_attn_geom_rows(g, &rq, &rk);
    int64_t b = g->win * g->heads, bk = g->kv_win * g->kv_heads;
    *q = b * rq * g->hd;
    *k = bk * rk * g->hd;
    *v = bk * rk * g->vd;
    *dout = b * rq * g->vd;
    *scores = dm_attn_geom_entries(g) * g->lq * g->lk;
    /* per query head: O and dQ over the query rows, dV and dK over the key rows (each
     * rectangle's own when they overlap) */
    int64_t ko = dm_attn_geom_key_overlap(g) ? g->rects * g->lk : rk, w = g->hd > g->vd ? g->hd : g->vd;
    *out = b * (rq > ko ? rq : ko) * w;
}

/* The attention block's forward products (score, softmax, value) appended to kv, one group per
 * product of dm_attn_block_geoms. */
static int add_attention(wctx *c, kvec *kv, const dm_attention *a, int layer)
{
    dm_attn_geom g[DM_ATTN_MAX_PRODS];
    int n = dm_attn_block_geoms(c->m, c->o, a, layer, g);
    if (n > 0 && a->rope > 0 && !c->o->no_passes) {
        /* the rotary embedding of the block's queries and keys, before its products */
        int64_t T = dm_workload_stream_tokens(c->m, c->o, a->stream);
        dm_kernel *r = add_elem(c, kv, DM_KOP_ROPE, T, (int64_t)(a->heads + a->kv_heads) * a->rope, 1, -1, -1);
        if (!r) return -1;
        r->k = a->rope; /* the rotated dims of a head */
    }
    for (int j = 0; j < n; j++) {
        int64_t nb = dm_attn_geom_entries(&g[j]), e[6];
        dm_attn_geom_elems(&g[j], &e[0], &e[1], &e[2], &e[3], &e[4], &e[5]);
        for (int i = 0; i < 6; i++)
            if (e[i] > c->w->attn_max[i]) c->w->attn_max[i] = e[i];
        if (!add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_SCORE, g[j].lq, g[j].lk, g[j].hd, nb, 1, -1, -1) ||
            !add_elem(c, kv, DM_KOP_SOFTMAX, nb * g[j].lq, g[j].lk, 1, -1, -1) ||
            !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_VALUE, g[j].lq, g[j].vd, g[j].lk, nb, 1, -1, -1))
            return -1;
    }
    return 0;
}

/* Where attention block a goes among the layer's tensors: right after its query projection (a
 * linear tensor on its stream with heads x head_dim rows, or a fused q/k/v), searched from
 * tensor `from` on (blocks of one stack in order), else at the end. Returns a tensor index to
 * insert before (n_tensors: the end). Only the order of the kernel list depends on it. */
static int attention_position(const dm_model *m, int si, const dm_attention *a, const int *present, int from)
{
    int64_t q = (int64_t)a->heads * a->head_dim, qkv = (int64_t)(a->heads + 2 * a->kv_heads) * a->head_dim;
    for (int i = from; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        if (present[i] && t->stack == si && t->use == DM_USE_LINEAR && t->stream == a->stream &&
            (t->rows == q || t->rows == qkv))
            return i + 1;
    }
    return m->n_tensors;
}

/* 1 when some stack uses tensor t as its tied output head. */
static int is_tied_head(const dm_model *m, int t)
{
    for (int s = 0; s < m->n_stacks; s++)
        if (m->stacks[s].tied_head == t) return 1;
    return 0;
}

/* Backward kernels of forward kernel f, appended to kv (in the order they run). */
static int backward_of(wctx *c, kvec *kv, const dm_kernel *f, const dm_kernel *next)
{
    switch (f->op) {
    case DM_KOP_FWD: {
        int64_t tok = f->m, out = f->n, in = f->k;
        return !add_gemm(c, kv, f->kind, DM_KOP_DGRAD, tok, in, out, f->batch, f->count, f->param, f->slot) ||
                       !add_gemm(c, kv, f->kind, DM_KOP_WGRAD, out, in, tok, f->batch, f->count, f->param, f->slot)
                   ? -1
                   : 0;
    }
    case DM_KOP_ATTN_SCORE: {
        /* f = score (lq, lk, hd), next = value (lq, vd, lk); S and P recomputed */
        int64_t lq = f->m, lk = f->n, hd = f->k, vd = next ? next->n : hd, b = f->batch;
        return !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_SCORE, lq, lk, hd, b, 1, -1, -1) ||
                       !add_elem(c, kv, DM_KOP_SOFTMAX, b * lq, lk, 1, -1, -1) ||
                       !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_DVALUE, lk, vd, lq, b, 1, -1, -1) ||
                       !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_DSCORE, lq, lk, vd, b, 1, -1, -1) ||
                       !add_elem(c, kv, DM_KOP_SOFTMAX_BWD, b * lq, lk, 1, -1, -1) ||
                       !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_DQUERY, lq, hd, lk, b, 1, -1, -1) ||
                       !add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_ATTN_DKEY, lk, hd, lq, b, 1, -1, -1)
                   ? -1
                   : 0;
    }
    case DM_KOP_VECTOR:
        /* reads dy and x, writes dx; the weight gradient is a reduction over the tokens */
        return add_elem(c, kv, DM_KOP_VECTOR_BWD, f->m, f->n, f->count, f->param, f->slot) ? 0 : -1;
    case DM_KOP_EMBED: {
        /* an untied table's gradient is zeroed (rows x width: k its rows), then the tokens' rows
         * are added; a tied one (a stack's output head through it, whose weight gradient runs
         * first and writes it) only gets the tokens' rows added (k 0), as the executor runs it
         * (kernels/wk_plan.c mark_accumulate) */
        dm_kernel *x = add_elem(c, kv, DM_KOP_EMBED_BWD, f->m, f->n, f->count, f->param, f->slot);
        if (!x) return -1;
        if (!c->embed_tied) {
            double zero = (double)f->k * (double)f->n * (double)f->count;
            x->k = f->k;
            x->elems += zero;
            x->bytes += zero * c->elt;
        }
        return 0;
    }
    case DM_KOP_TABLE: return add_elem(c, kv, DM_KOP_TABLE_BWD, f->m, f->n, f->count, f->param, f->slot) ? 0 : -1;
    case DM_KOP_ROUTE: return add_elem(c, kv, DM_KOP_ROUTE_BWD, f->m, f->n, 1, -1, f->slot) ? 0 : -1;
    case DM_KOP_ACT:
    case DM_KOP_GLU:
    case DM_KOP_ROPE:
    case DM_KOP_RESID: {
        /* the op after it in dm_kern_op is its backward */
        dm_kernel *x = add_elem(c, kv, (dm_kern_op)(f->op + 1), f->m, f->n, f->count, f->param, f->slot);
        if (!x) return -1;
        x->k = f->k;
        return 0;
    }
    default: return 0; /* loss: the residual forward made is the backward's input; value: with score */
    }
}

/* Forward kernels of tensor i in this layer (first matrix id `first`, `per` of them). */
static int tensor_fwd(wctx *c, kvec *kv, int i, int64_t first, int64_t per, int *routed_done)
{
    const dm_model *m = c->m;
    const dm_tensor *t = &m->tensors[i];
    const dm_stack *st = &m->stacks[t->stack];
    int64_t T = dm_workload_stream_tokens(m, c->o, t->stream);
    int sl;
    dm_kernel *x;
    switch (t->use) {
    case DM_USE_LINEAR:
        if ((sl = slot_of(c, t->stream, T, t->cols, 0)) < 0) return -1;
        if (!add_gemm(c, kv, DM_KERN_GEMM, DM_KOP_FWD, T, t->rows, t->cols, 1, per, first, sl)) return -1;
        return add_elem(c, kv, DM_KOP_LOSS, T, t->rows, per, first, -1) ? 0 : -1;
    case DM_USE_EXPERT: {
        int64_t E = st->moe_experts, K = st->moe_top_k, routed = T * K, te = (routed + E - 1) / E;
        if (t->ndim == 1) {
            /* an expert's bias: elementwise over its te routed rows, one launch for the layer's `per` */
            if ((sl = slot_of(c, t->stream, routed, t->rows, 1)) < 0) return -1;
            return add_elem(c, kv, DM_KOP_VECTOR, te, t->rows, per, first, sl) ? 0 : -1;
        }
        if (!*routed_done) {
            /* dispatch and combine of the routed rows, once per layer, at the width of its first expert's input */
            if ((sl = slot_of(c, t->stream, T, t->cols, 0)) < 0) return -1;
            if (!add_elem(c, kv, DM_KOP_ROUTE, routed, t->cols, 1, -1, sl)) return -1;
            *routed_done = 1;
        }
        if ((sl = slot_of(c, t->stream, routed, t->cols, 1)) < 0) return -1;
        if (!add_gemm(c, kv, DM_KERN_BGEMM, DM_KOP_FWD, te, t->rows, t->cols, per, 1, first, sl)) return -1;
        return add_elem(c, kv, DM_KOP_LOSS, te * per, t->rows, 1, first, -1) ? 0 : -1;
    }
    case DM_USE_EMBEDDING:
        if (!(x = add_elem(c, kv, DM_KOP_EMBED, T, t->cols, per, first, -1))) return -1;
        x->k = t->rows; /* the table's rows, for the backward's zeroing */
        return add_elem(c, kv, DM_KOP_LOSS, T, t->cols, per, first, -1) ? 0 : -1;
    case DM_USE_VECTOR:
        if ((sl = slot_of(c, t->stream, T, t->rows, 0)) < 0) return -1;
        return add_elem(c, kv, DM_KOP_VECTOR, T, t->rows, per, first, sl) ? 0 : -1;
    case DM_USE_TABLE:
        if ((sl = slot_of(c, t->stream, T, t->cols, 0)) < 0) return -1;
        return add_elem(c, kv, DM_KOP_TABLE, T, t->cols, per, first, sl) ? 0 : -1;
    default: return dm_err_set(c->err, "workload: tensor %s has an unknown use", t->name);
    }
}

/* The value product of the attention block whose score is k[score] (after its softmax), or NULL. */
static const dm_kernel *attn_value_of(const dm_kernel *k, int n, int score)
{
    for (int j = score + 1; j < n && j <= score + 2; j++)
        if (k[j].op == DM_KOP_ATTN_VALUE) return &k[j];
    return NULL;
}

/* A 1-D tensor that is a norm's scale or shift (not a bias), by its name: "norm" in it
 * (RMSNorm, LayerNorm, layernorm), or "ln_" / ".ln" (GPT-2's and CLIP's). */
static int is_norm(const char *name)
{
    char low[256];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++) low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    low[i] = 0;
    return strstr(low, "norm") || strstr(low, "ln_") || strstr(low, ".ln");
}

/* The layer's width on stream s: the input width of its first product over that stream (0: none). */
static int64_t stream_width(const wctx *c, const kvec *fw, int s)
{
    for (int i = 0; i < fw->n; i++) {
        const dm_kernel *k = &fw->v[i];
        if (k->op == DM_KOP_FWD && k->slot >= 0 && c->w->slots[k->slot].stream == s && !c->w->slots[k->slot].routed)
            return k->k;
    }
    for (int i = 0; i < fw->n; i++) { /* routed only: the experts' input */
        const dm_kernel *k = &fw->v[i];
        if (k->op == DM_KOP_FWD && k->slot >= 0 && c->w->slots[k->slot].stream == s) return k->k;
    }
    return 0;
}

static int in_list(int64_t v, const int64_t *l, int n)
{
    for (int i = 0; i < n; i++)
        if (l[i] == v) return 1;
    return 0;
}

/* An MLP's input projection among the layer's products: a forward product f whose output another
 * product of the same kind after it on the same stream takes as its input (k == n: the MLP's
 * hidden; k == n / 2: gate and up fused in one projection, `*fused`), unless n is the stream's
 * width (a projection back to the residual stream: attention's output), an attention block's
 * query, key, value, fused q/k/v or fused k/v width, or the width of a norm of the layer (a norm
 * between the two, as DeepSeek's low-rank q and kv projections have); the taker's input must not
 * be an attention width either (attention's output projection). */
static int mlp_input(const wctx *c, const kvec *fw, int i, const int64_t *skip, int n_skip, int n_attn_w, int *fused)
{
    const dm_kernel *f = &fw->v[i];
    if (f->op != DM_KOP_FWD || f->slot < 0 || in_list(f->n, skip, n_skip)) return 0;
    int s = c->w->slots[f->slot].stream;
    if (f->n == stream_width(c, fw, s)) return 0;
    for (int j = i + 1; j < fw->n; j++) {
        const dm_kernel *g = &fw->v[j];
        if (g->op != DM_KOP_FWD || g->kind != f->kind || g->slot < 0 || c->w->slots[g->slot].stream != s ||
            in_list(g->k, skip, n_attn_w))
            continue;
        if (g->k == f->n) return *fused = 0, 1;
        if (2 * g->k == f->n) return *fused = 1, 1;
    }
    return 0;
}

/* Rows of a product's output over all its matrices (count projections, or batch experts). */
static int64_t out_rows(const dm_kernel *f) { return f->m * (f->kind == DM_KERN_BGEMM ? f->batch : f->count); }

/* The passes between the layer's projections (workload.h): after each MLP's input projections
 * (and their losses and biases) its activation, glu for a gated pair (two consecutive input
 * projections of one input and width) or a fused gate/up, act for a single one; at the end of a layer with
 * attention, a residual add per attention block and per stream whose MLP ran, at the stream's
 * width over its tokens. The rotary embeddings come with the attention blocks (add_attention). */
static int add_passes(wctx *c, kvec *fw, const dm_stack *st, const int64_t *vec_rows, int n_vec)
{
    int64_t skip[64]; /* the attention widths (the first n_aw), then the norms' */
    int n_skip = 0, n_aw;
    for (int k = 0; k < st->n_attn && n_skip + 8 <= 32; k++) {
        const dm_attention *a = &st->attn[k];
        /* k and v of every head in one projection (MLA's kv up-projection: the non-rotated part of k) */
        skip[n_skip++] = (int64_t)a->heads * (a->head_dim + a->v_head_dim);
        skip[n_skip++] = (int64_t)a->heads * (a->head_dim - a->rope + a->v_head_dim);
        skip[n_skip++] = (int64_t)a->kv_heads * (a->head_dim + a->v_head_dim);
        skip[n_skip++] = (int64_t)a->heads * a->head_dim;
        skip[n_skip++] = (int64_t)a->kv_heads * a->head_dim;
        skip[n_skip++] = (int64_t)a->kv_heads * a->v_head_dim;
        skip[n_skip++] = (int64_t)a->heads * a->v_head_dim;
        skip[n_skip++] = (int64_t)(a->heads + 2 * a->kv_heads) * a->head_dim;
    }
    n_aw = n_skip;
    for (int i = 0; i < n_vec && n_skip < 64; i++) skip[n_skip++] = vec_rows[i];
    kvec out = {0};
    int64_t mlp_streams[8];
    int n_mlp = 0, rc = -1;
    for (int i = 0; i < fw->n; i++) {
        dm_kernel *x = kpush(&out, c->err);
        if (!x) goto done;
        *x = fw->v[i];
        int fused = 0;
        if (!mlp_input(c, fw, i, skip, n_skip, n_aw, &fused)) continue;
        const dm_kernel *f = &fw->v[i];
        int pair = 0;
        /* the next product: its pair when it reads the same input at the same width */
        int j = i + 1;
        while (j < fw->n && (fw->v[j].op == DM_KOP_LOSS || fw->v[j].op == DM_KOP_VECTOR)) j++;
        int fj = 0;
        if (!fused && j < fw->n && fw->v[j].op == DM_KOP_FWD && fw->v[j].slot == f->slot && fw->v[j].n == f->n &&
            fw->v[j].kind == f->kind && fw->v[j].count == f->count && fw->v[j].batch == f->batch &&
            mlp_input(c, fw, j, skip, n_skip, n_aw, &fj) && !fj)
            pair = 1;
        /* copy through the pair and the losses and biases after the last projection */
        int last = pair ? j : i;
        int e = last + 1;
        while (e < fw->n && (fw->v[e].op == DM_KOP_LOSS || fw->v[e].op == DM_KOP_VECTOR)) e++;
        for (int q = i + 1; q < e; q++) {
            if (!(x = kpush(&out, c->err))) goto done;
            *x = fw->v[q];
        }
        int64_t rows = out_rows(f), w = fused ? f->n / 2 : f->n;
        if (!add_elem(c, &out, pair || fused ? DM_KOP_GLU : DM_KOP_ACT, rows, w, 1, f->param, -1)) goto done;
        int s = c->w->slots[f->slot].stream;
        if (!in_list(s, mlp_streams, n_mlp) && n_mlp < 8) mlp_streams[n_mlp++] = s;
        i = e - 1;
    }
    if (st->n_attn) {
        /* residual adds: one after each attention block, one after each stream's MLP */
        int streams[16], n_s = 0;
        for (int k = 0; k < st->n_attn && n_s < 8; k++) streams[n_s++] = st->attn[k].stream;
        for (int k = 0; k < n_mlp; k++) streams[n_s++] = (int)mlp_streams[k];
        for (int k = 0; k < n_s; k++) {
            int64_t H = stream_width(c, fw, streams[k]), T = dm_workload_stream_tokens(c->m, c->o, streams[k]);
            int sl = -1;
            for (int q = 0; q < c->w->n_slots && sl < 0; q++)
                if (c->w->slots[q].stream == streams[k] && !c->w->slots[q].routed && c->w->slots[q].cols == H &&
                    c->w->slots[q].rows == T)
                    sl = q;
            if (H > 0 && sl >= 0 && !add_elem(c, &out, DM_KOP_RESID, T, H, 1, -1, sl)) goto done;
        }
    }
    free(fw->v);
    *fw = out;
    out.v = NULL;
    rc = 0;
done:
    free(out.v);
    return rc;
}

int dm_layer_work_build(const dm_model *m, const dm_matrix *mats, int64_t n, int layer, const dm_workload_opts *o,
                        dm_layer_work *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    out->layer = layer;
    if (layer < 0 || layer >= m->n_layers) return dm_err_set(err, "workload: layer %d out of range", layer);
    int si = 0;
    while (si + 1 < m->n_stacks && m->stacks[si + 1].first_global <= layer) si++;
    const dm_stack *st = &m->stacks[si];
    wctx c = {m, o, out, err, o->dtype_bytes > 0 ? o->dtype_bytes : 2, 0, 0};
    kvec fw = {0}, bw = {0};
    int64_t *first = dm_malloc((size_t)m->n_tensors * sizeof *first, err);
    int *present = dm_calloc((size_t)m->n_tensors, sizeof *present, err);
    int rc = -1;
    if (!first || !present) goto done;
    /* the layer's matrices are contiguous in mats (sorted by layer, entry, index) */
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (mats[mid].layer < layer) lo = mid + 1;
        else hi = mid;
    }
    for (int64_t j = lo; j < n && mats[j].layer == layer; j++)
        if (!present[mats[j].tensor]) {
            present[mats[j].tensor] = 1;
            first[mats[j].tensor] = mats[j].id;
        }
    int *apos = NULL;
    if (st->n_attn && !(apos = dm_malloc((size_t)st->n_attn * sizeof *apos, err))) goto done;
    for (int k = 0; k < st->n_attn; k++)
        apos[k] = attention_position(m, si, &st->attn[k], present, k ? (apos[k - 1] < m->n_tensors ? apos[k - 1] : 0) : 0);
    int routed_done = 0;
    for (int i = 0; i <= m->n_tensors; i++) {
        for (int k = 0; k < st->n_attn; k++)
            if (apos[k] == i && add_attention(&c, &fw, &st->attn[k], layer - st->first_global)) {
                free(apos);
                goto done;
            }
        if (i == m->n_tensors) break;
        if (!present[i]) continue;
        const dm_tensor *t = &m->tensors[i];
        if (tensor_fwd(&c, &fw, i, first[i], t->count / t->layer_span, &routed_done)) {
            free(apos);
            goto done;
        }
    }
    free(apos);
    if (st->tied_head >= 0) {
        /* the output projection through an embedding table of another layer */
        const dm_tensor *e = &m->tensors[st->tied_head];
        int64_t id = -1;
        for (int64_t j = 0; j < n && id < 0; j++)
            if (mats[j].tensor == st->tied_head) id = mats[j].id;
        int64_t T = dm_workload_stream_tokens(m, o, st->stream);
        int sl = slot_of(&c, st->stream, T, e->cols, 0);
        if (id < 0 || sl < 0 || !add_gemm(&c, &fw, DM_KERN_GEMM, DM_KOP_FWD, T, e->rows, e->cols, 1, 1, id, sl) ||
            !add_elem(&c, &fw, DM_KOP_LOSS, T, e->rows, 1, id, -1)) {
            if (id < 0) dm_err_set(err, "workload: tied head %s has no matrix", e->name);
            goto done;
        }
    }
    {
        int64_t vec_rows[32];
        int n_vec = 0;
        for (int i = 0; i < m->n_tensors; i++)
            if (present[i] && m->tensors[i].ndim == 1 && is_norm(m->tensors[i].name) && n_vec < 32)
                vec_rows[n_vec++] = m->tensors[i].rows;
        if (!o->no_passes && add_passes(&c, &fw, st, vec_rows, n_vec)) goto done;
    }
    /* backward: the forward list in reverse; an attention block (score, value) as one unit */
    for (int i = fw.n - 1; i >= 0; i--) {
        const dm_kernel *f = &fw.v[i];
        if (f->op == DM_KOP_ATTN_VALUE || f->op == DM_KOP_SOFTMAX) continue;
        const dm_kernel *next = f->op == DM_KOP_ATTN_SCORE ? attn_value_of(fw.v, fw.n, i) : NULL;
        c.embed_tied = 0;
        for (int ti = 0; f->op == DM_KOP_EMBED && ti < m->n_tensors; ti++)
            if (present[ti] && first[ti] == f->param) c.embed_tied = is_tied_head(m, ti);
        if (backward_of(&c, &bw, f, next)) goto done;
    }
    out->fwd = fw.v, out->n_fwd = fw.n;
    out->bwd = bw.v, out->n_bwd = bw.n;
    fw.v = bw.v = NULL;
    for (int i = 0; i < out->n_fwd; i++) out->fwd_flops += out->fwd[i].flops, out->fwd_bytes += out->fwd[i].bytes;
    for (int i = 0; i < out->n_bwd; i++) out->bwd_flops += out->bwd[i].flops, out->bwd_bytes += out->bwd[i].bytes;
    /* kept for backward: every input slot, and every projection's (or vector's) residual */
    for (int i = 0; i < out->n_slots; i++) out->kept_bytes += (double)out->slots[i].rows * out->slots[i].cols * c.elt;
    for (int i = 0; i < out->n_fwd; i++)
        if (out->fwd[i].op == DM_KOP_LOSS || out->fwd[i].op == DM_KOP_VECTOR || out->fwd[i].op == DM_KOP_TABLE)
            out->kept_bytes += (double)out->fwd[i].m * out->fwd[i].n * out->fwd[i].count * c.elt;
    rc = 0;
done:
    free(fw.v);
    free(bw.v);
    free(first);
    free(present);
    if (rc) dm_layer_work_free(out);
    return rc;
}

int dm_grad_check_kernel(const dm_kernel *x, dm_kernel *chk)
{
    int64_t c = x->count > 0 ? x->count : 1, m;
    if (x->kind != DM_KERN_ELEM && x->op == DM_KOP_WGRAD) {
        m = x->m;
        if (x->kind == DM_KERN_BGEMM) c = x->batch > 0 ? x->batch : 1; /* experts: one matrix each */
    } else if (x->op == DM_KOP_VECTOR_BWD || x->op == DM_KOP_TABLE_BWD) {
        m = 1;
    } else if (x->op == DM_KOP_EMBED_BWD) { /* its elems: the tokens' rows plus the zeroed table */
        double table = x->elems - (double)c * (double)x->m * (double)x->n;
        m = table > 0 && x->n > 0 ? (int64_t)(table / ((double)c * (double)x->n) + 0.5) : 1;
        if (m < 1) m = 1;
    } else {
        return 0;
    }
    memset(chk, 0, sizeof *chk);
    chk->kind = DM_KERN_ELEM;
    chk->op = DM_KOP_GRAD_CHECK;
    chk->m = m, chk->n = x->n, chk->k = 0, chk->batch = 1, chk->count = c;
    chk->param = -1, chk->slot = -1;
    chk->elems = (double)c * (double)m * (double)x->n;
    chk->bytes = 2.0 * chk->elems;
    return 1;
}

int dm_step_work_sum(const dm_model *m, const dm_workload_opts *o, dm_step_work *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    if (dm_workload_check(m, o, err)) return -1;
    dm_matrix *mats = NULL;
    int64_t n = 0;
    if (dm_model_matrices(m, -1, &mats, &n, err)) return -1;
    for (int l = 0; l < m->n_layers; l++) {
        dm_layer_work w;
        if (dm_layer_work_build(m, mats, n, l, o, &w, err)) {
            free(mats);
            return -1;
        }
        out->fwd_flops += w.fwd_flops;
        out->bwd_flops += w.bwd_flops;
        out->kept_bytes += w.kept_bytes;
        for (int i = 0; i < w.n_fwd; i++)
            if (w.fwd[i].op >= DM_KOP_ATTN_SCORE && w.fwd[i].op <= DM_KOP_ATTN_DKEY) out->attn_flops += w.fwd[i].flops;
        for (int i = 0; i < w.n_bwd; i++)
            if (w.bwd[i].op >= DM_KOP_ATTN_SCORE && w.bwd[i].op <= DM_KOP_ATTN_DKEY) out->attn_flops += w.bwd[i].flops;
        dm_layer_work_free(&w);
    }
    free(mats);
    double active = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const dm_tensor *t = &m->tensors[i];
        double p = (double)t->rows * (double)t->cols * (double)t->count;
        const dm_stack *st = &m->stacks[t->stack];
        if (t->use == DM_USE_EXPERT && st->moe_experts) p *= (double)st->moe_top_k / st->moe_experts;
        active += p;
    }
    out->active_params = active;
    return 0;
}
