# sched/local.mk: the scheduler (owner assignment, batching, program generation), the cost
# model and the program's JSON I/O (core/costs.c, core/program_io.c), `dmuon plan`, and their tests.
libdmuon_a_SOURCES += core/costs.c core/costs.h core/program_io.c \
	sched/sched.h sched/sched_opts.c sched/assign.c sched/build.c
dmuon_SOURCES += cli/cmd_plan.c

check_PROGRAMS += tests/test_costs tests/test_program tests/test_sched
TESTS += tests/test_costs tests/test_program tests/test_sched tests/plan_golden.sh
tests_test_costs_SOURCES = tests/test_costs.c tests/tap.h
tests_test_costs_LDADD = $(DM_LDADD)
tests_test_program_SOURCES = tests/test_program.c tests/tap.h
tests_test_program_LDADD = $(DM_LDADD)
tests_test_sched_SOURCES = tests/test_sched.c tests/tap.h
tests_test_sched_LDADD = $(DM_LDADD)
EXTRA_DIST += sched/README.md tests/plan_golden.sh tests/golden/plan_qwen2.5-0.5b.txt tests/golden/plan_qwen2.5-0.5b_milp.txt
