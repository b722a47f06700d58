# sim/local.mk: the discrete-event simulator (sim/), the collective cost model and the shared
# trace format (core/collcost.*, core/trace.*, owned by the simulator's module), their tests.
libdmuon_a_SOURCES += core/collcost.c core/collcost.h core/trace.c core/trace.h
