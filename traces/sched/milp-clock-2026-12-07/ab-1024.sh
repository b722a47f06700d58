#!/bin/bash
# A/B: base (HEAD before the search clock) and new, back to back per model: sim at 1024 GPUs, dmuon
cd "$(dirname "$0")/../../.."
printf '%-22s %-5s %7s %7s %8s  %s\n' model build wall_s cpu_s rss_MB step_ms
for f in models/*.json; do
  m=$(basename $f .json)
  for b in base new; do
    D=./dmuon; [ $b = base ] && D=/tmp/base/dmuon
    out=$( { /usr/bin/time -f 'TIME %e %U %S %M' $D sim -m $m -g 1024 --strategy dmuon 2>/tmp/ab.err | grep -E "^step time" ; } 2>&1)
    set -- $(grep '^TIME' /tmp/ab.err | tail -1)
    printf '%-22s %-5s %7s %7.2f %8.0f  %s\n' $m $b $2 $(awk -v u=$3 -v y=$4 'BEGIN{print u+y}') $(awk -v k=$5 'BEGIN{print k/1024}') "$(echo $out | awk '{print $3}')"
  done
done
