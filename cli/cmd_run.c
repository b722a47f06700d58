/* cmd_run.c: `dmuon run`: run the step program for real under MPI. Rank 0 builds the plan with
 * the scheduler (the same plan options as `dmuon plan` and `dmuon sim`) or reads --program,
 * sends its JSON to every rank, and every rank checks the program hash against rank 0's before
 * the first collective. Then K steps of the proxy workload (real.h) on the CPU backend or the
 * GPU backend, with a per-step table on stdout (rank 0) and optionally a CSV. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "commands.h"
#include "costs.h"
#include "model.h"
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
#include "ns_cuda.h"
#endif
#include "ns_ref.h"
#include "opts.h"
#include "outfile.h"
#include "program.h"
#include "real.h"
#include "sched.h"
#include "trace.h"

static int g_rank;

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
        "Run the step program for real: rank 0 plans, every rank checks the program hash, then\n"
        "K steps of the proxy workload (per weight: forward GEMM, least-squares loss, backward\n"
        "GEMMs; Muon on owners, AdamW for the rest). One rank runs without mpirun too.\n\n"
        "  --model M          model name or file (required)\n"
        "  --cluster C        cluster preset or file for the plan (default h200)\n"
        "  --costs FILE       kernel cost table for the plan (default: the committed tables)\n"
        "  --program FILE     run this saved program instead of planning\n"
        "  --backend B        cpu (MPI + reference kernels), gpu (NCCL + CUDA) or auto (gpu when\n"
        "                     this build has it and a GPU is there, else cpu) (default auto%s)\n"
        "  --steps K          steps to run (default 3)\n"
        "  --seed S           data and initial weights (default 1)\n"
        "  --grad-chunks C    sum each weight gradient over C token chunks in order (default 1)\n"
        "  --lr-muon X        Muon learning rate (default 0.02)\n"
        "  --lr-adamw X       AdamW learning rate (default 0.001)\n"
        "  --ns-coeffs SPEC   jordan, polar-express[:S] or 'a,b,c;...' (default jordan)\n"
        "  --timeout S        give up on a collective after S seconds, on every rank (default 300)\n"
        "  --csv FILE         per-step table as CSV\n"
        "  --trace FILE       the last step's ops as a trace (dmuon-trace-1: FILE.csv as CSV,\n"
        "                     else Chrome JSON), same op ids as dmuon sim's\n"
        "  --inject-nan STEP:RANK:PARAM  write a NaN into a local gradient (fault test)\n"
        "  --compare S,S,...  then run these strategies with the same options and print each\n"
        "                     one's step time against the first's (speedup, overhead)\n"
        "  --checkpoint DIR   save master weights, momentum and AdamW state to DIR (atomically)\n"
        "  --every K          ... after every K-th step and the last (default 1)\n"
        "  --resume           continue from DIR's latest checkpoint up to --steps in all\n"
        "  --inject-stall STEP:RANK:SECONDS  that rank stops answering for a while (--timeout test)\n"
        "  --inject-overflow STEP:PARAM  every rank writes 3e38 into its gradient of PARAM: finite\n"
        "                     locally, the reduced sum overflows (fault test)\n"
        "  --save-weights FILE  after the last step, the parameters (real_exec_weights) to FILE\n"
        "  --check-weights FILE  after the last step, print the largest relative Frobenius error\n"
        "                     of the parameters against FILE (of --save-weights)\n"
        "  --autotune FILE    GPU: NS plan block counts from the kernels' autotune cache\n"
        "                     (default traces/kernels/autotune_h200.tsv of the source tree, if\n"
        "                     there; '' for none)\n"
        "  -h, --help         this help\n\n",
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
        ""
#else
        "This build has no GPU backend (configured without CUDA or NCCL): --backend cpu only.\n\n"
#endif
    );
    if (g_rank == 0) sched_getopt_help(f);
}

enum { O_MODEL = 1, O_CLUSTER, O_COSTS, O_PROGRAM, O_BACKEND, O_STEPS, O_SEED, O_CHUNKS, O_LRM, O_LRA,
       O_COEFFS, O_TIMEOUT, O_CSV, O_TRACE, O_INJECT, O_AUTOTUNE, O_STALL, O_CKPT, O_EVERY, O_RESUME, O_COMPARE,
       O_OVERFLOW, O_SAVE_W, O_CHECK_W };

/* Rank 0's program to every rank, as JSON (each rank reads it back from a private file). */
static int share_program(dm_program **p, dm_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    long long n = 0;
    int rc = 0;
    if (g_rank == 0) {
        FILE *f = open_memstream(&buf, &len);
        if (!f) return dm_err_set(err, "open_memstream failed");
        rc = dm_program_write_json(*p, f, err);
        fclose(f);
        n = rc == 0 ? (long long)len : -1;
    }
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (n < 0) {
        free(buf);
        return g_rank == 0 ? -1 : dm_err_set(err, "rank 0 could not write its program");
    }
    if (g_rank != 0 && !(buf = dm_malloc((size_t)n + 1, err))) return -1; /* caller aborts */
    MPI_Bcast(buf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (g_rank != 0) {
        char path[] = "/tmp/dmuon-program-XXXXXX";
        int fd = mkstemp(path);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
            free(buf);
            if (fd >= 0) unlink(path);
            return dm_err_set(err, "rank %d: cannot write %s", g_rank, path);
        }
        rc = dm_program_load(path, p, err);
        unlink(path);
    }
    free(buf);
    return rc;
}

typedef struct {
    double v[9]; /* loss step fwd bwd opt ns exposed window skipped */
} rank_row;

/* Everything one strategy's run needs (set up once by cmd_run). */
typedef struct run_ctx {
    int nranks;
    dm_model *model;
    dm_costs *costs;            /* loaded on rank 0 on first use */
    const char *cluster_name, *costs_path, *program_path, *csv_path, *trace_path, *ckpt_dir, *coeff_spec;
    const char *save_weights, *check_weights; /* --save-weights, --check-weights (main run only) */
    long steps, every;
    int resume;
    sched_opts so;
    real_opts ro;
} run_ctx;

/* Plan (rank 0), share, run and report one strategy. mean[]: the means over the steps
 * counted (step, forward, backward, optimizer, ns max, exposed, window; us). 0 or 1. */
static int run_one(run_ctx *x, double mean[8])
{
    dm_err err = {{0}};
    dm_program *prog = NULL;
    real_exec *ex = NULL;
    dm_out *csv = NULL;
    rank_row *rows = NULL;
    int status = 1, fail = 0, nranks = x->nranks;
    long steps = x->steps;
    real_opts ro = x->ro;
    const char *program_path = x->program_path, *csv_path = x->csv_path, *trace_path = x->trace_path;
    const char *ckpt_dir = x->ckpt_dir;
    memset(mean, 0, 8 * sizeof *mean);
    if (g_rank == 0) {
        if (program_path) {
            fail = dm_program_load(program_path, &prog, &err) < 0;
        } else {
            dm_cluster cl;
            fail = dm_cluster_load(x->cluster_name, &cl, &err) < 0 ||
                   (!x->costs && (x->costs_path ? dm_costs_load(x->costs_path, &x->costs, &err)
                                                : dm_costs_load_default(&x->costs, &err)) < 0) ||
                   sched_build(x->model, &cl, nranks, x->costs, &x->so, &prog, NULL, &err) < 0;
        }
        if (fail) fprintf(stderr, "dmuon run: %s\n", err.msg);
    }
    MPI_Bcast(&fail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fail) goto done;
    if (share_program(&prog, &err) < 0) {
        fprintf(stderr, "dmuon run: rank %d: %s\n", g_rank, err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (prog->tokens > 0 && program_path) ro.tokens = prog->tokens;
    say(stdout, "# dmuon run: model %s, strategy %s (%s), %d ranks, backend %s\n", prog->model, prog->strategy,
        prog->options, nranks, ro.backend == REAL_BACKEND_GPU ? "gpu" : "cpu");
    int n_ops0 = prog->ranks[0].n_ops;
    say(stdout, "# program %016llx: %d ops on rank 0, %d collectives, %d groups; plan cluster %s\n",
        (unsigned long long)dm_program_hash(prog), n_ops0, prog->n_colls, prog->n_groups, prog->cluster);
    say(stdout, "# %lld tokens per rank, %ld steps, seed %llu, Muon lr %g (NS %s), AdamW lr %g\n",
        (long long)ro.tokens, steps, (unsigned long long)ro.seed, ro.muon.lr, x->coeff_spec, ro.adamw.lr);
    if (real_exec_create(x->model, prog, MPI_COMM_WORLD, &ro, &ex, &err) < 0) {
        /* create fails on every rank together; rank 0's message names the cause */
        say(stderr, "dmuon run: %s\n", err.msg);
        goto done;
    }
    say(stdout, "# %s\n", real_exec_info(ex));
    if (g_rank == 0 && !(rows = dm_calloc((size_t)nranks, sizeof *rows, &err))) MPI_Abort(MPI_COMM_WORLD, 1);
    if (csv_path && g_rank == 0) {
        if (!(csv = dm_out_open(csv_path, &err))) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(dm_out_file(csv), "# dmuon run: model=%s strategy=%s ranks=%d backend=%s tokens=%lld\n"
                                  "step,loss,step_ms,forward_ms,backward_ms,optimizer_ms,opt_window_ms,"
                                  "exposed_comm_ms,ns_min_ms,ns_max_ms,skipped\n",
                prog->model, prog->strategy, nranks, ro.backend == REAL_BACKEND_GPU ? "gpu" : "cpu",
                (long long)ro.tokens);
    }
    long first_step = 0;
    if (x->resume) {
        if (real_exec_load(ex, ckpt_dir, &err) < 0) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            goto done;
        }
        first_step = real_exec_steps_done(ex);
        say(stdout, "# resumed from %s after step %ld\n", ckpt_dir, first_step - 1);
    }
    say(stdout, "# times in ms: busy time per kind is the slowest rank's; ns min/max over ranks\n");
    say(stdout, "#%5s %12s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "step", "loss", "step", "forward", "backward",
        "optimizer", "opt_win", "exp_comm", "ns_min", "ns_max", "status");
    double sum[9] = {0};
    int counted = 0;
    for (long s = first_step; s < steps; s++) {
        real_step_stats st;
        if (real_exec_step(ex, &st, &err) < 0) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            fprintf(stderr, "dmuon run: rank %d aborts the run\n", g_rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        rank_row me = {{st.loss, st.step_us, st.forward_us, st.backward_us, st.optimizer_us, st.ns_us,
                        st.comm_exposed_us, st.opt_window_us, st.skipped}};
        MPI_Gather(me.v, 9, MPI_DOUBLE, rows ? rows[0].v : NULL, 9, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (ckpt_dir && ((s + 1) % x->every == 0 || s == steps - 1) && real_exec_save(ex, ckpt_dir, &err) < 0) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            goto done; /* every rank fails together */
        }
        if (g_rank != 0) continue;
        double mx[9] = {0}, ns_min = INFINITY;
        for (int r = 0; r < nranks; r++) {
            for (int k = 1; k < 8; k++)
                if (rows[r].v[k] > mx[k]) mx[k] = rows[r].v[k];
            if (rows[r].v[5] < ns_min) ns_min = rows[r].v[5];
        }
        char status_s[320] = "ok";
        if (st.skipped)
            snprintf(status_s, sizeof status_s, "skipped: non-finite gradient of %s (rank %d)",
                     real_matrix_name(ex, st.bad_param), st.bad_rank);
        printf(" %5ld %12.6f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f  %s\n", s, st.loss, mx[1] / 1e3,
               mx[2] / 1e3, mx[3] / 1e3, mx[4] / 1e3, mx[7] / 1e3, mx[6] / 1e3, ns_min / 1e3, mx[5] / 1e3, status_s);
        fflush(stdout);
        if (st.skipped) fprintf(stderr, "dmuon run: step %ld %s\n", s, status_s);
        if (csv)
            fprintf(dm_out_file(csv), "%ld,%.9g,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d\n", s, st.loss, mx[1] / 1e3,
                    mx[2] / 1e3, mx[3] / 1e3, mx[4] / 1e3, mx[7] / 1e3, mx[6] / 1e3, ns_min / 1e3, mx[5] / 1e3,
                    st.skipped);
        if (s > 0 || steps == 1) {
            for (int k = 1; k < 8; k++) sum[k] += mx[k];
            sum[8] += ns_min;
            counted++;
        }
    }
    for (int k = 0; k < 8 && counted; k++) mean[k] = sum[k + 1] / counted;
    if (g_rank == 0 && counted)
        printf("# mean over %d step%s%s: step %.3f ms, forward %.3f, backward %.3f, optimizer %.3f, "
               "opt window %.3f, exposed comm %.3f (%.1f%% of the step), ns per rank %.3f..%.3f\n",
               counted, counted > 1 ? "s" : "", steps > 1 ? " (first left out)" : "", sum[1] / counted / 1e3,
               sum[2] / counted / 1e3, sum[3] / counted / 1e3, sum[4] / counted / 1e3, sum[7] / counted / 1e3,
               sum[6] / counted / 1e3, sum[1] > 0 ? 100 * sum[6] / sum[1] : 0, sum[8] / counted / 1e3,
               sum[5] / counted / 1e3);
    if (csv) {
        if (dm_out_commit(csv, &err) < 0) {
            fprintf(stderr, "dmuon run: %s\n", err.msg);
            csv = NULL;
            goto done;
        }
        csv = NULL;
    }
    if (x->save_weights || x->check_weights) {
        float **w = NULL;
        if (real_exec_weights(ex, &w, &err) < 0) {
            say(stderr, "dmuon run: weights: %s\n", err.msg);
            goto done; /* every rank fails together */
        }
        int bad = 0;
        if (g_rank == 0 && x->save_weights && real_weights_write(x->save_weights, ex, w, &err) < 0) bad = 1;
        if (g_rank == 0 && !bad && x->check_weights) {
            double rel = 0;
            int64_t worst = -1;
            if (real_weights_compare(x->check_weights, ex, w, &rel, &worst, &err) < 0) bad = 1;
            else
                printf("# weights against %s: largest relative Frobenius error %.3g (%s)\n", x->check_weights, rel,
                       worst >= 0 ? real_matrix_name(ex, worst) : "every matrix bit-identical");
        }
        if (bad) fprintf(stderr, "dmuon run: %s\n", err.msg);
        real_weights_free(w, real_exec_n_matrices(ex));
        MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (bad) goto done;
    }
    if (trace_path && steps > 0) {
        dm_trace *t = NULL;
        if (real_exec_trace(ex, &t, &err) < 0) {
            fprintf(stderr, "dmuon run: rank %d: trace: %s\n", g_rank, err.msg);
            goto done;
        }
        if (t) {
            size_t L = strlen(trace_path);
            int rc = L > 4 && !strcmp(trace_path + L - 4, ".csv") ? dm_trace_write_csv(t, trace_path, &err)
                                                                  : dm_trace_write_json(t, trace_path, &err);
            dm_trace_free(t);
            if (rc < 0) {
                fprintf(stderr, "dmuon run: %s\n", err.msg);
                goto done;
            }
            printf("# trace of step %ld written to %s\n", steps - 1, trace_path);
        }
    }
    status = 0;
done:
    dm_out_abort(csv);
    free(rows);
    real_exec_destroy(ex);
    dm_program_free(prog);
    return status;
}

int cmd_run(int argc, char **argv)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(&argc, &argv);
    int nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    const char *model_name = NULL, *cluster_name = "h200", *costs_path = NULL, *program_path = NULL;
    const char *csv_path = NULL, *trace_path = NULL, *coeff_spec = "jordan";
    long steps = 3, every = 1;
    const char *ckpt_dir = NULL, *compare = NULL, *save_weights = NULL, *check_weights = NULL;
    int resume = 0;
    real_opts ro;
    real_opts_default(&ro);
    ro.muon.lr = 0.02;
    int backend_auto = 1;
    sched_opts so;
    sched_opts_default(&so);
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},     {"cluster", required_argument, NULL, O_CLUSTER},
        {"costs", required_argument, NULL, O_COSTS},     {"program", required_argument, NULL, O_PROGRAM},
        {"backend", required_argument, NULL, O_BACKEND}, {"steps", required_argument, NULL, O_STEPS},
        {"seed", required_argument, NULL, O_SEED},       {"grad-chunks", required_argument, NULL, O_CHUNKS},
        {"lr-muon", required_argument, NULL, O_LRM},     {"lr-adamw", required_argument, NULL, O_LRA},
        {"ns-coeffs", required_argument, NULL, O_COEFFS}, {"timeout", required_argument, NULL, O_TIMEOUT},
        {"csv", required_argument, NULL, O_CSV},         {"trace", required_argument, NULL, O_TRACE},
        {"inject-nan", required_argument, NULL, O_INJECT}, {"autotune", required_argument, NULL, O_AUTOTUNE},
        {"inject-stall", required_argument, NULL, O_STALL},
        {"checkpoint", required_argument, NULL, O_CKPT}, {"every", required_argument, NULL, O_EVERY},
        {"resume", no_argument, NULL, O_RESUME}, {"compare", required_argument, NULL, O_COMPARE},
        {"inject-overflow", required_argument, NULL, O_OVERFLOW},
        {"save-weights", required_argument, NULL, O_SAVE_W}, {"check-weights", required_argument, NULL, O_CHECK_W},
        {"help", no_argument, NULL, 'h'},
        SCHED_GETOPT_LONG,                               {NULL, 0, NULL, 0}};
    int c, bad = 0;
    long lv;
    double dv;
    opterr = g_rank == 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int h = sched_getopt_handle(&so, "run", c, optarg);
        if (h == 1) continue;
        if (h < 0) {
            bad = 2;
            break;
        }
        switch (c) {
        case 'h': usage(stdout); MPI_Finalize(); return 0;
        case O_MODEL: model_name = optarg; break;
        case O_CLUSTER: cluster_name = optarg; break;
        case O_COSTS: costs_path = optarg; break;
        case O_PROGRAM: program_path = optarg; break;
        case O_BACKEND:
            backend_auto = !strcmp(optarg, "auto");
            if (!strcmp(optarg, "cpu")) ro.backend = REAL_BACKEND_CPU;
            else if (!strcmp(optarg, "gpu")) ro.backend = REAL_BACKEND_GPU;
            else if (!backend_auto) {
                if (g_rank == 0) opt_usage_error("run", "--backend: expected cpu, gpu or auto, got '%s'", optarg);
                bad = 2;
            }
            break;
        case O_STEPS: bad = opt_parse_long("run", "--steps", optarg, 0, 1000000, &steps) ? 2 : 0; break;
        case O_SEED:
            bad = opt_parse_long("run", "--seed", optarg, 0, 0x7fffffffL, &lv) ? 2 : 0;
            ro.seed = (uint64_t)lv;
            break;
        case O_CHUNKS:
            bad = opt_parse_long("run", "--grad-chunks", optarg, 1, 65536, &lv) ? 2 : 0;
            ro.grad_chunks = (int)lv;
            break;
        case O_LRM: bad = opt_parse_double("run", "--lr-muon", optarg, 0, 10, &ro.muon.lr) ? 2 : 0; break;
        case O_LRA: bad = opt_parse_double("run", "--lr-adamw", optarg, 0, 10, &ro.adamw.lr) ? 2 : 0; break;
        case O_COEFFS: coeff_spec = optarg; break;
        case O_TIMEOUT:
            bad = opt_parse_double("run", "--timeout", optarg, 0.001, 1e6, &dv) ? 2 : 0;
            ro.timeout_s = dv;
            break;
        case O_CSV: csv_path = optarg; break;
        case O_TRACE: trace_path = optarg; break;
        case O_AUTOTUNE: ro.autotune_path = optarg; break;
        case O_CKPT: ckpt_dir = optarg; break;
        case O_EVERY: bad = opt_parse_long("run", "--every", optarg, 1, 1000000, &every) ? 2 : 0; break;
        case O_RESUME: resume = 1; break;
        case O_COMPARE: compare = optarg; break;
        case O_SAVE_W: save_weights = optarg; break;
        case O_CHECK_W: check_weights = optarg; break;
        case O_OVERFLOW: {
            long long a = 0, d = 0;
            char extra;
            if (sscanf(optarg, "%lld:%lld%c", &a, &d, &extra) != 2 || a < 0 || d < 0 || a > 0x7fffffff) {
                if (g_rank == 0) opt_usage_error("run", "--inject-overflow: expected STEP:PARAM, got '%s'", optarg);
                bad = 2;
            }
            ro.overflow_step = (int)a, ro.overflow_param = d;
            break;
        }
        case O_STALL: {
            long long a, b;
            double sec;
            if (sscanf(optarg, "%lld:%lld:%lf", &a, &b, &sec) != 3 || a < 0 || b < 0 || !(sec > 0 && sec < 1e5)) {
                if (g_rank == 0) opt_usage_error("run", "--inject-stall: expected STEP:RANK:SECONDS, got '%s'", optarg);
                bad = 2;
            }
            ro.stall_step = (int)a, ro.stall_rank = (int)b, ro.stall_s = sec;
            break;
        }
        case O_INJECT: {
            long long a, b, d;
            if (sscanf(optarg, "%lld:%lld:%lld", &a, &b, &d) != 3 || a < 0 || b < 0 || d < 0) {
                if (g_rank == 0) opt_usage_error("run", "--inject-nan: expected STEP:RANK:PARAM, got '%s'", optarg);
                bad = 2;
            }
            ro.inject_step = (int)a, ro.inject_rank = (int)b, ro.inject_param = d;
            break;
        }
        default:
            if (g_rank == 0) fprintf(stderr, "Try 'dmuon run --help' for more information.\n");
            bad = 2;
        }
    }
    if (!bad && optind < argc) {
        if (g_rank == 0) opt_usage_error("run", "unexpected argument '%s'", argv[optind]);
        bad = 2;
    }
    if (!bad && !model_name) {
        if (g_rank == 0) opt_usage_error("run", "--model is required");
        bad = 2;
    }
    if (!bad && resume && !ckpt_dir) {
        if (g_rank == 0) opt_usage_error("run", "--resume needs --checkpoint DIR");
        bad = 2;
    }
    if (bad) {
        MPI_Finalize();
        return bad;
    }
    ro.tokens = so.tokens;
    static char tune_default[1024];
    if (!ro.autotune_path) {
        snprintf(tune_default, sizeof tune_default, "%s/traces/kernels/autotune_h200.tsv", DM_SRCDIR);
        if (access(tune_default, R_OK) == 0) ro.autotune_path = tune_default;
    }
    ns_coeffs coeffs;
    dm_err err = {{0}};
    dm_model *model = NULL;
    int status = 1;
    run_ctx x;
    memset(&x, 0, sizeof x);
    if (ns_coeffs_from_spec(coeff_spec, "--ns-coeffs", &coeffs, &err) < 0) {
        say(stderr, "dmuon run: %s\n", err.msg);
        MPI_Finalize();
        return 2;
    }
    ro.muon.ns.coeffs = &coeffs;
    if (backend_auto) {
#if defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL)
        /* gpu only when every rank sees a device */
        ns_device_info info;
        dm_err e2;
        int mine = ns_device_query(&info, &e2) == 0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        ro.backend = all ? REAL_BACKEND_GPU : REAL_BACKEND_CPU;
#else
        ro.backend = REAL_BACKEND_CPU;
#endif
    }
    if (ro.backend == REAL_BACKEND_GPU) {
#if !(defined(DM_HAVE_CUDA) && defined(DM_HAVE_NCCL))
        say(stderr, "dmuon run: the GPU backend is not in this build (needs CUDA and NCCL); use --backend cpu\n");
        MPI_Finalize();
        return 1;
#endif
    }
    /* every rank loads the model (a local file read); rank 0 plans */
    int fail = dm_model_load(model_name, &model, &err) < 0;
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        fprintf(stderr, "dmuon run: rank %d: %s\n", g_rank, fail ? err.msg : "another rank could not load the model");
        goto done;
    }
    x.nranks = nranks;
    x.model = model;
    x.cluster_name = cluster_name, x.costs_path = costs_path, x.program_path = program_path;
    x.csv_path = csv_path, x.trace_path = trace_path, x.ckpt_dir = ckpt_dir, x.coeff_spec = coeff_spec;
    x.save_weights = save_weights, x.check_weights = check_weights;
    x.steps = steps, x.every = every, x.resume = resume;
    x.so = so;
    x.ro = ro;
    /* the main strategy, then --compare's, each planned with the same options; outputs
     * (--csv, --trace, --checkpoint) belong to the main one */
    const char *names[9] = {sched_strategy_name(so.strategy)};
    double means[9][8];
    int n_runs = 1;
    char *cmp_copy = compare ? dm_strdup(compare, &err) : NULL;
    for (char *tok = cmp_copy ? strtok(cmp_copy, ",") : NULL; tok && n_runs < 9; tok = strtok(NULL, ","))
        names[n_runs++] = tok;
    status = 0;
    for (int i = 0; i < n_runs && status == 0; i++) {
        if (i > 0) {
            dm_err e2;
            if (sched_opts_parse(&x.so, "strategy", names[i], &e2) < 0) {
                say(stderr, "dmuon run: --compare: %s\n", e2.msg);
                status = 2;
                break;
            }
            x.csv_path = x.trace_path = x.ckpt_dir = x.save_weights = x.check_weights = NULL;
            x.resume = 0;
            x.program_path = NULL;
            say(stdout, "#\n");
        }
        status = run_one(&x, means[i]);
    }
    if (status == 0 && n_runs > 1 && g_rank == 0) {
        printf("#\n# comparison (means over the steps counted; times in ms)\n");
        printf("# %-10s %10s %10s %10s %14s  %s\n", "strategy", "step", "optimizer", "opt_win", "exposed comm", "");
        for (int i = 0; i < n_runs; i++) {
            char rel[128] = "";
            if (i > 0 && means[i][0] > 0 && means[0][0] > 0) {
                if (means[0][0] <= means[i][0])
                    snprintf(rel, sizeof rel, "%s is %.2fx faster", names[0], means[i][0] / means[0][0]);
                else
                    snprintf(rel, sizeof rel, "%s's overhead over it: %+.1f%%", names[0],
                             100 * (means[0][0] / means[i][0] - 1));
            }
            printf("  %-10s %10.3f %10.3f %10.3f %8.3f %4.1f%%  %s\n", names[i], means[i][0] / 1e3, means[i][3] / 1e3,
                   means[i][6] / 1e3, means[i][5] / 1e3, means[i][0] > 0 ? 100 * means[i][5] / means[i][0] : 0, rel);
        }
    }
    free(cmp_copy);
done:
    dm_costs_free(x.costs);
    dm_model_free(model);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
