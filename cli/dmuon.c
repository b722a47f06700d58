/* dmuon.c: the `dmuon` command: git-style dispatch to the subcommands in cli/cmd_*.c. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__ /* (defined by the headers above) */
#include <malloc.h>
#endif

#include "commands.h"
#include "datadir.h"
#include "gpu_api.h"
#include "opts.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
    const opt_short *shorts; /* short options rewritten as long ones before fn parses (opts.h) */
    int n_shorts;
} subcommand;

/* `dmuon plan`'s short options (cli/cmd_plan.c: -m -g -c -o), for the commands that share those
 * options but parse long names only: sim takes the first three (it has no --out), scale all. */
static const opt_short plan_shorts[] = {{'m', "model"}, {'g', "gpus"}, {'c', "cluster"}, {'o', "out"}};
/* run has no --gpus (mpirun's ranks) and no --out */
static const opt_short run_shorts[] = {{'m', "model"}, {'c', "cluster"}};

/* Subcommands whose module is not built in this tree answer with this. Each real module
 * provides a strong definition that replaces the weak one at link time. */
static int not_built(const char *name)
{
    fprintf(stderr, "dmuon %s: not available in this build\n", name);
    return 1;
}
#define WEAK_STUB(fn, nm) \
    __attribute__((weak)) int fn(int argc, char **argv) { (void)argc; (void)argv; return not_built(nm); }
WEAK_STUB(cmd_plan, "plan")
WEAK_STUB(cmd_sim, "sim")
WEAK_STUB(cmd_scale, "scale")
WEAK_STUB(cmd_bench, "bench")
WEAK_STUB(cmd_run, "run")
WEAK_STUB(cmd_compare, "compare")
WEAK_STUB(cmd_regress, "regress")
WEAK_STUB(cmd_calibrate, "calibrate")
WEAK_STUB(cmd_validate, "validate")

static const subcommand commands[] = {
    {"models", cmd_models, "list the bundled models with parameter counts", NULL, 0},
    {"model", cmd_model, "show or import a model (model show NAME|FILE, model import CONFIG.json)", NULL, 0},
    {"plan", cmd_plan, "build the step program: owners, batches, collectives", NULL, 0},
    {"sim", cmd_sim, "simulate one training step on a modeled cluster", plan_shorts, 3},
    {"scale", cmd_scale, "what-if scaling study over GPU counts and strategies", plan_shorts, 4},
    {"bench", cmd_bench, "measure kernel costs (bench kernels) or collectives (bench comm)", NULL, 0},
    {"run", cmd_run, "run the step program for real (MPI + NCCL + CUDA, or --backend cpu)", run_shorts, 2},
    {"compare", cmd_compare, "compare a simulated trace with a measured one", NULL, 0},
    {"calibrate", cmd_calibrate, "fit the cost model's inputs from measurements (calibration file)", NULL, 0},
    {"validate", cmd_validate, "run executor and simulator on the same plans and compare them", NULL, 0},
    {"regress", cmd_regress, "regression benchmarks against the stored baselines", NULL, 0},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon [--help] [--version] COMMAND [ARGS]\n"
            "       dmuon help [COMMAND]\n"
            "Plan, simulate and run distributed Muon optimizer steps.\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'dmuon help COMMAND' (or 'dmuon COMMAND --help') describes a command's options.\n"
               "\nEnvironment:\n"
               "  DMUON_MODELS  folder of the model files that a model NAME is looked up in\n"
               "  DMUON_COSTS   kernel cost table: a file, or a folder holding h200.csv or roofline.csv\n"
               "  DMUON_PLOTS   folder of the gnuplot scripts (scale.gp, compare.gp, styles.gp)\n"
               "  MPIRUN        launcher of the executor benchmark's ranks in dmuon regress\n"
               "                (default mpirun; words split at spaces)\n"
               "  DMUON_GPU     the GPU plug-in to load (a file; default: see Files)\n"
               "\nFiles:\n");
    static const char *const what[DM_DATA__COUNT] = {
        [DM_DATA_MODELS] = "the bundled models",
        [DM_DATA_COSTS] = "kernel cost tables: h200.csv (measured), roofline.csv",
        [DM_DATA_CALIB] = "calibration files, named by --calibration NAME",
        [DM_DATA_BASELINES] = "the baselines of dmuon regress, one folder per machine",
        [DM_DATA_PLOTS] = "gnuplot scripts",
        [DM_DATA_KERNELS] = "the NS kernels' autotune cache (dmuon run --backend gpu)",
    };
    for (int k = 0; k < DM_DATA__COUNT; k++)
        fprintf(f, "  %s/%-10s %s\n", DM_PKGDATADIR, dm_data_installed_name((dm_data_kind)k), what[k]);
    fprintf(f, "  Each is looked up after its environment variable (where it has one) and before the\n"
               "  source tree's models/, traces/costs/, traces/calib/, traces/baselines/, plots/ and\n"
               "  traces/kernels/; a dmuon run from its build tree reads the source tree's first, and an\n"
               "  installation staged with DESTDIR or moved reads its own, found from its program's folder.\n"
               "  " DM_PKGLIBDIR "/dmuon-gpu.so\n"
               "                the GPU side (CUDA, cuBLAS, NCCL: run --backend gpu, bench kernels,\n"
               "                bench work, bench comm --backend gpu), loaded only when used, so that\n"
               "                the other commands start without CUDA; a dmuon run from its build\n"
               "                tree loads the build tree's\n"
               "\nReport bugs to: " PACKAGE_BUGREPORT "\n");
}

static void version(void)
{
    printf("dmuon " PACKAGE_VERSION "\nbuilt with:\n");
#ifdef DM_HAVE_CUDA
    printf("  CUDA      %s, kernels for compute capabilities %s\n", DM_VERSION_CUDA, DM_CUDA_ARCH);
#else
    printf("  CUDA      no\n");
#endif
#ifdef DM_HAVE_NCCL
    printf("  NCCL      %s\n", DM_VERSION_NCCL);
#else
    printf("  NCCL      no\n");
#endif
#ifdef DM_HAVE_MPI
    printf("  MPI       %s\n", DM_VERSION_MPI);
#else
    printf("  MPI       no\n");
#endif
    printf("  lp_solve  %s\n  GSL       %s\n  CBLAS     %s\n", DM_VERSION_LPSOLVE, DM_VERSION_GSL, DM_BLAS);
#ifdef DM_HAVE_CUDA
    dm_err err;
    if (dm_gpu_side(&err))
        printf("GPU side: %s\n", dm_gpu_side_path());
    else
        printf("GPU side: not loadable here: %s\n", err.msg);
#else
    printf("GPU side: not in this build\n");
#endif
}

static const subcommand *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
    return NULL;
}

/* dmuon help [COMMAND [SUB...]]: the command's own --help (dmuon COMMAND SUB... --help). */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    const subcommand *sc = find_command(argv[2]);
    if (!sc) {
        opt_usage_error("", "help: unknown command '%s'", argv[2]);
        return 2;
    }
    char *args[16];
    int n = 0;
    for (int i = 2; i < argc && n < 14; i++) args[n++] = argv[i];
    args[n++] = "--help";
    args[n] = NULL;
    return sc->fn(n, args);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
    /* Memory freed stays in the heap for the next allocation to take: glibc's dynamic mmap
     * threshold and its trimming of the heap's top would otherwise hand it back to the kernel,
     * which clears it again when it is taken again. A plan of thousands of ranks builds and frees
     * several programs of hundreds of MB (plan_best's candidates): a third of `sim --hsdp` at 4096
     * GPUs was the kernel clearing fresh pages (traces/scale/hsdp-check-2026-12-07e), whose minor
     * faults these settings about halve (traces/scale/bound-2026-12-07); a timed command
     * (`regress`) was bimodal by the heap's layout (traces/scale/assignfirst-2026-12-07). Blocks
     * over 32 MiB still come from mmap (glibc's ceiling for the threshold). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (strcmp(c, "help") == 0) return help(argc, argv);
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(c, "--version") == 0 || strcmp(c, "-V") == 0) {
        version();
        return 0;
    }
    const subcommand *sc = find_command(c);
    if (sc && sc->n_shorts) {
        char **args = opt_expand_shorts(argc - 1, argv + 1, sc->shorts, sc->n_shorts);
        if (!args) {
            fprintf(stderr, "dmuon: out of memory\n");
            return 1;
        }
        int rc = sc->fn(argc - 1, args);
        opt_shorts_free(args, argc - 1);
        return rc;
    }
    if (sc) return sc->fn(argc - 1, argv + 1);
    /* under mpirun every rank gets here: the launcher's rank 0 alone says it (MPI is not started) */
    const char *lr = getenv("OMPI_COMM_WORLD_RANK");
    if (!lr) lr = getenv("PMIX_RANK");
    if (!lr) lr = getenv("PMI_RANK");
    int quiet = lr && strcmp(lr, "0");
    if (quiet) opt_set_quiet(1);
    if (c[0] == '-') opt_usage_error("", "unknown option '%s'", c);
    else opt_usage_error("", "unknown command '%s'", c);
    if (quiet) { /* mpirun aborts the job at the first failed exit: let rank 0 say it first */
        struct timespec pause = {0, 300000000};
        nanosleep(&pause, NULL);
    }
    return 2;
}
