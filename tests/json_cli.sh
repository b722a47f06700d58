#!/bin/sh
# json_cli.sh: --json of `dmuon compare`, `dmuon calibrate` and `dmuon regress`: stdout is exactly
# one JSON document (nothing before or after it), its format names the versioned schema, its
# top-level fields are the golden list below, its numbers agree with the text report or the CSV,
# and the report went to stderr. JSON is parsed with python3 as the other JSON tests do (the
# schema checks skip without it).
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
SRC=${DM_SRCDIR:-.}
tmp=$(mktemp -d /tmp/dmuon-json-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
have_py=no
command -v python3 >/dev/null 2>&1 && have_py=yes

# doc FILE: "FORMAT KEY,KEY,..." (the top-level keys in order) when FILE holds exactly one JSON
# object and nothing else (json.load refuses extra data), else the parser's complaint.
doc() {
    python3 -c 'import json,sys
t = open(sys.argv[1]).read()
d = json.loads(t)
assert isinstance(d, dict) and t.endswith("}\n"), "not one object ending the output"
print(d.get("format"), ",".join(d))' "$1" 2>&1
}
# field FILE EXPR: a value of the document (d), printed by Python
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1; }
skip() { i=0; while [ $i -lt "$1" ]; do tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP no python3"; i=$((i + 1)); done; }

# ---- compare ----------------------------------------------------------------------------------
$DMUON sim --model llama-3.2-3b --gpus 2 --cluster h200x2 --costs "$SRC/traces/costs/roofline.csv" \
    --trace "$tmp/sim.json" --csv "$tmp/sim.csv" --quiet >/dev/null 2>&1
awk -F, 'BEGIN { OFS = "," } NR == 1 { sub(/source=sim/, "source=real") } /^#/ || /^rank/ { print; next }
         { $5 = sprintf("%.3f", $5 * 1.1); $6 = sprintf("%.3f", $6 * 1.1); print }' "$tmp/sim.csv" >"$tmp/real.csv"
$DMUON compare --json --max-error 5 --csv "$tmp/cmp.csv" "$tmp/sim.json" "$tmp/real.csv" >"$tmp/c.json" 2>"$tmp/c.err"
is "compare --json --max-error 5 on a 9% miss: exit 1 as without --json" "$?" 1
like "  ... the report went to stderr" "$(cat "$tmp/c.err")" "# dmuon compare"
like "  ... and the --max-error lines" "$(cat "$tmp/c.err")" "exceeds --max-error 5%"
if [ $have_py = yes ]; then
    is "  ... stdout is one dmuon-compare-1 object, top-level fields as documented" "$(doc "$tmp/c.json")" \
        "dmuon-compare-1 format,model,cluster,strategy,gpus,metadata_differs,predicted,measured,phases,kinds,ops,max_error_pct"
    is "  ... identifying fields" "$(field "$tmp/c.json" 'd["model"], d["cluster"], d["strategy"], d["gpus"]')" \
        "('Llama-3.2-3B', 'h200x2', 'dmuon', 2)"
    is "  ... the step's error equals the CSV's" "$(field "$tmp/c.json" '"%.1f" % d["phases"][0]["error_pct"]')" \
        "$(awk -F, '$1 == "phase" && $2 == "step" { printf "%.1f", $5 }' "$tmp/cmp.csv")"
    is "  ... the step exceeds the bound, the phases named" \
        "$(field "$tmp/c.json" '[p["phase"] for p in d["phases"]], d["phases"][0]["exceeds_max_error"]')" \
        "(['step', 'forward', 'backward', 'optimizer', 'exposed-comm'], True)"
    is "  ... the op kinds and op counts as the text" "$(field "$tmp/c.json" 'd["ops"]["matched"], d["ops"]["only_predicted"]')" \
        "$(sed -n 's/^ops: \([0-9]*\) matched by (rank, op id), \([0-9]*\) only predicted.*/(\1, \2)/p' "$tmp/c.err")"
else
    skip 5
fi
$DMUON compare --json "$tmp/sim.json" "$tmp/sim.json" >"$tmp/c2.json" 2>/dev/null
is "compare --json without --max-error: exit 0" "$?" 0
[ $have_py = yes ] && is "  ... max_error_pct null" "$(field "$tmp/c2.json" 'd["max_error_pct"]')" "None" || skip 1
is "compare --json with one trace: usage error, exit 2" "$(status_of $DMUON compare --json "$tmp/sim.json")" 2

# ---- calibrate --------------------------------------------------------------------------------
$DMUON calibrate --comm "$SRC/tests/data/comm_h200x2.csv" --cluster h200x2 --out "$tmp/k.calib" --json \
    >"$tmp/k.json" 2>"$tmp/k.err"
is "calibrate --json: exit 0" "$?" 0
ok "  ... the calibration file written" test -s "$tmp/k.calib"
like "  ... the report and the 'wrote' line on stderr" "$(cat "$tmp/k.err")" "wrote $tmp/k.calib"
if [ $have_py = yes ]; then
    is "  ... stdout is one dmuon-calibrate-1 object, top-level fields as documented" "$(doc "$tmp/k.json")" \
        "dmuon-calibrate-1 format,cluster,gpu,gpus_per_node,date,command,fitted_on,note,file,n_values,values"
    is "  ... the values of the file, in order" "$(field "$tmp/k.json" '" ".join("%s=%.6g" % (v["key"], v["value"]) for v in d["values"])')" \
        "$(sed -n 's/^\([a-z_.-]*\) = \([^ ]*\) .*/\1=\2/p' "$tmp/k.calib" | tr '\n' ' ' | sed 's/ $//')"
    is "  ... each with source, residual and points" \
        "$(field "$tmp/k.json" 'sorted(d["values"][0]), d["values"][0]["points"] > 0, d["cluster"]')" \
        "(['date', 'gpu', 'key', 'points', 'residual_pct', 'source', 'value'], True, 'h200x2')"
else
    skip 3
fi
out=$($DMUON calibrate --comm "$SRC/tests/data/comm_h200x2.csv" --json 2>&1 >"$tmp/k2.out")
is "calibrate --json without --out: exit 2" "$?" 2
like "  ... says why" "$out" "dmuon calibrate: --json needs --out FILE"
is "  ... nothing on stdout" "$(cat "$tmp/k2.out")" ""

# ---- regress ----------------------------------------------------------------------------------
CI=true $DMUON regress --quick --no-gpu --reps 1 --machine cpu-2core --baselines "$SRC/traces/baselines" --json \
    >"$tmp/r.json" 2>"$tmp/r.err"
is "regress --json (committed quick baseline, CI=true): exit 0" "$?" 0
like "  ... the table on stderr" "$(cat "$tmp/r.err")" "# metric"
if [ $have_py = yes ]; then
    is "  ... stdout is one dmuon-regress-result-1 object, top-level fields as documented" "$(doc "$tmp/r.json")" \
        "dmuon-regress-result-1 format,machine,suite,baseline,costs,reps,threshold,ci,update,metrics,n_metrics,counts,result"
    is "  ... counts and result as the text's summary" \
        "$(field "$tmp/r.json" '"regress: %d metrics: %d ok, %d changed, %d worse" % (d["n_metrics"], d["counts"]["ok"], d["counts"]["CHANGED"], d["counts"]["WORSE"]), d["result"], len(d["metrics"]) == d["n_metrics"]')" \
        "($(sed -n 's/^\(regress: [0-9]* metrics: [0-9]* ok, [0-9]* changed, [0-9]* worse\).*/'"'"'\1'"'"'/p' "$tmp/r.err"), 'PASS', True)"
    is "  ... a metric's fields" "$(field "$tmp/r.json" 'list(d["metrics"][0]), d["machine"], d["suite"]')" \
        "(['metric', 'type', 'unit', 'baseline', 'now', 'ratio', 'threshold_pct', 'verdict'], 'cpu-2core', 'quick')"
else
    skip 3
fi
$DMUON regress --quick --no-gpu --reps 1 --baselines "$tmp/b" --machine t --update --json >"$tmp/u.json" 2>/dev/null
is "regress --update --json: exit 0" "$?" 0
[ $have_py = yes ] && is "  ... result updated, the first baseline: no previous values" \
    "$(field "$tmp/u.json" 'd["format"], d["update"], d["result"], {m["verdict"] for m in d["metrics"]}')" \
    "('dmuon-regress-result-1', True, 'updated', {'new'})" || skip 1
tap_end
