#!/usr/bin/env python3
"""alloc_probe.py: how much device memory one cudaMalloc of N bytes takes on this GPU.

The executor allocates each tensor's fp32 state (master weights, momentum or moments, and their
second buffers) with its own cudaMalloc; the memory estimate (core/memory.c) has to count what
those allocations take, not only their bytes. Per size: K allocations back to back through the
CUDA runtime (ctypes, no PyTorch allocator in between), the drop of cudaMemGetInfo's free bytes
over K, then freed. Prints one line per size: requested bytes, bytes taken per allocation, and
that in 2 MiB pages; --json writes the same.

  python3 tools/alloc_probe.py [--count 64] [--json OUT]
"""
import argparse
import ctypes
import ctypes.util
import json
import sys


def load_cudart():
    names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"]
    found = ctypes.util.find_library("cudart")
    if found:
        names.insert(0, found)
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    sys.exit("alloc_probe: no libcudart found (tried %s)" % ", ".join(names))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=64, help="allocations per size (default 64)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    rt = load_cudart()
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    rt.cudaMemGetInfo.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    rt.cudaFree(None)  # the context first, so that its own memory is not counted

    def free_bytes():
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        if rt.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t)):
            sys.exit("alloc_probe: cudaMemGetInfo failed")
        return f.value

    KiB, MiB = 1 << 10, 1 << 20
    sizes = [4 * KiB, 64 * KiB, 256 * KiB, 512 * KiB, 768 * KiB, MiB - 512, MiB, MiB + 512, 3 * MiB // 2,
             2 * MiB - 4 * KiB, 2 * MiB, 2 * MiB + 4 * KiB, 3 * MiB, 4 * MiB + 512, 7340032 + 4 * KiB,
             11534336 + 512, 2048 * 1408 * 4, 896 * 4864 * 4, 37748736, 37748736 + 4096]
    out = []
    print("# alloc_probe: %d cudaMalloc calls per size; bytes taken per call from cudaMemGetInfo" % a.count)
    print("# %14s %16s %10s" % ("requested", "taken_per_call", "2MiB_pages"))
    for s in sizes:
        ptrs = []
        before = free_bytes()
        for _ in range(a.count):
            p = ctypes.c_void_p()
            if rt.cudaMalloc(ctypes.byref(p), s):
                sys.exit("alloc_probe: cudaMalloc(%d) failed" % s)
            ptrs.append(p)
        after = free_bytes()
        for p in ptrs:
            rt.cudaFree(p)
        taken = (before - after) / a.count
        out.append({"requested": s, "taken": taken})
        print("  %14d %16.0f %10.3f" % (s, taken, taken / (2 * MiB)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"count": a.count, "sizes": out}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
