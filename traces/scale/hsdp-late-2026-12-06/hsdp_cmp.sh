#!/bin/sh
# every bundled model under dmuon --hsdp at several GPU counts: the whole report, for diffing
D=$1; O=$2; mkdir -p $O
for g in 256 1024 4096; do for f in models/*.json; do m=$(basename $f .json)
  /usr/bin/time -f "TIME %e %M" $D sim -m $m -g $g --hsdp > $O/$m-$g.txt 2> $O/$m-$g.err
  echo "$m $g rc=$? $(tail -1 $O/$m-$g.err)"
done; done
