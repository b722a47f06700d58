# traces/local.mk: the data of traces/: cost tables (the roofline table and the measured H200
# table, installed under $(pkgdatadir)/costs; regenerate the roofline table with
#   ./dmuon plan --write-roofline traces/costs/roofline.csv --gpu H200), the calibration
# (installed under $(pkgdatadir)/calib, beside costs/ as their `costs = ../costs/...` lines need;
# h200.calib names the work table at full clock, h200-asrun.calib the one as run),
# the regression baselines (installed under $(pkgdatadir)/baselines/MACHINE), the kernels'
# autotune cache (under $(pkgdatadir)/kernels), stored validation tables and the kernel runs'
# notes. The installed folders are what an installed dmuon reads by default (core/datadir.h).
costsdir = $(pkgdatadir)/costs
dist_costs_DATA = traces/costs/roofline.csv
dist_costs_DATA += traces/costs/h200.csv traces/costs/h200-work.csv traces/costs/h200-work-cool.csv
calibdir = $(pkgdatadir)/calib
dist_calib_DATA = traces/calib/h200x2.calib traces/calib/h200.calib traces/calib/h200-asrun.calib
baselinesdir = $(pkgdatadir)/baselines
dist_baselines_DATA = traces/baselines/README.md
baselines_cpu2coredir = $(pkgdatadir)/baselines/cpu-2core
dist_baselines_cpu2core_DATA = traces/baselines/cpu-2core/quick.tsv traces/baselines/cpu-2core/full.tsv
baselines_h200dir = $(pkgdatadir)/baselines/h200
dist_baselines_h200_DATA = traces/baselines/h200/full.tsv
kernelsdir = $(pkgdatadir)/kernels
dist_kernels_DATA = traces/kernels/autotune_h200.tsv
EXTRA_DIST += traces/calib/README.md traces/calib/h200x2-1_dmuon_program.json \
	traces/validate/h200x2-1/validate.csv traces/validate/h200x2-3/run4/cases/validate.csv \
	traces/kernels/run_device.sh traces/kernels/NOTES.md traces/kernels/goal_shapes.txt \
	traces/kernels/extra_shapes.txt traces/kernels/big18_shapes.txt traces/kernels/expert_shapes.txt \
	traces/scale/README.md
