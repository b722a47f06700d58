#!/bin/sh
# --hsdp at 1024 and 4096 GPUs: /usr/bin/time of `dmuon sim --hsdp --quiet` per model (this 2-core machine)
for m in qwen2.5-7b llama-3.1-8b wall-oss-flow pi0 moonlight-16b-a3b qwen2.5-72b; do
  for g in 1024 4096; do
    r=$( { /usr/bin/time -f 'TIME %e %U %S %M' ./dmuon sim -m $m -g $g --hsdp --quiet > /dev/null; } 2>&1 | grep TIME)
    set -- $r
    printf '%-20s %5d  wall %6.2f s  cpu %6.2f s  rss %5d MB\n' $m $g $2 $(echo "$3 + $4" | bc) $(( $5 / 1024 ))
  done
done
