# sim/local.mk: sources, tests and data of sim/ (included by Makefile.am).
