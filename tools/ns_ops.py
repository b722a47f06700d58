#!/usr/bin/env python3
"""ns_ops.py: the NS ops of executor runs against the kernel table, op group by op group.

For each case folder (a validate case: program.json and real.csv, or any folder holding a step
program and the executor's trace of it), the simulator prices the program from the kernel table
alone (`dmuon sim --program ... --costs TABLE`: no calibration, no power model, no
ns_time_scale: the rows' own times plus each op's gradient check and momentum), and the NS ops
of the traced step (rank 0's) are summed per group (shape, batch, algorithm, tall matrices,
launch) beside the table's sum. A ratio under 1: the step ran the group slower than its rows say.

  python3 tools/ns_ops.py [--dmuon ./dmuon] [--costs TABLE] [--min-ms 2] CASE_DIR...

Run from the repository root (the default table is traces/costs/h200.csv with the cool work
rows). Prints one line per group: case, group, ops, measured ms, table ms, table / measured.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile


def ns_times(path):
    """op id -> duration (us) of the NS ops of rank 0 in a dmuon-trace-1 CSV."""
    out = {}
    with open(path) as f:
        for row in csv.reader(line for line in f if not line.startswith("#")):
            if row and row[0] != "rank" and row[0] == "0" and row[3] == "ns":
                out[int(row[2])] = float(row[5])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="+", help="case folders (program.json and real.csv)")
    ap.add_argument("--dmuon", default="./dmuon", help="the dmuon binary (default ./dmuon)")
    ap.add_argument("--costs", default="traces/costs/h200.csv,traces/costs/h200-work-cool.csv",
                    help="kernel table(s), comma-separated")
    ap.add_argument("--min-ms", type=float, default=2.0, help="leave out groups measured under this (ms)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sim_csv = os.path.join(tmp, "sim.csv")
        for case in a.cases:
            prog, real = os.path.join(case, "program.json"), os.path.join(case, "real.csv")
            if not (os.path.isfile(prog) and os.path.isfile(real)):
                print(f"ns_ops: {case}: needs program.json and real.csv", file=sys.stderr)
                return 1
            r = subprocess.run([a.dmuon, "sim", "--program", prog, "--costs", a.costs, "--trace", sim_csv, "--quiet"],
                               capture_output=True, text=True)
            if r.returncode:
                print(f"ns_ops: {case}: dmuon sim failed: {r.stderr.strip()}", file=sys.stderr)
                return 1
            measured, table = ns_times(real), ns_times(sim_csv)
            with open(prog) as f:
                ops = {o["id"]: o for o in json.load(f)["ranks"][0]["ops"]}
            groups = {}
            for op_id, us in measured.items():
                o = ops.get(op_id, {})
                key = (o.get("m"), o.get("n"), o.get("batch", 1), o.get("algo", "direct"), o.get("tall", 0),
                       o.get("launch", "graph"))
                g = groups.setdefault(key, [0, 0.0, 0.0])
                g[0] += 1
                g[1] += us
                g[2] += table.get(op_id, 0.0)
            for key, (n, m_us, t_us) in groups.items():
                if m_us >= a.min_ms * 1e3:
                    rows.append((os.path.basename(os.path.normpath(case)), key, n, m_us / 1e3, t_us / 1e3))
    print("# case  group(m, n, batch, algo, tall, launch)  ops  measured_ms  table_ms  table/measured")
    for case, key, n, m, t in sorted(rows, key=lambda x: (x[0], -x[3])):
        print(f"{case:52s} {str(key):44s} {n:4d} {m:10.2f} {t:10.2f} {t / m:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
