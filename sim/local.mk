# sim/local.mk: the discrete-event simulator (event heap, network of links, the interpreter of a
# step program, its reports), the planner entry that picks between plans by simulating them
# (plan_best), and the record of the NCCL measurement the h200x2 preset rests on.
libdmuon_a_SOURCES += sim/heap.c sim/heap.h sim/net.c sim/net.h sim/sim.c sim/sim.h sim/sim_report.c sim/sim_mem.c sim/sim_mem.h \
	sim/sim_links.c sim/sim_links.h sim/plan_best.c sim/plan_best.h
EXTRA_DIST += sim/calib_h200x2.txt sim/README.md
