# sched/local.mk: the scheduler (owner assignment, batching, program generation, its options).
libdmuon_a_SOURCES += sched/sched.h sched/sched_opts.c sched/assign.c sched/build.c
EXTRA_DIST += sched/README.md
