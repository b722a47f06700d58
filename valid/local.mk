# valid/local.mk: trust in the simulator and speed over time: `dmuon regress` (regression
# benchmarks against traces/baselines/), `dmuon compare` (simulated versus measured traces),
# `dmuon calibrate` (cost-model inputs from measurements) and `dmuon validate` (executor and
# simulator on the same plans), with their tests and baselines.
libdmuon_a_SOURCES += core/compare.c core/compare.h
dmuon_SOURCES += cli/cmd_regress.c cli/cmd_compare.c
TESTS += tests/regress.sh tests/compare.sh
EXTRA_DIST += tests/regress.sh tests/compare.sh traces/baselines/README.md \
	traces/baselines/cpu-2core/quick.tsv traces/baselines/cpu-2core/full.tsv
