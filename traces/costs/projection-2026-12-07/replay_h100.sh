#!/bin/sh
# (run from the repository root, or REPO=path)
# replay the six H100 tables of 2026-12-07 with binary $1 into $2; prints the pooled summary
# CAL: more validate options, e.g. CAL="--calibration FILE" (unset: none, the h100 preset alone)
B=$1; O=$2; R=${REPO:-$(pwd)}
mkdir -p $O
i=0
for d in h100-unseen-2026-12-07 h100-unseen2-2026-12-07 h100-unseen2-2026-12-07/tok8192 h100-unseen2-2026-12-07/tok8192b h100-core-2026-12-07/tok2048 h100-core-2026-12-07/tok1024-8192; do
  i=$((i+1)); w=$O/w$i; rm -rf $w; mkdir -p $w/validate
  tar xJf $R/traces/validate/$d/validate-cases.tar.xz -C $w
  cp $R/traces/validate/$d/validate.csv $w/validate/
  (cd $w && $B validate --cluster h100 $CAL --replay validate/validate.csv --as-run --out $w/out > $w/replay.txt 2>&1)
done
