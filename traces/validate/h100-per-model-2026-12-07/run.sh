#!/bin/sh
# The per-model table of every H100 validation made with the current executor (2026-12-07: the
# calls after the NS-configuration fix of traces/kernels/h100-autotune-2026-12-07), replayed as run
# with this tree's ./dmuon on the h100 preset (no calibration). Run from the repository root:
#   sh traces/validate/h100-per-model-2026-12-07/run.sh OUTDIR > per-model.md
O=${1:-/tmp/h100pm}; W=$O.work; names=
mkdir -p "$O"
for f in h100-unseen-2026-12-07 h100-unseen2-2026-12-07 h100-unseen2-2026-12-07/tok8192 h100-unseen2-2026-12-07/tok8192b \
    h100-core-2026-12-07/tok2048 h100-core-2026-12-07/tok1024-8192 h100-passes-2026-12-07 h100-unseen3-2026-12-07 \
    h100-unseen3tok-2026-12-07 h100-new-2026-12-07 h100-new-2026-12-07/tok2048-8192; do
    n=$(echo "$f" | tr / -); w=$W/$n; rm -rf "$w"; mkdir -p "$w/validate"
    tar xJf "traces/validate/$f/validate-cases.tar.xz" -C "$w"; cp "traces/validate/$f/validate.csv" "$w/validate/"
    (cd "$w" && "$OLDPWD/dmuon" validate --cluster h100 --replay validate/validate.csv --as-run --out "$O/$n" > "$O/$n.txt" 2>&1)
    names="$names $n"
done
python3 tools/per_model.py "$O" $names
python3 - "$O" $names <<'PY'
import csv, os, sys
o, names = sys.argv[1], sys.argv[2:]
runs = {}
for n in names:
    for r in csv.DictReader(open(os.path.join(o, n, "replay.csv"))):
        runs.setdefault((n, r["case"]), {})[r["phase"]] = float(r["error_pct"])
runs = [v for v in runs.values() if "step" in v]
ph = ("step", "forward", "backward", "optimizer")
print(f"\n{len(runs)} runs of {len(names)} calls")
for p in ph:
    v = [r[p] for r in runs if p in r]
    print(f"{p:10s} mean {sum(v)/len(v):+.2f}%  mean |error| {sum(map(abs, v))/len(v):.2f}%  max |error| {max(map(abs, v)):.1f}%  within 10%: {sum(abs(x) <= 10 for x in v)} of {len(v)}")
print("every phase within 10%:", sum(all(abs(r.get(p, 0)) <= 10 for p in ph) for r in runs), "of", len(runs))
PY
