#!/bin/sh
# compare.sh: `dmuon compare` on simulator traces: a trace against itself (no error), against a
# copy with every time stretched by 10% (the errors it must report: -9.1% per phase and per op),
# plot files, CSV, --max-error exit status and bad input.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
tmp=$(mktemp -d /tmp/dmuon-compare-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

$DMUON sim --model llama-3.2-3b --gpus 2 --cluster h200x2 --costs "${DM_SRCDIR:-.}/traces/costs/roofline.csv" \
    --trace "$tmp/sim.json" --csv "$tmp/sim.csv" --quiet >/dev/null 2>&1
is "sim writes the traces" "$?" 0
# The "measured" trace: every start and duration 10% longer, source real.
awk -F, 'BEGIN { OFS = "," } NR == 1 { sub(/source=sim/, "source=real") } /^#/ || /^rank/ { print; next }
         { $5 = sprintf("%.3f", $5 * 1.1); $6 = sprintf("%.3f", $6 * 1.1); print }' "$tmp/sim.csv" >"$tmp/real.csv"

out=$($DMUON compare --max-error 0.001 "$tmp/sim.json" "$tmp/sim.csv" 2>&1)
is "a trace against itself (JSON against CSV) passes --max-error 0.001" "$?" 0
like "self comparison: step error 0" "$out" "step"
like "self comparison: every op matched" "$out" "matched by (rank, op id), 0 only predicted, 0 only measured, 0 with different kinds"
like "self comparison: op errors 0" "$out" "|error| median 0.0%, 90th percentile 0.0%"

out=$($DMUON compare "$tmp/sim.json" "$tmp/real.csv" --csv "$tmp/cmp.csv" --plot "$tmp/plot" 2>&1)
is "stretched trace: compare succeeds" "$?" 0
unlike_cpu=$(printf '%s\n' "$out" | grep -c "CPU backend")
is "a GPU (or older) trace: no CPU-backend warning" "$unlike_cpu" 0
sed '1s/source=real/source=real-cpu/' "$tmp/real.csv" >"$tmp/real-cpu.csv"
like "a CPU backend's trace against a GPU cluster's prediction: warned" \
    "$($DMUON compare "$tmp/sim.json" "$tmp/real-cpu.csv" 2>&1)" "the executor's CPU backend's: its times are a CPU's"
step=$(awk -F, '$1 == "phase" && $2 == "step" { printf "%.1f", $5 }' "$tmp/cmp.csv")
is "stretched trace: step error -9.1% (1/1.1 - 1)" "$step" "-9.1"
fwd=$(awk -F, '$1 == "phase" && $2 == "forward" { printf "%.1f", $5 }' "$tmp/cmp.csv")
is "stretched trace: forward error -9.1%" "$fwd" "-9.1"
ns=$(awk -F, '$1 == "kind" && $2 == "ns" { printf "%.1f", $5 }' "$tmp/cmp.csv")
is "stretched trace: ns kind error -9.1%" "$ns" "-9.1"
p90=$(awk -F, '$1 == "ops" && $2 == "abs_err_p90" { printf "%.0f", $5 }' "$tmp/cmp.csv")
is "stretched trace: op |error| 90th percentile 9%" "$p90" "9"
like "stretched trace: measured source named" "$out" "measured    real: Llama-3.2-3B dmuon"
ok "timeline data for both traces" test -s "$tmp/plot/timeline_predicted.dat" -a -s "$tmp/plot/timeline_measured.dat"
ok "matched-op data and gnuplot script" test -s "$tmp/plot/ops.dat" -a -s "$tmp/plot/compare.gp"
if command -v gnuplot >/dev/null 2>&1; then
    ok "timeline PNG drawn" test -s "$tmp/plot/timeline.png"
    ok "op scatter PNG drawn" test -s "$tmp/plot/ops.png"
else
    echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1))
    echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1))
fi
is "--max-error 5 fails on a 9% miss" "$(status_of $DMUON compare --max-error 5 "$tmp/sim.json" "$tmp/real.csv")" 1
is "--max-error 10 passes a 9% miss" "$(status_of $DMUON compare --max-error 10 "$tmp/sim.json" "$tmp/real.csv")" 0

$DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster h200x2 --csv "$tmp/other.csv" --quiet >/dev/null 2>&1
out=$($DMUON compare "$tmp/sim.csv" "$tmp/other.csv" 2>&1)
like "traces of different programs: warned" "$out" "different programs"
is "one trace only: usage error" "$(status_of $DMUON compare "$tmp/sim.csv")" 2
is "missing trace: error" "$(status_of $DMUON compare "$tmp/sim.csv" "$tmp/nope.csv")" 1
printf 'rank,stream\n' >"$tmp/bad.csv"
out=$($DMUON compare "$tmp/sim.csv" "$tmp/bad.csv" 2>&1)
like "malformed trace: error names the file" "$out" "bad.csv"
tap_end
