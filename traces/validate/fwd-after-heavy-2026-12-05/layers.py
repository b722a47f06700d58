#!/usr/bin/env python3
"""layers.py CASE_DIR: per layer, the measured (real.csv) and predicted (the case's program
simulated with the committed calibration) forward and backward times, and their ratio."""
import csv, subprocess, sys
d = sys.argv[1].rstrip('/') + '/'
subprocess.run(["./dmuon", "sim", "--program", d + "program.json", "--cluster", "h200", "--calibration",
                "traces/calib/h200.calib", "--trace", "/tmp/layers_sim.csv"], capture_output=True, check=True)
def load(f):
    fh = open(f); fh.readline()
    return [r for r in csv.DictReader(fh) if r['rank'] == '0' and r['kind'] in ('forward', 'backward')]
print("kind layer start_ms measured_ms predicted_ms predicted/measured")
for r, s in zip(load(d + "real.csv"), load("/tmp/layers_sim.csv")):
    m, p = float(r['dur_us']) / 1e3, float(s['dur_us']) / 1e3
    print("%-8s %3s %9.2f %9.3f %9.3f %.3f" % (r['kind'], r['layer'], float(r['ts_us']) / 1e3, m, p, p / m if m else 0))
