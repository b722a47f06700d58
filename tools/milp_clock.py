#!/usr/bin/env python3
"""tools/milp_clock.py: summarize tools/milp_clock.sh's output: per phase of the MILP search
(setup, split, count, build, milp) the ratio of wall time to charged time where the charged
time is over 10 ms (median, p10, p90, extremes), the slowest whole searches and how many the
wall-clock ceiling cut. Usage: tools/milp_clock.py FILE"""
import re
import sys


def main():
    rows = []
    for line in open(sys.argv[1]):
        parts = line.strip().split(' ', 2)
        if len(parts) < 3:
            continue
        for seg in parts[2].split('|'):
            m = re.match(r"milp-clock (\w+)\s+wall ([\d.]+) s charged ([\d.]+) s", seg)
            if m:
                rows.append((parts[0], parts[1], m.group(1), float(m.group(2)), float(m.group(3)), 'walled' in seg))
    print("phase  n(>10ms) wall/charged: median    p10    p90    min    max   (extremes)")
    for ph in ['setup', 'split', 'count', 'build', 'milp']:
        rs = sorted((r[3] / r[4], r[0], r[1]) for r in rows if r[2] == ph and r[4] > 0.01)
        small = [r[3] for r in rows if r[2] == ph and r[4] <= 0.01]
        note = "(%d with <= 10 ms charged, wall at most %.3f s)" % (len(small), max(small) if small else 0)
        if not rs:
            print("%-6s %8d %s" % (ph, 0, note))
            continue
        v = [x[0] for x in rs]
        print("%-6s %8d %22.2f %6.2f %6.2f %6.2f %6.2f   min %s %s, max %s %s %s" %
              (ph, len(v), v[len(v) // 2], v[len(v) // 10], v[len(v) * 9 // 10], v[0], v[-1], rs[0][1], rs[0][2],
               rs[-1][1], rs[-1][2], note))
    tot = {}
    for r in rows:
        t = tot.setdefault((r[0], r[1]), [0.0, 0.0, False])
        t[0] += r[3]
        t[1] += r[4]
        t[2] |= r[5]
    print("slowest searches (wall s, charged s):")
    for k, v in sorted(tot.items(), key=lambda kv: -kv[1][0])[:8]:
        print("  %-24s %5s %7.3f %7.3f%s" % (k[0], k[1], v[0], v[1], "  cut by the wall-clock ceiling" if v[2] else ""))
    print("searches: %d, cut by the wall-clock ceiling: %d" % (len(tot), sum(1 for v in tot.values() if v[2])))


if __name__ == '__main__':
    main()
