/* real_cpu.c: the CPU backend of the executor (real_priv.h's table): interprets a step program
 * with MPI non-blocking collectives (the collective table's exact forms, core/coll.h, summed in
 * rank order), the layers' kernels of wk_plan.h through the float reference of wk_ref.h (CBLAS
 * products, elementwise passes, reductions in token order) and the reference math of ns_ref.h
 * (momentum, NS, apply, AdamW). With --grad-chunks C every reduction over rows (weight
 * gradients, 1-D and table gradients, the embedding scatter) sums C row chunks in order, the
 * first into the gradient and each later one added to it: so a one-rank run over the ranks'
 * tokens with C = ranks sums exactly as the collectives do.
 *
 * Streams are emulated by a dataflow loop on one thread: an op starts when its dependencies
 * and the previous op of its stream are done; a collective is also posted only after the
 * collectives before it in its group (list order), which is the order MPI (and NCCL) match
 * them in. Compute ops run to completion when started; collectives are MPI_I* calls tested in
 * the loop, so a program that would deadlock on GPUs deadlocks here too and is reported after
 * the timeout instead of hanging. Updates write staged copies (Wn, mom_n, m1n, m2n), which the
 * step's end commits by swapping, or drops.
 *
 * Every rank holds every matrix's weights whole (W, Wn: the working copy forward reads is the
 * master here); the optimizer state (momentum, moments and their staged copies) only over the
 * range its updates touch (ex->st, core/holds.h), element x at [x - st.lo]. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "memory.h"
#include "real.h"
#include "real_priv.h"
#include "real_work.h"

typedef struct rparam {
    int64_t rows, cols, size; /* size: elements (rows * cols, or rows for 1-D) */
    int one_d, muon;
    float *W, *Wn;            /* committed weights; staged (latest on this rank) */
    float *G;                 /* gradient: local after backward, reduced after collectives */
    float *mom, *mom_n;       /* Muon momentum, committed and staged, over [st_lo, st_hi) */
    float *m1, *m2, *m1n, *m2n; /* AdamW moments, over [st_lo, st_hi) */
    int64_t st_lo, st_hi;     /* the state's range (ex->st) */
    float *O;                 /* NS input, then output */
    float *H;                 /* a split NS's Gram (short side squared; kernels/ns_ref.h ns_split_*) */
    int64_t gr_lo, gr_hi;     /* reduced-gradient range this step */
    int64_t rs_lo, rs_hi;     /* the part a reduce-scatter gave this rank this step */
    int64_t up_lo, up_hi;     /* range this rank updated this step */
    int64_t own_lo, own_hi;   /* range this rank updated in the last committed step */
    int ns_done, applied;
} rparam;

typedef struct pending {
    int op;
    MPI_Request req;
    float *send, *recv;
} pending;

typedef struct cpu {
    rparam *p;
    float **act, **res;       /* per layer: its input activations and the residuals it keeps */
    float *attn[WK_A__N];     /* attention buffers (cost only) */
    float *dx, *dx2;          /* cost-only outputs: input gradients and dx; the combine's */
    float *ew;                /* the layer passes' scratch (cost only: activations, rotary, residual adds) */
    double loss;              /* this step's, this rank's tokens */
    MPI_Comm *gcomm;          /* per program group; MPI_COMM_NULL when not a member */
    int *prev_stream, *prev_coll; /* per op of this rank */
    float *scratch;           /* a chunk's gradient (the largest matrix) */
    float *scratch2;          /* a chunk group's sum (grad_chunk_group) */
    unsigned char *state;     /* per op, this step: 0 not started, 1 posted, 2 done */
    pending *pend;
    int n_pend;
    int64_t bad_reduced, bad_local;
} cpu;

static cpu *C(const real_exec *ex) { return ex->bs; }

/* ---- set-up ------------------------------------------------------------------------------ */

/* The CPU backend holds every matrix's weights and gradient whole on every rank, its state over
 * its range: refuse what cannot fit the node. */
static int cpu_precheck(real_exec *ex, dm_err *err)
{
    const wk_plan *w = &ex->wl;
    double need = 0;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        double st = (double)(ex->st[i].hi > ex->st[i].lo ? ex->st[i].hi - ex->st[i].lo : 0);
        double whole = (double)dm_matrix_elems(ex->model, &ex->mx[i]);
        need += 4.0 * (3.0 * whole + ((ex->need[i] & 1) ? whole + 2.0 * st : 0) + ((ex->need[i] & 2) ? 4.0 * st : 0));
    }
    need += 4.0 * ((double)w->n_act + (double)w->n_res + (double)w->max_dx + (double)w->max_dx2 + (double)w->max_ew);
    for (int a = 0; a < WK_A__N; a++) need += 4.0 * (double)w->attn_size[a];
    int local = 1;
    real_local_rank(ex->comm, &local);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need * local > 0.9 * have)
        return dm_err_set(err, "the CPU backend needs about %.1f GiB per rank for %s at %lld tokens (%d ranks on this "
                          "node: %.1f GiB; the node has %.1f GiB; " DM_NOFIT_WORDS "): use a smaller model, fewer "
                          "--tokens or the GPU backend", need / 1073741824.0, ex->model->name, (long long)ex->o.tokens, local,
                          need * local / 1073741824.0, have / 1073741824.0);
    return 0;
}

/* Stream and group order of this rank's ops (program.h). */
static int setup_ops(real_exec *ex, cpu *c, dm_err *err)
{
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    int n = rp->n_ops, ng = ex->prog->n_groups;
    size_t nn = (size_t)(n ? n : 1);
    int *last_g = dm_malloc((size_t)(ng ? ng : 1) * sizeof *last_g, err);
    if (!last_g || !(c->prev_stream = dm_malloc(nn * sizeof(int), err)) ||
        !(c->prev_coll = dm_malloc(nn * sizeof(int), err)) || !(c->state = dm_calloc(nn, 1, err)) ||
        !(c->pend = dm_calloc(nn, sizeof(pending), err))) {
        free(last_g);
        return -1;
    }
    int last_s[DM_STREAM__COUNT];
    for (int s = 0; s < DM_STREAM__COUNT; s++) last_s[s] = -1;
    for (int g = 0; g < ng; g++) last_g[g] = -1;
    for (int i = 0; i < n; i++) {
        const dm_op *op = &rp->ops[i];
        c->prev_stream[i] = last_s[op->stream];
        last_s[op->stream] = i;
        c->prev_coll[i] = -1;
        if (dm_op_is_collective(op->kind)) {
            c->prev_coll[i] = last_g[op->group];
            last_g[op->group] = i;
        }
    }
    free(last_g);
    return 0;
}

/* Every layer's input activations from the counter hash (wk_plan.h); the dispatched rows are
 * the dispatch's each step. */
static void fill_activations(real_exec *ex, const wk_layer *lp, float *act)
{
    uint64_t seed = ex->o.seed;
    for (int s = 0; s < lp->n_slots; s++) {
        const wk_slot *q = &lp->slots[s];
        float *X = act + q->off;
        if (q->routed && q->gathered) {
            memset(X, 0, (size_t)(q->rows * q->cols) * sizeof *X);
        } else if (q->routed) {
            for (int64_t e = 0; e < q->nexp; e++)
                for (int64_t j = 0; j < q->per; j++)
                    for (int64_t c = 0; c < q->cols; c++)
                        X[(e * q->per + j) * q->cols + c] =
                            wk_hash_uniform(seed, WK_H_ROUTED, q->key * 65536 + e, q->row0 + j, c);
        } else {
            for (int64_t r = 0; r < q->rows; r++)
                for (int64_t c = 0; c < q->cols; c++) X[r * q->cols + c] = wk_hash_uniform(seed, WK_H_ACT, q->key, q->row0 + r, c);
        }
    }
}

static int cpu_create(real_exec *ex, dm_err *err)
{
    const dm_program *prog = ex->prog;
    const wk_plan *wl = &ex->wl;
    const unsigned char *need = ex->need; /* per matrix: 1 Muon state, 2 AdamW state on this rank */
    cpu *c = dm_calloc(1, sizeof *c, err);
    if (!c) return -1;
    ex->bs = c;
    int ng = prog->n_groups;
    if (!(c->gcomm = dm_malloc((size_t)(ng ? ng : 1) * sizeof *c->gcomm, err))) return -1;
    for (int g = 0; g < ng; g++) c->gcomm[g] = MPI_COMM_NULL;
    for (int g = 0; g < ng; g++) /* key = global rank: the communicator's order is the group's ascending order */
        MPI_Comm_split(ex->comm, ex->gidx[g] >= 0 ? 0 : MPI_UNDEFINED, ex->rank, &c->gcomm[g]);
    if (setup_ops(ex, c, err) < 0) return -1;
    if (!(c->p = dm_calloc((size_t)(ex->n_mx ? ex->n_mx : 1), sizeof *c->p, err)) ||
        !(c->act = dm_calloc((size_t)(wl->n_layers ? wl->n_layers : 1), sizeof *c->act, err)) ||
        !(c->res = dm_calloc((size_t)(wl->n_layers ? wl->n_layers : 1), sizeof *c->res, err)))
        goto fail;
    size_t scratch = 1;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        rparam *q = &c->p[i];
        const dm_matrix *m = &ex->mx[i];
        q->one_d = ex->model->tensors[m->tensor].ndim == 1;
        q->rows = m->rows;
        q->cols = q->one_d ? 1 : m->cols;
        q->size = q->rows * q->cols;
        q->muon = m->role == DM_ROLE_MUON && !q->one_d;
        size_t sz = (size_t)q->size;
        if (!(q->W = dm_malloc(sz * 4, err)) || !(q->Wn = dm_malloc(sz * 4, err)) || !(q->G = dm_calloc(sz, 4, err)))
            goto fail;
        /* optimizer state only over what this rank's program updates */
        q->st_lo = ex->st[i].lo, q->st_hi = ex->st[i].hi > ex->st[i].lo ? ex->st[i].hi : ex->st[i].lo;
        size_t ns = (size_t)(q->st_hi - q->st_lo);
        if ((need[i] & 1) && ns && (!(q->mom = dm_calloc(ns, 4, err)) || !(q->mom_n = dm_calloc(ns, 4, err)) ||
                                    !(q->O = dm_calloc(sz, 4, err))))
            goto fail;
        if ((need[i] & 2) && ns && (!(q->m1 = dm_calloc(ns, 4, err)) || !(q->m2 = dm_calloc(ns, 4, err)) ||
                                    !(q->m1n = dm_calloc(ns, 4, err)) || !(q->m2n = dm_calloc(ns, 4, err))))
            goto fail;
        real_fill_weights(ex->o.seed, m, q->one_d, q->W);
        if (sz > scratch) scratch = sz;
        q->own_lo = 0;
        q->own_hi = ex->rank == 0 ? q->size : 0; /* before any step rank 0's copy is the one */
    }
    for (int l = 0; l < wl->n_layers; l++) {
        const wk_layer *lp = &wl->L[l];
        if (!(c->act[l] = dm_malloc((size_t)(lp->n_act ? lp->n_act : 1) * 4, err)) ||
            !(c->res[l] = dm_calloc((size_t)(lp->n_res ? lp->n_res : 1), 4, err)))
            goto fail;
        fill_activations(ex, lp, c->act[l]);
    }
    for (int a = 0; a < WK_A__N; a++) {
        int64_t n = wl->attn_size[a];
        if (!(c->attn[a] = dm_malloc((size_t)(n ? n : 1) * 4, err))) goto fail;
        /* inputs of the products (their values do not matter: cost only) */
        for (int64_t e = 0; e < n; e++) c->attn[a][e] = 0.25f * wk_hash_uniform(ex->o.seed, 7, a, 0, e);
    }
    if (!(c->scratch = dm_malloc(scratch * 4, err)) || !(c->scratch2 = dm_malloc(scratch * 4, err)) ||
        !(c->dx = dm_calloc((size_t)(wl->max_dx ? wl->max_dx : 1), 4, err)) ||
        !(c->dx2 = dm_malloc((size_t)(wl->max_dx2 ? wl->max_dx2 : 1) * 4, err)) ||
        !(c->ew = dm_calloc((size_t)(wl->max_ew ? wl->max_ew : 1), 4, err)))
        goto fail;
    snprintf(ex->info, sizeof ex->info, "cpu: MPI non-blocking collectives summing in rank order, reference kernels "
             "(wk_ref, ns_ref); activations %.1f MiB, kept %.1f MiB", (double)wl->n_act * 4 / 1048576.0,
             (double)wl->n_res * 4 / 1048576.0);
    return 0;
fail:
    return -1;
}

static void cpu_destroy(real_exec *ex)
{
    cpu *c = C(ex);
    if (!c) return;
    if (c->p)
        for (int64_t i = 0; i < ex->n_mx; i++) {
            rparam *q = &c->p[i];
            free(q->W), free(q->Wn), free(q->G);
            free(q->mom), free(q->mom_n), free(q->O), free(q->H), free(q->m1), free(q->m2), free(q->m1n), free(q->m2n);
        }
    free(c->p);
    for (int l = 0; l < ex->wl.n_layers; l++) {
        if (c->act) free(c->act[l]);
        if (c->res) free(c->res[l]);
    }
    free(c->act);
    free(c->res);
    for (int a = 0; a < WK_A__N; a++) free(c->attn[a]);
    free(c->dx);
    free(c->dx2);
    free(c->ew);
    if (c->gcomm)
        for (int g = 0; g < ex->prog->n_groups; g++)
            if (c->gcomm[g] != MPI_COMM_NULL) MPI_Comm_free(&c->gcomm[g]);
    free(c->gcomm);
    free(c->prev_stream);
    free(c->prev_coll);
    free(c->state);
    free(c->pend);
    free(c->scratch);
    free(c->scratch2);
    free(c);
    ex->bs = NULL;
}

/* ---- compute ops ------------------------------------------------------------------------- */

static void note_bad(int64_t *bad, int64_t p)
{
    if (*bad < 0 || p < *bad) *bad = p;
}

static int finite_range(const float *x, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Rows [lo, hi) of chunk i of C over `rows` (the chunks of --grad-chunks). */
static void chunk_of(int64_t rows, int C, int i, int64_t *lo, int64_t *hi)
{
    *lo = rows * i / C;
    *hi = rows * (i + 1) / C;
}

/* Where chunk i of a gradient goes: the gradient itself for the first (unless it holds a tied
 * head's part already), else the scratch, added after (chunk_add). */
static float *chunk_dst(cpu *c, const wk_kb *b, int i, float *g) { return i == 0 && !b->accumulate ? g : c->scratch; }
static void chunk_add(float *g, const float *dst, int64_t size)
{
    if (dst != g)
        for (int64_t e = 0; e < size; e++) g[e] += dst[e];
}

/* grad_chunk_group Gs > 1 (HSDP's order: each shard group sums first, then the groups): chunk i
 * goes to grp_dst (its group's sum: the gradient itself for the first group unless it holds a
 * tied head's part, else scratch2; a later chunk of a group: the scratch); grp_add adds it to
 * its group's sum and, after a group's last chunk, the group's sum to the gradient. Gs 1: the
 * plain chunk_dst / chunk_add. */
static float *grp_sum(cpu *c, const wk_kb *b, int i, int Gs, float *g) { return i < Gs && !b->accumulate ? g : c->scratch2; }
static float *grp_dst(cpu *c, const wk_kb *b, int i, int Gs, float *g)
{
    if (Gs <= 1) return chunk_dst(c, b, i, g);
    return i % Gs == 0 ? grp_sum(c, b, i, Gs, g) : c->scratch;
}
static void grp_add(cpu *c, const wk_kb *b, int i, int Gs, float *g, const float *d, int64_t size)
{
    if (Gs <= 1) {
        chunk_add(g, d, size);
        return;
    }
    float *sum = grp_sum(c, b, i, Gs, g);
    chunk_add(sum, d, size);
    if (i % Gs == Gs - 1) chunk_add(g, sum, size);
}

/* The products of an attention kernel, entry by entry (cost only). */
static void attention(cpu *c, const wk_attn_geom *g, const dm_kernel *k)
{
    for (int64_t e = 0; e < k->batch; e++) {
        int which[3];
        int64_t off[3];
        wk_attn_entry(g, k->op, e, which, off);
        wk_ref_gemm((wk_form)wk_form_of(k->op), k->m, k->n, k->k, 1.0f, c->attn[which[0]] + off[0],
                    c->attn[which[1]] + off[1], c->attn[which[2]] + off[2]);
    }
}

/* One forward kernel of layer l. */
static void run_fwd(real_exec *ex, int l, const wk_kb *b)
{
    cpu *c = C(ex);
    const dm_kernel *k = &b->k;
    float *act = c->act[l], *res = c->res[l];
    switch (k->op) {
    case DM_KOP_FWD:
        if (k->kind == DM_KERN_GEMM) /* count matrices over the same X */
            for (int64_t i = 0; i < k->count; i++)
                wk_ref_gemm(WK_NT, k->m, k->n, k->k, 1.0f, act + b->x, c->p[k->param + i].W, res + b->r + i * k->m * k->n);
        else /* experts: each over its own routed rows */
            for (int64_t e = 0; e < k->batch; e++)
                wk_ref_gemm(WK_NT, k->m, k->n, k->k, 1.0f, act + b->x + e * k->m * k->k, c->p[k->param + e].W,
                            res + b->r + e * k->m * k->n);
        break;
    case DM_KOP_ATTN_SCORE:
    case DM_KOP_ATTN_VALUE: attention(c, &ex->wl.attn[b->attn], k); break;
    case DM_KOP_SOFTMAX: wk_ref_softmax(c->attn[WK_AS], k->m, k->n, (float)b->scale); break;
    case DM_KOP_LOSS:
        for (int64_t i = 0; i < b->count; i++)
            c->loss += wk_ref_loss(res + b->r + i * b->rows * k->n, b->rows, k->n, ex->o.seed, k->param + i, b->row0,
                                   b->scale);
        break;
    case DM_KOP_VECTOR:
        for (int64_t i = 0; i < b->count; i++)
            c->loss += wk_ref_vector(act + b->x, c->p[k->param + i].W, res + b->r + i * b->rows * k->n, b->rows, k->n,
                                     ex->o.seed, k->param + i, b->row0, b->scale);
        break;
    case DM_KOP_TABLE:
        for (int64_t i = 0; i < b->count; i++)
            c->loss += wk_ref_table(act + b->x, c->p[k->param + i].W, res + b->r + i * b->rows * k->n, b->rows, k->n,
                                    b->period, b->positions, ex->o.seed, k->param + i, b->row0, b->scale);
        break;
    case DM_KOP_EMBED: wk_ref_embed(c->p[k->param].W, ex->wl.maps[b->map].a, res + b->r, b->rows, k->n); break;
    case DM_KOP_ROUTE: wk_ref_route(act + b->x, ex->wl.maps[b->map].a, act + b->dst, b->rows, k->n); break;
    case DM_KOP_ACT: wk_ref_act(res + b->r, b->ld, c->ew, k->m, k->n); break;
    case DM_KOP_GLU: wk_ref_glu(res + b->r, res + b->r2, b->ld, c->ew, k->m, k->n); break;
    case DM_KOP_ROPE: wk_ref_rope(c->ew, k->m, k->n, k->k, 0); break;
    case DM_KOP_RESID: wk_ref_add(act + b->x, c->ew + k->m * k->n, c->ew, k->m * k->n); break;
    default: break;
    }
}

/* One backward kernel of layer l. */
static void run_bwd(real_exec *ex, int l, const wk_kb *b)
{
    cpu *c = C(ex);
    const dm_kernel *k = &b->k;
    const float *act = c->act[l], *res = c->res[l];
    int C_ = ex->o.grad_chunks;
    int Gs = ex->o.grad_chunk_group > 1 ? ex->o.grad_chunk_group : 1; /* HSDP's order (grp_dst) */
    int64_t lo, hi;
    switch (k->op) {
    case DM_KOP_DGRAD: /* dX = R W, for its cost */
        if (!ex->o.input_grad) break;
        for (int64_t i = 0; i < k->count * k->batch; i++) {
            int64_t sr = k->m * k->k, sx = k->kind == DM_KERN_BGEMM ? k->m * k->n : 0;
            wk_ref_gemm(WK_NN, k->m, k->n, k->k, 1.0f, res + b->r + i * sr, c->p[k->param + i].W, c->dx + i * sx);
        }
        break;
    case DM_KOP_WGRAD: /* G = R^T X / (N out), over the row chunks */
        for (int64_t i = 0; i < k->count * k->batch; i++) {
            float *g = c->p[k->param + i].G;
            const float *R = res + b->r + i * k->k * k->m;
            const float *X = act + b->x + (k->kind == DM_KERN_BGEMM ? i * k->k * k->n : 0);
            for (int ci = 0; ci < C_; ci++) {
                chunk_of(k->k, C_, ci, &lo, &hi);
                float *d = grp_dst(c, b, ci, Gs, g);
                if (hi > lo) wk_ref_gemm(WK_TN, k->m, k->n, hi - lo, (float)b->scale, R + lo * k->m, X + lo * k->n, d);
                else memset(d, 0, (size_t)(k->m * k->n) * sizeof *d);
                grp_add(c, b, ci, Gs, g, d, k->m * k->n);
            }
        }
        break;
    case DM_KOP_ATTN_SCORE:
    case DM_KOP_ATTN_DVALUE:
    case DM_KOP_ATTN_DSCORE:
    case DM_KOP_ATTN_DQUERY:
    case DM_KOP_ATTN_DKEY: attention(c, &ex->wl.attn[b->attn], k); break;
    case DM_KOP_SOFTMAX: wk_ref_softmax(c->attn[WK_AS], k->m, k->n, (float)b->scale); break;
    case DM_KOP_SOFTMAX_BWD: wk_ref_softmax_bwd(c->attn[WK_AS], c->attn[WK_ADS], k->m, k->n); break;
    case DM_KOP_VECTOR_BWD:
    case DM_KOP_TABLE_BWD:
        for (int64_t i = 0; i < b->count; i++) {
            rparam *q = &c->p[k->param + i];
            const float *R = res + b->r + i * b->rows * k->n;
            for (int ci = 0; ci < C_; ci++) {
                chunk_of(b->rows, C_, ci, &lo, &hi);
                float *d = grp_dst(c, b, ci, Gs, q->G);
                wk_ref_table_bwd(R, act + b->x, q->W, d, c->dx + i * b->rows * k->n, lo, hi, k->n, b->period,
                                 b->positions, (float)b->scale);
                grp_add(c, b, ci, Gs, q->G, d, q->size);
            }
        }
        break;
    case DM_KOP_EMBED_BWD: {
        rparam *q = &c->p[k->param];
        if (!b->accumulate) memset(q->G, 0, (size_t)q->size * sizeof *q->G);
        for (int ci = 0; ci < C_; ci++) {
            chunk_of(b->rows, C_, ci, &lo, &hi);
            /* it scatters into d: every buffer but the gradient starts from zero */
            float *d = Gs > 1 ? grp_dst(c, b, ci, Gs, q->G) : ci == 0 || b->accumulate ? q->G : c->scratch;
            if (d != q->G) memset(d, 0, (size_t)q->size * sizeof *d);
            wk_ref_embed_bwd(res + b->r, ex->wl.maps[b->map].a, d, lo, hi, k->n, (float)b->scale);
            grp_add(c, b, ci, Gs, q->G, d, q->size);
        }
        break;
    }
    case DM_KOP_ROUTE_BWD: wk_ref_route_bwd(c->dx, ex->wl.maps[b->map].inv, c->dx2, b->rows, b->top_k, k->n); break;
    case DM_KOP_ACT_BWD: wk_ref_act_bwd(res + b->r, b->ld, c->dx, c->ew, k->m, k->n); break;
    case DM_KOP_GLU_BWD:
        wk_ref_glu_bwd(res + b->r, res + b->r2, b->ld, c->dx, c->ew, c->ew + k->m * k->n, k->m, k->n);
        break;
    case DM_KOP_ROPE_BWD: wk_ref_rope(c->ew, k->m, k->n, k->k, 1); break;
    case DM_KOP_RESID_BWD: wk_ref_add(act + b->x, c->ew + k->m * k->n, c->ew, k->m * k->n); break;
    default: break;
    }
}

/* After a backward: the fault injections and the non-finite check of each of its gradients. */
static void backward_done(real_exec *ex, int64_t id, rparam *q)
{
    cpu *c = C(ex);
    if (ex->nranks == 1) q->gr_lo = 0, q->gr_hi = q->size;
    if (ex->step == ex->o.inject_step && ex->rank == ex->o.inject_rank && id == ex->o.inject_param)
        q->G[q->size / 2] = NAN;
    if (ex->step == ex->o.overflow_step && id == ex->o.overflow_param) q->G[q->size / 2] = 3.0e38f;
    if (!finite_range(q->G, 0, q->size)) note_bad(&c->bad_local, id);
}

/* The rows slice [lo, hi) of a split NS's part (program.h), and its rows; -1 when the matrix
 * is not stored tall or square or the part does not fall on whole rows. */
static int split_part(real_exec *ex, int i, const dm_op *op, rparam *q, int64_t *lo, int64_t *hi, dm_err *err)
{
    dm_flat_shard(q->size, op->parts, op->part, lo, hi);
    if (q->rows < q->cols || *lo % q->cols || *hi % q->cols)
        return dm_err_set(err, "rank %d op %d (%s): part %d of %d of %s (%lld x %lld) is not a slice of whole rows of a "
                          "matrix stored tall or square", ex->rank, i, dm_op_kind_name(op->kind), op->part, op->parts,
                          real_matrix_name(ex, op->params[0]), (long long)q->rows, (long long)q->cols);
    return 0;
}

/* A stage of a split NS (program.h: an ns op with parts > 1) on this rank's rows slice: stage 0
 * the momentum of its gradient into O, an even stage the slice's Gram into H (the gram
 * all-reduce then sums it over the split's ranks), an odd one the iteration's step. */
static int split_ns(real_exec *ex, int i, const dm_op *op, rparam *q, int64_t id, dm_err *err)
{
    int64_t lo, hi;
    if (split_part(ex, i, op, q, &lo, &hi, err) < 0) return -1;
    int64_t rows = (hi - lo) / q->cols, n = q->cols;
    const ns_muon_params *mp = &ex->o.muon;
    if (op->stage == 0) {
        if (q->gr_lo > lo || q->gr_hi < hi)
            return dm_err_set(err, "rank %d op %d (ns): the reduced gradient of part %d of %s is not on this rank",
                              ex->rank, i, op->part, real_matrix_name(ex, id));
        if (!q->mom || q->st_lo > lo || q->st_hi < hi)
            return dm_err_set(err, "rank %d op %d (ns): %s has no Muon state over part %d on this rank", ex->rank, i,
                              real_matrix_name(ex, id), op->part);
        if (!finite_range(q->G, lo, hi)) note_bad(&C(ex)->bad_reduced, id);
        ns_muon_momentum_f(q->G + lo, q->mom + (lo - q->st_lo), q->mom_n + (lo - q->st_lo), q->O + lo, (size_t)(hi - lo),
                           mp->momentum, mp->nesterov);
    }
    if (!q->H && !(q->H = dm_malloc((size_t)(n * n) * 4, err))) return -1;
    if (op->stage % 2 == 0) return ns_split_gram_f(q->O + lo, rows, n, q->H, err);
    if (ns_split_step_f(q->O + lo, rows, n, q->H, op->stage / 2, &mp->ns, err) < 0) return -1;
    if (op->stage == 2 * op->iters - 1) q->ns_done = 1;
    return 0;
}

/* One matrix of an ns, muon-update or adamw op. */
static int update_one(real_exec *ex, int i, const dm_op *op, int64_t id, dm_err *err)
{
    cpu *c = C(ex);
    rparam *q = &c->p[id];
    const ns_muon_params *mp = &ex->o.muon;
    switch (op->kind) {
    case DM_OP_NS: {
        if (!q->muon)
            return dm_err_set(err, "rank %d op %d (ns): %s is not a Muon matrix", ex->rank, i, real_matrix_name(ex, id));
        if (op->parts > 1) return split_ns(ex, i, op, q, id, err);
        if (q->gr_lo != 0 || q->gr_hi != q->size)
            return dm_err_set(err, "rank %d op %d (ns): the reduced gradient of %s is not on this rank", ex->rank, i,
                              real_matrix_name(ex, id));
        if (!q->mom || q->st_lo != 0 || q->st_hi != q->size)
            return dm_err_set(err, "rank %d op %d (ns): %s has no whole Muon state on this rank", ex->rank, i,
                              real_matrix_name(ex, id));
        if (!finite_range(q->G, 0, q->size)) note_bad(&c->bad_reduced, id);
        ns_muon_momentum_f(q->G, q->mom, q->mom_n, q->O, (size_t)q->size, mp->momentum, mp->nesterov);
        ns_opts no = mp->ns;
        no.algo = op->algo;
        if (ns_ref_f(q->O, q->O, q->rows, q->cols, &no, err) < 0) return -1;
        q->ns_done = 1;
        return 0;
    }
    case DM_OP_MUON_UPDATE: {
        if (!q->ns_done)
            return dm_err_set(err, "rank %d op %d (muon-update): no ns of %s before it this step", ex->rank, i,
                              real_matrix_name(ex, id));
        /* FSDP: the rank updates its reduce-scatter shard (the NS ran on the whole); a split NS
         * its part */
        int64_t lo = q->rs_hi > q->rs_lo ? q->rs_lo : 0, hi = q->rs_hi > q->rs_lo ? q->rs_hi : q->size;
        if (op->parts > 1 && split_part(ex, i, op, q, &lo, &hi, err) < 0) return -1;
        ns_muon_apply_f(q->W + lo, q->Wn + lo, q->O + lo, (size_t)(hi - lo), mp->lr, mp->weight_decay,
                        ns_muon_scale(mp, q->rows, q->cols));
        q->up_lo = lo;
        q->up_hi = hi;
        q->applied = 1;
        return 0;
    }
    case DM_OP_ADAMW: {
        int64_t lo = q->gr_lo, hi = q->gr_hi;
        if (hi <= lo) return 0;
        if (!q->m1 || lo < q->st_lo || hi > q->st_hi)
            return dm_err_set(err, "rank %d op %d (adamw): %s updates [%lld, %lld), outside its state [%lld, %lld) on this "
                              "rank", ex->rank, i, real_matrix_name(ex, id), (long long)lo, (long long)hi,
                              (long long)q->st_lo, (long long)q->st_hi);
        if (!finite_range(q->G, lo, hi)) note_bad(&c->bad_reduced, id);
        int64_t s = lo - q->st_lo;
        if (ns_adamw_f(q->W + lo, q->Wn + lo, q->m1 + s, q->m1n + s, q->m2 + s, q->m2n + s, q->G + lo,
                       (size_t)(hi - lo), ex->adam_t + 1, &ex->o.adamw, err) < 0)
            return -1;
        q->up_lo = q->up_hi > q->up_lo ? (lo < q->up_lo ? lo : q->up_lo) : lo;
        q->up_hi = hi > q->up_hi ? hi : q->up_hi;
        q->applied = 1;
        return 0;
    }
    default: return 0;
    }
}

static int run_compute(real_exec *ex, int i, dm_err *err)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    if (op->kind == DM_OP_FORWARD || op->kind == DM_OP_BACKWARD) {
        const wk_layer *lp = &ex->wl.L[op->layer];
        int fwd = op->kind == DM_OP_FORWARD;
        for (int k = 0; k < (fwd ? lp->n_fwd : lp->n_bwd); k++) {
            if (fwd) run_fwd(ex, op->layer, &lp->fwd[k]);
            else run_bwd(ex, op->layer, &lp->bwd[k]);
        }
        if (fwd) return 0;
    }
    int64_t *pl;
    int np, owned, rc = 0;
    if (real_op_params(ex, op, &pl, &np, &owned, err) < 0) return -1;
    for (int k = 0; k < np && rc == 0; k++) {
        if (op->kind == DM_OP_BACKWARD) backward_done(ex, pl[k], &C(ex)->p[pl[k]]);
        else rc = update_one(ex, i, op, pl[k], err);
    }
    if (owned) free(pl);
    return rc;
}

/* ---- collectives ------------------------------------------------------------------------- */

static int64_t flat_total(real_exec *ex, const dm_op *op)
{
    int64_t t = 0;
    for (int k = 0; k < op->n_params; k++) t += C(ex)->p[op->params[k]].size;
    return t;
}

/* The flat range an op moves: a part (program.h) or the whole of its params. */
static void op_span(real_exec *ex, const dm_op *op, int64_t *lo, int64_t *hi)
{
    int64_t total = flat_total(ex, op);
    *lo = 0, *hi = total;
    if (op->parts > 1) dm_flat_shard(total, op->parts, op->part, lo, hi);
}

static void extend_gr(rparam *q, int64_t lo, int64_t hi)
{
    if (q->gr_hi <= q->gr_lo) q->gr_lo = lo, q->gr_hi = hi;
    else {
        if (lo < q->gr_lo) q->gr_lo = lo;
        if (hi > q->gr_hi) q->gr_hi = hi;
    }
}

/* Copy between the flat view [lo, hi) of op's params and buf (buf[0] = element lo). */
enum { FROM_G, FROM_W, TO_G, TO_W, TO_G_RS };
static void flat_copy(real_exec *ex, const dm_op *op, int64_t lo, int64_t hi, float *buf, int what, int src_rank)
{
    int64_t base = 0;
    for (int k = 0; k < op->n_params && base < hi; k++) {
        rparam *q = &C(ex)->p[op->params[k]];
        int64_t a = lo > base ? lo : base, b = hi < base + q->size ? hi : base + q->size;
        if (a < b) {
            int64_t pa = a - base, n = b - a;
            float *bp = buf + (a - lo);
            switch (what) {
            case FROM_G: memcpy(bp, q->G + pa, (size_t)n * 4); break;
            case FROM_W: memcpy(bp, q->Wn + pa, (size_t)n * 4); break;
            case TO_G_RS:
                q->rs_lo = pa, q->rs_hi = pa + n;
                /* fall through */
            case TO_G:
                memcpy(q->G + pa, bp, (size_t)n * 4);
                extend_gr(q, pa, pa + n);
                break;
            case TO_W:
                memcpy(q->Wn + pa, bp, (size_t)n * 4);
                /* a value committed in an earlier step also replaces the stale current copy */
                if (!real_src_updated_before(&ex->facts, src_rank, op->coll, op->params[k]))
                    memcpy(q->W + pa, bp, (size_t)n * 4);
                break;
            }
        }
        base += q->size;
    }
}

/* Pack (unpack = 0) or unpack member k's contribution to an all-gather (real_work.h).
 * Packing a gradient range this rank does not hold reduced is a program error: -1. */
static int ag_copy(real_exec *ex, const dm_op *op, int k, float *buf, int unpack, int src_rank)
{
    const real_range *g = ex->facts.ag[op->coll] + (size_t)k * op->n_params;
    int grad = op->payload == DM_PAYLOAD_GRADS;
    int64_t off = 0;
    for (int a = 0; a < op->n_params; a++) {
        if (g[a].hi <= g[a].lo) continue;
        rparam *q = &C(ex)->p[op->params[a]];
        int64_t lo = g[a].lo, n = g[a].hi - g[a].lo;
        if (!unpack) {
            if (grad && (lo < q->gr_lo || lo + n > q->gr_hi)) return -1;
            memcpy(buf + off, (grad ? q->G : q->Wn) + lo, (size_t)n * 4);
        } else if (grad) {
            memcpy(q->G + lo, buf + off, (size_t)n * 4);
            extend_gr(q, lo, lo + n);
        } else {
            memcpy(q->Wn + lo, buf + off, (size_t)n * 4);
            if (!real_src_updated_before(&ex->facts, src_rank, op->coll, op->params[a]))
                memcpy(q->W + lo, buf + off, (size_t)n * 4);
        }
        off += n;
    }
    return 0;
}

/* Post op i: pack its send buffer and start the collective table's exact form. */
static int post_coll(real_exec *ex, int i, dm_err *err)
{
    cpu *c = C(ex);
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[i];
    const dm_coll *k = dm_coll_of(op->kind);
    int n = ex->prog->groups[op->group].n, me = ex->gidx[op->group];
    int root = op->root >= 0 ? real_group_index(ex->prog, op->group, op->root) : -1;
    int64_t total = flat_total(ex, op), plo, phi;
    op_span(ex, op, &plo, &phi);
    /* the collective's size in elements: the flat buffer (a part's range), padded to n shards
     * where it splits; an all-gather's slots are the facts' (every member's largest contribution) */
    rparam *gq = op->payload == DM_PAYLOAD_GRAM ? &c->p[op->params[0]] : NULL; /* a split NS's Gram */
    int64_t size = gq ? (int64_t)dm_gram_elems(gq->cols)
                   : op->kind == DM_OP_ALLGATHER ? ex->facts.ag_slot[op->coll] * n
                   : op->kind == DM_OP_REDUCESCATTER ? (total + n - 1) / n * n : phi - plo;
    if (gq && !gq->H)
        return dm_err_set(err, "rank %d op %d (all-reduce, collective %d): no split NS Gram of %s before it", ex->rank,
                          i, op->coll, real_matrix_name(ex, op->params[0]));
    if (size * n > INT_MAX)
        return dm_err_set(err, "rank %d op %d: collective of %lld elements is too large for the CPU backend", ex->rank,
                          i, (long long)total);
    pending *pd = &c->pend[c->n_pend];
    memset(pd, 0, sizeof *pd);
    pd->op = i;
    size_t nsend = dm_coll_send_count(k, (size_t)size, n), nrecv = dm_coll_exact_recv(k, (size_t)size, n, me, root);
    if (!(pd->send = dm_calloc(nsend ? nsend : 1, 4, err)) || !(pd->recv = dm_calloc(nrecv ? nrecv : 1, 4, err))) {
        free(pd->send);
        return -1;
    }
    if (gq) { /* the upper triangle, row by row (program.h) */
        int64_t n = gq->cols, e = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = r; j < n; j++) pd->send[e++] = gq->H[r * n + j];
    } else if (op->kind == DM_OP_ALLGATHER) {
        if (ag_copy(ex, op, me, pd->send, 0, ex->rank) < 0) {
            free(pd->send), free(pd->recv);
            return dm_err_set(err, "rank %d op %d (all-gather, collective %d): this rank does not hold the reduced "
                              "gradient it should contribute", ex->rank, i, op->coll);
        }
    } else if (op->kind != DM_OP_BROADCAST || me == root) {
        flat_copy(ex, op, plo, op->kind == DM_OP_REDUCESCATTER ? total : phi, pd->send,
                  op->payload == DM_PAYLOAD_WEIGHTS ? FROM_W : FROM_G, ex->rank);
    }
    int rc = k->mpi_exact(pd->send, pd->recv, (size_t)size, root, &c->gcomm[op->group], &pd->req);
    if (rc != MPI_SUCCESS) {
        free(pd->send), free(pd->recv);
        return dm_err_set(err, "rank %d op %d (%s, collective %d): MPI error %d", ex->rank, i,
                          dm_op_kind_name(op->kind), op->coll, rc);
    }
    c->n_pend++;
    return 0;
}

/* A collective done: sum what the exact form gathered, in ascending rank order, and unpack. */
static void finish_coll(real_exec *ex, pending *pd)
{
    const dm_op *op = &ex->prog->ranks[ex->rank].ops[pd->op];
    const dm_group *g = &ex->prog->groups[op->group];
    int n = g->n, me = ex->gidx[op->group];
    int root = op->root >= 0 ? real_group_index(ex->prog, op->group, op->root) : -1;
    int64_t total = flat_total(ex, op), s = (total + n - 1) / n, plo, phi;
    op_span(ex, op, &plo, &phi);
    int64_t span = phi - plo;
    if (op->payload == DM_PAYLOAD_GRAM) { /* the members' Grams summed in rank order, both triangles */
        rparam *q = &C(ex)->p[op->params[0]];
        int64_t m = q->cols, e = 0;
        span = (int64_t)dm_gram_elems(m);
        for (int j = 1; j < n; j++)
            for (int64_t x = 0; x < span; x++) pd->recv[x] += pd->recv[j * span + x];
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = r; c < m; c++, e++) q->H[r * m + c] = q->H[c * m + r] = pd->recv[e];
        free(pd->send);
        free(pd->recv);
        pd->send = pd->recv = NULL;
        return;
    }
    switch (dm_coll_of(op->kind)->exact) {
    case DM_COLL_EXACT_GATHER:
        if (me != root) break;
        /* fall through */
    case DM_COLL_EXACT_ALLGATHER:
        for (int j = 1; j < n; j++)
            for (int64_t e = 0; e < span; e++) pd->recv[e] += pd->recv[j * span + e];
        flat_copy(ex, op, plo, phi, pd->recv, TO_G, ex->rank);
        if (op->parts > 1 && op->kind == DM_OP_REDUCE) /* a part summed across the replicas: a whole update */
            for (int a = 0; a < op->n_params; a++) C(ex)->p[op->params[a]].rs_lo = C(ex)->p[op->params[a]].rs_hi = 0;
        break;
    case DM_COLL_EXACT_ALLTOALL: {
        for (int j = 1; j < n; j++)
            for (int64_t e = 0; e < s; e++) pd->recv[e] += pd->recv[j * s + e];
        int64_t lo = me * s, hi = lo + s < total ? lo + s : total;
        if (lo < hi) flat_copy(ex, op, lo, hi, pd->recv, TO_G_RS, ex->rank);
        break;
    }
    case DM_COLL_EXACT_NATIVE:
        if (op->kind == DM_OP_BROADCAST) {
            if (me != root) flat_copy(ex, op, plo, phi, pd->send, TO_W, op->root);
        } else { /* all-gather */
            int64_t slot = ex->facts.ag_slot[op->coll];
            for (int j = 0; j < n; j++)
                if (j != me || op->payload == DM_PAYLOAD_GRADS) ag_copy(ex, op, j, pd->recv + j * slot, 1, g->ranks[j]);
        }
        break;
    }
    free(pd->send);
    free(pd->recv);
    pd->send = pd->recv = NULL;
}

/* ---- the step ---------------------------------------------------------------------------- */

static int cpu_step_begin(real_exec *ex, dm_err *err)
{
    (void)err;
    cpu *c = C(ex);
    for (int64_t i = 0; i < ex->n_mx; i++) {
        rparam *q = &c->p[i];
        size_t ns = (size_t)(q->st_hi - q->st_lo) * 4;
        memcpy(q->Wn, q->W, (size_t)q->size * 4);
        if (q->mom) memcpy(q->mom_n, q->mom, ns);
        if (q->m1) memcpy(q->m1n, q->m1, ns), memcpy(q->m2n, q->m2, ns);
        q->gr_lo = q->gr_hi = q->up_lo = q->up_hi = q->rs_lo = q->rs_hi = 0;
        q->ns_done = q->applied = 0;
    }
    c->loss = 0;
    memset(c->state, 0, (size_t)ex->prog->ranks[ex->rank].n_ops);
    c->n_pend = 0;
    c->bad_reduced = c->bad_local = -1;
    return 0;
}

static int op_ready(const cpu *c, const dm_op *op, int i)
{
    for (int d = 0; d < op->n_deps; d++)
        if (c->state[op->deps[d]] != 2) return 0;
    if (c->prev_stream[i] >= 0 && c->state[c->prev_stream[i]] != 2) return 0;
    if (c->prev_coll[i] >= 0 && c->state[c->prev_coll[i]] == 0) return 0;
    return 1;
}

static void pending_summary(real_exec *ex, char *buf, size_t len)
{
    cpu *c = C(ex);
    size_t k = 0;
    buf[0] = 0;
    for (int j = 0; j < c->n_pend && k + 80 < len; j++) {
        const dm_op *op = &ex->prog->ranks[ex->rank].ops[c->pend[j].op];
        k += (size_t)snprintf(buf + k, len - k, "%sop %d (%s, collective %d, group %d)", j ? ", " : "", c->pend[j].op,
                              dm_op_kind_name(op->kind), op->coll, op->group);
    }
}

static int cpu_step_run(real_exec *ex, double t0, real_step_local *out, dm_err *err)
{
    cpu *c = C(ex);
    const dm_rank_prog *rp = &ex->prog->ranks[ex->rank];
    int n = rp->n_ops, n_done = 0, first = 0;
    double last_progress = t0;
    while (n_done < n) {
        int progressed = 0;
        for (int i = first; i < n; i++) {
            const dm_op *op = &rp->ops[i];
            if (c->state[i] || !op_ready(c, op, i)) continue;
            ex->op_t0[i] = dm_clock_us() - t0;
            if (dm_op_is_collective(op->kind)) {
                if (post_coll(ex, i, err) < 0) return -1;
                c->state[i] = 1;
            } else {
                if (run_compute(ex, i, err) < 0) return -1;
                c->state[i] = 2;
                ex->op_dur[i] = dm_clock_us() - t0 - ex->op_t0[i];
                n_done++;
            }
            progressed = 1;
        }
        while (first < n && c->state[first] == 2) first++;
        for (int j = 0; j < c->n_pend; j++) {
            int flag = 0;
            MPI_Test(&c->pend[j].req, &flag, MPI_STATUS_IGNORE);
            if (!flag) continue;
            pending done = c->pend[j];
            c->pend[j] = c->pend[--c->n_pend];
            j--;
            finish_coll(ex, &done);
            c->state[done.op] = 2;
            ex->op_dur[done.op] = dm_clock_us() - t0 - ex->op_t0[done.op];
            n_done++;
            progressed = 1;
        }
        double t = dm_clock_us();
        if (progressed) {
            last_progress = t;
            continue;
        }
        if (t - last_progress > ex->o.timeout_s * 1e6) {
            char buf[512];
            pending_summary(ex, buf, sizeof buf);
            return dm_err_set(err, "rank %d: step %d: no progress for %.0f s (--timeout); waiting for %s", ex->rank,
                              ex->step, ex->o.timeout_s, c->n_pend ? buf : "(nothing posted)");
        }
        if (!c->n_pend)
            return dm_err_set(err, "rank %d: step %d: no op can start (dependency cycle?)", ex->rank, ex->step);
        struct timespec nap = {0, 20000}; /* let oversubscribed ranks run */
        nanosleep(&nap, NULL);
    }
    /* every param whose NS ran must have been applied */
    for (int64_t i = 0; i < ex->n_mx; i++)
        if (c->p[i].ns_done && !c->p[i].applied)
            return dm_err_set(err, "rank %d: step %d: ns of %s ran but no muon-update followed", ex->rank, ex->step,
                              real_matrix_name(ex, i));
    out->loss = c->loss;
    out->bad_local = c->bad_local;
    out->bad_reduced = c->bad_reduced;
    return 0;
}

static int cpu_step_end(real_exec *ex, int kept, dm_err *err)
{
    (void)err;
    if (!kept) return 0;
    for (int64_t i = 0; i < ex->n_mx; i++) {
        rparam *q = &C(ex)->p[i];
        float *t;
        t = q->W, q->W = q->Wn, q->Wn = t;
        if (q->mom) t = q->mom, q->mom = q->mom_n, q->mom_n = t;
        if (q->m1) {
            t = q->m1, q->m1 = q->m1n, q->m1n = t;
            t = q->m2, q->m2 = q->m2n, q->m2n = t;
        }
        q->own_lo = q->up_lo;
        q->own_hi = q->up_hi;
    }
    return 0;
}

/* ---- state access -------------------------------------------------------------------------- */

static void cpu_param_info(const real_exec *ex, int64_t i, real_pinfo *pi)
{
    const rparam *q = &C(ex)->p[i];
    *pi = (real_pinfo){q->size, q->own_lo, q->own_hi, q->mom != NULL, q->m1 != NULL};
}

static int cpu_param_weights(real_exec *ex, int64_t i, int64_t lo, int64_t hi, float *dst, dm_err *err)
{
    (void)err;
    if (hi > lo) memcpy(dst, C(ex)->p[i].W + lo, (size_t)(hi - lo) * 4);
    return 0;
}

/* A state array over [st_lo, st_hi) to or from a whole host array (zeros outside the range). */
static void state_io(const rparam *q, float *st, float *whole, int to_whole)
{
    size_t n = (size_t)(q->st_hi - q->st_lo) * 4;
    if (!to_whole) {
        memcpy(st, whole + q->st_lo, n);
        return;
    }
    memset(whole, 0, (size_t)q->size * 4);
    memcpy(whole + q->st_lo, st, n);
}

static int cpu_param_get(real_exec *ex, int64_t i, float *W, float *mom, float *m1, float *m2, dm_err *err)
{
    (void)err;
    rparam *q = &C(ex)->p[i];
    if (W) memcpy(W, q->W, (size_t)q->size * 4);
    if (mom && q->mom) state_io(q, q->mom, mom, 1);
    if (m1 && q->m1) state_io(q, q->m1, m1, 1), state_io(q, q->m2, m2, 1);
    return 0;
}

static int cpu_param_put(real_exec *ex, int64_t i, const float *W, const float *mom, const float *m1, const float *m2,
                         int64_t own_lo, int64_t own_hi, dm_err *err)
{
    (void)err;
    rparam *q = &C(ex)->p[i];
    if (W) memcpy(q->W, W, (size_t)q->size * 4);
    if (mom && q->mom) state_io(q, q->mom, (float *)mom, 0);
    if (m1 && q->m1) state_io(q, q->m1, (float *)m1, 0), state_io(q, q->m2, (float *)m2, 0);
    q->own_lo = own_lo;
    q->own_hi = own_hi;
    return 0;
}

const real_backend_ops real_backend_cpu = {
    .name = "cpu",
    .precheck = cpu_precheck,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .step_begin = cpu_step_begin,
    .step_run = cpu_step_run,
    .step_end = cpu_step_end,
    .abort = NULL,
    .param_info = cpu_param_info,
    .param_weights = cpu_param_weights,
    .param_get = cpu_param_get,
    .param_put = cpu_param_put,
};
