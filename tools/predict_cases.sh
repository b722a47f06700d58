#!/bin/bash
# tools/predict_cases.sh: the simulator's predictions of a validation set, to commit before the
# device call that measures it (one H200, the committed calibration and tables): one line per
# model, strategy, token count and attention, step and phases in ms and the estimated peak memory.
#   MODELS="a b" STRATEGIES="adamw dmuon" TOKENS="4096 8192" ATTENTIONS="whole causal causal-nowin" \
#       tools/predict_cases.sh > predictions.txt
# CLUSTER (default h200) and CALIB (default traces/calib/h200.calib; '-' for none) for another GPU.
# MODELS: bundled names or files; causal-nowin: --attention causal on a copy of the model without
# its sliding window (the causal triangle). Run from the repository root with ./dmuon built.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CLUSTER=${CLUSTER:-h200} CALIB=${CALIB:-traces/calib/h200.calib}
calib=
[ "$CALIB" != - ] && calib="--calibration $CALIB"
echo "# predictions written before any device call (git $(git rev-parse --short HEAD), $(date -u +%FT%TZ)): dmuon sim --model M --gpus 1 --cluster $CLUSTER $calib --strategy S --overlap interleave --tokens T --attention A --json"
echo "# model strategy tokens attention: step, forward, backward, optimizer, exposed (ms); estimated peak memory GiB (causal-nowin: the model without its window)"
for m in $MODELS; do
    name=$(basename "$m" .json)
    src=$m
    [ -f "$m" ] || src=models/$m.json
    sed -E 's/, "window": [0-9]+(, "window_layers": "[sf]+")?//' "$src" > "$tmp/$name.json"
    for s in $STRATEGIES; do
        for t in $TOKENS; do
            for a in $ATTENTIONS; do
                f=$m att=$a
                [ "$a" = causal-nowin ] && f=$tmp/$name.json att=causal
                ./dmuon sim --model "$f" --gpus 1 --cluster "$CLUSTER" $calib --strategy "$s" \
                    --overlap interleave --tokens "$t" --attention "$att" --json 2>"$tmp/err" > "$tmp/out.json" ||
                    { echo "$name $s $t $a: $(head -c 200 "$tmp/err")"; continue; }
                python3 - "$name" "$s" "$t" "$a" "$tmp/out.json" <<'PY'
import json, sys
m, s, t, a, p = sys.argv[1:]
d = json.load(open(p))
u = lambda k: d[k] / 1000.0
print("%-22s %-6s %5s %-12s step %9.3f fwd %8.3f bwd %8.3f opt %8.3f exposed %7.3f  mem %.1f of %.1f GiB" % (
    m, s, t, a, u("step_us"), u("forward_us"), u("backward_us"), u("optimizer_us"), u("exposed_comm_us"),
    d["memory_peak_bytes"] / 2**30, d["gpu_memory_bytes"] / 2**30))
PY
            done
        done
    done
done
