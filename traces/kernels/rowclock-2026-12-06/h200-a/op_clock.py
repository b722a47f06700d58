#!/usr/bin/env python3
"""op_clock.py: each NS op group of the two clocked steps beside its rows, in cycles.
For a group: the time it took in the step and the SM clock it ran at there (tools/clock_trace.py's
read: the step's cycles over its nanoseconds, per op, weighted by time); the rows of the same
shape re-timed in this call (window rc15: 3 + 15 runs back to back; rest: one run after 300 ms
idle) with their clocks. time x clock (Mcycles) is what a clock-only model holds constant.

    python3 op_clock.py            (from this folder; cases/{llama,py}, clock_*.clk, ns_rc15.*.csv)
"""
import csv, glob, json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../tools"))
import clock_trace as ct

def rows(pattern):
    out = {}
    for p in glob.glob(pattern):
        for r in csv.DictReader(l for l in open(p) if not l.startswith('#')):
            m, n = sorted((int(r['m']), int(r['n'])))
            out[(m, n, int(r['batch']), r['algo'])] = (float(r['median_us']), float(r['mhz']))
    return out

rc15, rest = rows('ns_rc15.*.csv'), rows('ns_rest.*.csv')
print("# case group(m, n, batch, algo)        ops  step_ms@MHz  Mcyc | rc15 row ms@MHz  Mcyc  | rest row ms@MHz  Mcyc | row/step: time  cycles(rc15)  cycles(rest)")
for case, clk in (('llama', 'clock_llama-3.2-3b_dmuon_4096_gap0_-.clk'), ('py', 'clock_pythia-1b_dmuon_4096_gap0_-.clk')):
    marks, t, c = ct.read_clock(clk)
    t0 = marks[-1]
    prog = {o['id']: o for o in json.load(open(f'cases/{case}/program.json'))['ranks'][0]['ops']}
    groups = {}
    for r in csv.DictReader(l for l in open(f'cases/{case}/real.csv') if not l.startswith('#')):
        if r['rank'] != '0' or r['kind'] != 'ns':
            continue
        o = prog[int(r['op'])]
        m, n = sorted((o['m'], o['n']))
        a = t0 + float(r['ts_us']) * 1e3
        d = float(r['dur_us'])
        f = ct.mhz(t, c, a, a + d * 1e3)
        g = groups.setdefault((m, n, o.get('batch', 1), o.get('algo', 'direct')), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += d
        g[2] += d * (f or 0)
    for k, (cnt, us, cyc) in sorted(groups.items(), key=lambda x: -x[1][1]):
        if us < 500: continue
        f = cyc / us
        per = us / cnt
        line = f"{case:5s} {str(k):30s} {cnt:4d} {per / 1e3:8.3f}@{f:4.0f} {per * f / 1e6:6.2f}"
        for tab in (rc15, rest):
            if k in tab:
                ru, rm = tab[k]
                line += f" | {ru / 1e3:8.3f}@{rm:4.0f} {ru * rm / 1e6:6.2f}"
            else:
                line += " | " + " " * 20
        if k in rc15:
            ru, rm = rc15[k]
            line += f" | {ru / per:6.3f} {ru * rm / (per * f):6.3f}"
            if k in rest:
                eu, em = rest[k]
                line += f" {eu * em / (per * f):6.3f}"
        print(line)
