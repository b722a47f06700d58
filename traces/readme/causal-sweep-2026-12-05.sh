#!/bin/bash
# --attention causal over every model and odd token/seq-len pairs: exit codes, no crash
cd /work/main
models=$(ls models/*.json models/extra/*.json tests/data/hf/*.json tests/data/arch_cpu.json)
for m in $models; do
  for ts in "4096 4096" "4096 1024" "3000 1000" "8192 2048" "768 768" "16 8"; do
    set -- $ts
    for s in dmuon adamw; do
      out=$(timeout 120 ./dmuon sim --model $m --strategy $s --gpus 4 --tokens $1 --seq-len $2 --attention causal --quiet 2>&1); rc=$?
      w=$(timeout 120 ./dmuon sim --model $m --strategy $s --gpus 4 --tokens $1 --seq-len $2 --quiet 2>&1 | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p')
      c=$(echo "$out" | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p')
      echo "rc=$rc $m $s $1/$2 causal=$c whole=$w | $(echo "$out" | tail -1 | cut -c1-160)"
    done
  done
done
