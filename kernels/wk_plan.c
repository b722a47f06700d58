/* wk_plan.c: per-layer plans of a step (wk_plan.h): the model's kernels at a run's tokens,
 * bound to activations, residuals, attention geometries and index maps. */
#include "config.h"

#include "wk_plan.h"

#include <stdlib.h>
#include <string.h>

int64_t wk_plan_slot_key(int layer, int slot) { return ((int64_t)1 << 40) + (int64_t)layer * 4096 + slot; }

static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

void wk_map_free(wk_map *p)
{
    if (!p) return;
    free(p->a), free(p->inv), free(p->uniq), free(p->off), free(p->tok);
    memset(p, 0, sizeof *p);
}

static int copy_ints(int32_t **dst, const int32_t *src, int64_t n, dm_err *err)
{
    *dst = NULL;
    if (!src || n <= 0) return 0;
    if (!(*dst = dm_malloc((size_t)n * sizeof **dst, err))) return -1;
    memcpy(*dst, src, (size_t)n * sizeof **dst);
    return 0;
}

int wk_map_copy(wk_map *dst, const wk_map *src, dm_err *err)
{
    *dst = *src;
    dst->a = dst->inv = dst->uniq = dst->off = dst->tok = NULL;
    if (copy_ints(&dst->a, src->a, src->n, err) || copy_ints(&dst->inv, src->inv, src->n_inv, err) ||
        copy_ints(&dst->uniq, src->uniq, src->n_uniq, err) || copy_ints(&dst->off, src->off, src->n_uniq + 1, err) ||
        copy_ints(&dst->tok, src->tok, src->n, err)) {
        wk_map_free(dst);
        return -1;
    }
    return 0;
}

void wk_plan_free(wk_plan *w)
{
    if (!w) return;
    for (int l = 0; l < w->n_layers && w->L; l++) {
        free(w->L[l].fwd);
        free(w->L[l].bwd);
        free(w->L[l].slots);
    }
    free(w->L);
    free(w->attn);
    for (int i = 0; i < w->n_maps; i++) wk_map_free(&w->maps[i]);
    free(w->maps);
    memset(w, 0, sizeof *w);
}

/* What the plans of one run share. */
typedef struct wctx {
    const dm_model *m;
    const dm_matrix *mx;
    int64_t n;
    const wk_plan_opts *o;
    dm_workload_opts wo;
    wk_plan *w;
    dm_err *err;
    int64_t g0, sample0, seq;
    int cap_attn, cap_maps;
} wctx;

static int64_t stream_tokens(const wctx *c, int s) { return dm_workload_stream_tokens(c->m, &c->wo, s); }
static int64_t per_sample(const wctx *c, int s) { return s == 0 ? c->seq : c->m->streams[s].tokens; }
/* The global row of this rank's first row of stream s. */
static int64_t stream_row0(const wctx *c, int s) { return s == 0 ? c->g0 : c->sample0 * c->m->streams[s].tokens; }
static double stream_global(const wctx *c, int s) { return (double)stream_tokens(c, s) * (double)c->o->nranks; }
static int param_stream(const wctx *c, int64_t p) { return c->m->tensors[c->mx[p].tensor].stream; }

static wk_map *new_map(wctx *c)
{
    wk_plan *w = c->w;
    if (w->n_maps == c->cap_maps) {
        int cap = c->cap_maps ? 2 * c->cap_maps : 8;
        wk_map *v = dm_realloc(w->maps, (size_t)cap * sizeof *v, c->err);
        if (!v) return NULL;
        w->maps = v;
        c->cap_maps = cap;
    }
    wk_map *p = &w->maps[w->n_maps++];
    memset(p, 0, sizeof *p);
    return p;
}

typedef struct idpair {
    int32_t id, t;
} idpair;
static int cmp_idpair(const void *a, const void *b)
{
    const idpair *x = a, *y = b;
    return x->id != y->id ? (x->id > y->id) - (x->id < y->id) : (x->t > y->t) - (x->t < y->t);
}

/* The token ids of an embedding's lookups and the tokens of each id, in order. */
static int embed_map(wctx *c, int64_t param, int64_t rows, int64_t row0, int64_t table_rows)
{
    wk_map *p = new_map(c);
    if (!p) return -1;
    p->embed = 1;
    p->n = rows;
    idpair *pr = NULL;
    if (!(p->a = dm_malloc((size_t)(rows ? rows : 1) * sizeof *p->a, c->err)) ||
        !(p->tok = dm_malloc((size_t)(rows ? rows : 1) * sizeof *p->tok, c->err)) ||
        !(p->uniq = dm_malloc((size_t)(rows ? rows : 1) * sizeof *p->uniq, c->err)) ||
        !(p->off = dm_malloc((size_t)(rows + 1) * sizeof *p->off, c->err)) ||
        !(pr = dm_malloc((size_t)(rows ? rows : 1) * sizeof *pr, c->err))) {
        free(pr);
        return -1;
    }
    for (int64_t t = 0; t < rows; t++) {
        p->a[t] = wk_token_id(c->o->seed, param, row0 + t, table_rows);
        pr[t] = (idpair){p->a[t], (int32_t)t};
    }
    if (rows > 1) qsort(pr, (size_t)rows, sizeof *pr, cmp_idpair);
    int64_t u = 0;
    for (int64_t t = 0; t < rows; t++) {
        if (t == 0 || pr[t].id != pr[t - 1].id) p->uniq[u] = pr[t].id, p->off[u++] = (int32_t)t;
        p->tok[t] = pr[t].t;
    }
    p->off[u] = (int32_t)rows;
    p->n_uniq = u;
    free(pr);
    c->w->map_ints += 4 * rows + 1; /* as the GPU holds them: ids, tokens, and ids and offsets at their bound */
    return c->w->n_maps - 1;
}

/* The dispatch of a layer's routed rows: src (per expert te rows) and each token's top_k rows. */
static int route_map(wctx *c, int64_t T, int64_t row0, int64_t E, int64_t K, int64_t per, int64_t te)
{
    wk_map *p = new_map(c);
    if (!p) return -1;
    int64_t p0 = row0 * K / E, rows = per * te;
    p->n = rows;
    p->n_inv = T * K;
    if (!(p->a = dm_malloc((size_t)(rows ? rows : 1) * sizeof *p->a, c->err)) ||
        !(p->inv = dm_malloc((size_t)(T * K > 0 ? T * K : 1) * sizeof *p->inv, c->err)))
        return -1;
    for (int64_t e = 0; e < per; e++)
        for (int64_t j = 0; j < te; j++) {
            int64_t rho = (p0 + j) * E + e, t = rho / K - row0;
            p->a[e * te + j] = t >= 0 && t < T ? (int32_t)t : -1;
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            int64_t rho = (row0 + t) * K + k, e = rho % E, j = rho / E - p0;
            p->inv[t * K + k] = e < per && j >= 0 && j < te ? (int32_t)(e * te + j) : -1;
        }
    c->w->map_ints += rows + T * K;
    return c->w->n_maps - 1;
}

/* One product group's geometry (workload.h's add_attention) added to the plan, its buffers
 * grown to hold it; -2 when out of memory. */
static int attn_geom(wctx *c, const dm_attn_geom *from)
{
    wk_plan *w = c->w;
    if (w->n_attn == c->cap_attn) {
        int cap = c->cap_attn ? 2 * c->cap_attn : 8;
        wk_attn_geom *v = dm_realloc(w->attn, (size_t)cap * sizeof *v, c->err);
        if (!v) return -2;
        w->attn = v;
        c->cap_attn = cap;
    }
    wk_attn_geom *g = &w->attn[w->n_attn];
    *g = *from;
    int64_t sz[WK_A__N];
    wk_attn_sizes(g, sz);
    for (int i = 0; i < WK_A__N; i++)
        if (sz[i] > w->attn_size[i]) w->attn_size[i] = sz[i];
    return w->n_attn++;
}

static void note_dx(wk_plan *w, int64_t e)
{
    if (e > w->max_dx) w->max_dx = e;
}

static int find_fwd(const wk_layer *lp, dm_kern_op op, dm_kern_kind kind, int64_t param)
{
    for (int i = 0; i < lp->n_fwd; i++)
        if (lp->fwd[i].k.op == op && lp->fwd[i].k.kind == kind && lp->fwd[i].k.param == param) return i;
    return -1;
}

/* A kernel bound to nothing yet: its own count and rows. */
static void kb_init(wk_kb *b, const dm_kernel *k)
{
    memset(b, 0, sizeof *b);
    b->k = *k;
    b->x = b->r = b->dst = b->r2 = -1;
    b->src = b->attn = b->map = -1;
    b->count = k->count;
    b->rows = k->m;
}

static int bad(wctx *c, int layer, const dm_kernel *k, const char *why)
{
    return dm_err_set(c->err, "workload of layer %d: %s %s kernel (param %lld): %s", layer, dm_kern_kind_name(k->kind),
                      dm_kern_op_name(k->op), (long long)k->param, why);
}

static int plan_layer(wctx *c, const dm_layer_work *lw, wk_layer *lp)
{
    const dm_model *m = c->m;
    wk_plan *w = c->w;
    int l = lw->layer, si = 0;
    while (si + 1 < m->n_stacks && m->stacks[si + 1].first_global <= l) si++;
    const dm_stack *st = &m->stacks[si];
    lp->layer = l;
    lp->kept_bytes = lw->kept_bytes;
    lp->n_slots = lw->n_slots;
    lp->n_fwd = lw->n_fwd;
    lp->n_bwd = lw->n_bwd;
    if (!(lp->slots = dm_calloc((size_t)(lw->n_slots ? lw->n_slots : 1), sizeof *lp->slots, c->err)) ||
        !(lp->fwd = dm_calloc((size_t)(lw->n_fwd ? lw->n_fwd : 1), sizeof *lp->fwd, c->err)) ||
        !(lp->bwd = dm_calloc((size_t)(lw->n_bwd ? lw->n_bwd : 1), sizeof *lp->bwd, c->err)))
        return -1;
    /* slots: routed ones hold every expert's rows (ceil padding included) */
    for (int s = 0; s < lw->n_slots; s++) {
        const dm_act_slot *a = &lw->slots[s];
        wk_slot *q = &lp->slots[s];
        q->stream = a->stream;
        q->routed = a->routed;
        q->rows = a->rows;
        q->cols = a->cols;
        q->key = wk_plan_slot_key(l, s);
        q->row0 = stream_row0(c, a->stream);
        if (a->routed) {
            for (int i = 0; i < lw->n_fwd; i++) {
                const dm_kernel *k = &lw->fwd[i];
                if (k->kind == DM_KERN_BGEMM && k->op == DM_KOP_FWD && k->slot == s) {
                    if (k->batch * k->m > q->rows) q->rows = k->batch * k->m;
                    q->per = k->m;
                    q->nexp = k->batch;
                }
                if (k->op == DM_KOP_ROUTE && k->n == a->cols && lw->slots[k->slot].stream == a->stream) q->gathered = 1;
            }
            q->experts = st->moe_experts > 0 ? st->moe_experts : 1;
            q->row0 = stream_row0(c, a->stream) * (st->moe_top_k > 0 ? st->moe_top_k : 1) / q->experts;
        }
        q->off = lp->n_act;
        lp->n_act += round8(q->rows * q->cols);
    }
    /* forward */
    /* cur_block's product cur_prod of cur_prods (a causal block has several: workload.h) */
    int *geoms = NULL, n_geoms = 0, next_block = 0, cur_geom = -1, cur_block = -1, cur_prod = 0, cur_prods = 0;
    int n_prods = 1; /* every product group of every block, one geometry each */
    int sl_layer = l - st->first_global; /* the layer within its stack (sliding-window layers) */
    dm_attn_geom blk[DM_ATTN_MAX_PRODS]; /* cur_block's product groups (core/workload.h) */
    for (int k = 0; k < st->n_attn; k++) n_prods += dm_attn_block_geoms(c->m, &c->wo, &st->attn[k], sl_layer, blk);
    if (!(geoms = dm_malloc((size_t)n_prods * sizeof *geoms, c->err))) return -1;
    int last_res = -1, rc = -1;
    for (int i = 0; i < lw->n_fwd; i++) {
        wk_kb *b = &lp->fwd[i];
        const dm_kernel *k = &lw->fwd[i];
        kb_init(b, k);
        if (dm_pass_scratch(k) > w->max_ew) w->max_ew = dm_pass_scratch(k);
        const wk_slot *sl = k->slot >= 0 && k->slot < lp->n_slots ? &lp->slots[k->slot] : NULL;
        int s = sl ? sl->stream : k->param >= 0 ? param_stream(c, k->param) : st->stream;
        b->row0 = sl ? sl->row0 : stream_row0(c, s);
        double N = stream_global(c, s);
        if (k->kind != DM_KERN_ELEM && k->op == DM_KOP_FWD) {
            if (!sl) { bad(c, l, k, "a product without its input slot"); goto done; }
            b->x = sl->off;
            b->r = lp->n_res;
            lp->n_res += round8(k->m * k->n * k->count * k->batch);
            last_res = i;
        } else if (k->op == DM_KOP_ATTN_SCORE) {
            if (cur_block >= 0 && cur_prod + 1 < cur_prods) {
                cur_geom = attn_geom(c, &blk[++cur_prod]);
            } else {
                cur_geom = -1;
                while (next_block < st->n_attn && cur_geom == -1) {
                    cur_block = next_block++, cur_prod = 0;
                    cur_prods = dm_attn_block_geoms(c->m, &c->wo, &st->attn[cur_block], sl_layer, blk);
                    if (cur_prods > 0) cur_geom = attn_geom(c, &blk[0]);
                }
            }
            if (cur_geom < 0) {
                if (cur_geom == -2) goto done;
                bad(c, l, k, "more attention products than attention blocks");
                goto done;
            }
            const wk_attn_geom *g = &w->attn[cur_geom];
            if (g->lq != k->m || g->lk != k->n || g->hd != k->k || wk_attn_entries(g) != k->batch) {
                bad(c, l, k, "the attention block's geometry does not give its shape");
                goto done;
            }
            geoms[n_geoms++] = cur_geom;
            b->attn = cur_geom;
        } else if (k->op == DM_KOP_ATTN_VALUE || k->op == DM_KOP_SOFTMAX) {
            if (cur_geom < 0) { bad(c, l, k, "an attention kernel before its score product"); goto done; }
            const wk_attn_geom *g = &w->attn[cur_geom];
            if (k->op == DM_KOP_SOFTMAX && (k->m != wk_attn_entries(g) * g->lq || k->n != g->lk)) {
                bad(c, l, k, "the softmax does not cover its block's scores");
                goto done;
            }
            b->attn = cur_geom;
            if (k->op == DM_KOP_SOFTMAX) b->scale = wk_softmax_scale(g->hd);
        } else if (k->op == DM_KOP_LOSS) {
            if (last_res < 0 || lp->fwd[last_res].k.param != k->param) {
                bad(c, l, k, "a loss without the projection before it");
                goto done;
            }
            const wk_kb *f = &lp->fwd[last_res];
            b->src = last_res;
            b->r = f->r;
            if (f->k.kind == DM_KERN_BGEMM) { /* experts: one matrix each, te rows at positions p0 + j */
                b->count = f->k.batch;
                b->rows = f->k.m;
                b->row0 = lp->slots[f->k.slot].row0;
                s = lp->slots[f->k.slot].stream;
            } else {
                b->row0 = f->row0;
                s = f->k.slot >= 0 ? lp->slots[f->k.slot].stream : param_stream(c, k->param);
            }
            b->scale = 1.0 / (2.0 * stream_global(c, s) * (double)k->n);
        } else if (k->op == DM_KOP_VECTOR || k->op == DM_KOP_TABLE) {
            if (!sl) { bad(c, l, k, "no input slot"); goto done; }
            b->x = sl->off;
            b->r = lp->n_res;
            lp->n_res += round8(k->m * k->n * k->count);
            b->period = k->op == DM_KOP_TABLE ? per_sample(c, s) : 1;
            b->positions = k->op == DM_KOP_TABLE ? c->mx[k->param].rows : 1;
            b->scale = 1.0 / (2.0 * N * (double)k->n);
        } else if (k->op == DM_KOP_EMBED) {
            if (k->count != 1) { bad(c, l, k, "embeddings are looked up one table per kernel"); goto done; }
            b->r = lp->n_res;
            lp->n_res += round8(k->m * k->n);
            if ((b->map = embed_map(c, k->param, k->m, b->row0, c->mx[k->param].rows)) < 0) goto done;
            last_res = i;
        } else if (k->op == DM_KOP_ROUTE) {
            if (!sl) { bad(c, l, k, "a dispatch without its tokens"); goto done; }
            b->x = sl->off;
            for (int q = 0; q < lp->n_slots; q++)
                if (lp->slots[q].routed && lp->slots[q].gathered && lp->slots[q].cols == k->n &&
                    lp->slots[q].stream == sl->stream)
                    b->dst = q;
            if (b->dst < 0) { bad(c, l, k, "no routed rows of its width"); goto done; }
            const wk_slot *d = &lp->slots[b->dst];
            b->rows = d->nexp * d->per;
            int64_t E = d->experts, K = st->moe_top_k > 0 ? st->moe_top_k : 1;
            if ((b->map = route_map(c, sl->rows, sl->row0, E, K, d->nexp, d->per)) < 0) goto done;
            b->dst = d->off;
        } else if (k->op == DM_KOP_ACT || k->op == DM_KOP_GLU) {
            /* its input projection (the gate), and for a pair the next product (the up) */
            int f = -1, u = -1;
            for (int j = 0; j < i && f < 0; j++)
                if (lp->fwd[j].k.op == DM_KOP_FWD && lp->fwd[j].k.param == k->param) f = j;
            if (f < 0) { bad(c, l, k, "an activation without its input projection"); goto done; }
            const dm_kernel *fk = &lp->fwd[f].k;
            int64_t frows = fk->m * (fk->kind == DM_KERN_BGEMM ? fk->batch : fk->count);
            int fused = k->op == DM_KOP_GLU && fk->n == 2 * k->n;
            for (int j = f + 1; j < i && u < 0 && k->op == DM_KOP_GLU && !fused; j++)
                if (lp->fwd[j].k.op == DM_KOP_FWD) u = j;
            const dm_kernel *uk = u >= 0 ? &lp->fwd[u].k : NULL;
            if (frows != k->m || (fk->n != k->n && !fused) || (k->op == DM_KOP_GLU && !fused && u < 0) ||
                (uk && (uk->n != k->n || uk->m * (uk->kind == DM_KERN_BGEMM ? uk->batch : uk->count) != k->m))) {
                bad(c, l, k, "the activation does not cover its projections' outputs");
                goto done;
            }
            b->r = lp->fwd[f].r;
            b->ld = fk->n;
            b->r2 = fused ? b->r + k->n : u >= 0 ? lp->fwd[u].r : -1;
        } else if (k->op == DM_KOP_RESID) {
            if (!sl || sl->cols != k->n || sl->rows != k->m) { bad(c, l, k, "a residual add without its input"); goto done; }
            b->x = sl->off;
        } else if (k->kind != DM_KERN_ELEM) {
            bad(c, l, k, "a product the executor does not know");
            goto done;
        }
    }
    /* backward */
    int n_bwd_scores = 0;
    for (int i = 0; i < lw->n_bwd; i++) {
        wk_kb *b = &lp->bwd[i];
        const dm_kernel *k = &lw->bwd[i];
        kb_init(b, k);
        if (dm_pass_scratch(k) > w->max_ew) w->max_ew = dm_pass_scratch(k);
        if (k->op == DM_KOP_ACT_BWD || k->op == DM_KOP_GLU_BWD || k->op == DM_KOP_ROPE_BWD || k->op == DM_KOP_RESID_BWD) {
            /* the layer passes: the buffers of their forward (the same op less one, and param) */
            int f = -1;
            for (int j = 0; j < lp->n_fwd && f < 0; j++)
                if (lp->fwd[j].k.op == k->op - 1 && lp->fwd[j].k.param == k->param && lp->fwd[j].k.m == k->m &&
                    lp->fwd[j].k.n == k->n && lp->fwd[j].k.slot == k->slot)
                    f = j;
            if (f < 0) { bad(c, l, k, "no forward kernel it is the backward of"); goto done; }
            b->x = lp->fwd[f].x, b->r = lp->fwd[f].r, b->r2 = lp->fwd[f].r2, b->ld = lp->fwd[f].ld;
            b->src = f;
            if (k->op == DM_KOP_ACT_BWD || k->op == DM_KOP_GLU_BWD) note_dx(w, k->m * k->n); /* dh: the consumer's dX */
            continue;
        }
        dm_kern_op fop = k->op == DM_KOP_DGRAD || k->op == DM_KOP_WGRAD ? DM_KOP_FWD
                         : k->op == DM_KOP_VECTOR_BWD                  ? DM_KOP_VECTOR
                         : k->op == DM_KOP_TABLE_BWD                   ? DM_KOP_TABLE
                         : k->op == DM_KOP_EMBED_BWD                   ? DM_KOP_EMBED
                         : k->op == DM_KOP_ROUTE_BWD                   ? DM_KOP_ROUTE
                                                                       : DM_KOP__COUNT;
        if ((k->op >= DM_KOP_ATTN_SCORE && k->op <= DM_KOP_ATTN_DKEY) || k->op == DM_KOP_SOFTMAX ||
            k->op == DM_KOP_SOFTMAX_BWD) {
            if (k->op == DM_KOP_ATTN_SCORE) {
                if (n_bwd_scores >= n_geoms) { bad(c, l, k, "more attention in backward than in forward"); goto done; }
                cur_geom = geoms[n_geoms - 1 - n_bwd_scores++];
            }
            if (cur_geom < 0) { bad(c, l, k, "an attention kernel before its score product"); goto done; }
            b->attn = cur_geom;
            if (k->op == DM_KOP_SOFTMAX) b->scale = wk_softmax_scale(w->attn[cur_geom].hd);
            continue;
        }
        if (fop == DM_KOP__COUNT) { bad(c, l, k, "a backward kernel the executor does not know"); goto done; }
        int f = find_fwd(lp, fop, fop == DM_KOP_ROUTE ? DM_KERN_ELEM : k->kind, fop == DM_KOP_ROUTE ? -1 : k->param);
        if (fop == DM_KOP_ROUTE)
            for (int j = 0; j < lp->n_fwd && f < 0; j++)
                if (lp->fwd[j].k.op == DM_KOP_ROUTE) f = j;
        if (f < 0) { bad(c, l, k, "no forward kernel it is the backward of"); goto done; }
        const wk_kb *fb = &lp->fwd[f];
        /* its forward's buffers and geometry; its own kernel and scales */
        *b = *fb;
        b->k = *k;
        b->src = f;
        b->scale = 0;
        int s = fb->k.slot >= 0 ? lp->slots[fb->k.slot].stream : param_stream(c, k->param);
        double N = stream_global(c, s);
        switch (k->op) {
        case DM_KOP_DGRAD: note_dx(w, k->m * k->n * k->batch); break;
        case DM_KOP_WGRAD: b->scale = 1.0 / (N * (double)k->m); break;
        case DM_KOP_VECTOR_BWD:
        case DM_KOP_TABLE_BWD: {
            b->scale = 1.0 / (N * (double)k->n);
            note_dx(w, fb->count * fb->rows * k->n);
            int64_t ws = wk_ws_floats(fb->count, fb->rows, k->n, fb->period, fb->positions);
            if (ws > w->max_ws) w->max_ws = ws;
            break;
        }
        case DM_KOP_EMBED_BWD:
            b->scale = 1.0 / (N * (double)k->n);
            b->table_rows = c->mx[k->param].rows;
            break;
        case DM_KOP_ROUTE_BWD:
            b->top_k = st->moe_top_k > 0 ? st->moe_top_k : 1;
            b->rows = lp->slots[fb->k.slot].rows; /* tokens */
            b->count = 1;
            if (b->rows * k->n > w->max_dx2) w->max_dx2 = b->rows * k->n;
            break;
        default: break;
        }
    }
    rc = 0;
done:
    free(geoms);
    return rc;
}

/* Gradients written by more than one layer (tied heads): the earlier layer in the list runs its
 * backward later and adds to what the later layer wrote. */
static int mark_accumulate(wctx *c)
{
    unsigned char *seen = dm_calloc((size_t)(c->n ? c->n : 1), 1, c->err);
    if (!seen) return -1;
    for (int l = c->w->n_layers - 1; l >= 0; l--) {
        wk_layer *lp = &c->w->L[l];
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < lp->n_bwd; i++) {
                wk_kb *b = &lp->bwd[i];
                dm_kern_op op = b->k.op;
                if (op != DM_KOP_WGRAD && op != DM_KOP_VECTOR_BWD && op != DM_KOP_TABLE_BWD && op != DM_KOP_EMBED_BWD)
                    continue;
                int64_t n = b->k.count * b->k.batch;
                for (int64_t q = b->k.param; q >= 0 && q < b->k.param + n && q < c->n; q++) {
                    if (pass == 0 && seen[q]) b->accumulate = 1;
                    if (pass == 1) seen[q] = 1;
                }
            }
    }
    free(seen);
    return 0;
}

int wk_plan_build(const dm_model *m, const dm_matrix *mx, int64_t n, const wk_plan_opts *o, wk_plan *out, dm_err *err)
{
    memset(out, 0, sizeof *out);
    wctx c = {m, mx, n, o, {o->tokens, o->seq_len, 2, o->causal_tile, o->no_passes}, out, err, 0, 0, 0, 0, 0};
    if (dm_workload_check(m, &c.wo, err)) return -1;
    c.seq = o->seq_len > 0 ? o->seq_len : o->tokens;
    c.g0 = o->token_offset + (int64_t)o->rank * o->tokens;
    c.sample0 = c.g0 / c.seq;
    if (!(out->L = dm_calloc((size_t)(m->n_layers ? m->n_layers : 1), sizeof *out->L, err))) return -1;
    out->n_layers = m->n_layers;
    out->tokens = o->tokens;
    out->seq_len = c.seq;
    for (int l = 0; l < m->n_layers; l++) {
        dm_layer_work lw;
        if (dm_layer_work_build(m, mx, n, l, &c.wo, &lw, err)) goto fail;
        int rc = plan_layer(&c, &lw, &out->L[l]);
        dm_layer_work_free(&lw);
        if (rc) goto fail;
        out->n_act += out->L[l].n_act;
        out->n_res += out->L[l].n_res;
        out->kept_bytes += out->L[l].kept_bytes;
        if (out->L[l].n_act > out->max_act_layer) out->max_act_layer = out->L[l].n_act;
        if (out->L[l].n_res > out->max_res_layer) out->max_res_layer = out->L[l].n_res;
    }
    if (mark_accumulate(&c)) goto fail;
    return 0;
fail:
    wk_plan_free(out);
    return -1;
}

static int same_kernel(const dm_kernel *a, const dm_kernel *b)
{
    return a->kind == b->kind && a->op == b->op && a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch &&
           a->count == b->count && a->param == b->param && a->slot == b->slot;
}

int wk_plan_check(const wk_plan *w, const dm_program *p, int r, const dm_matrix *mx, int64_t n, dm_err *err)
{
    const dm_rank_prog *rp = &p->ranks[r];
    int64_t *per_layer = dm_calloc((size_t)(w->n_layers ? w->n_layers : 1), sizeof *per_layer, err);
    if (!per_layer) return -1;
    for (int64_t i = 0; i < n; i++)
        if (mx[i].layer >= 0 && mx[i].layer < w->n_layers) per_layer[mx[i].layer]++;
    int rc = 0;
    for (int i = 0; i < rp->n_ops && rc == 0; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->kind != DM_OP_FORWARD && op->kind != DM_OP_BACKWARD) continue;
        const char *kn = dm_op_kind_name(op->kind);
        if (op->layer < 0 || op->layer >= w->n_layers) {
            rc = dm_err_set(err, "program: rank %d op %d (%s) has layer %d; the model has layers 0..%d", r, i, kn,
                            op->layer, w->n_layers - 1);
            break;
        }
        int bad_params = op->n_params && op->n_params != per_layer[op->layer];
        for (int a = 0; a < op->n_params && !bad_params; a++)
            bad_params = op->params[a] < 0 || op->params[a] >= n || mx[op->params[a]].layer != op->layer;
        if (bad_params) {
            rc = dm_err_set(err, "program: rank %d op %d (%s, layer %d) names %d matrices; the executor runs a layer's "
                            "work whole: its %lld matrices", r, i, kn, op->layer, op->n_params,
                            (long long)per_layer[op->layer]);
            break;
        }
        if (op->work < 0) continue;
        const dm_work *wk = &p->works[op->work];
        const wk_layer *lp = &w->L[op->layer];
        int nk = op->kind == DM_OP_FORWARD ? lp->n_fwd : lp->n_bwd;
        const wk_kb *kb = op->kind == DM_OP_FORWARD ? lp->fwd : lp->bwd;
        int j = 0;
        while (j < wk->n && j < nk && same_kernel(&wk->k[j], &kb[j].k)) j++;
        if (j < wk->n || j < nk) {
            char have[160] = "none", want[160] = "none";
            if (j < wk->n)
                snprintf(have, sizeof have, "%s %s %lldx%lldx%lld batch %lld count %lld", dm_kern_kind_name(wk->k[j].kind),
                         dm_kern_op_name(wk->k[j].op), (long long)wk->k[j].m, (long long)wk->k[j].n, (long long)wk->k[j].k,
                         (long long)wk->k[j].batch, (long long)wk->k[j].count);
            if (j < nk)
                snprintf(want, sizeof want, "%s %s %lldx%lldx%lld batch %lld count %lld", dm_kern_kind_name(kb[j].k.kind),
                         dm_kern_op_name(kb[j].k.op), (long long)kb[j].k.m, (long long)kb[j].k.n, (long long)kb[j].k.k,
                         (long long)kb[j].k.batch, (long long)kb[j].k.count);
            rc = dm_err_set(err, "program: rank %d op %d (%s, layer %d): kernel %d of its work is %s; the model's at %lld "
                            "tokens per rank and seq-len %lld, layer passes %s as the program records, is %s (plan the "
                            "program with this run's --tokens and --seq-len; a program's \"layer_passes\" field must "
                            "match its kernels)", r, i, kn, op->layer, j, have, (long long)w->tokens, (long long)w->seq_len,
                            p->layer_passes ? "on" : "off", want);
        }
    }
    free(per_layer);
    return rc;
}
