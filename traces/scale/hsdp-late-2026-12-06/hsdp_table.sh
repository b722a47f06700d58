#!/bin/sh
# step and CPU wall per model x GPUs: base (before), new (after), objective experiment (exp)
B=$1; N=$2; E=$3
printf '%-22s %5s | %12s %7s %7s | %12s %7s %7s | %12s %7s\n' model gpus base_ms wall_s MB new_ms wall_s MB exp_ms wall_s
for f in $N/*.txt; do n=$(basename $f .txt); g=${n##*-}; m=${n%-*}
  st() { grep "^step time" $1 2>/dev/null | awk '{print $3}'; }
  tm() { sed -n 's/^TIME \([0-9.]*\) \([0-9]*\)$/\1 \2/p' $1 2>/dev/null | awk '{printf "%s %.0f", $1, $2/1024}'; }
  set -- $(tm $B/$n.err); bw=${1:--}; bm=${2:--}
  set -- $(tm $N/$n.err); nw=$1; nm=$2
  set -- $(tm $E/$n.err); ew=${1:--}
  printf '%-22s %5s | %12s %7s %7s | %12s %7s %7s | %12s %7s\n' $m $g "$(st $B/$n.txt)" $bw $bm "$(st $N/$n.txt)" $nw $nm "$(st $E/$n.txt)" $ew
done | sort -k2,2n -k1,1
