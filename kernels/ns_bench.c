/* ns_bench.c: the NS kernel-cost benchmark (ns_bench.h): shape lists, timings (CUDA events,
 * medians), the autotuner per shape and batch, products, elementwise kernels, the table and the
 * dmuon-costs-1 CSV. */
#include "config.h"

#include "ns_bench.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "ns_cuda.h"
#include "outfile.h"
/* the executor's gradient conversion and check, which it runs before each tensor's AdamW
 * (real/real_gpu.c update_op): the adamw rows time the pair */
#include "step_kern.h"

/* ---- shapes ------------------------------------------------------------------------------- */

int ns_bench_shapes_add(ns_bench_shapes *l, int64_t r, int64_t c, const long *b, int nb, dm_err *err)
{
    int64_t m = r < c || l->as_stored ? r : c, n = r < c || l->as_stored ? c : r;
    for (int i = 0; i < l->n; i++)
        if (l->v[i].m == m && l->v[i].n == n && l->v[i].n_batches == 0 && nb == 0) return 0;
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 64;
        ns_bench_shape *nv = dm_realloc(l->v, sizeof *nv * (size_t)nc, err);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    ns_bench_shape *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    s->m = m;
    s->n = n;
    for (int i = 0; i < nb && i < NS_BENCH_MAX_BATCHES; i++) s->batches[s->n_batches++] = b[i];
    return 0;
}

/* Lines "ROWS COLS [B1,B2,...]" ('x' or ',' also separate rows and cols); '#' comments. */
int ns_bench_shapes_read(ns_bench_shapes *l, const char *path, dm_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return dm_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    char buf[512];
    int line = 0, rc = 0;
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        line++;
        char *h = strchr(buf, '#');
        if (h) *h = 0;
        char *p = buf, *end;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '\n') continue;
        long long r = strtoll(p, &end, 10);
        if (end == p || r < 1) {
            rc = dm_err_set(err, "%s:%d:%d: expected the row count", path, line, (int)(p - buf) + 1);
            break;
        }
        p = end;
        while (*p == ' ' || *p == 'x' || *p == ',' || *p == '\t') p++;
        long long c = strtoll(p, &end, 10);
        if (end == p || c < 1) {
            rc = dm_err_set(err, "%s:%d:%d: expected the column count", path, line, (int)(p - buf) + 1);
            break;
        }
        p = end;
        long b[NS_BENCH_MAX_BATCHES];
        int nb = 0;
        while (*p == ' ' || *p == '\t') p++;
        while (*p && *p != '\n' && *p != '\r') {
            if (nb == NS_BENCH_MAX_BATCHES) {
                rc = dm_err_set(err, "%s:%d:%d: expected at most %d batch sizes for one shape (give the rest on another "
                                "line of the same shape)", path, line, (int)(p - buf) + 1, NS_BENCH_MAX_BATCHES);
                break;
            }
            long v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > 4096) {
                rc = dm_err_set(err, "%s:%d:%d: expected a batch size in 1..4096", path, line, (int)(p - buf) + 1);
                break;
            }
            b[nb++] = v;
            p = end;
            while (*p == ',' || *p == ' ' || *p == '\t') p++;
        }
        if (rc == 0) rc = ns_bench_shapes_add(l, r, c, b, nb, err);
    }
    fclose(f);
    return rc;
}

static int shapes_from_model(ns_bench_shapes *l, const char *name, dm_err *err)
{
    dm_model *md = NULL;
    if (dm_model_load(name, &md, err)) return -1;
    int rc = 0;
    for (int i = 0; i < md->n_tensors && rc == 0; i++) {
        const dm_tensor *t = &md->tensors[i];
        if (t->role == DM_ROLE_MUON && t->ndim == 2) rc = ns_bench_shapes_add(l, t->rows, t->cols, NULL, 0, err);
    }
    dm_model_free(md);
    return rc;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int ns_bench_model_paths(char ***out, int *n_out, dm_err *err)
{
    *out = NULL;
    *n_out = 0;
    const char *dir = dm_model_dir();
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return dm_err_set(err, "no bundled models folder found");
    char **names = NULL;
    int nn = 0, cap = 0, rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json")) continue;
        if (nn == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = dm_realloc(names, (size_t)cap * sizeof *nv, err);
            if (!nv) {
                rc = -1;
                break;
            }
            names = nv;
        }
        if (!(names[nn] = dm_malloc(strlen(dir) + len + 2, err))) {
            rc = -1;
            break;
        }
        sprintf(names[nn++], "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (rc) {
        for (int i = 0; i < nn; i++) free(names[i]);
        free(names);
        return -1;
    }
    if (nn > 1) qsort(names, (size_t)nn, sizeof *names, cmp_cstr);
    *out = names;
    *n_out = nn;
    return 0;
}

/* "all": every model file in the bundled models folder. */
static int shapes_from_all_models(ns_bench_shapes *l, dm_err *err)
{
    char **names = NULL;
    int nn = 0, rc = 0;
    if (ns_bench_model_paths(&names, &nn, err)) return -1;
    for (int i = 0; i < nn; i++) {
        if (rc == 0) rc = shapes_from_model(l, names[i], err);
        free(names[i]);
    }
    free(names);
    return rc;
}

int ns_bench_shapes_model(ns_bench_shapes *l, const char *name, dm_err *err)
{
    return !strcmp(name, "all") ? shapes_from_all_models(l, err) : shapes_from_model(l, name, err);
}

void ns_bench_shapes_free(ns_bench_shapes *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_shape(const void *a, const void *b)
{
    const ns_bench_shape *x = a, *y = b;
    double fx = (double)x->m * x->m * x->n, fy = (double)y->m * y->m * y->n;
    if (fx != fy) return (fx > fy) - (fx < fy);
    return (x->m > y->m) - (x->m < y->m);
}

/* ---- the benchmark ------------------------------------------------------------------------ */


typedef struct bench {
    ns_device_info dev;
    ns_stream s;
    int warmup, reps;
    double peak_tflops; /* measured bf16 GEMM rate in this run */
    FILE *csv;          /* NULL: no CSV */
    int verbose, progress;
    char gpu[256];
} bench;

typedef struct stats3 {
    double med, min, max;
    double mhz; /* the SM clock over the timing (ns_time_last_mhz), 0 when not read */
} stats3;

int ns_bench_group(double one_us)
{
    int g = one_us > 0 ? (int)ceil(200.0 / one_us) : 64;
    return g < 1 ? 1 : g > 64 ? 64 : g;
}

static int time_fn(bench *B, ns_enqueue_fn fn, void *arg, stats3 *st, dm_err *err)
{
    double t[1024];
    int reps = B->reps < 1024 ? B->reps : 1024;
    if (ns_time_events(fn, arg, B->s, B->warmup, reps, t, err)) return -1;
    ns_bench_stats(t, reps, &st->med, &st->min, &st->max);
    st->mhz = ns_time_last_mhz();
    return 0;
}

static void human_header(void)
{
    printf("# %-12s %5s %-11s %-7s %-5s %5s %10s %10s %10s %8s %8s %6s %5s\n", "shape(mxn)", "batch",
           "op", "algo", "dtype", "var", "median_us", "min_us", "max_us", "TFLOP/s", "exec_TF", "peak%", "MHz");
}

/* One result: a human line on stdout and a CSV row. flops_nominal counts symmetric products
 * at half of full; flops_exec what the kernels executed. */
static void emit(bench *B, const char *op, const char *algo, int64_t m, int64_t n, int batch,
                 const char *dtype, const char *var, const stats3 *st, double flops_nominal,
                 double flops_exec)
{
    char shp[48];
    snprintf(shp, sizeof shp, "%" PRId64 "x%" PRId64, m, n);
    double tf = flops_nominal > 0 ? flops_nominal / (st->med * 1e6) : 0;
    double te = flops_exec > 0 ? flops_exec / (st->med * 1e6) : 0;
    printf("  %-12s %5d %-11s %-7s %-5s %5s %10.1f %10.1f %10.1f %8.1f %8.1f %6.1f %5.0f\n", shp, batch,
           op, algo, dtype, var, st->med, st->min, st->max, tf, te,
           B->peak_tflops > 0 && tf > 0 ? 100.0 * tf / B->peak_tflops : 0.0, st->mhz);
    fflush(stdout);
    if (B->csv)
        fprintf(B->csv, "%s,%s,%s,%" PRId64 ",%" PRId64 ",%d,%s,%.2f,%.2f,%.2f,%.0f\n", B->gpu, op, algo, m,
                n, batch, dtype, st->med, st->min, st->max, st->mhz);
}

typedef struct prod_arg {
    ns_prod *p;
} prod_arg;
static int run_prod(void *a, ns_stream s, dm_err *err) { return ns_prod_run(((prod_arg *)a)->p, s, err); }

/* Time one product; sym_blocks as in ns_config. Returns -1 on error, 1 when the check against
 * the full product failed (the row is then not written). */
static int bench_prod(bench *B, ns_prod_kind kind, int64_t m, int64_t n, int batch, int kb, ns_kernel kern,
                      stats3 *st, double *fl_nom, double *fl_exec, dm_err *err)
{
    ns_prod *p = NULL;
    prod_arg a;
    double rel = 0;
    int rc = -1;
    if (ns_prod_create_kernel(kind, m, n, batch, DM_DT_BF16, kb, kern, &p, err)) return -1;
    a.p = p;
    if ((kb > 1 || kern != NS_KERNEL_LT) && ns_prod_check(p, &rel, err)) goto out;
    if (!(rel <= 4e-3)) {
        fprintf(stderr, "dmuon bench kernels: %" PRId64 "x%" PRId64 " sym_blocks %d kernel %s: product differs from the full cuBLAS one (rel %.3g); row dropped\n",
                m, n, kb, ns_kernel_name(kern), rel);
        rc = 1;
        goto out;
    }
    if (time_fn(B, run_prod, &a, st, err)) goto out;
    *fl_exec = ns_prod_flops(p, 1);
    *fl_nom = kind == NS_PROD_GEMM ? ns_prod_flops(p, 0) : ns_prod_flops(p, 0) / 2;
    rc = 0;
out:
    ns_prod_destroy(p);
    return rc;
}

typedef struct elem_arg {
    float *g;   /* fp32 gradient scratch: the executor's one g32 buffer, reused by every tensor */
    int *flag;
    int64_t n;
    int kind;   /* ELEM_ADAMW, ELEM_MUON_APPLY, ELEM_MUON_PREP */
    int group;  /* calls per timed interval */
    /* the tensors' state in a pool of `sets` sets, call i on set i mod sets: every call reads
     * and writes memory the last ELEM_POOL_BYTES of calls did not touch (cold in L2, as each
     * tensor of a step). adamw's set: master, moments, each read from one buffer and written to
     * a second as the executor's ping-pong state, then the bf16 gradient and working copy (28
     * bytes per element); a Muon set (12): apply's master in and out, bf16 working copy and the
     * NS output; prep's bf16 gradient, momentum in and out and the NS input, in the same bytes */
    char *pool;
    int64_t sets, next, set_bytes;
} elem_arg;

enum { ELEM_ADAMW, ELEM_MUON_APPLY, ELEM_MUON_PREP };

/* Bytes of the rows' pool of tensor sets: several times the L2 of the GPUs measured */
#define ELEM_POOL_BYTES ((int64_t)256 << 20)
#define ELEM_SET_BPE 28  /* adamw: bytes per element of a set: six fp32 buffers, two bf16 */
#define MUON_SET_BPE 12  /* Muon: two fp32 buffers, two bf16 */

static int run_elem(void *arg, ns_stream s, dm_err *err)
{
    elem_arg *a = arg;
    size_t n = (size_t)a->n;
    for (int i = 0; i < a->group; i++) { /* `group` tensors back to back, as a step's update ops run them */
        char *set = a->pool + (size_t)(a->next++ % a->sets) * (size_t)a->set_bytes;
        float *f = (float *)set;
        if (a->kind == ELEM_ADAMW) { /* as the executor runs one tensor's: the gradient to fp32
                                      * (checked), then the update of the fp32 master, its moments
                                      * and its bf16 working copy */
            void *gb = set + n * 24, *wb = set + n * 26; /* w in, w out, m in, m out, v in, v out */
            if (sk_bf16_to_f32_check(gb, a->g, a->n, a->flag, 1, s, err) ||
                ns_adamw(f, f + n, wb, a->g, f + 2 * n, f + 3 * n, f + 4 * n, f + 5 * n, a->n, 1e-3f, 0.9f, 0.95f,
                         1e-8f, 0.1f, 10, s, err))
                return -1;
        } else if (a->kind == ELEM_MUON_APPLY) { /* the executor's muon-update op (real_gpu.c update_op):
                                                 * the new master from the NS output, and its bf16 copy */
            void *wb = set + n * 8, *u = set + n * 10;
            if (ns_muon_apply(f, f + n, wb, u, DM_DT_BF16, a->n, 1e-3f, 0.1f, 0.2f, s, err)) return -1;
        } else { /* what its NS op runs per matrix before the NS (real_gpu.c ns_op): the reduced
                  * gradient to fp32 (checked), then momentum and Nesterov into the NS input */
            void *gb = set, *u = set + n * 10;
            float *m_in = (float *)(set + n * 2);
            if (sk_bf16_to_f32_check(gb, a->g, a->n, a->flag, 1, s, err) ||
                ns_muon_momentum(a->g, m_in, m_in + n, u, DM_DT_BF16, a->n, 0.95f, 1, s, err))
                return -1;
        }
    }
    return 0;
}

/* One row of kind `kind` at `elems` elements per tensor, over a pool of sets of bpe bytes per
 * element (random fp32 state; bf16_off and bf16_elems per element: the bf16 part, filled as
 * bf16), timed in groups of back-to-back calls (ns_bench_group). */
static int time_elem(bench *B, elem_arg *a, int kind, int bpe, int bf16_off, int bf16_elems, const char *op,
                     const char *algo, dm_err *err)
{
    int64_t elems = a->n, set = elems * bpe;
    stats3 st;
    double one;
    a->kind = kind;
    a->set_bytes = set;
    a->sets = (ELEM_POOL_BYTES + set - 1) / set;
    a->next = 0;
    if (ns_dev_alloc((void **)&a->pool, (size_t)(a->sets * set), err) ||
        ns_fill_random(a->pool, DM_DT_FP32, a->sets * set / 4, 17, 0.5f, B->s, err))
        return -1;
    for (int64_t k = 0; k < a->sets; k++) {
        char *c = a->pool + (size_t)(k * set);
        if (ns_fill_random(c + elems * bf16_off, DM_DT_BF16, bf16_elems * elems, 18 + (uint64_t)k, 1.f, B->s, err))
            return -1;
        /* adamw's second moment must be non-negative: one step with lr 0 and beta2 0 sets v = g^2 */
        if (kind == ELEM_ADAMW) {
            float *f = (float *)c;
            if (ns_adamw(f, f, NULL, a->g, f + 2 * elems, f + 2 * elems, f + 4 * elems, f + 4 * elems, elems, 0.f, 0.9f,
                         0.f, 1e-8f, 0.f, 1, B->s, err))
                return -1;
        }
    }
    a->group = 1;
    if (ns_time_events(run_elem, a, B->s, 1, 1, &one, err)) return -1;
    a->group = ns_bench_group(one);
    if (time_fn(B, run_elem, a, &st, err)) return -1;
    st.med /= a->group, st.min /= a->group, st.max /= a->group;
    emit(B, op, algo, 1, elems, 1, "fp32", "-", &st, 0, 0);
    ns_dev_free(a->pool);
    a->pool = NULL;
    return 0;
}

/* The elementwise rows of one tensor size: the executor's muon-update op (apply), the
 * gradient check and momentum its NS op runs per matrix (prep), one AdamW tensor. */
static int bench_elementwise(bench *B, int64_t elems, dm_err *err)
{
    elem_arg a;
    memset(&a, 0, sizeof a);
    a.n = elems;
    int rc = -1;
    if (ns_dev_alloc((void **)&a.g, (size_t)elems * 4, err) || ns_dev_alloc((void **)&a.flag, 16, err) ||
        ns_fill_random(a.g, DM_DT_FP32, elems, 12, 1.f, B->s, err))
        goto out;
    /* a Muon set: w in (fp32), w out (fp32), bf16 copy, NS output (bf16) for apply; bf16
     * gradient, momentum in and out (fp32), NS input (bf16) for prep */
    if (time_elem(B, &a, ELEM_MUON_APPLY, MUON_SET_BPE, 8, 2, "muon_update", "apply", err) ||
        time_elem(B, &a, ELEM_MUON_PREP, MUON_SET_BPE, 0, 1, "muon_update", "prep", err) ||
        time_elem(B, &a, ELEM_ADAMW, ELEM_SET_BPE, 24, 2, "adamw", "-", err))
        goto out;
    rc = 0;
out:
    ns_dev_free(a.g);
    ns_dev_free(a.flag);
    ns_dev_free(a.pool);
    return rc;
}

static void report_cand(void *ctx, const at_key *k, const at_result *r, int rejected, const char *why)
{
    bench *B = ctx;
    if (!B->verbose) return;
    if (rejected)
        printf("#   candidate %" PRId64 "x%" PRId64 " b%d %s %s k=%d/%d%s h=%d%s%s REJECTED: %s (gate rel %.3g)\n", k->m,
               k->n, k->batch, dm_ns_algo_name(k->algo), ns_kernel_name(r->kernel), r->sym_blocks, r->sym_blocks_mm,
               r->sym_flat ? " flat" : "", r->heuristic, r->gemm_picks[0] ? " picks " : "", r->gemm_picks, why, r->gate_rel);
    else
        printf("#   candidate %" PRId64 "x%" PRId64 " b%d %s %s k=%d/%d%s h=%d%s%s median %.1f us min %.1f max %.1f gate rel %.3g clock %.0f MHz\n",
               k->m, k->n, k->batch, dm_ns_algo_name(k->algo), ns_kernel_name(r->kernel), r->sym_blocks,
               r->sym_blocks_mm, r->sym_flat ? " flat" : "", r->heuristic, r->gemm_picks[0] ? " picks " : "", r->gemm_picks, r->median_us, r->min_us,
               r->max_us, r->gate_rel, r->mhz);
}

/* Per-step times of the winning variant (stdout, '#' lines). */
static int profile_plan(bench *B, int64_t m, int64_t n, int batch, dm_ns_algo algo,
                        const at_result *r, dm_err *err)
{
    ns_config cfg;
    ns_plan *p = NULL;
    at_result_config(r, algo, &cfg);
    /* as the autotuner timed it: input and output in the iteration dtype */
    int rc = ns_plan_create(m, n, batch, cfg.work, &cfg, &p, err) ||
             ns_fill_random(ns_plan_input(p), cfg.work, m * n * batch, 99, 1.f, B->s, err) ||
             ns_plan_run(p, B->s, 0, err) || ns_plan_profile(p, B->s, stdout, err);
    ns_plan_destroy(p);
    return rc ? -1 : 0;
}

void ns_bench_opts_default(ns_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    static const long b[] = {1, 2, 4, 8};
    memcpy(o->batches, b, sizeof b);
    o->n_batches = 4;
    o->batch_max_elems = 16 << 20;
    o->algos[0] = DM_NS_DIRECT;
    o->algos[1] = DM_NS_GRAM;
    o->n_algos = 2;
    at_options_default(&o->at);
    o->warmup = 3;
    o->reps = 20;
    o->products = o->elementwise = 1;
}

int ns_bench_algos_parse(const char *list, ns_bench_opts *o, dm_err *err)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_algos = 0;
    if (!strcmp(list, "none")) return 0; /* no NS rows: the products and elementwise rows alone */
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (o->n_algos == 2 || dm_ns_algo_parse(t, &o->algos[o->n_algos++], NULL) < 0)
            return dm_err_set(err, "expected direct and/or gram, or none, got '%s'", t);
    return o->n_algos ? 0 : dm_err_set(err, "expected direct and/or gram, or none, got '%s'", list);
}

int ns_bench_kernels(const ns_bench_opts *o, ns_bench_shapes *shapes, dm_err *err)
{
    bench B;
    memset(&B, 0, sizeof B);
    B.warmup = o->warmup;
    B.reps = o->reps;
    B.verbose = o->verbose;
    dm_out *csv_out = NULL;
    at_cache *cache = NULL;
    int rc = -1;
    if (shapes->n == 0) { /* the goal shapes (PyTorch column of the comparison) */
        static const int64_t goal[][2] = {{128, 128}, {1024, 1024}, {256, 1536}, {8960, 1536}, {3584, 3584},
                                          {18944, 3584}, {8192, 8192}, {29568, 8192}};
        for (size_t i = 0; i < sizeof goal / sizeof goal[0]; i++)
            if (ns_bench_shapes_add(shapes, goal[i][0], goal[i][1], NULL, 0, err)) goto done;
    }
    if (shapes->n > 1) qsort(shapes->v, (size_t)shapes->n, sizeof *shapes->v, cmp_shape);

    if (ns_device_query(&B.dev, err)) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        dm_err_set(err, "no usable GPU: %s", m);
        goto done;
    }
    snprintf(B.gpu, sizeof B.gpu, "%s", B.dev.name);
    for (char *p = B.gpu; *p; p++)
        if (*p == ',') *p = ' ';
    B.progress = isatty(2);
    if (ns_stream_create(&B.s, err)) goto done;
    if (o->cache_path && at_cache_open(o->cache_path, &B.dev, &cache, err)) goto done;

    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *cmdline = o->cmdline ? o->cmdline : "dmuon bench kernels";
    size_t lt = B.dev.cublaslt_version;
    printf("# dmuon bench kernels on %s (sm_%d%d, %d SMs, %.0f GiB), CUDA runtime %d.%d, driver %d.%d, cuBLASLt %zu.%zu.%zu\n",
           B.dev.name, B.dev.sm_major, B.dev.sm_minor, B.dev.n_sms, B.dev.mem_bytes / 1073741824.0,
           B.dev.cuda_runtime / 1000, B.dev.cuda_runtime % 1000 / 10, B.dev.cuda_driver / 1000,
           B.dev.cuda_driver % 1000 / 10, lt / 10000, lt / 100 % 100, lt % 100);
    printf("# %d shapes; batches %ld..%ld for m*n <= %" PRId64 "; %d warm-up + %d timed runs, %s; date %s\n",
           shapes->n, o->batches[0], o->batches[o->n_batches - 1], o->batch_max_elems, B.warmup, B.reps,
           o->at.use_graph ? "graph replays" : "direct launches", date);

    if (o->out_csv) {
        if (!(csv_out = dm_out_open(o->out_csv, err))) goto done;
        B.csv = dm_out_file(csv_out);
        fprintf(B.csv, "# dmuon-costs-1\n# source: measured\n# gpu: %s\n# cuda: %d.%d\n# cublas: %zu.%zu.%zu\n# date: %s\n# command: %s\n",
                B.gpu, B.dev.cuda_runtime / 1000, B.dev.cuda_runtime % 1000 / 10, lt / 10000,
                lt / 100 % 100, lt % 100, date, cmdline);
    }

    { /* the GEMM peak of this run: 8192^3 bf16 through cuBLASLt */
        stats3 st;
        double fn = 0, fe = 0;
        if (bench_prod(&B, NS_PROD_GEMM, 8192, 8192, 1, 1, NS_KERNEL_LT, &st, &fn, &fe, err) < 0) goto done;
        B.peak_tflops = fe / (st.med * 1e6);
        printf("# bf16 GEMM peak (8192x8192x8192, cuBLASLt): %.1f us median, %.1f TFLOP/s\n", st.med, B.peak_tflops);
        if (B.csv) fprintf(B.csv, "# gemm_peak_tflops: %.1f\n", B.peak_tflops);
    }
    if (B.csv) fprintf(B.csv, "gpu,op,algo,m,n,batch,dtype,median_us,min_us,max_us,mhz\n");
    human_header();

    int total = 0, done = 0;
    for (int i = 0; i < shapes->n; i++) {
        ns_bench_shape *s = &shapes->v[i];
        if (s->n_batches == 0) {
            for (int b = 0; b < o->n_batches; b++)
                if (o->batches[b] == 1 || s->m * s->n <= o->batch_max_elems) s->batches[s->n_batches++] = o->batches[b];
        }
        total += s->n_batches;
    }
    for (int i = 0; i < shapes->n; i++) {
        ns_bench_shape *s = &shapes->v[i];
        for (int bi = 0; bi < s->n_batches; bi++) {
            int batch = (int)s->batches[bi];
            done++;
            if (B.progress)
                fprintf(stderr, "\r[%d/%d] %" PRId64 "x%" PRId64 " batch %d          ", done, total, s->m, s->n, batch);
            at_result res[2];
            int need = 0;
            at_options ao = o->at; /* this shape's: the cached cuBLASLt configurations to re-time */
            ao.n_lt_fixed = 0;
            for (int a = 0; a < o->n_algos; a++) {
                at_key k = {s->m < s->n ? s->m : s->n, s->m < s->n ? s->n : s->m, batch, o->algos[a], /* a tall shape: its wide entry */
                             o->algos[a] == DM_NS_GRAM ? DM_DT_FP16 : DM_DT_BF16};
                int hit = cache && at_cache_lookup(cache, &k, &res[a]);
                /* without graphs a cached (graph-replay) time is not this run's: re-time it */
                int retime = o->retime || !o->at.use_graph;
                if (o->retune || retime || !hit) need = 1;
                if (retime && hit && res[a].kernel == NS_KERNEL_LT) {
                    ao.lt_fixed[ao.n_lt_fixed].algo = o->algos[a];
                    ao.lt_fixed[ao.n_lt_fixed++].r = res[a];
                }
            }
            if (need) {
                if (at_tune_shape(s->m, s->n, batch, o->algos, o->n_algos, &ao, 0x1234567ull + (uint64_t)done,
                                  B.s, res, report_cand, &B, err))
                    goto done;
                /* the cache holds graph times of m <= n shapes (a tall one runs its wide entry's configuration) */
                for (int a = 0; a < o->n_algos && cache && o->at.use_graph && s->m <= s->n; a++) {
                    at_key k = {s->m, s->n, batch, o->algos[a], o->algos[a] == DM_NS_GRAM ? DM_DT_FP16 : DM_DT_BF16};
                    if (res[a].median_us >= 0 && at_cache_store(cache, &k, &res[a], err)) goto done;
                }
            }
            for (int a = 0; a < o->n_algos; a++) {
                if (res[a].median_us < 0) {
                    printf("  %" PRId64 "x%" PRId64 " batch %d %s: no candidate passed the correctness gate\n",
                           s->m, s->n, batch, dm_ns_algo_name(o->algos[a]));
                    continue;
                }
                stats3 st = {res[a].median_us, res[a].min_us, res[a].max_us, res[a].mhz};
                char var[16];
                if (res[a].kernel == NS_KERNEL_LT) /* "f": the blocks as one pointer-array GEMM (ns_config.sym_flat) */
                    snprintf(var, sizeof var, "%d/%d%s", res[a].sym_blocks, res[a].sym_blocks_mm,
                             res[a].sym_flat && (res[a].sym_blocks > 1 || res[a].sym_blocks_mm > 1) ? "f" : "");
                else snprintf(var, sizeof var, "%s", ns_kernel_name(res[a].kernel));
                emit(&B, "ns", o->at.use_graph ? dm_ns_algo_name(o->algos[a]) : o->algos[a] == DM_NS_GRAM ? "gram-eager" : "direct-eager",
                     s->m, s->n, batch,
                     o->algos[a] == DM_NS_GRAM ? "fp16" : "bf16", var, &st, res[a].flops_nominal,
                     res[a].flops_executed);
                if (o->profile && (bi == 0 || bi == s->n_batches - 1) &&
                    profile_plan(&B, s->m, s->n, batch, o->algos[a], &res[a], err))
                    goto done;
            }
            if (o->products) {
                stats3 st, best;
                double fn, fe, bfn = 0, bfe = 0;
                int bk = 0;
                if (bench_prod(&B, NS_PROD_GEMM, s->m, s->n, batch, 1, NS_KERNEL_LT, &st, &fn, &fe, err) < 0) goto done;
                emit(&B, "gemm", "cublas", s->m, s->n, batch, "bf16", "-", &st, fn, fe);
                if (bench_prod(&B, NS_PROD_SYRK, s->m, s->n, batch, 1, NS_KERNEL_LT, &st, &fn, &fe, err) < 0) goto done;
                emit(&B, "syrk", "cublas", s->m, s->n, batch, "bf16", "k1", &st, fn, fe);
                for (int si = 0; si < o->at.n_sym; si++) {
                    int kb = o->at.sym_blocks[si];
                    if (kb < 2 || s->m / kb < o->at.min_block) continue;
                    int r = bench_prod(&B, NS_PROD_SYRK, s->m, s->n, batch, kb, NS_KERNEL_LT, &st, &fn, &fe, err);
                    if (r < 0) goto done;
                    if (r == 0 && (!bk || st.med < best.med)) {
                        best = st;
                        bk = kb;
                        bfn = fn;
                        bfe = fe;
                    }
                }
                if (bk) {
                    char var[16];
                    snprintf(var, sizeof var, "k%d", bk);
                    emit(&B, "syrk", "sym", s->m, s->n, batch, "bf16", var, &best, bfn, bfe);
                }
                for (int ki = 0; ki < o->at.n_kernels; ki++) { /* our symmetric kernels, checked first */
                    ns_kernel k = o->at.kernels[ki];
                    if (k != NS_KERNEL_SYM64 && k != NS_KERNEL_SYM128 && k != NS_KERNEL_SYM128S3) continue;
                    if (!ns_kernel_supported(k, s->m, s->n, batch)) continue;
                    int r = bench_prod(&B, NS_PROD_SYRK, s->m, s->n, batch, 1, k, &st, &fn, &fe, err);
                    if (r < 0) goto done;
                    if (r == 0) { /* the table only: the cost CSV has no algo for it */
                        FILE *keep = B.csv;
                        B.csv = NULL;
                        emit(&B, "syrk", "ours", s->m, s->n, batch, "bf16", ns_kernel_name(k), &st, fn, fe);
                        B.csv = keep;
                    }
                }
            }
        }
        if (o->elementwise && bench_elementwise(&B, s->m * s->n, err)) goto done;
    }
    if (B.progress) fprintf(stderr, "\r%60s\r", "");
    if (csv_out) {
        dm_out *out = csv_out;
        csv_out = NULL;
        if (dm_out_commit(out, err)) goto done;
        printf("# wrote %s\n", o->out_csv);
    }
    if (cache && at_cache_save(cache, err)) goto done;
    rc = 0;
    goto done;
    rc = 0;
done:
    dm_out_abort(csv_out);
    at_cache_close(cache);
    ns_stream_destroy(B.s);
    return rc;
}
