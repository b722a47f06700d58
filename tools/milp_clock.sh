#!/bin/bash
# tools/milp_clock.sh: the MILP search clock's calibration sweep (sched/assign.c, sc_rate): every
# bundled model at the given GPU counts under `plan --balance milp` with DM_MILP_CLOCK=1, one
# line per (model, GPUs) of the clock's phase lines (wall beside charged time, units per kind)
# and the solver status, joined by '|'. Summarize with tools/milp_clock.py.
#   tools/milp_clock.sh OUT GPUS...        (e.g. tools/milp_clock.sh /tmp/clock.txt 8 64 256 1024)
#   DMUON=path MILP_TIME=S                 the binary (default ./dmuon), the limit (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
shift
[ $# -gt 0 ] || { echo "usage: tools/milp_clock.sh OUT GPUS..." >&2; exit 2; }
D=${DMUON:-./dmuon}
tmp=$out.tmp
: > "$tmp"
for f in models/*.json; do
    m=$(basename "$f" .json)
    for g in "$@"; do
        printf 'milp_clock: %s %s\r' "$m" "$g" >&2
        r=$(DM_MILP_CLOCK=1 "$D" plan -m "$m" -g "$g" --balance milp --milp-time "${MILP_TIME:-1}" 2>&1 |
            grep -E "^milp-clock|^milp-lp|^milp-build|^solver" | tr '\n' '|')
        echo "$m $g $r" >> "$tmp"
    done
done
mv "$tmp" "$out"
echo "milp_clock: wrote $out" >&2
