/* cmd_validate.c: `dmuon validate`: the simulator against the real executor on the same plans,
 * or (--replay) the simulator against stored measurements (valid/validate.h does the work; this
 * file parses, resolves the inputs and calls it). */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "inputs.h"
#include "json.h"
#include "lines.h"
#include "opts.h"
#include "sched.h"
#include "spawn.h"
#include "validate.h"

#define CMD "validate"
#define MAX_LIST 16

/* --json: the rows of the CSV just written (validate.csv or replay.csv) as one JSON object,
 * {"format": "dmuon-validate-1", "rows": [{column: value, ...}]}: numbers as numbers. */
static int rows_json(const char *path, FILE *out)
{
    dm_err err;
    dm_lines *in = dm_lines_open(path, 4096, 1 << 24, &err);
    if (!in) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        return -1;
    }
    char *line, head[4096] = "", *cols[32];
    int nc = 0, nr = 0, k;
    fprintf(out, "{\"format\": \"dmuon-validate-1\", \"rows\": [");
    while ((k = dm_lines_next(in, &line, NULL, &err)) > 0) {
        if (line[0] == '#' || !line[0]) continue;
        if (!nc) { /* the header */
            snprintf(head, sizeof head, "%s", line);
            for (char *save = NULL, *t = strtok_r(head, ",", &save); t && nc < 32; t = strtok_r(NULL, ",", &save))
                cols[nc++] = t;
            continue;
        }
        fprintf(out, "%s\n  {", nr++ ? "," : "");
        int c = 0;
        for (char *p = line, *q; p && c < nc; p = q ? q + 1 : NULL, c++) {
            q = strchr(p, ',');
            if (q) *q = 0;
            char *end;
            double v = strtod(p, &end);
            fprintf(out, "%s", c ? ", " : "");
            json_write_string(out, cols[c]);
            fprintf(out, ": ");
            if (*p && !*end && isfinite(v)) fprintf(out, "%.10g", v); /* re-printed: valid JSON whatever the text */
            else json_write_string(out, p);
        }
        fprintf(out, "}");
    }
    fprintf(out, "\n]}\n");
    dm_lines_close(in);
    if (k < 0) fprintf(stderr, "dmuon validate: %s\n", err.msg);
    return k < 0 ? -1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon validate [OPTIONS]\n"
            "Run the real executor and the simulator on the same plans and compare them, case by\n"
            "case (models x token counts x GPU counts x strategies x overlaps): measured and predicted\n"
            "step, forward, backward, optimizer, exposed communication, their errors, and the op-level\n"
            "error distribution (median, 90th percentile); then a table of the errors by model (the\n"
            "model the calibration was fitted on marked *) and where each model's kernels were\n"
            "priced from. A case whose per-rank peak memory (the estimate, before running) does not\n"
            "fit on the cluster's GPU is reported as \"does not fit (needs N GiB)\" and not run; one the\n"
            "executor stops for want of memory (the estimate is a few %% short at the edge) as \"does not\n"
            "fit (stopped for want of memory ...)\", not as a failed run. A case that ran on another GPU\n"
            "than the cluster's (the executor's log names it) is compared all the same and said to be.\n\n"
            "  --models LIST      models (default llama-3.2-3b)\n"
            "  --strategies LIST  strategies (default dmuon,muon-ddp,adamw)\n"
            "  --overlaps LIST    overlap levels (default interleave,none)\n"
            "  --gpus LIST        GPU counts (default 1,2)\n"
            "  --cluster C        cluster the plans and the simulator use (default " DM_CLUSTER_DEFAULT ")\n"
            "  --costs FILE       kernel cost table (default: the calibration's, else the committed tables)\n"
            "  --calibration FILE apply a calibration file (dmuon calibrate) to the cluster\n"
            "  --backend B        executor backend: gpu or cpu (default gpu)\n"
            "  --steps K          steps per real run; the trace is the last one's (default 5)\n"
            "  --tokens LIST      tokens per rank per step, e.g. 2048,4096 (default 4096; sizes like 4k)\n"
            "  --attention A      whole (default) or causal: every case's attention products as the\n"
            "                     plan option says (dmuon plan --help); a replay that plans again\n"
            "                     needs it again (--as-run: the programs carry it)\n"
            "  --layer-passes P   on (default) or off: every case's plan option (dmuon plan --help); a\n"
            "                     replay that plans again a call made before 2026-12-06 needs off\n"
            "  --mpirun CMD       launcher for more than one GPU, words split at spaces (default mpirun)\n"
            "  --out DIR          output folder (default dmuon-validate); DIR/validate.csv is rewritten\n"
            "                     after every case, so a call cut short keeps the cases it ran\n"
            "  --plot-case N      the case (1-based, in table order) drawn under DIR/plot (default:\n"
            "                     the first dmuon case on the most GPUs)\n"
            "  --max-error PCT    exit 1 when a case's step or phase misses by more than PCT percent\n"
            "                     (phases under 1%% of the step are not held to it); default: report only\n"
            "  --dry-run          print the commands and plan the cases, run nothing\n"
            "  --replay CSV       run no executor: re-simulate the cases of a stored validate.csv with\n"
            "                     the current cluster and calibration and compare against its measured\n"
            "                     phases (writes DIR/replay.csv; --tokens must match the measured run)\n"
            "  --as-run           with --replay: simulate the program each case ran (CASE/program.json\n"
            "                     in the CSV's folder) instead of planning it again with today's rows\n"
            "                     (planned again as the calls made until 2026-12-06 were: --balance auto\n"
            "                     as lpt; a live call plans each case as dmuon plan does)\n"
            "  --json             the rows of validate.csv (replay.csv) as one JSON object on stdout, the\n"
            "                     report on stderr\n"
            "  -h, --help         this text\n");
}

/* s's comma-separated items into out (at most MAX_LIST); -1 after a usage error naming `what` when
 * there are more */
static int split(char *s, char **out, const char *what)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST) {
            opt_usage_error(CMD, "%s: at most %d items (run the rest in another validate)", what, MAX_LIST);
            return -1;
        }
        out[n++] = t;
    }
    return n;
}

enum { O_MODELS = 1, O_STRATS, O_OVERLAPS, O_GPUS, O_CLUSTER, O_COSTS, O_CALIB, O_BACKEND, O_STEPS, O_TOKENS, O_MPIRUN,
       O_OUT, O_PLOTCASE, O_MAXERR, O_DRY, O_REPLAY, O_ASRUN, O_JSON, O_ATTN, O_PASSES };

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
                                       {"as-run", no_argument, 0, O_ASRUN},
                                       {"json", no_argument, 0, O_JSON},
                                       {"attention", required_argument, 0, O_ATTN},
                                       {"layer-passes", required_argument, 0, O_PASSES},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    char models_s[1024] = "llama-3.2-3b", strats_s[256] = "dmuon,muon-ddp,adamw", ovl_s[256] = "interleave,none";
    long gpus[MAX_LIST] = {1, 2}, steps = 5, plot_case = 0, v, tokens[MAX_LIST] = {4096};
    int n_gpus = 2, dry = 0, json = 0, c, n_tokens = 1, as_run = 0;
    int64_t causal_tile = 0;
    int no_passes = 0;
    double max_err = -1;
    const char *backend = "gpu", *mpirun = "mpirun", *dir = "dmuon-validate", *replay_csv = NULL;
    input_args ia = {NULL, NULL, NULL, NULL, 0, 0};
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
        case O_CLUSTER: ia.cluster = optarg; break;
        case O_COSTS: ia.costs = optarg; break;
        case O_CALIB: ia.calibration = optarg; break;
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
        case O_TOKENS: { /* a list of sizes (4096, 4k) */
            char buf[512], *save = NULL;
            snprintf(buf, sizeof buf, "%s", optarg);
            n_tokens = 0;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int64_t x;
                if (n_tokens == MAX_LIST) {
                    opt_usage_error(CMD, "--tokens: at most %d counts", MAX_LIST);
                    return 2;
                }
                if (opt_parse_size(CMD, "--tokens", t, 1, (int64_t)1 << 30, &x)) return 2;
                tokens[n_tokens++] = (long)x;
            }
            if (!n_tokens) {
                opt_usage_error(CMD, "--tokens: expected at least one count");
                return 2;
            }
            break;
        }
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
        case O_ASRUN: as_run = 1; break;
        case O_JSON: json = 1; break;
        case O_ATTN: {
            dm_err e;
            if (sched_parse_attention(optarg, &causal_tile, &e)) {
                opt_usage_error(CMD, e.msg);
                return 2;
            }
            break;
        }
        case O_PASSES: {
            dm_err e;
            int on = 1;
            if (sched_parse_layer_passes(optarg, &on, &e)) {
                opt_usage_error(CMD, "%s", e.msg);
                return 2;
            }
            no_passes = !on;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error(CMD, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (opt_no_operands(CMD, argc, argv)) return 2;
    if (as_run && !replay_csv) {
        opt_usage_error(CMD, "--as-run: only with --replay");
        return 2;
    }
    char *models[MAX_LIST], *strats[MAX_LIST], *ovls[MAX_LIST];
    int n_models = split(models_s, models, "--models"), n_strats, n_ovls;
    if (n_models < 0 || (n_strats = split(strats_s, strats, "--strategies")) < 0 ||
        (n_ovls = split(ovl_s, ovls, "--overlaps")) < 0)
        return 2;
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
    inputs in;
    char self[4096];
    if (inputs_resolve(CMD, &ia, &in)) return 1;
    if (dm_self_exe(self, sizeof self, &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
        inputs_free(&in);
        return 1;
    }
    if (replay_csv && n_tokens > 1) {
        opt_usage_error(CMD, "--tokens: one count with --replay (the tokens of a table that does not store them)");
        inputs_free(&in);
        return 2;
    }
    vld_opts vo = {&in.cluster, in.costs, tokens[0], ia.calibration ? ia.calibration : "", in.calib.fitted_on, dir,
                   max_err, self, mpirun, backend, steps, dry, (int)plot_case, as_run, causal_tile, no_passes};
    int rc = 1;
    FILE *rep = json ? stderr : stdout; /* --json: the rows on stdout, the report on stderr */
    char rows[4096];
    snprintf(rows, sizeof rows, "%s/%s", dir, replay_csv ? "replay.csv" : "validate.csv");
    if (replay_csv) {
        fprintf(rep, "# dmuon validate --replay: resolved configuration\n");
        inputs_print(rep, &in);
        rc = vld_replay(replay_csv, &vo, rep);
        if (json && rows_json(rows, stdout)) rc = 1;
        inputs_free(&in);
        return rc;
    }
    vld_case *cases = NULL;
    int n_cases = 0;
    if (vld_cases(models, n_models, tokens, n_tokens, gpus, n_gpus, strats, n_strats, ovls, n_ovls, &cases, &n_cases,
                  &err)) {
        fprintf(stderr, "dmuon validate: %s\n", err.msg);
    } else {
        if (!vo.plot_case) vo.plot_case = vld_default_plot_case(cases, n_cases);
        fprintf(rep, "# dmuon validate: resolved configuration\n");
        fprintf(rep, "  cases       %d (models x token counts x GPU counts x strategies x overlaps), backend %s, %ld steps "
                "(trace of the last), tokens per rank", n_cases, backend, steps);
        for (int i = 0; i < n_tokens; i++) fprintf(rep, "%s%ld", i ? "," : " ", tokens[i]);
        fprintf(rep, "\n");
        inputs_print(rep, &in);
        fprintf(rep, "  output      %s/CASE/{program.json,real.csv,sim.csv,run.log}, %s/validate.csv, %s/plot (case %d)\n",
                dir, dir, dir, vo.plot_case);
        rc = vld_run(cases, n_cases, &vo, rep);
        if (json && !vo.dry && rows_json(rows, stdout)) rc = 1;
    }
    free(cases);
    inputs_free(&in);
    return rc;
}
