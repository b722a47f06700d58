#!/bin/sh
# same-results.sh: two dmuon builds must give the same simulation, bit for bit: `sim --json` of
# each (model, GPU count, strategy, option set) case, times in ns, compared whole but for the
# simulation's own wall time; one line per case (same or DIFF, and both builds' CPU seconds),
# then a count. For a change meant to keep every result (a faster path, a new data structure).
# Usage: tools/same-results.sh BASE_BIN NEW_BIN [GPUS...]      (default GPUS: 16 256)
#   MODELS="a b" to choose models (default: every bundled one); STRATS (default dmuon muon-ddp
#   adamw); OPTSETS: option sets separated by ';' (default: none; --hsdp; --hierarchical with the
#   2-GPU calibration, whose NVLink slows under compute: capacity changes).
# Run it from the checkout's root; exit 1 when any case differs or fails in one build only.
if [ $# -lt 2 ]; then
    echo "usage: $0 BASE_BIN NEW_BIN [GPUS...]" >&2
    exit 2
fi
B=$1 N=$2
shift 2
GPUS=${*:-16 256}
for bin in "$B" "$N"; do
    [ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 2; }
done
ls models/*.json > /dev/null 2>&1 || { echo "$0: no models/*.json here: run it from the checkout's root" >&2; exit 2; }
MODELS=${MODELS:-$(for f in models/*.json; do basename "$f" .json; done)}
STRATS=${STRATS:-dmuon muon-ddp adamw}
OPTSETS=${OPTSETS:-" ;--hsdp;--hierarchical --calibration traces/calib/h200x2.calib"}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
echo "# $0 $B $N $GPUS ($(date -u '+%Y-%m-%d %H:%M UTC'))"
same=0 diff=0
for m in $MODELS; do
    for g in $GPUS; do
        for s in $STRATS; do
            echo "$OPTSETS" | tr ';' '\n' | while IFS= read -r o; do
                for b in base new; do
                    bin=$B
                    [ $b = new ] && bin=$N
                    # shellcheck disable=SC2086
                    /usr/bin/time -f '%U' -o "$T/t.$b" "$bin" sim -m "$m" -g "$g" --strategy "$s" $o --json > "$T/$b.json" 2> "$T/$b.err"
                    echo $? > "$T/rc.$b"
                    grep -v '"sim_wall_s"' "$T/$b.json" > "$T/$b.cmp"
                done
                r=same
                if ! cmp -s "$T/base.cmp" "$T/new.cmp" || ! cmp -s "$T/rc.base" "$T/rc.new"; then r=DIFF; fi
                printf '%-5s %-22s %5s %-9s %-40s base %6ss new %6ss rc %s\n' "$r" "$m" "$g" "$s" "${o:-(none)}" \
                    "$(tail -1 "$T/t.base")" "$(tail -1 "$T/t.new")" "$(cat "$T/rc.new")"
            done
        done
    done
done | tee "$T/all"
same=$(grep -c '^same' "$T/all")
diff=$(grep -c '^DIFF' "$T/all")
echo "# $same same, $diff different"
[ "$diff" -eq 0 ]
