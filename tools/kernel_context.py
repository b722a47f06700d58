#!/usr/bin/env python3
"""tools/kernel_context.py: hold every forward/backward kernel as a step ran it against the cost
table's row of the same kernel, to see where a step's compute differs from the bench's.

Input: the executor's per-kernel times (DMUON_KERNEL_TIMES=FILE dmuon run ..., one CSV per model
and strategy, named PREFIX_MODEL_STRATEGY.csv as tools/device-stages.sh's stepprobe writes them)
and one or more dmuon-costs-2 tables (bench work --out). Output, per model and strategy: the
in-step time over the row's, summed per pass (fwd, bwd) and per kernel kind, and with --by-index
per position in the layer (is a kernel that reads an input another one just read faster?).
With two tables, the rows both hold are compared (the same kernels measured in two calls).

  tools/kernel_context.py --table T.csv DIR             (every PREFIX_*_*.csv in DIR)
  tools/kernel_context.py --table A.csv --table B.csv   (rows of A against B)
"""
import argparse
import csv
import glob
import os
import statistics
import sys

STRATEGIES = ("muon-ddp", "dmuon", "adamw", "muon-fsdp")


def table(path):
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("gpu,"):
                continue
            c = line.strip().split(",")
            if len(c) < 11:
                continue
            rows[(c[1], c[2], c[3], c[4], c[5], c[6])] = float(c[8])
    return rows


def compare_tables(a, b, pa, pb):
    common = sorted(set(a) & set(b), key=lambda k: -b[k])
    ratios = [a[k] / b[k] for k in common if b[k] > 0]
    if not ratios:
        print("no rows in common")
        return
    print(f"# {pa} against {pb}: {len(common)} rows in common; median ratio {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}..{max(ratios):.3f}")
    print(f"# {'kernel':42s} {'A_us':>9s} {'B_us':>9s}  A/B")
    for k in common[:25]:
        print(f"  {','.join(k):42s} {a[k]:9.2f} {b[k]:9.2f}  {a[k] / b[k]:.3f}")


def context(rows, d):
    files = sorted(glob.glob(os.path.join(d, "*_*_*.csv")))
    seen = 0
    for path in files:
        base = os.path.basename(path)[:-4]
        st = next((s for s in STRATEGIES if base.endswith("_" + s)), None)
        if not st:
            continue
        model = base[: -len(st) - 1].split("_", 1)[-1]
        with open(path) as f:
            recs = list(csv.DictReader(f))
        if not recs or "us" not in recs[0]:
            continue
        seen += 1
        tot = {}
        kinds = {}
        miss = 0.0
        for r in recs:
            key = (r["kind"], r["op"], r["m"], r["n"], r["k"], r["batch"])
            us = float(r["us"])
            row = rows.get(key)
            if row is None:
                miss += us
                continue
            t = tot.setdefault(r["pass"], [0.0, 0.0])
            t[0] += us
            t[1] += row
            kk = kinds.setdefault((r["pass"], r["kind"], r["op"]), [0.0, 0.0])
            kk[0] += us
            kk[1] += row
        parts = "  ".join(f"{p} {v[0] / v[1]:.3f} ({v[0] / 1e3:.1f} ms)" for p, v in sorted(tot.items(), reverse=True))
        print(f"{model:24s} {st:9s} in-step / row: {parts}; {miss / 1e3:.1f} ms of kernels without a row")
        for (p, kd, op), (s, r) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
            if r > 0.05 * sum(v[1] for v in tot.values()):
                print(f"    {p} {kd:5s} {op:12s} {s / 1e3:8.2f} ms in the step, {r / 1e3:8.2f} ms by the rows: {s / r:.3f}")
    if not seen:
        sys.exit(f"kernel_context: no per-kernel CSV (PREFIX_MODEL_STRATEGY.csv) in {d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", action="append", required=True, help="a dmuon-costs-2 table (twice: compare them)")
    ap.add_argument("dir", nargs="?", help="folder of per-kernel CSVs")
    a = ap.parse_args()
    ts = [table(p) for p in a.table]
    if len(ts) == 2:
        compare_tables(ts[0], ts[1], a.table[0], a.table[1])
    if a.dir:
        context(ts[0], a.dir)


if __name__ == "__main__":
    main()
