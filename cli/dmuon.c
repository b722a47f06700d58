/* dmuon.c: the `dmuon` command: git-style dispatch to the subcommands in cli/cmd_*.c. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "opts.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} subcommand;

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
    {"models", cmd_models, "list the bundled models with parameter counts"},
    {"model", cmd_model, "show or import a model (model show NAME|FILE, model import CONFIG.json)"},
    {"plan", cmd_plan, "build the step program: owners, batches, collectives"},
    {"sim", cmd_sim, "simulate one training step on a modeled cluster"},
    {"scale", cmd_scale, "what-if scaling study over GPU counts and strategies"},
    {"bench", cmd_bench, "measure kernel costs (bench kernels) or collectives (bench comm)"},
    {"run", cmd_run, "run the step program for real (MPI + NCCL + CUDA, or --backend cpu)"},
    {"compare", cmd_compare, "compare a simulated trace with a measured one"},
    {"calibrate", cmd_calibrate, "fit the cost model's inputs from measurements (calibration file)"},
    {"validate", cmd_validate, "run executor and simulator on the same plans and compare them"},
    {"regress", cmd_regress, "regression benchmarks against the stored baselines"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: dmuon [--help] [--version] COMMAND [ARGS]\n"
            "Plan, simulate and run distributed Muon optimizer steps.\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'dmuon COMMAND --help' describes a command's options.\n"
               "Report bugs to: " PACKAGE_BUGREPORT "\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(c, "--version") == 0 || strcmp(c, "-V") == 0) {
        printf("dmuon " PACKAGE_VERSION "\n");
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(c, commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    if (c[0] == '-') opt_usage_error("", "unknown option '%s'", c);
    else opt_usage_error("", "unknown command '%s'", c);
    return 2;
}
