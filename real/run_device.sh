#!/bin/bash
# run_device.sh: what one device call does for the real executor, from the repository root on a
# machine with 2 GPUs. The binary and the shared libraries the device may lack (GSL, jansson,
# lp_solve's colamd, a relocatable Open MPI with its PMIx) come in .devreal/, built and
# collected on the build machine; NCCL and cuBLAS are the device's own. Logs go to $OUT.
#   real/run_device.sh [quick|bench|all|second|gputest|gputest+llama|w3]
# gputest: tests/real_gpu.sh (TAP to $OUT/real_gpu.tap; expected under 90 s on 2 x H200);
# gputest+llama: then one Llama-3.2-3B dmuon run (step time with the ping-pong optimizer state);
# w3: the transformer workload's checks and measurements in one call, under 8 minutes on one
# H200 (tools/device-stages.sh: the work kernels against the CPU reference, tests/real_gpu.sh,
# dmuon bench work, three executor runs with memory and per-layer times, the PyTorch reference;
# logs in $OUT/logs.tgz).
set -u
O=${OUT:-/tmp/dmuon-out}
mkdir -p "$O"
D=$PWD/.devreal
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nccl_dir=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libnccl.so.2" ] && { nccl_dir=$d; break; }
done
if [ -z "$nccl_dir" ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
fi
base=$D/libbase:${nccl_dir}:/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if command -v mpirun >/dev/null 2>&1 && mpirun --version 2>&1 | grep -q "Open MPI) 4"; then
  MPIRUN=mpirun # the device's own Open MPI 4 (ABI of the build machine's): not the carried one
  export LD_LIBRARY_PATH=$base
else
  export LD_LIBRARY_PATH=$D/lib:$base
  export OPAL_PREFIX=$D/ompi PMIX_INSTALL_PREFIX=$D/pmix2 PATH=$D/ompi/bin:$PATH
  export OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2
  export OMPI_MCA_osc=^ucx OMPI_MCA_mca_base_component_show_load_errors=0
  MPIRUN=$D/ompi/bin/mpirun
fi
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "nccl: $nccl_dir ($(ls $nccl_dir/libnccl.so* 2>/dev/null | head -2 | tr '\n' ' '))"
  echo "mpirun: $MPIRUN ($($MPIRUN --version 2>&1 | head -1))"
  ldd $D/dmuon | grep -E "not found|nccl|cublas|mpi"
} > "$O/env.log" 2>&1
cat "$O/env.log"
mode=${1:-all}
if [ "$mode" = w3 ]; then exec tools/device-run.sh --budget 480 env wktest gputest work steps torchstep; fi
run2() { timeout "$1" $MPIRUN -np 2 --bind-to none "${@:2}"; }
tiny() { # STRATEGY [ARGS]
  echo "== tiny $*" >> "$O/tiny.log"
  run2 30 $D/dmuon run --backend gpu --model $PWD/tests/data/tiny_gpu.json --tokens 256 --steps 4 --timeout 20 --strategy "$@" \
    >> "$O/tiny.log" 2>&1
  local rc=$?
  echo "exit $rc" >> "$O/tiny.log"
  return $rc
}
llama() { # STRATEGY [ARGS]
  { echo "== llama-3.2-3b $*"; run2 90 $D/dmuon run --backend gpu --model models/llama-3.2-3b.json --cluster h200x2 \
      --tokens 4096 --steps 6 --timeout 60 --csv "$O/run_$1.csv" --strategy "$@"; echo "exit $?"; } >> "$O/llama.log" 2>&1
}
if [ "$mode" = gputest ] || [ "$mode" = gputest+llama ]; then
  { time DMUON=$D/dmuon DM_SRCDIR=$PWD MPIRUN=$MPIRUN timeout 300 sh tests/real_gpu.sh; } > "$O/real_gpu.tap" 2>&1
  echo "real_gpu.sh exit $?" >> "$O/real_gpu.tap"
  cat "$O/real_gpu.tap"
  # Llama-3.2-3B dmuon step time with the ping-pong state (no copies per step) against
  # runs/h200x2-2 (350-355 ms, before the rollback copies that the ping-pong state replaced)
  if [ "$mode" = gputest+llama ]; then llama dmuon; grep -E "^==|mean over|exit|rror" "$O/llama.log"; fi
  exit 0
fi
if [ "$mode" = second ]; then
  # Llama-3.2-3B again, NS plans configured from the autotune cache; the collective benchmark;
  # a stalled peer under --timeout
  llama dmuon --trace "$O/trace_dmuon.csv"
  llama muon-ddp
  llama adamw
  { timeout 120 $MPIRUN -np 2 --bind-to none $D/dmuon bench comm --csv "$O/comm.csv"; echo "exit $?"; } > "$O/comm.log" 2>&1
  tiny dmuon --steps 3 --timeout 5 --inject-stall 1:1:20
  grep -E "^==|mean over|exit|rror|NS plans" "$O/llama.log"
  sed -n '/# fit/,$p' "$O/comm.log"
  tail -12 "$O/tiny.log"
  exit 0
fi
# fail fast: one tiny run first; the benchmark only if it worked
if tiny dmuon; then
  if [ "$mode" != quick ]; then
    llama dmuon --trace "$O/trace_dmuon.csv"
    llama muon-ddp
    llama adamw
  fi
  for s in muon-ddp muon-fsdp muon-rr adamw; do tiny $s; done
  tiny dmuon --steps 3 --inject-nan 1:1:1
fi
grep -E "^==|exit|skipped|rror|mean over" "$O/tiny.log" | head -40
[ -f "$O/llama.log" ] && grep -E "^==|mean over|exit|rror" "$O/llama.log"
exit 0
