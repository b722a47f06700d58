# plots/local.mk: gnuplot scripts (installed under $(pkgdatadir)/plots: `dmuon scale` runs
# scale.gp; compare.gp draws compare's data files; both load styles.gp, the one colour table)
# and the one way the commands run gnuplot (plot.c: quoting, no shell, PNGs renamed into place).
nobase_dist_pkgdata_DATA += plots/scale.gp plots/compare.gp plots/styles.gp
libdmuon_a_SOURCES += plots/plot.c plots/plot.h
