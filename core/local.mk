# core/local.mk: the core library's sources: errors, JSON, atomic output files, spawning, paths,
# the data folders' lookup order (datadir), the line reader, models and their HuggingFace
# import, the cluster and its parameter table, the kernel cost model, the collective cost
# model, the step program and its JSON, the trace format and the phase ruler, the workload of a
# step, what each rank holds of each parameter (the state rule) and the executor's memory
# estimate, the GPU arenas' layout (which collectives are staged), the loader of the GPU plug-in.
libdmuon_a_SOURCES += core/dm_error.c core/dm_error.h core/json.c core/json.h \
	core/outfile.c core/outfile.h core/model.c core/model.h
libdmuon_a_SOURCES += core/program.c core/program.h core/cluster.c core/cluster.h
libdmuon_a_SOURCES += core/phases.c core/phases.h core/power.c core/power.h
libdmuon_a_SOURCES += core/lines.c core/lines.h core/spawn.c core/spawn.h core/paths.c core/paths.h \
	core/datadir.c core/datadir.h \
	core/hf_import.c core/hf_import.h core/costs.c core/costs.h core/program_io.c \
	core/collcost.c core/collcost.h core/trace.c core/trace.h
libdmuon_a_SOURCES += core/workload.c core/workload.h core/memory.c core/memory.h core/holds.c core/holds.h core/arena.c core/arena.h
libdmuon_a_SOURCES += core/clock.h core/coll.c core/coll.h core/gpu_api.c core/gpu_api.h core/csvjson.c core/csvjson.h
