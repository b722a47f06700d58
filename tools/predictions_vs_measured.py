#!/usr/bin/env python3
"""predictions_vs_measured.py: a validate call's measured phases against predictions committed
before it (tools/predict_cases.sh's lines), case by case, and a summary per phase.

  python3 tools/predictions_vs_measured.py PREDICTIONS.txt ATTENTION VALIDATE.csv [--goal 10]

ATTENTION: which predicted attention the call ran (whole, causal). Prints one line per measured
case (model, strategy, tokens: phase measured / predicted / error) and, per phase, the mean
|error| and how many cases are within the goal."""
import csv
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    goal = 10.0
    if "--goal" in sys.argv:
        goal = float(sys.argv[sys.argv.index("--goal") + 1])
        args.remove(sys.argv[sys.argv.index("--goal") + 1])
    if len(args) != 3:
        sys.exit(__doc__)
    pred_path, att, meas_path = args
    pred = {}
    for line in open(pred_path):
        if line.startswith("#"):
            continue
        f = line.split()
        if len(f) < 14 or f[4] != "step":
            continue
        vals = dict(zip(f[4::2], f[5::2]))
        pred[(f[0], f[1], int(f[2]), f[3])] = {k: float(v) for k, v in vals.items() if k in ("step", "fwd", "bwd", "opt")}
    meas = {}
    for r in csv.DictReader(open(meas_path)):
        m = r["model"].split("/")[-1]
        m = m[:-5] if m.endswith(".json") else m
        meas.setdefault((m, r["strategy"], int(r["tokens"])), {})[r["phase"]] = float(r["measured_ms"])
    keys = (("step", "step"), ("forward", "fwd"), ("backward", "bwd"), ("optimizer", "opt"))
    print("# %s: measured against %s (attention %s); error = (predicted - measured) / measured" % (meas_path, pred_path, att))
    errs, within = {k: [] for k, _ in keys}, 0
    for k in sorted(meas):
        p = pred.get(k + (att,))
        if not p:
            print("%-26s %-8s %5d  no prediction" % k)
            continue
        out, ok = [], True
        for ph, pk in keys:
            mv = meas[k].get(ph)
            if mv is None or mv <= 0:
                continue
            e = 100.0 * (p[pk] - mv) / mv
            errs[ph].append(abs(e))
            ok &= abs(e) <= goal or (ph != "step" and mv < 0.01 * meas[k]["step"])
            out.append("%s %8.2f %8.2f %+6.1f%%" % (pk, mv, p[pk], e))
        within += ok
        print("%-26s %-8s %5d  " % k + "  ".join(out))
    n = len(errs["step"])
    for ph, _ in keys:
        v = errs[ph]
        if v:
            print("# %-9s mean |error| %.1f%%, max %.1f%%, within %g%%: %d of %d" % (ph, sum(v) / len(v), max(v), goal,
                                                                               sum(1 for x in v if x <= goal), len(v)))
    print("# cases with the step and every phase over 1%% of it within %g%%: %d of %d" % (goal, within, n))


if __name__ == "__main__":
    main()
