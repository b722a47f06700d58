#!/usr/bin/env python3
"""row_clock.py: the NS rows a device call timed with the bench's clock read (`dmuon bench kernels`
prints each row's SM clock, column MHz: kernels/ns_elem.cu ns_time_last_clock), side by side per
timing window, and each row's time brought to one clock.

    python3 tools/row_clock.py LOGDIR [--ref-mhz F]

LOGDIR holds the bench outputs ns_WINDOW.KIND.txt (tools/device-stages.sh rowclock and
rowclockh100: WINDOW rc15 = 3 warm-up + 15 timed runs, rc60 = 3 + 60, rcw30 = 30 + 15, rest = one
run after 300 ms idle, its clock the clock a rested card gives that row's work). For each
row: its median and clock under each window, and median x clock / F (the time at clock F, default
the GPU's top clock 1980 MHz), which is what a row priced through its clock stands for: if a row's
time differs between windows only by its clock, that product is the same in every window."""
import argparse
import glob
import os
import re
import sys

LINE = re.compile(r"^\s+(\d+)x(\d+)\s+(\d+)\s+ns\s+(\S+)\s+\S+\s+\S+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir")
    ap.add_argument("--ref-mhz", type=float, default=1980.0)
    a = ap.parse_args()
    rows = {}
    wins = []
    for path in sorted(glob.glob(os.path.join(a.logdir, "ns_*.txt"))):
        name = os.path.basename(path)[3:-4]
        win, _, kind = name.partition(".")
        if win not in wins:
            wins.append(win)
        for line in open(path, errors="replace"):
            m = LINE.match(line)
            if m:
                key = (kind, int(m[1]), int(m[2]), int(m[3]), m[4])
                rows.setdefault(key, {})[win] = (float(m[5]), float(m[6]))
    if not rows:
        print(f"{a.logdir}: no bench rows with a clock (ns_*.txt)")
        return 1
    print(f"# per row and window: median us @ clock MHz -> us at {a.ref_mhz:.0f} MHz; last: the spread of the last column"
          " over the windows, and of the medians")
    print("# %-10s %-12s %5s %-6s " % ("kind", "shape", "batch", "algo") + " ".join("%-30s" % w for w in wins) +
          " clk-spread med-spread")
    for key in sorted(rows, key=lambda k: (k[0], k[1] * k[2] * k[3])):
        d = rows[key]
        cells, at, med = [], [], []
        for w in wins:
            if w in d and d[w][1] > 0:
                us, mhz = d[w]
                t = us * mhz / a.ref_mhz
                at.append(t)
                med.append(us)
                cells.append("%9.1f @%5.0f -> %9.1f" % (us, mhz, t))
            else:
                cells.append("%-30s" % "-")
        sp = (max(at) / min(at) - 1) * 100 if len(at) > 1 else 0
        sm = (max(med) / min(med) - 1) * 100 if len(med) > 1 else 0
        print("  %-10s %-12s %5d %-6s " % (key[0], f"{key[1]}x{key[2]}", key[3], key[4]) + " ".join(cells) +
              " %8.1f%% %8.1f%%" % (sp, sm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
