/* cmd_compare.c: `dmuon compare SIM_TRACE REAL_TRACE`: the simulator's predicted trace against
 * the executor's measured one (either trace format), per phase, per op kind and op by op
 * (compare.h), with an optional CSV and gnuplot timelines; --json: the numbers as one JSON object
 * (dmuon-compare-1) on stdout, every other line on stderr. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "compare.h"
#include "opts.h"
#include "trace.h"

#define CMD "compare"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon compare [OPTIONS] SIM_TRACE REAL_TRACE\n"
            "Compare a predicted trace (dmuon sim --trace/--csv) with a measured one (dmuon run\n"
            "--trace) of the same program: step, forward, backward, optimizer and exposed\n"
            "communication (computed from each trace the way dmuon sim reports them), per op kind,\n"
            "and the op-level error distribution over ops matched by (rank, op id).\n\n"
            "  --plot DIR         write timeline data, DIR/compare.gp and, when gnuplot is\n"
            "                     installed, DIR/timeline.png and DIR/ops.png\n"
            "  --csv FILE         the tables as CSV\n"
            "  --min-op-us X      ops measured shorter than X us are left out of the op errors (default 1)\n"
            "  --max-error PCT    exit 1 when the step or a phase misses by more than PCT percent\n"
            "                     (phases under 1%% of the measured step are not held to it)\n"
            "  --json             the numbers as one JSON object on stdout (format dmuon-compare-1:\n"
            "                     model, cluster, strategy, gpus, phases, op kinds, op errors); the\n"
            "                     report goes to stderr\n"
            "  -h, --help         this text\n");
}

enum { O_PLOT = 1, O_CSV, O_MINOP, O_MAXERR, O_JSON };

int cmd_compare(int argc, char **argv)
{
    static const struct option lo[] = {{"plot", required_argument, 0, O_PLOT},
                                       {"csv", required_argument, 0, O_CSV},
                                       {"min-op-us", required_argument, 0, O_MINOP},
                                       {"max-error", required_argument, 0, O_MAXERR},
                                       {"json", no_argument, 0, O_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *plot = NULL, *csv = NULL;
    double max_err = -1;
    cmp_opts co;
    cmp_opts_default(&co);
    int c, json = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_PLOT: plot = optarg; break;
        case O_CSV: csv = optarg; break;
        case O_MINOP:
            if (opt_parse_double(CMD, "--min-op-us", optarg, 0, 1e12, &co.min_op_us)) return 2;
            break;
        case O_MAXERR:
            if (opt_parse_double(CMD, "--max-error", optarg, 0, 1e6, &max_err)) return 2;
            break;
        case O_JSON: json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error(CMD, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (argc - optind != 2) {
        opt_usage_error(CMD, "expected two traces, SIM_TRACE and REAL_TRACE");
        return 2;
    }
    dm_err err;
    dm_trace *sim = NULL, *real = NULL;
    int rc = 1;
    if (dm_trace_read(argv[optind], &sim, &err) || dm_trace_read(argv[optind + 1], &real, &err)) {
        fprintf(stderr, "dmuon compare: %s\n", err.msg);
        goto out;
    }
    cmp_result r;
    if (cmp_traces(sim, real, &co, &r, &err)) {
        fprintf(stderr, "dmuon compare: %s\n", err.msg);
        goto out;
    }
    FILE *rep = json ? stderr : stdout; /* --json: the object on stdout, the report on stderr */
    cmp_print(rep, sim, real, &r);
    if (csv && cmp_write_csv(csv, sim, &r, &err)) {
        fprintf(stderr, "dmuon compare: %s\n", err.msg);
        goto out;
    }
    if (plot) {
        char title[512];
        int drawn = 0;
        snprintf(title, sizeof title, "%s %s, %d rank%s", real->model, real->strategy, real->nranks,
                 real->nranks == 1 ? "" : "s");
        if (cmp_write_plots(sim, real, plot, title, &drawn, &err)) {
            fprintf(stderr, "dmuon compare: %s\n", err.msg);
            goto out;
        }
        if (drawn) fprintf(rep, "plots: %s/timeline.png %s/ops.png (data and %s/compare.gp beside them)\n", plot, plot, plot);
        else fprintf(rep, "plots: gnuplot not found; data and script written to %s (gnuplot %s/compare.gp)\n", plot, plot);
    }
    rc = 0;
    for (int p = 0; p < DM_PHASE__COMPARED && max_err >= 0; p++)
        if (cmp_phase_misses(&r.sim, &r.real, p, max_err)) {
            fprintf(rep, "%s: error %+.1f%% exceeds --max-error %g%%\n", dm_phase_name((dm_phase)p),
                   100 * cmp_rel_err(r.sim.us[p], r.real.us[p]), max_err);
            rc = 1;
        }
    if (json) cmp_print_json(stdout, argv[optind], sim, argv[optind + 1], real, &r, max_err);
out:
    dm_trace_free(sim);
    dm_trace_free(real);
    return rc;
}
