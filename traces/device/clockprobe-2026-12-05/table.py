#!/usr/bin/env python3
"""table.py REPORT NAME: one row of README.md's table from a tools/clock_trace.py report: the mean
clock (MHz) of each phase, then the median forward layer (time @ clock) of layers 2-6 and 20-27."""
import re
import statistics
import sys

txt = open(sys.argv[1]).read().split("\n")
ph = {}
for l in txt:
    m = re.match(r"\s+(forward|backward|ns|muon-update|adamw)\s+\d+\s+([\d.]+)\s+(\d+)", l)
    if m:
        ph[m.group(1)] = int(m.group(3))
fl = [l for i, l in enumerate(txt) if i > 0 and txt[i - 1].startswith("# forward layers")][0].split()
v = [(int(x.split(":")[0]), float(x.split(":")[1].split("@")[0]), float(x.split("@")[1])) for x in fl]
first = [x for x in v if 2 <= x[0] <= 6]
last = [x for x in v if 20 <= x[0] <= 27]
g = lambda k: str(ph[k]) if k in ph else "-"
med = lambda L, i: statistics.median(x[i] for x in L)
print("| %s | %s | %s | %s | %s | %.0f us @ %.0f | %.0f us @ %.0f |" % (
    sys.argv[2], g("forward"), g("backward"), g("ns"), g("muon-update") if "muon-update" in ph else g("adamw"),
    med(first, 1), med(first, 2), med(last, 1), med(last, 2)))
