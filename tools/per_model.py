#!/usr/bin/env python3
"""per_model.py: the replay errors of stored validations, per model (the table of a replay-check
folder's per-model.md).

Reads the replay.csv files that tools/replay_all.sh writes (OUTDIR/NAME/replay.csv) for the
calls named, and prints a Markdown table: per model, the cases and, per phase (step, forward,
backward, optimizer), the error range and mean |error| in % over those calls.

  python3 tools/per_model.py OUTDIR NAME [NAME...]
"""
import csv
import os
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[-1].strip(), file=sys.stderr)
        return 2
    out, names = sys.argv[1], sys.argv[2:]
    phases = ("step", "forward", "backward", "optimizer")
    acc, cases = {}, {}
    for n in names:
        path = os.path.join(out, n, "replay.csv")
        if not os.path.isfile(path):
            print(f"per_model: {path}: no such file (run tools/replay_all.sh first)", file=sys.stderr)
            return 1
        for r in csv.DictReader(open(path)):
            if r["phase"] not in phases:
                continue
            m = os.path.basename(r["model"])  # a model file's name without its folder and .json
            m = m[:-5] if m.endswith(".json") else m
            acc.setdefault(m, {}).setdefault(r["phase"], []).append(float(r["error_pct"]))
            cases.setdefault(m, set()).add((n, r["case"]))
    print("| model | cases | " + " | ".join(phases) + " |")
    print("|---|---|" + "---|" * len(phases))
    for m in sorted(acc):
        cells = []
        for ph in phases:
            v = acc[m].get(ph, [])
            cells.append("%+.1f..%+.1f (%.1f)" % (min(v), max(v), sum(abs(x) for x in v) / len(v)) if v else "-")
        print(f"| {m} | {len(cases[m])} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
