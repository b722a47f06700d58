/* commands.h: the dmuon subcommands. Each takes the arguments after the subcommand name
 * (argv[0] is the subcommand) and returns the exit status: 0 ok, 1 failure, 2 usage error. */
#ifndef DM_COMMANDS_H
#define DM_COMMANDS_H

int cmd_models(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_regress(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_validate(int argc, char **argv);
/* `bench kernels` and `bench work` (argv[0] the benchmark's name): in the GPU plug-in only
 * (cli/cmd_bench_gpu.c); the program reaches them through core/gpu_api.h. */
int cmd_bench_kernels(int argc, char **argv);
int cmd_bench_work(int argc, char **argv);

#endif
