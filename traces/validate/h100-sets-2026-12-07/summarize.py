#!/usr/bin/env python3
"""The H100 sets of 2026-12-07 (no calibration, predictions made in each call by bf2c4acd's binary)
pooled: per phase, the mean signed and absolute error, the largest, and how many within 10%.
Run from the repository root: python3 traces/validate/h100-sets-2026-12-07/summarize.py"""
import re

FILES = ["traces/validate/h100-unseen-2026-12-07/validate.txt",
         "traces/validate/h100-unseen2-2026-12-07/validate.txt",
         "traces/validate/h100-unseen2-2026-12-07/tok8192/validate.txt",
         "traces/validate/h100-unseen2-2026-12-07/tok8192b/validate.txt",
         "traces/validate/h100-core-2026-12-07/tok2048/validate.txt",
         "traces/validate/h100-core-2026-12-07/tok1024-8192/validate.txt"]
ROW = re.compile(r"^  (\S+)\s+(\S+)\s+\S+\s+\d+\s+(\d+)\s+" + r"\s+".join([r"([-+]\d+\.\d)%"] * 4))
rows = []
for f in FILES:
    t = open(f).read()
    sec = t[t.index("# errors by model"):]
    sec = sec[:sec.index("# goal")]
    rows += [[float(x) for x in m.groups()[3:]] for m in map(ROW.match, sec.splitlines()) if m]
n = len(rows)
print(f"{n} runs from {len(FILES)} tables")
for i, name in enumerate(["step", "forward", "backward", "optimizer"]):
    v = [r[i] for r in rows]
    print(f"{name:10s} mean {sum(v) / n:+.2f}%  mean |error| {sum(map(abs, v)) / n:.2f}%  "
          f"max |error| {max(map(abs, v)):.1f}%  within 10%: {sum(abs(x) <= 10 for x in v)} of {n}")
print(f"every phase within 10%: {sum(all(abs(x) <= 10 for x in r) for r in rows)} of {n}")
