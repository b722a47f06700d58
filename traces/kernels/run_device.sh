#!/bin/bash
# run_device.sh: everything one device call does for the GPU kernels, from the repository root:
# the GPU test, compute-sanitizer (memcheck, racecheck) on it, `dmuon bench kernels` over the
# given shapes, and the PyTorch side-by-side. The binaries (dmuon, test_ns_gpu) and the shared
# libraries the device lacks come in .devreal/ as real/run_device.sh sets it up (its environment
# block is reused here). The autotune cache starts from the committed traces/kernels/
# autotune_h200.tsv, so the one written to $OUT holds the old entries and the re-tuned ones.
# Logs go to $OUT (or /tmp/dmuon-out).
#   traces/kernels/run_device.sh [test|testsan|bench|all] [BENCH ARGS...]
# test: the GPU test alone; testsan/all: with compute-sanitizer memcheck and racecheck.
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
