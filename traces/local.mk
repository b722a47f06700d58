# traces/local.mk: sources, tests and data of traces/ (included by Makefile.am).
# --- cost tables (sched helper): the roofline table, installed as $(pkgdatadir)/costs/roofline.csv
# (measured tables add `dist_costs_DATA += traces/costs/NAME.csv`). Regenerate with
#   ./dmuon plan --write-roofline traces/costs/roofline.csv --gpu H200
costsdir = $(pkgdatadir)/costs
dist_costs_DATA = traces/costs/roofline.csv
dist_costs_DATA += traces/costs/h200.csv
