# real/local.mk: sources, tests and data of real/ (included by Makefile.am).
