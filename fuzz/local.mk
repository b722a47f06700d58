# fuzz/local.mk: libFuzzer harnesses for every input parser. `make fuzz` builds them with clang
# (-fsanitize=fuzzer,address,undefined) outside the normal build, so `make` and `make check`
# never need clang, and runs each for FUZZ_SECONDS on its seed corpus (fuzz/corpus/NAME);
# `make fuzz-build` only builds. See fuzz/README.md.
FUZZ_CC = clang
FUZZ_SECONDS = 30
FUZZ_ENV = FUZZ_SRCDIR='$(abs_top_srcdir)' FUZZ_BUILDDIR='$(abs_top_builddir)' FUZZ_CC='$(FUZZ_CC)' \
	FUZZ_CPPFLAGS='$(DEFS) -I$(abs_top_builddir) $(AM_CPPFLAGS) $(CPPFLAGS) $(MPI_CFLAGS)' \
	FUZZ_LIBS='$(DM_DEPLIBS) $(LIBS) $(MPI_LIBS)' \
	FUZZ_SOURCES='$(libdmuon_a_SOURCES) cli/opts.c' FUZZ_SECONDS='$(FUZZ_SECONDS)'
fuzz:
	$(FUZZ_ENV) $(SHELL) $(srcdir)/fuzz/fuzz.sh run
fuzz-build:
	$(FUZZ_ENV) $(SHELL) $(srcdir)/fuzz/fuzz.sh build
.PHONY: fuzz fuzz-build
EXTRA_DIST += fuzz/fuzz.sh fuzz/README.md fuzz/corpus fuzz/crashes fuzz/fuzz_util.c fuzz/fuzz_util.h \
	fuzz/fuzz_model_check.c fuzz/fuzz_model_check.h fuzz/fuzz_json.c fuzz/fuzz_model.c \
	fuzz/fuzz_hf.c fuzz/fuzz_cluster.c fuzz/fuzz_ns_coeffs.c fuzz/fuzz_opts.c fuzz/fuzz_trace.c \
	fuzz/fuzz_costs.c fuzz/fuzz_program.c fuzz/fuzz_calib.c fuzz/json.dict fuzz/model.dict fuzz/hf.dict fuzz/cluster.dict \
	fuzz/trace.dict fuzz/program.dict fuzz/costs.dict fuzz/calib.dict
EXTRA_DIST += fuzz/lsan.supp
