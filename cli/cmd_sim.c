/* cmd_sim.c: `dmuon sim` (simulate one training step of a planned program on a modeled cluster)
 * and `dmuon scale` (a what-if study over GPU counts and strategies: table, CSV, gnuplot PNGs),
 * both with the executor's per-rank peak memory (core/memory.h) and whether it fits. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collcost.h"
#include "commands.h"
#include "csvjson.h"
#include "inputs.h"
#include "json.h"
#include "memory.h"
#include "opts.h"
#include "outfile.h"
#include "paths.h"
#include "plan_best.h"
#include "plot.h"
#include "program.h"
#include "sched.h"
#include "sim.h"
#include "sim_mem.h"
#include "trace.h"

/* ---- options both commands take ----------------------------------------------------------- */

/* The executor's per-rank peak memory of p: with the model given (the one rep's planning made,
 * when rep is not NULL and holds it), or (a saved program) the bundled model it names. 1 when
 * estimated; 0 when a saved program's model is not at hand (why in *why); -1 on an error (out of
 * memory, an estimate of the given model that fails: *err). */
static int program_memory(const dm_model *given, const dm_program *p, const sched_report *rep, dm_mem_est *e, char *why,
                          size_t size, dm_err *err)
{
    dm_model *m = NULL;
    char lower[256];
    if (given) return sched_report_mem(rep, given, p, e, err) ? -1 : 1;
    snprintf(lower, sizeof lower, "%s", p->model);
    for (char *q = lower; *q; q++)
        if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
    int miss = dm_model_load(lower, &m, err);
    if (miss && strstr(err->msg, "out of memory")) return -1;
    if (miss && dm_model_load(p->model, &m, err)) {
        if (strstr(err->msg, "out of memory")) return -1;
        snprintf(why, size, "not estimated: the program's model \"%s\" is not a bundled model", p->model);
        return 0;
    }
    /* a program from a file: its param ids against the model's matrices (every tensor is Muon's or
     * AdamW's; the simulator itself reads no id) */
    int64_t nmx = dm_model_count_role(m, DM_ROLE_MUON) + dm_model_count_role(m, DM_ROLE_ADAMW);
    int rc = dm_program_check_params(p, nmx, err) || dm_mem_peak(m, p, NULL, e, err);
    dm_model_free(m);
    if (rc && strstr(err->msg, "out of memory")) return -1;
    if (rc) snprintf(why, size, "not estimated: %.500s", err->msg);
    return rc ? 0 : 1;
}

enum { O_MODEL = 1, O_GPUS, O_CLUSTER, O_COSTS, O_CALIB, O_ALGO, O_TRACE, O_CSV, O_PROGRAM, O_HELP, O_QUIET, O_OUT, O_PROGRESS,
       O_NOPROGRESS, O_NOPLOTS, O_STRATS, O_JSON, O_MAXMEM, O_JOBS, O_STEPS };

#define COMMON_LONG                                                                                 \
    {"model", required_argument, 0, O_MODEL}, {"gpus", required_argument, 0, O_GPUS},               \
    {"cluster", required_argument, 0, O_CLUSTER}, {"costs", required_argument, 0, O_COSTS},         \
    {"calibration", required_argument, 0, O_CALIB}, {"max-memory", required_argument, 0, O_MAXMEM}, \
    {"algo", required_argument, 0, O_ALGO}, {"help", no_argument, 0, O_HELP}, SCHED_GETOPT_LONG

/* 1: handled (plan options into so, inputs into a, the memory limit into *max_memory, the rest
 * into o), 0: not one of them, -1: bad value. */
static int common_opt(const char *cmd, int c, char **argv, input_args *a, int64_t *max_memory, sched_opts *so,
                      sim_opts *o)
{
    int h = sched_getopt_handle(so, cmd, c, optarg);
    if (h) return h;
    switch (c) {
    case O_MODEL: a->model = optarg; return 1;
    case O_CLUSTER: a->cluster = optarg; return 1;
    case O_COSTS: a->costs = optarg; return 1;
    case O_CALIB: a->calibration = optarg; return 1;
    case O_MAXMEM: return opt_parse_size(cmd, "--max-memory", optarg, 0, INT64_MAX, max_memory) ? -1 : 1;
    case O_ALGO:
        if (coll_algo_parse(optarg, &o->algo) == 0) return 1;
        opt_usage_error(cmd, "--algo: expected auto, ring or tree, found '%s'", optarg);
        return -1;
    case ':':
    case '?': opt_getopt_error(cmd, c, argv); return -1;
    }
    return 0;
}

static void sim_help(void)
{
    printf("Usage: dmuon sim --model M --gpus N [--cluster C] [--strategy S] [plan options] [options]\n"
           "       dmuon sim --program FILE [--cluster C] [--costs FILE] [--calibration FILE] [options]\n"
           "Plan one training step (the scheduler) and simulate it on a modeled cluster: resolved\n"
           "configuration, step time and its parts, per-rank NS load, the critical path.\n\n"
           "  -m, --model M         model name, model file or HuggingFace config.json (see 'dmuon\n"
           "                        models'); required\n"
           "  -g, --gpus N          ranks (GPUs), 1 .. 65536; required\n"
           "  -c, --cluster C       preset (a100, a800, h100, h200, h200x2, b200) or cluster file\n"
           "                        (default " DM_CLUSTER_DEFAULT "; core/cluster.h: any GPU, any fabric)\n"
           "  --costs FILE          kernel cost table (default: the calibration's, else traces/costs/h200.csv,\n"
           "                        else roofline)\n"
           "  --calibration FILE    apply a calibration file (dmuon calibrate) to the cluster; its\n"
           "                        kernel table is used unless --costs is given\n"
           "  --algo A              collective algorithm: auto (NCCL's choice), ring, tree (default auto)\n"
           "  --program FILE        simulate a saved step program (dmuon plan -o) instead of planning one;\n"
           "                        the cluster defaults to the program's; the program fixes the model,\n"
           "                        the GPU count and the plan, so --model, --gpus and the plan options\n"
           "                        are refused beside it\n"
           "  --trace FILE          write the trace: Chrome JSON (Perfetto opens it), or dmuon-trace-1\n"
           "                        CSV when FILE ends in .csv (as dmuon run --trace)\n"
           "  --csv FILE            write the same trace rows as CSV\n"
           "  --steps K             K steps back to back, 1 .. 64 (default 1): what carries over orders\n"
           "                        them (a step's fetch or forward waits on the last step's update\n"
           "                        of its parameters, a backward on the last reader of its\n"
           "                        gradients), no barrier between them; the step and its phases\n"
           "                        are the last step's window (the steady state). The executor ends\n"
           "                        each step in a barrier (every rank agrees on the step's gradients),\n"
           "                        so its steady state is one step: K > 1 is the what-if of a loop\n"
           "                        without one. The trace holds every step's ops\n"
           "  --quiet               only the step time line\n"
           "  --json                the results as one JSON object (times in microseconds)\n"
           "  --progress            a line on stderr of what the planning and the simulation do now,\n"
           "                        even when stderr is not a terminal (default: only on a terminal;\n"
           "                        cleared there when done)\n"
           "  --no-progress         no progress line\n"
           "  --max-memory SIZE     refuse a plan whose simulation would need more memory (estimated\n"
           "                        before planning; under --balance auto, unless hierarchical, from\n"
           "                        the winner's assignment; 0: no limit; default 3/4 of physical\n"
           "                        memory)\n"
           "  --help                this text\n\n");
    sched_getopt_help(stdout);
}

int cmd_sim(int argc, char **argv)
{
    static const struct option lo[] = {COMMON_LONG,
                                       {"trace", required_argument, 0, O_TRACE},
                                       {"csv", required_argument, 0, O_CSV},
                                       {"program", required_argument, 0, O_PROGRAM},
                                       {"quiet", no_argument, 0, O_QUIET},
                                       {"json", no_argument, 0, O_JSON},
                                       {"steps", required_argument, 0, O_STEPS},
                                       {"progress", no_argument, 0, O_PROGRESS},
                                       {"no-progress", no_argument, 0, O_NOPROGRESS},
                                       {0, 0, 0, 0}};
    input_args ia = {NULL, NULL, NULL, NULL, 0, 0};
    int64_t max_memory = -1; /* --max-memory; -1: sim_mem_default_limit() */
    const char *trace = NULL, *csv = NULL, *program = NULL, *fixed = NULL; /* fixed: a plan option given */
    long gpus = 0, steps = 1;
    int quiet = 0, c, li = -1, progress = isatty(2);
    sched_opts so;
    sched_opts_default(&so);
    sim_opts o;
    sim_opts_default(&o);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", lo, &li)) != -1) {
        if ((c == O_MODEL || c == O_GPUS || c >= SCHED_OPT_BASE) && li >= 0 && !fixed) fixed = lo[li].name;
        li = -1;
        int h = common_opt("sim", c, argv, &ia, &max_memory, &so, &o);
        if (h < 0) return 2;
        if (h > 0) continue;
        switch (c) {
        case O_GPUS:
            if (opt_parse_long("sim", "--gpus", optarg, 1, 65536, &gpus)) return 2;
            break;
        case O_TRACE: trace = optarg; break;
        case O_CSV: csv = optarg; break;
        case O_PROGRAM: program = optarg; break;
        case O_QUIET: quiet = 1; break;
        case O_JSON: quiet = 2; break;
        case O_STEPS:
            if (opt_parse_long("sim", "--steps", optarg, 1, 64, &steps)) return 2;
            break;
        case O_PROGRESS: progress = 1; break;
        case O_NOPROGRESS: progress = 0; break;
        default: sim_help(); return 0; /* -h, --help */
        }
    }
    if (opt_no_operands("sim", argc, argv)) return 2;
    { /* the output paths before the work (a long simulation must not end in a refused path) */
        dm_err e;
        if (dm_out_check(trace, &e) || dm_out_check(csv, &e)) {
            fprintf(stderr, "dmuon sim: %s\n", e.msg);
            return 1;
        }
    }
    if (program && fixed) {
        opt_usage_error("sim", "--%s: the program fixes the model, the GPU count and the plan; not allowed with --program",
                        fixed);
        return 2;
    }
    if (!program && (!ia.model || !gpus)) {
        opt_usage_error("sim", "expected --model and --gpus (or --program)");
        return 2;
    }
    dm_err err;
    inputs in;
    dm_program *p = NULL;
    sched_report rep;
    memset(&rep, 0, sizeof rep);
    memset(&in, 0, sizeof in);
    sim_result *r = NULL;
    int rc = 1;
    double plan_s = 0;
    plan_best_report pb = {0};
    plan_progress pp = {progress ? stderr : NULL, "sim", sched_wall_s(), 0};
    if (program) {
        if (dm_program_load(program, &p, &err) || dm_program_validate(p, &err)) {
            fprintf(stderr, "dmuon sim: %s\n", err.msg);
            goto out;
        }
        if (!ia.cluster) ia.cluster = p->cluster;
        ia.gpus_per_node = p->gpus_per_node;
        if (inputs_resolve("sim", &ia, &in)) goto out;
    } else {
        ia.gpus_per_node = so.gpus_per_node;
        if (inputs_resolve("sim", &ia, &in)) goto out;
        double t0 = sched_wall_s();
        o.costs = in.costs;
        plan_best_opts bpo; /* --balance auto's simulation of the winner is this run's (no trace) */
        plan_best_opts_default(&bpo);
        if (!trace && !csv && steps == 1) bpo.winner_result = &r; /* K steps: the winner run again */
        bpo.progress = &pp;
        int prc = sim_mem_check_plan(in.model, &in.cluster, (int)gpus, &so, trace || csv, max_memory, &err) ||
                  plan_best_build(in.model, &in.cluster, (int)gpus, in.costs, &so, &o, &bpo, &p, &rep, &pb, &err);
        plan_progress_end(&pp);
        if (prc) {
            fprintf(stderr, "dmuon sim: %s\n", err.msg);
            goto out;
        }
        plan_s = sched_wall_s() - t0;
    }
    o.costs = in.costs;
    o.record_trace = trace || csv;
    o.steps = (int)steps; /* candidates of --balance auto were compared on one step */
    int src = sim_mem_check_program(p, &in.cluster, o.record_trace, max_memory, &err);
    if (!src && !r) {
        plan_progress_say(&pp, NULL, "simulating the plan's %.3g ops%s", (double)dm_program_ops(p),
                          o.record_trace ? ", its trace kept" : "");
        src = sim_run(p, &in.cluster, &o, &r, &err);
        plan_progress_end(&pp);
    }
    if (src) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    dm_mem_est mem;
    char mline[640];
    int have_mem = program_memory(in.model, p, program ? NULL : &rep, &mem, mline, sizeof mline, &err);
    if (have_mem < 0) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    if (have_mem) dm_mem_describe(&mem, in.cluster.gpu, mline, sizeof mline);
    if (quiet == 2) {
        sim_print_json(stdout, p, &in.cluster, in.costs, have_mem ? &mem : NULL, r);
    } else if (quiet) {
        printf("%s %s %d GPUs %s: step %.3f ms%s\n", p->model, p->strategy, p->nranks, in.cluster.name, r->step_us / 1e3,
               have_mem && !dm_mem_fits(&mem, in.cluster.gpu) ? " (does not fit in GPU memory)" : "");
    } else {
        printf("# dmuon sim: resolved configuration\n");
        if (!in.model) printf("  model       %s (from program %s)\n", p->model, program);
        inputs_print(stdout, &in);
        printf("  ranks       %d on %d node%s\n", p->nranks, dm_cluster_nodes(&in.cluster, p->nranks),
               dm_cluster_nodes(&in.cluster, p->nranks) == 1 ? "" : "s");
        printf("  strategy    %s (%s)\n", p->strategy, p->options);
        printf("  tokens      %lld per rank per step\n", (long long)p->tokens);
        printf("  collectives %s algorithm\n", coll_algo_name(o.algo));
        printf("  memory      %s\n", mline);
        if (!program)
            printf("  plan        %s assignment, %d units over %d owners, planned NS load max %.3f ms, imbalance %.1f%%\n",
                   rep.solver_status, rep.n_units, rep.nowners, rep.max_us / 1e3, 100 * rep.imbalance);
        char pbd[512];
        if (pb.n) printf("  balance     %s\n", plan_best_describe(&pb, pbd, sizeof pbd));
        sim_print_report(stdout, p, r);
        sim_print_speed(stdout, r, plan_s);
    }
    if (trace && dm_trace_write(r->trace, trace, &err)) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    if (csv && dm_trace_write_csv(r->trace, csv, &err)) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        if (trace) unlink(trace); /* a failed command leaves no output, the trace written before included */
        goto out;
    }
    rc = 0;
out:
    sim_result_free(r);
    sched_report_free(&rep);
    dm_program_free(p);
    inputs_free(&in);
    return rc;
}

/* ---- dmuon scale -------------------------------------------------------------------------- */

#define MAX_POINTS 64
#define MAX_STRATS 8

typedef struct point {
    int gpus, strat;
    double step_us, fwd_us, bwd_us, opt_us, opt_kernels_us, exposed_comm_us, ns_max_us, overhead_pct;
    double mem_bytes;       /* the executor's per-rank peak (core/memory.h) */
    int fits;               /* 1 when it fits on the cluster's GPU */
    double sim_s, plan_s;
    int64_t events;
    int ok;
    plan_best_report pb; /* --balance auto: the candidates */
} point;

static void scale_help(void)
{
    printf("Usage: dmuon scale [--model M] [--cluster C] [--gpus LIST] [--strategies LIST] [--out DIR]\n"
           "What-if scaling study: plan and simulate one step per GPU count and strategy; print a table\n"
           "of step time, optimizer time and overhead versus adamw; write DIR/scale.dat (the table, one block per strategy),\n"
           "DIR/scale.csv and, when gnuplot is installed, DIR/step_time.png, DIR/optimizer_time.png and\n"
           "DIR/overhead.png.\n\n"
           "  --model M             model (default wall-oss-flow)\n"
           "  --cluster C           preset or cluster file (default " DM_CLUSTER_DEFAULT ")\n"
           "  --gpus LIST           GPU counts (default 8,16,32,64,128,256)\n"
           "  --strategies LIST     comma list of adamw, muon-ddp, muon-fsdp, muon-rr, dmuon (default all),\n"
           "                        muon-ddp-tuned, muon-fsdp-tuned\n"
           "  --out DIR             output folder (default dmuon-scale)\n"
           "  --json                the points as one JSON object on stdout (the report goes to stderr)\n"
           "  --jobs N              points computed at once, each in its own process with its share of\n"
           "                        the memory limit (default: the CPUs online); the output does not\n"
           "                        depend on it\n"
           "  --costs FILE          kernel cost table (default: traces/costs/h200.csv, else roofline)\n"
           "  --calibration FILE    apply a calibration file (dmuon calibrate) to the cluster; its\n"
           "                        kernel table is used unless --costs is given\n"
           "  --algo A              collective algorithm: auto, ring, tree (default auto)\n"
           "  --progress            progress line on stderr even when it is not a terminal\n"
           "  --no-progress         no progress line\n"
           "  --no-plots            do not run gnuplot\n"
           "  --max-memory SIZE     skip points whose simulation would need more memory (0: no limit;\n"
           "                        default 3/4 of physical memory)\n"
           "  --help                this text\n\n"
           "mem_GiB: the executor's per-rank peak device memory (core/memory.h); fits 0 marks a point that\n"
           "does not fit on the cluster's GPU (still simulated; marked in the table, the CSV and the plots).\n"
           "overhead = step time / adamw's step time at the same GPU count - 1 (adamw is run for the\n"
           "baseline even when not listed). optimizer = step - forward - backward GPU time on the rank that\n"
           "finishes last: the optimizer kernels plus the communication the step could not hide.\n\n"
           "The plan options below apply to every strategy.\n");
    sched_getopt_help(stdout);
}

static const char *find_plot_script(void)
{
    static char path[4096];
    const char *env = getenv("DMUON_PLOTS");
    const char *dirs[] = {env, DM_SRCDIR "/plots", DM_PKGDATADIR "/plots"};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/scale.gp", dirs[i]);
        if (access(path, R_OK) == 0) return path;
    }
    return NULL;
}

/* The study's table. csv: comma-separated; grouped: one block per strategy separated by two
 * blank lines (gnuplot's `index`), else ordered by GPU count as computed. */
static void write_table(FILE *f, const point *pts, int n, char *const *names, int n_str, int csv, int grouped)
{
    if (csv)
        fprintf(f, "gpus,strategy,step_ms,forward_ms,backward_ms,optimizer_ms,optimizer_kernels_ms,exposed_comm_ms,"
                   "ns_max_ms,overhead_vs_adamw_pct,memory_gib,fits\n");
    else
        fprintf(f, "# %4s %-10s %10s %10s %10s %12s %12s %12s %10s %10s %9s %4s\n", "gpus", "strategy", "step_ms",
                "forward_ms", "backward_ms", "optimizer_ms", "opt_kern_ms", "exposed_ms", "ns_max_ms", "overhead_%",
                "mem_GiB", "fits");
    for (int s = 0; s < (grouped ? n_str : 1); s++) {
        if (grouped && s) fprintf(f, "\n\n");
        for (int i = 0; i < n; i++) {
            const point *q = &pts[i];
            if (!q->ok || (grouped && q->strat != s)) continue;
            if (csv)
                fprintf(f, "%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%d\n", q->gpus, names[q->strat],
                        q->step_us / 1e3, q->fwd_us / 1e3, q->bwd_us / 1e3, q->opt_us / 1e3, q->opt_kernels_us / 1e3,
                        q->exposed_comm_us / 1e3, q->ns_max_us / 1e3, q->overhead_pct, q->mem_bytes / 1073741824.0, q->fits);
            else
                fprintf(f, "  %4d %-10s %10.3f %10.3f %10.3f %12.3f %12.3f %12.3f %10.3f %10.2f %9.2f %4d%s\n", q->gpus,
                        names[q->strat], q->step_us / 1e3, q->fwd_us / 1e3, q->bwd_us / 1e3, q->opt_us / 1e3,
                        q->opt_kernels_us / 1e3, q->exposed_comm_us / 1e3, q->ns_max_us / 1e3, q->overhead_pct,
                        q->mem_bytes / 1073741824.0, q->fits, !grouped && !q->fits ? "  does not fit" : "");
        }
    }
}

static int write_file(const char *path, const point *pts, int n, char *const *names, int n_str, int csv, int grouped,
                      const char *model, const char *cluster, int64_t tokens)
{
    dm_err err;
    dm_out *o = dm_out_open(path, &err);
    if (!o) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        return -1;
    }
    if (csv) { /* the tables' header convention (csvjson.h); strategy and gpus are columns */
        dm_csv_case(dm_out_file(o), "dmuon-scale-1", model, cluster, NULL, -1);
        dm_csv_meta_int(dm_out_file(o), "tokens", (long long)tokens);
        fputc('\n', dm_out_file(o));
    }
    write_table(dm_out_file(o), pts, n, names, n_str, csv, grouped);
    if (dm_out_commit(o, &err)) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* scale --json: the study's points (the CSV's columns) as one object. */
static void print_scale_json(FILE *f, const inputs *in, const point *pts, int n, char *const *names)
{
    fprintf(f, "{\"format\": \"dmuon-scale-1\", \"model\": ");
    json_write_string(f, in->model->name);
    fprintf(f, ", \"cluster\": ");
    json_write_string(f, in->cluster.name);
    fprintf(f, ", \"gpu\": ");
    json_write_string(f, in->cluster.gpu->short_name);
    fprintf(f, ", \"points\": [");
    for (int i = 0; i < n; i++) {
        const point *q = &pts[i];
        fprintf(f, "%s\n  {\"gpus\": %d, \"strategy\": ", i ? "," : "", q->gpus);
        json_write_string(f, names[q->strat]);
        if (!q->ok) {
            fprintf(f, ", \"ok\": false}");
            continue;
        }
        fprintf(f, ", \"ok\": true, \"step_ms\": %.6g, \"forward_ms\": %.6g, \"backward_ms\": %.6g, \"optimizer_ms\": %.6g, "
                   "\"opt_kernels_ms\": %.6g, \"exposed_ms\": %.6g, \"ns_max_ms\": %.6g, ",
                q->step_us / 1e3, q->fwd_us / 1e3, q->bwd_us / 1e3, q->opt_us / 1e3, q->opt_kernels_us / 1e3,
                q->exposed_comm_us / 1e3, q->ns_max_us / 1e3);
        if (isfinite(q->overhead_pct)) fprintf(f, "\"overhead_pct\": %.6g, ", q->overhead_pct);
        else fprintf(f, "\"overhead_pct\": null, ");
        fprintf(f, "\"mem_gib\": %.6g, \"fits\": %s}", q->mem_bytes / 1073741824.0, q->fits ? "true" : "false");
    }
    fprintf(f, "\n]}\n");
}

/* One point's result: what the table needs (q; q.ok, q.sim_s the simulation's wall time), its
 * CPU time, the cost sources, or why it failed. A plain value: a child process writes it to its
 * pipe as it is. The caller sets q.gpus and q.strat from the point's index. */
typedef struct point_out {
    point q;
    double sim_cpu_s;
    char srcs[DM_OP__COUNT][640];
    char msg[sizeof(((dm_err *)0)->msg)];
} point_out;

/* Point idx (GPU count idx / n_str, strategy idx % n_str): plan it (--balance auto through
 * plan_best), check its memory, simulate it, estimate its per-rank peak. */
static void scale_point(const inputs *in, const sim_opts *o, const sched_opts *sopt, const long *gpus, int n_str, int idx,
                        int64_t max_memory, point_out *res)
{
    memset(res, 0, sizeof *res);
    point *q = &res->q;
    int gi = idx / n_str, s = idx % n_str;
    dm_program *p = NULL;
    sim_result *r = NULL;
    dm_err err = {{0}};
    double t0 = sched_wall_s();
    plan_best_opts bpo; /* --balance auto's simulation of the winner is this point's */
    plan_best_opts_default(&bpo);
    if (!o->record_trace) bpo.winner_result = &r;
    sched_report rep; /* (its memory estimate of the program, when the planning made one) */
    memset(&rep, 0, sizeof rep);
    dm_mem_est mem;
    if (sim_mem_check_plan(in->model, &in->cluster, (int)gpus[gi], &sopt[s], 0, max_memory, &err) ||
        plan_best_build(in->model, &in->cluster, (int)gpus[gi], in->costs, &sopt[s], o, &bpo, &p, &rep, &q->pb, &err) ||
        (q->plan_s = sched_wall_s() - t0, sim_mem_check_program(p, &in->cluster, 0, max_memory, &err)) ||
        (!r && sim_run(p, &in->cluster, o, &r, &err)) ||
        sched_report_mem(&rep, in->model, p, &mem, &err)) {
        snprintf(res->msg, sizeof res->msg, "%s", err.msg);
        sched_report_free(&rep);
        sim_result_free(r);
        dm_program_free(p);
        return;
    }
    sched_report_free(&rep);
    q->mem_bytes = mem.total;
    q->fits = dm_mem_fits(&mem, in->cluster.gpu);
    q->ok = 1;
    q->step_us = r->step_us;
    q->fwd_us = r->forward_us;
    q->bwd_us = r->backward_us;
    q->opt_kernels_us = r->optimizer_us;
    q->opt_us = r->step_us - r->forward_us - r->backward_us;
    q->exposed_comm_us = r->exposed_comm_us;
    q->ns_max_us = r->ns_max_us;
    q->events = r->events;
    q->sim_s = r->wall_s;
    res->sim_cpu_s = r->cpu_s + r->setup_cpu_s;
    for (int k = 0; k < DM_OP__COUNT; k++) snprintf(res->srcs[k], sizeof res->srcs[k], "%s", r->cost_src[k]);
    sim_result_free(r);
    dm_program_free(p);
}

typedef struct scale_job {
    int idx;  /* the point it computes; -1: free */
    pid_t pid;
    int fd;   /* read end of its pipe */
} scale_job;

/* Point idx in a child process; its result comes back through j's pipe. */
static int scale_fork(scale_job *j, int idx, const inputs *in, const sim_opts *o, const sched_opts *sopt,
                      const long *gpus, int n_str, int64_t max_memory, dm_err *err)
{
    int fd[2];
    if (pipe(fd)) return dm_err_set(err, "pipe: %s", strerror(errno));
    fflush(NULL); /* nothing buffered twice */
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return dm_err_set(err, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        point_out *res = malloc(sizeof *res);
        if (!res) _exit(1);
        scale_point(in, o, sopt, gpus, n_str, idx, max_memory, res);
        const char *b = (const char *)res;
        size_t left = sizeof *res;
        while (left) {
            ssize_t w = write(fd[1], b, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) _exit(1);
            b += w, left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    j->idx = idx, j->pid = pid, j->fd = fd[0];
    return 0;
}

/* The next finished job's result (whichever child is done first): *idx and *res; its slot freed. */
static int scale_collect(scale_job *jb, int n, int *idx, point_out *res, dm_err *err)
{
    struct pollfd pf[64];
    int map[64], np = 0;
    for (int k = 0; k < n && np < 64; k++)
        if (jb[k].idx >= 0) pf[np].fd = jb[k].fd, pf[np].events = POLLIN, map[np++] = k;
    if (!np) return dm_err_set(err, "no point running");
    while (poll(pf, (nfds_t)np, -1) < 0)
        if (errno != EINTR) return dm_err_set(err, "poll: %s", strerror(errno));
    int k = -1;
    for (int i = 0; i < np && k < 0; i++)
        if (pf[i].revents) k = map[i];
    scale_job *j = &jb[k];
    char *b = (char *)res;
    size_t got = 0;
    while (got < sizeof *res) {
        ssize_t r = read(j->fd, b + got, sizeof *res - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(j->fd);
    int status = 0;
    while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR) {}
    *idx = j->idx;
    j->idx = -1;
    if (got != sizeof *res) { /* the child died: say so for its point */
        memset(res, 0, sizeof *res);
        snprintf(res->msg, sizeof res->msg, "the process of this point ended without a result (%s %d)",
                 WIFSIGNALED(status) ? "signal" : "exit status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    return 0;
}

int cmd_scale(int argc, char **argv)
{
    static const struct option lo[] = {COMMON_LONG,
                                       {"strategies", required_argument, 0, O_STRATS},
                                       {"out", required_argument, 0, O_OUT},
                                       {"progress", no_argument, 0, O_PROGRESS},
                                       {"no-progress", no_argument, 0, O_NOPROGRESS},
                                       {"no-plots", no_argument, 0, O_NOPLOTS},
                                       {"json", no_argument, 0, O_JSON},
                                       {"jobs", required_argument, 0, O_JOBS},
                                       {0, 0, 0, 0}};
    input_args ia = {"wall-oss-flow", NULL, NULL, NULL, 0, 0};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = ncpu > 0 ? (int)(ncpu < 64 ? ncpu : 64) : 1;
    int64_t max_memory = -1;
    const char *out_dir = "dmuon-scale";
    char strat_buf[256] = "adamw,muon-ddp,muon-fsdp,muon-rr,dmuon";
    long gpus[MAX_POINTS] = {8, 16, 32, 64, 128, 256};
    int n_gpus = 6, progress = isatty(2), plots = 1, json = 0, c;
    sched_opts so;
    sched_opts_default(&so);
    sim_opts o;
    sim_opts_default(&o);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
        if (c == SCHED_OPT_BASE + 0) {
            opt_usage_error("scale", "--strategy: use --strategies LIST for a study");
            return 2;
        }
        int h = common_opt("scale", c, argv, &ia, &max_memory, &so, &o);
        if (h < 0) return 2;
        if (h > 0) continue;
        switch (c) {
        case O_GPUS:
            if (opt_parse_int_list("scale", "--gpus", optarg, 1, 65536, gpus, MAX_POINTS, &n_gpus)) return 2;
            break;
        case O_STRATS: snprintf(strat_buf, sizeof strat_buf, "%s", optarg); break;
        case O_OUT: out_dir = optarg; break;
        case O_PROGRESS: progress = 1; break;
        case O_NOPROGRESS: progress = 0; break;
        case O_NOPLOTS: plots = 0; break;
        case O_JSON: json = 1; break;
        case O_JOBS: {
            long v;
            if (opt_parse_long("scale", "--jobs", optarg, 1, 64, &v)) return 2;
            jobs = (int)v;
            break;
        }
        default: scale_help(); return 0; /* -h, --help */
        }
    }
    if (opt_no_operands("scale", argc, argv)) return 2;
    /* Strategies: validated through the scheduler's own parser; adamw first as the baseline. */
    char *names[MAX_STRATS + 1];
    sched_opts sopt[MAX_STRATS + 1];
    int n_str = 0, listed[MAX_STRATS + 1], base = -1;
    dm_err err;
    for (char *save = NULL, *t = strtok_r(strat_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n_str == MAX_STRATS) {
            opt_usage_error("scale", "--strategies: at most %d", MAX_STRATS);
            return 2;
        }
        sopt[n_str] = so;
        if (sched_opts_parse(&sopt[n_str], "strategy", t, &err)) {
            opt_usage_error("scale", "--strategies: %s", err.msg);
            return 2;
        }
        names[n_str] = t;
        listed[n_str] = 1;
        if (sopt[n_str].strategy == SCHED_ADAMW) base = n_str;
        n_str++;
    }
    if (n_str == 0) {
        opt_usage_error("scale", "--strategies: expected at least one strategy");
        return 2;
    }
    if (base < 0) {
        sopt[n_str] = so;
        sched_opts_parse(&sopt[n_str], "strategy", "adamw", &err);
        names[n_str] = "adamw";
        listed[n_str] = 0;
        base = n_str++;
    }
    inputs in;
    ia.gpus_per_node = so.gpus_per_node;
    if (inputs_resolve("scale", &ia, &in)) {
        inputs_free(&in);
        return 1;
    }
    if (dm_mkdir_p(out_dir, &err)) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        inputs_free(&in);
        return 1;
    }
    o.costs = in.costs;
    int n_pts = n_gpus * n_str, rc = 0;
    point *pts = dm_calloc((size_t)n_pts, sizeof *pts, &err);
    if (!pts) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        inputs_free(&in);
        return 1;
    }
    /* --json: the points as one JSON object on stdout, the report on stderr */
    FILE *rep = json ? stderr : stdout;
    fprintf(rep, "# dmuon scale: resolved configuration\n");
    inputs_print(rep, &in);
    fprintf(rep, "  collectives %s algorithm\n", coll_algo_name(o.algo));
    char desc[512];
    fprintf(rep, "  options     %s\n", sched_opts_describe(&so, desc, sizeof desc));
    fprintf(rep, "  gpus       ");
    for (int i = 0; i < n_gpus; i++) fprintf(rep, " %ld", gpus[i]);
    fprintf(rep, "\n  strategies ");
    for (int s = 0; s < n_str; s++) fprintf(rep, " %s%s", names[s], listed[s] ? "" : " (baseline only)");
    fprintf(rep, "\n");
    double t_start = sched_wall_s(), sim_total = 0, cpu_total = 0;
    int64_t ev_total = 0;
    char srcs[DM_OP__COUNT][640];
    memset(srcs, 0, sizeof srcs);
    /* The points, up to `jobs` at a time in child processes (each point is independent: its plan
     * and simulation; the results come back through a pipe and are kept in index order, so the
     * output does not depend on --jobs); each child gets its share of the memory limit. */
    if (jobs > n_pts) jobs = n_pts;
    int64_t job_memory = max_memory;
    if (jobs > 1) {
        if (job_memory < 0) job_memory = sim_mem_default_limit();
        job_memory /= jobs;
    }
    int done = 0, next = 0, running = 0;
    scale_job *jb = dm_calloc((size_t)(jobs > 0 ? jobs : 1), sizeof *jb, &err);
    char(*psrc)[DM_OP__COUNT][640] = jb ? dm_calloc((size_t)n_pts, sizeof *psrc, &err) : NULL; /* per point */
    if (!jb || !psrc) {
        free(jb);
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        free(pts);
        inputs_free(&in);
        return 1;
    }
    for (int k = 0; k < jobs; k++) jb[k].idx = -1;
    while (done < n_pts) {
        point_out res;
        int idx = -1;
        if (jobs <= 1) { /* in this process */
            idx = next++;
            scale_point(&in, &o, sopt, gpus, n_str, idx, max_memory, &res);
        } else {
            while (running < jobs && next < n_pts) { /* start what fits */
                int k = 0;
                while (jb[k].idx >= 0) k++;
                if (scale_fork(&jb[k], next, &in, &o, sopt, gpus, n_str, job_memory, &err)) {
                    fprintf(stderr, "dmuon scale: %s\n", err.msg);
                    rc = 1;
                    break;
                }
                next++, running++;
            }
            if (!running) break;
            if (scale_collect(jb, jobs, &idx, &res, &err)) {
                fprintf(stderr, "dmuon scale: %s\n", err.msg);
                rc = 1;
                break;
            }
            running--;
        }
        done++;
        point *q = &pts[idx];
        *q = res.q;
        q->gpus = (int)gpus[idx / n_str], q->strat = idx % n_str;
        if (progress) {
            fprintf(stderr, "\rscale: %d/%d done, last %-10s on %4d GPUs  (%.1f s)   ", done, n_pts, names[q->strat], q->gpus,
                    sched_wall_s() - t_start);
            fflush(stderr);
        }
        if (!res.q.ok) {
            if (progress) fprintf(stderr, "\n");
            fprintf(stderr, "dmuon scale: %s on %d GPUs: %s\n", names[q->strat], q->gpus, res.msg);
            rc = 1;
            continue;
        }
        sim_total += res.q.sim_s;
        cpu_total += res.sim_cpu_s;
        ev_total += q->events;
        memcpy(psrc[idx], res.srcs, sizeof psrc[idx]);
    }
    free(jb);
    for (int k = 0; k < DM_OP__COUNT; k++) /* each kind's source: the first point's that has one, in index order */
        for (int i = 0; i < n_pts && !srcs[k][0]; i++)
            if (psrc[i][k][0]) snprintf(srcs[k], sizeof srcs[k], "%s", psrc[i][k]);
    free(psrc);
    for (int gi = 0; gi < n_gpus; gi++) {
        const point *b = &pts[gi * n_str + base];
        for (int s = 0; s < n_str; s++) {
            point *q = &pts[gi * n_str + s];
            q->overhead_pct = b->ok && q->ok ? 100 * (q->step_us / b->step_us - 1) : NAN;
        }
    }
    if (progress) fprintf(stderr, "\n");
    fprintf(rep, "cost sources:\n");
    for (int k = 0; k < DM_OP__COUNT; k++)
        if (srcs[k][0]) fprintf(rep, "  %-14s %s\n", dm_op_kind_name((dm_op_kind)k), srcs[k]);
    fprintf(rep, "\n");
    write_table(rep, pts, n_pts, names, n_str, 0, 0);
    int n_nofit = 0;
    for (int i = 0; i < n_pts; i++) n_nofit += pts[i].ok && !pts[i].fits;
    fprintf(rep, "memory: mem_GiB is the executor's per-rank peak (core/memory.h) against the %s's %.1f GiB; %d of %d points "
           "do not fit%s\n", in.cluster.gpu->short_name, in.cluster.gpu->mem_bytes / 1073741824.0, n_nofit, n_pts,
           n_nofit ? " (fits 0: simulated all the same, marked in the table, the CSV and the plots)" : "");
    char path[4096];
    snprintf(path, sizeof path, "%s/scale.dat", out_dir);
    if (write_file(path, pts, n_pts, names, n_str, 0, 1, NULL, NULL, 0)) rc = 1;
    snprintf(path, sizeof path, "%s/scale.csv", out_dir);
    if (write_file(path, pts, n_pts, names, n_str, 1, 0, in.model->name, in.cluster.name, sopt[0].tokens)) rc = 1;
    for (int i = 0, head = 0; i < n_pts; i++) { /* which balance won where auto chose */
        char d[512];
        if (!pts[i].ok || !pts[i].pb.n) continue;
        if (!head++) fprintf(rep, "\n# balance auto, per point\n");
        fprintf(rep, "  %4d %-10s %s\n", pts[i].gpus, names[pts[i].strat], plan_best_describe(&pts[i].pb, d, sizeof d));
    }
    fprintf(rep, "\nwrote %s/scale.dat and %s/scale.csv\n", out_dir, out_dir);
    if (plots) {
        const char *gp = find_plot_script();
        if (n_gpus < 2) {
            fprintf(rep, "plots: one GPU count, nothing to plot against; skipped\n");
        } else if (!plot_available()) {
            fprintf(rep, "plots: gnuplot not found; skipped (the data files are ready for it)\n");
        } else if (!gp) {
            fprintf(rep, "plots: plots/scale.gp not found (set DMUON_PLOTS); skipped\n");
        } else {
            char expr[8192], strs[256] = "", qdir[4096], qstrs[600], qtitle[512], title[256];
            for (int s = 0; s < n_str; s++) /* the blocks of scale.dat, in order */
                snprintf(strs + strlen(strs), sizeof strs - strlen(strs), "%s%s", strs[0] ? " " : "", names[s]);
            snprintf(title, sizeof title, "%s on %s", in.model->name, in.cluster.name);
            snprintf(expr, sizeof expr, "dir='%s'; strategies='%s'; title_text='%s'", plot_quote(out_dir, qdir, sizeof qdir),
                     plot_quote(strs, qstrs, sizeof qstrs), plot_quote(title, qtitle, sizeof qtitle));
            static const char *const pngs[] = {"step_time.png", "optimizer_time.png", "overhead.png"};
            if (plot_run(gp, expr, out_dir, pngs, 3, NULL, &err)) {
                fprintf(stderr, "dmuon scale: gnuplot %s: %s\n", gp, err.msg);
                rc = 1;
            } else {
                fprintf(rep, "plots: %s/step_time.png %s/optimizer_time.png %s/overhead.png\n", out_dir, out_dir, out_dir);
            }
        }
    }
    struct timespec cts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
    struct rusage ch;
    getrusage(RUSAGE_CHILDREN, &ch); /* the points' processes (--jobs > 1) */
    double child_cpu = ch.ru_utime.tv_sec + ch.ru_utime.tv_usec * 1e-6 + ch.ru_stime.tv_sec + ch.ru_stime.tv_usec * 1e-6;
    fprintf(rep, "speed: %d points, %lld events simulated in %.3f s wall, %.3f s CPU with setup (%.3g events/s of wall); "
           "study %.3f s wall on %d job%s, process %.3f s CPU (its point processes included)\n",
           n_pts, (long long)ev_total, sim_total, cpu_total, sim_total > 0 ? ev_total / sim_total : 0.0,
           sched_wall_s() - t_start, jobs, jobs == 1 ? "" : "s", cts.tv_sec + cts.tv_nsec * 1e-9 + child_cpu);
    if (json) print_scale_json(stdout, &in, pts, n_pts, names);
    free(pts);
    inputs_free(&in);
    return rc;
}
