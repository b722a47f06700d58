/* cmd_calibrate.c: `dmuon calibrate`: turn measurements into the cost model's machine-level
 * inputs (calib.h): collective latency and bandwidth per tier from `dmuon bench comm --csv`; from
 * measured traces of one model the kernel gap inside forward/backward ops the kernel table
 * prices (or, for GEMMs it has no rows of, the fallback efficiencies), elementwise bandwidths
 * where the table lacks or misses them, NS against the table, the executor's start and op gaps,
 * and (optionally) the slowdowns under overlap; the kernel table from `dmuon bench kernels` or
 * `bench work`; writes a calibration file that `dmuon sim --calibration FILE` applies; --json: its
 * values as one JSON object (dmuon-calibrate-1) on stdout, every other line on stderr. */
#include "config.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "inputs.h"
#include "opts.h"

#define CMD "calibrate"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon calibrate [--comm CSV]... [--trace TRACE [--program PLAN]]... [--kernels CSV] [OPTIONS]\n"
            "Fit the cost model's inputs from measurements and write a calibration file: every value\n"
            "with its source, date, GPU and residual.\n\n"
            "  --comm CSV         dmuon bench comm --csv output (repeatable: one file per group, e.g.\n"
            "                     inside a node and across nodes); fits latency and bus bandwidth\n"
            "  --trace TRACE      a measured trace (dmuon run --trace) of one model (traces of two\n"
            "                     models are refused; the file names the model): forward/backward ops\n"
            "                     whose GEMMs all have rows in --kernels (with --program) are the\n"
            "                     table's (a backward's also its gradients' non-finite check);\n"
            "                     GEMMs without rows (or no plan): fwd_efficiency and bwd_efficiency,\n"
            "                     the fallback; elementwise_efficiency/_launch_us.adamw/.muon_update\n"
            "                     where the table has no rows of them or its rows miss by > 10%%;\n"
            "                     step_start_us (median first-op start) and op_gap_us (median\n"
            "                     idle time between a rank's consecutive compute ops);\n"
            "                     with --program, graph_gap_us (the idle after an NS op launched\n"
            "                     as a CUDA graph); in one-rank traces solo_coll_us (the median\n"
            "                     time a collective holds the compute stream, the idle before it\n"
            "                     included; the gaps are then between all of that stream's ops);\n"
            "                     repeatable (at most 8): one fit over all the traces' ops, e.g. a\n"
            "                     1-GPU run beside a 2-GPU run to separate rates from comm_slowdown\n"
            "  --program PLAN     after a --trace, with --kernels: that trace's plan (dmuon plan -o);\n"
            "                     its works price forward/backward by the table, and ns_time_scale\n"
            "                     is the NS times over the table's for their shapes\n"
            "  --comm-slowdown    with --trace: also fit comm_slowdown, the compute rate lost while a\n"
            "                     collective is in flight on the rank (default: not fitted, 0)\n"
            "  --kernel-gap       with --trace and --program: also fit kernel_gap_us, the idle between\n"
            "                     two kernels of an op, from what the table-priced ops took beyond\n"
            "                     their kernels (that holds every rate the table misses on the one\n"
            "                     model traced; default: not fitted, 0)\n"
            "  --tau-fall         with --trace and --power: also fit power.tau_fall_ms, how slowly the\n"
            "                     clock comes back after heavy work (the power filter's time constant\n"
            "                     while the demand falls), beside power.activity_exp (default: the\n"
            "                     probe's tau both ways)\n"
            "  --hold             with --trace and --power: also fit power.hold_ms, how long the clock\n"
            "                     stays where heavy work left it once the load falls, beside\n"
            "                     power.activity_exp (default: no hold)\n"
            "  --coll-slowdown    with --trace: also fit coll_slowdown, the NVLink bandwidth lost by\n"
            "                     collectives while their GPUs compute, against the collective model\n"
            "                     of --comm's fits (else the cluster's); collectives of >= --min-bytes\n"
            "  --lo-stream ONE,STREAM  lo_main_rate and lo_rate (how the second compute stream shares\n"
            "                     the GPU) from two traces of the same plan on one rank: ONE with the\n"
            "                     optimizer after the backward, STREAM with it on compute-lo beside\n"
            "                     it (run --ns-under-backward stream); each op's time alone (ONE)\n"
            "                     against its time and overlap in STREAM (repeatable, at most 8 pairs)\n"
            "  --power JSON       fit the power-limit model (core/power.h: keys power.*) from\n"
            "                     tools/power_probe.py --json on the machine; the trace fits then\n"
            "                     take each op's clock from it along the measured trace (use with a\n"
            "                     kernel table measured at full clock: bench work --cool)\n"
            "  --kernels CSV      a kernel table (dmuon bench kernels --out), recorded as costs (its path\n"
            "                     written relative to the calibration file's folder)\n"
            "  --cluster C        the machine measured, preset or file (default " DM_CLUSTER_DEFAULT "): its link\n"
            "                     capacities and GPUs per node place the measured ranks\n"
            "  --gpu NAME         GPU named in the file (default: the kernel table's, else the cluster's)\n"
            "  --min-bytes N      fit collective sizes of at least N bytes (default 1M: below, NCCL's\n"
            "                     time is not linear in size)\n"
            "  --out FILE         the calibration file (default: stdout)\n"
            "  --json             the values as one JSON object on stdout (format dmuon-calibrate-1:\n"
            "                     cluster, gpu, date, command, per value its key, value, source,\n"
            "                     residual and points); needs --out FILE; the report goes to stderr\n"
            "  -h, --help         this text\n");
}

enum { O_COMM = 1, O_TRACE, O_KERNELS, O_CLUSTER, O_GPU, O_OUT, O_MINB, O_SLOW, O_PROG, O_CSLOW, O_GAP, O_JSON, O_POWER, O_LO,
       O_TFALL, O_HOLD };

int cmd_calibrate(int argc, char **argv)
{
    static const struct option lo[] = {{"comm", required_argument, 0, O_COMM},
                                       {"trace", required_argument, 0, O_TRACE},
                                       {"kernels", required_argument, 0, O_KERNELS},
                                       {"cluster", required_argument, 0, O_CLUSTER},
                                       {"gpu", required_argument, 0, O_GPU},
                                       {"out", required_argument, 0, O_OUT},
                                       {"min-bytes", required_argument, 0, O_MINB},
                                       {"comm-slowdown", no_argument, 0, O_SLOW},
                                       {"coll-slowdown", no_argument, 0, O_CSLOW},
                                       {"kernel-gap", no_argument, 0, O_GAP},
                                       {"tau-fall", no_argument, 0, O_TFALL},
                                       {"hold", no_argument, 0, O_HOLD},
                                       {"program", required_argument, 0, O_PROG},
                                       {"json", no_argument, 0, O_JSON},
                                       {"power", required_argument, 0, O_POWER},
                                       {"lo-stream", required_argument, 0, O_LO},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *comm[8], *trace[8], *program[8] = {0}, *kernels = NULL, *power = NULL, *cluster = NULL, *gpu = NULL, *out = "-";
    int n_comm = 0, n_trace = 0, n_program = 0, c, slow = 0, cslow = 0, gap = 0, json = 0, n_lo = 0, tfall = 0, hold = 0;
    static char lo_buf[8][4096];
    const char *lo_one[8], *lo_st[8];
    int64_t mb;
    double min_bytes = CALIB_MIN_BYTES;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_COMM:
            if (n_comm == 8) {
                opt_usage_error(CMD, "--comm: at most 8 files");
                return 2;
            }
            comm[n_comm++] = optarg;
            break;
        case O_TRACE:
            if (n_trace == 8) {
                opt_usage_error(CMD, "--trace: at most 8 files");
                return 2;
            }
            trace[n_trace++] = optarg;
            break;
        case O_KERNELS: kernels = optarg; break;
        case O_CLUSTER: cluster = optarg; break;
        case O_GPU: gpu = optarg; break;
        case O_OUT: out = optarg; break;
        case O_MINB:
            if (opt_parse_size(CMD, "--min-bytes", optarg, 0, (int64_t)1 << 40, &mb)) return 2;
            min_bytes = (double)mb;
            break;
        case O_SLOW: slow = 1; break;
        case O_CSLOW: cslow = 1; break;
        case O_GAP: gap = 1; break;
        case O_TFALL: tfall = 1; break;
        case O_HOLD: hold = 1; break;
        case O_JSON: json = 1; break;
        case O_POWER: power = optarg; break;
        case O_LO: {
            char *comma = strchr(optarg, ',');
            if (n_lo == 8 || !comma || comma == optarg || !comma[1] || strchr(comma + 1, ',') ||
                strlen(optarg) >= sizeof lo_buf[0]) {
                opt_usage_error(CMD, n_lo == 8 ? "--lo-stream: at most 8 pairs"
                                               : "--lo-stream: expected ONE.csv,STREAM.csv (two trace files), found '%s'",
                                optarg);
                return 2;
            }
            snprintf(lo_buf[n_lo], sizeof lo_buf[n_lo], "%s", optarg);
            lo_buf[n_lo][comma - optarg] = 0;
            lo_one[n_lo] = lo_buf[n_lo], lo_st[n_lo] = lo_buf[n_lo] + (comma - optarg) + 1;
            n_lo++;
            break;
        }
        case O_PROG:
            if (!n_trace || program[n_trace - 1]) {
                opt_usage_error(CMD, "--program PLAN goes after its --trace TRACE, one per trace");
                return 2;
            }
            program[n_trace - 1] = optarg;
            n_program++;
            break;
        case 'h': usage(stdout); return 0;
        default: return opt_getopt_error(CMD, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (opt_no_operands(CMD, argc, argv)) return 2;
    if (n_program && !kernels) {
        opt_usage_error(CMD, "--program needs --kernels (the table its NS ops are fitted against)");
        return 2;
    }
    if ((slow || cslow || gap || tfall || hold) && !n_trace) {
        opt_usage_error(CMD, "%s needs --trace",
                        slow    ? "--comm-slowdown"
                        : cslow ? "--coll-slowdown"
                        : gap   ? "--kernel-gap"
                        : tfall ? "--tau-fall"
                                : "--hold");
        return 2;
    }
    if (json && !strcmp(out, "-")) {
        opt_usage_error(CMD, "--json needs --out FILE (stdout carries the JSON, not the calibration file)");
        return 2;
    }
    if (!n_comm && !n_trace && !kernels && !power && !n_lo) {
        opt_usage_error(CMD, "nothing to calibrate: expected --comm, --trace, --kernels, --power or --lo-stream");
        return 2;
    }
    dm_err err;
    inputs in;
    input_args ia = {NULL, cluster, NULL, NULL, 0, 1};
    if (inputs_resolve(CMD, &ia, &in)) return 1;
    const dm_cluster cl = in.cluster;
    static calib k;
    memset(&k, 0, sizeof k);
    time_t now = time(NULL);
    strftime(k.date, sizeof k.date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof k.command; i++)
        len += (size_t)snprintf(k.command + len, sizeof k.command - len, "%s%s", i ? " " : "dmuon ", argv[i]);
    if (gpu) snprintf(k.gpu, sizeof k.gpu, "%s", gpu);
    /* the report goes beside, not into, the file, and not into the JSON */
    FILE *log = strcmp(out, "-") && !json ? stdout : stderr;
    fprintf(log, "# dmuon calibrate: machine %s (%s, %d GPUs per node)\n", cl.name, cl.gpu->name, cl.gpus_per_node);
    if (kernels && calib_add_costs(&k, kernels, out, log, &err)) goto fail;
    if (!k.gpu[0]) snprintf(k.gpu, sizeof k.gpu, "%s", cl.gpu->name);
    for (int i = 0; i < n_comm; i++) {
        fprintf(log, "collectives from %s:\n", comm[i]);
        if (calib_fit_comm(&k, comm[i], &cl, min_bytes, log, &err)) goto fail;
    }
    if (power) {
        fprintf(log, "power limit from %s:\n", power);
        if (calib_fit_power(&k, power, log, &err)) goto fail;
    }
    if (n_trace) {
        dm_costs *table = NULL;
        fprintf(log, "compute rates from");
        for (int i = 0; i < n_trace; i++) fprintf(log, "%s %s", i ? "," : "", trace[i]);
        fprintf(log, ":\n");
        int rc = (n_program && dm_costs_load(kernels, &table, &err)) ||
                 calib_fit_traces(&k, n_trace, trace, program, cl.gpu, table,
                                  (slow ? CALIB_FIT_COMM_SLOWDOWN : 0) | (gap ? CALIB_FIT_KERNEL_GAP : 0) |
                                      (tfall ? CALIB_FIT_TAU_FALL : 0) | (hold ? CALIB_FIT_HOLD : 0),
                                  log, &err);
        dm_costs_free(table);
        if (rc) goto fail;
    }
    if (cslow) {
        dm_cluster cc = cl; /* the collective model with this calibration's comm fits */
        calib_apply_entries(&k, &cc);
        fprintf(log, "collectives under compute (the collective model of %s):\n", n_comm ? "the fits above" : cl.name);
        if (calib_fit_coll_slowdown(&k, n_trace, trace, &cc, min_bytes, log, &err)) goto fail;
    }
    if (n_lo) {
        fprintf(log, "the second compute stream beside the first:\n");
        if (calib_fit_lo_stream(&k, n_lo, lo_one, lo_st, log, &err)) goto fail;
    }
    if (calib_write(&k, out, &err)) goto fail;
    if (strcmp(out, "-")) fprintf(log, "wrote %s (%d values); use: dmuon sim --calibration %s ...\n", out, k.n, out);
    if (json) calib_print_json(stdout, &k, &cl, out);
    return 0;
fail:
    fprintf(stderr, "dmuon calibrate: %s\n", err.msg);
    return 1;
}
