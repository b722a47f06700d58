#!/bin/bash
# The sliding-window bands predicted before any device call: the simulator with the committed
# calibration and tables, one H200, the windowed models of models/extra under adamw and dmuon at
# 4096 and 8192 tokens, whole, causal with the model's window (the band), and causal with the
# window taken out of a copy of the model (the triangle). Run from the repository root.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# predictions written before any device call (git $(git rev-parse --short HEAD), $(date -u +%FT%TZ)): dmuon sim --model M --gpus 1 --cluster h200 --calibration traces/calib/h200.calib --strategy S --overlap interleave --tokens T --attention A --json"
echo "# model strategy tokens attention: step, forward, backward, optimizer, exposed (ms); estimated peak memory GiB (causal-nowin: the model without its window)"
for m in gemma-3-1b-pt phi-3-mini-4k-instruct mistral-7b-v0.1-12l gpt-oss-20b-2l; do
    sed -E 's/, "window": [0-9]+(, "window_layers": "[sf]+")?//' models/extra/$m.json > "$tmp/$m.json"
    for s in adamw dmuon; do
        for t in 4096 8192; do
            for a in whole causal causal-nowin; do
                f=models/extra/$m.json att=$a
                [ "$a" = causal-nowin ] && f=$tmp/$m.json att=causal
                ./dmuon sim --model "$f" --gpus 1 --cluster h200 --calibration traces/calib/h200.calib --strategy $s \
                    --overlap interleave --tokens $t --attention $att --json 2>"$tmp/err" > "$tmp/out.json" ||
                    { echo "$m $s $t $a: $(head -c 200 "$tmp/err")"; continue; }
                python3 - "$m" "$s" "$t" "$a" "$tmp/out.json" <<'PY'
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
