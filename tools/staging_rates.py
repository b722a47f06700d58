#!/usr/bin/env python3
"""staging_rates.py: how fast the GPU executor's staging copies run in a step (the copies around
a reduce-scatter or all-gather, core/coll.h: dm_coll_staging_bytes/_copies), from one-GPU traces
with their plans: per case the collectives that ran alone (under 20% of their time beside a
compute op of the rank) and those beside compute (over 80%), their staging bytes over their
time; and a least-squares fit, beside compute, of duration = copies x a + bytes / bw.

    python3 tools/staging_rates.py CASE_DIR...     (each with real.csv and program.json, e.g.
                                                    traces/validate/h200-10/validate/*)
"""
import csv
import json
import sys


def analyze(d):
    with open(d + "/program.json") as f:
        ops = json.load(f)["ranks"][0]["ops"]
    with open(d + "/real.csv") as f:
        ev = [r for r in csv.DictReader(l for l in f if not l.startswith("#")) if r["rank"] == "0"]
    comp = sorted((float(r["ts_us"]), float(r["ts_us"]) + float(r["dur_us"])) for r in ev
                  if r["kind"] in ("forward", "backward", "ns", "muon-update", "adamw"))
    out = []
    for r in ev:
        if r["kind"] not in ("all-gather", "reduce-scatter"):
            continue
        o = ops[int(r["op"])]
        npar, b = len(o.get("params", [])), float(r["bytes"])
        rs = r["kind"] == "reduce-scatter"  # one rank: the staging of coll.h with n = 1
        sb, cp = (4 * b, 2 * npar) if rs else (2 * b, npar)
        s = float(r["ts_us"])
        e = s + float(r["dur_us"])
        ov = sum(max(0.0, min(e, ce) - max(s, cs)) for cs, ce in comp)
        out.append((sb, cp, e - s, ov / (e - s) if e > s else 0.0))
    return out


def rate(v):
    tb, td = sum(x[0] for x in v), sum(x[2] for x in v)
    return "%4d ops %6.0f GB/s" % (len(v), tb / td / 1e3) if td else "   0 ops"


def fit(v):  # duration = copies a + bytes x, the 2 x 2 normal equations
    s11 = sum(x[1] * x[1] for x in v)
    s12 = sum(x[1] * x[0] for x in v)
    s22 = sum(x[0] * x[0] for x in v)
    t1 = sum(x[1] * x[2] for x in v)
    t2 = sum(x[0] * x[2] for x in v)
    det = s11 * s22 - s12 * s12
    if len(v) < 5 or det == 0:
        return "-"
    a, x = (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det
    rel = (sum(((a * y[1] + x * y[0]) / y[2] - 1) ** 2 for y in v) / len(v)) ** 0.5
    return "a %6.1f us/copy, bw %6.0f GB/s, rms relative miss %.2f" % (a, 1 / x / 1e3 if x > 0 else -1, rel)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("%-46s %-22s %-22s %s" % ("case", "alone", "beside compute", "fit beside compute"))
    for d in sys.argv[1:]:
        o = analyze(d)
        beside = [x for x in o if x[3] > 0.8]
        print("%-46s %-22s %-22s %s" % (d.rstrip("/").split("/")[-1], rate([x for x in o if x[3] < 0.2]), rate(beside),
                                        fit(beside)))


if __name__ == "__main__":
    main()
