#!/bin/sh
# (run from the repository root, or REPO=path; replays every stored H100 table: prices as run, measured as stored)
# replay every stored H100 validation table with binary $1 into $2 (cluster h100, as run)
# CAL: more validate options, e.g. CAL="--calibration FILE" (unset: none, the h100 preset alone)
B=$1; O=$2; R=${REPO:-$(pwd)}
mkdir -p $O; i=0
for f in $(cd $R && find traces -path "*h100*" -name validate.csv | sort); do
  d=$R/$(dirname $f)
  t=; for c in $d/validate-cases.tar.xz $d/../validate-cases.tar.xz $d/../../validate-cases.tar.xz; do [ -z "$t" ] && [ -f $c ] && t=$c; done
  i=$((i+1)); w=$O/w$i; rm -rf $w; mkdir -p $w
  tar xJf $t -C $w; mkdir -p $w/validate; cp $R/$f $w/validate/validate.csv
  echo "$f" > $w/source
  (cd $w && $B validate --cluster h100 $CAL --replay validate/validate.csv --as-run --out $w/out > $w/replay.txt 2>&1)
done
