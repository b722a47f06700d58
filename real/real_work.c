/* real_work.c: proxy workload data and static program facts (real_work.h). */
#include "config.h"

#include "real_work.h"
#include "wk_ref.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void real_fill_weights(uint64_t seed, const dm_matrix *mx, int one_d, float *W)
{
    if (one_d) {
        for (int64_t i = 0; i < mx->rows; i++) W[i] = 1.0f + 0.1f * wk_hash_uniform(seed, WK_H_WEIGHT, mx->id, 0, i);
        return;
    }
    float s = (float)(1.0 / sqrt((double)mx->cols));
    for (int64_t o = 0; o < mx->rows; o++)
        for (int64_t i = 0; i < mx->cols; i++)
            W[o * mx->cols + i] = s * wk_hash_uniform(seed, WK_H_WEIGHT, mx->id, o, i);
}

void real_matrix_name_into(const dm_model *m, const dm_matrix *mx, char *buf, size_t len)
{
    const dm_tensor *t = &m->tensors[mx->tensor];
    int local = mx->layer - m->stacks[t->stack].first_global;
    size_t k = 0;
    for (const char *s = t->name; *s && k + 1 < len; s++) {
        if (*s == '*') {
            int w = snprintf(buf + k, len - k, "%d", local);
            if (w < 0) break;
            k += (size_t)w < len - k ? (size_t)w : len - k - 1;
        } else {
            buf[k++] = *s;
        }
    }
    buf[k] = 0;
    if (t->count > t->layer_span && k + 1 < len)
        snprintf(buf + k, len - k, "#%lld", (long long)(mx->index % (t->count / t->layer_span)));
}

static int is_update(dm_op_kind k) { return k == DM_OP_MUON_UPDATE || k == DM_OP_ADAMW; }
static int ag_grads(const dm_op *op) { return op->kind == DM_OP_ALLGATHER && op->payload == DM_PAYLOAD_GRADS; }

int real_group_index(const dm_program *p, int g, int r)
{
    for (int k = 0; k < p->groups[g].n; k++)
        if (p->groups[g].ranks[k] == r) return k;
    return -1;
}

static int rr_empty(real_range r) { return r.hi <= r.lo; }

/* Walk rank r's list (core/holds.h: what it holds of each param); record each gradient
 * all-gather's contribution (what it holds reduced before the gather) and, after the walk, each
 * weight all-gather's. */
static int walk_rank(const dm_program *p, const int64_t *sz, int r, real_facts *f, dm_hold *h, dm_err *err)
{
    const dm_rank_prog *rp = &p->ranks[r];
    memset(h->red, 0, 4 * (size_t)f->n_params * sizeof *h->red); /* the four arrays, back to back */
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        int k = dm_op_is_collective(op->kind) ? real_group_index(p, op->group, r) : 0;
        if (k < 0)
            return dm_err_set(err, "program: rank %d op %d (%s, collective %d) in a group without this rank", r, i,
                              dm_op_kind_name(op->kind), op->coll);
        if (ag_grads(op))
            for (int a = 0; a < op->n_params; a++) f->ag[op->coll][(size_t)k * op->n_params + a] = h->red[op->params[a]];
        dm_hold_op(p, sz, r, op, h);
    }
    /* weight all-gathers: what this rank updates in the step, else the part of the weights a
     * part broadcast brought it (HSDP's shard groups rebuild the whole from the parts) */
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (op->kind != DM_OP_ALLGATHER || ag_grads(op)) continue;
        int k = real_group_index(p, op->group, r);
        for (int a = 0; a < op->n_params; a++) {
            int64_t q = op->params[a];
            f->ag[op->coll][(size_t)k * op->n_params + a] = rr_empty(h->upd[q]) ? h->part[q] : h->upd[q];
        }
    }
    return 0;
}

int real_facts_build(const dm_program *p, const dm_matrix *mx, int64_t n_params, real_facts *f,
                     dm_err *err)
{
    real_range *red = NULL;
    int64_t *sz = NULL;
    memset(f, 0, sizeof *f);
    f->nranks = p->nranks;
    f->n_colls = p->n_colls;
    f->n_params = n_params;
    size_t nc = (size_t)p->nranks * (size_t)(p->n_colls ? p->n_colls : 1);
    size_t np = (size_t)p->nranks * (size_t)(n_params ? n_params : 1);
    if (!(f->coll_pos = dm_malloc(nc * sizeof *f->coll_pos, err)) ||
        !(f->first_upd = dm_malloc(np * sizeof *f->first_upd, err)))
        goto fail;
    for (size_t i = 0; i < nc; i++) f->coll_pos[i] = -1;
    for (size_t i = 0; i < np; i++) f->first_upd[i] = INT_MAX;
    if (dm_program_check_params(p, n_params, err)) goto fail;
    for (int r = 0; r < p->nranks; r++) {
        const dm_rank_prog *rp = &p->ranks[r];
        for (int i = 0; i < rp->n_ops; i++) {
            const dm_op *op = &rp->ops[i];
            if (dm_op_is_collective(op->kind)) {
                if (op->coll < 0 || op->coll >= p->n_colls || op->group < 0 || op->group >= p->n_groups) {
                    dm_err_set(err, "program: rank %d op %d (%s): bad collective %d or group %d", r, i,
                               dm_op_kind_name(op->kind), op->coll, op->group);
                    goto fail;
                }
                f->coll_pos[(size_t)r * p->n_colls + op->coll] = i;
                /* what this executor moves: weights by broadcast, gradients by the reductions,
                 * either by all-gather (the op's payload, program.h) */
                if (op->kind != DM_OP_ALLGATHER && op->payload != dm_op_payload_default(op->kind) &&
                    !(op->kind == DM_OP_ALLREDUCE && op->payload == DM_PAYLOAD_GRAM)) {
                    dm_err_set(err, "program: rank %d op %d (%s, collective %d) carries %s; this executor's %ss carry "
                               "%s only", r, i, dm_op_kind_name(op->kind), op->coll, dm_payload_name(op->payload),
                               dm_op_kind_name(op->kind), dm_payload_name(dm_op_payload_default(op->kind)));
                    goto fail;
                }
            }
            if (is_update(op->kind))
                for (int k = 0; k < op->n_params; k++) {
                    int *fu = &f->first_upd[(size_t)r * n_params + op->params[k]];
                    if (*fu == INT_MAX) *fu = i;
                }
        }
    }
    /* all-gather contributions */
    if (!(f->ag = dm_calloc((size_t)(p->n_colls ? p->n_colls : 1), sizeof *f->ag, err)) ||
        !(f->ag_slot = dm_calloc((size_t)(p->n_colls ? p->n_colls : 1), sizeof *f->ag_slot, err)) ||
        !(red = dm_malloc((size_t)(4 * (n_params ? n_params : 1)) * sizeof *red, err)) ||
        !(sz = dm_malloc((size_t)(n_params ? n_params : 1) * sizeof *sz, err)))
        goto fail;
    for (int64_t q = 0; q < n_params; q++) sz[q] = mx[q].rows * mx[q].cols;
    dm_hold h = {red, red + n_params, red + 2 * n_params, red + 3 * n_params};
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *op = &p->ranks[r].ops[i];
            if (op->kind != DM_OP_ALLGATHER || f->ag[op->coll]) continue;
            size_t n = (size_t)p->groups[op->group].n * (size_t)(op->n_params ? op->n_params : 1);
            if (!(f->ag[op->coll] = dm_calloc(n, sizeof **f->ag, err))) goto fail;
        }
    for (int r = 0; r < p->nranks; r++)
        if (walk_rank(p, sz, r, f, &h, err) < 0) goto fail;
    /* each element from the lowest member that has it; slot = the largest contribution */
    for (int r = 0; r < p->nranks; r++)
        for (int i = 0; i < p->ranks[r].n_ops; i++) {
            const dm_op *op = &p->ranks[r].ops[i];
            if (op->kind != DM_OP_ALLGATHER || f->ag_slot[op->coll] || op->group < 0) continue;
            int n = p->groups[op->group].n, np = op->n_params;
            real_range *g = f->ag[op->coll];
            int64_t slot = 0;
            for (int a = 0; a < np; a++) {
                real_range hull = {0, 0};
                for (int k = 0; k < n; k++) {
                    real_range *c = &g[(size_t)k * np + a];
                    if (rr_empty(*c)) continue;
                    if (!rr_empty(hull)) {
                        if (c->lo >= hull.lo && c->hi <= hull.hi) *c = (real_range){0, 0};
                        else if (c->lo < hull.lo && c->hi <= hull.hi && c->hi > hull.lo) c->hi = hull.lo;
                        else if (c->hi > hull.hi && c->lo >= hull.lo && c->lo < hull.hi) c->lo = hull.hi;
                    }
                    if (rr_empty(*c)) continue;
                    if (rr_empty(hull)) hull = *c;
                    else {
                        if (c->lo < hull.lo) hull.lo = c->lo;
                        if (c->hi > hull.hi) hull.hi = c->hi;
                    }
                }
            }
            for (int k = 0; k < n; k++) {
                int64_t cnt = 0;
                for (int a = 0; a < np; a++) {
                    real_range c = g[(size_t)k * np + a];
                    if (!rr_empty(c)) cnt += c.hi - c.lo;
                }
                if (cnt > slot) slot = cnt;
            }
            f->ag_slot[op->coll] = slot > 0 ? slot : 1;
        }
    free(red);
    free(sz);
    return 0;
fail:
    free(red);
    free(sz);
    real_facts_free(f);
    return -1;
}

void real_facts_free(real_facts *f)
{
    if (!f) return;
    free(f->coll_pos);
    free(f->first_upd);
    if (f->ag)
        for (int c = 0; c < f->n_colls; c++) free(f->ag[c]);
    free(f->ag);
    free(f->ag_slot);
    memset(f, 0, sizeof *f);
}

int real_src_updated_before(const real_facts *f, int j, int coll, int64_t p)
{
    int pos = f->coll_pos[(size_t)j * f->n_colls + coll];
    return pos >= 0 && f->first_upd[(size_t)j * f->n_params + p] < pos;
}

/* ---- data hazards ---------------------------------------------------------------------- */

enum { BUF_W, BUF_G, BUF_R, BUF_O, BUF_H, BUF__N };
static const char *buf_name[BUF__N] = {"weights", "gradient", "forward residual", "NS output", "split NS Gram"};

typedef struct hz_state {
    int writer;        /* last op that wrote the buffer this step, -1 */
    int *readers;      /* ops that read it since */
    int n_readers, cap;
} hz_state;

static int hb(const uint64_t *bits, int words, int i, int j) /* does op j happen before op i? */
{
    return (int)((bits[(size_t)i * words + j / 64] >> (j % 64)) & 1);
}

/* what op does to buffer b of a param: 1 read, 2 write, 3 both */
static int effect(const dm_op *op, int r, int b)
{
    switch (op->kind) {
    case DM_OP_FORWARD: return b == BUF_W ? 1 : b == BUF_R ? 2 : 0;
    case DM_OP_BACKWARD: return b == BUF_W || b == BUF_R ? 1 : b == BUF_G ? 2 : 0;
    case DM_OP_ALLREDUCE:
        if (op->payload == DM_PAYLOAD_GRAM) return b == BUF_H ? 3 : 0;
        return b == BUF_G ? 3 : 0;
    case DM_OP_REDUCESCATTER: return b == BUF_G ? 3 : 0;
    /* reads this member's part, writes the others' parts of the weights or gradients */
    case DM_OP_ALLGATHER: return b == (op->payload == DM_PAYLOAD_GRADS ? BUF_G : BUF_W) ? 3 : 0;
    case DM_OP_REDUCE: return b == BUF_G ? (op->root == r ? 3 : 1) : 0;
    case DM_OP_BROADCAST: return b == BUF_W ? (op->root == r ? 1 : 2) : 0;
    case DM_OP_NS:
        if (op->parts > 1 && op->stage % 2) return b == BUF_O || b == BUF_H ? 3 : 0; /* a split's step */
        if (op->parts > 1) /* a split's Gram; stage 0 also the momentum of its gradient */
            return b == BUF_H ? 2 : b == BUF_O ? (op->stage == 0 ? 2 : 1) : b == BUF_G && op->stage == 0 ? 1 : 0;
        return b == BUF_G ? 1 : b == BUF_O ? 2 : 0;
    case DM_OP_MUON_UPDATE: return b == BUF_O ? 1 : b == BUF_W ? 3 : 0;
    case DM_OP_ADAMW: return b == BUF_G ? 1 : b == BUF_W ? 3 : 0;
    default: return 0;
    }
}

int real_check_hazards(const dm_program *p, int r, const dm_matrix *mx, int64_t n_params, dm_err *err)
{
    const dm_rank_prog *rp = &p->ranks[r];
    int n = rp->n_ops, words = (n + 63) / 64, rc = -1;
    uint64_t *bits = dm_calloc((size_t)n * (size_t)(words ? words : 1), sizeof *bits, err);
    hz_state *st = dm_calloc((size_t)(n_params ? n_params : 1) * BUF__N, sizeof *st, err);
    int *last_on = NULL;
    int64_t *lp = dm_malloc((size_t)(n_params ? n_params : 1) * sizeof *lp, err);
    if (!bits || !st || !lp) goto done;
    for (int64_t i = 0; i < n_params * BUF__N; i++) st[i].writer = -1;
    int prev[DM_STREAM__COUNT];
    for (int s = 0; s < DM_STREAM__COUNT; s++) prev[s] = -1;
    for (int i = 0; i < n; i++) {
        const dm_op *op = &rp->ops[i];
        uint64_t *row = bits + (size_t)i * words;
        int preds[2] = {-1, -1};
        if ((unsigned)op->stream < DM_STREAM__COUNT) preds[0] = prev[op->stream], prev[op->stream] = i;
        for (int d = -1; d < op->n_deps; d++) {
            int j = d < 0 ? preds[0] : op->deps[d];
            if (j < 0 || j >= i) continue;
            row[j / 64] |= UINT64_C(1) << (j % 64);
            const uint64_t *o = bits + (size_t)j * words;
            for (int w = 0; w < words; w++) row[w] |= o[w];
        }
        /* the params it touches: its list, or its layer's matrices */
        const int64_t *pl = op->params;
        int64_t np = op->n_params;
        if (!np && op->layer >= 0 && (op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD)) {
            for (int64_t k = 0; k < n_params; k++)
                if (mx[k].layer == op->layer) lp[np++] = k;
            pl = lp;
        }
        for (int64_t a = 0; a < np; a++) {
            int64_t q = pl[a];
            if (q < 0 || q >= n_params) continue;
            for (int b = 0; b < BUF__N; b++) {
                int e = effect(op, r, b);
                if (!e) continue;
                hz_state *h = &st[q * BUF__N + b];
                int bad = -1;
                if (h->writer >= 0 && !hb(bits, words, i, h->writer)) bad = h->writer;
                if (e & 2)
                    for (int k = 0; k < h->n_readers && bad < 0; k++)
                        if (h->readers[k] != i && !hb(bits, words, i, h->readers[k])) bad = h->readers[k];
                if (bad >= 0) {
                    dm_err_set(err, "program: rank %d op %d (%s) %s the %s of matrix %lld, which op %d (%s) %s, "
                               "with no dependency path between them", r, i, dm_op_kind_name(op->kind),
                               e & 2 ? "writes" : "reads", buf_name[b], (long long)q, bad,
                               dm_op_kind_name(rp->ops[bad].kind), bad == h->writer ? "wrote" : "reads");
                    goto done;
                }
                if (e & 2) {
                    h->writer = i;
                    h->n_readers = 0;
                }
                if (e & 1) {
                    if (h->n_readers == h->cap) {
                        int cap = h->cap ? 2 * h->cap : 4;
                        int *nr = dm_realloc(h->readers, (size_t)cap * sizeof *nr, err);
                        if (!nr) goto done;
                        h->readers = nr;
                        h->cap = cap;
                    }
                    h->readers[h->n_readers++] = i;
                }
            }
        }
    }
    rc = 0;
done:
    if (st)
        for (int64_t i = 0; i < n_params * BUF__N; i++) free(st[i].readers);
    free(st);
    free(bits);
    free(last_on);
    free(lp);
    return rc;
}

double real_scratch_bytes(const wk_plan *w)
{
    double b = 2.0 * ((double)w->max_dx + (double)w->max_dx2 + (double)w->max_ew) + 4.0 * (double)w->max_ws +
               4.0 * (double)w->map_ints;
    for (int i = 0; i < WK_A__N; i++) b += 2.0 * (double)w->attn_size[i];
    /* pointer arrays of the grouped-query products: 3 x batch per product, 6 products */
    for (int i = 0; i < w->n_attn; i++)
        if (!wk_attn_strided(&w->attn[i])) b += 6.0 * 3.0 * (double)wk_attn_entries(&w->attn[i]) * sizeof(void *);
    return b;
}

int real_staged(const dm_program *p, const dm_op *op, dm_arena_fit fit, int64_t span)
{
    int n = op->group >= 0 && op->group < p->n_groups ? p->groups[op->group].n : 0;
    return op->staged || !dm_arena_fits_in_place(op, fit, span, n);
}

int real_gpu_mem_estimate(const dm_model *m, const dm_program *p, int r, int64_t T, real_mem_est *e, dm_err *err)
{
    dm_matrix *mx = NULL;
    int64_t n = 0, *off = NULL;
    real_facts f;
    wk_plan wl;
    unsigned char *staged = NULL;
    int rc = -1;
    memset(e, 0, sizeof *e);
    memset(&f, 0, sizeof f);
    memset(&wl, 0, sizeof wl);
    if (r < 0 || r >= p->nranks) return dm_err_set(err, "rank %d is not in the program's %d ranks", r, p->nranks);
    if (dm_model_matrices(m, -1, &mx, &n, err) < 0) return -1;
    wk_plan_opts wo = {T, p->seq_len, r, p->nranks, 0, 1, p->causal_tile, !p->layer_passes};
    if (real_facts_build(p, mx, n, &f, err) < 0 || wk_plan_build(m, mx, n, &wo, &wl, err) < 0 ||
        !(off = dm_malloc((size_t)(n ? n : 1) * sizeof *off, err)) ||
        !(staged = dm_calloc((size_t)p->n_colls + 1, 1, err)))
        goto out;
    /* the arenas' layout; which collectives this backend stages on it (coll_op's rule) */
    int64_t t_arena = dm_arena_layout(m, mx, n, p, off, err);
    if (t_arena < 0) goto out;
    for (int rr = 0; rr < p->nranks; rr++)
        for (int k = 0; k < p->ranks[rr].n_ops; k++) {
            const dm_op *op = &p->ranks[rr].ops[k];
            int64_t st0, sp0;
            if (dm_op_is_collective(op->kind) && op->coll >= 0 && op->coll < p->n_colls &&
                real_staged(p, op, dm_arena_fit_of(m, mx, off, op, &st0, &sp0), sp0))
                staged[op->coll] = 1;
        }
    /* the one estimate (core/memory.h) with what this backend allocates put in: the all-gather
     * slots, the staging, the arenas, the activations and scratch of its workload plan */
    dm_mem_exact x = {f.ag_slot, staged, t_arena, 2.0 * ((double)wl.n_act + (double)wl.n_res), real_scratch_bytes(&wl)};
    dm_mem_est ce;
    if (dm_mem_estimate(m, p, r, &x, &ce, err)) goto out;
    e->weights_grads = ce.weights_grads;
    e->activations = ce.activations;
    e->scratch = ce.scratch;
    e->state = ce.state;
    e->state_next = ce.state_next;
    e->comm = ce.comm;
    e->ns = ce.ns;
    e->runtime = ce.runtime;
    e->total = ce.total;
    e->total_elems = t_arena;
    e->max_size = ce.max_size;
    e->max_coll = ce.max_coll;
    rc = 0;
out:
    free(staged);
    free(off);
    wk_plan_free(&wl);
    real_facts_free(&f);
    free(mx);
    return rc;
}
