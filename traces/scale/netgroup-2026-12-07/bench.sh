#!/bin/bash
# the network's rate-update seconds (the speed line) of two binaries, runs alternated, and the
# whole run's wall seconds and peak memory: ./bench.sh BASE NEW RUNS
B=$1; N=$2; R=${3:-3}
for args in "-m moonlight-16b-a3b -g 4096 --hsdp --zero 3" "-m moonlight-16b-a3b -g 4096 --hsdp --zero 3 --hsdp-muon world --balance milp" \
            "-m qwen2.5-72b -g 4096 --zero 3" "-m llama-3.1-8b -g 4096" "-m deepseek-v3 -g 1024" "-m wall-oss-flow -g 4096 --hsdp"; do
  for i in $(seq 1 $R); do for b in $B $N; do
    /usr/bin/time -f "%e s %M KB" $b sim $args > /tmp/nb.txt 2> /tmp/nb.err
    echo "$args | $(basename $b) | run $i | $(grep -o 'rate updates in [0-9.]* s wall' /tmp/nb.txt) | whole run $(tail -1 /tmp/nb.err)"
  done; done
done
