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
check_PROGRAMS += tests/test_hf_families
TESTS += tests/test_hf_families
tests_test_hf_families_SOURCES = tests/test_hf_families.c tests/tap.h
tests_test_hf_families_LDADD = $(DM_LDADD)
EXTRA_DIST += \
	tests/data/hf/mistral-7b-v0.1.json \
	tests/data/hf/mixtral-8x7b-v0.1.json \
	tests/data/hf/qwen3-8b.json \
	tests/data/hf/qwen3-30b-a3b.json \
	tests/data/hf/phi-3-mini-4k-instruct.json
