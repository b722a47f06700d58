/* cmd_run.c: `dmuon run`: the command line of the real executor (real.h) under MPI. Rank 0
 * plans with the scheduler (the same plan options as `dmuon plan` and `dmuon sim`) or reads
 * --program (whose model it names, --model optional), the program goes to every rank, and the
 * executor checks it on every rank before the first collective; then K steps of the proxy
 * workload on the CPU or GPU backend, a per-step table on stdout (rank 0), optionally a CSV, a
 * trace, checkpoints and weights files, and --compare's strategies after the first. With --json,
 * rank 0 prints one JSON object (format dmuon-run-1) on stdout and the report on stderr. Under
 * MPI every rank parses the options and rank 0 alone prints a usage error. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "commands.h"
#include "costs.h"
#include "inputs.h"
#include "json.h"
#include "model.h"
#include "ns_ref.h"
#include "opts.h"
#include "outfile.h"
#include "plan_best.h"
#include "program.h"
#include "real.h"
#include "sched.h"

static int g_rank;
static FILE *g_rep;  /* the report: stdout, or stderr under --json */
static FILE *g_json; /* --json on rank 0: the "runs" array as it is written (a memory stream), else NULL */
static int g_json_runs, g_json_done; /* runs begun in g_json, and those written to their end */

/* A step's or a run's mean times (ms) as JSON fields. */
static void json_times(FILE *f, const real_step_row *w)
{
    json_write_member(f, "step_ms", w->step_us / 1e3, 6, ", ");
    json_write_member(f, "forward_ms", w->forward_us / 1e3, 6, ", ");
    json_write_member(f, "backward_ms", w->backward_us / 1e3, 6, ", ");
    json_write_member(f, "optimizer_ms", w->optimizer_us / 1e3, 6, ", ");
    json_write_member(f, "opt_window_ms", w->opt_window_us / 1e3, 6, ", ");
    json_write_member(f, "exposed_comm_ms", w->exposed_comm_us / 1e3, 6, ", ");
    json_write_member(f, "ns_min_ms", w->ns_min_us / 1e3, 6, ", ");
    json_write_member(f, "ns_max_ms", w->ns_max_us / 1e3, 6, "");
}

/* Rank-0 printing goes through here (STYLE habit 9). */
static void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *f, const char *fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

static void usage(FILE *f)
{
    say(f,
        "Usage: mpirun -np N dmuon run --model M [OPTIONS]\n"
        "       mpirun -np N dmuon run --program FILE [OPTIONS]\n"
        "Run the step program for real: rank 0 plans (or reads --program), every rank validates\n"
        "it and checks its hash, then K steps of the program's workload (every projection's\n"
        "GEMMs, the attention products, the routed experts, norms and biases, as the program's\n"
        "ops list them; a least-squares loss on each output stands for the model's loss; Muon on\n"
        "owners, AdamW for the rest). One rank runs without mpirun too.\n\n"
        "  -m, --model M      model name, model file or HuggingFace config.json (required without\n"
        "                     --program; with it, checked against the program's model, which is\n"
        "                     otherwise found by name)\n"
        "  -c, --cluster C    cluster preset or file for the plan (default " DM_CLUSTER_DEFAULT ")\n"
        "  --calibration F    a calibration file (dmuon calibrate) applied to the cluster\n"
        "  --costs FILE       kernel cost table for the plan (default: the committed tables)\n"
        "  --program FILE     run this saved program instead of planning\n"
        "  --backend B        cpu (MPI + reference kernels), gpu (NCCL + CUDA) or auto (gpu when\n"
        "                     this build has it and a GPU is there, else cpu) (default auto%s)\n"
        "  --steps K          steps to run (default 3)\n"
        "  --seed S           data and initial weights (default 1)\n"
        "  --grad-chunks C    sum each weight gradient over C token chunks in order (default 1)\n"
        "  --grad-chunk-group G  sum the gradient chunks in groups of G first, then the groups\n"
        "                     (the order of --hsdp's two-stage reduce with shard groups of G)\n"
        "  --lr-muon X        Muon learning rate (default 0.02)\n"
        "  --lr-adamw X       AdamW learning rate (default 0.001)\n"
        "  --ns-coeffs SPEC   jordan, polar-express[:S] or 'a,b,c;...' (default: the program's,\n"
        "                     jordan for the PyTorch forms of muon-ddp and muon-fsdp; else\n"
        "                     " NS_COEFFS_DEFAULT_SPEC ")\n"
        "  --timeout S        give up on a collective after S seconds, on every rank (default 300)\n"
        "  --csv FILE         per-step table as CSV\n"
        "  --trace FILE       the last step's ops as a trace (dmuon-trace-1: FILE.csv as CSV,\n"
        "                     else Chrome JSON), same op ids as dmuon sim's\n"
        "  --compare S,S,...  then run these strategies with the same options and print each\n"
        "                     one's step time against the first's (speedup, overhead)\n"
        "  --checkpoint DIR   save master weights, momentum and AdamW state to DIR (atomically)\n"
        "  --every K          ... after every K-th step and the last (default 1)\n"
        "  --resume           continue from DIR's latest checkpoint up to --steps in all\n"
        "  --inject-nan STEP:RANK:PARAM  write a NaN into a local gradient (fault test)\n"
        "  --inject-stall STEP:RANK:SECONDS  that rank stops answering for a while (--timeout test)\n"
        "  --inject-overflow STEP:PARAM  every rank writes 3e38 into its gradient of PARAM: finite\n"
        "                     locally, the reduced sum overflows (fault test)\n"
        "  --save-weights FILE  after the last step, the parameters (real_exec_weights) to FILE\n"
        "  --check-weights FILE  after the last step, print the largest relative Frobenius error\n"
        "                     of the parameters against FILE (of --save-weights)\n"
        "  --autotune FILE    GPU: NS plan block counts from the kernels' autotune cache\n"
        "                     (default traces/kernels/autotune_h200.tsv of the source tree, if\n"
        "                     there; '' for none)\n"
        "  --json             rank 0 prints the run as one JSON object on stdout (format\n"
        "                     dmuon-run-1: model, cluster, GPUs, backend, per strategy its\n"
        "                     options, NS coefficients, steps and means); the report goes to\n"
        "                     stderr\n"
        "  -h, --help         this help\n\n",
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
        ""
#else
        "This build has no GPU backend (configured without CUDA or NCCL): --backend cpu only.\n\n"
#endif
    );
    if (g_rank == 0) sched_getopt_help(f);
}

enum { O_MODEL = 1, O_CLUSTER, O_COSTS, O_CALIB, O_PROGRAM, O_BACKEND, O_STEPS, O_SEED, O_CHUNKS, O_LRM, O_LRA,
       O_COEFFS, O_TIMEOUT, O_CSV, O_TRACE, O_INJECT, O_AUTOTUNE, O_STALL, O_CKPT, O_EVERY, O_RESUME, O_COMPARE,
       O_OVERFLOW, O_SAVE_W, O_CHECK_W, O_JSON, O_CHUNK_GROUP };

/* Everything one strategy's run needs (set up once by cmd_run). */
typedef struct run_ctx {
    const char *model_name;     /* --model, or NULL */
    dm_model *model;            /* loaded on every rank (with --program: the program's model) */
    const char *cluster_name, *costs_path, *calib_path, *program_path, *csv_path, *trace_path, *ckpt_dir, *coeff_spec;
    int coeff_given;          /* --ns-coeffs given: it overrides a program's ns_coeffs */
    const char *save_weights, *check_weights; /* main run only */
    long steps, every;
    int resume, nranks;
    char model_id[256], cluster_id[256]; /* --json: the first run's model and plan cluster */
    sched_opts so;
    real_opts ro;
} run_ctx;

/* Every rank loads the model; with a program, the program's unless --model names it (then both
 * must agree). 0, or 1 (every rank together; rank 0 printed why). */
static int load_model(run_ctx *x, const dm_program *prog)
{
    dm_err err = {{0}};
    int fail = 0;
    if (!x->model) {
        fail = dm_model_load(x->model_name ? x->model_name : prog->model, &x->model, &err) < 0;
        if (fail && !x->model_name)
            snprintf(err.msg + strlen(err.msg), sizeof err.msg - strlen(err.msg),
                     " (the program's model; give --model FILE if it is not a bundled one)");
    }
    if (!fail && prog && strcmp(x->model->name, prog->model)) /* dm_err_set: -1 */
        fail = -dm_err_set(&err, "--model %s is '%s'; the program is for '%s'", x->model_name, x->model->name, prog->model);
    int any = 0, fail0 = fail;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&fail0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* said once: rank 0's cause when it failed (the same arguments fail alike everywhere), else
     * each failing rank's own (a file missing on its node only) */
    if (any && fail0) say(stderr, "dmuon run: %s\n", err.msg);
    else if (any && fail) fprintf(stderr, "dmuon run: rank %d: %s\n", g_rank, err.msg);
    else if (any && g_rank == 0) fprintf(stderr, "dmuon run: another rank could not load the model\n");
    return any;
}

/* What the row printer needs. */
typedef struct row_ctx {
    real_exec *ex;
    dm_out *csv;
    int n_rows; /* rows written to g_json */
} row_ctx;

/* One step's row on rank 0: the table line (times in ms) and the CSV row. */
static void print_row(void *vctx, long s, const real_step_stats *st, const real_step_row *w)
{
    row_ctx *c = vctx;
    char status_s[320] = "ok";
    if (st->skipped)
        snprintf(status_s, sizeof status_s, "skipped: non-finite gradient of %s (rank %d)",
                 real_matrix_name(c->ex, st->bad_param), st->bad_rank);
    double v[8] = {w->step_us, w->forward_us, w->backward_us, w->optimizer_us, w->opt_window_us, w->exposed_comm_us,
                   w->ns_min_us, w->ns_max_us};
    fprintf(g_rep, " %5ld %12.6f", s, st->loss);
    for (int k = 0; k < 8; k++) fprintf(g_rep, " %9.3f", v[k] / 1e3);
    fprintf(g_rep, "  %s\n", status_s);
    fflush(g_rep);
    if (g_json) {
        fprintf(g_json, "%s\n      {\"step\": %ld, ", c->n_rows++ ? "," : "", s);
        json_write_member(g_json, "loss", st->loss, 6, ", ");
        json_times(g_json, w);
        fprintf(g_json, ", \"skipped\": %s, \"status\": ", st->skipped ? "true" : "false");
        json_write_string(g_json, status_s);
        fputs("}", g_json);
    }
    if (st->skipped) fprintf(stderr, "dmuon run: step %ld %s\n", s, status_s);
    if (c->csv) real_row_csv(dm_out_file(c->csv), s, w);
}

/* After a run: the GPU memory beside the estimate it was sized by (the largest rank's), and the
 * decoder layers' mean forward and backward (rank 0, the last step), the numbers a PyTorch step
 * is held against (tools/torch_step_bench.py). Collective. */
static void report_memory_and_layers(const run_ctx *x, real_exec *ex)
{
    real_mem_report mr;
    real_exec_memory(ex, &mr);
    const double GiB = 1073741824.0;
    if (g_json && mr.est_bytes > 0)
        fprintf(g_json, ",\n    \"memory\": {\"estimate_bytes\": %.0f, \"peak_used_bytes\": %.0f, \"run_bytes\": %.0f}",
                mr.est_bytes, mr.peak_used_bytes, mr.run_bytes);
    if (mr.est_bytes > 0)
        say(g_rep, "# GPU memory per rank (largest): estimate %.2f GiB, measured peak %.2f GiB used (cudaMemGetInfo "
            "before the buffers, after them and after each step; %.2f GiB of it added by this run): estimate %+.1f%% "
            "of measured\n", mr.est_bytes / GiB, mr.peak_used_bytes / GiB, mr.run_bytes / GiB,
            mr.peak_used_bytes > 0 ? 100.0 * (mr.est_bytes / mr.peak_used_bytes - 1) : 0.0);
    int si = real_main_stack(x->model);
    double f, b;
    int nl;
    dm_err err = {{0}};
    if (si < 0 || x->steps <= 0 || real_exec_layer_means(ex, si, &f, &b, &nl, &err) != 0) return;
    if (g_json) {
        fputs(",\n    \"layers\": {\"stack\": ", g_json);
        json_write_string(g_json, x->model->stacks[si].name);
        fprintf(g_json, ", \"layers\": %d, \"step\": %ld, \"forward_ms\": %.6g, \"backward_ms\": %.6g}", nl, x->steps - 1,
                f / 1e3, b / 1e3);
    }
    say(g_rep, "# per layer of stack %s (%d layers, rank 0, step %ld): forward %.3f ms, backward %.3f ms\n",
        x->model->stacks[si].name, nl, x->steps - 1, f / 1e3, b / 1e3);
}

/* Plan (rank 0), share, run and report one strategy; *mean: its means over the steps counted.
 * 0 or 1. */
static int run_one(run_ctx *x, real_step_row *mean)
{
    dm_err err = {{0}};
    dm_program *prog = NULL;
    real_opts ro = x->ro;
    row_ctx rc = {NULL, NULL, 0};
    int status = 1, fail = 0;
    memset(mean, 0, sizeof *mean);
    if (g_rank == 0) {
        if (x->program_path) {
            if ((fail = dm_program_load(x->program_path, &prog, &err) < 0)) fprintf(stderr, "dmuon run: %s\n", err.msg);
        } else {
            /* the one resolver: cluster (default DM_CLUSTER_DEFAULT), calibration, cost table */
            input_args ia = {NULL, x->cluster_name, x->calib_path, x->costs_path, x->so.gpus_per_node, 0};
            inputs in;
            fail = inputs_resolve("run", &ia, &in) != 0;
            if (!fail) {
                fprintf(g_rep, "# dmuon run: resolved configuration\n");
                inputs_print(g_rep, &in);
                /* as `dmuon plan` and `dmuon sim` plan (--balance auto simulates its candidates and
                 * keeps the faster), so that the program run is the one they report */
                if ((fail = plan_best_build(x->model, &in.cluster, x->nranks, in.costs, &x->so, NULL, NULL, &prog, NULL,
                                            NULL, &err) < 0))
                    fprintf(stderr, "dmuon run: %s\n", err.msg);
            }
            inputs_free(&in);
        }
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fail) goto done;
    if (real_share_program(&prog, MPI_COMM_WORLD, &err) < 0) {
        fprintf(stderr, "dmuon run: rank %d: %s\n", g_rank, err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (x->program_path && load_model(x, prog)) goto done;
    if (prog->tokens > 0 && x->program_path) ro.tokens = prog->tokens;
    /* the coefficients: --ns-coeffs, else the program's own (the PyTorch forms: the classic set),
     * else the default */
    ns_coeffs prog_coeffs;
    const char *coeff_spec = x->coeff_spec;
    if (!x->coeff_given && prog->ns_coeffs) {
        if (ns_coeffs_from_spec(prog->ns_coeffs, "the program's ns_coeffs", &prog_coeffs, &err) < 0) {
            say(stderr, "dmuon run: %s\n", err.msg);
            status = 2;
            goto done;
        }
        ro.muon.ns.coeffs = &prog_coeffs;
        coeff_spec = prog->ns_coeffs;
    }
    const char *be = ro.backend == REAL_BACKEND_GPU ? "gpu" : "cpu";
    say(g_rep, "# dmuon run: model %s, strategy %s (%s), %d rank%s, backend %s\n", prog->model, prog->strategy,
        prog->options, x->nranks, x->nranks == 1 ? "" : "s", be);
    say(g_rep, "# program %016llx: %d ops on rank 0, %d collectives, %d group%s; plan cluster %s\n",
        (unsigned long long)dm_program_hash(prog), prog->ranks[0].n_ops, prog->n_colls, prog->n_groups,
        prog->n_groups == 1 ? "" : "s", prog->cluster);
    say(g_rep, "# %lld tokens per rank, %ld steps, seed %llu, Muon lr %g (NS %s), AdamW lr %g\n",
        (long long)ro.tokens, x->steps, (unsigned long long)ro.seed, ro.muon.lr, coeff_spec, ro.adamw.lr);
    if (g_json) {
        if (!x->model_id[0]) {
            snprintf(x->model_id, sizeof x->model_id, "%s", prog->model);
            snprintf(x->cluster_id, sizeof x->cluster_id, "%s", prog->cluster);
        }
        fprintf(g_json, "%s\n   {\"strategy\": ", g_json_runs++ ? "," : "");
        json_write_string(g_json, prog->strategy);
        fputs(", \"options\": ", g_json);
        json_write_string(g_json, prog->options);
        fputs(", \"ns_coeffs\": ", g_json); /* this run's: --ns-coeffs, else the program's (jordan for the PyTorch forms) */
        json_write_string(g_json, coeff_spec);
        fprintf(g_json, ", \"program_hash\": \"%016llx\", \"ops_rank0\": %d, \"collectives\": %d, \"groups\": %d, "
                "\"tokens\": %lld,\n    \"steps\": [", (unsigned long long)dm_program_hash(prog), prog->ranks[0].n_ops,
                prog->n_colls, prog->n_groups, (long long)ro.tokens);
    }
    if (real_exec_create(x->model, prog, MPI_COMM_WORLD, &ro, &rc.ex, &err) < 0) {
        say(stderr, "dmuon run: %s\n", err.msg); /* every rank holds the cause; rank 0 says it */
        goto done;
    }
    say(g_rep, "# %s\n", real_exec_info(rc.ex));
    /* the outputs written at the end (trace, weights) checked now, before the steps */
    fail = g_rank == 0 && ((x->csv_path && !(rc.csv = dm_out_open(x->csv_path, &err))) ||
                           dm_out_check(x->trace_path, &err) || dm_out_check(x->save_weights, &err));
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fail) {
        say(stderr, "dmuon run: %s\n", err.msg);
        goto done;
    }
    if (rc.csv) real_row_csv_header(dm_out_file(rc.csv), prog, be, ro.tokens);
    if (x->resume && real_exec_load(rc.ex, x->ckpt_dir, &err) < 0) {
        say(stderr, "dmuon run: %s\n", err.msg);
        goto done;
    }
    if (x->resume) say(g_rep, "# resumed from %s after step %d\n", x->ckpt_dir, real_exec_steps_done(rc.ex) - 1);
    say(g_rep, "# times in ms: busy time per kind is the slowest rank's; ns min/max over ranks\n");
    say(g_rep, "#%5s %12s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "step", "loss", "step", "forward", "backward",
        "optimizer", "opt_win", "exp_comm", "ns_min", "ns_max", "status");
    real_run_spec sp = {x->steps, x->every, x->ckpt_dir, x->save_weights, x->check_weights, x->trace_path};
    real_run_result res;
    int r = real_exec_run(rc.ex, &sp, print_row, &rc, &res, &err);
    if (r == -2) { /* the cause, then a non-zero abort, so the launcher fails too */
        fprintf(stderr, "dmuon run: %s\ndmuon run: rank %d aborts the run\n", err.msg, g_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    *mean = res.mean;
    const real_step_row *m = &res.mean;
    if (g_json) {
        fprintf(g_json, "],\n    \"first_step\": %ld, \"kept\": %ld, \"counted\": %d, \"mean\": {", res.first_step,
                res.kept, res.counted);
        if (res.counted) json_times(g_json, m);
        fputs("}", g_json);
        if (x->check_weights && r >= 0) {
            fputs(", \"check_weights\": {\"file\": ", g_json);
            json_write_string(g_json, x->check_weights);
            fputs(", ", g_json);
            json_write_member(g_json, "max_rel_frobenius", res.check_rel, 6, ", \"worst\": ");
            if (res.check_worst >= 0) json_write_string(g_json, real_matrix_name(rc.ex, res.check_worst));
            else fputs("null", g_json);
            fputs("}", g_json);
        }
    }
    if (res.counted)
        say(g_rep, "# mean over %d step%s%s: step %.3f ms, forward %.3f, backward %.3f, optimizer %.3f, "
            "opt window %.3f, exposed comm %.3f (%.1f%% of the step), ns per rank %.3f..%.3f\n", res.counted,
            res.counted > 1 ? "s" : "", x->steps > 1 ? " (first left out)" : "", m->step_us / 1e3, m->forward_us / 1e3,
            m->backward_us / 1e3, m->optimizer_us / 1e3, m->opt_window_us / 1e3, m->exposed_comm_us / 1e3,
            m->step_us > 0 ? 100 * m->exposed_comm_us / m->step_us : 0, m->ns_min_us / 1e3, m->ns_max_us / 1e3);
    if (r < 0) {
        say(stderr, "dmuon run: %s\n", err.msg); /* every rank failed together */
        goto done;
    }
    if (x->check_weights)
        say(g_rep, "# weights against %s: largest relative Frobenius error %.3g (%s)\n", x->check_weights,
            res.check_rel, res.check_worst >= 0 ? real_matrix_name(rc.ex, res.check_worst) : "every matrix bit-identical");
    if (x->trace_path && x->steps > 0) say(g_rep, "# trace of step %ld written to %s\n", x->steps - 1, x->trace_path);
    report_memory_and_layers(x, rc.ex);
    if (g_json) {
        fputs("}", g_json);
        g_json_done++;
    }
    if (rc.csv) {
        dm_out *c = rc.csv;
        rc.csv = NULL;
        if (dm_out_commit(c, &err) < 0) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            goto done;
        }
    }
    status = 0;
    if (x->steps > res.first_step && res.kept == 0) { /* nothing to show for the run */
        say(stderr, "dmuon run: no step was kept: all %ld skipped (non-finite gradients)\n", x->steps - res.first_step);
        status = 1;
    }
done:
    dm_out_abort(rc.csv);
    real_exec_destroy(rc.ex);
    dm_program_free(prog);
    return status;
}

/* "A:B" or "A:B:C" of --inject-*: 0, or 2 after the usage message. */
static int parse_fault(const char *opt, const char *arg, const char *want, int n, long long v[3], double *sec)
{
    char extra;
    int got = n == 2 ? sscanf(arg, "%lld:%lld%c", &v[0], &v[1], &extra)
                     : sec ? sscanf(arg, "%lld:%lld:%lf%c", &v[0], &v[1], sec, &extra)
                           : sscanf(arg, "%lld:%lld:%lld%c", &v[0], &v[1], &v[2], &extra);
    if (got == n && v[0] >= 0 && v[0] <= 0x7fffffff && v[1] >= 0 && v[1] <= 0x7fffffff &&
        (n == 2 || (sec ? *sec > 0 && *sec < 1e5 : v[2] >= 0)))
        return 0;
    if (g_rank == 0) opt_usage_error("run", "%s: expected %s, got '%s'", opt, want, arg);
    return 2;
}

int cmd_run(int argc, char **argv)
{
    int inited = 0;
    if (opt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(&argc, &argv);
    run_ctx x;
    memset(&x, 0, sizeof x);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.nranks);
    x.coeff_spec = NS_COEFFS_DEFAULT_SPEC;
    x.steps = 3, x.every = 1;
    const char *compare = NULL;
    real_opts_default(&x.ro);
    x.ro.muon.lr = 0.02;
    int backend_auto = 1;
    sched_opts_default(&x.so);
    static const struct option longopts[] = {
        {"model", 1, NULL, O_MODEL}, {"cluster", 1, NULL, O_CLUSTER}, {"costs", 1, NULL, O_COSTS},
        {"calibration", 1, NULL, O_CALIB},
        {"program", 1, NULL, O_PROGRAM}, {"backend", 1, NULL, O_BACKEND}, {"steps", 1, NULL, O_STEPS},
        {"seed", 1, NULL, O_SEED}, {"grad-chunks", 1, NULL, O_CHUNKS}, {"grad-chunk-group", 1, NULL, O_CHUNK_GROUP}, {"lr-muon", 1, NULL, O_LRM},
        {"lr-adamw", 1, NULL, O_LRA}, {"ns-coeffs", 1, NULL, O_COEFFS}, {"timeout", 1, NULL, O_TIMEOUT},
        {"csv", 1, NULL, O_CSV}, {"trace", 1, NULL, O_TRACE}, {"inject-nan", 1, NULL, O_INJECT},
        {"autotune", 1, NULL, O_AUTOTUNE}, {"inject-stall", 1, NULL, O_STALL}, {"checkpoint", 1, NULL, O_CKPT},
        {"every", 1, NULL, O_EVERY}, {"resume", 0, NULL, O_RESUME}, {"compare", 1, NULL, O_COMPARE},
        {"inject-overflow", 1, NULL, O_OVERFLOW}, {"save-weights", 1, NULL, O_SAVE_W},
        {"check-weights", 1, NULL, O_CHECK_W}, {"json", 0, NULL, O_JSON}, {"help", 0, NULL, 'h'}, SCHED_GETOPT_LONG,
        {NULL, 0, NULL, 0}};
    int c, bad = 0, json = 0;
    long lv;
    long long fv[3];
    /* every rank parses; rank 0 alone prints a usage error, in the project's words (opterr 0) */
    opterr = 0;
    opt_set_quiet(g_rank != 0);
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int h = sched_getopt_handle(&x.so, g_rank == 0 ? "run" : NULL, c, optarg);
        if (h) {
            bad = h < 0 ? 2 : 0;
            continue;
        }
        switch (c) {
        case 'h': usage(stdout); MPI_Finalize(); return 0;
        case O_MODEL: x.model_name = optarg; break;
        case O_CLUSTER: x.cluster_name = optarg; break;
        case O_COSTS: x.costs_path = optarg; break;
        case O_CALIB: x.calib_path = optarg; break;
        case O_PROGRAM: x.program_path = optarg; break;
        case O_BACKEND:
            backend_auto = !strcmp(optarg, "auto");
            x.ro.backend = !strcmp(optarg, "gpu") ? REAL_BACKEND_GPU : REAL_BACKEND_CPU;
            if (!backend_auto && strcmp(optarg, "gpu") && strcmp(optarg, "cpu") && (bad = 2))
                opt_usage_error("run", "--backend: expected cpu, gpu or auto, got '%s'", optarg);
            break;
        case O_STEPS: bad = opt_parse_long("run", "--steps", optarg, 0, 1000000, &x.steps) ? 2 : 0; break;
        case O_SEED:
            bad = opt_parse_long("run", "--seed", optarg, 0, 0x7fffffffL, &lv) ? 2 : 0;
            x.ro.seed = (uint64_t)lv;
            break;
        case O_CHUNKS:
            bad = opt_parse_long("run", "--grad-chunks", optarg, 1, 65536, &lv) ? 2 : 0;
            x.ro.grad_chunks = (int)lv;
            break;
        case O_CHUNK_GROUP:
            bad = opt_parse_long("run", "--grad-chunk-group", optarg, 1, 65536, &lv) ? 2 : 0;
            x.ro.grad_chunk_group = (int)lv;
            break;
        case O_LRM: bad = opt_parse_double("run", "--lr-muon", optarg, 0, 10, &x.ro.muon.lr) ? 2 : 0; break;
        case O_LRA: bad = opt_parse_double("run", "--lr-adamw", optarg, 0, 10, &x.ro.adamw.lr) ? 2 : 0; break;
        case O_COEFFS: x.coeff_spec = optarg, x.coeff_given = 1; break;
        case O_TIMEOUT: bad = opt_parse_double("run", "--timeout", optarg, 0.001, 1e6, &x.ro.timeout_s) ? 2 : 0; break;
        case O_CSV: x.csv_path = optarg; break;
        case O_TRACE: x.trace_path = optarg; break;
        case O_AUTOTUNE: x.ro.autotune_path = optarg; break;
        case O_CKPT: x.ckpt_dir = optarg; break;
        case O_EVERY: bad = opt_parse_long("run", "--every", optarg, 1, 1000000, &x.every) ? 2 : 0; break;
        case O_RESUME: x.resume = 1; break;
        case O_COMPARE: compare = optarg; break;
        case O_SAVE_W: x.save_weights = optarg; break;
        case O_CHECK_W: x.check_weights = optarg; break;
        case O_JSON: json = 1; break;
        case O_OVERFLOW:
            bad = parse_fault("--inject-overflow", optarg, "STEP:PARAM", 2, fv, NULL);
            x.ro.overflow_step = (int)fv[0], x.ro.overflow_param = fv[1];
            break;
        case O_STALL:
            bad = parse_fault("--inject-stall", optarg, "STEP:RANK:SECONDS", 3, fv, &x.ro.stall_s);
            x.ro.stall_step = (int)fv[0], x.ro.stall_rank = (int)fv[1];
            break;
        case O_INJECT:
            bad = parse_fault("--inject-nan", optarg, "STEP:RANK:PARAM", 3, fv, NULL);
            x.ro.inject_step = (int)fv[0], x.ro.inject_rank = (int)fv[1], x.ro.inject_param = fv[2];
            break;
        default: bad = opt_getopt_error("run", c, argv); /* ':' missing argument, or unknown */
        }
    }
    const char *why = optind < argc ? "unexpected argument" : !x.model_name && !x.program_path ? "--model is required"
                      : x.resume && !x.ckpt_dir ? "--resume needs --checkpoint DIR" : NULL;
    if (!bad && why) {
        opt_usage_error("run", "%s%s%s%s", why, optind < argc ? " '" : "",
                                         optind < argc ? argv[optind] : "", optind < argc ? "'" : "");
        bad = 2;
    }
    ns_coeffs coeffs;
    dm_err err = {{0}};
    if (!bad && ns_coeffs_from_spec(x.coeff_spec, "--ns-coeffs", &coeffs, &err) < 0) {
        say(stderr, "dmuon run: %s\n", err.msg);
        bad = 2;
    }
    opt_set_quiet(0);
    if (bad) {
        MPI_Finalize();
        return bad;
    }
    g_rep = json ? stderr : stdout;
    char *json_buf = NULL;
    size_t json_len = 0;
    if (json && g_rank == 0 && !(g_json = open_memstream(&json_buf, &json_len))) {
        fprintf(stderr, "dmuon run: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    x.ro.muon.ns.coeffs = &coeffs;
    x.ro.tokens = x.so.tokens;
    if (backend_auto) x.ro.backend = real_backend_auto(MPI_COMM_WORLD);
    int status = 1;
    /* without a program every rank loads the model (a local file read) before rank 0 plans */
    if (!x.program_path && load_model(&x, NULL)) goto done;
    /* the main strategy, then --compare's, each planned with the same options; outputs
     * (--csv, --trace, --checkpoint, weights) belong to the main one */
    const char *names[9] = {x.program_path ? "program" : sched_strategy_name(x.so.strategy)};
    real_step_row means[9];
    int n_runs = 1;
    char *cmp_copy = compare ? dm_strdup(compare, &err) : NULL;
    for (char *tok = cmp_copy ? strtok(cmp_copy, ",") : NULL; tok && n_runs < 9; tok = strtok(NULL, ","))
        names[n_runs++] = tok;
    status = 0;
    for (int i = 0; i < n_runs && status == 0; i++) {
        if (i > 0) {
            if (sched_opts_parse(&x.so, "strategy", names[i], &err) < 0) {
                say(stderr, "dmuon run: --compare: %s\n", err.msg);
                status = 2;
                break;
            }
            x.csv_path = x.trace_path = x.ckpt_dir = x.save_weights = x.check_weights = x.program_path = NULL;
            x.resume = 0;
            say(g_rep, "#\n");
        }
        status = run_one(&x, &means[i]);
    }
    if (status == 0 && n_runs > 1) {
        say(g_rep, "#\n# comparison (means over the steps counted; times in ms)\n# %-10s %10s %10s %10s %14s\n",
            "strategy", "step", "optimizer", "opt_win", "exposed comm");
        for (int i = 0; i < n_runs; i++) {
            char rel[128] = "";
            double a = means[0].step_us, b = means[i].step_us;
            if (i > 0 && a > 0 && b > 0)
                snprintf(rel, sizeof rel, a <= b ? "%s is %.2fx faster" : "%s's overhead over it: %+.1f%%", names[0],
                         a <= b ? b / a : 100 * (a / b - 1));
            say(g_rep, "  %-10s %10.3f %10.3f %10.3f %8.3f %4.1f%%  %s\n", names[i], b / 1e3,
                means[i].optimizer_us / 1e3, means[i].opt_window_us / 1e3, means[i].exposed_comm_us / 1e3,
                b > 0 ? 100 * means[i].exposed_comm_us / b : 0, rel);
        }
    }
    if (g_json && g_json_done == n_runs) { /* every strategy ran to its end: the document */
        fclose(g_json);
        g_json = NULL;
        fputs("{\"format\": \"dmuon-run-1\", \"model\": ", stdout);
        json_write_string(stdout, x.model_id);
        fputs(", \"cluster\": ", stdout);
        json_write_string(stdout, x.cluster_id);
        fprintf(stdout, ", \"gpus\": %d, \"backend\": \"%s\", \"strategy\": ", x.nranks,
                x.ro.backend == REAL_BACKEND_GPU ? "gpu" : "cpu");
        json_write_string(stdout, names[0]);
        fprintf(stdout, ", \"steps\": %ld, \"seed\": %llu, \"lr_muon\": %.6g, \"lr_adamw\": %.6g, \"ns_coeffs\": ", x.steps,
                (unsigned long long)x.ro.seed, x.ro.muon.lr, x.ro.adamw.lr);
        json_write_string(stdout, x.coeff_spec);
        fprintf(stdout, ",\n \"runs\": [%.*s\n ]", (int)json_len, json_buf ? json_buf : "");
        if (n_runs > 1) { /* the comparison table: each strategy's means against the first's */
            fputs(",\n \"comparison\": [", stdout);
            for (int i = 0; i < n_runs; i++) {
                double a = means[0].step_us, b = means[i].step_us;
                fprintf(stdout, "%s\n   {\"strategy\": ", i ? "," : "");
                json_write_string(stdout, names[i]);
                fputs(", ", stdout);
                json_write_member(stdout, "step_ms", b / 1e3, 6, ", ");
                json_write_member(stdout, "optimizer_ms", means[i].optimizer_us / 1e3, 6, ", ");
                json_write_member(stdout, "opt_window_ms", means[i].opt_window_us / 1e3, 6, ", ");
                json_write_member(stdout, "exposed_comm_ms", means[i].exposed_comm_us / 1e3, 6, ", ");
                json_write_member(stdout, "exposed_comm_pct", b > 0 ? 100 * means[i].exposed_comm_us / b : 0, 6, ", ");
                json_write_member(stdout, "step_over_first", a > 0 && b > 0 ? b / a : NAN, 6, "}");
            }
            fputs("\n ]", stdout);
        }
        fputs("}\n", stdout);
        fflush(stdout);
    }
    free(cmp_copy);
done:
    if (g_json) fclose(g_json);
    g_json = NULL;
    free(json_buf);
    dm_model_free(x.model);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
