# kernels/local.mk: the kernels folder's sources and tests.
# --- CPU reference Muon math (ns_ref): keep these lines together at the top ------------------
libdmuon_a_SOURCES += kernels/ns_ref.c kernels/ns_ref.h
check_PROGRAMS += tests/test_ns_ref
TESTS += tests/test_ns_ref
tests_test_ns_ref_SOURCES = tests/test_ns_ref.c tests/tap.h
tests_test_ns_ref_LDADD = $(DM_LDADD)
# --- end of the CPU reference section -------------------------------------------------------
