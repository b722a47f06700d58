# core/local.mk: core library sources (errors, JSON, output files, models).
libdmuon_a_SOURCES += core/dm_error.c core/dm_error.h core/json.c core/json.h \
	core/outfile.c core/outfile.h core/model.c core/model.h
libdmuon_a_SOURCES += core/program.c core/program.h core/cluster.c core/cluster.h
libdmuon_a_SOURCES += core/phases.c core/phases.h
libdmuon_a_SOURCES += core/coll.c core/coll.h
