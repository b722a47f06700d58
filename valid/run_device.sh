#!/bin/bash
# valid/run_device.sh: what one device call does for validation and regression benchmarks, from
# the repository root on the 2 x H200 machine, in the executor's environment (the binary and
# libraries carried in .devreal/, set up exactly as real/run_device.sh does: its lines from
# "D=" to the end of the mpirun choice are evaluated here). Results go to $OUT.
#   valid/run_device.sh validate   # dmuon validate: 3 strategies x 2 overlaps x 1,2 GPUs, Llama-3.2-3B
#   valid/run_device.sh regress    # dmuon regress --update for machine kind h200 (full suite, GPU part;
#                                  # the reason stored from $REGRESS_REASON)
#   valid/run_device.sh models     # issue 14 on one GPU: calibrate on Llama-3.2-3B's dmuon trace
#                                  # (the one model it is fitted on), then dmuon validate across six
#                                  # models x 2048,4096 tokens x dmuon/muon-ddp/adamw with it
#   valid/run_device.sh all        # validate and regress
set -u
O=${OUT:-/tmp/dmuon-out}
mkdir -p "$O"
eval "$(sed -n '/^D=/,/^{$/p' real/run_device.sh | sed '$d')"
B=${DMUON_BIN:-$D/dmuon} # a binary built from this tree (with validate and regress)
if [ -z "${MPIRUN:-}" ] || [ ! -x "$B" ]; then
  echo "valid/run_device.sh: the environment of real/run_device.sh did not set up (MPIRUN, $B)" >&2
  exit 1
fi
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export DMUON_MODELS=$PWD/models DMUON_COSTS=$PWD/traces/costs MPIRUN="$MPIRUN --bind-to none"
mode=${1:-all}
if [ "$mode" = validate ] || [ "$mode" = all ]; then
  timeout 420 $B validate --cluster h200x2 --calibration traces/calib/h200x2.calib \
    --models llama-3.2-3b --strategies dmuon,muon-ddp,adamw --overlaps interleave,none --gpus 1,2 \
    --steps 5 --tokens 4096 --mpirun "$MPIRUN" --out "$O/validate" > "$O/validate.txt" 2> "$O/validate.err"
  echo "validate exit $?" >> "$O/validate.txt"
  tail -75 "$O/validate.txt"
fi
if [ "$mode" = models ]; then
  K=traces/costs/h200.csv
  [ -f traces/costs/h200-work.csv ] && K=$K,traces/costs/h200-work.csv # bench work's rows, joined
  C=llama-3.2-3b.dmuon.interleave.1gpu
  timeout 150 $B validate --cluster h200 --models llama-3.2-3b --strategies dmuon --overlaps interleave --gpus 1 \
    --steps 5 --tokens 4096 --costs "$K" --out "$O/calib-run" > "$O/calib-run.txt" 2>&1
  echo "calibration run exit $?" >> "$O/calib-run.txt"
  $B calibrate --cluster h200 --trace "$O/calib-run/$C/real.csv" --program "$O/calib-run/$C/program.json" \
    --kernels "$K" --out "$O/h200.calib" > "$O/calibrate.txt" 2>&1
  echo "calibrate exit $?" >> "$O/calibrate.txt"
  tail -20 "$O/calibrate.txt"
  timeout 420 $B validate --cluster h200 --calibration "$O/h200.calib" \
    --models llama-3.2-3b,qwen2.5-1.5b,qwen2.5-7b,wall-oss-flow,qwen2.5-vl-3b,moonlight-16b-a3b-6l \
    --strategies dmuon,muon-ddp,adamw --overlaps interleave --gpus 1 --tokens 2048,4096 --steps 3 \
    --out "$O/models" > "$O/models.txt" 2> "$O/models.err"
  echo "validate exit $?" >> "$O/models.txt"
  sed -n '/^# errors by model/,$p' "$O/models.txt"
fi
if [ "$mode" = regress ] || [ "$mode" = all ]; then
  timeout 420 $B regress --machine h200 --exec-gpus 2 --reps 3 --costs traces/costs/roofline.csv \
    --baselines "$O/baselines" --update --reason "${REGRESS_REASON:-first H200 baseline (2 x H200 device)}" > "$O/regress.txt" 2>&1
  echo "regress exit $?" >> "$O/regress.txt"
  tail -5 "$O/regress.txt"
fi
exit 0
