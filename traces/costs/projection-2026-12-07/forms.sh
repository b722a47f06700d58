#!/bin/sh
# forms.sh WT: the five ways of adding a row's two parts (forms.diff, DM_PROJ_MODE 0-4) on the
# H100's rows and on the stored H100 validations. WT: a work tree of the parent commit with
# forms.diff applied and built (dmuon, libdmuon.a). Run from the repository root.
WT=$1; D=traces/costs/projection-2026-12-07; T=${TMPDIR:-/tmp}/forms.$$
mkdir -p $T
gcc -O2 -Icore traces/device/h100rows-2026-12-05/cmp_h100.c $WT/libdmuon.a -lgsl -lgslcblas -llpsolve55 -lm -lpthread -ldl -o $T/cmp
for m in 0 1 2 3 4; do
  echo "## mode $m"
  DM_PROJ_MODE=$m $T/cmp traces/costs/h200.csv,traces/costs/h200-work.csv traces/device/h100rows-2026-12-05/h100-work.csv > $T/rows-$m.txt
  awk '{k=$1 "-" $NF; r=$7; p=$12; n[k]++; tp[k]+=p; tr[k]+=r; l=log(p/r); s[k]+=l; a[k]+=(l<0?-l:l)}
       END{for(k in n) printf "rows %-10s n %3d  time-weighted projected/measured %.3f  mean ln %+.3f  mean |ln| %.3f\n",k,n[k],tp[k]/tr[k],s[k]/n[k],a[k]/n[k]}' $T/rows-$m.txt | sort
  echo "# the 73 runs of 2026-12-07 (h100-sets-2026-12-07)"
  DM_PROJ_MODE=$m sh $D/replay_h100.sh $WT/dmuon $T/s73-$m > /dev/null 2>&1; python3 $D/summ.py $T/s73-$m
  echo "# every stored H100 table"
  DM_PROJ_MODE=$m sh $D/replay_all_h100.sh $WT/dmuon $T/all-$m > /dev/null 2>&1; python3 $D/summ.py $T/all-$m
done
rm -rf $T
