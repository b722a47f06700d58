# valid/local.mk: trust in the simulator and speed over time: `dmuon regress` (regression
# benchmarks against traces/baselines/), `dmuon compare` (simulated versus measured traces),
# `dmuon calibrate` (cost-model inputs from measurements) and `dmuon validate` (executor and
# simulator on the same plans), with their tests and baselines.
libdmuon_a_SOURCES += core/compare.c core/compare.h valid/spawn.c valid/spawn.h
dmuon_SOURCES += cli/cmd_regress.c cli/cmd_compare.c
TESTS += tests/regress.sh tests/compare.sh tests/compare_validate.sh tests/validate_replay.sh
EXTRA_DIST += tests/regress.sh tests/compare.sh tests/compare_validate.sh tests/validate_replay.sh \
	traces/validate/h200x2-1/validate.csv traces/validate/h200x2-3/run4/cases/validate.csv \
	traces/baselines/README.md \
	traces/baselines/cpu-2core/quick.tsv traces/baselines/cpu-2core/full.tsv
libdmuon_a_SOURCES += core/calib.c core/calib.h
dmuon_SOURCES += cli/cmd_calibrate.c cli/cmd_validate.c
check_PROGRAMS += tests/test_calib
TESTS += tests/test_calib
tests_test_calib_SOURCES = tests/test_calib.c tests/tap.h
tests_test_calib_LDADD = $(DM_LDADD)
EXTRA_DIST += tests/data/comm_h200x2.csv
EXTRA_DIST += valid/run_device.sh traces/calib/h200x2.calib traces/calib/README.md \
	traces/calib/h200x2-1_dmuon_program.json
