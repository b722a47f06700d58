#!/bin/sh
# help_golden.sh: every command's --help (and bench's kernels, work and comm) against its golden
# text in tests/golden/help/, so a changed option or default shows up in review. The goldens are
# the full build's (CUDA, NCCL, MPI): other builds print other lines, and skip. Installation
# folders and the source tree are masked (PKGDATADIR, PKGLIBDIR, SRCDIR). DMUON_REGEN=1 rewrites
# the goldens instead of comparing.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
g=$DM_SRCDIR/tests/golden/help
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dmuon-help.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
v=$($DMUON --version)
case "$v" in
*"CUDA      no"* | *"NCCL      no"* | *"MPI       no"*) echo "1..0 # SKIP the goldens are the full build's (CUDA, NCCL, MPI)"; exit 0 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
norm() { sed -e "s|${DM_PKGDATADIR:?}|PKGDATADIR|g" -e "s|${DM_PKGLIBDIR:?}|PKGLIBDIR|g" -e "s|$DM_SRCDIR|SRCDIR|g"; }
commands=$($DMUON --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\)  *.*/\1/p')
mkdir -p "$tmp/h"
[ -n "$DMUON_REGEN" ] && mkdir -p "$g"
for c in $commands "bench kernels" "bench work" "bench comm"; do
    name=$(printf '%s' "$c" | tr ' ' '-')
    # shellcheck disable=SC2086
    $DMUON $c --help 2>&1 | norm >"$tmp/h/$name.txt"
    [ -n "$DMUON_REGEN" ] && cp "$tmp/h/$name.txt" "$g/$name.txt"
    tap_n=$((tap_n + 1))
    if diff -u "$g/$name.txt" "$tmp/h/$name.txt" >"$tmp/diff" 2>&1; then echo "ok $tap_n - dmuon $c --help matches its golden"
    else echo "not ok $tap_n - dmuon $c --help matches its golden"; sed 's/^/#   /' "$tmp/diff" | head -30; tap_fail=$((tap_fail + 1)); fi
done
tap_end
