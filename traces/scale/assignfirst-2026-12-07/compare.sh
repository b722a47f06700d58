#!/bin/bash
# the reports of two binaries under --balance auto (the default), the speed and plan lines aside; a
# case that differs is run again on BASE to see whether BASE varies itself (the MILP's time limit)
#   ./compare.sh BASE NEW OUTDIR   (this folder's change; also ../widenet-2026-12-07)
B=$1; N=$2; O=$3; mkdir -p $O
cases=()
for m in qwen2.5-1.5b llama-3.2-3b qwen2.5-7b wall-oss-flow pi0 moonlight-16b-a3b deepseek-v3; do
  for g in 8 64 256; do
    cases+=("-m $m -g $g" "-m $m -g $g --zero 3" "-m $m -g $g --hsdp" "-m $m -g $g --hierarchical")
  done
done
cases+=("-m moonlight-16b-a3b -g 4096 --hsdp --zero 3" "-m deepseek-v3 -g 1024 --hsdp" "-m wall-oss-flow -g 1024 --hsdp" "-m qwen2.5-7b -g 1024 --ns-split auto")
norm() { grep -v '^speed\|^  plan  ' "$1" | sed -E 's#/[^ ,()]*/(models|traces)/#DIR/\1/#g'; }
i=0; same=0; diff=0
for a in "${cases[@]}"; do
  i=$((i+1))
  /usr/bin/time -f %e -o $O/$i-base.time $B sim $a > $O/$i-base.txt 2>/dev/null; tb=$(tail -1 $O/$i-base.time)
  /usr/bin/time -f %e -o $O/$i-new.time $N sim $a > $O/$i-new.txt 2>/dev/null; tn=$(tail -1 $O/$i-new.time)
  if diff <(norm $O/$i-base.txt) <(norm $O/$i-new.txt) > /dev/null; then same=$((same+1)); r=identical
  else
    $B sim $a > $O/$i-base2.txt 2>/dev/null
    if diff <(norm $O/$i-base.txt) <(norm $O/$i-base2.txt) > /dev/null; then r=DIFFER; diff=$((diff+1)); else r="differ (base varies too)"; same=$((same+1)); fi
  fi
  echo "$i | $a | base $tb s | new $tn s | $r"
done
echo "$same identical or varying alike, $diff differ"
