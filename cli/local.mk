# cli/local.mk: the dmuon command: dispatch, option parsing, the one input resolver, and one
# file per subcommand (the executor's `dmuon run` only with MPI).
dmuon_SOURCES += cli/dmuon.c cli/commands.h cli/opts.c cli/opts.h cli/inputs.c cli/inputs.h \
	cli/cmd_model.c cli/cmd_plan.c cli/cmd_sim.c cli/cmd_compare.c cli/cmd_calibrate.c \
	cli/cmd_validate.c cli/cmd_regress.c cli/cmd_bench.c
if HAVE_MPI
dmuon_SOURCES += cli/cmd_run.c
endif
# bench kernels and bench work, in the GPU plug-in (Makefile.am)
if HAVE_CUDA
libdmuon_gpu_a_SOURCES += cli/cmd_bench_gpu.c
endif
