#!/bin/sh
# clock_tools.sh: the clock probe's readers on synthetic data: tools/clock_trace.py puts each op
# of the last step at the clock its cycles over its nanoseconds give (an op inside a 1500 MHz
# stretch reads 1500, one inside 1800 reads 1800, the 1 ms bins follow the switch) and names a
# file it cannot read; tools/power_along runs the power model along ops (a long op at the
# reference GEMM's demand settles at the clock the model gives it: 1 - slope (gemm_w - limit));
# tools/clock_fit.py runs its grid through it. (Skipped without python3.)
. "${DM_SRCDIR:-.}/tests/tap.sh"
SRC=${DM_SRCDIR:-.}
PA=${POWER_ALONG:-./tools/power_along}
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP no python3"
    exit 0
fi
tmp=$(mktemp -d /tmp/dmuon-clock-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
# a run: reads every 20 us from 100 ms before the last step's start to 60 ms after it, 1500 MHz
# until 10 ms into the step, 1800 after; a forward at 1-6 ms, a backward at 20-25 ms
for r in a b; do
    python3 - "$tmp/$r" <<'PY'
import sys
p = sys.argv[1]
t0 = 10**12
with open(p + ".clk", "w") as f:
    f.write("# dmuon clock probe: globaltimer ns %d = CLOCK_REALTIME 0 s\n" % t0)
    f.write("# step marks (globaltimer ns at each step's start, in step order): %d %d\n" % (t0 - 80 * 10**6, t0))
    f.write("# 8001 reads, ended by the run's end\nt_ns,cycles,mhz\n")
    t, c = t0 - 100 * 10**6, 0
    while t <= t0 + 60 * 10**6:
        mhz = 1500 if t < t0 + 10 * 10**6 else 1800
        f.write("%d,%d,%d\n" % (t, int(c), mhz))
        t += 20000
        c += mhz * 20
with open(p + ".trace.csv", "w") as f:
    f.write("# dmuon-trace-1 source=real-gpu model=M strategy=adamw cluster=h200 nranks=1\n")
    f.write("rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us\n")
    f.write("0,compute,0,forward,1000.0,5000.0,1e9,2e12,0,-1,0\n")
    f.write("0,compute,1,backward,20000.0,5000.0,2e9,4e12,0,-1,0\n")
PY
done
out=$(python3 "$SRC/tools/clock_trace.py" --bin-ms 1 --from-ms 8 --to-ms 12 "$tmp/a.clk" "$tmp/a.trace.csv" 2>&1)
is "clock_trace: exit 0" "$?" 0
like "  ... the forward at 1500 MHz" "$out" "  forward           1     5.000       1500"
like "  ... the backward at 1800 MHz" "$out" "  backward          1     5.000       1800"
like "  ... the bins switch at 10 ms" "$out" "+8:1500  +9:1500  +10:1800  +11:1800"
out=$(python3 "$SRC/tools/clock_trace.py" "$tmp/none.clk" "$tmp/a.trace.csv" 2>&1)
is "clock_trace: a missing file: exit 1" "$?" 1
like "  ... and named" "$out" "cannot read $tmp/none.clk"
if [ ! -x "$PA" ]; then
    echo "# $PA not built (make check builds it)"
    tap_end
    exit 0
fi
cal=$SRC/traces/calib/h200.calib
# one op of 1 s at the reference GEMM's rate (786.602 TFLOP/s, the calibration's): its demand is
# the GEMM's, 952.171 W; the second pass starts from the first's end: the settled clock
s=$(echo "0 1e6 786.602e12 0 1e6" | "$PA" h200 "$cal" --passes 2)
is "power_along: exit 0" "$?" 0
want=$(awk 'BEGIN{printf "%.4f", 1 - 0.000704621 * (952.171 - 700)}')
got=$(printf '%s' "$s" | awk '{printf "%.4f", $1}')
is "  ... a settled GEMM at 1 - slope (gemm_w - limit) ($want)" "$got" "$want"
# 200 ms of GEMMs, 20 ms idle, 20 ms more: without a hold the demand falls in the idle and the
# second op starts near full clock; with a 30 ms hold it starts at the settled clock
ops='0 200e3 157.3204e12 0 200e3\n220e3 20e3 15.73204e12 0 20e3\n'
s0=$(printf "$ops" | "$PA" h200 "$cal" --passes 1 --hold 0 | tail -1)
s1=$(printf "$ops" | "$PA" h200 "$cal" --passes 1 --hold 30 | tail -1)
is "  ... after 20 ms idle, a 30 ms hold keeps the clock down (hold $s1, none $s0)" \
    "$(awk -v a="$s1" -v b="$s0" 'BEGIN{print (a < 0.9 && b > 0.95) ? "yes" : "no"}')" yes
"$PA" h200 "$cal" --bogus 1 </dev/null >/dev/null 2>&1
is "  ... an unknown option: exit 2" "$?" 2
out=$(python3 "$SRC/tools/clock_fit.py" --tool "$PA" --tau 27 --fall 27 --hold 0,10 "$cal" "$tmp/a" "$tmp/b" 2>&1)
is "clock_fit: exit 0" "$?" 0
like "  ... its grid through power_along" "$out" "# tau tau_fall hold: mean |s model - s measured| over 2 forward/backward ops"
tap_end
