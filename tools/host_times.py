#!/usr/bin/env python3
"""host_times.py: does the executor's host keep ahead of the GPU? Reads the CSV that
DMUON_HOST_TIMES=FILE makes `dmuon run --backend gpu` write (the last step's ops:
op,kind,stream,layer,host_start_us,host_end_us,gpu_start_us,gpu_dur_us, all us from the step's
start) and prints, per kind of op on the compute stream: how many, their GPU time, the host's time
issuing them, how many the GPU started before the host had finished issuing them (it can have
waited for the rest of their launches inside them) and the median lead of the host (GPU start
minus host start: near a launch latency when the GPU waits for the host).

  python3 tools/host_times.py FILE.csv [--ops]     (--ops: one line per compute op as well)
"""
import csv
import statistics
import sys


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    rows = []
    with open(argv[1]) as f:
        for r in csv.DictReader(f):
            for k in ("host_start_us", "host_end_us", "gpu_start_us", "gpu_dur_us"):
                r[k] = float(r[k])
            rows.append(r)
    if not rows:
        print(f"{argv[1]}: no ops")
        return 1
    if "--ops" in argv:
        for r in rows:
            if r["stream"] == "compute":
                print(f'{r["op"]:>5} {r["kind"]:<12} L{r["layer"]:<4} host {r["host_start_us"]:10.1f}-{r["host_end_us"]:10.1f}'
                      f' gpu {r["gpu_start_us"]:10.1f}+{r["gpu_dur_us"]:9.1f} lead {r["gpu_start_us"] - r["host_start_us"]:9.1f}')
    kinds = {}
    for r in rows:
        if r["stream"] != "compute":
            continue
        kinds.setdefault(r["kind"], []).append(r)
    host_total = rows[-1]["host_end_us"]
    gpu_end = max(r["gpu_start_us"] + r["gpu_dur_us"] for r in rows)
    print(f"{argv[1]}: host issued the step in {host_total:.1f} us; the GPU ended it at {gpu_end:.1f} us")
    print(f'{"kind":<12} {"ops":>5} {"gpu_ms":>9} {"host_ms":>9} {"started_early":>13} {"lead_med_us":>11}')
    for k, rs in kinds.items():
        g = sum(r["gpu_dur_us"] for r in rs) / 1e3
        h = sum(r["host_end_us"] - r["host_start_us"] for r in rs) / 1e3
        early = sum(1 for r in rs if r["gpu_start_us"] < r["host_end_us"])
        lead = statistics.median(r["gpu_start_us"] - r["host_start_us"] for r in rs)
        print(f"{k:<12} {len(rs):>5} {g:>9.3f} {h:>9.3f} {early:>13} {lead:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
