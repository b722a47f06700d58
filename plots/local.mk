# plots/local.mk: sources, tests and data of plots/ (included by Makefile.am).
