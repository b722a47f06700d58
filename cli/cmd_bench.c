/* cmd_bench.c: `dmuon bench`: the dispatch of its benchmarks and `bench comm`'s command line (the
 * collectives, under MPI: real/real_bench.c). `bench kernels` and `bench work` need CUDA: their
 * command lines are the GPU plug-in's (cli/cmd_bench_gpu.c, loaded through core/gpu_api.h). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "dm_error.h"
#include "gpu_api.h"
#include "opts.h"
#ifdef DM_HAVE_MPI
#include "real.h"
#endif

/* ---- bench comm ---------------------------------------------------------------------------- */

#ifdef DM_HAVE_MPI
static void usage_comm(FILE *f, int gpu)
{
    fprintf(f, "Usage: mpirun -np N dmuon bench comm [OPTIONS]\n"
               "Time broadcast, reduce, all-reduce, all-gather and reduce-scatter over all ranks\n"
               "(nccl-tests columns), check every result, and fit latency and bus bandwidth.\n\n"
               "  --backend B        gpu (NCCL, bf16) or cpu (MPI, float) (default %s)\n"
               "  --min-bytes S      smallest size (default 1K)\n"
               "  --max-bytes S      largest size (default 1G)\n"
               "  --step-factor F    size multiplier (default 2)\n"
               "  --iters N          timed calls per size (default 20)\n"
               "  --warmup N         untimed calls first (default 5)\n"
               "  --timeout S        give up on a collective after S seconds (default 300)\n"
               "  --csv FILE         the rows as CSV (for the cost model's fit)\n"
               "  --json             the rows as one JSON document on stdout (dmuon-bench-1: the CSV's\n"
               "                     columns and header fields); the table goes to stderr\n",
               gpu ? "gpu" : "cpu");
}

static int bench_comm(int argc, char **argv)
{
    int inited = 0, rank = 0;
    if (opt_wants_help(argc, argv)) {
        real_bench_opts d;
        real_bench_opts_default(&d);
        usage_comm(stdout, d.gpu);
        return 0;
    }
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    real_bench_opts o;
    real_bench_opts_default(&o);
    static const struct option lo[] = {{"min-bytes", required_argument, NULL, 'b'}, {"max-bytes", required_argument, NULL, 'e'},
                                       {"step-factor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'},
                                       {"warmup", required_argument, NULL, 'w'},      {"csv", required_argument, NULL, 'c'},
                                       {"backend", required_argument, NULL, 'k'},     {"timeout", required_argument, NULL, 't'},
                                       {"help", no_argument, NULL, 'h'},              {"json", no_argument, NULL, 'j'},
                                       {NULL, 0, NULL, 0}};
    const char *cmd = "bench comm";
    int c, bad = 0, json = 0;
    /* every rank parses; rank 0 alone prints a usage error, in the project's words (opterr 0) */
    opterr = 0;
    opt_set_quiet(rank != 0);
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, ":b:e:f:n:w:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 'b': bad = opt_parse_size(cmd, "--min-bytes", optarg, 4, (int64_t)1 << 34, &o.min_bytes); break;
        case 'e': bad = opt_parse_size(cmd, "--max-bytes", optarg, 4, (int64_t)1 << 34, &o.max_bytes); break;
        case 'f': bad = opt_parse_long(cmd, "--step-factor", optarg, 2, 1024, &o.step_factor); break;
        case 'n': bad = opt_parse_long(cmd, "--iters", optarg, 1, 100000, &o.iters); break;
        case 'w': bad = opt_parse_long(cmd, "--warmup", optarg, 0, 100000, &o.warmup); break;
        case 't': bad = opt_parse_double(cmd, "--timeout", optarg, 0.001, 1e6, &o.timeout_s); break;
        case 'c': o.csv_path = optarg; break;
        case 'j': json = 1; break;
        case 'k':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) {
                opt_usage_error(cmd, "--backend: expected cpu or gpu, got '%s'", optarg);
                bad = 1;
            }
            o.gpu = !strcmp(optarg, "gpu");
            break;
        case 'h':
            if (!rank) usage_comm(stdout, o.gpu);
            opt_set_quiet(0);
            MPI_Finalize();
            return 0;
        default: bad = opt_getopt_error(cmd, c, argv); /* ':' missing argument, or unknown */
        }
    }
    if (!bad) bad = opt_no_operands(cmd, argc, argv);
    if (!bad && o.min_bytes > o.max_bytes) {
        opt_usage_error(cmd, "--min-bytes is above --max-bytes");
        bad = 1;
    }
    opt_set_quiet(0);
    if (bad) {
        MPI_Finalize();
        return 2;
    }
    dm_err err = {{0}};
    opt_json js;
    if (json && rank == 0 && opt_json_begin(&js, cmd, &o.csv_path) < 0) {
        opt_json_end(&js, cmd, "comm", NULL, 0);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (json && rank != 0 && !o.csv_path) o.csv_path = "-"; /* only rank 0 writes it */
    int rc = real_bench_comm(&o, stdout, &err);
    if (json && rank == 0 && opt_json_end(&js, cmd, "comm", o.csv_path, rc == 0) < 0) rc = -1;
    if (rc == -2) { /* this rank gave up inside a collective: the others may wait in one */
        fprintf(stderr, "dmuon bench comm: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rc < 0 && rank == 0) fprintf(stderr, "dmuon bench comm: %s\n", err.msg);
    MPI_Finalize();
    return rc == 0 ? 0 : 1;
}
#else
static int bench_comm(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "dmuon bench comm: not built (configure found no MPI)\n");
    return 1;
}
#endif

/* ---- bench kernels, bench work: the GPU plug-in's (cli/cmd_bench_gpu.c) --------------------- */

static int gpu_bench(const char *sub, int argc, char **argv)
{
    dm_err err;
    const dm_gpu_api *api = dm_gpu_side(&err);
    if (!api) { /* --help still answers (exit 0), saying why the benchmark is not available */
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                printf("Usage: dmuon bench %s [OPTIONS]\n(not available here: %s)\n", sub, err.msg);
                return 0;
            }
        fprintf(stderr, "dmuon bench %s: %s\n", sub, err.msg);
        return 1;
    }
    return (!strcmp(sub, "kernels") ? api->bench_kernels : api->bench_work)(argc, argv);
}

static void bench_usage(FILE *f)
{
    fprintf(f, "Usage: dmuon bench kernels [OPTIONS]   measure GPU kernel costs (NS, products, updates)\n"
               "       dmuon bench work [OPTIONS]      measure the kernels of the models' steps (GEMMs,\n"
               "                                       attention, experts, elementwise) and a GEMM grid\n"
               "       dmuon bench comm [OPTIONS]      measure collectives\n"
               "'dmuon bench kernels --help' lists its options.\n");
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bench_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "kernels")) return gpu_bench("kernels", argc - 1, argv + 1);
    if (!strcmp(argv[1], "comm")) return bench_comm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "work")) return gpu_bench("work", argc - 1, argv + 1);
    opt_usage_error("bench", "unknown benchmark '%s' (expected kernels, work or comm)", argv[1]);
    return 2;
}
