# traces/local.mk: the data of traces/: cost tables (the roofline table and the measured H200
# table, installed under $(pkgdatadir)/costs; regenerate the roofline table with
#   ./dmuon plan --write-roofline traces/costs/roofline.csv --gpu H200), the calibration, the
# regression baselines, stored validation tables and the kernel runs' notes.
costsdir = $(pkgdatadir)/costs
dist_costs_DATA = traces/costs/roofline.csv
dist_costs_DATA += traces/costs/h200.csv
EXTRA_DIST += traces/calib/h200x2.calib traces/calib/README.md traces/calib/h200x2-1_dmuon_program.json \
	traces/baselines/README.md traces/baselines/cpu-2core/quick.tsv traces/baselines/cpu-2core/full.tsv \
	traces/validate/h200x2-1/validate.csv traces/validate/h200x2-3/run4/cases/validate.csv \
	traces/kernels/run_device.sh traces/kernels/NOTES.md traces/kernels/goal_shapes.txt \
	traces/kernels/extra_shapes.txt traces/kernels/big18_shapes.txt traces/kernels/expert_shapes.txt \
	traces/scale/README.md
