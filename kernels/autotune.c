/* autotune.c: the NS autotuner and its on-disk cache (see autotune.h). */
#include "autotune.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

/* ---- cache -------------------------------------------------------------------------------- */

typedef struct at_entry {
    char gpu[128];
    int cuda;
    long cublaslt;
    at_key k;
    at_result r;
} at_entry;

struct at_cache {
    char *path;
    char gpu[128];
    int cuda;
    long cublaslt;
    at_entry *e;
    int n, cap;
};

/* GPU names contain spaces; the file is tab-separated so they need no quoting. */
#define AT_MAGIC "# dmuon-autotune-1"

static void gpu_name_clean(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++) dst[i] = (src[i] == '\t' || src[i] == '\n') ? ' ' : src[i];
    dst[i] = 0;
}

/* Fields: gpu cuda cublaslt m n batch algo dtype sym_blocks sym_blocks_mm heuristic median_us
 * min_us max_us gate_rel flops_nominal flops_executed gemm_picks kernel sym_scheme (20,
 * tab-separated; "-" for no picks; kernel as ns_kernel_name; sym_scheme "levels" or "flat",
 * ns_config.sym_flat). Lines of 17 fields (written before the per-GEMM picks existed) read as no
 * picks, lines of 17 or 18 (before our kernels) as kernel "lt", lines of 17 to 19 (before the
 * flat scheme) as "levels". */
#define AT_FIELDS 20
static int parse_line(const char *path, int line, char *s, at_entry *e, dm_err *err)
{
    char *f[AT_FIELDS + 1];
    int nf = 0;
    for (char *p = s; nf <= AT_FIELDS;) {
        f[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    if (nf < AT_FIELDS - 3 || nf > AT_FIELDS)
        return dm_err_set(err, "%s:%d:1: expected %d (or %d to %d) tab-separated fields, got %d", path, line,
                          AT_FIELDS, AT_FIELDS - 3, AT_FIELDS - 1, nf);
    memset(e, 0, sizeof *e);
    e->r.kernel = NS_KERNEL_LT;
    if (nf == AT_FIELDS) {
        if (!strcmp(f[19], "flat")) e->r.sym_flat = 1;
        else if (strcmp(f[19], "levels"))
            return dm_err_set(err, "%s:%d:%d: expected levels or flat (the symmetric products' scheme), got '%s'", path,
                              line, (int)(f[19] - s) + 1, f[19]);
    }
    if (nf >= AT_FIELDS - 1 && ns_kernel_parse(f[18], &e->r.kernel))
        return dm_err_set(err, "%s:%d:%d: expected a kernel name (lt, sym64, ...), got '%s'", path, line,
                          (int)(f[18] - s) + 1, f[18]);
    if (nf >= AT_FIELDS - 2 && strcmp(f[17], "-")) {
        size_t len = strlen(f[17]);
        if (len > NS_MAX_PICKS || strspn(f[17], "0123456789abcdef") != len)
            return dm_err_set(err, "%s:%d:%d: expected '-' or up to %d hex digits (per-GEMM picks), got '%s'",
                              path, line, (int)(f[17] - s) + 1, NS_MAX_PICKS, f[17]);
        memcpy(e->r.gemm_picks, f[17], len + 1);
    }
    gpu_name_clean(e->gpu, sizeof e->gpu, f[0]);
    double v[AT_FIELDS];
    for (int i = 1; i < 17; i++) { /* the numeric fields and the two names among them */
        char *end;
        if (i == 6 || i == 7) continue; /* algo, dtype names */
        errno = 0;
        v[i] = strtod(f[i], &end);
        if (end == f[i] || *end || errno)
            return dm_err_set(err, "%s:%d:%d: expected a number in field %d, got '%s'", path, line,
                              (int)(f[i] - s) + 1, i + 1, f[i]);
    }
    e->cuda = (int)v[1];
    e->cublaslt = (long)v[2];
    e->k.m = (int64_t)v[3];
    e->k.n = (int64_t)v[4];
    e->k.batch = (int)v[5];
    if (!strcmp(f[6], "direct")) e->k.algo = DM_NS_DIRECT;
    else if (!strcmp(f[6], "gram")) e->k.algo = DM_NS_GRAM;
    else return dm_err_set(err, "%s:%d:%d: expected direct or gram", path, line, (int)(f[6] - s) + 1);
    if (!strcmp(f[7], "bf16")) e->k.dtype = DM_DT_BF16;
    else if (!strcmp(f[7], "fp16")) e->k.dtype = DM_DT_FP16;
    else return dm_err_set(err, "%s:%d:%d: expected bf16 or fp16", path, line, (int)(f[7] - s) + 1);
    e->r.sym_blocks = (int)v[8];
    e->r.sym_blocks_mm = (int)v[9];
    e->r.heuristic = (int)v[10];
    e->r.median_us = v[11];
    e->r.min_us = v[12];
    e->r.max_us = v[13];
    e->r.gate_rel = v[14];
    e->r.flops_nominal = v[15];
    e->r.flops_executed = v[16];
    if (e->k.m < 1 || e->k.n < e->k.m || e->k.batch < 1 || e->r.sym_blocks < 1 || e->r.sym_blocks_mm < 1)
        return dm_err_set(err, "%s:%d:1: expected 1 <= m <= n, batch >= 1, sym_blocks >= 1", path, line);
    return 0;
}

int at_cache_open(const char *path, const ns_device_info *dev, at_cache **out, dm_err *err)
{
    *out = NULL;
    at_cache *c = dm_calloc(1, sizeof *c, err);
    if (!c) return -1;
    c->path = dm_strdup(path, err);
    if (!c->path) goto fail;
    gpu_name_clean(c->gpu, sizeof c->gpu, dev->name);
    c->cuda = dev->cuda_runtime;
    c->cublaslt = (long)dev->cublaslt_version;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) {
            *out = c;
            return 0;
        }
        dm_err_set(err, "%s: %s", path, strerror(errno));
        goto fail;
    }
    char buf[1024];
    int line = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        buf[strcspn(buf, "\r\n")] = 0;
        if (buf[0] == '#' || buf[0] == 0) continue;
        if (c->n == c->cap) {
            int nc = c->cap ? 2 * c->cap : 64;
            at_entry *ne = dm_realloc(c->e, sizeof *ne * (size_t)nc, err);
            if (!ne) {
                fclose(f);
                goto fail;
            }
            c->e = ne;
            c->cap = nc;
        }
        if (parse_line(path, line, buf, &c->e[c->n], err)) {
            fclose(f);
            goto fail;
        }
        c->n++;
    }
    fclose(f);
    *out = c;
    return 0;
fail:
    at_cache_close(c);
    return -1;
}

static int key_eq(const at_key *a, const at_key *b)
{
    return a->m == b->m && a->n == b->n && a->batch == b->batch && a->algo == b->algo &&
           a->dtype == b->dtype;
}

/* The entry was measured on GPU gpu with these CUDA and cuBLASLt versions. */
static int env_is(const at_entry *e, const char *gpu, int cuda, long cublaslt)
{
    return !strcmp(e->gpu, gpu) && e->cuda == cuda && e->cublaslt == cublaslt;
}

/* The entry was measured on this cache's GPU with its CUDA and cuBLASLt versions. */
static int same_env(const at_cache *c, const at_entry *e) { return env_is(e, c->gpu, c->cuda, c->cublaslt); }

static at_entry *find(const at_cache *c, const at_key *k)
{
    for (int i = 0; i < c->n; i++) {
        at_entry *e = &c->e[i];
        if (same_env(c, e) && key_eq(&e->k, k)) return e;
    }
    return NULL;
}

int at_cache_lookup(const at_cache *c, const at_key *k, at_result *r)
{
    at_entry *e = find(c, k);
    if (!e) return 0;
    *r = e->r;
    return 1;
}

/* The GPU (and versions) whose entries of algorithm algo and dtype dt a GPU with none of its own
 * borrows: the one with the most such entries (ties: the first in the file); -1 when none. */
static int donor_of(const at_cache *c, dm_ns_algo algo, dm_dtype dt)
{
    int best = -1, best_n = 0;
    for (int i = 0; i < c->n; i++) {
        const at_entry *e = &c->e[i];
        if (e->k.algo != algo || e->k.dtype != dt) continue;
        if (same_env(c, e)) return -1; /* its own */
        int first = 1, n = 0; /* counted at the env's first entry of the kind only */
        for (int j = 0; j < c->n && first; j++) {
            const at_entry *o = &c->e[j];
            if (o->k.algo != algo || o->k.dtype != dt || !env_is(o, e->gpu, e->cuda, e->cublaslt)) continue;
            if (j < i) first = 0;
            n++;
        }
        if (first && n > best_n) best = i, best_n = n;
    }
    return best;
}

int at_config_for(const at_cache *c, int64_t rows, int64_t cols, int batch, dm_ns_algo algo,
                  ns_config *cfg)
{
    ns_config_default(cfg, algo);
    at_key k = {rows < cols ? rows : cols, rows < cols ? cols : rows, batch, algo, cfg->work};
    at_result r;
    if (!c) return 0;
    /* A GPU with no entry of its own for the algorithm (the executor on a card the cache was not
     * tuned on: an H100 or an A800 beside the committed H200 cache) ran defaults: symmetric products
     * as full GEMMs, where the simulator prices its NS from the tuned GPU's rows (projected), timed
     * with that GPU's configurations. It now takes what the rules below give that GPU (the one
     * with the most entries of the algorithm): block counts, scheme and kernel (ours run on sm_80
     * and sm_90, else cuBLASLt); not the cuBLASLt heuristic index nor the per-GEMM picks, which
     * name that GPU's algorithms. Returns 4 (0 when that GPU's rules give defaults). */
    int d = donor_of(c, algo, k.dtype);
    if (d >= 0) {
        at_cache dc = *c;
        snprintf(dc.gpu, sizeof dc.gpu, "%s", c->e[d].gpu);
        dc.cuda = c->e[d].cuda;
        dc.cublaslt = c->e[d].cublaslt;
        if (!at_config_for(&dc, rows, cols, batch, algo, cfg)) return 0;
        cfg->heuristic = 0;
        cfg->gemm_picks[0] = 0;
        return 4;
    }
    if (at_cache_lookup(c, &k, &r)) {
        at_result_config(&r, algo, cfg);
        return 1;
    }
    /* a batch never tuned: the block counts and heuristic of the largest tuned batch below it
     * (same shape, algorithm, dtype; batches > 1 only); per-GEMM picks are per batch, not taken */
    const at_entry *best = NULL;
    for (int i = 0; i < c->n && batch > 1; i++) {
        const at_entry *e = &c->e[i];
        if (same_env(c, e) && e->k.m == k.m && e->k.n == k.n && e->k.algo == k.algo && e->k.dtype == k.dtype &&
            e->k.batch > 1 && e->k.batch < batch && (!best || e->k.batch > best->k.batch))
            best = e;
    }
    if (best) {
        r = best->r;
        r.gemm_picks[0] = 0;
        at_result_config(&r, algo, cfg);
        return 2;
    }
    /* a batch > 1 whose shape is tuned at batch 1 only, or a shape never tuned: the block counts
     * and scheme of the nearest tuned shape (log2 distance in m and n, the shape itself first;
     * same algorithm and dtype; cuBLASLt entries), at its batch nearest in log2. Unseen models'
     * matrices otherwise ran their symmetric products as full GEMMs (traces/validate/h200-33-unseen:
     * 4096 x 12288 and 4096 x 14336 Gram batches 14-20% slower than the rows of their
     * neighbours). Its heuristic, picks and kernel are per shape: not taken. */
    for (int i = 0; i < c->n && batch == 1; i++) {
        const at_entry *e = &c->e[i];
        if (same_env(c, e) && e->k.m == k.m && e->k.n == k.n && e->k.algo == k.algo && e->k.dtype == k.dtype)
            return 0; /* batch 1 does not borrow from its own shape's batches */
    }
    double bd = 0, bb = 0, lm = log2((double)k.m), ln = log2((double)k.n), lb = log2((double)batch);
    for (int i = 0; i < c->n; i++) {
        const at_entry *e = &c->e[i];
        if (!same_env(c, e) || e->k.algo != k.algo || e->k.dtype != k.dtype || e->r.kernel != NS_KERNEL_LT) continue;
        double dm = log2((double)e->k.m) - lm, dn = log2((double)e->k.n) - ln;
        double d = dm * dm + dn * dn, db = fabs(log2((double)e->k.batch) - lb);
        if (!best || d < bd - 1e-12 || (d < bd + 1e-12 && db < bb)) best = e, bd = d, bb = db;
    }
    if (!best) return 0;
    ns_config_default(cfg, algo);
    cfg->sym_blocks = best->r.sym_blocks;
    cfg->sym_blocks_mm = best->r.sym_blocks_mm;
    cfg->sym_flat = best->r.sym_flat;
    return 3;
}

void at_result_config(const at_result *r, dm_ns_algo algo, ns_config *cfg)
{
    ns_config_default(cfg, algo);
    cfg->sym_blocks = r->sym_blocks;
    cfg->sym_blocks_mm = r->sym_blocks_mm;
    cfg->sym_flat = r->sym_flat;
    cfg->heuristic = r->heuristic;
    snprintf(cfg->gemm_picks, sizeof cfg->gemm_picks, "%s", r->gemm_picks);
    cfg->kernel = r->kernel;
}

int at_cache_store(at_cache *c, const at_key *k, const at_result *r, dm_err *err)
{
    at_entry *e = find(c, k);
    if (!e) {
        if (c->n == c->cap) {
            int nc = c->cap ? 2 * c->cap : 64;
            at_entry *ne = dm_realloc(c->e, sizeof *ne * (size_t)nc, err);
            if (!ne) return -1;
            c->e = ne;
            c->cap = nc;
        }
        e = &c->e[c->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->gpu, sizeof e->gpu, "%s", c->gpu);
        e->cuda = c->cuda;
        e->cublaslt = c->cublaslt;
        e->k = *k;
    }
    e->r = *r;
    return 0;
}

int at_cache_save(at_cache *c, dm_err *err)
{
    dm_out *o = dm_out_open(c->path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    fprintf(f, AT_MAGIC "\n# gpu\tcuda\tcublaslt\tm\tn\tbatch\talgo\tdtype\tsym_blocks\tsym_blocks_mm\theuristic"
               "\tmedian_us\tmin_us\tmax_us\tgate_rel\tflops_nominal\tflops_executed\tgemm_picks\tkernel\tsym_scheme\n");
    for (int i = 0; i < c->n; i++) {
        const at_entry *e = &c->e[i];
        fprintf(f, "%s\t%d\t%ld\t%" PRId64 "\t%" PRId64 "\t%d\t%s\t%s\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3g\t%.6g\t%.6g\t%s\t%s\t%s\n",
                e->gpu, e->cuda, e->cublaslt, e->k.m, e->k.n, e->k.batch, dm_ns_algo_name(e->k.algo),
                dm_dtype_name(e->k.dtype), e->r.sym_blocks, e->r.sym_blocks_mm, e->r.heuristic, e->r.median_us,
                e->r.min_us, e->r.max_us, e->r.gate_rel, e->r.flops_nominal, e->r.flops_executed,
                e->r.gemm_picks[0] ? e->r.gemm_picks : "-", ns_kernel_name(e->r.kernel), e->r.sym_flat ? "flat" : "levels");
    }
    return dm_out_commit(o, err);
}

void at_cache_close(at_cache *c)
{
    if (!c) return;
    free(c->path);
    free(c->e);
    free(c);
}

/* ---- tuning ------------------------------------------------------------------------------- */

void at_options_default(at_options *o)
{
    memset(o, 0, sizeof *o);
    int sb[] = {1, 2, 4, 8};
    memcpy(o->sym_blocks, sb, sizeof sb);
    o->n_sym = 4;
    o->sym_schemes = 3;
    o->heuristics[0] = 0;
    o->n_heur = 1;
    o->warmup = 3;
    o->reps = 20;
    o->use_graph = 1;
    o->min_block = 256;
    o->heur_max_elems = INT64_C(1) << 24;
    o->tune_gemms = 1;
    for (int k = 0; k < NS_KERNEL_COUNT; k++) o->kernels[k] = (ns_kernel)k;
    o->n_kernels = NS_KERNEL_COUNT;
    o->fused_max_elems = INT64_C(1) << 26;
}

static int tries_kernel(const at_options *o, ns_kernel k)
{
    for (int i = 0; i < o->n_kernels; i++)
        if (o->kernels[i] == k) return 1;
    return 0;
}

/* Our kernel k is worth timing for this shape: it takes it (block: in a direct plan), and
 * (fused) the problem is small enough that one persistent kernel can win, (128-tiles) m fills
 * more than two tile rows. */
static int kernel_worth(const at_options *o, ns_kernel k, dm_ns_algo algo, int64_t m, int64_t n, int batch)
{
    if (!tries_kernel(o, k) || !ns_kernel_supported(k, m, n, batch)) return 0;
    if (ns_kernel_is_block(k)) return algo == DM_NS_DIRECT; /* direct only (ns_cuda.h) */
    if (k == NS_KERNEL_FUSED32 || k == NS_KERNEL_FUSED64 || k == NS_KERNEL_FUSED128)
        return m * n * batch <= o->fused_max_elems && (k != NS_KERNEL_FUSED128 || m * n * batch >= (INT64_C(1) << 22));
    if (k == NS_KERNEL_SYM128 || k == NS_KERNEL_SYM128S3) return m >= 384;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct run_ctx {
    ns_plan *p;
    int graph;
} run_ctx;

static int run_plan(void *arg, ns_stream s, dm_err *err)
{
    run_ctx *r = arg;
    return ns_plan_run(r->p, s, r->graph, err);
}

/* Fill the plan's input (deterministic per seed: the same values, rounded to io), poison its
 * output, run once. */
static int gate_run(ns_plan *p, dm_dtype io, int64_t elems, uint64_t seed, ns_stream s, int graph,
                    dm_err *err)
{
    return ns_fill_random(ns_plan_input(p), io, elems, seed, 1.0f, s, err) ||
                   ns_fill_poison(ns_plan_output(p), io, elems, s, err) ||
                   ns_plan_run(p, s, graph, err) || ns_sync(s, err)
               ? -1
               : 0;
}

/* Time one configuration (after the gate); keep it in *best when faster. */
static int tune_one(int64_t m, int64_t n, int batch, const ns_config *cfg, const at_options *o,
                    uint64_t seed, ns_stream s, const void *ref, void *scratch, double *t,
                    at_result *best, at_report_fn report, void *report_ctx, dm_err *err)
{
    int64_t elems = m * n * batch;
    ns_plan *p = NULL;
    at_key key = {m, n, batch, cfg->algo, cfg->work};
    at_result r;
    memset(&r, 0, sizeof r);
    r.sym_blocks = cfg->sym_blocks;
    r.sym_blocks_mm = cfg->sym_blocks_mm;
    r.sym_flat = cfg->sym_flat;
    r.heuristic = cfg->heuristic;
    r.kernel = cfg->kernel;
    snprintf(r.gemm_picks, sizeof r.gemm_picks, "%s", cfg->gemm_picks);
    /* input and output in the iteration dtype (bf16 direct, fp16 Gram: the executor feeds a
     * Gram plan fp16 from the momentum kernel and reads fp16 in the apply kernel); the gate
     * compares in bf16, converting outside the timed runs */
    if (ns_plan_create(m, n, batch, cfg->work, cfg, &p, err) ||
        gate_run(p, cfg->work, elems, seed, s, o->use_graph, err))
        goto fail;
    if (cfg->work != DM_DT_BF16) {
        if (ns_convert(ns_plan_output(p), cfg->work, scratch, DM_DT_BF16, elems, s, err)) goto fail;
    } else if (ns_copy_d2d(scratch, ns_plan_output(p), (size_t)elems * 2, s, err)) {
        goto fail;
    }
    if (ns_rel_diff(scratch, ref, DM_DT_BF16, elems, s, &r.gate_rel, err)) goto fail;
    ns_plan_stats st;
    ns_plan_get_stats(p, &st);
    r.flops_nominal = st.flops_nominal;
    r.flops_executed = st.flops_executed;
    if (!(r.gate_rel <= AT_GATE_REL)) {
        if (report) report(report_ctx, &key, &r, 1, "output differs from the reference");
        ns_plan_destroy(p);
        return 0;
    }
    run_ctx rc_ = {p, o->use_graph};
    if (ns_time_events(run_plan, &rc_, s, o->warmup, o->reps, t, err)) goto fail;
    r.mhz = ns_time_last_mhz();
    if (o->reps > 1) qsort(t, (size_t)o->reps, sizeof *t, cmp_double);
    r.min_us = t[0];
    r.max_us = t[o->reps - 1];
    r.median_us = o->reps % 2 ? t[o->reps / 2] : 0.5 * (t[o->reps / 2 - 1] + t[o->reps / 2]);
    if (report) report(report_ctx, &key, &r, 0, NULL);
    if (best->median_us < 0 || r.median_us < best->median_us) *best = r;
    ns_plan_destroy(p);
    return 0;
fail:
    ns_plan_destroy(p);
    return -1;
}

int at_tune_shape(int64_t m, int64_t n, int batch, const dm_ns_algo *algos, int n_algos,
                  const at_options *o, uint64_t seed, ns_stream s, at_result *results,
                  at_report_fn report, void *report_ctx, dm_err *err)
{
    int64_t elems = m * n * batch;
    void *ref = NULL, *scratch = NULL;
    ns_plan *p = NULL;
    double *t = NULL;
    int rc = -1;
    for (int a = 0; a < n_algos; a++) {
        memset(&results[a], 0, sizeof results[a]);
        results[a].median_us = -1;
        results[a].sym_blocks = results[a].sym_blocks_mm = 1;
    }
    t = dm_malloc(sizeof *t * (size_t)(o->reps > 0 ? o->reps : 1), err);
    if (!t || ns_dev_alloc(&ref, (size_t)elems * 2, err) ||
        ns_dev_alloc(&scratch, (size_t)elems * 2, err))
        goto out;
    { /* reference output: direct, full GEMMs, heuristic 0 */
        ns_config cfg;
        ns_config_default(&cfg, DM_NS_DIRECT);
        double rr = 0;
        if (ns_plan_create(m, n, batch, DM_DT_BF16, &cfg, &p, err) ||
            gate_run(p, DM_DT_BF16, elems, seed, s, 0, err) ||
            ns_rel_diff(ns_plan_output(p), ns_plan_output(p), DM_DT_BF16, elems, s, &rr, err))
            goto out;
        if (!(rr == 0)) {
            dm_err_set(err, "autotune %" PRId64 "x%" PRId64 " batch %d: the reference output has non-finite values",
                       m, n, batch);
            goto out;
        }
        if (ns_copy_d2d(ref, ns_plan_output(p), (size_t)elems * 2, s, err)) goto out;
        ns_plan_destroy(p);
        p = NULL;
    }
    for (int a = 0; a < n_algos; a++) {
        /* coordinate search: the X X^T block count (m x m products full), then the m x m
         * products' block count, then (small problems) cuBLASLt heuristic indices */
        int best_x = 1, best_mm = 1, best_flat = 0, best_h = o->heuristics[0], fixed = 0;
        for (int i = 0; i < o->n_lt_fixed && tries_kernel(o, NS_KERNEL_LT); i++)
            if (o->lt_fixed[i].algo == algos[a] && o->lt_fixed[i].r.kernel == NS_KERNEL_LT) {
                ns_config cfg;
                at_result_config(&o->lt_fixed[i].r, algos[a], &cfg);
                if (tune_one(m, n, batch, &cfg, o, seed, s, ref, scratch, t, &results[a], report, report_ctx, err))
                    goto out;
                best_x = cfg.sym_blocks;
                best_mm = cfg.sym_blocks_mm;
                best_flat = cfg.sym_flat;
                best_h = cfg.heuristic;
                fixed = 1;
            }
        for (int stage = 0; stage < 3 && !fixed && tries_kernel(o, NS_KERNEL_LT); stage++) {
            /* stages 0 and 1: each block count in each scheme asked for (one flag for both
             * products: the pair is timed as a whole) */
            int n_try = stage == 2 ? o->n_heur : 2 * o->n_sym;
            for (int ti = 0; ti < n_try; ti++) {
                ns_config cfg;
                ns_config_default(&cfg, algos[a]);
                cfg.sym_blocks = best_x;
                cfg.sym_blocks_mm = best_mm;
                cfg.sym_flat = best_flat;
                cfg.heuristic = best_h;
                if (stage < 2) cfg.sym_flat = ti % 2;
                if (stage == 0) cfg.sym_blocks = o->sym_blocks[ti / 2];
                else if (stage == 1) cfg.sym_blocks_mm = o->sym_blocks[ti / 2];
                else cfg.heuristic = o->heuristics[ti];
                int kb = stage == 0 ? cfg.sym_blocks : cfg.sym_blocks_mm;
                if (stage < 2 && kb > 1 && m / kb < o->min_block) continue;
                if (stage < 2 && kb > 1 && !(o->sym_schemes & (1 << cfg.sym_flat))) continue;
                if (stage < 2 && kb == 1 && cfg.sym_flat) continue; /* one full product: no scheme */
                if (stage == 1 && kb == 1) continue;     /* measured in stage 0 */
                if (stage == 2 && (cfg.heuristic == best_h || elems > o->heur_max_elems)) continue;
                if (tune_one(m, n, batch, &cfg, o, seed, s, ref, scratch, t, &results[a], report,
                             report_ctx, err))
                    goto out;
                best_x = results[a].sym_blocks;
                best_mm = results[a].sym_blocks_mm;
                best_flat = results[a].sym_flat;
                best_h = results[a].heuristic;
            }
        }
        for (int ki = 0; ki < o->n_kernels; ki++) { /* ours, on the best cuBLASLt settings for the rest */
            ns_kernel k = o->kernels[ki];
            if (k == NS_KERNEL_LT || !kernel_worth(o, k, algos[a], m, n, batch)) continue;
            ns_config cfg;
            ns_config_default(&cfg, algos[a]);
            cfg.sym_blocks = best_x;
            cfg.sym_blocks_mm = best_mm;
            cfg.heuristic = best_h;
            cfg.kernel = k;
            if (tune_one(m, n, batch, &cfg, o, seed, s, ref, scratch, t, &results[a], report, report_ctx, err))
                goto out;
        }
        if (o->tune_gemms && results[a].median_us >= 0) {
            /* the winner's GEMMs one by one; the tuned plan must then pass the gate and beat
             * the winner as a whole */
            ns_config cfg;
            at_result_config(&results[a], algos[a], &cfg);
            if (ns_plan_create(m, n, batch, cfg.work, &cfg, &p, err) || ns_plan_tune_gemms(p, s, err)) goto out;
            ns_plan_config(p, &cfg);
            ns_plan_destroy(p);
            p = NULL;
            int changed = 0; /* any pick other than the heuristic index every GEMM had */
            for (const char *c = cfg.gemm_picks; *c; c++)
                changed |= ns_pick_value(*c) != results[a].heuristic;
            if (changed &&
                tune_one(m, n, batch, &cfg, o, seed, s, ref, scratch, t, &results[a], report, report_ctx, err))
                goto out;
        }
    }
    rc = 0;
out:
    ns_plan_destroy(p);
    ns_dev_free(ref);
    ns_dev_free(scratch);
    free(t);
    return rc;
}
