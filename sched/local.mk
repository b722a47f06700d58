# sched/local.mk: sources, tests and data of sched/ (included by Makefile.am).
