# traces/local.mk: sources, tests and data of traces/ (included by Makefile.am).
