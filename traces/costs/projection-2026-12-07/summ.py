# summ.py DIR: the pooled errors of a replay_h100.sh / replay_all_h100.sh output (per phase: mean, mean |error|, max, within 10%)
import csv, sys, glob
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/w*/out/replay.csv")):
    for r in csv.DictReader(open(f)):
        rows.setdefault((f, r["case"]), {})[r["phase"]] = float(r["error_pct"])
ph = ["step", "forward", "backward", "optimizer"]
runs = [v for v in rows.values() if "step" in v]
n = len(runs)
print(f"{n} runs")
for p in ph:
    v = [r[p] for r in runs if p in r]
    print(f"{p:10s} mean {sum(v)/len(v):+.2f}%  mean |err| {sum(map(abs,v))/len(v):.2f}%  max |err| {max(map(abs,v)):.1f}%  within 10%: {sum(abs(x)<=10 for x in v)} of {len(v)}")
print("every phase within 10%:", sum(all(abs(r.get(p,0))<=10 for p in ph) for r in runs), "of", n)
