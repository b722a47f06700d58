# tests/local.mk: command-level tests (golden output and exit codes) written as TAP shell scripts.
TESTS += tests/cli_basic.sh
EXTRA_DIST += tests/cli_basic.sh tests/tap.sh
check_PROGRAMS += tests/test_json
TESTS += tests/test_json
tests_test_json_SOURCES = tests/test_json.c tests/tap.h
tests_test_json_LDADD = $(DM_LDADD)
check_PROGRAMS += tests/test_phases
TESTS += tests/test_phases
tests_test_phases_SOURCES = tests/test_phases.c tests/tap.h
tests_test_phases_LDADD = $(DM_LDADD)
