#!/bin/bash
# flag sweep: representative models x flag combinations x odd GPU counts; flags nonzero exits, nan/inf, crashes
D=${1:-./dmuon}; O=${2:-/tmp/sweep2/out}; mkdir -p $O
for m in qwen2.5-1.5b llama-3.1-8b qwen2.5-vl-3b wall-oss-flow pi0 moonlight-16b-a3b-6l wan2.2-ti2v-5b models/extra/pythia-1b.json; do
  for flags in "--hsdp" "--hsdp --zero 3" "--hierarchical" "--zero 3" "--ns-split auto" "--steps 2" "--overlap none" "--balance milp" "--hsdp --hsdp-muon world" "--strategy muon-fsdp-tuned" "--strategy muon-rr --zero 3"; do
    for g in 2 7 24 96 200 1000; do
      for c in a800 h100; do
        [ $c != a800 ] && [ $g != 24 ] && continue
        n=$(echo "$(basename $m .json) $flags $g $c" | tr ' /' '__')
        out=$O/$n.txt
        /usr/bin/time -f "%e %M" -o $O/$n.time timeout 120 $D sim -m $m -g $g -c $c $flags > $out 2>&1; rc=$?
        bad=$(grep -ci "\bnan\b\|\binf\b\|error\|warning" $out)
        st=$(grep -o "step time *[0-9.]* ms" $out | grep -o "[0-9.]* ms")
        echo "$(basename $m .json) | $flags | $g | $c | rc=$rc step=$st flagged=$bad time=$(cat $O/$n.time | tail -1)"
      done
    done
  done
done
