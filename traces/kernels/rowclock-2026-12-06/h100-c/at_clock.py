#!/usr/bin/env python3
"""at_clock.py: a bench kernels CSV with every row's times brought from the clock it was timed at
(column mhz) to clock F: time x mhz / F (the whole row taken as clock-bound).
    python3 at_clock.py IN.csv F > OUT.csv"""
import sys
src, F = sys.argv[1], float(sys.argv[2])
cols = None
for line in open(src):
    line = line.rstrip('\n')
    if line.startswith('#') or not line.strip():
        print(line)
        continue
    if cols is None:
        cols = line.split(',')
        print(line)
        continue
    v = line.split(',')
    r = dict(zip(cols, v))
    mhz = float(r.get('mhz') or 0)
    if mhz > 0:
        for c in ('median_us', 'min_us', 'max_us'):
            if c in r and r[c]:
                v[cols.index(c)] = '%.2f' % (float(r[c]) * mhz / F)
    print(','.join(v))
