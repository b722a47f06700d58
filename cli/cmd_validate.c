/* cmd_validate.c: `dmuon validate`: the simulator against the real executor on the same plans.
 * For each case (model x strategy x overlap x GPU count) it builds the plan once (sched_build),
 * saves it, runs it for real as a child process (`mpirun -np N dmuon run --program P --trace`,
 * or `dmuon run` alone for one GPU), simulates the same program in-process, and compares the
 * two traces (compare.h): per case the measured and predicted step, forward, backward,
 * optimizer and exposed communication with their errors, and the op-level error distribution;
 * a table on stdout, DIR/validate.csv, every case's files under DIR/CASE/, and gnuplot
 * timelines of one case under DIR/plot/.
 * --replay FILE: no executor; reads a stored validate.csv (the measured phases per case),
 * re-plans and re-simulates every case with the current code, cluster and calibration, and
 * prints the same table beside the stored prediction's error (DIR/replay.csv), so the simulator
 * can be improved without a GPU. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cluster.h"
#include "commands.h"
#include "compare.h"
#include "costs.h"
#include "model.h"
#include "opts.h"
#include "outfile.h"
#include "program.h"
#include "sched.h"
#include "sim.h"
#include "spawn.h"
#include "trace.h"

#define CMD "validate"
#define MAX_LIST 16

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon validate [OPTIONS]\n"
            "Run the real executor and the simulator on the same plans and compare them, case by\n"
            "case (models x strategies x overlap x GPU counts): measured and predicted step,\n"
            "forward, backward, optimizer, exposed communication, their errors, and the op-level\n"
            "error distribution (median, 90th percentile).\n\n"
            "  --models LIST      models (default llama-3.2-3b)\n"
            "  --strategies LIST  strategies (default dmuon,muon-ddp,adamw)\n"
            "  --overlaps LIST    overlap levels (default interleave,none)\n"
            "  --gpus LIST        GPU counts (default 1,2)\n"
            "  --cluster C        cluster the plans and the simulator use (default h200x2)\n"
            "  --costs FILE       kernel cost table (default: the calibration's, else the committed tables)\n"
            "  --calibration FILE apply a calibration file (dmuon calibrate) to the cluster\n"
            "  --backend B        executor backend: gpu or cpu (default gpu)\n"
            "  --steps K          steps per real run; the trace is the last one's (default 5)\n"
            "  --tokens T         tokens per rank per step (default 4096)\n"
            "  --mpirun CMD       launcher for more than one GPU, words split at spaces (default mpirun)\n"
            "  --out DIR          output folder (default dmuon-validate)\n"
            "  --plot-case N      the case (1-based, in table order) drawn under DIR/plot (default:\n"
            "                     the first dmuon case on the most GPUs)\n"
            "  --max-error PCT    exit 1 when a case's step or phase misses by more than PCT percent\n"
            "                     (phases under 1%% of the step are not held to it); default: report only\n"
            "  --dry-run          print the commands and plan the cases, run nothing\n"
            "  --replay CSV       run no executor: re-simulate the cases of a stored validate.csv with\n"
            "                     the current cluster and calibration and compare against its measured\n"
            "                     phases (writes DIR/replay.csv; --tokens must match the measured run)\n"
            "  -h, --help         this text\n");
}

static int split(char *s, char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) out[n++] = t;
    return n;
}

typedef struct vcase {
    char name[192];
    const char *model, *strategy, *overlap;
    int gpus;
    int ok;
    cmp_result r;
    char why[1100];
    double stored_pred_us[CMP__PHASES]; /* --replay: the prediction the csv holds */
    int have[CMP__PHASES];              /* --replay: phases read */
    char buf[3][256];                   /* --replay: model, strategy, overlap as read */
} vcase;

#define REPLAY_HEADER "case,model,strategy,overlap,gpus,phase,measured_ms,predicted_ms"

/* Read a validate.csv into cases (one per case name, every phase present; *out owned by the
 * caller). Errors name FILE:LINE:COL. */
static int read_validate_csv(const char *path, vcase **out, int *n_out, dm_err *err)
{
    *out = NULL;
    *n_out = 0;
    FILE *f = fopen(path, "r");
    if (!f) return dm_err_set(err, "%s: %s", path, strerror(errno));
    vcase *cs = NULL;
    int n = 0, cap = 0, ln = 0, rc = 0;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = dm_err_set(err, "%s:%d:%d: line longer than %d characters", path, ln, (int)sizeof line - 1, (int)sizeof line - 2);
            break;
        }
        line[strcspn(line, "\r\n")] = 0;
        if (ln == 1) {
            if (strncmp(line, REPLAY_HEADER, strlen(REPLAY_HEADER))) {
                rc = dm_err_set(err, "%s:1:1: expected the header '" REPLAY_HEADER ",...' (dmuon validate's validate.csv)", path);
                break;
            }
            continue;
        }
        if (!line[0] || line[0] == '#') continue;
        char *fld[8];
        int col[8], nf = 0;
        for (char *q = line; nf < 8;) {
            fld[nf] = q;
            col[nf++] = (int)(q - line) + 1;
            char *c = strchr(q, ',');
            if (!c) break;
            *c = 0;
            q = c + 1;
        }
        if (nf < 8) {
            rc = dm_err_set(err, "%s:%d:%d: expected 8 or more comma-separated fields (" REPLAY_HEADER "), found %d",
                            path, ln, (int)strlen(line) + 1, nf);
            break;
        }
        for (int i = 0; i < 4 && !rc; i++)
            if (!fld[i][0] || strlen(fld[i]) >= 192) rc = dm_err_set(err, "%s:%d:%d: expected a name of 1 to 191 characters", path, ln, col[i]);
        if (rc) break;
        char *end;
        long gpus = strtol(fld[4], &end, 10);
        if (*end || end == fld[4] || gpus < 1 || gpus > 1024) {
            rc = dm_err_set(err, "%s:%d:%d: expected a GPU count in [1, 1024], found '%s'", path, ln, col[4], fld[4]);
            break;
        }
        int ph = -1;
        for (int p = 0; p < CMP__PHASES; p++)
            if (!strcmp(fld[5], cmp_phase_name((cmp_phase)p))) ph = p;
        if (ph < 0) {
            rc = dm_err_set(err, "%s:%d:%d: expected a phase (step, forward, backward, optimizer, exposed-comm), found '%s'",
                            path, ln, col[5], fld[5]);
            break;
        }
        double v[2];
        for (int i = 0; i < 2 && !rc; i++) {
            v[i] = strtod(fld[6 + i], &end);
            if (*end || end == fld[6 + i] || !isfinite(v[i]) || v[i] < 0)
                rc = dm_err_set(err, "%s:%d:%d: expected %s as a non-negative number, found '%s'", path, ln, col[6 + i],
                                i ? "predicted_ms" : "measured_ms", fld[6 + i]);
        }
        if (rc) break;
        vcase *vc = NULL;
        for (int i = 0; i < n && !vc; i++)
            if (!strcmp(cs[i].name, fld[0])) vc = &cs[i];
        if (vc && (strcmp(vc->model, fld[1]) || strcmp(vc->strategy, fld[2]) || strcmp(vc->overlap, fld[3]) ||
                   vc->gpus != gpus)) {
            rc = dm_err_set(err, "%s:%d:1: case %s: model, strategy, overlap or GPUs differ from its earlier rows", path,
                            ln, fld[0]);
            break;
        }
        if (!vc) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                vcase *nc = dm_realloc(cs, (size_t)cap * sizeof *cs, err);
                if (!nc) {
                    rc = -1;
                    break;
                }
                cs = nc;
            }
            vc = &cs[n++];
            memset(vc, 0, sizeof *vc);
            snprintf(vc->name, sizeof vc->name, "%s", fld[0]);
            for (int i = 0; i < 3; i++) snprintf(vc->buf[i], sizeof vc->buf[i], "%s", fld[1 + i]);
            vc->gpus = (int)gpus;
        }
        if (vc->have[ph]) {
            rc = dm_err_set(err, "%s:%d:%d: case %s: phase %s given twice", path, ln, col[5], fld[0], fld[5]);
            break;
        }
        vc->have[ph] = 1;
        vc->r.real.us[ph] = v[0] * 1e3;
        vc->stored_pred_us[ph] = v[1] * 1e3;
        /* the pointers into buf are set below: cs may move while it grows */
        for (int i = 0; i < n; i++) cs[i].model = cs[i].buf[0], cs[i].strategy = cs[i].buf[1], cs[i].overlap = cs[i].buf[2];
    }
    fclose(f);
    if (!rc && !n) rc = dm_err_set(err, "%s: no cases", path);
    for (int i = 0; i < n && !rc; i++)
        for (int p = 0; p < CMP__PHASES && !rc; p++)
            if (!cs[i].have[p])
                rc = dm_err_set(err, "%s: case %s has no %s row", path, cs[i].name, cmp_phase_name((cmp_phase)p));
    if (rc) {
        free(cs);
        return -1;
    }
    *out = cs;
    *n_out = n;
    return 0;
}

enum { O_MODELS = 1, O_STRATS, O_OVERLAPS, O_GPUS, O_CLUSTER, O_COSTS, O_CALIB, O_BACKEND, O_STEPS, O_TOKENS, O_MPIRUN,
       O_OUT, O_PLOTCASE, O_MAXERR, O_DRY, O_REPLAY };

/* Plan one case and simulate it (*p and *sr owned by the caller; both NULL on failure). */
static int plan_and_sim(const vcase *vc, int64_t tokens, const dm_cluster *cl, const dm_costs *costs, dm_program **p,
                        sim_result **sr, dm_err *err)
{
    dm_model *m = NULL;
    *p = NULL;
    *sr = NULL;
    sched_opts so;
    sched_opts_default(&so);
    char tok[32];
    snprintf(tok, sizeof tok, "%lld", (long long)tokens);
    int rc = -1;
    if (dm_model_load(vc->model, &m, err) || sched_opts_parse(&so, "strategy", vc->strategy, err) ||
        sched_opts_parse(&so, "overlap", vc->overlap, err) || sched_opts_parse(&so, "tokens", tok, err) ||
        sched_build(m, cl, vc->gpus, costs, &so, p, NULL, err))
        goto out;
    sim_opts o;
    sim_opts_default(&o);
    o.costs = costs;
    o.record_trace = 1;
    rc = sim_run(*p, cl, &o, sr, err);
out:
    dm_model_free(m);
    if (rc) {
        dm_program_free(*p);
        *p = NULL;
    }
    return rc;
}

/* Plan, save, run, simulate, compare one case. */
static int run_case(vcase *vc, const char *self, const char *mpirun, const char *backend, long steps, int64_t tokens,
                    const dm_cluster *cl, const dm_costs *costs, const char *dir, int dry, dm_trace **sim_out,
                    dm_trace **real_out, dm_err *err)
{
    char cdir[4300], prog[4400], real_csv[4400], sim_csv[4400], log[4400];
    snprintf(cdir, sizeof cdir, "%s/%s", dir, vc->name);
    if (cmp_mkdir_p(cdir, err)) return -1;
    snprintf(prog, sizeof prog, "%s/program.json", cdir);
    snprintf(real_csv, sizeof real_csv, "%s/real.csv", cdir);
    snprintf(sim_csv, sizeof sim_csv, "%s/sim.csv", cdir);
    snprintf(log, sizeof log, "%s/run.log", cdir);
    dm_program *p = NULL;
    sim_result *sr = NULL;
    dm_trace *real = NULL;
    int rc = -1;
    if (plan_and_sim(vc, tokens, cl, costs, &p, &sr, err) || dm_program_save(p, prog, err)) goto out;
    char np[16], st[16];
    snprintf(np, sizeof np, "%d", vc->gpus);
    snprintf(st, sizeof st, "%ld", steps);
    char *const tail[] = {(char *)self, "run", "--program", prog, "--model", (char *)vc->model, "--backend",
                          (char *)backend, "--steps", st, "--trace", real_csv, NULL};
    char launcher[1024], *argv[64];
    int na = 0;
    snprintf(launcher, sizeof launcher, "%s", mpirun);
    if (vc->gpus > 1) {
        na = dm_split_words(launcher, argv, 40);
        argv[na++] = "-np";
        argv[na++] = np;
        argv[na++] = "--oversubscribe";
    }
    for (int i = 0; tail[i]; i++) argv[na++] = tail[i];
    argv[na] = NULL;
    if (dry) {
        for (int i = 0; argv[i]; i++) printf("%s%s", i ? " " : "  ", argv[i]);
        printf("\n");
        rc = 0;
        goto out;
    }
    if (dm_spawn(argv, log, err) || dm_trace_read(real_csv, &real, err)) goto out;
    if (dm_trace_write_csv(sr->trace, sim_csv, err)) goto out;
    if (cmp_traces(sr->trace, real, NULL, &vc->r, err)) goto out;
    *sim_out = sr->trace;
    sr->trace = NULL;
    *real_out = real;
    real = NULL;
    vc->ok = 1;
    rc = 0;
out:
    dm_trace_free(real);
    sim_result_free(sr);
    dm_program_free(p);
    return rc;
}

static double phase_err(const cmp_result *r, int p) { return cmp_rel_err(r->sim.us[p], r->real.us[p]); }

static int held(const cmp_result *r, int p)
{
    return p == CMP_STEP || r->real.us[p] >= 0.01 * r->real.us[CMP_STEP] || r->sim.us[p] >= 0.01 * r->sim.us[CMP_STEP];
}

/* --replay: re-simulate the stored cases and print measured, predicted now, error now, and the
 * stored prediction's error. Returns the exit status. */
static int replay(const char *csv_path, const char *dir, int64_t tokens, double max_err, const dm_cluster *cl,
                  const dm_costs *costs, const char *calib_desc)
{
    dm_err err;
    vcase *cs = NULL;
    int n = 0;
    if (read_validate_csv(csv_path, &cs, &n, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return 1;
    }
    printf("# dmuon validate --replay: resolved configuration\n");
    printf("  measured    %s: %d cases (no executor run; %lld tokens per rank assumed)\n", csv_path, n, (long long)tokens);
    dm_cluster_describe(cl, stdout);
    printf("  costs       %s\n", dm_costs_describe(costs));
    printf("  calibration %s\n", calib_desc);
    int failed = 0, missed = 0, within5 = 0, within10 = 0, within5_before = 0;
    for (int i = 0; i < n; i++) {
        dm_program *p = NULL;
        sim_result *sr = NULL;
        if (plan_and_sim(&cs[i], tokens, cl, costs, &p, &sr, &err) || cmp_trace_phases(sr->trace, &cs[i].r.sim, &err)) {
            snprintf(cs[i].why, sizeof cs[i].why, "%s", err.msg);
            failed++;
        } else {
            cs[i].ok = 1;
        }
        sim_result_free(sr);
        dm_program_free(p);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/replay.csv", dir);
    dm_out *csv = NULL;
    if (cmp_mkdir_p(dir, &err) || !(csv = dm_out_open(path, &err))) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    else
        fprintf(dm_out_file(csv), REPLAY_HEADER ",error_pct,stored_predicted_ms,stored_error_pct\n");
    printf("\n# %-44s %-12s %11s %11s %8s %13s\n", "case", "phase", "measured_ms", "predicted_ms", "error",
           "stored_error");
    for (int i = 0; i < n; i++) {
        vcase *vc = &cs[i];
        if (!vc->ok) {
            printf("  %-44s FAILED: %s\n", vc->name, vc->why);
            continue;
        }
        int all5 = 1, all10 = 1, all5b = 1;
        for (int p = 0; p < CMP__PHASES; p++) {
            double e = phase_err(&vc->r, p), eb = cmp_rel_err(vc->stored_pred_us[p], vc->r.real.us[p]);
            int h = held(&vc->r, p), miss = max_err >= 0 && h && !(fabs(e) * 100 <= max_err);
            missed += miss;
            if (h && !(fabs(e) <= 0.05)) all5 = 0;
            if (h && !(fabs(e) <= 0.10)) all10 = 0;
            if ((p == CMP_STEP || vc->r.real.us[p] >= 0.01 * vc->r.real.us[CMP_STEP] ||
                 vc->stored_pred_us[p] >= 0.01 * vc->stored_pred_us[CMP_STEP]) && !(fabs(eb) <= 0.05))
                all5b = 0;
            printf("  %-44s %-12s %11.3f %11.3f %+7.1f%% %+12.1f%%%s\n", p ? "" : vc->name, cmp_phase_name((cmp_phase)p),
                   vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * e, 100 * eb, miss ? "  MISS" : "");
            if (csv)
                fprintf(dm_out_file(csv), "%s,%s,%s,%s,%d,%s,%.6f,%.6f,%.4f,%.6f,%.4f\n", vc->name, vc->model,
                        vc->strategy, vc->overlap, vc->gpus, cmp_phase_name((cmp_phase)p), vc->r.real.us[p] / 1e3,
                        vc->r.sim.us[p] / 1e3, 100 * e, vc->stored_pred_us[p] / 1e3, 100 * eb);
        }
        within5 += all5, within10 += all10, within5_before += all5b;
    }
    if (csv && dm_out_commit(csv, &err)) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    printf("\nvalidate --replay: %d cases, %d simulated, %d failed; the step and every phase (those over 1%% of the step) "
           "within 5%%: %d (stored predictions: %d), within 10%%: %d%s\n", n, n - failed, failed, within5, within5_before,
           within10, max_err >= 0 ? "" : " (report only: --max-error makes misses fail)");
    if (csv) printf("wrote %s\n", path);
    free(cs);
    return failed || missed ? 1 : 0;
}

int cmd_validate(int argc, char **argv)
{
    static const struct option lo[] = {{"models", required_argument, 0, O_MODELS},
                                       {"strategies", required_argument, 0, O_STRATS},
                                       {"overlaps", required_argument, 0, O_OVERLAPS},
                                       {"gpus", required_argument, 0, O_GPUS},
                                       {"cluster", required_argument, 0, O_CLUSTER},
                                       {"costs", required_argument, 0, O_COSTS},
                                       {"calibration", required_argument, 0, O_CALIB},
                                       {"backend", required_argument, 0, O_BACKEND},
                                       {"steps", required_argument, 0, O_STEPS},
                                       {"tokens", required_argument, 0, O_TOKENS},
                                       {"mpirun", required_argument, 0, O_MPIRUN},
                                       {"out", required_argument, 0, O_OUT},
                                       {"plot-case", required_argument, 0, O_PLOTCASE},
                                       {"max-error", required_argument, 0, O_MAXERR},
                                       {"dry-run", no_argument, 0, O_DRY},
                                       {"replay", required_argument, 0, O_REPLAY},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    char models_s[1024] = "llama-3.2-3b", strats_s[256] = "dmuon,muon-ddp,adamw", ovl_s[256] = "interleave,none";
    long gpus[MAX_LIST] = {1, 2}, steps = 5, plot_case = 0, v;
    int n_gpus = 2, dry = 0, c;
    int64_t tokens = 4096;
    double max_err = -1;
    const char *cluster = "h200x2", *costs_path = NULL, *calib_path = NULL, *backend = "gpu", *mpirun = "mpirun",
               *dir = "dmuon-validate", *replay_csv = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_MODELS: snprintf(models_s, sizeof models_s, "%s", optarg); break;
        case O_STRATS: snprintf(strats_s, sizeof strats_s, "%s", optarg); break;
        case O_OVERLAPS: snprintf(ovl_s, sizeof ovl_s, "%s", optarg); break;
        case O_GPUS:
            if (opt_parse_int_list(CMD, "--gpus", optarg, 1, 1024, gpus, MAX_LIST, &n_gpus)) return 2;
            break;
        case O_CLUSTER: cluster = optarg; break;
        case O_COSTS: costs_path = optarg; break;
        case O_CALIB: calib_path = optarg; break;
        case O_BACKEND:
            if (strcmp(optarg, "gpu") && strcmp(optarg, "cpu")) {
                opt_usage_error(CMD, "--backend: expected gpu or cpu, found '%s'", optarg);
                return 2;
            }
            backend = optarg;
            break;
        case O_STEPS:
            if (opt_parse_long(CMD, "--steps", optarg, 1, 1000, &steps)) return 2;
            break;
        case O_TOKENS:
            if (opt_parse_size(CMD, "--tokens", optarg, 1, (int64_t)1 << 30, &tokens)) return 2;
            break;
        case O_MPIRUN: mpirun = optarg; break;
        case O_OUT: dir = optarg; break;
        case O_PLOTCASE:
            if (opt_parse_long(CMD, "--plot-case", optarg, 1, 100000, &v)) return 2;
            plot_case = v;
            break;
        case O_MAXERR:
            if (opt_parse_double(CMD, "--max-error", optarg, 0, 1e6, &max_err)) return 2;
            break;
        case O_DRY: dry = 1; break;
        case O_REPLAY: replay_csv = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error(CMD, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (opt_no_operands(CMD, argc, argv)) return 2;
    char *models[MAX_LIST], *strats[MAX_LIST], *ovls[MAX_LIST];
    int n_models = split(models_s, models, MAX_LIST), n_strats = split(strats_s, strats, MAX_LIST),
        n_ovls = split(ovl_s, ovls, MAX_LIST);
    dm_err err;
    sched_opts check;
    sched_opts_default(&check);
    for (int i = 0; i < n_strats; i++)
        if (sched_opts_parse(&check, "strategy", strats[i], &err)) {
            opt_usage_error(CMD, "--strategies: %s", err.msg);
            return 2;
        }
    for (int i = 0; i < n_ovls; i++)
        if (sched_opts_parse(&check, "overlap", ovls[i], &err)) {
            opt_usage_error(CMD, "--overlaps: %s", err.msg);
            return 2;
        }
    if (!n_models || !n_strats || !n_ovls) {
        opt_usage_error(CMD, "expected at least one model, strategy and overlap");
        return 2;
    }
    dm_cluster cl;
    calib_info ci;
    memset(&ci, 0, sizeof ci);
    dm_costs *costs = NULL;
    char self[4096];
    if (dm_cluster_load(cluster, &cl, &err) || (calib_path && calib_apply(calib_path, &cl, &ci, &err)) ||
        dm_self_exe(self, sizeof self, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return 1;
    }
    if (!costs_path && ci.costs[0]) costs_path = ci.costs;
    if (costs_path ? dm_costs_load(costs_path, &costs, &err) : dm_costs_load_default(&costs, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return 1;
    }
    if (replay_csv) {
        int rc = replay(replay_csv, dir, tokens, max_err, &cl, costs, calib_path ? ci.describe : "none");
        dm_costs_free(costs);
        return rc;
    }
    if (cmp_mkdir_p(dir, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        dm_costs_free(costs);
        return 1;
    }
    int n_cases = n_models * n_strats * n_ovls * n_gpus;
    vcase *cases = calloc((size_t)n_cases, sizeof *cases);
    if (!cases) {
        fprintf(stderr, "dmuon validate: out of memory\n");
        dm_costs_free(costs);
        return 1;
    }
    int k = 0;
    for (int mi = 0; mi < n_models; mi++)
        for (int g = 0; g < n_gpus; g++)
            for (int s = 0; s < n_strats; s++)
                for (int o = 0; o < n_ovls; o++) {
                    vcase *vc = &cases[k++];
                    vc->model = models[mi];
                    vc->strategy = strats[s];
                    vc->overlap = ovls[o];
                    vc->gpus = (int)gpus[g];
                    /* a model file by its base name without .json */
                    const char *mb = strrchr(models[mi], '/') ? strrchr(models[mi], '/') + 1 : models[mi];
                    int ml = (int)strlen(mb);
                    if (ml > 5 && !strcmp(mb + ml - 5, ".json")) ml -= 5;
                    snprintf(vc->name, sizeof vc->name, "%.*s.%s.%s.%dgpu", ml, mb, strats[s], ovls[o], vc->gpus);
                    for (char *q = vc->name; *q; q++)
                        if (*q == '/' || *q == ':') *q = '_';
                }
    if (!plot_case) { /* the first dmuon case on the most GPUs */
        for (int i = 0; i < n_cases; i++)
            if (!strcmp(cases[i].strategy, "dmuon") &&
                (!plot_case || cases[i].gpus > cases[plot_case - 1].gpus))
                plot_case = i + 1;
        if (!plot_case) plot_case = 1;
    }
    printf("# dmuon validate: resolved configuration\n");
    printf("  cases       %d (models x GPU counts x strategies x overlaps), backend %s, %ld steps (trace of the last), "
           "%lld tokens per rank\n", n_cases, backend, steps, (long long)tokens);
    dm_cluster_describe(&cl, stdout);
    printf("  costs       %s\n", dm_costs_describe(costs));
    printf("  calibration %s\n", calib_path ? ci.describe : "none");
    printf("  output      %s/CASE/{program.json,real.csv,sim.csv,run.log}, %s/validate.csv, %s/plot (case %ld)\n", dir,
           dir, dir, plot_case);
    if (dry) printf("commands:\n");
    fflush(stdout);
    int failed = 0, missed = 0;
    for (int i = 0; i < n_cases; i++) {
        dm_trace *st = NULL, *rt = NULL;
        if (!dry) {
            fprintf(stderr, "validate: %d/%d %s\n", i + 1, n_cases, cases[i].name);
        }
        if (run_case(&cases[i], self, mpirun, backend, steps, tokens, &cl, costs, dir, dry, &st, &rt, &err)) {
            snprintf(cases[i].why, sizeof cases[i].why, "%s", err.msg);
            failed++;
        } else if (!dry && i + 1 == plot_case) {
            char pdir[4200], title[512];
            int drawn = 0;
            snprintf(pdir, sizeof pdir, "%s/plot", dir);
            snprintf(title, sizeof title, "%s (predicted against measured)", cases[i].name);
            if (cmp_write_plots(st, rt, pdir, title, &drawn, &err)) fprintf(stderr, "dmuon validate: plot: %s\n", err.msg);
            else printf("plot: case %d %s: %s/%s\n", i + 1, cases[i].name, pdir, drawn ? "timeline.png, ops.png" : "data and compare.gp (no gnuplot)");
        }
        dm_trace_free(st);
        dm_trace_free(rt);
    }
    if (dry) {
        free(cases);
        dm_costs_free(costs);
        return failed ? 1 : 0;
    }
    /* The table: per case, measured and predicted per phase, errors, op errors. */
    char path[4200];
    snprintf(path, sizeof path, "%s/validate.csv", dir);
    dm_out *csv = dm_out_open(path, &err);
    if (!csv) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    else
        fprintf(dm_out_file(csv), "case,model,strategy,overlap,gpus,phase,measured_ms,predicted_ms,error_pct,"
                                  "op_abs_err_median_pct,op_abs_err_p90_pct,ops_matched\n");
    printf("\n# %-44s %-12s %11s %11s %8s\n", "case", "phase", "measured_ms", "predicted_ms", "error");
    for (int i = 0; i < n_cases; i++) {
        vcase *vc = &cases[i];
        if (!vc->ok) {
            printf("  %-44s FAILED: %s\n", vc->name, vc->why);
            continue;
        }
        for (int p = 0; p < CMP__PHASES; p++) {
            double e = phase_err(&vc->r, p);
            int miss = max_err >= 0 && held(&vc->r, p) && !(fabs(e) * 100 <= max_err);
            missed += miss;
            printf("  %-44s %-12s %11.3f %11.3f %+7.1f%%%s\n", p ? "" : vc->name, cmp_phase_name((cmp_phase)p),
                   vc->r.real.us[p] / 1e3, vc->r.sim.us[p] / 1e3, 100 * e, miss ? "  MISS" : "");
            if (csv)
                fprintf(dm_out_file(csv), "%s,%s,%s,%s,%d,%s,%.6f,%.6f,%.4f,%.4f,%.4f,%d\n", vc->name, vc->model,
                        vc->strategy, vc->overlap, vc->gpus, cmp_phase_name((cmp_phase)p), vc->r.real.us[p] / 1e3,
                        vc->r.sim.us[p] / 1e3, 100 * e, 100 * vc->r.abs_err_median, 100 * vc->r.abs_err_p90,
                        vc->r.n_matched);
        }
        printf("  %-44s ops: %d matched, |error| median %.1f%%, 90th percentile %.1f%%\n", "", vc->r.n_matched,
               100 * vc->r.abs_err_median, 100 * vc->r.abs_err_p90);
    }
    if (csv && dm_out_commit(csv, &err)) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    int within = 0;
    for (int i = 0; i < n_cases; i++) {
        if (!cases[i].ok) continue;
        int all = 1;
        for (int p = 0; p < CMP__PHASES; p++)
            if (held(&cases[i].r, p) && !(fabs(phase_err(&cases[i].r, p)) <= 0.05)) all = 0;
        within += all;
    }
    printf("\nvalidate: %d cases, %d ran, %d failed; %d with the step and every phase within 5%%%s\n", n_cases,
           n_cases - failed, failed, within, max_err >= 0 ? "" : " (report only: --max-error makes misses fail)");
    printf("wrote %s\n", path);
    free(cases);
    dm_costs_free(costs);
    return failed || missed ? 1 : 0;
}
