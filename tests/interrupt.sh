#!/bin/sh
# interrupt.sh: interrupt a long `dmuon sim --trace` while it writes its trace, and check that
# nothing ever appears under the final name: SIGINT and SIGTERM remove the temporary file too
# (core/outfile.c's handler) and the command dies of the signal; SIGKILL leaves only
# FILE.tmp.PID.XXXXXXXX. A run that finishes before its temporary file is seen counts as a skip.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dmuon-interrupt.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
# A non-interactive shell starts background commands with SIGINT ignored; give it back.
if env --default-signal=INT true 2>/dev/null; then RESET="env --default-signal=INT"; else RESET=; set -m; fi

interrupt() { # interrupt SIGNAL NUMBER
    rm -f t.json t.json.tmp.*
    $RESET "$DMUON" sim --model deepseek-v3 --gpus 32 --trace t.json --quiet >out 2>err &
    pid=$!
    i=0
    while [ $i -lt 3000 ] && [ -z "$(ls t.json.tmp.$pid.* 2>/dev/null)" ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.02
        i=$((i + 1))
    done
    if [ -z "$(ls t.json.tmp.$pid.* 2>/dev/null)" ]; then
        wait "$pid"
        tap_n=$((tap_n + 1))
        echo "ok $tap_n - SIG$1 # SKIP the run ended before its temporary file was seen"
        return
    fi
    kill "-$1" "$pid"
    wait "$pid"
    st=$?
    is "SIG$1 while the trace is written: the command dies of the signal" "$st" $((128 + $2))
    is "SIG$1: nothing under the final name" "$(ls t.json 2>/dev/null)" ""
    if [ "$1" = KILL ]; then
        is "SIGKILL: only the temporary file remains" "$(ls t.json.tmp.* 2>/dev/null | sed 's/\.[A-Za-z0-9]\{8\}$/.X/')" "t.json.tmp.$pid.X"
    else
        is "SIG$1: the temporary file is removed" "$(ls t.json.tmp.* 2>/dev/null)" ""
    fi
}

interrupt INT 2
interrupt TERM 15
interrupt KILL 9
tap_end
