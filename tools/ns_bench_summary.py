#!/usr/bin/env python3
"""ns_bench_summary.py: one short table from the logs of a kernels device run
(traces/kernels/run_device.sh v9): per shape and batch, the best cuBLASLt plan, the best plan
with our symmetric kernel, the best fused plan (from `dmuon bench kernels --verbose` candidate
lines), PyTorch's best (tools/torch_ns_bench.py --out), the floor and the issue's goal.

    tools/ns_bench_summary.py --bench bench_goal.log [--bench ...] [--torch torch.log]
                              [--peak TFLOPS] [--sass sass_summary.txt]

The floor: the NS FLOPs with symmetric products at half (ns_ref_flops_ex's rule: 5 Polar
Express iterations, Gram with one restart before iteration 2), the cheaper algorithm, over the
GEMM peak (default: the bench log's own 8192^3 line, else 790 TFLOP/s), or the bytes of reading
G and writing the result in bf16 over 4.3 TB/s, whichever is larger."""
import argparse
import re
import sys

GOALS = {(128, 128, 1): 0.02, (1024, 1024, 1): 0.03, (256, 1536, 1): 0.02, (256, 1536, 64): 0.15,
         (1536, 8960, 1): 0.42, (3584, 3584, 1): 1.35, (3584, 18944, 1): 3.3, (8192, 8192, 1): 15.5,
         (8192, 29568, 1): 29.5}
CAND = re.compile(r"#\s+candidate (\d+)x(\d+) b(\d+) (\w+) (\S+) k=\S+ h=\d+(?: picks \S+)? median ([\d.]+) us")
PEAK = re.compile(r"# bf16 GEMM peak .*?([\d.]+) TFLOP/s")


def ns_flops(m, n, algo, sym=0.5, iters=5, restarts=(2,)):
    r, l = min(m, n), max(m, n)
    rl, rr = 2.0 * r * r * l, 2.0 * r * r * r
    if algo == "direct":
        return iters * (rl * sym + rr * sym + rl)
    f = rl * sym
    for k in range(iters):
        first = k == 0 or k in restarts
        last = k == iters - 1 or (k + 1) in restarts
        if k > 0 and first:
            f += rl + rl * sym
        f += rr * sym
        if not first:
            f += rr
        if not last:
            f += rr + rr * sym
    return f + rl


def floor_ms(m, n, b, peak_tflops):
    f = b * min(ns_flops(m, n, "direct"), ns_flops(m, n, "gram"))
    return max(f / (peak_tflops * 1e9), b * 4.0 * m * n / 4.3e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", action="append", default=[], help="dmuon bench kernels --verbose log")
    ap.add_argument("--torch", help="tools/torch_ns_bench.py --out file")
    ap.add_argument("--peak", type=float, help="GEMM peak in TFLOP/s (default: from the bench log)")
    args = ap.parse_args()
    best = {}  # (m, n, b) -> {"lt": (us, algo, kern), "sym": ..., "fused": ...}
    peak = args.peak
    for path in args.bench:
        try:
            text = open(path).read()
        except OSError as e:
            print(f"# {path}: {e}")
            continue
        if peak is None:
            mp = PEAK.search(text)
            peak = float(mp.group(1)) if mp else None
        for mm in CAND.finditer(text):
            m, n, b, algo, kern, us = int(mm[1]), int(mm[2]), int(mm[3]), mm[4], mm[5], float(mm[6])
            cls = "lt" if kern == "lt" else "sym" if kern.startswith("sym") else "fused"
            d = best.setdefault((m, n, b), {})
            if cls not in d or us < d[cls][0]:
                d[cls] = (us, algo, kern)
    peak = peak or 790.0
    torch = {}
    if args.torch:
        try:
            for line in open(args.torch):
                f = line.split()
                if len(f) >= 4 and not line.startswith("#") and "x" in f[0]:
                    r, c = (int(v) for v in f[0].split("x"))
                    torch[(min(r, c), max(r, c), int(f[1]))] = min(float(f[2]), float(f[3]))
        except OSError as e:
            print(f"# {args.torch}: {e}")
    print(f"# NS per shape (ms): best cuBLASLt plan, best with our symmetric kernel, best fused; floor at {peak:.0f} TFLOP/s")
    print("# %-11s %4s %9s %9s %9s %-16s %9s %8s %6s %7s %5s" % ("shape", "b", "lt", "sym", "fused", "best",
                                                                  "torch", "floor", "floor%", "goal", "met"))
    for (m, n, b) in sorted(best, key=lambda k: (k[0] * k[1] * k[2], k)):
        d = best[(m, n, b)]
        cells = []
        for cls in ("lt", "sym", "fused"):
            cells.append("%9.4f" % (d[cls][0] / 1000) if cls in d else "%9s" % "-")
        win = min(d.values())
        fl = floor_ms(m, n, b, peak)
        goal = GOALS.get((m, n, b))
        t = torch.get((m, n, b))
        print("  %-11s %4d %s %-16s %9s %8.4f %5.1f%% %7s %5s" % (
            f"{m}x{n}", b, " ".join(cells), f"{win[0] / 1000:.4f} {win[2]}", "%.3f" % t if t else "-", fl,
            100 * fl / (win[0] / 1000), goal if goal else "-", ("yes" if win[0] / 1000 < goal else "NO") if goal else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
