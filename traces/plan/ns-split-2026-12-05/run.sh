#!/bin/sh
# ns-split-2026-12-05: dmuon's step against adamw's with and without --ns-split P (issue 16 item 2),
# simulated, A800 preset, 4096 tokens, the committed H200 tables projected; WALL-OSS and the
# issue's Qwen2.5-7B at 32..256 GPUs. The last column: whether --balance auto kept the split
# plan against the one without splits (both simulated), and the other's step. Run from the repository root: sh traces/plan/ns-split-2026-12-05/run.sh
D=${DMUON:-./dmuon}
for m in models/wall-oss-flow.json qwen2.5-7b; do
  for g in 32 64 128 256; do
    a=$($D sim -m $m -g $g --strategy adamw --tokens 4096 --quiet | awk '{print $(NF-1)}')
    for P in 0 2 4 8; do
      out=$($D sim -m $m -g $g --strategy dmuon --tokens 4096 --ns-split $P)
      s=$(printf '%s\n' "$out" | awk '/^step time/ {print $3}')
      sp=$(printf '%s\n' "$out" | sed -n "s/.*--ns-split's \(split matrices [a-z ]*\) (\(with[a-z]*\) them: \([0-9.]*\) ms).*/\1, \2 them \3 ms/p")
      ns=$(printf '%s\n' "$out" | sed -n 's/^NS load per rank.*max \([0-9.]*\) ms.*/\1/p')
      printf '%-28s %4d  P=%d  adamw %9.3f  dmuon %9.3f  %+6.2f%%  ns_max %7.3f  %s\n' \
        "$m" "$g" "$P" "$a" "$s" "$(echo "$s $a" | awk '{print ($1 / $2 - 1) * 100}')" "$ns" "${sp:-nothing split}"
    done
  done
done
