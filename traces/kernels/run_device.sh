#!/bin/bash
# run_device.sh: everything one device call does for the GPU kernels, from the repository root:
# the GPU test, compute-sanitizer (memcheck, racecheck) on it, `dmuon bench kernels` over the
# given shapes, and the PyTorch side-by-side. The binaries (dmuon, test_ns_gpu) and the shared
# libraries the device lacks come in .devreal/ as real/run_device.sh sets it up (its environment
# block is reused here). The autotune cache starts from the committed traces/kernels/
# autotune_h200.tsv, so the one written to $OUT holds the old entries and the re-tuned ones.
# Logs go to $OUT (or /tmp/dmuon-out).
#   traces/kernels/run_device.sh [test|testsan|bench|all|v9|k2] [BENCH ARGS...]
# test: the GPU test alone; testsan/all: with compute-sanitizer memcheck and racecheck.
# v9 (issue 17, one call of ~5 minutes): the SASS of our kernels (HMMA, local memory); the GPU
# test; memcheck and racecheck on our kernels only (DM_TEST_OWN); the goal shapes, each timed
# with its cached cuBLASLt configuration beside our kernels (--retime-cached); PyTorch in the
# same call; the 18 shapes with min(m, n) >= 3584 (cuBLASLt as cached vs our symmetric kernel);
# MoE expert batches (traces/kernels/expert_shapes.txt); a short table last (tools/ns_bench_summary.py). Every stage has a timeout; logs in $OUT.
# k2 (issue 17 after run 9, under 3 minutes): the whole GPU test (the Gram cases of our kernels
# that failed in run 9 and the new product check on operands that are not symmetric);
# racecheck on our kernels alone (DM_TEST_OWN, no cuBLASLt, the quick set: it finishes); the
# goal shapes our kernels can win (traces/kernels/k2_shapes.txt: ours beside the cached cuBLASLt
# configuration, products included); the fused kernels' per-phase profile (work per phase,
# grid-barrier cost) on 128^2, 1024^2 and 64 x 256x1536; Nsight Compute on one of our X X^T
# launches (3584^2). Timeouts add up to 3 minutes.
set -u
O=${OUT:-/tmp/dmuon-out}
mkdir -p "$O"
eval "$(sed -n '/^D=/,/^{$/p' real/run_device.sh | sed '$d')"
mode=${1:-all}
shift || true
env_info() {
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  ls -la /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13* 2>&1 | head -2
}
if [ "$mode" = test ] || [ "$mode" = testsan ] || [ "$mode" = all ]; then
  { env_info; $D/test_ns_gpu; echo "exit $?"; } > "$O/test_ns_gpu.log" 2>&1
  tail -1 "$O/test_ns_gpu.log"; grep -c '^ok' "$O/test_ns_gpu.log"; grep -A1 '^not ok' "$O/test_ns_gpu.log" | head -20
fi
if [ "$mode" = testsan ] || [ "$mode" = all ]; then
  timeout 150 compute-sanitizer --tool memcheck --leak-check full $D/test_ns_gpu > "$O/memcheck.log" 2>&1
  echo "memcheck rc $?"; tail -2 "$O/memcheck.log"
  # racecheck cannot launch cuBLASLt's Hopper kernels ("failed to launch", run 2): it checks
  # the kernels of ours that use shared memory, run without cuBLASLt
  DM_TEST_ELEMENTWISE_ONLY=1 timeout 120 compute-sanitizer --tool racecheck --racecheck-report all \
    $D/test_ns_gpu > "$O/racecheck.log" 2>&1
  echo "racecheck rc $?"; tail -2 "$O/racecheck.log"
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  nvidia-smi dmon -s pc -d 2 > "$O/dmon.txt" 2>&1 &
  dmon=$!
  [ -f traces/kernels/autotune_h200.tsv ] && cp traces/kernels/autotune_h200.tsv "$O/autotune.tsv"
  { env_info; $D/dmuon bench kernels --out "$O/costs.csv" --cache "$O/autotune.tsv" --verbose "$@"; echo "exit $?"; } > "$O/bench.log" 2>&1
  kill $dmon 2>/dev/null
  tail -2 "$O/bench.log"
  PYTHONUNBUFFERED=1 python3 tools/torch_ns_bench.py --ours "$O/costs.csv" --check --out "$O/torch.log" > /dev/null 2>>"$O/dmon.txt"
  echo "torch rc $?"; cat "$O/torch.log"
fi
if [ "$mode" = v9 ]; then
  env_info > "$O/env.txt" 2>&1
  # the tensor-core instructions and local memory of our kernels, per architecture
  if command -v cuobjdump >/dev/null 2>&1; then
    timeout 60 cuobjdump -sass $D/test_ns_gpu > "$O/sass.txt" 2>&1
    awk '/code for sm_/ {arch = $NF; fn = ""} /Function :/ {fn = $3} fn ~ /k_gemm|k_fused/ {
           if ($0 ~ /HMMA/) h[arch " " fn]++; if ($0 ~ /LDL|STL/) l[arch " " fn]++; seen[arch " " fn] = 1 }
         END {for (k in seen) printf "%s HMMA %d LDL/STL %d\n", k, h[k], l[k]}' "$O/sass.txt" | sort > "$O/sass_summary.txt"
    echo "sass: $(wc -l < "$O/sass_summary.txt") kernels of ours; without HMMA: $(awk '$4 == 0' "$O/sass_summary.txt" | wc -l); with local memory: $(awk '$6 > 0' "$O/sass_summary.txt" | wc -l)"
  else
    echo "sass: no cuobjdump on this machine"
  fi
  { env_info; timeout 120 $D/test_ns_gpu; echo "exit $?"; } > "$O/test_ns_gpu.log" 2>&1
  echo "test_ns_gpu: $(grep -c '^ok' "$O/test_ns_gpu.log") ok, $(grep -c '^not ok' "$O/test_ns_gpu.log") not ok, $(tail -1 "$O/test_ns_gpu.log")"
  grep -A1 '^not ok' "$O/test_ns_gpu.log" | head -16
  DM_TEST_OWN=1 timeout 50 compute-sanitizer --tool memcheck $D/test_ns_gpu > "$O/memcheck.log" 2>&1
  echo "memcheck (our kernels) rc $?: $(grep -c '^ok' "$O/memcheck.log") ok, $(grep -c '^not ok' "$O/memcheck.log") not ok; $(grep 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  DM_TEST_OWN=1 DM_TEST_NO_LT=1 timeout 50 compute-sanitizer --tool racecheck --racecheck-report all $D/test_ns_gpu \
    > "$O/racecheck.log" 2>&1
  echo "racecheck (our kernels, no cuBLASLt) rc $?: $(grep -c '^ok' "$O/racecheck.log") ok; $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$O/racecheck.log" | tail -1)"
  nvidia-smi dmon -s pc -d 2 > "$O/dmon.txt" 2>&1 &
  dmon=$!
  [ -f traces/kernels/autotune_h200.tsv ] && cp traces/kernels/autotune_h200.tsv "$O/autotune.tsv"
  { env_info; timeout 110 $D/dmuon bench kernels --shapes traces/kernels/goal_shapes.txt --cache "$O/autotune.tsv" \
      --retime-cached --no-gemm-tune --sym-blocks 1,8 --reps 10 --warmup 2 --no-elementwise --verbose \
      --out "$O/costs.csv"; echo "exit $?"; } > "$O/bench_goal.log" 2>&1
  echo "bench goal shapes: $(tail -1 "$O/bench_goal.log")"
  PYTHONUNBUFFERED=1 timeout 50 python3 tools/torch_ns_bench.py --ours "$O/costs.csv" --out "$O/torch.log" > /dev/null 2>>"$O/dmon.txt"
  echo "torch rc $?"
  { env_info; timeout 80 $D/dmuon bench kernels --shapes traces/kernels/big18_shapes.txt --cache "$O/autotune.tsv" \
      --retime-cached --no-gemm-tune --kernels lt,sym128 --reps 5 --warmup 1 --no-products --no-elementwise \
      --verbose --out "$O/costs_big18.csv"; echo "exit $?"; } > "$O/bench_big18.log" 2>&1
  echo "bench 18 shapes: $(tail -1 "$O/bench_big18.log")"
  { env_info; timeout 45 $D/dmuon bench kernels --shapes traces/kernels/expert_shapes.txt --cache "$O/autotune.tsv" \
      --retime-cached --no-gemm-tune --sym-blocks 1,8 --reps 5 --warmup 1 --no-products --no-elementwise \
      --verbose --out "$O/costs_experts.csv"; echo "exit $?"; } > "$O/bench_experts.log" 2>&1
  echo "bench expert batches: $(tail -1 "$O/bench_experts.log")"
  kill $dmon 2>/dev/null
  python3 tools/ns_bench_summary.py --bench "$O/bench_goal.log" --bench "$O/bench_big18.log" \
    --bench "$O/bench_experts.log" --torch "$O/torch.log" > "$O/summary.txt" 2>&1
  cat "$O/torch.log" 2>/dev/null | grep -v '^#   check'
  cat "$O/sass_summary.txt" 2>/dev/null | head -40
  cat "$O/summary.txt"
fi
if [ "$mode" = k2 ]; then
  t0=$(date +%s)
  K=$O/k2 # every log here, packed into $O/k2_logs.tgz at the end (the device tool brings back 8 files)
  mkdir -p "$K"
  env_info > "$K/env.txt" 2>&1
  { env_info; timeout 35 $D/test_ns_gpu; echo "exit $?"; } > "$K/test_ns_gpu.log" 2>&1
  echo "test_ns_gpu: $(grep -c '^ok' "$K/test_ns_gpu.log") ok, $(grep -c '^not ok' "$K/test_ns_gpu.log") not ok, $(tail -1 "$K/test_ns_gpu.log")"
  grep -A1 '^not ok' "$K/test_ns_gpu.log" | head -24
  grep -E '^(not )?ok' "$K/test_ns_gpu.log" | grep -E 'gram .*kernel (sym|fused)|fused gram|mm D =' | cut -c1-150 | head -64
  DM_TEST_OWN=1 DM_TEST_NO_LT=1 DM_TEST_QUICK=1 timeout 60 compute-sanitizer --tool racecheck --racecheck-report all \
    $D/test_ns_gpu > "$K/racecheck.log" 2>&1
  echo "racecheck (our kernels, quick set) rc $?: $(grep -c '^ok' "$K/racecheck.log") ok, $(grep -c '^not ok' "$K/racecheck.log") not ok; $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$K/racecheck.log" | tail -1); $(tail -1 "$K/racecheck.log")"
  [ -f traces/kernels/autotune_h200.tsv ] && cp traces/kernels/autotune_h200.tsv "$K/autotune.tsv"
  { env_info; timeout 35 $D/dmuon bench kernels --shapes traces/kernels/k2_shapes.txt --cache "$K/autotune.tsv" \
      --retime-cached --no-gemm-tune --kernels lt,sym64,sym128,fused32,fused64,fused128 --sym-blocks 1 --reps 10 \
      --warmup 2 --no-elementwise --verbose --out "$K/costs_k2.csv"; echo "exit $?"; } > "$K/bench_k2.log" 2>&1
  echo "bench k2 shapes: $(tail -1 "$K/bench_k2.log")"
  grep -E '^#   candidate|^ +[0-9]+x[0-9]+ +[0-9]+ (ns|syrk) ' "$K/bench_k2.log" | cut -c1-140
  for k in fused32 fused64 fused128; do
    timeout 8 $D/dmuon bench kernels --shapes traces/kernels/k2_profile_shapes.txt --kernels $k --no-gemm-tune \
      --reps 3 --warmup 1 --no-products --no-elementwise --profile > "$K/profile_$k.log" 2>&1
    echo "profile $k rc $?"
    grep -E '^#   fused|^#   sum|^  [0-9]+x' "$K/profile_$k.log"
  done
  # where our X X^T loses its time: run 9's ran at 140-195 TFLOP/s executed on every large shape
  # whatever the tile (64 or 128): Nsight Compute on its first launch at 3584^2 (128-tiles)
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$NCU" ]; then
    printf '3584 3584 1\n' > "$K/ncu_shape.txt"
    timeout 25 "$NCU" --kernel-name regex:k_gemm --launch-skip 0 --launch-count 1 --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
      $D/dmuon bench kernels --shapes "$K/ncu_shape.txt" --kernels sym128 --algos direct --no-gemm-tune --reps 1 \
      --warmup 0 --no-products --no-elementwise > "$K/ncu_k_gemm.txt" 2>&1
    echo "ncu k_gemm rc $?"
    grep -E 'k_gemm|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Warp Cycles Per Issued|Stall' "$K/ncu_k_gemm.txt" | head -24
  else
    echo "ncu: not on this machine"
  fi
  echo "k2 total $(( $(date +%s) - t0 )) s"
  tar czf "$O/k2_logs.tgz" -C "$O" k2 && rm -rf "$K"
  ls -la "$O/k2_logs.tgz"
fi
