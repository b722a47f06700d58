/* cmd_regress.c: `dmuon regress`, the regression benchmark suite against the stored baselines
 * (valid/regress.h runs it; this file parses the options, resolves the cost table and calls it);
 * --json: the result as one JSON object on stdout, the report on stderr. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "datadir.h"
#include "inputs.h"
#include "opts.h"
#include "regress.h"

#define CMD "regress"

static void usage(FILE *f)
{
    fputs("Usage: dmuon regress [OPTIONS]\n"
          "Run the regression benchmark suite and compare it with the stored baselines\n"
          "(DIR/MACHINE/SUITE.tsv): planner quality and time, simulator speed (Qwen2.5-72B, 256\n"
          "GPUs), simulator predictions on a pinned cost table, and with a GPU kernel and executor\n"
          "step times. Prints a table (metric, baseline, now, ratio, verdict).\n\n"
          "  --baselines DIR    baseline folder (default: the installed " DM_PKGDATADIR "/baselines,\n"
          "                     else the source tree's traces/baselines; the source tree's first\n"
          "                     for a dmuon run from its build tree)\n"
          "  --machine KIND     machine kind (default: the GPU's, e.g. h200, else cpu-<N>core)\n"
          "  --quick            the small suite (seconds; SUITE quick instead of full)\n"
          "  --reps N           timed repetitions per timing metric, median kept (default 5, quick 7)\n"
          "  --threshold X      smallest timing change flagged, as a fraction (default 0.04)\n"
          "  --costs FILE       kernel cost table for plans and predictions (default: the pinned\n"
          "                     roofline.csv of $DMUON_COSTS when that is a folder, else of the\n"
          "                     installed " DM_PKGDATADIR "/costs, else of the source tree's\n"
          "                     traces/costs; the source tree's first from the build tree)\n"
          "  --no-gpu           skip the GPU part even when a GPU is present\n"
          "  --exec-gpus N      ranks of the executor benchmark (default 1; more through $MPIRUN,\n"
          "                     default mpirun, words split at spaces)\n"
          "  --update           measure and rewrite the baseline (atomically) instead of comparing\n"
          "  --reason TEXT      why the baseline changes (stored in it; use with --update)\n"
          "  --strict           slower timings fail (exit 1), except under CI=true\n"
          "  --csv FILE         the comparison table as CSV too\n"
          "  --json             the result as one JSON object on stdout (format\n"
          "                     dmuon-regress-result-1: machine, suite, baseline, per metric its\n"
          "                     baseline, now, ratio and verdict; the counts); the report goes to\n"
          "                     stderr\n"
          "  -h, --help         this text\n\n"
          "Exit status: 0 ok (timing changes warn), 1 a prediction changed, planner quality got\n"
          "worse, or (--strict, not CI) a timing got slower; 2 usage. DM_TEST_SLOWDOWN=F injects a\n"
          "busy-wait of (F-1) x each timed call inside the timed region (tests).\n",
          f);
}

enum { O_BASE = 1, O_MACHINE, O_QUICK, O_REPS, O_THR, O_COSTS, O_NOGPU, O_EXECG, O_UPDATE, O_REASON, O_STRICT, O_CSV, O_JSON };

int cmd_regress(int argc, char **argv)
{
    static const struct option lo[] = {{"baselines", required_argument, 0, O_BASE},
                                       {"machine", required_argument, 0, O_MACHINE},
                                       {"quick", no_argument, 0, O_QUICK},
                                       {"reps", required_argument, 0, O_REPS},
                                       {"threshold", required_argument, 0, O_THR},
                                       {"costs", required_argument, 0, O_COSTS},
                                       {"no-gpu", no_argument, 0, O_NOGPU},
                                       {"exec-gpus", required_argument, 0, O_EXECG},
                                       {"update", no_argument, 0, O_UPDATE},
                                       {"reason", required_argument, 0, O_REASON},
                                       {"strict", no_argument, 0, O_STRICT},
                                       {"csv", required_argument, 0, O_CSV},
                                       {"json", no_argument, 0, O_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    /* (the heap keeps what it frees: dmuon.c's main sets glibc's thresholds for every command) */
    const char *base_dir = dm_data_dir(DM_DATA_BASELINES);
    reg_opts ro = {0, 0, 0.04, 1, 1, 0, 0, 0, 1.0, base_dir ? base_dir : DM_PKGDATADIR "/baselines", NULL, NULL, NULL, NULL, NULL};
    const char *costs = NULL;
    int c;
    long v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
        switch (c) {
        case O_BASE: ro.base_dir = optarg; break;
        case O_MACHINE: ro.machine = optarg; break;
        case O_QUICK: ro.quick = 1; break;
        case O_REPS:
            if (opt_parse_long(CMD, "--reps", optarg, 1, 255, &v)) return 2;
            ro.reps = (int)v;
            break;
        case O_THR:
            if (opt_parse_double(CMD, "--threshold", optarg, 0, 10, &ro.threshold)) return 2;
            break;
        case O_COSTS: costs = optarg; break;
        case O_NOGPU: ro.gpu = 0; break;
        case O_EXECG:
            if (opt_parse_long(CMD, "--exec-gpus", optarg, 1, 64, &v)) return 2;
            ro.exec_gpus = (int)v;
            break;
        case O_UPDATE: ro.update = 1; break;
        case O_REASON: ro.reason = optarg; break;
        case O_STRICT: ro.strict = 1; break;
        case O_CSV: ro.csv_path = optarg; break;
        case O_JSON: ro.json = stdout; break;
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error(CMD, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (opt_no_operands(CMD, argc, argv)) return 2;
    const char *slow = getenv("DM_TEST_SLOWDOWN");
    if (slow && *slow) {
        char *end;
        ro.slowdown = strtod(slow, &end);
        if (*end || !(ro.slowdown >= 1.0 && ro.slowdown <= 10.0)) {
            fprintf(stderr, "dmuon regress: DM_TEST_SLOWDOWN: expected a factor in [1, 10], found '%s'\n", slow);
            return 2;
        }
    }
    const char *ci = getenv("CI");
    ro.in_ci = ci && (!strcmp(ci, "true") || !strcmp(ci, "1") || !strcmp(ci, "yes"));
    /* the pinned roofline table unless --costs (predictions must not move with the measured table) */
    char pinned[4096];
    inputs in;
    input_args ia = {NULL, NULL, NULL, costs ? costs : dm_data_file(DM_DATA_COSTS, "roofline.csv", pinned, sizeof pinned), 0, 0};
    if (inputs_resolve(CMD, &ia, &in)) return 1;
    ro.costs = in.costs;
    int rc = reg_run(&ro, ro.json ? stderr : stdout); /* --json: the object on stdout, the report on stderr */
    inputs_free(&in);
    return rc;
}
