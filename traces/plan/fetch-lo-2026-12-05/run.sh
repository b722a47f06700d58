#!/bin/sh
# fetch-lo-2026-12-05: dmuon's forward all-gathers (the AdamW role's shards) on comm-lo beside the
# Muon broadcasts on comm-hi (sched/build.c emit_fetch). Simulated, A800 preset, 4096 tokens,
# the committed H200 tables projected. OLD: a dmuon binary built before the change (1831848),
# NEW: after; adamw's step for reference. Every bundled model at 8..256 GPUs; the last columns
# are dmuon's step over adamw's before and after.
# Run from the repository root: OLD=/tmp/dmuon-old NEW=./dmuon sh traces/plan/fetch-lo-2026-12-05/run.sh
OLD=${OLD:?a dmuon binary of 1831848}; NEW=${NEW:-./dmuon}
printf '%-22s %5s %11s %11s %11s %9s %9s\n' model gpus adamw_ms dmuon_old dmuon_new old_over new_over
for m in models/*.json; do
  for g in 8 32 128 256; do
    a=$($NEW sim -m $m -g $g --strategy adamw --tokens 4096 --quiet 2>/dev/null | sed -n "s/.*: step \([0-9.]*\) ms.*/\1/p")
    o=$($OLD sim -m $m -g $g --strategy dmuon --tokens 4096 --quiet 2>/dev/null | sed -n "s/.*: step \([0-9.]*\) ms.*/\1/p")
    nl=$($NEW sim -m $m -g $g --strategy dmuon --tokens 4096 --quiet 2>/dev/null)
    n=$(printf '%s\n' "$nl" | sed -n "s/.*: step \([0-9.]*\) ms.*/\1/p")
    fit=$(printf '%s\n' "$nl" | grep -q 'does not fit' && echo '  (dmuon does not fit in GPU memory)')
    printf '%-22s %5d %11s %11s %11s %9s %9s%s\n' "$(basename $m .json)" $g "$a" "$o" "$n" \
      "$(echo "$o $a" | awk '$2 > 0 {printf "%+.2f%%", ($1 / $2 - 1) * 100}')" \
      "$(echo "$n $a" | awk '$2 > 0 {printf "%+.2f%%", ($1 / $2 - 1) * 100}')" "$fit"
  done
done
