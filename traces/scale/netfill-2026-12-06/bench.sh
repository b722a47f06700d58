#!/bin/sh
# sim/net.c's fill: the network's rate-update seconds (the speed line) of two binaries, three
# runs each, and whether their reports differ (the speed and plan lines aside)
#   ./bench.sh BASE NEW
B=$1; N=$2
for args in "-m qwen2.5-72b -g 4096 --zero 3" "-m llama-3.1-8b -g 4096" "-m deepseek-v3 -g 1024" \
            "-m moonlight-16b-a3b -g 4096 --hsdp --zero 3"; do
  for i in 1 2 3; do for b in $B $N; do
    $b sim $args > /tmp/nf-$i-$(basename $b).txt
    echo "$args | $(basename $b) | run $i | $(grep -o 'rate updates in [0-9.]* s wall' /tmp/nf-$i-$(basename $b).txt)"
  done; done
  diff <(grep -v '^speed\|^  plan  ' /tmp/nf-1-$(basename $B).txt) <(grep -v '^speed\|^  plan  ' /tmp/nf-1-$(basename $N).txt) > /dev/null \
    && echo "$args | reports identical" || echo "$args | REPORTS DIFFER"
done
