# plots/local.mk: gnuplot scripts (installed under $(pkgdatadir)/plots; `dmuon scale` runs them).
nobase_dist_pkgdata_DATA += plots/scale.gp
