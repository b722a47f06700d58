#!/bin/bash
# wall seconds and peak memory of two binaries, runs alternated: ./bench.sh BASE NEW RUNS
B=$1; N=$2; R=${3:-2}
for args in "-m moonlight-16b-a3b -g 4096 --hsdp --zero 3" "-m deepseek-v3 -g 1024 --hsdp" "-m kimi-k2 -g 1024 --hsdp" \
            "-m deepseek-v4-pro -g 4096 --hsdp"; do
  for i in $(seq 1 $R); do for b in $B $N; do
    /usr/bin/time -f "%e s %M KB" -o /tmp/ab.time $b sim $args > /tmp/ab.txt 2>/dev/null
    echo "$args | $(basename $b) | run $i | $(tail -1 /tmp/ab.time) | $(grep -o 'step time *[0-9.]* ms' /tmp/ab.txt)"
  done; done
done
