#!/bin/bash
# small plans' wall seconds, two binaries, runs alternated: ./small.sh BASE NEW RUNS
B=$1; N=$2; R=${3:-3}
for args in "-m wall-oss-flow -g 8 --hsdp" "-m deepseek-v3 -g 8" "-m pi0 -g 64 --hsdp" "-m qwen2.5-7b -g 64"; do
  for i in $(seq 1 $R); do for b in $B $N; do
    /usr/bin/time -f "%e s %M KB" -o /tmp/sm.time $b sim $args > /tmp/sm.txt 2>/dev/null
    echo "$args | $(basename $b) | run $i | $(tail -1 /tmp/sm.time) | $(grep -o 'step time *[0-9.]* ms' /tmp/sm.txt)"
  done; done
done
