#!/bin/sh
# outputs_replicated.sh NAME BIN: 162 sim outputs of the replicated strategies (8 models x adamw,
# muon-ddp, muon-fsdp and the tuned forms x 8/24/128 GPUs; a trace, --json, zero 3 with overlap
# none, the h200 cluster, a calibration) into /tmp/cmp2/NAME, the speed line removed; the runs of
# main's build and this branch's were compared with diff -r (the shared program and shared run).
cd /work/wt-scale
strip() { grep -vE '^speed:|"sim_wall_s"' ; }
out=/tmp/cmp2/$1; B=$2; mkdir -p $out
for m in qwen2.5-0.5b qwen2.5-7b llama-3.2-3b moonlight-16b-a3b-6l wall-oss-flow pi0 wan2.2-ti2v-5b qwen2.5-vl-3b; do
 for s in adamw muon-ddp muon-fsdp muon-ddp-tuned muon-fsdp-tuned; do
  for g in 8 24 128; do
   $B sim -m $m -g $g --strategy $s 2>&1 | strip > $out/$m-$s-$g.txt
  done
 done
 $B sim -m $m -g 16 --strategy muon-fsdp --trace $out/$m-fsdp16.csv 2>&1 | strip > $out/$m-fsdp16-trace.txt
 $B sim -m $m -g 64 --strategy adamw --zero 3 --overlap none 2>&1 | strip > $out/$m-adamw-z3.txt
 $B sim -m $m -g 64 --strategy muon-ddp --json 2>&1 | strip > $out/$m-ddp-json.txt
 $B sim -m $m -g 32 --strategy adamw --cluster h200 2>&1 | strip > $out/$m-adamw-h200.txt
done
$B sim -m qwen2.5-7b -g 64 --strategy muon-ddp --calibration traces/calib/h200x2.calib 2>&1 | strip > $out/calib.txt
echo done > $out/DONE
