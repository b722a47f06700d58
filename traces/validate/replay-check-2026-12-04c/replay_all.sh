#!/bin/bash
# usage: replayall.sh CALIB OUTDIR
cd "$(dirname "$0")/../../.."  # the repository root
C=$1; O=$2; mkdir -p $O
for e in h200-16:traces/validate/h200-16/validate/validate.csv h200-17:traces/validate/h200-17/validate/validate.csv h200-19:traces/validate/h200-19/validate/validate.csv h200-20:traces/validate/h200-20/validate/validate.csv h200-21:traces/validate/h200-21/validate/validate.csv h200-22:traces/validate/h200-22/validate/validate.csv h200-22-tokens:traces/validate/h200-22/tokens-1024-8192/validate/validate.csv qwen3-6l:traces/device/moeq3-2026-12-03/logs/validate_q3.csv h200-23:traces/validate/h200-23/validate/validate.csv h200-24:traces/validate/h200-24/validate/validate.csv h200-25:traces/validate/h200-25/validate/validate.csv h200-25-16384:traces/validate/h200-25/tokens-16384/validate/validate.csv h200-26:traces/validate/h200-26/validate/validate.csv; do
  n=${e%%:*}; f=${e#*:}
  ./dmuon validate --cluster h200 --calibration $C --replay $f --out $O/$n > $O/$n.txt 2>&1
  g=$(grep "^# goal" $O/$n.txt | sed 's/.*: //')
  python3 - $O/$n/replay.csv $n "$g" <<'PY'
import csv,sys
rows=list(csv.DictReader(open(sys.argv[1])))
acc={}
for r in rows:
    ph=r['phase']
    if ph in ('step','forward','backward','optimizer','exposed-comm'):
        acc.setdefault(ph,[]).append(abs(float(r['error_pct'])))
print("%-15s %s | %s" % (sys.argv[2], sys.argv[3][:40], " ".join("%s %.2f"%(k[:4],sum(v)/len(v)) for k,v in acc.items())))
PY
done
