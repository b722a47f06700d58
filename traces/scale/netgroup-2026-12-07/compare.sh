#!/bin/bash
# sim/net.c's grouped fill heap: the reports of two binaries on the same cases, the speed and plan
# lines aside (deterministic balances: --balance lpt; the MILP's time limit makes its plans vary
# between runs), and the network's seconds (speed line) of each
#   ./compare.sh BASE NEW OUTDIR
B=$1; N=$2; O=$3; mkdir -p $O
cases=()
for m in llama-3.2-3b qwen2.5-7b wall-oss-flow moonlight-16b-a3b deepseek-v3 qwen2.5-72b; do
  for g in 8 64 256 1024; do
    cases+=("-m $m -g $g --balance lpt" "-m $m -g $g --balance lpt --zero 3" "-m $m -g $g --balance lpt --hsdp"
            "-m $m -g $g --balance lpt --hierarchical" "-m $m -g $g --strategy muon-fsdp")
  done
done
cases+=("-m moonlight-16b-a3b -g 4096 --hsdp --zero 3" "-m qwen2.5-72b -g 4096 --zero 3" "-m llama-3.1-8b -g 4096"
        "-m deepseek-v3 -g 1024" "-m wall-oss-flow -g 4096 --hsdp" "-m qwen2.5-7b -g 256 --calibration traces/calib/h200.calib -c h200")
# a report without its speed and plan lines, its paths to the data (each binary reads its own tree's) as DIR
norm() { grep -v '^speed\|^  plan  ' "$1" | sed -E 's#/[^ ,()]*/(models|traces)/#DIR/\1/#g'; }
i=0; same=0; diff=0
for a in "${cases[@]}"; do
  i=$((i+1))
  $B sim $a > $O/$i-base.txt 2>&1; $N sim $a > $O/$i-new.txt 2>&1
  tb=$(grep -o 'rate updates in [0-9.]* s wall' $O/$i-base.txt | grep -o '[0-9.]* s'); tn=$(grep -o 'rate updates in [0-9.]* s wall' $O/$i-new.txt | grep -o '[0-9.]* s')
  if diff <(norm $O/$i-base.txt) <(norm $O/$i-new.txt) > /dev/null; then same=$((same+1)); r=identical; else diff=$((diff+1)); r=DIFFER; fi
  echo "$i | $a | base $tb | new $tn | $r"
done
echo "$same identical, $diff differ"
