#!/usr/bin/env python3
"""validate_ab.py: the measured phases of the same cases in two (or three) `dmuon validate` tables
side by side: an A/B of one executor change on one card (A the change, B without it), and
optionally an older call's table for reference. Cases match by model, strategy, gpus and tokens.

    tools/validate_ab.py A/validate.csv B/validate.csv [--ref OLD/validate.csv] [--strategy S]
"""
import argparse
import csv
import sys

PHASES = ["step", "forward", "backward", "optimizer", "exposed-comm"]


def load(path, strategy):
    d = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if strategy and r["strategy"] != strategy:
                continue
            d[(r["model"], r["strategy"], r["gpus"], r["tokens"], r["phase"])] = float(r["measured_ms"])
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--ref", help="a third table, shown beside (another call)")
    ap.add_argument("--strategy", help="only this strategy")
    o = ap.parse_args()
    a, b = load(o.a, o.strategy), load(o.b, o.strategy)
    ref = load(o.ref, o.strategy) if o.ref else {}
    cases = sorted({k[:4] for k in a} & {k[:4] for k in b})
    if not cases:
        sys.exit("validate_ab.py: no case in both tables")
    print("# measured ms: A %s, B %s%s; change (A - B) / B" % (o.a, o.b, ", ref " + o.ref if o.ref else ""))
    print("%-22s %-9s %4s %6s %-12s %10s %10s %8s %10s" % ("model", "strategy", "gpus", "tokens", "phase", "A", "B",
                                                           "change", "ref"))
    for c in cases:
        for ph in PHASES:
            k = c + (ph,)
            if k not in a or k not in b:
                continue
            x, y = a[k], b[k]
            ch = "%+7.1f%%" % ((x - y) / y * 100) if y > 0 else "       -"
            print("%-22s %-9s %4s %6s %-12s %10.1f %10.1f %s %10s" % (c[0], c[1], c[2], c[3], ph, x, y, ch,
                                                                     "%.1f" % ref[k] if k in ref else "-"))


if __name__ == "__main__":
    main()
