#!/usr/bin/env python3
"""clock_trace.py: a step's ops beside the SM clock they ran at, read on the GPU itself
(DMUON_CLOCK_TRACE, kernels/clock_probe.h: cycles over global-timer nanoseconds, every ~20 us).
The clock over an op is its cycles over its nanoseconds (the cycle counter interpolated between
two reads), so an op of 20 us already has its own clock. Prints, for the run's last step (the
trace's, `dmuon run --trace`): the clock per phase (forward, backward, NS, the updates), per
forward and backward layer its time and clock, and the clock in 5 ms bins from 30 ms before the
step to its end (the end of the step before, where the NS phase was, included).
With a DMUON_KERNEL_TIMES file (the same run), the kernels of each kind: median clock and time.
--bin-ms, --from-ms and --to-ms set the bins (ms from the step's start; --to-ms: its end).

    python3 tools/clock_trace.py [--bin-ms 5] [--from-ms -30] [--to-ms T] CLOCK_FILE TRACE.csv [KERNEL_TIMES.csv]
"""
import argparse
import bisect
import collections
import csv
import statistics
import sys


def read_file(path):
    """the file's lines, or exit naming it"""
    try:
        with open(path) as f:
            return f.read().split("\n")
    except OSError as e:
        sys.exit("%s: cannot read %s: %s" % (sys.argv[0].rsplit("/", 1)[-1], path, e.strerror))


def read_clock(path):
    marks, t, c = [], [], []
    for line in read_file(path):
        if line.startswith("# step marks"):
            marks = [int(x) for x in line.split(":", 1)[1].split()]
        elif line[:1].isdigit():
            a, b, _ = line.split(",")
            t.append(int(a))
            c.append(int(b))
    return marks, t, c


def cycles_at(t, c, x):
    """the cycle counter at global time x (linear between reads)"""
    i = bisect.bisect_left(t, x)
    if i <= 0:
        return c[0]
    if i >= len(t):
        return c[-1]
    f = (x - t[i - 1]) / max(1, t[i] - t[i - 1])
    return c[i - 1] + f * (c[i] - c[i - 1])


def mhz(t, c, a, b):
    """mean SM clock over [a, b] (ns of the global timer); None outside the samples"""
    if b <= a or a < t[0] or b > t[-1]:
        return None
    return (cycles_at(t, c, b) - cycles_at(t, c, a)) * 1e3 / (b - a)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clock")
    ap.add_argument("trace")
    ap.add_argument("kernels", nargs="?")
    ap.add_argument("--bin-ms", type=float, default=5.0)
    ap.add_argument("--from-ms", type=float, default=-30.0)
    ap.add_argument("--to-ms", type=float)
    opt = ap.parse_args()
    marks, t, c = read_clock(opt.clock)
    if not marks or len(t) < 2:
        sys.exit("clock_trace: %s holds no step mark or too few reads" % opt.clock)
    t0 = marks[-1]  # the last step's start: the trace's ops are from it
    ops = []
    rows = [l for l in read_file(opt.trace) if l and not l.startswith("#")]
    for r in csv.DictReader(rows):
        if r["stream"] != "compute" or r["rank"] != "0":
            continue
        a = t0 + float(r["ts_us"]) * 1e3
        ops.append((r["kind"], int(r["layer"]), float(r["dur_us"]), a, a + float(r["dur_us"]) * 1e3))
    if not ops:
        sys.exit("clock_trace: no compute op of rank 0 in %s" % opt.trace)
    end = max(o[4] for o in ops)
    print("# %s: %d reads, %d step marks; the last step %.3f ms" % (opt.clock, len(t), len(marks), (end - t0) / 1e6))
    print("# phase          ops   time_ms   clock_MHz")
    by = collections.defaultdict(list)
    for o in ops:
        by[o[0]].append(o)
    for k, L in by.items():
        ns = sum(o[4] - o[3] for o in L)
        cyc = sum(cycles_at(t, c, o[4]) - cycles_at(t, c, o[3]) for o in L)
        print("  %-14s %4d %9.3f %10.0f" % (k, len(L), ns / 1e6, cyc * 1e3 / ns if ns > 0 else 0))
    for k in ("forward", "backward"):
        L = sorted(by.get(k, []), key=lambda o: o[3])
        if not L:
            continue
        print("# %s layers in order: layer time_us clock_MHz" % k)
        print("  " + "  ".join("%d:%.0f@%.0f" % (o[1], o[2], mhz(t, c, o[3], o[4]) or 0) for o in L))
    w = opt.bin_ms * 1e6
    stop = t0 + opt.to_ms * 1e6 if opt.to_ms is not None else end
    print("# clock in %g ms bins from %g ms from the step's start (ms from it: MHz)" % (opt.bin_ms, opt.from_ms))
    b, line = t0 + opt.from_ms * 1e6, []
    while b < stop:
        m = mhz(t, c, b, min(b + w, stop))
        if m:
            line.append("%+.*f:%.0f" % (0 if opt.bin_ms >= 1 else 1, (b - t0) / 1e6, m))
        b += w
    print("  " + "  ".join(line))
    if opt.kernels:
        fwd0 = min((o[3] for o in ops if o[0] == "forward"), default=t0)
        kk = collections.defaultdict(list)
        for r in csv.DictReader(l for l in read_file(opt.kernels) if l):
            a = fwd0 + float(r["start_us"]) * 1e3
            m = mhz(t, c, a, a + float(r["us"]) * 1e3)
            if m:
                kk[(r["pass"], r["kind"], r["op"], r["m"], r["n"], r["k"])].append((float(r["us"]), m))
        print("# kernels (pass kind op m n k): count, median us, median clock MHz, min-max clock")
        for key, L in sorted(kk.items(), key=lambda x: -sum(u for u, _ in x[1])):
            ms = [m for _, m in L]
            print("  %-40s %4d %9.1f %6.0f %6.0f-%.0f" % (" ".join(key), len(L), statistics.median(u for u, _ in L),
                                                    statistics.median(ms), min(ms), max(ms)))


if __name__ == "__main__":
    main()
