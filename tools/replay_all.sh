#!/bin/bash
# tools/replay_all.sh: every stored one-H200 validation replayed by today's simulator with one
# calibration, one line per call: its cases within the goals and the mean |error| per phase.
#   tools/replay_all.sh [CALIB [OUTDIR]]      (default traces/calib/h200.calib, /tmp/dmuon-replay)
# Each call's `dmuon validate --replay` output goes to OUTDIR/NAME.txt and OUTDIR/NAME/replay.csv.
# Run from the repository root with ./dmuon built (DMUON=BINARY for another). Calls before h200-29 ran the NS cache before its
# re-tune of 2026-12-04 (traces/kernels/retune2-2026-12-04): today's rows price their NS faster
# than they ran it, so their lines here are not like-for-like (their README's figures are those of
# their day). h200-29's calls are replayed on the programs their cases ran (--as-run: their case
# folders unpacked into OUTDIR first), as planning again on today's rows batches NS differently;
# so are the calls after it (h200-33 to h200-39: unseen models, the executor's near-shape NS
# configurations). ASRUN=1 replays every earlier call with its cases packed on the programs it
# ran as well (the cost model compared op for op; their NS still priced by today's rows).
set -u
C=${1:-traces/calib/h200.calib}
O=${2:-/tmp/dmuon-replay}
mkdir -p "$O"
V=traces/validate
for e in h200-16:$V/h200-16/validate/validate.csv h200-17:$V/h200-17/validate/validate.csv \
    h200-19:$V/h200-19/validate/validate.csv h200-20:$V/h200-20/validate/validate.csv \
    h200-21:$V/h200-21/validate/validate.csv h200-22:$V/h200-22/validate/validate.csv \
    h200-22-tokens:$V/h200-22/tokens-1024-8192/validate/validate.csv \
    qwen3-6l:traces/device/moeq3-2026-12-03/logs/validate_q3.csv h200-23:$V/h200-23/validate/validate.csv \
    h200-24:$V/h200-24/validate/validate.csv h200-25:$V/h200-25/validate/validate.csv \
    h200-25-16384:$V/h200-25/tokens-16384/validate/validate.csv h200-26:$V/h200-26/validate/validate.csv \
    h200-29:$V/h200-29:asrun h200-29-heldout:$V/h200-29/heldout:asrun h200-29-16384:$V/h200-29/tokens-16384:asrun \
    h200-33-unseen:$V/h200-33-unseen/logs/unseen:asrun h200-34-unseen:$V/h200-34-unseen/logs/unseen:asrun \
    h200-35-unseen:$V/h200-35/logs/unseen:asrun h200-35:$V/h200-35/logs/core:asrun \
    h200-36-heldout:$V/h200-36/logs/heldout:asrun h200-37:$V/h200-37/call3/logs/core:asrun \
    h200-37-heldout:$V/h200-37/call2/logs/heldout:asrun h200-37-unseen:$V/h200-37/call1/logs/unseen:asrun \
    h200-37-16384:$V/h200-37/call1/logs/llama16k:asrun h200-38:$V/h200-38/logs/core:asrun \
    h200-39:$V/h200-39/logs/core:asrun h200-39-unseen:$V/h200-39/logs/unseen:asrun \
    h200-40-unseen2:$V/h200-40/logs/unseen2:asrun window:traces/device/window-2026-12-05/window:asrun \
    unseen2-causal:traces/device/causalunseen2-2026-12-05/call1/unseen2c:asrun \
    unseen2-whole:traces/device/causalunseen2-2026-12-05/call2/unseen2:asrun \
    heldns:traces/device/heldns-2026-12-05/heldns:asrun causalcore:traces/device/causalcore-2026-12-05/corec:asrun \
    heldns2:traces/device/heldns2-2026-12-05/heldns2:asrun unseen3:$V/h200-unseen3-2026-12-06:asrun \
    unseen3tok:$V/h200-unseen3tok-2026-12-06:asrun passes:traces/device/passes-2026-12-06/call1/passes:asrun; do
    n=${e%%:*} f=${e#*:} a=
    if [ -n "${ASRUN:-}" ] && [ "${f%/validate/validate.csv}" != "$f" ] && [ -f "${f%/validate/validate.csv}/validate-cases.tar.xz" ]; then
        f=${f%/validate/validate.csv}:asrun # ASRUN=1: every call with its cases packed, on the programs it ran
    fi
    if [ "${f%:asrun}" != "$f" ]; then # a call's folder: its cases unpacked beside a copy of its CSV
        d=${f%:asrun}
        x=$O/cases-$n # the archives of h200-29 on hold validate/CASE/..., the earlier ones CASE/...
        tar tJf "$d/validate-cases.tar.xz" | head -3 | grep -q '^\(\./\)*validate/' || x=$x/validate
        rm -rf "$O/cases-$n" && mkdir -p "$x" && tar xJf "$d/validate-cases.tar.xz" -C "$x" &&
            cp "$d/validate/validate.csv" "$O/cases-$n/validate/validate.csv"
        f=$O/cases-$n/validate/validate.csv a=--as-run
    fi
    # every call planned again here ran before the layer passes (2026-12-06): planned without them
    # (the calls replayed on their programs, passes included, keep what those programs hold)
    "${DMUON:-./dmuon}" validate --cluster h200 --calibration "$C" --replay "$f" $a --layer-passes off --out "$O/$n" \
        > "$O/$n.txt" 2>&1
    g=$(grep "^# goal" "$O/$n.txt" | sed 's/.*: //')
    python3 - "$O/$n/replay.csv" "$n" "$g" <<'PY'
import csv, sys
acc = {}
for r in csv.DictReader(open(sys.argv[1])):
    if r["phase"] in ("step", "forward", "backward", "optimizer", "exposed-comm"):
        acc.setdefault(r["phase"], []).append(abs(float(r["error_pct"])))
print("%-15s %s | %s" % (sys.argv[2], sys.argv[3][:40], " ".join("%s %.2f" % (k[:4], sum(v) / len(v)) for k, v in acc.items())))
PY
done
