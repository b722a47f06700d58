# tests/local.mk: command-level tests (golden output and exit codes) written as TAP shell scripts.
TESTS += tests/cli_basic.sh
EXTRA_DIST += tests/cli_basic.sh tests/tap.sh
