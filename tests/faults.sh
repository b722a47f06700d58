#!/bin/sh
# faults.sh: allocation fault injection over whole commands (DM_FAIL_ALLOC=N, core/dm_error.h):
# model show/import, plan -o, sim --trace/--csv, sim --program. For each command, N sweeps the
# first allocations one by one, then every ~10% further, until a run no longer reaches N (the
# hook prints "dmuon: injected allocation failure N" when it fires). Every run that reaches its
# failure must exit with status 1 (not a crash, not a sanitizer report: under the sanitizer
# build ASan and LeakSanitizer exit with 98/99 here), say "out of memory", and leave no output
# file, neither under the final name nor as a temporary. A command whose plain run fails (not
# in this build) is skipped.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=99"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=98"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:exitcode=97"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dmuon-faults.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/work" && cd "$tmp/work" || exit 1
DENSE=${DM_FAULTS_DENSE:-30}

# sweep NAME OUTPUTS -- COMMAND...   (OUTPUTS: space-separated files the command writes)
sweep() {
    name=$1 outs=$2
    shift 3
    rm -f ./* 2>/dev/null
    if ! "$@" >/dev/null 2>plain.err; then
        tap_n=$((tap_n + 1))
        echo "ok $tap_n - $name # SKIP plain run fails: $(head -1 plain.err)"
        return
    fi
    for o in $outs; do [ -f "$o" ] || echo "# $name: plain run did not write $o"; done
    n=1 runs=0 bad=0 last=0
    while :; do
        rm -f ./*
        DM_FAIL_ALLOC=$n "$@" >/dev/null 2>err
        rc=$?
        grep -q "injected allocation failure" err || break
        runs=$((runs + 1)) last=$n
        why=
        if [ $rc -ne 1 ]; then why="exit status $rc"
        elif ! grep -q "out of memory" err; then why="no 'out of memory' message"
        else
            for o in $outs; do [ -e "$o" ] && why="left $o"; done
            ls ./*.tmp.* >/dev/null 2>&1 && why="left a temporary file"
        fi
        if [ -n "$why" ]; then
            bad=$((bad + 1))
            if [ $bad -le 5 ]; then
                echo "# $name: DM_FAIL_ALLOC=$n: $why"
                grep -v "injected allocation failure" err | head -8 | sed 's/^/#   /'
            fi
        fi
        if [ $n -lt "$DENSE" ]; then n=$((n + 1)); else n=$((n + n / 10 + 1)); fi
    done
    tap_n=$((tap_n + 1))
    if [ $bad -eq 0 ] && [ $runs -gt 0 ]; then
        echo "ok $tap_n - $name: $runs injected failures (N up to $last), each exit 1, out of memory, no file"
    else
        echo "not ok $tap_n - $name: $bad of $runs injected failures handled badly"
        tap_fail=$((tap_fail + 1))
    fi
}

S=${DM_SRCDIR:-.}
sweep "model show" "" -- "$DMUON" model show qwen2.5-vl-3b
sweep "model show --json" "" -- "$DMUON" model show deepseek-v3 --json
sweep "model import --out" "m.json" -- "$DMUON" model import "$S/tests/data/hf/deepseek-v3.json" --out m.json
sweep "plan -o" "p.json" -- "$DMUON" plan --model qwen2.5-7b --gpus 8 -o p.json
sweep "plan --balance milp" "p.json" -- "$DMUON" plan --model llama-3.2-3b --gpus 4 --balance milp -o p.json
sweep "sim --trace --csv" "t.json t.csv" -- "$DMUON" sim --model qwen2.5-7b --gpus 16 --trace t.json --csv t.csv
sweep "sim --strategy adamw" "t.csv" -- "$DMUON" sim --model llama-3.2-3b --gpus 8 --strategy adamw --csv t.csv
if "$DMUON" plan --model qwen2.5-3b --gpus 4 -o "$tmp/saved.json" >/dev/null 2>&1; then
    sweep "sim --program" "t.csv" -- "$DMUON" sim --program "$tmp/saved.json" --csv t.csv
fi
tap_end
