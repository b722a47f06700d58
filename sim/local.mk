# sim/local.mk: the discrete-event simulator (event heap, network of links, the interpreter of a
# step program, its reports) and the record of the NCCL measurement the h200x2 preset rests on.
libdmuon_a_SOURCES += sim/heap.c sim/heap.h sim/net.c sim/net.h sim/sim.c sim/sim.h sim/sim_report.c sim/sim_mem.c sim/sim_mem.h \
	sim/sim_links.c sim/sim_links.h
EXTRA_DIST += sim/calib_h200x2.txt sim/README.md
