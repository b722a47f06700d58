#!/bin/bash
# run_device.sh: everything one device call does for the GPU kernels, from the repository root:
# the GPU test, compute-sanitizer (memcheck, racecheck) on it, `dmuon bench kernels` over the
# given shapes, and the PyTorch side-by-side. Binaries and the shared libraries the device lacks
# come in .devbin/ (built on the build machine). Logs go to $OUT (or /tmp/dmuon-out).
#   traces/kernels/run_device.sh [test|bench|all] [BENCH ARGS...]
set -u
O=${OUT:-/tmp/dmuon-out}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/.devbin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mode=${1:-all}
shift || true
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  ls -la /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so* 2>&1 | head -3
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1
} > "$O/env.txt" 2>&1
if [ "$mode" = test ] || [ "$mode" = all ]; then
  .devbin/test_ns_gpu > "$O/test_ns_gpu.log" 2>&1
  echo "test_ns_gpu rc $?"; grep -c '^ok' "$O/test_ns_gpu.log"; grep -A1 '^not ok' "$O/test_ns_gpu.log" | head -20
  timeout 120 compute-sanitizer --tool memcheck --leak-check full .devbin/test_ns_gpu > "$O/sanitizer.log" 2>&1
  echo "memcheck rc $?"; tail -2 "$O/sanitizer.log"
  timeout 90 compute-sanitizer --tool racecheck --racecheck-report all \
    --kernel-name kns=k_ .devbin/test_ns_gpu >> "$O/sanitizer.log" 2>&1
  echo "racecheck rc $?"; tail -2 "$O/sanitizer.log"
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  .devbin/dmuon bench kernels --out "$O/costs.csv" --cache "$O/autotune.tsv" --verbose "$@" > "$O/bench.log" 2>&1
  echo "bench rc $?"; tail -4 "$O/bench.log"
  PYTHONUNBUFFERED=1 python3 tools/torch_ns_bench.py --ours "$O/costs.csv" --check --out "$O/torch.log" > /dev/null 2>"$O/torch.err"
  echo "torch rc $?"; cat "$O/torch.log"; tail -3 "$O/torch.err"
fi
