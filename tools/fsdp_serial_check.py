#!/usr/bin/env python3
"""fsdp_serial_check.py: does a muon-fsdp trace show the PyTorch form's serial timeline? On rank 0,
after the last backward op: the all-gathers and NS ops in start order, each NS starting after
the end of the gather just before it and the next gather not starting before that NS ends.

    python3 tools/fsdp_serial_check.py TRACE.csv...     (dmuon-trace-1, e.g. dmuon run --trace)

Prints per trace the NS count, how many follow their gather, how many overlap the next gather,
and the first kinds (g gather, N ns); exit 1 when a trace does not show the serial timeline."""
import csv
import sys


def check(path):
    with open(path) as f:
        ev = [r for r in csv.DictReader(l for l in f if not l.startswith("#")) if r["rank"] == "0"]
    bwd = [float(r["ts_us"]) + float(r["dur_us"]) for r in ev if r["kind"] == "backward"]
    if not bwd:
        print(f"{path}: no backward op on rank 0")
        return False
    bend = max(bwd)
    after = sorted((r for r in ev if float(r["ts_us"]) >= bend - 1e-3 and r["kind"] in ("all-gather", "ns")),
                   key=lambda r: float(r["ts_us"]))
    n = follows = overlaps = 0
    for i, r in enumerate(after):
        if r["kind"] != "ns":
            continue
        n += 1
        start, end = float(r["ts_us"]), float(r["ts_us"]) + float(r["dur_us"])
        prev = [x for x in after[:i] if x["kind"] == "all-gather"]
        if prev and float(prev[-1]["ts_us"]) + float(prev[-1]["dur_us"]) <= start + 1e-3:
            follows += 1
        nxt = [x for x in after[i + 1:] if x["kind"] == "all-gather"]
        if nxt and float(nxt[0]["ts_us"]) < end - 1e-3:
            overlaps += 1
    seq = "".join("g" if r["kind"] == "all-gather" else "N" for r in after[:12])
    good = n > 0 and follows == n and overlaps == 0
    print(f"{path}: {n} NS after the backward, {follows} right after their gather, {overlaps} overlapping the next "
          f"gather; first: {seq}; serial: {'yes' if good else 'no'}")
    return good


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(0 if all([check(p) for p in sys.argv[1:]]) else 1)
