#!/bin/bash
# sanity sweep: every model x strategy x odd GPU counts x clusters; flags nonzero exits, nan/inf, crashes
D=${1:-./dmuon}; O=${2:-/tmp/sweep/out}; mkdir -p $O   # run from the repository root: ./run.sh [DMUON] [OUTDIR]
for f in models/*.json models/extra/*.json; do m=$(basename $f .json)
  for s in adamw muon-ddp muon-fsdp muon-rr dmuon muon-ddp-tuned; do
    for g in 1 3 12 100; do
      for c in a800 h100 b200; do
        [ $c != a800 ] && [ $g != 12 ] && continue
        out=$O/$m-$s-$g-$c.txt
        timeout 120 $D sim -m $f -g $g -c $c --strategy $s > $out 2>&1; rc=$?
        bad=$(grep -ci "\bnan\b\|\binf\b\|error" $out)
        st=$(grep -o "step time *[0-9.]* ms" $out | grep -o "[0-9.]* ms")
        echo "$m $s $g $c rc=$rc step=$st flagged=$bad"
      done
    done
  done
done
