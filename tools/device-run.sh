#!/bin/bash
# tools/device-run.sh: what one call of the device tool runs, from the repository root of the
# device machine's copy of the tree: named stages, each under its own timeout, within one overall
# budget (a stage that would not fit in what is left is skipped and says so), every log packed
# into one archive at the end ($OUT/logs.tgz: the device tool brings back at most 8 files).
# The binaries and libraries come in .devreal/ or packed in .devreal.txz (tools/build-device.sh;
# carry [".devreal.txz"]: unpacked here, in place of any .devreal/ there).
#   tools/device-run.sh [--budget SECONDS] [--gpu NAME] STAGE...      (default budget 540 s)
# --gpu NAME: run the stages only on a GPU whose name (nvidia-smi) contains NAME (e.g. H200: rows
# and validations priced against the H200's tables); on another, say so and run none (exit 3).
# Stages:
#   env       the GPU, driver, clocks, NCCL, mpirun, what the binary links
#   gputest   tests/real_gpu.sh: the GPU executor's checks (real/run_device.sh gputest)
#   nstest    kernels/ GPU test (test_ns_gpu)
#   nssan     compute-sanitizer memcheck and racecheck on our own NS kernels only
#   nsgoal    the NS goal shapes (cached cuBLASLt beside our kernels) and PyTorch in the same call
#   nssmall   the fused NS of small matrices with its grid capped (DM_NSM_MAX_CTAS) beside cuBLASLt
#   nsbig     the 18 large NS shapes and the MoE expert batches
#   nsblock   the one-CTA-per-matrix NS (kernels/ns_block.cu): its tests, memcheck and racecheck,
#             its SASS for sm_80 and sm_90, small shapes timed beside cuBLASLt, fused and PyTorch
#   elemrows  the elementwise rows (muon_update apply and prep, adamw) at traces/kernels/elem_sizes.txt's
#             sizes ($L/elem_rows.csv): the executor's Muon update op, its NS op's check and momentum
#   blockrows the NS rows and autotune entries of traces/kernels/block_shapes.txt: the cached
#             cuBLASLt configuration re-timed beside kernels block and block16, the fastest kept
#             ($L/block_rows.csv, $L/autotune.tsv)
# More stages are defined in tools/device-stages.sh when it exists (sourced; functions
# stage_NAME with a timeout in STAGE_TIMEOUT_NAME), so other work adds stages without editing this.
set -u
O=${OUT:-/tmp/dmuon-out}
mkdir -p "$O/logs"
L=$O/logs
budget=540
want=
while [ $# -gt 1 ]; do
    case $1 in
    --budget) budget=$2; shift 2 ;;
    --gpu) want=$2; shift 2 ;;
    *) break ;;
    esac
done
t0=$(date +%s)
if [ -f .devreal.txz ]; then rm -rf .devreal && tar -xJf .devreal.txz; fi
eval "$(sed -n '/^D=/,/^{$/p' real/run_device.sh | sed '$d')" # D, LD_LIBRARY_PATH, MPIRUN: the executor's set-up
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
export DMUON_MODELS=$PWD/models DMUON_COSTS=$PWD/traces/costs
summary=$O/summary.txt
: > "$summary"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
say "gpu: ${gpu:-none found}"
if [ -n "$want" ] && [ "${gpu#*"$want"}" = "$gpu" ]; then
    say "the stages want a GPU named *$want*; this one is ${gpu:-none}: no stage run"
    exit 3
fi

STAGE_TIMEOUT_env=20
stage_env() {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit \
        --format=csv
    nvidia-smi -L
    echo "mpirun: ${MPIRUN:-none} ($(${MPIRUN:-false} --version 2>&1 | head -1))"
    cat .devreal/MANIFEST 2>/dev/null
    for b in "$D/dmuon" "$D/dmuon-gpu.so"; do echo "$b:"; ldd "$b" | grep -E "not found|nccl|cublas|mpi|gsl"; done
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1
}
STAGE_TIMEOUT_gputest=200
stage_gputest() {
    DMUON=$D/dmuon DM_SRCDIR=$PWD MPIRUN=$MPIRUN timeout 190 sh tests/real_gpu.sh
    echo "real_gpu.sh exit $?"
}
STAGE_TIMEOUT_nstest=110
stage_nstest() {
    timeout 100 "$D/test_ns_gpu"
    echo "test_ns_gpu exit $?"
}
STAGE_TIMEOUT_nssan=100
stage_nssan() {
    DM_TEST_OWN=1 timeout 45 compute-sanitizer --tool memcheck "$D/test_ns_gpu" > "$L/memcheck.txt" 2>&1
    echo "memcheck (our kernels) rc $?: $(grep -c '^ok' "$L/memcheck.txt") ok, $(grep -c '^not ok' "$L/memcheck.txt") not ok; $(grep 'ERROR SUMMARY' "$L/memcheck.txt" | tail -1)"
    DM_TEST_OWN=1 DM_TEST_NO_LT=1 timeout 45 compute-sanitizer --tool racecheck --racecheck-report all "$D/test_ns_gpu" \
        > "$L/racecheck.txt" 2>&1
    echo "racecheck (our kernels) rc $?: $(grep -c '^ok' "$L/racecheck.txt") ok; $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$L/racecheck.txt" | tail -1)"
}
STAGE_TIMEOUT_nsgoal=170
stage_nsgoal() {
    [ -f traces/kernels/autotune_h200.tsv ] && cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    timeout 110 "$D/dmuon" bench kernels --shapes traces/kernels/goal_shapes.txt --cache "$L/autotune.tsv" \
        --retime-cached --no-gemm-tune --sym-blocks 1,8 --reps 10 --warmup 2 --no-elementwise --verbose \
        --out "$L/costs_goal.csv"
    echo "bench goal exit $?"
    timeout 50 python3 tools/torch_ns_bench.py --ours "$L/costs_goal.csv" --out "$L/torch_ns.txt" > /dev/null
    echo "torch_ns_bench exit $?"
    cat "$L/torch_ns.txt"
}
STAGE_TIMEOUT_nssmall=230
# nssmall: the fused NS of small matrices with its grid capped (DM_NSM_MAX_CTAS, kernels/ns_small.cu)
# beside cuBLASLt's plan: does one CTA per matrix (no split-K, barriers among few CTAs) beat the
# launch-bound graph? Every candidate is gated against the reference as in the autotuner.
stage_nssmall() {
    printf '128 128 1,8\n256 256 1,8\n256 1536 1,64\n512 512 1\n1024 1024 1\n' > "$L/small_shapes.txt"
    local cap k
    for cap in 0 1 2 4 8 16 64; do
        k=fused32,fused64; [ "$cap" = 0 ] && k=lt,fused32,fused64
        DM_NSM_MAX_CTAS=$cap timeout 40 "$D/dmuon" bench kernels --shapes "$L/small_shapes.txt" --kernels "$k" \
            --no-products --no-elementwise --no-gemm-tune --reps 10 --warmup 2 --verbose \
            --out "$L/small_cap$cap.csv" > "$L/small_cap$cap.txt" 2>&1
        echo "cap $cap exit $?"
        grep -E '^#   candidate' "$L/small_cap$cap.txt" | grep -v REJECTED | sed 's/^#   candidate //' | \
            awk '{print $1, $2, $3, $4, $7, $8}' | head -40
        grep -c REJECTED "$L/small_cap$cap.txt"
    done
}
STAGE_TIMEOUT_nsbig=140
stage_nsbig() {
    [ -f "$L/autotune.tsv" ] || cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    timeout 80 "$D/dmuon" bench kernels --shapes traces/kernels/big18_shapes.txt --cache "$L/autotune.tsv" \
        --retime-cached --no-gemm-tune --kernels lt,sym128 --reps 5 --warmup 1 --no-products --no-elementwise \
        --out "$L/costs_big18.csv"
    echo "bench big18 exit $?"
    timeout 45 "$D/dmuon" bench kernels --shapes traces/kernels/expert_shapes.txt --cache "$L/autotune.tsv" \
        --retime-cached --no-gemm-tune --sym-blocks 1,8 --reps 5 --warmup 1 --no-products --no-elementwise \
        --out "$L/costs_experts.csv"
    echo "bench experts exit $?"
}
# The one-CTA-per-matrix kernels' checks, shared by nsblock, blockquick and nsb16 (device-stages.sh).
# block_checks P LABEL TEST_S MEM_S N: test_ns_gpu's block tests ($L/P_test.txt, under TEST_S
# seconds; the first N failures shown) and compute-sanitizer memcheck on them ($L/P_memcheck.txt,
# MEM_S seconds).
block_checks() {
    DM_TEST_ONLY=block timeout "$3" "$D/test_ns_gpu" > "$L/$1_test.txt" 2>&1
    echo "test_ns_gpu ($2) exit $?: $(grep -c '^ok' "$L/$1_test.txt") ok, $(grep -c '^not ok' "$L/$1_test.txt") not ok"
    grep '^not ok' "$L/$1_test.txt" | head -"$5"
    DM_TEST_ONLY=block timeout "$4" compute-sanitizer --tool memcheck "$D/test_ns_gpu" > "$L/$1_memcheck.txt" 2>&1
    echo "memcheck ($2) rc $?: $(grep -c '^ok' "$L/$1_memcheck.txt") ok; $(grep 'ERROR SUMMARY' "$L/$1_memcheck.txt" | tail -1)"
}
# block_race_sass P LABEL KERNEL_RE: racecheck ($L/P_racecheck.txt, 40 s) on our kernels' quick
# block tests (DM_TEST_OWN=1, without which DM_TEST_QUICK and DM_TEST_NO_LT do not act: the quick
# set without cuBLASLt), then per sm_80 and sm_90 the HMMA, LDSM and local memory instructions of
# each kernel whose name matches KERNEL_RE in the plug-in's SASS.
block_race_sass() {
    DM_TEST_OWN=1 DM_TEST_ONLY=block DM_TEST_QUICK=1 DM_TEST_NO_LT=1 timeout 40 \
        compute-sanitizer --tool racecheck --racecheck-report all "$D/test_ns_gpu" > "$L/$1_racecheck.txt" 2>&1
    echo "racecheck ($2, quick) rc $?: $(grep -c '^ok' "$L/$1_racecheck.txt") ok; $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$L/$1_racecheck.txt" | tail -1)"
    if command -v cuobjdump >/dev/null 2>&1; then
        local a
        for a in sm_80 sm_90; do
            cuobjdump -sass -arch $a "$D/dmuon-gpu.so" 2>/dev/null | awk -v arch=$a -v re="$3" '
                /Function : / { keep = $NF ~ re; if (keep) fn = $NF }
                keep && /HMMA/ { h[fn]++ } keep && /LDSM/ { l[fn]++ } keep && /(LDL|STL)/ { loc[fn]++ } keep { seen[fn] = 1 }
                END { for (k in seen) printf "sass %s %s: HMMA %d LDSM %d local %d\n", arch, k, h[k], l[k], loc[k] }'
        done
    else
        echo "no cuobjdump: SASS not inspected"
    fi
}
STAGE_TIMEOUT_nsblock=400
stage_nsblock() {
    block_checks block block 40 40 5
    block_race_sass block block k_block
    # the goal's 128x128, small squares, and the bundled models' shapes with a side <= 128
    # (DeepSeek-V4 24x16384, 4x16384, 64x4096/7168, Moonlight 64x2048, Qwen2.5-0.5B 128x896,
    # Qwen3-30B-A3B 128x2048, pi0 32x1024, WALL-OSS 14x2048, 28x2048)
    printf '128 128 1,8,64\n64 64 1,8\n32 32 1\n96 96 1\n24 16384 1,43\n4 16384 1\n64 4096 1,21\n64 7168 1,30\n64 2048 1,26\n128 896 1,24\n128 2048 1,6\n32 1024 1\n14 2048 1\n2048 28 1\n24 28672 1,61\n' > "$L/block_shapes.txt"
    timeout 150 "$D/dmuon" bench kernels --shapes "$L/block_shapes.txt" --kernels lt,fused32,fused64,block --algos direct,gram \
        --no-products --no-elementwise --no-gemm-tune --reps 20 --warmup 3 --verbose --out "$L/block.csv" > "$L/block_bench.txt" 2>&1
    echo "bench block exit $?"
    timeout 60 "$D/dmuon" bench kernels --shapes "$L/block_shapes.txt" --kernels block --algos direct --profile \
        --no-products --no-elementwise --no-gemm-tune --reps 10 --warmup 2 --out "$L/block_prof.csv" > "$L/block_prof.txt" 2>&1
    echo "bench block --profile exit $?"
    grep -E '^#     block|^#       iteration [04]|^# profile' "$L/block_prof.txt" | head -60
    if command -v ncu >/dev/null 2>&1; then # where a CTA's time goes (128x128: one CTA per matrix)
        printf '128 128 1\n24 16384 1\n' > "$L/block_ncu_shapes.txt"
        timeout 90 ncu --kernel-name regex:k_block --launch-skip 3 --launch-count 2 --section WarpStateStats \
            --section SchedulerStats --section ComputeWorkloadAnalysis \
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor.sum \
            "$D/dmuon" bench kernels --shapes "$L/block_ncu_shapes.txt" --kernels block --algos direct --no-products \
            --no-elementwise --no-gemm-tune --reps 3 --warmup 1 --out "$L/block_ncu.csv" > "$L/block_ncu.txt" 2>&1
        echo "ncu exit $?"
        grep -E "k_block|Warp Cycles Per Issued|No Eligible|Executed Ipc Active|inst_executed|stalled_(barrier|long|short|math|mio|wait|not_sel|dispatch|lg|membar|branch|no_inst|selected)[a-z_]*_per|ERR" "$L/block_ncu.txt" | head -50
    fi
    grep -E '^#   candidate' "$L/block_bench.txt" | sed 's/^#   candidate //' | head -80
    timeout 40 python3 tools/torch_ns_bench.py --ours "$L/block.csv" --shapes "$L/block_shapes.txt" --out "$L/block_torch.txt" > /dev/null
    echo "torch_ns_bench exit $?"
    cat "$L/block_torch.txt"
}
STAGE_TIMEOUT_elemrows=120
stage_elemrows() {
    timeout 110 "$D/dmuon" bench kernels --shapes traces/kernels/elem_sizes.txt --algos none --no-products \
        --warmup 3 --reps 15 --out "$L/elem_rows.csv" > "$L/elem_rows.txt" 2>&1
    echo "bench elemrows exit $?"
    grep -c ',muon_update,apply,' "$L/elem_rows.csv"
    grep -E ' muon_update| adamw' "$L/elem_rows.txt" | head -12
}
STAGE_TIMEOUT_blockrows=200
stage_blockrows() {
    [ -f "$L/autotune.tsv" ] || cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    timeout 190 "$D/dmuon" bench kernels --shapes traces/kernels/block_shapes.txt --cache "$L/autotune.tsv" \
        --retime-cached --kernels lt,block,block16 --algos direct --no-products --no-elementwise --no-gemm-tune --warmup 3 \
        --reps 15 --verbose --out "$L/block_rows.csv" > "$L/block_rows.txt" 2>&1
    echo "bench blockrows exit $?"
    grep -v '^#' "$L/block_rows.txt" | head -5
    grep -c ' block k=' "$L/block_rows.txt"
}
[ -f tools/device-stages.sh ] && . tools/device-stages.sh

for s in "$@"; do
    if ! declare -F "stage_$s" >/dev/null; then say "stage $s: unknown, skipped"; continue; fi
    tv="STAGE_TIMEOUT_$s"
    lim=${!tv:-120}
    left=$((budget - ($(date +%s) - t0)))
    if [ "$left" -lt "$lim" ]; then say "stage $s: skipped ($left s left of the budget, it may take $lim)"; continue; fi
    a=$(date +%s)
    "stage_$s" > "$L/$s.txt" 2>&1
    say "stage $s: $(($(date +%s) - a)) s; last lines:"
    tail -n 12 "$L/$s.txt" | sed 's/^/    /' | tee -a "$summary"
done
say "total $(($(date +%s) - t0)) s"
tar czf "$O/logs.tgz" -C "$O" logs summary.txt 2>/dev/null && rm -rf "$L" # one archive: the tool brings back 8 files at most
ls -la "$O/logs.tgz"
