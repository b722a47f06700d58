#!/bin/sh
# fuzz/fuzz.sh: build the libFuzzer harnesses (fuzz/fuzz_*.c) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, outside the Automake build, and run them. `make fuzz` and
# `make fuzz-build` call it with the build's flags in the environment:
#   FUZZ_SRCDIR, FUZZ_BUILDDIR  source and build roots (absolute)
#   FUZZ_CC                     clang (14 or later, with libFuzzer: libclang-rt-dev on Debian)
#   FUZZ_CPPFLAGS, FUZZ_LIBS    the build's preprocessor flags and libraries (CUDA, NCCL, MPI included)
#   FUZZ_SOURCES                libdmuon_a_SOURCES (every library source, compiled instrumented)
#   FUZZ_SECONDS                run: seconds per harness (default 30)
#   FUZZ_RUNS                   run: executions per harness instead of a time limit
#   FUZZ_ONLY                   run: space-separated harness names (default: all)
# Usage: fuzz.sh build | run | list
# Each harness NAME runs on a scratch copy of its seeds, fuzz/corpus/NAME, with the dictionary
# fuzz/NAME.dict when there is one, growing the corpus in fuzz/work/NAME (build tree). A crash
# or failed check leaves the input in fuzz/work/NAME-crash-* and makes the run fail.
set -u
cmd=${1:-run}
src=${FUZZ_SRCDIR:?set by make fuzz}
build=${FUZZ_BUILDDIR:-.}
cc=${FUZZ_CC:-clang}
out=$build/fuzz
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"

harnesses() {
    for f in "$src"/fuzz/fuzz_*.c; do
        n=$(basename "$f" .c)
        case $n in fuzz_util|fuzz_model_check) continue ;; esac
        echo "${n#fuzz_}"
    done
}

build() {
    command -v "$cc" >/dev/null 2>&1 || { echo "fuzz: $cc not found (make fuzz needs clang with libFuzzer)"; return 1; }
    mkdir -p "$out/obj" "$out/bin" || return 1
    eval "set -- $FUZZ_CPPFLAGS"
    # Compile the library instrumented (coverage for libFuzzer, sanitizers); only what changed
    # (a header change in core/, kernels/ or cli/ recompiles everything).
    lib=$out/obj/libdmuon-fuzz.a
    objs=
    changed=0
    for s in $FUZZ_SOURCES; do
        case $s in *.c) ;; *) continue ;; esac
        o=$out/obj/$(echo "$s" | tr / _ | sed 's/\.c$/.o/')
        objs="$objs $o"
        if [ ! -f "$o" ] || [ -n "$(find "$src/$s" "$src/core" "$src/kernels" "$src/cli" -name '*.[ch]' -newer "$o" 2>/dev/null | head -1)" ]; then
            echo "  CC (fuzz) $s"
            "$cc" -std=gnu11 -w -fsanitize=fuzzer-no-link $san "$@" -c "$src/$s" -o "$o" || return 1
            changed=1
        fi
    done
    if [ $changed = 1 ] || [ ! -f "$lib" ]; then
        rm -f "$lib"
        # shellcheck disable=SC2086
        ar rcs "$lib" $objs || return 1
    fi
    for h in $(harnesses); do
        b=$out/bin/fuzz_$h
        if [ -f "$b" ] && [ -z "$(find "$lib" "$src/fuzz" -name '*.[cha]' -newer "$b" 2>/dev/null | head -1)" ]; then
            continue
        fi
        echo "  CCLD (fuzz) fuzz/bin/fuzz_$h"
        # shellcheck disable=SC2086
        "$cc" -std=gnu11 -Wall -Wextra -fsanitize=fuzzer $san "$@" -I"$src/fuzz" -o "$b.new" \
            "$src/fuzz/fuzz_$h.c" "$src/fuzz/fuzz_util.c" "$src/fuzz/fuzz_model_check.c" "$lib" \
            $FUZZ_LIBS && mv -f "$b.new" "$b" || return 1
    done
}

run_one() {
    h=$1
    work=$out/work/$h
    mkdir -p "$work" || return 1
    [ -d "$src/fuzz/corpus/$h" ] && cp -n "$src/fuzz/corpus/$h"/* "$work"/ 2>/dev/null
    set -- -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work-"
    if [ -n "${FUZZ_RUNS:-}" ]; then set -- "$@" -runs="$FUZZ_RUNS"
    else set -- "$@" -max_total_time="${FUZZ_SECONDS:-30}"; fi
    [ -f "$src/fuzz/$h.dict" ] && set -- "$@" -dict="$src/fuzz/$h.dict"
    log=$out/work/$h.log
    "$out/bin/fuzz_$h" "$@" "$work" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    units=$(ls "$work" | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz_$h: ${execs:-?} executions, corpus $units inputs, no findings"
    else
        echo "fuzz_$h: FAILED after ${execs:-?} executions (exit $rc); log $log:"
        grep -E 'ERROR|SUMMARY|fuzz check failed|runtime error|Test unit written' "$log" | head -10
    fi
    return $rc
}

case $cmd in
list) harnesses ;;
build) build ;;
run)
    build || exit 1
    fails=0
    for h in ${FUZZ_ONLY:-$(harnesses)}; do run_one "$h" || fails=$((fails + 1)); done
    [ $fails -eq 0 ] || { echo "fuzz: $fails harness(es) found problems"; exit 1; }
    ;;
*) echo "usage: fuzz.sh build|run|list" >&2; exit 2 ;;
esac
