/* regress.c: the regression suite: its cases, the timing harness, the GPU part as child
 * processes, baseline files and the verdicts (regress.h). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include "regress.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "lines.h"
#include "model.h"
#include "outfile.h"
#include "paths.h"
#include "program.h"
#include "json.h"
#include "sched.h"
#include "sim.h"
#include "spawn.h"
#include "gpu_api.h"
#include "ns_cuda.h"

#define FORMAT "dmuon-regress-1"

/* ---- metrics -------------------------------------------------------------------------------- */

typedef enum { M_EXACT, M_QUALITY, M_TIME, M_RATE, M_INFO } mtype;
static const char *const mtype_names[] = {"exact", "quality", "time", "rate", "info"};

typedef struct metric {
    char name[160];
    mtype type;
    double value; /* exact/quality: the value; time/rate: the median */
    double noise; /* time/rate: relative standard error of the median; else 0 */
    char unit[16];
} metric;

typedef struct mset {
    metric *m;
    int n, cap;
    char header[16][256]; /* '#' lines of a baseline file (without the '#') */
    int n_header;
} mset;

static int mset_add(mset *s, const char *name, mtype type, double value, double noise, const char *unit)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        metric *m = realloc(s->m, (size_t)cap * sizeof *m);
        if (!m) return -1;
        s->m = m;
        s->cap = cap;
    }
    metric *x = &s->m[s->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->type = type;
    x->value = value;
    x->noise = noise;
    snprintf(x->unit, sizeof x->unit, "%s", unit);
    return 0;
}

static const metric *mset_find(const mset *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->m[i].name, name)) return &s->m[i];
    return NULL;
}

/* ---- timing harness ----------------------------------------------------------------------- */

/* CPU time of the calling thread: what the CPU timings measure. The planner and the simulator
 * are single-threaded, and on a shared machine (a CI runner, a box running other builds) CPU time
 * is far steadier than wall time, which also counts the time other processes held the core. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double g_slowdown = 1.0; /* DM_TEST_SLOWDOWN */

/* The injected slowdown: busy-wait (F - 1) x the call's CPU time (see the file comment). */
static void test_slowdown(double t0)
{
    if (g_slowdown <= 1.0) return;
    double el = cpu_s() - t0, until = cpu_s() + (g_slowdown - 1.0) * el;
    volatile double sink = 0;
    while (cpu_s() < until) sink += 1.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Calls per timed sample, so that a sample lasts at least min_s (short samples are dominated by
 * scheduler and cache noise); the metric is the time of one call. */
static int sample_calls(double one_call_s, double min_s)
{
    if (!(one_call_s > 0)) return 1;
    double k = ceil(min_s / one_call_s);
    return k < 1 ? 1 : k > 1000 ? 1000 : (int)k;
}

/* Median of v[0..n-1] (sorted copy) and the relative standard error of the median. */
static void median_noise(const double *v, int n, double *median, double *noise)
{
    double s[256], d[256];
    if (n > 256) n = 256;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    for (int i = 0; i < n; i++) d[i] = fabs(s[i] - med);
    qsort(d, (size_t)n, sizeof *d, cmp_double);
    double mad = n % 2 ? d[n / 2] : 0.5 * (d[n / 2 - 1] + d[n / 2]);
    *median = med;
    *noise = med > 0 && n > 1 ? 1.253 * 1.4826 * mad / med / sqrt((double)n) : 0;
}

/* ---- the suite ---------------------------------------------------------------------------- */

typedef struct suite_opts {
    int quick, reps, gpu;
    double min_sample_s; /* shortest timed sample (calls are repeated inside it) */
    const char *costs_path;
    int exec_gpus;
} suite_opts;

typedef struct plan_case {
    const char *model, *cluster;
    int gpus;
    const char *balance;
} plan_case;

typedef struct pred_case {
    const char *model, *cluster, *strategy, *overlap;
    int gpus;
} pred_case;

/* MILP cases are on 2 GPUs: there lp_solve proves optimality in well under a second, so the
 * makespan is deterministic; on more GPUs it runs into its time limit, and what it holds then
 * depends on the machine's speed (such a case is reported as info, never judged). */
static const plan_case plan_full[] = {
    {"qwen2.5-72b", "a800", 256, "lpt"},
    {"moonlight-16b-a3b", "a800", 64, "lpt"},
    {"llama-3.2-3b", "h200", 2, "milp"},
    {"qwen2.5-7b", "h200", 2, "milp"},
    {"llama-3.2-3b", "h200", 8, "milp"},
};
static const plan_case plan_quick[] = {
    {"qwen2.5-72b", "a800", 64, "lpt"},
    {"llama-3.2-3b", "h200", 2, "milp"},
};

static const pred_case pred_full[] = {
    {"llama-3.2-3b", "h200x2", "dmuon", "interleave", 2},
    {"llama-3.2-3b", "h200x2", "muon-ddp", "interleave", 2},
    {"llama-3.2-3b", "h200x2", "adamw", "interleave", 2},
    {"llama-3.2-3b", "h200x2", "dmuon", "none", 2},
    {"qwen2.5-7b", "a800", "dmuon", "interleave", 16},
    {"qwen2.5-7b", "a800", "muon-rr", "interleave", 16},
    {"qwen2.5-7b", "a800", "muon-fsdp", "interleave", 16},
    {"wall-oss-flow", "a800", "dmuon", "prefetch", 64},
    {"qwen2.5-72b", "a800", "dmuon", "interleave", 256},
    {"qwen2.5-72b", "a800", "adamw", "interleave", 256},
};
static const pred_case pred_quick[] = {
    {"llama-3.2-3b", "h200x2", "dmuon", "interleave", 2},
    {"llama-3.2-3b", "h200x2", "muon-ddp", "interleave", 2},
    {"qwen2.5-7b", "a800", "dmuon", "interleave", 16},
};

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

static int load_ctx(const char *model, const char *cluster, dm_model **m, dm_cluster *c, dm_err *err)
{
    if (dm_model_load(model, m, err)) return -1;
    if (dm_cluster_load(cluster, c, err)) {
        dm_model_free(*m);
        *m = NULL;
        return -1;
    }
    return 0;
}

static void progress(const char *what)
{
    if (isatty(2)) {
        fprintf(stderr, "\rregress: %-60.60s", what);
        fflush(stderr);
    }
}

static int run_plan_cases(const suite_opts *so, const dm_costs *costs, mset *out, dm_err *err)
{
    const plan_case *cases = so->quick ? plan_quick : plan_full;
    int n = so->quick ? N_OF(plan_quick) : N_OF(plan_full);
    for (int i = 0; i < n; i++) {
        const plan_case *pc = &cases[i];
        char base[128], name[192];
        snprintf(base, sizeof base, "plan.%s.%s.%d.%s", pc->model, pc->cluster, pc->gpus, pc->balance);
        progress(base);
        dm_model *m = NULL;
        dm_cluster c;
        if (load_ctx(pc->model, pc->cluster, &m, &c, err)) return -1;
        sched_opts o;
        sched_opts_default(&o);
        if (sched_opts_parse(&o, "strategy", "dmuon", err) || sched_opts_parse(&o, "balance", pc->balance, err) ||
            sched_opts_parse(&o, "milp-time", "2", err)) {
            dm_model_free(m);
            return -1;
        }
        double t[256];
        sched_report rep;
        int reps = so->reps;
        int inner = 1;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up, which also sizes the samples */
            double t0 = cpu_s();
            int rc = 0;
            for (int j = 0; j < inner && rc == 0; j++) {
                dm_program *p = NULL;
                memset(&rep, 0, sizeof rep);
                rc = sched_build(m, &c, pc->gpus, costs, &o, &p, &rep, err);
                dm_program_free(p);
                if (rc == 0 && !(r == reps - 1 && j == inner - 1)) sched_report_free(&rep);
            }
            if (rc == 0) test_slowdown(t0);
            double el = (cpu_s() - t0) / inner;
            if (rc) {
                sched_report_free(&rep);
                dm_model_free(m);
                return -1;
            }
            if (r >= 0) t[r] = el;
            else inner = sample_calls(el, so->min_sample_s);
        }
        double med, noise;
        median_noise(t, reps, &med, &noise);
        int milp = !strcmp(pc->balance, "milp"), limited = milp && pc->gpus > 2;
        snprintf(name, sizeof name, "%s.makespan_us", base);
        mset_add(out, name, limited ? M_INFO : M_QUALITY, rep.max_us, 0, "us");
        snprintf(name, sizeof name, "%s.gap", base);
        mset_add(out, name, limited ? M_INFO : M_QUALITY, rep.gap, 0, "1");
        snprintf(name, sizeof name, "%s.plan_cpu_s", base);
        mset_add(out, name, limited ? M_INFO : M_TIME, med, noise, "s");
        if (milp) {
            snprintf(name, sizeof name, "%s.milp_optimal", base);
            mset_add(out, name, limited ? M_INFO : M_EXACT, strstr(rep.solver_status, "optimal") ? 1 : 0, 0, "bool");
        }
        sched_report_free(&rep);
        dm_model_free(m);
    }
    return 0;
}

static int run_simspeed(const suite_opts *so, const dm_costs *costs, mset *out, dm_err *err)
{
    const char *model = so->quick ? "qwen2.5-7b" : "qwen2.5-72b";
    int gpus = so->quick ? 64 : 256;
    char base[128], name[192];
    snprintf(base, sizeof base, "simspeed.%s.a800.%d.dmuon", model, gpus);
    progress(base);
    dm_model *m = NULL;
    dm_cluster c;
    if (load_ctx(model, "a800", &m, &c, err)) return -1;
    sched_opts o;
    sched_opts_default(&o);
    dm_program *p = NULL;
    if (sched_build(m, &c, gpus, costs, &o, &p, NULL, err)) {
        dm_model_free(m);
        return -1;
    }
    sim_opts sopt;
    sim_opts_default(&sopt);
    sopt.costs = costs;
    double t[256], rate[256];
    int64_t events = 0;
    int inner = 1;
    for (int r = -1; r < so->reps; r++) {
        double t0 = cpu_s();
        int rc = 0;
        for (int j = 0; j < inner && rc == 0; j++) {
            sim_result *res = NULL;
            rc = sim_run(p, &c, &sopt, &res, err);
            if (rc == 0) events = res->events;
            sim_result_free(res);
        }
        if (rc == 0) test_slowdown(t0);
        double el = (cpu_s() - t0) / inner;
        if (rc) {
            dm_program_free(p);
            dm_model_free(m);
            return -1;
        }
        if (r >= 0) {
            t[r] = el;
            rate[r] = events / el;
        } else {
            inner = sample_calls(el, so->min_sample_s);
        }
    }
    double med, noise;
    median_noise(rate, so->reps, &med, &noise);
    snprintf(name, sizeof name, "%s.events_per_s", base);
    mset_add(out, name, M_RATE, med, noise, "events/s");
    median_noise(t, so->reps, &med, &noise);
    snprintf(name, sizeof name, "%s.sim_cpu_s", base);
    mset_add(out, name, M_TIME, med, noise, "s");
    snprintf(name, sizeof name, "%s.events", base);
    mset_add(out, name, M_EXACT, (double)events, 0, "events");
    dm_program_free(p);
    dm_model_free(m);
    return 0;
}

static int run_predictions(const suite_opts *so, const dm_costs *costs, mset *out, dm_err *err)
{
    const pred_case *cases = so->quick ? pred_quick : pred_full;
    int n = so->quick ? N_OF(pred_quick) : N_OF(pred_full);
    for (int i = 0; i < n; i++) {
        const pred_case *pc = &cases[i];
        char base[160], name[224];
        snprintf(base, sizeof base, "pred.%s.%s.%s.%s.%d", pc->model, pc->cluster, pc->strategy, pc->overlap, pc->gpus);
        progress(base);
        dm_model *m = NULL;
        dm_cluster c;
        if (load_ctx(pc->model, pc->cluster, &m, &c, err)) return -1;
        sched_opts o;
        sched_opts_default(&o);
        dm_program *p = NULL;
        sim_result *r = NULL;
        sim_opts sopt;
        sim_opts_default(&sopt);
        sopt.costs = costs;
        if (sched_opts_parse(&o, "strategy", pc->strategy, err) || sched_opts_parse(&o, "overlap", pc->overlap, err) ||
            sched_build(m, &c, pc->gpus, costs, &o, &p, NULL, err) || sim_run(p, &c, &sopt, &r, err)) {
            dm_program_free(p);
            dm_model_free(m);
            return -1;
        }
        const struct {
            const char *k;
            double v;
        } parts[] = {{"step_us", r->step_us},          {"forward_us", r->forward_us},
                     {"backward_us", r->backward_us},  {"optimizer_us", r->optimizer_us},
                     {"exposed_comm_us", r->exposed_comm_us}, {"ns_max_us", r->ns_max_us}};
        for (int k = 0; k < N_OF(parts); k++) {
            snprintf(name, sizeof name, "%s.%s", base, parts[k].k);
            mset_add(out, name, M_EXACT, parts[k].v, 0, "us");
        }
        sim_result_free(r);
        dm_program_free(p);
        dm_model_free(m);
    }
    return 0;
}

/* ---- GPU part: child processes of this binary ---------------------------------------------- */

/* The NS rows (op "ns") of a dmuon-costs-1 table: key "ns.ALGO.MxNxB" -> median_us. */
typedef struct krow {
    char key[96];
    double us[16];
    int n;
} krow;

static int read_kernel_csv(const char *path, krow *rows, int *n_rows, int max, dm_err *err)
{
    dm_lines *in = dm_lines_open(path, 4096, 64 << 20, err);
    if (!in) return -1;
    char *line;
    int k;
    while ((k = dm_lines_next(in, &line, NULL, err)) > 0) {
        char gpu[128], op[32], algo[32], dt[16];
        long long m, nn;
        int b;
        double med;
        if (line[0] == '#' || !strncmp(line, "gpu,", 4)) continue;
        if (sscanf(line, "%127[^,],%31[^,],%31[^,],%lld,%lld,%d,%15[^,],%lf", gpu, op, algo, &m, &nn, &b, dt, &med) != 8)
            continue;
        if (strcmp(op, "ns") && strcmp(op, "muon_update") && strcmp(op, "adamw")) continue;
        char key[96];
        snprintf(key, sizeof key, "%s.%s.%lldx%lldx%d", op, algo, m, nn, b);
        int i = 0;
        while (i < *n_rows && strcmp(rows[i].key, key)) i++;
        if (i == *n_rows) {
            if (*n_rows == max) continue;
            memset(&rows[i], 0, sizeof rows[i]);
            snprintf(rows[i].key, sizeof rows[i].key, "%s", key);
            (*n_rows)++;
        }
        if (rows[i].n < 16) rows[i].us[rows[i].n++] = med;
    }
    dm_lines_close(in);
    return k < 0 ? -1 : 0;
}

static int gpu_present(char *name, size_t size)
{
    ns_device_info info;
    dm_err e;
    const dm_gpu_api *api = dm_gpu_side(&e); /* the GPU plug-in, when this build has one that loads */
    if (api && api->device_query(&info, &e) == 0) {
        snprintf(name, size, "%s", info.name);
        return 1;
    }
    return 0;
}

static int run_gpu(const suite_opts *so, const char *tmpdir, mset *out, dm_err *err)
{
    char self[4096];
    if (dm_self_exe(self, sizeof self, err)) return -1;
    /* Kernels: a few NS shapes of the goal models, each invocation's median one sample. */
    char shapes[4200], csv[4200], cache[4200], log[4200];
    snprintf(shapes, sizeof shapes, "%s/shapes.txt", tmpdir);
    snprintf(cache, sizeof cache, "%s/autotune.tsv", tmpdir);
    FILE *f = fopen(shapes, "w");
    if (!f) return dm_err_set(err, "%s: %s", shapes, strerror(errno));
    fprintf(f, "# regress kernel shapes (Llama-3.2-3B, Qwen2.5-72B attention)\n1024 3072 1,4\n3072 3072 1\n3072 8192 1\n"
               "8192 8192 1\n");
    fclose(f);
    krow rows[64];
    int n_rows = 0, kreps = so->reps < 3 ? so->reps : 3;
    for (int r = 0; r < kreps; r++) {
        snprintf(csv, sizeof csv, "%s/kernels%d.csv", tmpdir, r);
        snprintf(log, sizeof log, "%s/kernels%d.log", tmpdir, r);
        progress("gpu kernels");
        char *argv[] = {self, "bench", "kernels", "--shapes", shapes, "--batches", "1,4", "--no-products",
                        "--cache", cache, "--out", csv, NULL};
        if (dm_spawn(argv, log, err) || read_kernel_csv(csv, rows, &n_rows, 64, err)) return -1;
    }
    for (int i = 0; i < n_rows; i++) {
        double med, noise;
        char name[192];
        median_noise(rows[i].us, rows[i].n, &med, &noise);
        snprintf(name, sizeof name, "gpu.kernel.%.120s.us", rows[i].key);
        mset_add(out, name, M_TIME, med, noise, "us");
    }
    /* Executor: Llama-3.2-3B shapes, dmuon, muon-ddp and adamw, step times after the first step. */
    const char *strats[] = {"dmuon", "muon-ddp", "adamw"};
    for (int s = 0; s < 3; s++) {
        char gpus_s[16], steps_s[16];
        snprintf(csv, sizeof csv, "%s/run_%s.csv", tmpdir, strats[s]);
        snprintf(log, sizeof log, "%s/run_%s.log", tmpdir, strats[s]);
        snprintf(gpus_s, sizeof gpus_s, "%d", so->exec_gpus);
        snprintf(steps_s, sizeof steps_s, "%d", so->reps + 1);
        progress("gpu executor");
        char *argv1[] = {self, "run", "--backend", "gpu", "--model", "llama-3.2-3b", "--cluster", "h200x2", "--strategy",
                         (char *)strats[s], "--steps", steps_s, "--tokens", "4096", "--timeout", "120", "--csv", csv, NULL};
        /* more than one rank: $MPIRUN (words split at spaces; default mpirun) -np N, then argv1 */
        char launcher[1024], *argvn[64];
        const char *mr = getenv("MPIRUN");
        snprintf(launcher, sizeof launcher, "%s", mr && *mr ? mr : "mpirun");
        int na = dm_split_words(launcher, argvn, 40);
        argvn[na++] = "-np";
        argvn[na++] = gpus_s;
        for (int i = 0; argv1[i]; i++) argvn[na++] = argv1[i];
        argvn[na] = NULL;
        if (dm_spawn(so->exec_gpus > 1 ? argvn : argv1, log, err)) return -1;
        dm_lines *in = dm_lines_open(csv, 4096, 64 << 20, err);
        if (!in) return -1;
        char *line;
        double v[6][256];
        int n = 0, k;
        while ((k = dm_lines_next(in, &line, NULL, err)) > 0) {
            long step;
            double loss, x[6];
            if (line[0] == '#' || !strncmp(line, "step,", 5)) continue;
            /* step,loss,step_ms,forward_ms,backward_ms,optimizer_ms,opt_window_ms,exposed_comm_ms */
            if (sscanf(line, "%ld,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &step, &loss, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5]) != 8)
                continue;
            if (step == 0 || n == 256) continue; /* the first step warms up */
            for (int j = 0; j < 6; j++) v[j][n] = x[j];
            n++;
        }
        dm_lines_close(in);
        if (k < 0) return -1;
        if (n == 0) return dm_err_set(err, "%s: no step rows after the first", csv);
        const char *names[6] = {"step_ms", "forward_ms", "backward_ms", "optimizer_ms", "opt_window_ms", "exposed_comm_ms"};
        for (int k = 0; k < 6; k++) {
            double med, noise;
            char name[192];
            median_noise(v[k], n, &med, &noise);
            snprintf(name, sizeof name, "gpu.run.llama-3.2-3b.%s.%dgpu.%s", strats[s], so->exec_gpus, names[k]);
            /* exposed communication can be ~0: compare it as a time anyway (ratio guarded). */
            mset_add(out, name, M_TIME, med, noise, "ms");
        }
    }
    return 0;
}

/* ---- baseline files ----------------------------------------------------------------------- */

static int read_baseline(const char *path, mset *s, dm_err *err)
{
    dm_lines *in = dm_lines_open(path, 1022, 16 << 20, err);
    if (!in) return -1;
    char *line;
    int ln = 0, have_header = 0, rc = 0, k;
    while (!rc && (k = dm_lines_next(in, &line, NULL, err)) != 0) {
        if (k < 0) {
            rc = -1;
            break;
        }
        ln = dm_lines_number(in);
        if (line[0] == '#') {
            if (ln == 1 && strcmp(line, "# " FORMAT)) rc = dm_err_set(err, "%s:1:1: expected '# " FORMAT "'", path);
            else if (s->n_header < 16) snprintf(s->header[s->n_header++], sizeof s->header[0], "%.250s", line + 1);
            continue;
        }
        if (!line[0]) continue;
        if (!have_header) {
            if (strcmp(line, "metric\ttype\tvalue\tnoise\tunit"))
                rc = dm_err_set(err, "%s:%d:1: expected the header 'metric<TAB>type<TAB>value<TAB>noise<TAB>unit'", path, ln);
            have_header = 1;
            continue;
        }
        char name[160], type[16], unit[16];
        double v, noise;
        int col = 0;
        if (sscanf(line, "%159[^\t]\t%15[^\t]\t%lf\t%lf\t%15s%n", name, type, &v, &noise, unit, &col) != 5) {
            rc = dm_err_set(err, "%s:%d:1: expected 'metric<TAB>type<TAB>value<TAB>noise<TAB>unit'", path, ln);
            break;
        }
        int t = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(type, mtype_names[i])) t = i;
        if (t < 0)
            rc = dm_err_set(err, "%s:%d:%zu: expected a type exact, quality, time, rate or info, found '%s'", path, ln,
                            strlen(name) + 2, type);
        else if (mset_find(s, name))
            rc = dm_err_set(err, "%s:%d:1: metric '%s' given twice", path, ln, name);
        else if (mset_add(s, name, (mtype)t, v, noise, unit))
            rc = dm_err_set(err, "out of memory");
    }
    dm_lines_close(in);
    if (!rc && !have_header) rc = dm_err_set(err, "%s:%d:1: expected the metric header", path, ln + 1);
    return rc;
}

static int write_baseline(const char *path, const mset *s, const char *machine, const char *suite, const char *costs,
                          const char *reason, int reps, dm_err *err)
{
    dm_out *o = dm_out_open(path, err);
    if (!o) return -1;
    FILE *f = dm_out_file(o);
    time_t t = time(NULL);
    char date[32], host[256] = "";
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    gethostname(host, sizeof host - 1);
    fprintf(f, "# " FORMAT "\n# machine: %s\n# suite: %s\n# date: %s\n# host: %s\n# reps: %d\n# costs: %s\n", machine,
            suite, date, host, reps, costs);
    fprintf(f, "# reason: %s\n", reason ? reason : "-");
    fprintf(f, "# written by dmuon regress --update: exact values must not change, quality must not get\n"
               "#   worse; time/rate are medians, noise = relative standard error of the median\n");
    fprintf(f, "metric\ttype\tvalue\tnoise\tunit\n");
    for (int i = 0; i < s->n; i++)
        fprintf(f, "%s\t%s\t%.17g\t%.4g\t%s\n", s->m[i].name, mtype_names[s->m[i].type], s->m[i].value, s->m[i].noise,
                s->m[i].unit);
    return dm_out_commit(o, err);
}

/* ---- comparison --------------------------------------------------------------------------- */

typedef enum { V_OK, V_NEW, V_SKIPPED, V_FASTER, V_BETTER, V_SLOWER, V_CHANGED, V_WORSE } verdict;
static const char *const verdict_names[] = {"ok", "new", "skipped", "faster", "better", "SLOWER", "CHANGED", "WORSE"};

static verdict judge(const metric *b, const metric *n, double floor_thr, double *ratio, double *thr)
{
    *ratio = NAN;
    *thr = 0;
    if (!b) return V_NEW;
    if (!n) return V_SKIPPED;
    *ratio = b->value != 0 ? n->value / b->value : (n->value == 0 ? 1 : INFINITY);
    double d = fabs(n->value - b->value), scale = fmax(fabs(b->value), fabs(n->value));
    switch (b->type) {
    case M_INFO: return V_OK;
    case M_EXACT: return d <= 1e-9 * scale ? V_OK : V_CHANGED;
    case M_QUALITY:
        if (d <= 1e-9 * scale) return V_OK;
        return n->value < b->value ? V_BETTER : V_WORSE;
    case M_TIME:
    case M_RATE: {
        *thr = fmax(floor_thr, 2.5 * sqrt(b->noise * b->noise + n->noise * n->noise));
        double slower = b->type == M_TIME ? *ratio : 1 / *ratio;
        if (!(b->value > 0) || !(n->value > 0)) return V_OK; /* nothing to time (e.g. 0 exposed) */
        if (slower > 1 + *thr) return V_SLOWER;
        if (slower < 1 / (1 + *thr)) return V_FASTER;
        return V_OK;
    }
    }
    return V_OK;
}

static void fmt_value(char *buf, size_t size, const metric *m)
{
    if (!m) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.6g", m->value);
}

/* One metric of the JSON result (reg_opts.json). */
static void json_metric(FILE *f, int first, const metric *b, const metric *n, double ratio, double t, verdict vd)
{
    const metric *any = n ? n : b;
    fputs(first ? "\n  {\"metric\": " : ",\n  {\"metric\": ", f);
    json_write_string(f, any->name);
    fprintf(f, ", \"type\": \"%s\", \"unit\": ", mtype_names[any->type]);
    json_write_string(f, any->unit);
    const double v[3] = {b ? b->value : NAN, n ? n->value : NAN, ratio}; /* not finite: null */
    const char *const k[3] = {"baseline", "now", "ratio"};
    for (int i = 0; i < 3; i++) {
        fputs(", ", f);
        json_write_member(f, k[i], v[i], 10, "");
    }
    fputs(", ", f);
    json_write_member(f, "threshold_pct", t > 0 ? 100 * t : NAN, 6, "");
    fprintf(f, ", \"verdict\": \"%s\"}", verdict_names[vd]);
}

static void json_head(FILE *f, const char *kind, const char *suite, const char *path, const dm_costs *costs, int reps,
                      double thr, int in_ci, int update)
{
    fputs("{\"format\": \"dmuon-regress-result-1\", \"machine\": ", f);
    json_write_string(f, kind);
    fprintf(f, ", \"suite\": \"%s\", \"baseline\": ", suite);
    json_write_string(f, path);
    fputs(", \"costs\": ", f);
    json_write_string(f, dm_costs_describe(costs));
    fprintf(f, ",\n \"reps\": %d, \"threshold\": %.6g, \"ci\": %s, \"update\": %s,\n \"metrics\": [", reps, thr,
            in_ci ? "true" : "false", update ? "true" : "false");
}

const char *reg_default_costs(void)
{
    static char path[4096];
    const char *env = getenv("DMUON_COSTS"); /* a folder (as for dm_costs_load_default) */
    const char *dirs[] = {env && *env ? env : DM_SRCDIR "/traces/costs", DM_SRCDIR "/traces/costs", DM_PKGDATADIR "/costs"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/roofline.csv", dirs[i]);
        if (access(path, R_OK) == 0) return path;
    }
    return NULL;
}

static void machine_kind(char *buf, size_t size, int *has_gpu)
{
    char name[256];
    *has_gpu = gpu_present(name, sizeof name);
    if (*has_gpu) {
        const dm_gpu *g = dm_gpu_find(name);
        const char *s = g ? g->short_name : name;
        size_t k = 0;
        for (; *s && *s != '-' && k + 1 < size; s++)
            if (*s != ' ') buf[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
        buf[k] = 0;
        return;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, size, "cpu-%ldcore", n > 0 ? n : 1);
}

int reg_run(const reg_opts *o, FILE *out)
{
    suite_opts so = {o->quick, o->reps, o->gpu, 0, NULL, o->exec_gpus};
    double thr = o->threshold;
    int update = o->update, strict = o->strict, in_ci = o->in_ci;
    const char *base_dir = o->base_dir, *machine = o->machine, *reason = o->reason, *csv_path = o->csv_path;
    g_slowdown = o->slowdown > 1 ? o->slowdown : 1.0;
    if (!so.reps) so.reps = so.quick ? 7 : 5;
    so.min_sample_s = so.quick ? 0.1 : 0.25;
    char kind[64];
    int has_gpu;
    machine_kind(kind, sizeof kind, &has_gpu);
    if (machine) snprintf(kind, sizeof kind, "%s", machine);
    const char *suite = so.quick ? "quick" : "full";
    const dm_costs *costs = o->costs;
    dm_err err;
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", base_dir, kind);
    snprintf(path, sizeof path, "%s/%s.tsv", dir, suite);

    fprintf(out, "# dmuon regress: resolved configuration\n");
    fprintf(out, "  machine     %s%s\n", kind, has_gpu ? " (GPU present)" : "");
    fprintf(out, "  suite       %s, %d timed repetitions per timing (medians), floor threshold %.1f%%\n", suite, so.reps,
           100 * thr);
    fprintf(out, "  costs       %s\n", dm_costs_describe(costs));
    fprintf(out, "  baseline    %s%s\n", path, update ? " (to be rewritten)" : "");
    if (g_slowdown > 1) fprintf(out, "  test hook   DM_TEST_SLOWDOWN=%g: timed calls busy-wait %.0f%% longer\n", g_slowdown,
                               100 * (g_slowdown - 1));
    if (in_ci) fprintf(out, "  CI          yes: timing changes only warn\n");
    fflush(out);

    mset now = {0}, base = {0};
    int rc = 1;
    char tmpdir[] = "/tmp/dmuon-regress-XXXXXX";
    int made_tmp = 0;
    if (!update && read_baseline(path, &base, &err)) { /* before measuring: fail fast */
        fprintf(stderr, "dmuon regress: no usable baseline for machine kind '%s': %s\n"
                        "  (create one with: dmuon regress%s --machine %s --update --reason 'first baseline')\n",
                kind, err.msg, so.quick ? " --quick" : "", kind);
        goto out;
    }
    double t_start = sched_wall_s();
    if (run_plan_cases(&so, costs, &now, &err) || run_simspeed(&so, costs, &now, &err) ||
        run_predictions(&so, costs, &now, &err)) {
        if (isatty(2)) fprintf(stderr, "\n");
        fprintf(stderr, "dmuon regress: %s\n", err.msg);
        goto out;
    }
    if (so.gpu && has_gpu) {
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "dmuon regress: mkdtemp: %s\n", strerror(errno));
            goto out;
        }
        made_tmp = 1;
        if (run_gpu(&so, tmpdir, &now, &err)) {
            if (isatty(2)) fprintf(stderr, "\n");
            fprintf(stderr, "dmuon regress: GPU part: %s\n", err.msg);
            goto out;
        }
    }
    if (isatty(2)) fprintf(stderr, "\r%80s\r", "");
    fprintf(out, "  measured    %d metrics in %.1f s\n\n", now.n, sched_wall_s() - t_start);

    if (update) {
        if (dm_mkdir_p(dir, &err)) {
            fprintf(stderr, "dmuon regress: %s\n", err.msg);
            goto out;
        }
        /* What the update changes, for the commit that carries it (with --reason). */
        int have_base = read_baseline(path, &base, &err) == 0;
        if (have_base) {
            int n_changed = 0;
            for (int i = 0; i < now.n; i++) {
                const metric *b = mset_find(&base, now.m[i].name);
                double ratio, t;
                verdict vd = judge(b, &now.m[i], thr, &ratio, &t);
                if (vd != V_CHANGED && vd != V_WORSE && vd != V_BETTER && vd != V_NEW) continue;
                if (!n_changed++) fprintf(out, "changes against the previous baseline:\n");
                char bs[32];
                fmt_value(bs, sizeof bs, b);
                fprintf(out, "  %-62s %14s -> %-14.6g %s\n", now.m[i].name, bs, now.m[i].value, verdict_names[vd]);
            }
            fprintf(out, "%d exact or quality value%s changed%s\n", n_changed, n_changed == 1 ? "" : "s",
                   n_changed && !reason ? " (say why with --reason)" : "");
        }
        char cdesc[512];
        snprintf(cdesc, sizeof cdesc, "%s", dm_costs_describe(costs));
        if (write_baseline(path, &now, kind, suite, cdesc, reason, so.reps, &err)) {
            fprintf(stderr, "dmuon regress: %s\n", err.msg);
            goto out;
        }
        fprintf(out, "wrote %s (%d metrics)\n", path, now.n);
        if (o->json) { /* the metrics written, each against the previous baseline's value when there was one */
            json_head(o->json, kind, suite, path, costs, so.reps, thr, in_ci, 1);
            for (int i = 0; i < now.n; i++) {
                const metric *b = have_base ? mset_find(&base, now.m[i].name) : NULL;
                double ratio, t;
                verdict vd = judge(b, &now.m[i], thr, &ratio, &t);
                json_metric(o->json, i == 0, b, &now.m[i], ratio, t, vd);
            }
            fprintf(o->json, "\n ],\n \"n_metrics\": %d, \"result\": \"updated\"}\n", now.n);
        }
        rc = 0;
        goto out;
    }
    /* The cost table's description without its path (baselines travel between checkouts). */
    const char *cd = dm_costs_describe(costs);
    size_t cdl = strcspn(cd, "(");
    for (int i = 0; i < base.n_header; i++)
        if (!strncmp(base.header[i], " costs: ", 8) && strncmp(base.header[i] + 8, cd, cdl))
            fprintf(out, "note: the baseline was made with costs %s\n\n", base.header[i] + 8);

    dm_out *csv = NULL;
    if (csv_path) {
        if (!(csv = dm_out_open(csv_path, &err))) {
            fprintf(stderr, "dmuon regress: %s\n", err.msg);
            goto out;
        }
        fprintf(dm_out_file(csv), "metric,type,unit,baseline,now,ratio,threshold,verdict\n");
    }
    int counts[8] = {0}, n_json = 0;
    if (o->json) json_head(o->json, kind, suite, path, costs, so.reps, thr, in_ci, 0);
    fprintf(out, "# %-62s %-7s %14s %14s %8s %7s  %s\n", "metric", "type", "baseline", "now", "ratio", "thresh", "verdict");
    for (int pass = 0; pass < 2; pass++) {
        const mset *s = pass == 0 ? &now : &base;
        for (int i = 0; i < s->n; i++) {
            const metric *n = pass == 0 ? &s->m[i] : mset_find(&now, s->m[i].name);
            const metric *b = pass == 0 ? mset_find(&base, s->m[i].name) : &s->m[i];
            if (pass == 1 && n) continue; /* already shown */
            double ratio, t;
            verdict vd = judge(b, n, thr, &ratio, &t);
            counts[vd]++;
            char bs[32], ns[32], rs[16], ts[16];
            fmt_value(bs, sizeof bs, b);
            fmt_value(ns, sizeof ns, n);
            if (isnan(ratio)) snprintf(rs, sizeof rs, "-");
            else snprintf(rs, sizeof rs, "%.4f", ratio);
            if (t > 0) snprintf(ts, sizeof ts, "%.1f%%", 100 * t);
            else snprintf(ts, sizeof ts, "-");
            const metric *any = n ? n : b;
            fprintf(out, "  %-62s %-7s %14s %14s %8s %7s  %s\n", any->name, mtype_names[any->type], bs, ns, rs, ts,
                   verdict_names[vd]);
            if (o->json) json_metric(o->json, n_json++ == 0, b, n, ratio, t, vd);
            if (csv)
                fprintf(dm_out_file(csv), "%s,%s,%s,%s,%s,%s,%s,%s\n", any->name, mtype_names[any->type], any->unit, bs,
                        ns, rs, ts, verdict_names[vd]);
        }
    }
    if (csv && dm_out_commit(csv, &err)) {
        fprintf(stderr, "dmuon regress: %s\n", err.msg);
        goto out;
    }
    int fail = counts[V_CHANGED] + counts[V_WORSE] > 0;
    int slow_fail = counts[V_SLOWER] > 0 && strict && !in_ci;
    fprintf(out, "\nregress: %d metrics: %d ok, %d changed, %d worse, %d slower, %d faster, %d better, %d new, %d skipped\n",
           now.n + counts[V_SKIPPED], counts[V_OK], counts[V_CHANGED], counts[V_WORSE], counts[V_SLOWER],
           counts[V_FASTER], counts[V_BETTER], counts[V_NEW], counts[V_SKIPPED]);
    if (counts[V_CHANGED]) fprintf(out, "FAIL: predictions changed (intended? then --update --reason TEXT in the same commit)\n");
    if (counts[V_WORSE]) fprintf(out, "FAIL: planner quality got worse\n");
    if (counts[V_SLOWER])
        fprintf(out, "%s: %d timing%s slower than the baseline beyond the noise threshold%s\n", slow_fail ? "FAIL" : "warning",
               counts[V_SLOWER], counts[V_SLOWER] == 1 ? "" : "s",
               slow_fail ? "" : in_ci ? " (CI: warning only)" : " (warning; --strict makes it fail)");
    if (!fail && !slow_fail) fprintf(out, "PASS\n");
    rc = fail || slow_fail ? 1 : 0;
    if (o->json) {
        fprintf(o->json, "\n ],\n \"n_metrics\": %d, \"counts\": {", now.n + counts[V_SKIPPED]);
        for (int v = 0; v < 8; v++) fprintf(o->json, "%s\"%s\": %d", v ? ", " : "", verdict_names[v], counts[v]);
        fprintf(o->json, "}, \"result\": \"%s\"}\n", rc ? "FAIL" : "PASS");
    }
out:
    if (made_tmp) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "dmuon regress: could not remove %s\n", tmpdir);
    }
    free(now.m);
    free(base.m);
    return rc;
}
