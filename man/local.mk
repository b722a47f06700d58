# man/local.mk: the man pages, generated at build time from the help texts by tools/mkman.sh:
# dmuon.1 and dmuon-CMD.1 for every command `dmuon --help` lists (tests/man.sh checks that this
# list matches it), installed by make install.
DM_MAN_PAGES = man/dmuon.1 man/dmuon-models.1 man/dmuon-model.1 man/dmuon-plan.1 man/dmuon-sim.1 \
	man/dmuon-scale.1 man/dmuon-bench.1 man/dmuon-run.1 man/dmuon-compare.1 man/dmuon-calibrate.1 \
	man/dmuon-validate.1 man/dmuon-regress.1
nodist_man1_MANS = $(DM_MAN_PAGES)
# One run writes every page (Automake's recipe for several outputs of one command).
$(DM_MAN_PAGES): man/.stamp
	@test -f $@ || { rm -f man/.stamp; $(MAKE) $(AM_MAKEFLAGS) man/.stamp; }
man/.stamp: dmuon$(EXEEXT) $(DM_GPU_PLUGIN) $(srcdir)/tools/mkman.sh
	$(AM_V_GEN)$(SHELL) $(srcdir)/tools/mkman.sh ./dmuon$(EXEEXT) man && touch $@
CLEANFILES += $(DM_MAN_PAGES) man/.stamp
EXTRA_DIST += tools/mkman.sh
