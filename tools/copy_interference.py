#!/usr/bin/env python3
"""copy_interference.py: how much a collective's copies slow the compute beside them, from the
traces of one `dmuon validate` call on one GPU: per model, the forward + backward time of each
strategy against muon-ddp's (whose one-rank all-reduce copies nothing), beside the bytes the
strategy's collectives moved and those bytes' HBM time (read and write at the GPU's HBM rate).
A ratio near 1 means the compute lost what the copies took of HBM; in-place collectives (taking
microseconds) count no bytes.

Usage: python3 tools/copy_interference.py DIR [--hbm-tbs 4.8]   (DIR: the call's validate/ folder)
"""
import argparse
import csv
import glob
import os
import re


def sums(path):
    d = {"forward": 0.0, "backward": 0.0}
    copied = 0.0
    with open(path) as f:
        rows = [r for r in f if not r.startswith("#")]
    for r in csv.DictReader(rows):
        dur = float(r["dur_us"])
        if r["stream"] == "compute" and r["kind"] in d:
            d[r["kind"]] += dur
        elif r["stream"] != "compute" and dur > 50:  # in-place one-rank collectives take a few us
            copied += float(r["bytes"])
    return d["forward"] + d["backward"], copied


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--hbm-tbs", type=float, default=4.8)
    a = ap.parse_args()
    cases = {}
    for p in glob.glob(os.path.join(a.dir, "*.1gpu*/real.csv")):
        name = os.path.basename(os.path.dirname(p))
        mt = re.match(r"^(.*)\.([a-z-]+)\.([a-z]+)\.(\d+gpu)(?:\.(\d+tok))?$", name)
        if not mt:
            continue
        model, st, tok = mt.group(1), mt.group(2), mt.group(5) or "4096"
        cases[(model, st, tok.replace("tok", ""))] = sums(p)
    print("# %-22s %-8s %-8s %10s %10s %10s %10s %7s" % ("model", "strategy", "tokens", "fb_ms", "ddp_fb_ms", "extra_ms",
                                                          "copy_GB", "ratio"))
    for (m, st, tok), (fb, cp) in sorted(cases.items()):
        if st == "muon-ddp" or (m, "muon-ddp", tok) not in cases:
            continue
        ref = cases[(m, "muon-ddp", tok)][0]
        hbm_ms = 2 * cp / (a.hbm_tbs * 1e12) * 1e3
        ratio = (fb - ref) / 1e3 / hbm_ms if hbm_ms > 0 else float("nan")
        print("  %-22s %-8s %-8s %10.1f %10.1f %10.1f %10.2f %7.2f" % (m, st, tok, fb / 1e3, ref / 1e3, (fb - ref) / 1e3,
                                                                      cp / 1e9, ratio))


if __name__ == "__main__":
    main()
