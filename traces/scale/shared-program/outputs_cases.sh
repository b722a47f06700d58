#!/bin/sh
# outputs_cases.sh BIN OUTDIR: the 22 plan/sim/scale cases whose outputs were compared before
# (main c2aba4f) and after each commit of traces/scale/README.md's shared-program section:
# stdout+stderr with the speed and wall-time lines removed (then outputs_norm.sh blanks the
# solver/plan timing fields), and the files they write (plan -o programs, sim traces, scale's
# table) compared byte for byte. Run from a checkout (the cd below is where it ran).
B=$1; O=$2; mkdir -p $O; cd /work/wt-scale
strip() { grep -vE '^speed:|wall|"(plan|setup|sim)_(wall|cpu)|cpu_s|_wall_|"speed' ; }
i=0
while read -r cmd; do
  i=$((i+1))
  eval "$B $cmd" 2>&1 | strip > $O/case$i.txt
  echo "$cmd" > $O/case$i.cmd
done <<'CASES'
plan -m qwen2.5-7b -g 64
plan -m qwen2.5-7b -g 64 --strategy muon-ddp -o /tmp/cmp/OUT_p1.json
plan -m moonlight-16b-a3b -g 256 --strategy muon-fsdp -o /tmp/cmp/OUT_p2.json
plan -m qwen2.5-0.5b -g 16 --strategy dmuon --hsdp -o /tmp/cmp/OUT_p3.json
plan -m qwen2.5-0.5b -g 16 --strategy adamw --json
sim -m qwen2.5-7b -g 64 --strategy dmuon --trace /tmp/cmp/OUT_t1.json
sim -m qwen2.5-7b -g 64 --strategy muon-ddp --trace /tmp/cmp/OUT_t2.csv
sim -m moonlight-16b-a3b -g 1024 --strategy muon-ddp
sim -m moonlight-16b-a3b -g 1024 --strategy muon-fsdp --json
sim -m moonlight-16b-a3b -g 1024 --strategy dmuon
sim -m moonlight-16b-a3b -g 256 --strategy muon-rr
sim -m moonlight-16b-a3b -g 256 --strategy adamw
sim -m qwen2.5-72b -g 4096 --hsdp --balance lpt
sim -m qwen2.5-7b -g 1024 --strategy dmuon --hierarchical
sim -m qwen2.5-7b -g 256 --strategy muon-fsdp --hierarchical
sim -m qwen2.5-7b -g 128 --strategy muon-ddp-tuned
sim -m qwen2.5-7b -g 128 --strategy muon-fsdp-tuned
sim -m qwen2.5-7b -g 256 --strategy dmuon --calibration traces/calib/h200x2.calib
sim -m wall-oss-flow -g 32 --strategy dmuon --hsdp
sim --program /tmp/cmp/OUT_p2.json
sim --program /tmp/cmp/OUT_p3.json
scale -m qwen2.5-0.5b --gpus 8,64 --no-plots --out /tmp/cmp/OUT_scale --no-progress
CASES
for f in /tmp/cmp/OUT_*; do [ -f "$f" ] && mv "$f" $O/$(basename $f); done
[ -d /tmp/cmp/OUT_scale ] && rm -rf $O/OUT_scale && mv /tmp/cmp/OUT_scale $O/
