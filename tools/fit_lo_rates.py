#!/usr/bin/env python3
"""tools/fit_lo_rates.py: the two compute streams' sharing of a GPU (the cluster's lo_main_rate
and lo_rate, core/cluster.h), measured from executor traces of the same plan run two ways:
ONE.csv with the optimizer on the compute stream after the backward (each op alone on the GPU)
and STREAM.csv with it on compute-lo beside the backward (--ns-under-backward stream).

Each compute op is matched across the two traces by (kind, layer, bytes, FLOPs, occurrence). Its
time alone a comes from ONE; in STREAM it took d, a share o of it beside an op of the other
compute stream. The simulator's model: the op's work a is done at rate 1 alone and at rate x
beside the other stream's op, so a = d (1 - o) + d o x. Least squares over every op of a
stream that overlapped (o > 0) gives x: lo_main_rate from the compute stream's ops, lo_rate
from compute-lo's. Several trace pairs pool their ops.

  tools/fit_lo_rates.py ONE.csv STREAM.csv [ONE2.csv STREAM2.csv ...]
"""
import csv
import sys

COMPUTE = ("forward", "backward", "ns", "muon-update", "adamw")


def read(path):
    ops = []
    with open(path) as f:
        rows = [l for l in f if not l.startswith("#")]
    for r in csv.DictReader(rows):
        if r["kind"] not in COMPUTE or int(r["rank"]) != 0:
            continue
        ops.append({"stream": r["stream"], "kind": r["kind"], "layer": r["layer"], "bytes": r["bytes"],
                    "flops": r["flops"], "t0": float(r["ts_us"]), "d": float(r["dur_us"])})
    return ops


def keyed(ops):
    seen, out = {}, {}
    for o in ops:
        k = (o["kind"], o["layer"], o["bytes"], o["flops"])
        n = seen.get(k, 0)
        seen[k] = n + 1
        out[k + (n,)] = o
    return out


def overlap(o, others):
    a, b = o["t0"], o["t0"] + o["d"]
    iv = sorted((max(a, x["t0"]), min(b, x["t0"] + x["d"])) for x in others)
    tot, end = 0.0, a
    for lo, hi in iv:
        lo = max(lo, end)
        if hi > lo:
            tot += hi - lo
            end = hi
    return tot / (b - a) if b > a else 0.0


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        sys.exit(__doc__)
    sums = {"compute": [0.0, 0.0, 0], "compute-lo": [0.0, 0.0, 0]}
    for i in range(0, len(argv), 2):
        one, st = keyed(read(argv[i])), read(argv[i + 1])
        lo = [o for o in st if o["stream"] == "compute-lo"]
        hi = [o for o in st if o["stream"] != "compute-lo"]
        pair = {"compute": 0, "compute-lo": 0, "unmatched": 0}
        for k, o in keyed(st).items():
            s = "compute-lo" if o["stream"] == "compute-lo" else "compute"
            a = one.get(k)
            if a is None:
                pair["unmatched"] += 1
                continue
            ov = overlap(o, hi if s == "compute-lo" else lo)
            if ov <= 0.01:
                continue
            d, alone = o["d"], a["d"]
            u = d * ov  # the time it spent beside the other stream
            sums[s][0] += u * (alone - d * (1 - ov))
            sums[s][1] += u * u
            sums[s][2] += 1
            pair[s] += 1
        print("# %s / %s: overlapped ops: %d compute, %d compute-lo; %d unmatched" %
              (argv[i], argv[i + 1], pair["compute"], pair["compute-lo"], pair["unmatched"]))
    for s, key in (("compute", "lo_main_rate"), ("compute-lo", "lo_rate")):
        num, den, n = sums[s]
        if n == 0 or den <= 0:
            print("%s: no op of %s overlapped the other stream" % (key, s))
            continue
        x = num / den
        print("%s = %.3f  (%d ops of %s)" % (key, min(max(x, 0.01), 1.0), n, s))


if __name__ == "__main__":
    main(sys.argv[1:])
