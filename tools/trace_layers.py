#!/usr/bin/env python3
"""trace_layers.py: the executor's forward and backward per decoder layer from a `dmuon run
--trace FILE.csv` trace, beside PyTorch's from tools/torch_step_bench.py --json (issue 13: the
executor's per-layer forward and backward within 20% of PyTorch's).

The decoder layers are those of one stack of the model file: the stack named "layers" (or ending
in ".layers"), else the one with the most layers on the main stream, or --stack NAME. The trace's
layer column is the global layer index (stacks in file order). Means over that stack's layers of
one rank's forward and backward ops (the trace holds one step: the last one run).

Usage:
  tools/trace_layers.py TRACE.csv --model models/llama-3.2-3b.json [--rank 0] [--stack NAME]
      [--torch TORCH.json [--torch-part vision]] [--each]
(--torch-part vision: PyTorch's vision-tower blocks of a VLM, to hold against --stack visual.blocks)
Prints one summary line (and with --torch the ratios executor/PyTorch); exit 0, or 1 when the
trace has no forward/backward ops of that stack, 2 on bad usage.
"""
import argparse
import csv
import json
import statistics
import sys


def stacks_of(model_path):
    with open(model_path) as f:
        m = json.load(f)
    out, first = [], 0
    for s in m.get("stacks", []):
        n = int(s.get("layers", 1))
        out.append({"name": s["name"], "first": first, "layers": n, "stream": s.get("stream")})
        first += n
    return m.get("name", model_path), out


def main_stack(stacks, main_stream):
    for s in stacks:
        if s["name"] == "layers" or s["name"].endswith(".layers"):
            return s
    on_main = [s for s in stacks if s["stream"] in (None, main_stream)]
    return max(on_main or stacks, key=lambda s: s["layers"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--model", required=True, help="the model file the run used")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--stack")
    ap.add_argument("--torch", help="tools/torch_step_bench.py --json output")
    ap.add_argument("--torch-part", choices=["layers", "vision"], default="layers",
                    help="which of the PyTorch JSON's timings: the decoder layers or the vision tower's blocks")
    ap.add_argument("--each", action="store_true", help="one line per layer")
    a = ap.parse_args()
    name, stacks = stacks_of(a.model)
    with open(a.model) as f:
        streams = json.load(f).get("streams") or [{"name": "text"}]
    if a.stack:
        st = [s for s in stacks if s["name"] == a.stack]
        if not st:
            sys.stderr.write("trace_layers: no stack %s in %s (%s)\n" % (a.stack, a.model,
                                                                        ", ".join(s["name"] for s in stacks)))
            return 2
        st = st[0]
    else:
        st = main_stack(stacks, streams[0]["name"])
    lo, hi = st["first"], st["first"] + st["layers"]
    fwd, bwd = {}, {}
    with open(a.trace) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for r in rows:
            if int(r["rank"]) != a.rank:
                continue
            layer = int(r["layer"])
            if not lo <= layer < hi:
                continue
            if r["kind"] == "forward":
                fwd[layer] = fwd.get(layer, 0.0) + float(r["dur_us"]) / 1e3
            elif r["kind"] == "backward":
                bwd[layer] = bwd.get(layer, 0.0) + float(r["dur_us"]) / 1e3
    if not fwd or not bwd:
        sys.stderr.write("trace_layers: %s has no forward and backward ops of stack %s (layers %d..%d) on rank %d\n" %
                         (a.trace, st["name"], lo, hi - 1, a.rank))
        return 1
    mf, mb = statistics.mean(fwd.values()), statistics.mean(bwd.values())
    print("# executor %s, stack %s: %d layers on rank %d, per layer forward %.3f ms, backward %.3f ms" %
          (name, st["name"], len(fwd), a.rank, mf, mb))
    if a.each:
        for layer in sorted(fwd):
            print("  layer %4d  forward %8.3f ms  backward %8.3f ms" % (layer, fwd[layer], bwd.get(layer, float("nan"))))
    if a.torch:
        with open(a.torch) as f:
            t = json.load(f)
        part = t["median"] if a.torch_part == "layers" else t.get("vision", {}).get("median")
        if not part:
            sys.stderr.write("trace_layers: %s has no %s timings\n" % (a.torch, a.torch_part))
            return 2
        tf, tb = part["layer_forward_ms"], part["layer_backward_ms"]
        print("# torch %s %s (%s, torch %s, transformers %s): per layer forward %.3f ms, backward %.3f ms" %
              (t.get("model"), a.torch_part, t.get("gpu"), t.get("torch"), t.get("transformers"), tf, tb))
        print("# executor / torch: forward %.2f, backward %.2f (goal: within 0.80..1.20)" % (mf / tf, mb / tb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
