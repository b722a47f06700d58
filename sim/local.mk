# sim/local.mk: the discrete-event simulator (sim/), the collective cost model and the shared
# trace format (core/collcost.*, core/trace.*, owned by the simulator's module), `dmuon sim`
# and `dmuon scale` (cli/cmd_sim.c), and their tests.
libdmuon_a_SOURCES += core/collcost.c core/collcost.h core/trace.c core/trace.h \
	sim/heap.c sim/heap.h sim/net.c sim/net.h sim/sim.c sim/sim.h
dmuon_SOURCES += cli/cmd_sim.c

check_PROGRAMS += tests/test_sim
TESTS += tests/test_sim
tests_test_sim_SOURCES = tests/test_sim.c tests/tap.h
tests_test_sim_LDADD = $(DM_LDADD)
TESTS += tests/sim_golden.sh tests/scale_golden.sh
EXTRA_DIST += tests/sim_golden.sh tests/scale_golden.sh tests/data/sim_costs.csv \
	tests/golden/sim_qwen2.5-0.5b_a800_16.txt tests/golden/scale_qwen2.5-0.5b_h200.txt \
	tests/golden/scale_qwen2.5-0.5b_h200.csv
# What NCCL measured on the 2 x H200 machine (the h200x2 preset's bus efficiency comes from it;
# the hand-built program that measured it is gone: `dmuon bench comm` measures the same).
EXTRA_DIST += sim/calib_h200x2.txt sim/README.md
check_PROGRAMS += tests/test_sim_faults
TESTS += tests/test_sim_faults
tests_test_sim_faults_SOURCES = tests/test_sim_faults.c tests/tap.h
tests_test_sim_faults_LDADD = $(DM_LDADD)

check_PROGRAMS += tests/test_sim_rates
TESTS += tests/test_sim_rates
tests_test_sim_rates_SOURCES = tests/test_sim_rates.c tests/tap.h
tests_test_sim_rates_LDADD = $(DM_LDADD)
