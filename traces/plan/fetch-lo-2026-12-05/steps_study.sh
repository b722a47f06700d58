#!/bin/sh
# The README's steps study (traces/plan/steps_study.txt) re-run after the fetch change: K steps back
# to back (sim --steps 3) against one step, A800 preset, 4096 tokens per GPU, the default balance;
# adamw against adamw, one step against one step, and the ns-split option beside the others.
# Run from the repository root: sh traces/plan/fetch-lo-2026-12-05/steps_study.sh > steps_study.txt
echo "# ./dmuon sim --model M --gpus G --cluster a800 ARGS [--steps 3]; $(git rev-parse --short HEAD)"
for m in wall-oss-flow qwen2.5-7b llama-3.2-3b moonlight-16b-a3b; do
  for g in 32 256; do
    for a in "--strategy adamw" "--strategy dmuon" "--strategy dmuon --ns-under-backward stream" \
             "--strategy dmuon --hsdp" "--strategy dmuon --ns-split auto"; do
      o=$(./dmuon sim --model $m --gpus $g --cluster a800 $a --quiet | sed -n 's/.*: step \([0-9.]*\) ms.*/\1/p')
      k=$(./dmuon sim --model $m --gpus $g --cluster a800 $a --steps 3 --quiet | sed -n 's/.*: step \([0-9.]*\) ms.*/\1/p')
      echo "$m $g $a: one step $o ms, steady (3 steps) $k ms, $(echo "$k $o" | awk '{printf "%+.3f ms", $1 - $2}')"
    done
  done
done
