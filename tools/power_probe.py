#!/usr/bin/env python3
"""power_probe.py: how one GPU's speed follows its power limit, measured with PyTorch on the GPU
machine: the data a power model of the simulator would be built on (issue 14: the same kernel
runs 4-12% slower in a GEMM-heavy step than its bench row and 5-9% faster in a lighter one,
traces/validate/h200-10/stepprobe).

Phases, each from a cool GPU (an idle pause first), the work enqueued back to back and timed in
windows of --window-ms by CUDA events (throughput per window: how fast the clock falls and
where it settles), with the SM clock and power read by NVML every 20 ms beside it when pynvml
is there (else nvidia-smi's -lms 50 into --smi FILE, read after):
  gemm-big      bf16 8192^3 GEMMs, continuous
  gemm-mlp      bf16 4096 x 8960 x 1536 (a Qwen2.5-1.5B MLP GEMM), continuous
  gemm-fwd      bf16 1024 x 8192 x 3072 (Llama-3.2-3B's MLP up projection at 1024 tokens), continuous
  copy          device-to-device copies of 1 GiB, continuous (HBM only)
  duty-D        8192^3 GEMMs for D% of each 10 ms period, copies for the rest (D = 75, 50, 25)
  gap-D         8192^3 GEMMs for D% of each 10 ms period, the GPU idle (a spin kernel is not
                used: the host waits) for the rest (D = 50)
With --recover instead, how fast the clock comes back once the load drops (the other phases see
it fall): per X in --recover-ms, from a cool GPU 8192^3 GEMMs for --recover-hot s (the clock
settles low), the GPU idle X ms (the host waits), then 8192^3 GEMMs timed one by one for 40 ms
(phase recover-idle-X: windows of 2 ms; the cool rates are t_big_ms and t_mlp_ms); and
recover-mlp: the hot GEMMs, then the MLP GEMM continuous, timed in 2 ms windows (how a lighter load runs in the first tens of ms after a
heavy one); recover-fwd and recover-copy the same with the 1024-token GEMM and the 1 GiB copy
(does a small compute-bound GEMM slow with the whole clock, a copy not at all?).
Prints one line per phase: throughput in the first window, the median over the last half, the
ratio, the time to fall halfway, mean power and SM clock in the last half; --json writes the
windows. Read-only on the GPU's settings (clocks and limits are never changed).

  python3 tools/power_probe.py [--seconds 4] [--cool 3] [--window-ms 20] [--phases A,B] [--json OUT]
"""
import argparse
import json
import statistics
import subprocess
import threading
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each phase")
    ap.add_argument("--cool", type=float, default=3.0, help="idle seconds before each phase")
    ap.add_argument("--window-ms", type=float, default=20.0, help="timing window")
    ap.add_argument("--json", help="write every window here")
    ap.add_argument("--phases", help="only these phases (comma-separated names, e.g. gemm-big,gemm-mlp)")
    ap.add_argument("--recover", action="store_true", help="the recovery phases instead (see above)")
    ap.add_argument("--recover-hot", type=float, default=1.0, help="seconds of GEMMs before a recovery")
    ap.add_argument("--recover-ms", default="0,5,10,20,40,80,160", help="idle gaps of the recovery phases")
    a = ap.parse_args()

    import torch

    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    nv = None
    try:
        import pynvml

        pynvml.nvmlInit()
        nv = pynvml.nvmlDeviceGetHandleByIndex(0)
        limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(nv) / 1000.0
    except Exception:
        limit = float("nan")
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            t = time.time()
            if nv is not None:
                try:
                    p = pynvml.nvmlDeviceGetPowerUsage(nv) / 1000.0
                    c = pynvml.nvmlDeviceGetClockInfo(nv, pynvml.NVML_CLOCK_SM)
                    samples.append((t, p, c))
                except Exception:
                    pass
            time.sleep(0.02)

    smi = None
    if nv is None:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                "-lms", "50"], stdout=subprocess.PIPE, text=True)
    th = threading.Thread(target=sampler, daemon=True)
    th.start()

    A = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    B = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    C = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)
    X = torch.randn(4096, 1536, device=dev, dtype=torch.bfloat16)
    W = torch.randn(8960, 1536, device=dev, dtype=torch.bfloat16)
    Y = torch.empty(4096, 8960, device=dev, dtype=torch.bfloat16)
    X2 = torch.randn(1024, 3072, device=dev, dtype=torch.bfloat16)
    W2 = torch.randn(8192, 3072, device=dev, dtype=torch.bfloat16)
    Y2 = torch.empty(1024, 8192, device=dev, dtype=torch.bfloat16)
    S = torch.empty(1 << 29, device=dev, dtype=torch.bfloat16)  # 1 GiB
    D = torch.empty_like(S)

    def timed(fn, n, what):
        """n calls of fn between two events: (start, end, flops, bytes, what)."""
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fl = by = 0.0
        for _ in range(n):
            f, b = fn()
            fl += f
            by += b
        e1.record()
        return (e0, e1, fl, by, what)

    def big():
        torch.matmul(A, B, out=C)
        return 2.0 * 8192**3, 0.0

    def mlp():
        torch.matmul(X, W.t(), out=Y)
        return 2.0 * 4096 * 8960 * 1536, 0.0

    def fwd():
        torch.matmul(X2, W2.t(), out=Y2)
        return 2.0 * 1024 * 8192 * 3072, 0.0

    def copy():
        D.copy_(S)
        return 0.0, 2.0 * S.numel() * 2

    def cool_time(fn, n=5):
        seg = timed(fn, 1, "")
        torch.cuda.synchronize()
        seg = timed(fn, n, "")
        torch.cuda.synchronize()
        return seg[0].elapsed_time(seg[1]) / n

    t_big, t_mlp, t_copy, t_fwd = cool_time(big), cool_time(mlp), cool_time(copy), cool_time(fwd)

    def run_phase(step, seconds):
        """step() enqueues segments (lists of timed()); windows of --window-ms by the segments' starts."""
        time.sleep(a.cool)
        torch.cuda.synchronize()
        origin = torch.cuda.Event(enable_timing=True)
        origin.record()
        segs = []
        t0 = time.time()
        while time.time() - t0 < seconds:
            new = step()
            if not new:  # a recovery phase has enqueued everything
                break
            segs += new
            if len(segs) > 64:  # keep the host a little ahead, not seconds
                segs[-64][1].synchronize()
        torch.cuda.synchronize()
        t1 = time.time()
        wins = {}
        for e0, e1, fl, by, what in segs:
            ts = origin.elapsed_time(e0)
            w = wins.setdefault(int(ts // a.window_ms), {"t_ms": 0.0, "gemm_ms": 0.0, "flops": 0.0, "copy_ms": 0.0, "bytes": 0.0})
            ms = e0.elapsed_time(e1)
            if what == "hot":  # the heating GEMMs of a recovery phase: their rate, apart
                w["hot_ms"] = w.get("hot_ms", 0.0) + ms
                w["hot_flops"] = w.get("hot_flops", 0.0) + fl
            elif what == "gemm":
                w["gemm_ms"] += ms
                w["flops"] += fl
            else:
                w["copy_ms"] += ms
                w["bytes"] += by
        out = []
        for k in sorted(wins):
            w = wins[k]
            w["t_ms"] = k * a.window_ms
            w["tflops"] = w["flops"] / (w["gemm_ms"] * 1e9) if w["gemm_ms"] > 0 else 0.0
            w["gbs"] = w["bytes"] / (w["copy_ms"] * 1e6) if w["copy_ms"] > 0 else 0.0
            out.append(w)
        return out, t0, t1

    def cont(fn, what, t):
        n = max(1, round(a.window_ms / 4 / t))
        return lambda: [timed(fn, n, what)]

    def duty(d):
        n_big = max(1, round(10.0 * d / 100.0 / t_big))
        n_copy = max(1, round(10.0 * (100 - d) / 100.0 / t_copy))
        return lambda: [timed(big, n_big, "gemm"), timed(copy, n_copy, "copy")]

    def gap(d):
        n_big = max(1, round(10.0 * d / 100.0 / t_big))

        def step():
            seg = timed(big, n_big, "gemm")
            seg[1].synchronize()
            time.sleep(10.0 * (100 - d) / 100.0 / 1e3)
            return [seg]

        return step

    def recover(idle_ms, then):
        """the hot GEMMs for --recover-hot s, idle_ms idle, then `then` (one call a segment)."""
        state = {"t": None, "done": False}

        def step():
            if state["t"] is None:
                state["t"] = time.time()
            if time.time() - state["t"] < a.recover_hot:
                return [timed(big, 4, "hot")]
            if state["done"]:
                return []
            state["done"] = True
            torch.cuda.synchronize()
            time.sleep(idle_ms / 1e3)
            t_one = {big: t_big, mlp: t_mlp, fwd: t_fwd, copy: t_copy}[then[0]]
            return [timed(then[0], 1, then[1]) for _ in range(max(1, round(40.0 / t_one)))]

        return step

    if a.recover:
        a.window_ms = 2.0
        phases = [(f"recover-idle-{x}", recover(float(x), (big, "gemm"))) for x in a.recover_ms.split(",")]
        phases += [("recover-mlp", recover(0.0, (mlp, "gemm")))]
        phases += [("recover-fwd", recover(0.0, (fwd, "gemm"))), ("recover-copy", recover(0.0, (copy, "copy")))]
        a.seconds = a.recover_hot + 60.0  # the step after the hot part enqueues the rest, then ends the phase
    else:
        phases = [("gemm-big", cont(big, "gemm", t_big)), ("gemm-mlp", cont(mlp, "gemm", t_mlp)),
                  ("gemm-fwd", cont(fwd, "gemm", t_fwd)),
                  ("copy", cont(copy, "copy", t_copy))]
        phases += [(f"duty-{d}", duty(d)) for d in (75, 50, 25)]
        phases += [("gap-50", gap(50))]
    if a.phases:
        want = a.phases.split(",")
        unknown = [w for w in want if w not in [n for n, _ in phases]]
        if unknown:
            ap.error(f"--phases: no phase {', '.join(unknown)}; there are {', '.join(n for n, _ in phases)}")
        phases = [(n, f) for n, f in phases if n in want]
    out = {"gpu": name, "power_limit_w": limit, "torch": torch.__version__, "t_big_ms": t_big, "t_copy_ms": t_copy,
           "t_mlp_ms": t_mlp, "t_fwd_ms": t_fwd,
           "phases": []}
    print(f"# power_probe on {name}: enforced power limit {limit:.0f} W; cool 8192^3 GEMM {t_big:.3f} ms "
          f"({2 * 8192**3 / (t_big * 1e9):.1f} TFLOP/s), 1 GiB copy {t_copy:.3f} ms; phases of "
          f"{a.recover_hot if a.recover else a.seconds} s{' of GEMMs, then the recovery' if a.recover else ''} after {a.cool} s idle")
    print(f"# {'phase':10s} {'first':>9s} {'settled':>9s} {'ratio':>6s} {'t_half_ms':>9s} {'power_W':>8s} {'sm_MHz':>7s}  (TFLOP/s of the GEMM part; copy: GB/s)")
    results = []
    for name_, fn in phases:
        wins, t0, t1 = run_phase(fn, a.seconds)
        results.append((name_, wins, t0, t1))
    stop.set()
    if smi:  # nvidia-smi's samples: "YYYY/MM/DD HH:MM:SS.mmm, MHz, W"
        smi.terminate()
        lines = smi.communicate()[0].splitlines()
        out["smi"] = lines
        for ln in lines:
            try:
                ts, mhz, w = [x.strip() for x in ln.split(",")[:3]]
                t = time.mktime(time.strptime(ts.split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + ts.split(".")[1])
                samples.append((t, float(w), float(mhz)))
            except (ValueError, IndexError):
                pass
    for name_, wins, t0, t1 in results:
        key = "gbs" if name_.endswith("copy") else "tflops"
        v = [w[key] for w in wins if w[key] > 0]
        first = v[0] if v else 0
        half = v[len(v) // 2:]
        settled = statistics.median(half) if half else 0
        t_half = next((w["t_ms"] for w in wins if 0 < w[key] <= first - (first - settled) / 2), float("nan")) \
            if first > settled else 0.0
        mid = t0 + (t1 - t0) / 2
        ps = [x for x in samples if mid <= x[0] <= t1]
        pw = statistics.mean(x[1] for x in ps) if ps else float("nan")
        ck = statistics.mean(x[2] for x in ps) if ps else float("nan")
        print(f"  {name_:10s} {first:9.1f} {settled:9.1f} {settled / first if first else 0:6.3f} {t_half:9.1f} {pw:8.0f} {ck:7.0f}")
        out["phases"].append({"phase": name_, "windows": wins, "first": first, "settled": settled, "t_half_ms": t_half,
                              "power_w": pw, "sm_mhz": ck,
                              "samples": [(x[0] - t0, x[1], x[2]) for x in samples if t0 - a.cool <= x[0] <= t1]})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
