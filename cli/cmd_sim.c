/* cmd_sim.c: `dmuon sim` (simulate one training step of a planned program on a modeled cluster)
 * and `dmuon scale` (a what-if study over GPU counts and strategies: table, CSV, gnuplot PNGs). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calib.h"
#include "cluster.h"
#include "collcost.h"
#include "commands.h"
#include "compare.h"
#include "costs.h"
#include "json.h"
#include "model.h"
#include "opts.h"
#include "outfile.h"
#include "program.h"
#include "sched.h"
#include "sim.h"
#include "sim_mem.h"
#include "trace.h"

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The inputs both commands resolve: model, cluster, costs. */
typedef struct sim_inputs {
    dm_model *model;
    dm_cluster cluster;
    dm_costs *costs;
    calib_info calib; /* what --calibration applied (describe "" when none) */
} sim_inputs;

static int load_inputs(const char *cmd, const char *model, const char *cluster, const char *costs, const char *calib,
                       int gpn, sim_inputs *in)
{
    dm_err err;
    memset(in, 0, sizeof *in);
    if (dm_model_load(model, &in->model, &err)) {
        fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
        return 1;
    }
    if (dm_cluster_load(cluster, &in->cluster, &err)) {
        fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
        return 1;
    }
    if (gpn > 0) in->cluster.gpus_per_node = gpn;
    if (calib && calib_apply(calib, &in->cluster, &in->calib, &err)) {
        fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
        return 1;
    }
    if (!costs && in->calib.costs[0]) costs = in->calib.costs;
    if (costs ? dm_costs_load(costs, &in->costs, &err) : dm_costs_load_default(&in->costs, &err)) {
        fprintf(stderr, "dmuon %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

static void free_inputs(sim_inputs *in)
{
    dm_model_free(in->model);
    dm_costs_free(in->costs);
}

static void print_model(FILE *f, const dm_model *m)
{
    fprintf(f, "  model       %s (%s): %.3f B parameters, %lld Muon matrices (%.3f B), %lld AdamW tensors\n", m->name,
            m->path && *m->path ? m->path : "built in", dm_model_params(m) / 1e9,
            (long long)dm_model_count_role(m, DM_ROLE_MUON), dm_model_params_role(m, DM_ROLE_MUON) / 1e9,
            (long long)dm_model_count_role(m, DM_ROLE_ADAMW));
}

static void print_sources(FILE *f, const sim_result *r)
{
    static const dm_op_kind order[] = {DM_OP_FORWARD, DM_OP_BACKWARD, DM_OP_NS, DM_OP_MUON_UPDATE, DM_OP_ADAMW,
                                       DM_OP_BROADCAST, DM_OP_REDUCE, DM_OP_ALLREDUCE, DM_OP_ALLGATHER,
                                       DM_OP_REDUCESCATTER};
    fprintf(f, "cost sources:\n");
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (r->cost_src[order[i]][0]) fprintf(f, "  %-14s %s\n", dm_op_kind_name(order[i]), r->cost_src[order[i]]);
}

static void print_result(FILE *f, const dm_program *p, const sim_result *r)
{
    double step = r->step_us;
    fprintf(f, "\nstep time          %10.3f ms\n", step / 1e3);
    fprintf(f, "  forward          %10.3f ms  %5.1f%%   (GPU time on rank %d, the last to finish)\n", r->forward_us / 1e3,
            100 * r->forward_us / step, r->crit_rank);
    fprintf(f, "  backward         %10.3f ms  %5.1f%%\n", r->backward_us / 1e3, 100 * r->backward_us / step);
    fprintf(f, "  optimizer        %10.3f ms  %5.1f%%   (NS, Muon update and AdamW kernels)\n", r->optimizer_us / 1e3,
            100 * r->optimizer_us / step);
    fprintf(f, "  exposed comm     %10.3f ms  %5.1f%%   (GPU idle, waiting on collectives)\n", r->exposed_comm_us / 1e3,
            100 * r->exposed_comm_us / step);
    fprintf(f, "  comm in flight   %10.3f ms  %5.1f%%   (time with a collective running; overlaps compute)\n",
            r->comm_busy_us / 1e3, 100 * r->comm_busy_us / step);
    double mn = INFINITY;
    int busy = 0;
    for (int k = 0; k < r->nranks; k++) {
        if (r->ns_us[k] < mn) mn = r->ns_us[k];
        busy += r->ns_us[k] > 0;
    }
    /* Collectives on the critical rank: how much, how long in flight, how long held waiting. */
    int cnt[DM_OP__COUNT] = {0};
    double mb[DM_OP__COUNT] = {0}, busy_ms[DM_OP__COUNT] = {0}, wait_ms[DM_OP__COUNT] = {0};
    const dm_rank_prog *rp = &p->ranks[r->crit_rank];
    for (int i = 0; i < rp->n_ops; i++) {
        const dm_op *op = &rp->ops[i];
        if (!dm_op_is_collective(op->kind)) continue;
        int g = r->op_off[r->crit_rank] + i;
        cnt[op->kind]++;
        mb[op->kind] += op->bytes / 1e6;
        busy_ms[op->kind] += (r->end_us[g] - r->start_us[g]) / 1e3;
        wait_ms[op->kind] += (r->start_us[g] - r->ready_us[g]) / 1e3;
    }
    fprintf(f, "\ncollectives on rank %d  %6s %12s %12s %14s\n", r->crit_rank, "count", "MB", "in flight ms",
            "wait peers ms");
    for (int k = 0; k < DM_OP__COUNT; k++)
        if (cnt[k])
            fprintf(f, "  %-19s %6d %12.3f %12.3f %14.3f\n", dm_op_kind_name((dm_op_kind)k), cnt[k], mb[k], busy_ms[k],
                    wait_ms[k]);
    fprintf(f, "\nNS load per rank   min %.3f  mean %.3f  max %.3f ms (rank %d); %d of %d ranks run NS; imbalance %.1f%%\n",
            mn / 1e3, r->ns_mean_us / 1e3, r->ns_max_us / 1e3, r->ns_max_rank, busy, r->nranks,
            r->ns_mean_us > 0 ? 100 * (r->ns_max_us / r->ns_mean_us - 1) : 0.0);
    if (r->nranks <= 16) {
        fprintf(f, "  per rank (ms)   ");
        for (int k = 0; k < r->nranks; k++) fprintf(f, " %.3f", r->ns_us[k] / 1e3);
        fprintf(f, "\n");
    }
    fprintf(f, "\ncritical path      %10.3f ms, ending on rank %d\n", r->crit_total_us / 1e3, r->crit_rank);
    fprintf(f, "  %-16s %10s %7s %7s\n", "kind", "ms", "share", "ops");
    for (int i = 0; i < r->n_crit; i++)
        fprintf(f, "  %-16s %10.3f %6.1f%% %7d\n", dm_op_kind_name(r->crit[i].kind), r->crit[i].us / 1e3,
                100 * r->crit[i].us / step, r->crit[i].ops);
    fprintf(f, "  longest ops on it:\n");
    for (int i = 0; i < r->n_top; i++) {
        const sim_path_op *o = &r->top[i];
        const dm_op *op = &p->ranks[o->rank].ops[o->op];
        fprintf(f, "    rank %d op %d %s", o->rank, o->op, dm_op_kind_name(o->kind));
        if (o->layer >= 0) fprintf(f, " layer %d", o->layer);
        if (o->kind == DM_OP_NS) fprintf(f, " %lldx%lld x%d", (long long)op->m, (long long)op->n, op->batch);
        if (dm_op_is_collective(o->kind)) fprintf(f, " %.3f MB over %d ranks", op->bytes / 1e6, p->groups[op->group].n);
        fprintf(f, ": %.3f ms at %.3f ms\n", o->dur_us / 1e3, o->start_us / 1e3);
    }
}

static void print_speed(FILE *f, const sim_result *r, double plan_s)
{
    fprintf(f, "\nspeed: simulated %lld ops, %lld events, %lld rate updates in %.3f s wall, %.3f s CPU (%.3g events/s "
               "of CPU); setup %.3f s wall, %.3f s CPU; plan %.3f s wall\n",
            (long long)r->ops, (long long)r->events, (long long)r->rate_updates, r->wall_s, r->cpu_s,
            r->cpu_s > 0 ? r->events / r->cpu_s : 0.0, r->setup_s, r->setup_cpu_s, plan_s);
}

static void json_kv(FILE *f, const char *key, const char *v, int last)
{
    fprintf(f, "  \"%s\": ", key);
    json_write_string(f, v);
    fprintf(f, last ? "\n" : ",\n");
}

/* The results for programs: one object, keys as in the table, times in microseconds. */
static void print_json(FILE *f, const dm_program *p, const dm_cluster *c, const dm_costs *costs, const sim_result *r)
{
    fprintf(f, "{\n");
    json_kv(f, "format", "dmuon-sim-1", 0);
    json_kv(f, "model", p->model, 0);
    json_kv(f, "strategy", p->strategy, 0);
    json_kv(f, "options", p->options, 0);
    json_kv(f, "cluster", c->name, 0);
    json_kv(f, "costs", dm_costs_describe(costs), 0);
    fprintf(f, "  \"nranks\": %d,\n  \"tokens\": %lld,\n", p->nranks, (long long)p->tokens);
    fprintf(f, "  \"step_us\": %.3f,\n  \"forward_us\": %.3f,\n  \"backward_us\": %.3f,\n  \"optimizer_us\": %.3f,\n"
               "  \"exposed_comm_us\": %.3f,\n  \"comm_busy_us\": %.3f,\n  \"crit_rank\": %d,\n",
            r->step_us, r->forward_us, r->backward_us, r->optimizer_us, r->exposed_comm_us, r->comm_busy_us, r->crit_rank);
    fprintf(f, "  \"ns_us\": [");
    for (int k = 0; k < r->nranks; k++) fprintf(f, "%s%.3f", k ? ", " : "", r->ns_us[k]);
    fprintf(f, "],\n  \"critical_path\": [");
    for (int i = 0; i < r->n_crit; i++)
        fprintf(f, "%s{\"kind\": \"%s\", \"us\": %.3f, \"ops\": %d}", i ? ", " : "", dm_op_kind_name(r->crit[i].kind),
                r->crit[i].us, r->crit[i].ops);
    fprintf(f, "],\n  \"cost_sources\": {");
    int first = 1;
    for (int k = 0; k < DM_OP__COUNT; k++) {
        if (!r->cost_src[k][0]) continue;
        fprintf(f, "%s\"%s\": ", first ? "" : ", ", dm_op_kind_name((dm_op_kind)k));
        json_write_string(f, r->cost_src[k]);
        first = 0;
    }
    fprintf(f, "},\n  \"ops\": %lld,\n  \"events\": %lld,\n  \"sim_wall_s\": %.6f\n}\n", (long long)r->ops,
            (long long)r->events, r->wall_s);
}

/* ---- options both commands take ----------------------------------------------------------- */

enum { O_MODEL = 1, O_GPUS, O_CLUSTER, O_COSTS, O_CALIB, O_ALGO, O_TRACE, O_CSV, O_PROGRAM, O_HELP, O_QUIET, O_OUT, O_PROGRESS,
       O_NOPROGRESS, O_NOPLOTS, O_STRATS, O_JSON, O_MAXMEM };

#define COMMON_LONG                                                                                 \
    {"model", required_argument, 0, O_MODEL}, {"gpus", required_argument, 0, O_GPUS},               \
    {"cluster", required_argument, 0, O_CLUSTER}, {"costs", required_argument, 0, O_COSTS},         \
    {"calibration", required_argument, 0, O_CALIB}, {"max-memory", required_argument, 0, O_MAXMEM}, \
    {"algo", required_argument, 0, O_ALGO}, {"help", no_argument, 0, O_HELP}, SCHED_GETOPT_LONG

typedef struct common_args {
    const char *model, *cluster, *costs, *calib;
    int64_t max_memory; /* --max-memory bytes; -1: sim_mem_default_limit(); 0: none */
} common_args;

/* 1: handled (plan options into so, the rest into a/o), 0: not one of them, -1: bad value. */
static int common_opt(const char *cmd, int c, char **argv, common_args *a, sched_opts *so, sim_opts *o)
{
    int h = sched_getopt_handle(so, cmd, c, optarg);
    if (h) return h;
    switch (c) {
    case O_MODEL: a->model = optarg; return 1;
    case O_CLUSTER: a->cluster = optarg; return 1;
    case O_COSTS: a->costs = optarg; return 1;
    case O_CALIB: a->calib = optarg; return 1;
    case O_MAXMEM: return opt_parse_size(cmd, "--max-memory", optarg, 0, INT64_MAX, &a->max_memory) ? -1 : 1;
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
           "Plan one training step (the scheduler) and simulate it on a modeled cluster: resolved\n"
           "configuration, step time and its parts, per-rank NS load, the critical path.\n\n"
           "  --model M             model name or file (see 'dmuon models'); required\n"
           "  --gpus N              ranks (GPUs), 1 .. 65536; required\n"
           "  --cluster C           preset (a800, h100, h200, h200x2) or cluster file (default a800)\n"
           "  --costs FILE          kernel cost table (default: traces/costs/h200.csv, else roofline)\n"
           "  --calibration FILE    apply a calibration file (dmuon calibrate) to the cluster; its\n"
           "                        kernel table is used unless --costs is given\n"
           "  --algo A              collective algorithm: auto (NCCL's choice), ring, tree (default auto)\n"
           "  --program FILE        simulate a saved step program (dmuon plan -o) instead of planning one;\n"
           "                        the cluster defaults to the program's\n"
           "  --trace FILE          write the Chrome trace JSON (Perfetto opens it)\n"
           "  --csv FILE            write the same trace rows as CSV\n"
           "  --quiet               only the step time line\n"
           "  --json                the results as one JSON object (times in microseconds)\n"
           "  --max-memory SIZE     refuse a plan whose simulation would need more memory (estimated\n"
           "                        before planning; 0: no limit; default 3/4 of physical memory)\n"
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
                                       {0, 0, 0, 0}};
    common_args ca = {NULL, NULL, NULL, NULL, -1}; /* cluster: the program's, else a800 */
    const char *trace = NULL, *csv = NULL, *program = NULL;
    long gpus = 0;
    int quiet = 0, c;
    sched_opts so;
    sched_opts_default(&so);
    sim_opts o;
    sim_opts_default(&o);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
        int h = common_opt("sim", c, argv, &ca, &so, &o);
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
        default: sim_help(); return 0; /* -h, --help */
        }
    }
    if (opt_no_operands("sim", argc, argv)) return 2;
    if (!program && (!ca.model || !gpus)) {
        opt_usage_error("sim", "expected --model and --gpus (or --program)");
        return 2;
    }
    dm_err err;
    sim_inputs in;
    dm_program *p = NULL;
    sched_report rep;
    memset(&rep, 0, sizeof rep);
    sim_result *r = NULL;
    int rc = 1;
    memset(&in, 0, sizeof in);
    double plan_s = 0;
    if (program) {
        if (dm_program_load(program, &p, &err) || dm_program_validate(p, &err)) {
            fprintf(stderr, "dmuon sim: %s\n", err.msg);
            goto out;
        }
        if (dm_cluster_load(ca.cluster ? ca.cluster : p->cluster, &in.cluster, &err) ||
            (ca.calib && calib_apply(ca.calib, &in.cluster, &in.calib, &err)) ||
            (ca.costs ? dm_costs_load(ca.costs, &in.costs, &err)
             : in.calib.costs[0] ? dm_costs_load(in.calib.costs, &in.costs, &err) : dm_costs_load_default(&in.costs, &err))) {
            fprintf(stderr, "dmuon sim: %s\n", err.msg);
            goto out;
        }
        in.cluster.gpus_per_node = p->gpus_per_node;
    } else {
        if (load_inputs("sim", ca.model, ca.cluster ? ca.cluster : "a800", ca.costs, ca.calib, so.gpus_per_node, &in)) goto out;
        double t0 = wall_s();
        if (sim_mem_check_plan(in.model, &in.cluster, (int)gpus, &so, trace || csv, ca.max_memory, &err) ||
            sched_build(in.model, &in.cluster, (int)gpus, in.costs, &so, &p, &rep, &err)) {
            fprintf(stderr, "dmuon sim: %s\n", err.msg);
            goto out;
        }
        plan_s = wall_s() - t0;
    }
    o.costs = in.costs;
    o.record_trace = trace || csv;
    if (sim_mem_check_program(p, o.record_trace, ca.max_memory, &err) || sim_run(p, &in.cluster, &o, &r, &err)) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    if (quiet == 2) {
        print_json(stdout, p, &in.cluster, in.costs, r);
    } else if (quiet) {
        printf("%s %s %d GPUs %s: step %.3f ms\n", p->model, p->strategy, p->nranks, in.cluster.name, r->step_us / 1e3);
    } else {
        printf("# dmuon sim: resolved configuration\n");
        if (in.model) print_model(stdout, in.model);
        else printf("  model       %s (from program %s)\n", p->model, program);
        dm_cluster_describe(&in.cluster, stdout);
        printf("  ranks       %d on %d node%s\n", p->nranks, dm_cluster_nodes(&in.cluster, p->nranks),
               dm_cluster_nodes(&in.cluster, p->nranks) == 1 ? "" : "s");
        printf("  strategy    %s (%s)\n", p->strategy, p->options);
        printf("  tokens      %lld per rank per step\n", (long long)p->tokens);
        printf("  costs       %s\n", dm_costs_describe(in.costs));
        printf("  calibration %s\n", in.calib.describe[0] ? in.calib.describe : "none (cluster preset or file as given)");
        printf("  collectives %s algorithm\n", coll_algo_name(o.algo));
        if (!program)
            printf("  plan        %s assignment, %d units over %d owners, planned NS load max %.3f ms, imbalance %.1f%%\n",
                   rep.solver_status, rep.n_units, rep.nowners, rep.max_us / 1e3, 100 * rep.imbalance);
        print_sources(stdout, r);
        print_result(stdout, p, r);
        print_speed(stdout, r, plan_s);
    }
    if (trace && dm_trace_write_json(r->trace, trace, &err)) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    if (csv && dm_trace_write_csv(r->trace, csv, &err)) {
        fprintf(stderr, "dmuon sim: %s\n", err.msg);
        goto out;
    }
    rc = 0;
out:
    sim_result_free(r);
    sched_report_free(&rep);
    dm_program_free(p);
    free_inputs(&in);
    return rc;
}

/* ---- dmuon scale -------------------------------------------------------------------------- */

#define MAX_POINTS 64
#define MAX_STRATS 8

typedef struct point {
    int gpus, strat;
    double step_us, fwd_us, bwd_us, opt_us, opt_kernels_us, exposed_us, ns_max_us, overhead_pct;
    double sim_s, plan_s;
    int64_t events;
    int ok;
} point;

static void scale_help(void)
{
    printf("Usage: dmuon scale [--model M] [--cluster C] [--gpus LIST] [--strategies LIST] [--out DIR]\n"
           "What-if scaling study: plan and simulate one step per GPU count and strategy; print a table\n"
           "of step time, optimizer time and overhead versus adamw; write DIR/scale.dat (the table, one block per strategy),\n"
           "DIR/scale.csv and, when gnuplot is installed, DIR/step_time.png, DIR/optimizer_time.png and\n"
           "DIR/overhead.png.\n\n"
           "  --model M             model (default wall-oss-flow)\n"
           "  --cluster C           preset or cluster file (default a800)\n"
           "  --gpus LIST           GPU counts (default 8,16,32,64,128,256)\n"
           "  --strategies LIST     comma list of adamw, muon-ddp, muon-fsdp, muon-rr, dmuon (default all)\n"
           "  --out DIR             output folder (default dmuon-scale)\n"
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

static int have_gnuplot(void)
{
    const char *p = getenv("PATH");
    if (!p) return 0;
    char buf[4096];
    while (*p) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)n, p);
        if (access(buf, X_OK) == 0) return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

/* The study's table. csv: comma-separated; grouped: one block per strategy separated by two
 * blank lines (gnuplot's `index`), else ordered by GPU count as computed. */
/* s for a single-quoted gnuplot string (a quote doubled). Returns buf. */
static char *gp_quote(const char *s, char *buf, size_t size)
{
    size_t k = 0;
    for (; *s && k + 3 < size; s++) {
        if (*s == '\'') buf[k++] = '\'';
        buf[k++] = *s;
    }
    buf[k] = 0;
    return buf;
}

/* gnuplot -e EXPR SCRIPT, without a shell in between; 0 when it exits 0. (fork/exec: <spawn.h>
 * would pull in <sched.h>, which -I sched shadows with the scheduler's header.) */
static int run_gnuplot(const char *expr, const char *script)
{
    char *const args[] = {"gnuplot", "-e", (char *)expr, (char *)script, NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execvp("gnuplot", args);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void write_table(FILE *f, const point *pts, int n, char *const *names, int n_str, int csv, int grouped)
{
    if (csv)
        fprintf(f, "gpus,strategy,step_ms,forward_ms,backward_ms,optimizer_ms,optimizer_kernels_ms,exposed_comm_ms,"
                   "ns_max_ms,overhead_vs_adamw_pct\n");
    else
        fprintf(f, "# %4s %-10s %10s %10s %10s %12s %12s %12s %10s %10s\n", "gpus", "strategy", "step_ms", "forward_ms",
                "backward_ms", "optimizer_ms", "opt_kern_ms", "exposed_ms", "ns_max_ms", "overhead_%");
    for (int s = 0; s < (grouped ? n_str : 1); s++) {
        if (grouped && s) fprintf(f, "\n\n");
        for (int i = 0; i < n; i++) {
            const point *q = &pts[i];
            if (!q->ok || (grouped && q->strat != s)) continue;
            if (csv)
                fprintf(f, "%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f\n", q->gpus, names[q->strat], q->step_us / 1e3,
                        q->fwd_us / 1e3, q->bwd_us / 1e3, q->opt_us / 1e3, q->opt_kernels_us / 1e3, q->exposed_us / 1e3,
                        q->ns_max_us / 1e3, q->overhead_pct);
            else
                fprintf(f, "  %4d %-10s %10.3f %10.3f %10.3f %12.3f %12.3f %12.3f %10.3f %10.2f\n", q->gpus,
                        names[q->strat], q->step_us / 1e3, q->fwd_us / 1e3, q->bwd_us / 1e3, q->opt_us / 1e3,
                        q->opt_kernels_us / 1e3, q->exposed_us / 1e3, q->ns_max_us / 1e3, q->overhead_pct);
        }
    }
}

static int write_file(const char *path, const point *pts, int n, char *const *names, int n_str, int csv, int grouped)
{
    dm_err err;
    dm_out *o = dm_out_open(path, &err);
    if (!o) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        return -1;
    }
    write_table(dm_out_file(o), pts, n, names, n_str, csv, grouped);
    if (dm_out_commit(o, &err)) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        return -1;
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
                                       {0, 0, 0, 0}};
    common_args ca = {"wall-oss-flow", "a800", NULL, NULL, -1};
    const char *out_dir = "dmuon-scale";
    char strat_buf[256] = "adamw,muon-ddp,muon-fsdp,muon-rr,dmuon";
    long gpus[MAX_POINTS] = {8, 16, 32, 64, 128, 256};
    int n_gpus = 6, progress = isatty(2), plots = 1, c;
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
        int h = common_opt("scale", c, argv, &ca, &so, &o);
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
    sim_inputs in;
    if (load_inputs("scale", ca.model, ca.cluster, ca.costs, ca.calib, so.gpus_per_node, &in)) {
        free_inputs(&in);
        return 1;
    }
    if (cmp_mkdir_p(out_dir, &err)) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        free_inputs(&in);
        return 1;
    }
    o.costs = in.costs;
    int n_pts = n_gpus * n_str, rc = 0;
    point *pts = dm_calloc((size_t)n_pts, sizeof *pts, &err);
    if (!pts) {
        fprintf(stderr, "dmuon scale: %s\n", err.msg);
        free_inputs(&in);
        return 1;
    }
    printf("# dmuon scale: resolved configuration\n");
    print_model(stdout, in.model);
    dm_cluster_describe(&in.cluster, stdout);
    printf("  costs       %s\n", dm_costs_describe(in.costs));
    printf("  calibration %s\n", in.calib.describe[0] ? in.calib.describe : "none (cluster preset or file as given)");
    printf("  collectives %s algorithm\n", coll_algo_name(o.algo));
    char desc[512];
    printf("  options     %s\n", sched_opts_describe(&so, desc, sizeof desc));
    printf("  gpus       ");
    for (int i = 0; i < n_gpus; i++) printf(" %ld", gpus[i]);
    printf("\n  strategies ");
    for (int s = 0; s < n_str; s++) printf(" %s%s", names[s], listed[s] ? "" : " (baseline only)");
    printf("\n");
    double t_start = wall_s(), sim_total = 0, cpu_total = 0;
    int64_t ev_total = 0;
    char srcs[DM_OP__COUNT][192];
    memset(srcs, 0, sizeof srcs);
    for (int gi = 0; gi < n_gpus; gi++) {
        for (int s = 0; s < n_str; s++) {
            point *q = &pts[gi * n_str + s];
            q->gpus = (int)gpus[gi];
            q->strat = s;
            if (progress) {
                fprintf(stderr, "\rscale: %d/%d  %-10s on %4ld GPUs  (%.1f s)   ", gi * n_str + s + 1, n_pts, names[s],
                        gpus[gi], wall_s() - t_start);
                fflush(stderr);
            }
            dm_program *p = NULL;
            sim_result *r = NULL;
            double t0 = wall_s();
            if (sim_mem_check_plan(in.model, &in.cluster, (int)gpus[gi], &sopt[s], 0, ca.max_memory, &err) ||
                sched_build(in.model, &in.cluster, (int)gpus[gi], in.costs, &sopt[s], &p, NULL, &err) ||
                (q->plan_s = wall_s() - t0, sim_mem_check_program(p, 0, ca.max_memory, &err)) ||
                sim_run(p, &in.cluster, &o, &r, &err)) {
                if (progress) fprintf(stderr, "\n");
                fprintf(stderr, "dmuon scale: %s on %ld GPUs: %s\n", names[s], gpus[gi], err.msg);
                dm_program_free(p);
                rc = 1;
                continue;
            }
            q->ok = 1;
            q->step_us = r->step_us;
            q->fwd_us = r->forward_us;
            q->bwd_us = r->backward_us;
            q->opt_kernels_us = r->optimizer_us;
            q->opt_us = r->step_us - r->forward_us - r->backward_us;
            q->exposed_us = r->exposed_comm_us;
            q->ns_max_us = r->ns_max_us;
            q->events = r->events;
            q->sim_s = r->wall_s;
            sim_total += r->wall_s;
            cpu_total += r->cpu_s + r->setup_cpu_s;
            ev_total += r->events;
            for (int k = 0; k < DM_OP__COUNT; k++)
                if (!srcs[k][0] && r->cost_src[k][0]) snprintf(srcs[k], sizeof srcs[k], "%s", r->cost_src[k]);
            sim_result_free(r);
            dm_program_free(p);
        }
        const point *b = &pts[gi * n_str + base];
        for (int s = 0; s < n_str; s++) {
            point *q = &pts[gi * n_str + s];
            q->overhead_pct = b->ok && q->ok ? 100 * (q->step_us / b->step_us - 1) : NAN;
        }
    }
    if (progress) fprintf(stderr, "\n");
    printf("cost sources:\n");
    for (int k = 0; k < DM_OP__COUNT; k++)
        if (srcs[k][0]) printf("  %-14s %s\n", dm_op_kind_name((dm_op_kind)k), srcs[k]);
    printf("\n");
    write_table(stdout, pts, n_pts, names, n_str, 0, 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/scale.dat", out_dir);
    if (write_file(path, pts, n_pts, names, n_str, 0, 1)) rc = 1;
    snprintf(path, sizeof path, "%s/scale.csv", out_dir);
    if (write_file(path, pts, n_pts, names, n_str, 1, 0)) rc = 1;
    printf("\nwrote %s/scale.dat and %s/scale.csv\n", out_dir, out_dir);
    if (plots) {
        const char *gp = find_plot_script();
        if (n_gpus < 2) {
            printf("plots: one GPU count, nothing to plot against; skipped\n");
        } else if (!have_gnuplot()) {
            printf("plots: gnuplot not found; skipped (the data files are ready for it)\n");
        } else if (!gp) {
            printf("plots: plots/scale.gp not found (set DMUON_PLOTS); skipped\n");
        } else {
            char expr[8192], strs[256] = "";
            for (int s = 0; s < n_str; s++) /* the blocks of scale.dat, in order */
                snprintf(strs + strlen(strs), sizeof strs - strlen(strs), "%s%s", strs[0] ? " " : "", names[s]);
            char qdir[4096], qtitle[512], title[256];
            snprintf(title, sizeof title, "%s on %s", in.model->name, in.cluster.name);
            snprintf(expr, sizeof expr, "dir='%s'; strategies='%s'; title_text='%s'", gp_quote(out_dir, qdir, sizeof qdir),
                     strs, gp_quote(title, qtitle, sizeof qtitle));
            if (run_gnuplot(expr, gp)) {
                fprintf(stderr, "dmuon scale: gnuplot -e \"%s\" %s failed\n", expr, gp);
                rc = 1;
            } else {
                printf("plots: %s/step_time.png %s/optimizer_time.png %s/overhead.png\n", out_dir, out_dir, out_dir);
            }
        }
    }
    struct timespec cts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cts);
    printf("speed: %d points, %lld events simulated in %.3f s wall, %.3f s CPU with setup (%.3g events/s of wall); "
           "study %.3f s wall, process %.3f s CPU\n",
           n_pts, (long long)ev_total, sim_total, cpu_total, sim_total > 0 ? ev_total / sim_total : 0.0,
           wall_s() - t_start, cts.tv_sec + cts.tv_nsec * 1e-9);
    free(pts);
    free_inputs(&in);
    return rc;
}
