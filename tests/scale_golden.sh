#!/bin/sh
# scale_golden.sh: `dmuon scale` against its golden table and CSV (a small study on a pinned
# roofline cost table), the data files it writes, its plots when gnuplot is installed, and
# exit statuses. DMUON_REGEN=1 rewrites the golden files instead of comparing.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
g=$DM_SRCDIR/tests/golden
costs=$DM_SRCDIR/tests/data/sim_costs.csv
tmp=${TMPDIR:-/tmp}/scale_golden.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
norm() { sed -e "s|$DM_SRCDIR/||g" -e "s|$tmp/|OUT/|g" -e '/^speed:/d'; }
same_file() {
    tap_n=$((tap_n + 1))
    if diff -u "$3" "$2" >"$tmp/diff" 2>&1; then echo "ok $tap_n - $1"; else
        echo "not ok $tap_n - $1"; sed 's/^/#   /' "$tmp/diff" | head -40; tap_fail=$((tap_fail + 1)); fi
}

$DMUON scale --model qwen2.5-0.5b --cluster h200 --gpus 1,2,8,16 --costs "$costs" --no-plots --no-progress \
    --out "$tmp/s" 2>"$tmp/err" >"$tmp/raw.txt"
is "scale exits 0" "$?" 0
norm <"$tmp/raw.txt" >"$tmp/out.txt"
is "no progress line with --no-progress" "$(cat "$tmp/err")" ""
if [ -n "$DMUON_REGEN" ]; then
    cp "$tmp/out.txt" "$g/scale_qwen2.5-0.5b_h200.txt"
    cp "$tmp/s/scale.csv" "$g/scale_qwen2.5-0.5b_h200.csv"
fi
same_file "scale table matches the golden one" "$tmp/out.txt" "$g/scale_qwen2.5-0.5b_h200.txt"
same_file "scale.csv matches the golden one" "$tmp/s/scale.csv" "$g/scale_qwen2.5-0.5b_h200.csv"
is "scale.dat: one block per strategy" "$(grep -c '^  *16 ' "$tmp/s/scale.dat")" 5
# the points in one process or in three at a time: the same table and CSV
for j in 1 3; do
    $DMUON scale --model qwen2.5-0.5b --cluster h200 --gpus 1,2,8,16 --costs "$costs" --no-plots --no-progress \
        --jobs $j --out "$tmp/j$j" 2>/dev/null | norm | sed "s|OUT/j$j|OUT/s|g" >"$tmp/j$j.txt"
    same_file "--jobs $j: the same table" "$tmp/j$j.txt" "$tmp/out.txt"
    same_file "--jobs $j: the same scale.csv" "$tmp/j$j/scale.csv" "$tmp/s/scale.csv"
done
$DMUON scale --model qwen2.5-0.5b --gpus 2 --jobs 0 --no-plots --out "$tmp/j0" >/dev/null 2>&1
is "scale --jobs 0 exits 2" "$?" 2
like "--progress forces the progress line" \
    "$($DMUON scale --model qwen2.5-0.5b --gpus 2 --strategies dmuon --costs "$costs" --no-plots --progress --out "$tmp/p" 2>&1 >/dev/null)" \
    "scale: 2/2"
like "adamw added as the baseline" "$($DMUON scale --model qwen2.5-0.5b --gpus 2 --strategies dmuon --costs "$costs" --no-plots --out "$tmp/p")" \
    "adamw (baseline only)"
if command -v gnuplot >/dev/null 2>&1; then
    $DMUON scale --model qwen2.5-0.5b --gpus 2,4 --strategies adamw,dmuon --costs "$costs" --out "$tmp/plots" >/dev/null 2>&1
    ok "plots: step_time.png" test -s "$tmp/plots/step_time.png"
    ok "plots: optimizer_time.png" test -s "$tmp/plots/optimizer_time.png"
    ok "plots: overhead.png" test -s "$tmp/plots/overhead.png"
else
    echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1))
fi
# A point that does not fit in GPU memory is marked in the table, the CSV and the data file.
$DMUON scale --model qwen2.5-72b --cluster a800 --gpus 8,16 --strategies dmuon --costs "$costs" --no-plots --no-progress \
    --out "$tmp/big" >"$tmp/big.txt" 2>&1
is "a study of points that do not fit still exits 0" "$?" 0
like "  ... the table marks them" "$(grep '^ *8 dmuon' "$tmp/big.txt")" "    0  does not fit"
like "  ... and says what the column is" "$(cat "$tmp/big.txt")" "4 of 4 points do not fit"
like "  ... the CSV has memory_gib and fits" "$(sed -n 2p "$tmp/big/scale.csv")" "overhead_vs_adamw_pct,memory_gib,fits"
like "  ... under the case line" "$(head -1 "$tmp/big/scale.csv")" "# dmuon-scale-1 model="
is "  ... fits 0 on every dmuon row" "$(awk -F, '$2 == "dmuon" { print $12 }' "$tmp/big/scale.csv" | sort -u)" 0
is "  ... the data file's column 12 is 0" "$(awk '$2 == "dmuon" { print $12 }' "$tmp/big/scale.dat" | sort -u)" 0
# --json: one object on stdout (the points, as the CSV), the report on stderr
$DMUON scale --model qwen2.5-0.5b --cluster a800 --gpus 8,16 --strategies adamw,muon-ddp-tuned,dmuon --costs "$costs" \
    --no-plots --no-progress --out "$tmp/js" --json >"$tmp/js.json" 2>"$tmp/js.err"
is "scale --json exits 0" "$?" 0
if command -v python3 >/dev/null 2>&1; then
    is "  ... stdout is one JSON object with 6 points, the named strategies" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["points"]), sorted({p["strategy"] for p in d["points"]}))' "$tmp/js.json" 2>&1)" \
        "6 ['adamw', 'dmuon', 'muon-ddp-tuned']"
    is "  ... step_ms equals the CSV's" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % [p for p in d["points"] if p["strategy"]=="dmuon" and p["gpus"]==16][0]["step_ms"])' "$tmp/js.json")" \
        "$(awk -F, '$1 == 16 && $2 == "dmuon" { printf "%.3f", $3 }' "$tmp/js/scale.csv")"
else
    echo "ok $((tap_n + 1)) # SKIP no python3"; echo "ok $((tap_n + 2)) # SKIP no python3"; tap_n=$((tap_n + 2))
fi
like "  ... the report went to stderr" "$(cat "$tmp/js.err")" "# gpus strategy"
is "scale --strategies bogus exits 2" "$(status_of $DMUON scale --strategies bogus --no-plots --out "$tmp/x")" 2
is "scale --gpus 0 exits 2" "$(status_of $DMUON scale --gpus 0 --no-plots --out "$tmp/x")" 2
is "scale --strategy exits 2" "$(status_of $DMUON scale --strategy dmuon)" 2
tap_end
