#!/usr/bin/env python3
"""clock_fit.py: the power model's time constants fitted to clocks read on the GPU (issue 14).

The model (core/power.h): a compute op runs at s = 1 - slope max(0, D - limit) of its own full
clock, D the demand filtered with tau (rising) and tau_fall (falling). The clock probe
(DMUON_CLOCK_TRACE, tools/clock_trace.py) reads the clock each op of a step ran at. An op's own
full clock (the "natural" one: forward GEMMs of a 3B model at 1024 tokens run at ~1780 MHz on a
rested H200, memory-bound updates at ~1960) is taken from a reference run whose forward and
backward never slowed (adamw at 1024 tokens: rested by its memory-bound update phase), op by op
(kind, layer); so the measured s of a forward or backward op in any other run of the same model is
its clock over the reference's. This script runs the model along each run's last step as `dmuon calibrate`
does along a trace (dm_power_along: twice round the step for the steady state, here with the idle
between steps between the passes; the demand of an op from its FLOPs and bytes over its
full-clock time, here its measured time times its measured s), for each (tau, tau_fall) of a grid,
and prints the error of the modelled s against the measured one over the forward and backward ops
(mean absolute, and per run the mean signed error of its forward and of its backward); --hold
adds the hold (power.hold_ms) to the grid. The model
is the simulator's own, run by tools/power_along (make tools/power_along).

    python3 tools/clock_fit.py CALIB REF_RUN RUN... [--tau 20,27,40,...] [--fall ...] [--hold 0,10,...] [--cluster h200]
a RUN is the path prefix of a clockprobe run (PREFIX.clk, PREFIX.trace.csv); REF_RUN's model
must be that of the runs it is the reference for (one reference: one model).
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from clock_trace import read_clock, read_file, mhz  # noqa: E402


def calib_tau(path):
    for line in read_file(path):
        line = line.split("#")[0].strip()
        if line.startswith("power.tau_ms") and "=" in line:
            return float(line.split("=")[1])
    return None


def load_run(prefix):
    marks, t, c = read_clock(prefix + ".clk")
    rows = [l for l in read_file(prefix + ".trace.csv") if l and not l.startswith("#")]
    ops = []
    for r in csv.DictReader(rows):
        if r["stream"] != "compute" or r["rank"] != "0":
            continue
        a = float(r["ts_us"])
        d = float(r["dur_us"])
        ops.append(dict(kind=r["kind"], layer=int(r["layer"]), t0=a, d=d, flops=float(r["flops"]),
                        bytes=float(r["bytes"]), mhz=mhz(t, c, marks[-1] + a * 1e3, marks[-1] + (a + d) * 1e3)))
    ops.sort(key=lambda o: o["t0"])
    gap = (marks[-1] - marks[-2]) / 1e3 - max(o["t0"] + o["d"] for o in ops) if len(marks) > 1 else 0
    return ops, max(0.0, gap)


def run_model(tool, cluster, calib, tau, fall, hold, ops, gap, sref):
    """s per op along the step from tools/power_along (core/power.h dm_power_along: twice round,
    the idle between steps between the passes); an op's full-clock time is its measured time
    times its measured s (1 where not measured)"""
    lines = []
    for o in ops:
        sm = sref(o)
        lines.append("%.3f %.3f %.6g %.6g %.3f" % (o["t0"], o["d"], o["flops"], o["bytes"], o["d"] * (sm if sm else 1)))
    out = subprocess.run([tool, cluster, calib, "--tau", str(tau), "--tau-fall", str(fall), "--hold", str(hold), "--gap", str(gap)],
                         input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout.split()
    return [float(x) for x in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("calib")
    ap.add_argument("ref")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tau", default="10,20,27,40,50,60,80,100,150")
    ap.add_argument("--fall", default="10,20,27,40,50,60,80,100,150")
    ap.add_argument("--hold", default="0")
    ap.add_argument("--cluster", default="h200")
    ap.add_argument("--tool", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "power_along"))
    a = ap.parse_args()
    if not os.access(a.tool, os.X_OK):
        sys.exit("clock_fit: %s is not built (make tools/power_along)" % a.tool)
    tau0 = calib_tau(a.calib)
    ref_ops, _ = load_run(a.ref)
    nat = {(o["kind"], o["layer"]): o["mhz"] for o in ref_ops if o["kind"] in ("forward", "backward") and o["mhz"]}
    runs = []
    for r in a.runs:
        ops, gap = load_run(r)

        def sref(o, nat=nat):
            n = nat.get((o["kind"], o["layer"]))
            return min(1.0, o["mhz"] / n) if n and o["mhz"] else None

        runs.append((r.rsplit("/", 1)[-1], ops, gap, sref))
    print("# %s: s measured = the op's clock over the reference's (%s) for the same (kind, layer)" % (a.calib, a.ref))
    best = None
    grid = []
    for tau in [float(x) for x in a.tau.split(",")]:
        for fall in [float(x) for x in a.fall.split(",")]:
            for hold in [float(x) for x in a.hold.split(",")]:
                errs, per = [], []
                for name, ops, gap, sref in runs:
                    s_mod = run_model(a.tool, a.cluster, a.calib, tau, fall, hold, ops, gap, sref)
                    e = {"forward": [], "backward": []}
                    for o, sm in zip(ops, s_mod):
                        if o["kind"] in e and sref(o) is not None and o["d"] > 100:
                            e[o["kind"]].append(sm - sref(o))
                    errs += e["forward"] + e["backward"]
                    per.append((name, sum(e["forward"]) / max(1, len(e["forward"])),
                                sum(e["backward"]) / max(1, len(e["backward"]))))
                mae = sum(abs(x) for x in errs) / len(errs)
                grid.append((mae, tau, fall, hold, per))
                if best is None or mae < best[0]:
                    best = (mae, tau, fall, hold, per)
    print("# tau tau_fall hold: mean |s model - s measured| over %d forward/backward ops" % len(errs))
    for mae, tau, fall, hold, _ in sorted(grid, key=lambda g: g[0])[:12]:
        print("  %5.0f %5.0f %5.0f  %.4f" % (tau, fall, hold, mae))
    for mae, tau, fall, hold, per in [g for g in grid if g[1] == tau0 and g[2] == tau0 and g[3] == 0] + [best]:
        print("# tau %g, tau_fall %g, hold %g (mean |error| %.4f): per run, the mean signed error of s over its forward, "
              "its backward" % (tau, fall, hold, mae))
        for name, ef, eb in per:
            print("  %-42s %+.3f %+.3f" % (name, ef, eb))

if __name__ == "__main__":
    main()
