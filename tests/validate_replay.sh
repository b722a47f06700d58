#!/bin/sh
# validate_replay.sh: `dmuon validate --replay` re-simulates the cases of a stored validate.csv
# (no executor): every case of the stored 2 x H200 table (traces/validate/h200x2-3/run4) is
# re-planned and simulated, the measured times carried through as stored, the stored predictions
# beside the new ones; --max-error decides the exit status; a malformed csv is refused with
# FILE:LINE:COL. (That table was measured before forward and backward ops carried their kernels:
# the executor then ran one GEMM per matrix and no attention, so today's predictions of its
# forward and backward differ from the stored ones by design, and only the mechanics are
# checked on it.) --as-run simulates the program a case ran instead (one case of h200-29).
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
SRC=${DM_SRCDIR:-.}
tmp=$(mktemp -d /tmp/dmuon-replay-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
stored="$SRC/traces/validate/h200x2-3/run4/cases/validate.csv"
# The calibration of the stored run (traces/calib/h200x2.calib as committed at a73b104).
cat >"$tmp/old.calib" <<CAL
# dmuon-calib-1
costs = $SRC/traces/costs/h200.csv
nvlink_bus_efficiency = 0.661533
busbw_scale.broadcast = 1.16377
busbw_scale.reduce = 1.20486
busbw_scale.all-reduce = 1
busbw_scale.all-gather = 0.796479
busbw_scale.reduce-scatter = 0.768562
base_latency_us = 6.80381
nvlink_latency_us = 3.77107
fwd_efficiency = 0.483051
bwd_efficiency = 0.403549
elementwise_efficiency.muon_update = 0.861231
elementwise_launch_us.muon_update = 6.14557
elementwise_efficiency.adamw = 0.44754
elementwise_launch_us.adamw = 14.9038
ns_time_scale = 1.084
comm_slowdown = 0.037
step_start_us = 15.456
coll_slowdown = 0.496
CAL
R="$DMUON validate --cluster h200x2 --replay"
out=$($R "$stored" --calibration "$tmp/old.calib" --out "$tmp/a" 2>&1)
is "replay of the stored table exits 0 (report only)" "$?" 0
like "summary line" "$out" "validate --replay: 6 cases, 6 simulated, 0 failed"
is "replay.csv: 6 cases x 5 phases" "$(grep -c '^llama-3.2-3b\.' "$tmp/a/replay.csv")" 30
# measured_ms (replay.csv column 8) is the stored one (the stored table, of the older layout
# without tokens: column 7); the stored prediction (column 11) is the stored table's (8).
bad=$(awk -F, 'NR == FNR { if (FNR > 1) m[$1 "," $6] = $7 " " $8; next } FNR > 1 { split(m[$1 "," $7], a, " ");
      if (a[1] != $8 || a[2] != $11) n++ } END { print n + 0 }' "$stored" "$tmp/a/replay.csv")
is "measured times and stored predictions carried through as stored" "$bad" 0
like "replay.csv has the tokens column, 4096 as assumed" "$(sed -n 2p "$tmp/a/replay.csv")" ",1,4096,step,"
like "the errors by model, calibrated, no fitted-on model named (the file does not say)" "$out" "# calibration "
# --json: the rows of replay.csv as one object on stdout, the report on stderr
$R "$stored" --calibration "$tmp/old.calib" --out "$tmp/j" --json >"$tmp/j.json" 2>"$tmp/j.err"
is "--json exits 0" "$?" 0
like "  ... the report went to stderr" "$(cat "$tmp/j.err")" "validate --replay: 6 cases"
if command -v python3 >/dev/null 2>&1; then
    is "  ... 30 rows, numbers as numbers, the same predictions as replay.csv" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["rows"]; print(len(r), type(r[0]["predicted_ms"]).__name__, "%.3f" % r[0]["predicted_ms"])' "$tmp/j.json" 2>&1)" \
        "30 float $(awk -F, 'NR == 2 { printf "%.3f", $9 }' "$tmp/j/replay.csv")"
else
    echo "ok $((tap_n + 1)) # SKIP no python3"; tap_n=$((tap_n + 1))
fi
# The replay's own csv replays (the tokens column read back), and the committed calibration
# names the model it was fitted on, whose cases are marked.
cp "$tmp/a/replay.csv" "$tmp/new.csv"
out=$(cd "$SRC" && $R "$tmp/new.csv" --calibration traces/calib/h200x2.calib --out "$tmp/e" 2>&1)
like "a table with the tokens column replays" "$out" "validate --replay: 6 cases, 6 simulated, 0 failed"
like "  ... tokens as stored" "$out" "tokens per rank as stored"
like "  ... the calibration's model named" "$out" "fitted on Llama-3.2-3B (*)"
like "  ... its cases marked" "$out" "llama-3.2-3b *"
like "  ... the goal counted apart from the fitted-on model" "$out" "on models the calibration was not fitted on"
like "  ... where the kernels came from" "$out" "forward kernels:  "
sed '2s/,4096,step,/,4x96,step,/' "$tmp/new.csv" >"$tmp/bt.csv"
like "a bad tokens field is named" "$($R "$tmp/bt.csv" --out "$tmp/c" 2>&1)" "bt.csv:2:"
# A case that does not fit on the GPU (the estimate, before running): reported, not run, not failed.
out=$($DMUON validate --models qwen2.5-72b,qwen2.5-0.5b --strategies dmuon --overlaps interleave --gpus 1 --tokens 2048,4k \
    --cluster h200 --backend gpu --dry-run --out "$tmp/f" 2>&1)
is "validate --dry-run of a case that does not fit exits 0" "$?" 0
like "  ... says it does not fit, with what it needs" "$out" "qwen2.5-72b.dmuon.interleave.1gpu.2048tok: does not fit (needs "
like "  ... a token list makes one case per count" "$out" "qwen2.5-0.5b.dmuon.interleave.1gpu.4096tok"
like "  ... the cases line lists the counts" "$out" "tokens per rank 2048,4096"
out=$($DMUON validate --models qwen2.5-72b --strategies dmuon --overlaps interleave --gpus 1 --cluster h200 --backend gpu \
    --out "$tmp/g" 2>&1)
is "validate of cases that do not fit only: exits 0, nothing run" "$?" 0
like "  ... the table says so" "$out" "does not fit (needs "
like "  ... the summary counts it" "$out" "validate: 1 cases, 0 ran, 0 failed, 1 do not fit in GPU memory"
is "--replay takes one token count" "$(status_of $R "$stored" --tokens 2048,4096 --out "$tmp/c")" 2
out=$(cd "$SRC" && $R "$stored" --calibration traces/calib/h200x2.calib --out "$tmp/b" 2>&1)
is "replay with the committed calibration exits 0" "$?" 0
is "--max-error 1 fails (phases miss by more than 1%)" "$(status_of $R "$stored" --calibration "$tmp/old.calib" --out "$tmp/c" --max-error 1)" 1
is "--max-error 200 passes" "$(status_of $R "$stored" --calibration "$tmp/old.calib" --out "$tmp/c" --max-error 200)" 0
# --as-run: the program a case ran (CASE/program.json beside the csv) instead of a new plan; one
# case of h200-29 (its table's rows for it, its program from the packed case folders)
asr="$tmp/asrun/validate"
mkdir -p "$asr"
case=qwen2.5-0.5b.dmuon.interleave.1gpu.1024tok
sed -n "1p; /^$case,/p" "$SRC/traces/validate/h200-29/validate/validate.csv" >"$asr/validate.csv"
tar xJf "$SRC/traces/validate/h200-29/validate-cases.tar.xz" -C "$tmp/asrun" "validate/$case/program.json"
out=$(cd "$SRC" && $DMUON validate --cluster h200 --replay "$asr/validate.csv" --as-run --out "$tmp/ar" 2>&1)
is "--as-run replay exits 0" "$?" 0
like "  ... simulates the stored program" "$out" "validate --replay: 1 cases, 1 simulated, 0 failed"
like "  ... and says where the programs come from" "$out" "programs    as run: $asr/CASE/program.json"
sim=$(cd "$SRC" && $DMUON sim --program "$asr/$case/program.json" --cluster h200 2>&1 | sed -n 's/^step time *\([0-9.]*\) ms.*/\1/p')
got=$(awk -F, 'NR > 1 && $7 == "step" { printf "%.3f", $9 }' "$tmp/ar/replay.csv")
is "  ... its step is sim --program's on that program" "$got" "$sim"
rm "$asr/$case/program.json"
out=$(cd "$SRC" && $DMUON validate --cluster h200 --replay "$asr/validate.csv" --as-run --out "$tmp/ar2" 2>&1)
like "  ... a case without its program fails, named" "$out" "$case/program.json"
is "--as-run without --replay is a usage error" "$(status_of $DMUON validate --as-run)" 2
many=$(printf 'llama-3.2-3b,%.0s' $(seq 17))
is "more than 16 models is a usage error, not a silent cut" "$(status_of $DMUON validate --models "${many%,}" --dry-run)" 2
like "  ... that names the option and the limit" "$($DMUON validate --models "${many%,}" --dry-run 2>&1)" "--models: at most 16 items"
# Malformed input: file:line:col (rows of an older stored table).
old_table="$SRC/traces/validate/h200x2-1/validate.csv"
printf 'case,model,phase\n' >"$tmp/h.csv"
out=$($R "$tmp/h.csv" --out "$tmp/c" 2>&1)
like "a wrong header is named at 1:1" "$out" "h.csv:1:1: expected the header"
head -3 "$old_table" | sed '3s/,forward,51.801248,/,forward,fast,/' >"$tmp/n.csv"
out=$($R "$tmp/n.csv" --out "$tmp/c" 2>&1)
like "a bad measured_ms is named at line 3, its column" "$out" "n.csv:3:76: expected measured_ms as a non-negative number, found 'fast'"
head -3 "$old_table" | sed '3s/,forward,/,fwd,/' >"$tmp/p.csv"
out=$($R "$tmp/p.csv" --out "$tmp/c" 2>&1)
like "an unknown phase is named" "$out" "p.csv:3:68: expected a phase"
head -3 "$old_table" >"$tmp/m.csv"
out=$($R "$tmp/m.csv" --out "$tmp/c" 2>&1)
like "a case without every phase is refused" "$out" "case llama-3.2-3b.dmuon.interleave.1gpu has no backward row"
head -2 "$old_table" | sed "2s/,step,.*/,step/" >"$tmp/s.csv"
out=$($R "$tmp/s.csv" --out "$tmp/c" 2>&1)
like "a short row is named" "$out" "s.csv:2:"
is "a malformed csv exits 1" "$(status_of $R "$tmp/s.csv" --out "$tmp/c")" 1
tap_end
