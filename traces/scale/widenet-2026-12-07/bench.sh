#!/bin/bash
# wall seconds and peak memory of two binaries, runs alternated: ./bench.sh BASE NEW RUNS
# (the plans whose collectives span thousands of GPUs: HSDP's Muon pairs over all ranks beside the
# shard groups' collectives, the flat plans' rings, a hierarchical plan)
B=$1; N=$2; R=${3:-2}
for args in "-m moonlight-16b-a3b -g 4096 --hsdp --zero 3" "-m moonlight-16b-a3b -g 4096 --hsdp" \
            "-m wall-oss-flow -g 4096 --hsdp" "-m qwen2.5-7b -g 4096" "-m qwen2.5-72b -g 16384" \
            "-m deepseek-v4-pro -g 4096 --hsdp" "-m qwen2.5-7b -g 1024 --hierarchical"; do
  for i in $(seq 1 $R); do for b in $B $N; do
    /usr/bin/time -f "%e s %U user %M KB" -o /tmp/ab.time $b sim $args > /tmp/ab.txt 2>/dev/null
    echo "$args | $(basename $b) | run $i | $(tail -1 /tmp/ab.time) | $(grep -o 'step time *[0-9.]* ms' /tmp/ab.txt)"
  done; done
done
