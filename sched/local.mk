# sched/local.mk: the scheduler (owner assignment, batching, program generation), the cost
# model and the program's JSON I/O (core/costs.c, core/program_io.c), `dmuon plan`, and their tests.
libdmuon_a_SOURCES += core/costs.c core/costs.h core/program_io.c \
	sched/sched.h sched/sched_opts.c sched/assign.c sched/build.c
dmuon_SOURCES += cli/cmd_plan.c
