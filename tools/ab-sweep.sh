#!/bin/sh
# ab-sweep.sh: two dmuon builds timed side by side on every bundled model, one `sim` each, the
# two alternating per model (this host's speed drifts by tens of percent within minutes: only a
# pair run back to back compares). Prints one row per model and build: wall, user and system
# seconds, peak memory, the simulated step (equal steps: the change kept the plans).
# Usage: tools/ab-sweep.sh BASE_BIN NEW_BIN GPUS [sim options...]
#   e.g. tools/ab-sweep.sh /tmp/dmuon-base ./dmuon 4096 --hsdp --zero 3 > ab.txt
# Run it from the checkout's root (it reads models/*.json); nothing else should run beside it.
if [ $# -lt 3 ]; then
    echo "usage: $0 BASE_BIN NEW_BIN GPUS [sim options...]" >&2
    exit 2
fi
B=$1 N=$2 G=$3
shift 3
for bin in "$B" "$N"; do
    [ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 2; }
done
ls models/*.json > /dev/null 2>&1 || { echo "$0: no models/*.json here: run it from the checkout's root" >&2; exit 2; }
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
echo "# $0 $B $N $G $* ($(date -u '+%Y-%m-%d %H:%M UTC'))"
printf '%-22s %-5s %7s %7s %7s %7s  %s\n' model build wall_s user_s sys_s rss_MB step
for f in models/*.json; do
    m=$(basename "$f" .json)
    for b in base new; do
        bin=$B
        [ $b = new ] && bin=$N
        /usr/bin/time -f 'TIME %e %U %S %M' "$bin" sim -m "$m" -g "$G" "$@" > "$T/out" 2> "$T/err"
        rc=$?
        t=$(grep '^TIME' "$T/err" | tail -1)
        step=$(grep -m1 '^step time' "$T/out" | awk '{print $3, $4}')
        [ $rc -ne 0 ] && step="failed (rc $rc): $(grep -v '^TIME' "$T/err" | tail -1)"
        echo "$t" | awk -v m="$m" -v b=$b -v s="$step" \
            '{printf "%-22s %-5s %7s %7s %7s %7.0f  %s\n", m, b, $2, $3, $4, $5 / 1024, s}'
    done
done
