#!/bin/sh
# hostile_readers.sh: hostile and damaged inputs (issue 20) end with the expected message and exit status,
# quickly, and execute nothing: /dev/zero as a cluster, a cost table or a calibration's table; an
# overlong cluster-file line; keys given twice in cluster and calibration files; rows given twice
# in cost tables and traces; a trace event outside the trace's ranks; gnuplot fed hostile trace
# sources, titles and output paths (compare --plot, scale); one event at rank 16777216; PNGs that
# only appear once gnuplot succeeded; a calibration's `costs =` found beside the calibration file.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
SRC=${DM_SRCDIR:-.}
tmp=$(mktemp -d /tmp/dmuon-hostile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
costs=$SRC/tests/data/sim_costs.csv
T="timeout 20"
sim="$DMUON sim --model qwen2.5-0.5b --gpus 2 --quiet"

# ---- /dev/zero and size caps ------------------------------------------------------------------
out=$($T $sim --cluster /dev/zero 2>&1); rc=$?
is "--cluster /dev/zero exits 1 (no hang)" "$rc" 1
like "--cluster /dev/zero: the NUL byte named" "$out" "/dev/zero:1:1: expected text, found a NUL byte"
out=$($T $sim --costs /dev/zero 2>&1); rc=$?
is "--costs /dev/zero exits 1 (no endless growth)" "$rc" 1
like "--costs /dev/zero named" "$out" "/dev/zero:1:1: expected text, found a NUL byte"
printf '# dmuon-calib-1\ncosts = /dev/zero\n' >"$tmp/zero.calib"
out=$($T $sim --calibration "$tmp/zero.calib" 2>&1); rc=$?
is "a calibration naming costs = /dev/zero exits 1" "$rc" 1
like "its table named" "$out" "/dev/zero:1:1"
yes '# padding' | head -c 2000000 >"$tmp/huge.cluster"
out=$($T $sim --cluster "$tmp/huge.cluster" 2>&1)
like "a 2 MB cluster file is over the cap" "$out" "huge.cluster: expected a file of at most 1048576 bytes"

# ---- an overlong cluster-file line is refused with its line, its tail never read as a key ------
{
    printf 'name = long\ngpu = A800\n'
    printf 'gpus_per_node = 8  # %04096d' 0 | tr 0 x
    printf 'step_start_us = 999\n'
    printf 'nvlink_GBps = 200\n'
} >"$tmp/long.cluster"
out=$($T $sim --cluster "$tmp/long.cluster" 2>&1); rc=$?
is "a cluster-file line over 4096 bytes exits 1" "$rc" 1
like "refused with its line and column" "$out" "long.cluster:3:4097: expected a line of at most 4096 bytes"

# ---- keys and rows given twice ----------------------------------------------------------------
printf 'gpu = A800\ngpus_per_node = 8\nnvlink_GBps = 200\nop_gap_us = 1\nop_gap_us = 9\n' >"$tmp/dup.cluster"
out=$($sim --cluster "$tmp/dup.cluster" 2>&1); rc=$?
is "a cluster key given twice exits 1" "$rc" 1
like "refused with both lines" "$out" 'dup.cluster:5:1: key "op_gap_us" given twice (first on line 4)'
printf '# dmuon-calib-1\nfwd_efficiency = 0.5\nbwd_efficiency = 0.4\nfwd_efficiency = 0.6\n' >"$tmp/dup.calib"
out=$($sim --calibration "$tmp/dup.calib" 2>&1); rc=$?
is "a calibration key given twice exits 1" "$rc" 1
like "refused with both lines" "$out" "dup.calib:4:1: key 'fwd_efficiency' given twice (first on line 2)"
{ cat "$costs"; grep -m1 '^[^#g].*,ns,' "$costs"; } >"$tmp/dup_costs.csv"
out=$($sim --costs "$tmp/dup_costs.csv" 2>&1); rc=$?
is "a cost row given twice exits 1" "$rc" 1
like "refused with its line" "$out" "dup_costs.csv:$(wc -l <"$tmp/dup_costs.csv"):1: duplicate row: ns"
$DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster h200x2 --costs "$costs" --quiet --csv "$tmp/t.csv" --trace "$tmp/t.json" >/dev/null
{ cat "$tmp/t.csv"; sed -n 3p "$tmp/t.csv"; } >"$tmp/dup_trace.csv"
out=$($DMUON compare "$tmp/t.csv" "$tmp/dup_trace.csv" 2>&1); rc=$?
is "a trace row given twice exits 1" "$rc" 1
like "refused with both lines" "$out" "dup_trace.csv:$(wc -l <"$tmp/dup_trace.csv"):1: duplicate event: rank 0 op"
like "  ... naming the first" "$out" "is already on line 3"
awk '/"ph": "X"/ && !done { print; print; done = 1; next } { print }' "$tmp/t.json" >"$tmp/dup_trace.json"
out=$($DMUON compare "$tmp/t.json" "$tmp/dup_trace.json" 2>&1)
like "a JSON trace event given twice is refused" "$out" "duplicate event: rank 0 op"
cp "$tmp/t.csv" "$tmp/far.csv"
echo "16777216,compute,0,forward,0.000,1.000,0,0,-1,-1,0.000" >>"$tmp/far.csv"
out=$($DMUON compare "$tmp/t.csv" "$tmp/far.csv" 2>&1); rc=$?
is "an event outside the trace's nranks exits 1" "$rc" 1
like "refused with its line" "$out" "far.csv:$(wc -l <"$tmp/far.csv"):1: expected a rank below the trace's nranks 2, found 16777216"

# ---- compare --plot: one event at rank 16777216 writes a small script -------------------------
printf '# dmuon-trace-1 source=sim model=m strategy=s cluster=c\nrank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us\n16777216,compute,0,forward,0.000,10.000,0,0,-1,-1,0.000\n' >"$tmp/one.csv"
$T $DMUON compare "$tmp/one.csv" "$tmp/one.csv" --plot "$tmp/one" >/dev/null 2>&1
is "compare --plot on one event at rank 16777216 exits 0" "$?" 0
size=$(wc -c <"$tmp/one/compare.gp")
ok "its script is small ($size bytes: one rank's lanes)" test "$size" -lt 20000

# ---- gnuplot sees only quoted strings, run without a shell ------------------------------------
mark=$tmp/EXECUTED # (scale's checks below use their own marker)
evil="x'\\nsystem('touch $mark')\\n#\`touch $mark\`"
printf '{"traceEvents": [\n{"name": "forward", "cat": "forward", "ph": "X", "pid": 0, "tid": 0, "ts": 0.000, "dur": 10.000, "args": {"op": 0, "kind": "forward", "bytes": 0, "flops": 0, "layer": -1, "coll": -1, "wait_us": 0.000}}\n],\n"displayTimeUnit": "ms",\n"otherData": {"format": "dmuon-trace-1", "source": "%s", "model": "%s", "strategy": "s", "cluster": "c", "nranks": 1}}\n' \
    "$evil" "$evil" >"$tmp/evil.json"
printf '%s\n' "# dmuon-trace-1 source=';system('touch\${IFS}$mark');' model=m strategy=s cluster=c nranks=1" \
    "rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us" "0,compute,0,forward,0.000,12.000,0,0,-1,-1,0.000" \
    >"$tmp/evil.csv"
pdir="$tmp/plot'\$(touch $mark)\`touch $mark\`"
out=$($DMUON compare "$tmp/evil.json" "$tmp/evil.csv" --plot "$pdir" 2>&1); rc=$?
is "compare --plot with hostile sources and path exits 0" "$rc" 0
[ "$rc" != 0 ] && printf '%s\n' "$out" | sed 's/^/#   /' | head -5
ok "nothing executed (compare)" test ! -e "$mark"
like "the hostile source is printed as text" "$out" "system('touch"
if command -v gnuplot >/dev/null 2>&1; then
    ok "timeline.png drawn under the hostile path" test -s "$pdir/timeline.png"
    ok "no temporary plot folder left" test -z "$(ls -A "$pdir" | grep '^\.plot')"
else
    echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1))
    echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1))
fi
mark=$tmp/EXECUTED_BY_SCALE
printf "name = a800'; system('touch %s'); x='\ngpu = A800\ngpus_per_node = 8\nnvlink_GBps = 200\nnics_per_node = 4\nnic_Gbps = 200\n" \
    "$mark" >"$tmp/evil.cluster"
sdir="$tmp/scale'\$(touch $mark)"
out=$($DMUON scale --model qwen2.5-0.5b --cluster "$tmp/evil.cluster" --gpus 1,2 --strategies dmuon --costs "$costs" \
    --no-progress --out "$sdir" 2>&1); rc=$?
is "scale with a hostile cluster name and --out exits 0" "$rc" 0
ok "nothing executed (scale)" test ! -e "$mark"

# ---- scale's PNGs appear under their names only when gnuplot succeeds --------------------------
if command -v gnuplot >/dev/null 2>&1; then
    mkdir -p "$tmp/plots"
    printf "if (!exists('outdir')) outdir = dir\nset terminal pngcairo\nset output outdir.'/step_time.png'\nplot x\nset output outdir.'/optimizer_time.png'\nplot no_such_function(x)\n" \
        >"$tmp/plots/scale.gp"
    out=$(DMUON_PLOTS=$tmp/plots $DMUON scale --model qwen2.5-0.5b --gpus 1,2 --strategies dmuon --costs "$costs" \
        --no-progress --out "$tmp/s2" 2>&1); rc=$?
    is "a failing gnuplot makes scale exit 1" "$rc" 1
    ok "no step_time.png under its name (it was drawn before the failure)" test ! -e "$tmp/s2/step_time.png"
    ok "no partial optimizer_time.png" test ! -e "$tmp/s2/optimizer_time.png"
    ok "the temporary folder is gone" test -z "$(ls -A "$tmp/s2" | grep '^\.plot')"
else
    for i in 1 2 3 4; do echo "ok $((tap_n + 1)) # SKIP gnuplot not installed"; tap_n=$((tap_n + 1)); done
fi

# ---- a calibration's costs = PATH is found beside the calibration file -------------------------
mkdir -p "$tmp/cal/sub" "$tmp/cal/costs"
cp "$costs" "$tmp/cal/costs/table.csv"
printf '# dmuon-calib-1\ncosts = ../costs/table.csv\nop_gap_us = 2\n' >"$tmp/cal/sub/x.calib"
out=$(cd / && $sim --calibration "$tmp/cal/sub/x.calib" 2>&1)
is "costs = ../costs/table.csv resolves against the calibration's folder (from /)" "$?" 0
out=$(cd / && $DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster h200x2 --calibration "$SRC/traces/calib/h200x2.calib" 2>&1)
is "the committed calibration works from any folder" "$?" 0
like "  ... with its table beside it" "$out" "traces/calib/../costs/h200.csv"
$DMUON calibrate --kernels "$costs" --out "$tmp/cal/sub/w.calib" >/dev/null 2>&1
like "calibrate writes costs relative to its output's folder" "$(grep '^costs' "$tmp/cal/sub/w.calib")" "costs = ../../../"
out=$(cd / && $sim --calibration "$tmp/cal/sub/w.calib" 2>&1)
is "and that file applies from another folder" "$?" 0
tap_end
