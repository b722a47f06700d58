#!/bin/sh
# sweep.sh DMUON: every bundled and extra model under every strategy at GPU counts no study here
# uses (3, 6, 12, 100, 257: not powers of two, not whole nodes, a prime past 256), `sim --quiet`
# on the default A800 cluster, one run each: the exit status, the step line, the command's time.
# A line per run: model strategy gpus rc seconds step_ms (or the first error line).
D=${1:?usage: sweep.sh DMUON}
cd "$(dirname "$0")/../../.."
for m in models/*.json models/extra/*.json; do
    for s in dmuon adamw muon-ddp muon-fsdp muon-rr; do
        for g in 3 6 12 100 257; do
            t0=$(date +%s.%N)
            out=$("$D" sim -m "$m" -g $g --strategy $s --quiet 2>&1)
            rc=$?
            t1=$(date +%s.%N)
            step=$(printf '%s\n' "$out" | sed -n 's/.*: step \([0-9.e+-]*\) ms.*/\1/p' | head -1)
            [ -n "$step" ] || step="ERR: $(printf '%s\n' "$out" | head -1)"
            printf '%s %s %d %d %.2f %s\n' "$(basename "$m" .json)" $s $g $rc "$(echo "$t1 - $t0" | bc)" "$step"
        done
    done
done
