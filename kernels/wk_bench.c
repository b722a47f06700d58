/* wk_bench.c: `dmuon bench work` (wk_bench.h): the distinct kernels of the models' steps and of
 * the GEMM grid, bound as the executor binds them (wk_plan.h), timed through wk_run (wk_cuda.h)
 * after a sustained load, medians of CUDA-event timings, a cache, the dmuon-costs-2 rows. */
#include "config.h"

#include "wk_bench.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "model.h"
#include "ns_bench.h"
#include "ns_cuda.h"
#include "outfile.h"
#include "wk_cuda.h"
#include "wk_plan.h"

const char *const wk_bench_validation_models[] = {"llama-3.2-3b", "qwen2.5-1.5b",  "qwen2.5-7b",
                                                  "wall-oss-flow", "qwen2.5-vl-3b", "moonlight-16b-a3b-6l", NULL};

void wk_bench_opts_default(wk_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    static const int64_t tok[] = {1024, 2048, 4096, 8192, 16384};
    memcpy(o->tokens, tok, sizeof tok);
    o->n_tokens = 5;
    o->grid = 1;
    for (int64_t v = 256; v <= 16384; v *= 2) o->grid_m[o->n_grid_m++] = v;
    for (int64_t v = 256; v <= 32768; v *= 2) o->grid_nk[o->n_grid_nk++] = v;
    o->warmup_ms = 10;
    o->min_ms = 10;
    o->reps = 10;
    o->sustain_s = 3;
}

/* ---- the kernels to time ------------------------------------------------------------------ */

typedef struct job {
    dm_kernel k;              /* as timed: a gemm of count 1; others as the workload lists them */
    wk_kb b;                  /* the executor's binding (rows, count, period, positions, ...) */
    wk_attn_geom g;           /* attention products */
    wk_map map;               /* lookups and routing (owned) */
    int has_map;
    char key[160];            /* op, algo, m, n, k, batch: the CSV row */
    char id[256];             /* key and what else the kernel depends on (identity) */
    char from[64];            /* the first model (or "grid") it came from */
    double est_us;            /* one call, roofline */
    double med, min, max;
    int state;                /* 0 to do, 1 timed, 2 from the cache, -1 failed */
} job;

typedef struct jobs {
    job *v;
    int n, cap;
} jobs;

static const char *row_op(const dm_kernel *k) { return dm_kern_kind_name(k->kind); }

static int64_t row_m(const dm_kernel *k) { return k->m; }

static void job_keys(job *j)
{
    const dm_kernel *k = &j->k;
    snprintf(j->key, sizeof j->key, "%s,%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64, row_op(k), dm_kern_op_name(k->op),
             row_m(k), k->n, k->k, k->batch);
    const wk_kb *b = &j->b;
    if (k->op >= DM_KOP_ATTN_SCORE && k->op <= DM_KOP_ATTN_DKEY)
        snprintf(j->id, sizeof j->id, "%s|h%" PRId64 "/%" PRId64 ",w%" PRId64 "/%" PRId64 ",v%" PRId64, j->key, j->g.heads,
                 j->g.kv_heads, j->g.win, j->g.kv_win, j->g.vd);
    else if (k->kind == DM_KERN_ELEM)
        snprintf(j->id, sizeof j->id, "%s|c%" PRId64 ",r%" PRId64 ",p%" PRId64 "/%" PRId64 ",K%" PRId64 ",t%" PRId64 "%s",
                 j->key, b->count, b->rows, b->period, b->positions, b->top_k, b->table_rows, b->accumulate ? ",acc" : "");
    else
        snprintf(j->id, sizeof j->id, "%s", j->key);
}

static int find_job(const jobs *J, const char *id)
{
    for (int i = 0; i < J->n; i++)
        if (!strcmp(J->v[i].id, id)) return i;
    return -1;
}

/* Add kernel b of a plan (its geometry and map from p) unless an equal one is there. */
static int add_job(jobs *J, const wk_kb *b, const wk_plan *p, const char *from, uint64_t ops, dm_err *err)
{
    if (ops && !(ops >> b->k.op & 1)) return 0; /* not an op kind asked for (--ops) */
    job j;
    memset(&j, 0, sizeof j);
    j.k = b->k;
    j.b = *b;
    /* products and reductions timed as they write a fresh gradient; the embedding's backward as
     * the step runs it (the plan's accumulate): zeroing an untied table first (its row keyed by
     * the table's rows, k), only adding the tokens' rows to a tied one (k 0; core/workload.c) */
    j.b.accumulate = b->k.op == DM_KOP_EMBED_BWD && b->accumulate;
    /* a kernel of count c is c launches of one matrix's: the row times one */
    if (j.k.count > 1) {
        double c = (double)j.k.count;
        j.k.flops /= c, j.k.bytes /= c, j.k.elems /= c;
        j.k.count = 1, j.b.count = 1;
    }
    if (b->attn >= 0) j.g = p->attn[b->attn];
    snprintf(j.from, sizeof j.from, "%s", from);
    job_keys(&j);
    if (find_job(J, j.id) >= 0) return 0;
    if (b->map >= 0) {
        if (wk_map_copy(&j.map, &p->maps[b->map], err)) return -1;
        j.has_map = 1;
    }
    if (J->n == J->cap) {
        int cap = J->cap ? 2 * J->cap : 256;
        job *v = dm_realloc(J->v, (size_t)cap * sizeof *v, err);
        if (!v) {
            wk_map_free(&j.map);
            return -1;
        }
        J->v = v;
        J->cap = cap;
    }
    J->v[J->n++] = j;
    return 0;
}

static void jobs_free(jobs *J)
{
    for (int i = 0; i < J->n; i++) wk_map_free(&J->v[i].map);
    free(J->v);
    memset(J, 0, sizeof *J);
}

/* Every kernel of model `name` at each token count. */
static int model_jobs(jobs *J, const char *name, const wk_bench_opts *o, dm_err *err)
{
    dm_model *m = NULL;
    dm_matrix *mx = NULL;
    int64_t n = 0;
    if (dm_model_load(name, &m, err) || dm_model_matrices(m, -1, &mx, &n, err)) {
        dm_model_free(m);
        return -1;
    }
    int rc = 0;
    for (int t = 0; t < o->n_tokens && rc == 0; t++) {
        wk_plan_opts po = {o->tokens[t], o->seq_len, 0, 1, 0, 1, o->causal_tile, 0};
        wk_plan p;
        dm_err e2;
        if (wk_plan_build(m, mx, n, &po, &p, &e2)) { /* e.g. tokens not a multiple of the seq-len */
            printf("# %s at %" PRId64 " tokens: skipped (%s)\n", m->name, o->tokens[t], e2.msg);
            continue;
        }
        for (int l = 0; l < p.n_layers && rc == 0; l++) {
            const wk_layer *lp = &p.L[l];
            for (int i = 0; i < lp->n_fwd && rc == 0; i++) rc = add_job(J, &lp->fwd[i], &p, m->name, o->ops, err);
            for (int i = 0; i < lp->n_bwd && rc == 0; i++) rc = add_job(J, &lp->bwd[i], &p, m->name, o->ops, err);
            for (int i = 0; i < lp->n_bwd && rc == 0; i++) { /* the check of each gradient it writes */
                wk_kb cb;
                memset(&cb, 0, sizeof cb);
                if (!dm_grad_check_kernel(&lp->bwd[i].k, &cb.k)) continue;
                cb.src = cb.attn = cb.map = -1;
                cb.count = cb.k.count, cb.rows = cb.k.m;
                rc = add_job(J, &cb, &p, m->name, o->ops, err);
            }
        }
        wk_plan_free(&p);
    }
    free(mx);
    dm_model_free(m);
    return rc;
}

static int grid_jobs(jobs *J, const wk_bench_opts *o, dm_err *err)
{
    static const dm_kern_op pass[] = {DM_KOP_FWD, DM_KOP_DGRAD, DM_KOP_WGRAD};
    for (int a = 0; a < o->n_grid_m; a++)
        for (int b = 0; b < o->n_grid_nk; b++)
            for (int c = 0; c < o->n_grid_nk; c++)
                for (int p = 0; p < 3; p++) {
                    wk_kb kb;
                    memset(&kb, 0, sizeof kb);
                    kb.k = (dm_kernel){DM_KERN_GEMM, pass[p], o->grid_m[a], o->grid_nk[b], o->grid_nk[c], 1, 1, -1, -1,
                                       0, 0, 0};
                    kb.attn = kb.map = -1;
                    if (add_job(J, &kb, NULL, "grid", o->ops, err)) return -1;
                }
    return 0;
}

/* ---- estimate -------------------------------------------------------------------------------- */

static void job_work(const job *j, double *flops, double *bytes)
{
    const dm_kernel *k = &j->k;
    if (k->kind != DM_KERN_ELEM) {
        double m = (double)k->m, n = (double)k->n, kk = (double)k->k, b = (double)k->batch;
        *flops = 2 * m * n * kk * b;
        *bytes = 2 * (m * kk + kk * n + m * n) * b;
    } else {
        *flops = 0;
        *bytes = k->bytes > 0 ? k->bytes : 4.0 * (double)k->m * (double)k->n * (double)k->count;
    }
}

/* Calls of one kernel: warm-up and timed, for a call of t us. */
static void calls_for(const wk_bench_opts *o, double t, int *warm, int *timed)
{
    double w = ceil(o->warmup_ms * 1e3 / (t > 0.5 ? t : 0.5)), r = ceil(o->min_ms * 1e3 / (t > 0.5 ? t : 0.5));
    *warm = (int)(w < 1 ? 1 : w > 20000 ? 20000 : w);
    *timed = (int)(r < o->reps ? o->reps : r > 1000 ? 1000 : r);
}

static double estimate_s(const wk_bench_opts *o, jobs *J, const dm_gpu *gpu, int *n_todo)
{
    double total = o->sustain_s * 1e6;
    *n_todo = 0;
    for (int i = 0; i < J->n; i++) {
        job *j = &J->v[i];
        double fl, by;
        job_work(j, &fl, &by);
        double t = fl / (0.6 * gpu->bf16_flops) * 1e6, tb = by / (0.7 * gpu->hbm_Bps) * 1e6;
        j->est_us = (t > tb ? t : tb) + gpu->launch_us;
        if (j->state) continue;
        int w, r;
        calls_for(o, j->est_us, &w, &r);
        total += ((w + r + 1) * j->est_us + 300) * (o->cool ? 2 : 1); /* + binding, filling, a sync; --cool idles as long */
        (*n_todo)++;
    }
    return total / 1e6;
}

/* ---- the cache ------------------------------------------------------------------------------- */

/* Lines "gpu \t cuda \t cublas \t id \t median \t min \t max" after "# dmuon-work-cache-1". */
static int cache_load(const char *path, const char *gpu, const char *ver, jobs *J, char ***lines, int *nl, dm_err *err)
{
    *lines = NULL;
    *nl = 0;
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : dm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    char buf[1024];
    int line = 0, cap = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        size_t L = strlen(buf);
        if (L && buf[L - 1] == '\n') buf[--L] = 0;
        if (line == 1) {
            if (strcmp(buf, "# dmuon-work-cache-1")) {
                fclose(f);
                return dm_err_set(err, "%s:1:1: expected '# dmuon-work-cache-1'", path);
            }
            continue;
        }
        if (!L || buf[0] == '#') continue;
        char g[256], v[128], id[256];
        double med, mn, mx;
        if (sscanf(buf, "%255[^\t]\t%127[^\t]\t%255[^\t]\t%lf\t%lf\t%lf", g, v, id, &med, &mn, &mx) != 6) {
            fclose(f);
            return dm_err_set(err, "%s:%d:1: expected gpu, versions, kernel and three times, tab-separated", path, line);
        }
        if (*nl == cap) { /* every line is kept: other GPUs' too */
            cap = cap ? 2 * cap : 256;
            char **nv = dm_realloc(*lines, (size_t)cap * sizeof *nv, err);
            if (!nv) {
                fclose(f);
                return -1;
            }
            *lines = nv;
        }
        if (!((*lines)[*nl] = dm_strdup(buf, err))) {
            fclose(f);
            return -1;
        }
        (*nl)++;
        if (strcmp(g, gpu) || strcmp(v, ver)) continue;
        int k = find_job(J, id);
        if (k >= 0 && J->v[k].state == 0) J->v[k].med = med, J->v[k].min = mn, J->v[k].max = mx, J->v[k].state = 2;
    }
    fclose(f);
    return 0;
}

static int cache_save(const char *path, const char *gpu, const char *ver, const jobs *J, char **lines, int nl,
                      dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, "# dmuon-work-cache-1\n");
    for (int i = 0; i < nl; i++) fprintf(f, "%s\n", lines[i]);
    for (int i = 0; i < J->n; i++)
        if (J->v[i].state == 1)
            fprintf(f, "%s\t%s\t%s\t%.3f\t%.3f\t%.3f\n", gpu, ver, J->v[i].id, J->v[i].med, J->v[i].min, J->v[i].max);
    return dm_out_commit(o, err);
}

/* ---- timing ----------------------------------------------------------------------------------- */

enum { P_A, P_B, P_C, P_X, P_W, P_R, P_G, P_DX, P_WS, P_LOSS, P_PTR, P_I0, P_I1, P_I2, P_I3, P_I4, P_AT0, P__N = P_AT0 + WK_A__N };

typedef struct pool {
    void *p[P__N];
    size_t cap[P__N];
    ns_stream s;
} pool;

/* Buffer `slot` of at least `bytes` (grown as needed; bf16 buffers filled with small random values). */
static void *get(pool *P, int slot, size_t bytes, int fill, dm_err *err)
{
    if (bytes < 16) bytes = 16;
    if (P->cap[slot] >= bytes) return P->p[slot];
    ns_dev_free(P->p[slot]);
    P->p[slot] = NULL;
    P->cap[slot] = 0;
    size_t want = bytes + bytes / 4;
    if (ns_dev_alloc(&P->p[slot], want, err)) return NULL;
    P->cap[slot] = want;
    if (fill && ns_fill_random(P->p[slot], DM_DT_BF16, (int64_t)(want / 2), 1000 + slot, 0.1f, P->s, err)) return NULL;
    return P->p[slot];
}

static int32_t *ints(pool *P, int slot, const int32_t *src, int64_t n, dm_err *err)
{
    if (!src || n <= 0) return NULL;
    void *d = get(P, slot, (size_t)n * 4, 0, err);
    if (!d || ns_copy_h2d(d, src, (size_t)n * 4, err)) return NULL;
    return d;
}

typedef struct tcall {
    wk_blas h;
    const dm_kernel *k;
    wk_args a;
} tcall;

static int run_call(void *arg, ns_stream s, dm_err *err)
{
    tcall *t = arg;
    return wk_run(t->h, t->k, &t->a, s, err);
}

#define OKP(x)                                                                                    \
    do {                                                                                          \
        if (!(x)) return -1;                                                                      \
    } while (0)

/* Bind job j's buffers as the executor does (wk_plan.h's kernel, random data). */
static int bind(pool *P, const job *j, tcall *t, dm_err *err)
{
    const dm_kernel *k = &j->k;
    const wk_kb *b = &j->b;
    wk_args *a = &t->a;
    t->k = k;
    wk_args_scalars(a, b, 1);
    int64_t cnt = b->count > 0 ? b->count : 1, rows = b->rows, n = k->n;
    if (k->op >= DM_KOP_ATTN_SCORE && k->op <= DM_KOP_ATTN_DKEY) {
        int64_t sz[WK_A__N];
        void *buf[WK_A__N];
        wk_attn_sizes(&j->g, sz);
        for (int i = 0; i < WK_A__N; i++) OKP(buf[i] = get(P, P_AT0 + i, (size_t)sz[i] * 2, 1, err));
        if (wk_attn_strided(&j->g)) {
            wk_attn_bind(&j->g, buf, k->op, NULL, a);
        } else {
            int64_t nb = k->batch;
            void **host = dm_malloc((size_t)(3 * nb) * sizeof *host, err), *dev;
            if (!host) return -1;
            wk_attn_bind(&j->g, buf, k->op, host, a);
            dev = get(P, P_PTR, (size_t)(3 * nb) * sizeof *host, 0, err);
            int bad = !dev || ns_copy_h2d(dev, host, (size_t)(3 * nb) * sizeof *host, err);
            free(host);
            if (bad) return -1;
            a->pa = (const void *const *)dev, a->pb = (const void *const *)dev + nb, a->pc = (void *const *)dev + 2 * nb;
        }
        return 0;
    }
    if (k->kind != DM_KERN_ELEM) { /* one product, or a strided batch of them */
        int64_t bt = k->batch;
        OKP(a->a = get(P, P_A, (size_t)(k->m * k->k * bt) * 2, 1, err));
        OKP(a->b = get(P, P_B, (size_t)(k->n * k->k * bt) * 2, 1, err));
        OKP(a->c = get(P, P_C, (size_t)(k->m * k->n * bt) * 2, 1, err));
        a->sa = k->m * k->k, a->sb = k->n * k->k, a->sc = k->m * k->n;
        a->alpha = k->op == DM_KOP_WGRAD && b->scale > 0 ? (float)b->scale : 1.0f;
        return 0;
    }
    const wk_map *mp = j->has_map ? &j->map : NULL;
    OKP(a->loss = get(P, P_LOSS, 16, 0, err));
    switch (k->op) {
    case DM_KOP_LOSS: OKP(a->r = get(P, P_R, (size_t)(cnt * rows * n) * 2, 1, err)); break;
    case DM_KOP_VECTOR:
    case DM_KOP_TABLE:
    case DM_KOP_VECTOR_BWD:
    case DM_KOP_TABLE_BWD: {
        int64_t pos = b->positions > 0 ? b->positions : 1;
        OKP(a->x = get(P, P_X, (size_t)(rows * n) * 2, 1, err));
        OKP(a->w = get(P, P_W, (size_t)(cnt * pos * n) * 2, 1, err));
        OKP(a->r = get(P, P_R, (size_t)(cnt * rows * n) * 2, 1, err));
        if (k->op == DM_KOP_VECTOR_BWD || k->op == DM_KOP_TABLE_BWD) {
            OKP(a->g = get(P, P_G, (size_t)(cnt * pos * n) * 2, 1, err));
            OKP(a->dx = get(P, P_DX, (size_t)(cnt * rows * n) * 2, 1, err));
            OKP(a->ws = get(P, P_WS, (size_t)wk_ws_floats(cnt, rows, n, b->period, pos) * 4, 0, err));
        }
        break;
    }
    case DM_KOP_EMBED:
        OKP(mp);
        OKP(a->w = get(P, P_W, (size_t)(k->k * n) * 2, 1, err));
        OKP(a->idx = ints(P, P_I0, mp->a, mp->n, err));
        OKP(a->r = get(P, P_R, (size_t)(rows * n) * 2, 1, err));
        break;
    case DM_KOP_EMBED_BWD:
        OKP(mp);
        OKP(a->r = get(P, P_R, (size_t)(rows * n) * 2, 1, err));
        OKP(a->g = get(P, P_G, (size_t)(b->table_rows * n) * 2, 1, err));
        OKP(a->csr_id = ints(P, P_I2, mp->uniq, mp->n_uniq, err));
        OKP(a->csr_off = ints(P, P_I3, mp->off, mp->n_uniq + 1, err));
        OKP(a->csr_tok = ints(P, P_I4, mp->tok, mp->n, err));
        a->csr_n = mp->n_uniq;
        break;
    case DM_KOP_ROUTE: {
        OKP(mp);
        int64_t tokens = 1; /* the rows it gathers from: the largest source row + 1 */
        for (int64_t q = 0; q < mp->n; q++)
            if (mp->a[q] + 1 > tokens) tokens = mp->a[q] + 1;
        OKP(a->x = get(P, P_X, (size_t)(tokens * n) * 2, 1, err));
        OKP(a->idx = ints(P, P_I0, mp->a, mp->n, err));
        OKP(a->g = get(P, P_G, (size_t)(mp->n * n) * 2, 1, err));
        break;
    }
    case DM_KOP_ROUTE_BWD:
        OKP(mp);
        OKP(a->r = get(P, P_R, (size_t)(mp->n * n) * 2, 1, err));
        OKP(a->idx = ints(P, P_I1, mp->inv, mp->n_inv, err));
        OKP(a->dx = get(P, P_DX, (size_t)(rows * n) * 2, 1, err));
        break;
    case DM_KOP_SOFTMAX: OKP(a->r = get(P, P_R, (size_t)(k->m * n) * 2, 1, err)); break;
    case DM_KOP_GRAD_CHECK: OKP(a->r = get(P, P_R, (size_t)(cnt * rows * n) * 2, 1, err)); break;
    case DM_KOP_SOFTMAX_BWD:
        OKP(a->x = get(P, P_X, (size_t)(k->m * n) * 2, 1, err));
        OKP(a->r = get(P, P_R, (size_t)(k->m * n) * 2, 1, err));
        break;
    case DM_KOP_ACT:
    case DM_KOP_ACT_BWD:
    case DM_KOP_GLU:
    case DM_KOP_GLU_BWD:
    case DM_KOP_RESID:
    case DM_KOP_RESID_BWD: /* the executor's: inputs at row stride n, the scratch out (wk_ref.h) */
        OKP(a->x = get(P, P_X, (size_t)(rows * n) * 2, 1, err));
        if (k->op != DM_KOP_ACT && k->op != DM_KOP_ACT_BWD) OKP(a->w = get(P, P_W, (size_t)(rows * n) * 2, 1, err));
        if (k->op == DM_KOP_ACT_BWD || k->op == DM_KOP_GLU_BWD) OKP(a->dx = get(P, P_DX, (size_t)(rows * n) * 2, 1, err));
        OKP(a->r = get(P, P_R, (size_t)(rows * n) * (k->op == DM_KOP_GLU_BWD ? 4 : 2), 1, err));
        a->ld = n;
        break;
    case DM_KOP_ROPE:
    case DM_KOP_ROPE_BWD: OKP(a->r = get(P, P_R, (size_t)(rows * n) * 2, 1, err)); break;
    default: return dm_err_set(err, "bench work: no binding for %s", dm_kern_op_name(k->op));
    }
    return 0;
}

/* Buffer sets a kernel's calls rotate over: as many as make its data a few times the L2 (so each
 * timed call reads its operands from HBM, as the step does: a kernel run again on one buffer
 * set reads them from the cache, which made the elementwise rows up to 1.8x too fast against
 * the same kernels timed inside the step, traces/validate/h200-4), at most WK_ROT sets and
 * about WK_ROT_BYTES of them. */
#define WK_ROT 16
#define WK_ROT_L2 (3.0 * 60e6)     /* three times the H200's 60 MB L2 */
#define WK_ROT_BYTES (2.0e9)

typedef struct rot {
    tcall t[WK_ROT];
    int n, i;
    int group; /* calls per timed interval (time_job) */
} rot;

static int run_rot(void *arg, ns_stream s, dm_err *err)
{
    rot *r = arg;
    for (int g = 0; g < r->group; g++) {
        tcall *t = &r->t[r->i];
        r->i = (r->i + 1) % r->n;
        if (wk_run(t->h, t->k, &t->a, s, err)) return -1;
    }
    return 0;
}

static int time_job(const wk_bench_opts *o, pool *P, wk_blas h, job *j, dm_err *err)
{
    static rot R; /* large: not on the stack */
    double fl, by;
    job_work(j, &fl, &by);
    int n = by > 0 ? (int)ceil(WK_ROT_L2 / by) : 1;
    if (n > WK_ROT) n = WK_ROT;
    if (n > 1 && n * by > WK_ROT_BYTES) n = (int)(WK_ROT_BYTES / by);
    if (n < 1) n = 1;
    R.n = n, R.i = 0, R.group = 1;
    for (int i = 0; i < n; i++) {
        R.t[i].h = h;
        if (bind(&P[i], j, &R.t[i], err)) return -1;
    }
    double first;
    if (ns_time_events(run_rot, &R, P->s, 1, 1, &first, err)) return -1;
    R.group = ns_bench_group(first); /* calls timed together between two events */
    int w, r;
    calls_for(o, first * R.group, &w, &r);
    double *times = dm_malloc((size_t)r * sizeof *times, err);
    if (!times) return -1;
    int rc = ns_time_events(run_rot, &R, P->s, w, r, times, err);
    for (int i = 0; rc == 0 && i < r; i++) times[i] /= R.group;
    if (rc == 0) ns_bench_stats(times, r, &j->med, &j->min, &j->max);
    free(times);
    return rc;
}

/* The sustained load: a bf16 GEMM back to back for `seconds` (0: one round); its rate at the
 * start and end. */
static int sustain(double seconds, pool *P, wk_blas h, double *tf0, double *tf1, dm_err *err)
{
    job j;
    memset(&j, 0, sizeof j);
    j.k = (dm_kernel){DM_KERN_GEMM, DM_KOP_FWD, 8192, 8192, 8192, 1, 1, -1, -1, 0, 0, 0};
    j.b.count = 1;
    tcall t;
    t.h = h;
    if (bind(P, &j, &t, err)) return -1;
    double fl = 2.0 * 8192.0 * 8192.0 * 8192.0, times[8], med, mn, mx;
    *tf0 = *tf1 = 0;
    time_t t0 = time(NULL);
    for (int round = 0; round == 0 || difftime(time(NULL), t0) < seconds; round++) {
        if (ns_time_events(run_call, &t, P->s, 8, 8, times, err)) return -1;
        ns_bench_stats(times, 8, &med, &mn, &mx);
        if (round == 0) *tf0 = fl / (med * 1e6);
        *tf1 = fl / (med * 1e6);
    }
    return 0;
}

static void print_row(const job *j, const dm_gpu *gpu)
{
    double fl, by;
    job_work(j, &fl, &by);
    double tf = j->med > 0 ? fl / (j->med * 1e6) : 0, gbs = j->med > 0 ? by / (j->med * 1e3) : 0;
    char hbm[16] = "";
    if (j->k.kind == DM_KERN_ELEM && gpu) snprintf(hbm, sizeof hbm, "%5.1f%%", 100.0 * gbs * 1e9 / gpu->hbm_Bps);
    printf("  %-6s %-11s %7" PRId64 " %7" PRId64 " %7" PRId64 " %6" PRId64 " %10.2f %10.2f %10.2f %8.1f %8.1f %7s %s%s\n",
           row_op(&j->k), dm_kern_op_name(j->k.op), row_m(&j->k), j->k.n, j->k.k, j->k.batch, j->med, j->min, j->max, tf,
           gbs, hbm, j->from, j->state == 2 ? " (cached)" : "");
}

/* the models' kernels first (a --max-seconds cut leaves out grid shapes first), each part by
 * its estimated time (the buffers then grow as the kernels do) */
static int cmp_est(const void *a, const void *b)
{
    const job *x = a, *y = b;
    int gx = !strcmp(x->from, "grid"), gy = !strcmp(y->from, "grid");
    if (gx != gy) return gx - gy;
    return (x->est_us > y->est_us) - (x->est_us < y->est_us);
}

int wk_bench_work(const wk_bench_opts *o, dm_err *err)
{
    jobs J = {0};
    static pool PP[WK_ROT]; /* the buffer sets time_job rotates over; PP[0] also the sustained load's */
    pool *P0 = &PP[0];
    memset(PP, 0, sizeof PP);
    wk_blas h = NULL;
    dm_out *csv = NULL;
    char **cl = NULL;
    int ncl = 0, rc = -1;
    /* the kernels: every model's at every token count, then the grid */
    for (int i = 0; i < o->n_models; i++) {
        const char *name = o->models[i];
        if (!strcmp(name, "validation")) {
            for (int k = 0; wk_bench_validation_models[k]; k++)
                if (model_jobs(&J, wk_bench_validation_models[k], o, err)) goto done;
        } else if (!strcmp(name, "all")) {
            char **paths = NULL;
            int np = 0;
            if (ns_bench_model_paths(&paths, &np, err)) goto done;
            int bad = 0;
            for (int k = 0; k < np; k++) {
                if (!bad && model_jobs(&J, paths[k], o, err)) bad = 1;
                free(paths[k]);
            }
            free(paths);
            if (bad) goto done;
        } else if (model_jobs(&J, name, o, err)) {
            goto done;
        }
    }
    int n_model_jobs = J.n;
    if (o->grid && grid_jobs(&J, o, err)) goto done;

    ns_device_info dev;
    memset(&dev, 0, sizeof dev);
    int have_dev = !o->dry_run && ns_device_query(&dev, err) == 0;
    if (!o->dry_run && !have_dev) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        dm_err_set(err, "no usable GPU: %s", m);
        goto done;
    }
    const dm_gpu *gpu = have_dev ? dm_gpu_find(dev.name) : NULL;
    if (!gpu) gpu = dm_gpu_find("H200");
    char gname[256] = "", ver[128] = "";
    if (have_dev) {
        snprintf(gname, sizeof gname, "%s", dev.name);
        for (char *p = gname; *p; p++)
            if (*p == ',' || *p == '\t') *p = ' ';
        size_t lt = dev.cublaslt_version;
        /* "rotated": timed over rotating buffer sets (time_job); rows timed before on one buffer
         * set (L2-resident operands) carry no such word and are never taken from the cache;
         * "grouped": calls timed back to back in groups (rows timed one call per event pair
         * before are not taken either) */
        snprintf(ver, sizeof ver, "cuda %d.%d cublas %zu.%zu.%zu rotated grouped%s", dev.cuda_runtime / 1000,
                 dev.cuda_runtime % 1000 / 10, lt / 10000, lt / 100 % 100, lt % 100, o->cool ? " cool" : "");
        if (o->cache_path && cache_load(o->cache_path, gname, ver, &J, &cl, &ncl, err)) goto done;
    }
    int n_todo = 0;
    double est = estimate_s(o, &J, gpu, &n_todo);
    printf("# dmuon bench work%s%s: %d distinct kernels (%d of the models' steps at", have_dev ? " on " : "",
           have_dev ? gname : " (dry run)", J.n, n_model_jobs);
    for (int t = 0; t < o->n_tokens; t++) printf("%s%" PRId64, t ? "," : " ", o->tokens[t]);
    printf(" tokens per rank%s, %d of the GEMM grid); %d to time (%d from the cache)\n",
           o->seq_len ? ", seq-len set" : "", J.n - n_model_jobs, n_todo, J.n - n_todo);
    printf("# estimate: about %.0f s of GPU time (%.0f s sustained load first; per kernel %.0f ms warm-up, >= %d calls "
           "and %.0f ms timed; roofline of the %s at 60%% of its bf16 rate and 70%% of its HBM)\n", est, o->sustain_s,
           o->warmup_ms, o->reps, o->min_ms, gpu->short_name);
    fflush(stdout);
    if (J.n > 1) qsort(J.v, (size_t)J.n, sizeof *J.v, cmp_est);
    if (o->dry_run) {
        if (o->list)
            for (int i = 0; i < J.n; i++)
                printf("  %-60s %-22s %10.1f us (roofline)\n", J.v[i].id, J.v[i].from, J.v[i].est_us);
        rc = 0;
        goto done;
    }
    if (ns_stream_create(&P0->s, err) || wk_blas_create(&h, err)) goto done;
    for (int i = 1; i < WK_ROT; i++) PP[i].s = P0->s;
    double tf0 = 0, tf1 = 0;
    if (sustain(o->sustain_s, P0, h, &tf0, &tf1, err)) goto done;
    printf("# sustained bf16 GEMM 8192^3: %.1f TFLOP/s at the start, %.1f after %.0f s\n", tf0, tf1, o->sustain_s);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    if (o->out_csv) {
        if (!(csv = dm_out_open(o->out_csv, err))) goto done;
        fprintf(dm_out_file(csv), "# dmuon-costs-2\n# source: measured\n# gpu: %s\n# cuda: %d.%d\n# cublas: %zu.%zu.%zu\n"
                "# date: %s\n# command: %s\n# sustained_gemm_tflops: %.1f\n# power_state: %s\n"
                "gpu,op,algo,m,n,k,batch,dtype,median_us,min_us,max_us\n", gname, dev.cuda_runtime / 1000,
                dev.cuda_runtime % 1000 / 10, dev.cublaslt_version / 10000, dev.cublaslt_version / 100 % 100,
                dev.cublaslt_version % 100, date, o->cmdline ? o->cmdline : "dmuon bench work", tf1,
                o->cool ? "cool (each kernel followed by an idle as long as its timing)" : "as run (back to back)");
    }
    printf("# %-6s %-11s %7s %7s %7s %6s %10s %10s %10s %8s %8s %7s %s\n", "op", "algo", "m", "n", "k", "batch",
           "median_us", "min_us", "max_us", "TFLOP/s", "GB/s", "HBM%", "from");
    int progress = isatty(2), done_n = 0, left = 0;
    time_t t_start = time(NULL);
    for (int i = 0; i < J.n; i++) {
        job *j = &J.v[i];
        if (j->state == 0 && o->max_s > 0 && difftime(time(NULL), t_start) > o->max_s) {
            left++;
            continue;
        }
        if (j->state == 0) {
            done_n++;
            if (progress)
                fprintf(stderr, "\r[%d/%d] %-60.60s %4.0f s ", done_n, n_todo, j->id, difftime(time(NULL), t_start));
            double c0 = dm_clock_us();
            if (time_job(o, PP, h, j, err)) {
                fprintf(stderr, "%sdmuon bench work: %s: %s\n", progress ? "\n" : "", j->id, err->msg);
                goto done;
            }
            j->state = 1;
            if (o->cool) { /* idle as long as it ran: at most half the time busy, which the H200 holds
                            * at full clock (traces/device/power-2026-12-01) */
                double us = dm_clock_us() - c0;
                if (us > 0) usleep((useconds_t)(us < 5e6 ? us : 5e6));
            }
        }
        print_row(j, gpu);
    }
    if (progress) fprintf(stderr, "\r%90s\r", "");
    if (done_n) { /* the reference GEMM again: how far the run's own load throttled the GPU */
        double te0 = 0, te1 = 0;
        dm_err e2 = {0};
        if (sustain(0, P0, h, &te0, &te1, &e2)) /* a report only: the rows are kept */
            printf("# bf16 GEMM 8192^3 after the last kernel: not measured (%s)\n", e2.msg);
        else
            printf("# bf16 GEMM 8192^3 after the last kernel: %.1f TFLOP/s (%.1f at the start of the sustained load)\n",
                   te0, tf0);
    }
    if (left) printf("# stopped after %.0f s (--max-seconds): %d kernels not timed, left out of the rows\n", o->max_s, left);
    if (csv) { /* one row per CSV key: the first kernel of it */
        FILE *f = dm_out_file(csv);
        for (int i = 0; i < J.n; i++) {
            int dup = J.v[i].state != 1 && J.v[i].state != 2;
            for (int k = 0; k < i && !dup; k++) dup = !strcmp(J.v[k].key, J.v[i].key) && J.v[k].state > 0;
            if (!dup)
                fprintf(f, "%s,%s,bf16,%.2f,%.2f,%.2f\n", gname, J.v[i].key, J.v[i].med, J.v[i].min, J.v[i].max);
        }
        dm_out *c = csv;
        csv = NULL;
        if (dm_out_commit(c, err)) goto done;
        printf("# wrote %s\n", o->out_csv);
    }
    if (o->cache_path && cache_save(o->cache_path, gname, ver, &J, cl, ncl, err)) goto done;
    printf("# %d kernels timed, %d from the cache, in %.0f s\n", done_n, J.n - done_n, difftime(time(NULL), t_start));
    rc = 0;
done:
    dm_out_abort(csv);
    for (int i = 0; i < ncl; i++) free(cl[i]);
    free(cl);
    for (int r = 0; r < WK_ROT; r++)
        for (int i = 0; i < P__N; i++) ns_dev_free(PP[r].p[i]);
    wk_blas_destroy(h);
    if (P0->s) ns_stream_destroy(P0->s);
    jobs_free(&J);
    return rc;
}
