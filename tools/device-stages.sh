# tools/device-stages.sh: the device stages of the executor's transformer workload (issues 13/14),
# sourced by tools/device-run.sh (which defines D, MPIRUN, L and the environment; each stage's
# output goes to $L/NAME.txt, its last lines to the summary). A failure in one model or kernel
# does not stop the others; every command has its own timeout inside the stage's.
#   tools/device-run.sh --budget 480 env wktest gputest work steps torchstep   (about 7 minutes, one H200)
#   real/run_device.sh w3                                        (the same, one call)
# Stages:
#   wktest     tests/test_wk_gpu: every work kernel kind against the CPU reference, the 1-D
#              backward's bandwidth (>= 50% of HBM)
#   workcool   the same timed --cool (rows at full clock, $L/h200-work-cool.csv)
#   work       dmuon bench work: the validation models at 2048 and 4096 tokens plus the GEMM grid
#              (dmuon-costs-2 rows in $L/h200-work.csv: what traces/costs/h200-work.csv holds for the
#              cost model; the table in $L/work_table.txt, the cache
#              $L/work_cache.tsv started from traces/costs/work_cache_h200.tsv when committed)
#   steps      dmuon run on one GPU (dmuon, 4096 tokens, 4 steps) of llama-3.2-3b, qwen2.5-1.5b and
#              moonlight-16b-a3b-6l: memory estimate beside the measured peak, per-layer forward
#              and backward, traces $L/trace_MODEL.csv, step CSVs $L/run_MODEL.csv
#   stepsvla   the same for wall-oss-flow and qwen2.5-vl-3b (2 steps: does WALL-OSS fit one H200)
#   torchstep  tools/torch_step_bench.py for the three models of `steps` ($L/torch_MODEL.json) and
#              tools/trace_layers.py of each beside the executor's trace
#   torchvl    the VLM of the goal's "one VLA or MoE model": qwen2.5-vl-3b by dmuon run (4 steps,
#              traced) and by tools/torch_step_bench.py (its decoder layers and its vision tower's
#              blocks), each set held against the executor's by tools/trace_layers.py
#   torchvlcut torchvl on a card the whole VLM's step does not fit (an H100): the executor runs it
#              with its language model cut to 4 layers, PyTorch the whole model (below)
#   plugin     the GPU plug-in beside the program: --version, bench comm --backend gpu, bench kernels
#   regress    dmuon regress --update of the h200 baseline into $L/baselines
#   causal     --attention causal timed and validated (bench work rows of the triangle's kernels,
#              validate of two models at 1024 and 4096 tokens, PyTorch's steps beside; below)

W3_MODELS="llama-3.2-3b qwen2.5-1.5b moonlight-16b-a3b-6l"

STAGE_TIMEOUT_wktest=40
stage_wktest() {
    if [ ! -x "$D/test_wk_gpu" ]; then
        echo "test_wk_gpu was not carried (tools/build-device.sh builds it into .devreal)"
        return 0
    fi
    timeout 35 "$D/test_wk_gpu"
    echo "test_wk_gpu exit $?"
    # the SASS of the work kernels (the build machine has no cuobjdump): 16-byte accesses of the
    # <8> variants, no local memory
    if command -v cuobjdump >/dev/null 2>&1; then
        cuobjdump -sass "$D/test_wk_gpu" 2>/dev/null | awk '
            /arch = sm_/ { arch = $NF }
            /Function : / { fn = $NF; keep = fn ~ /k_(loss|scale|red1|red2|embed|embed_bwd|route|route_bwd|fill_hash|softmax|softmax_bwd|pass|rope)/ }
            keep && /LDG\.E\.128/ { ldg[arch " " fn]++ } keep && /STG\.E\.128/ { stg[arch " " fn]++ }
            keep && /(LDL|STL)/ { loc[arch " " fn]++ } keep { seen[arch " " fn] = 1 }
            END { for (k in seen) printf "sass %s: LDG.128 %d STG.128 %d local %d\n", k, ldg[k], stg[k], loc[k] }' | sort
    else
        echo "no cuobjdump on the device either: SASS not inspected"
    fi
}

# smxab: the softmax forms against each other on this GPU: test_wk_gpu under each form
# (DM_SMX_NT picks the forward's block size for rows over 4096 scores, DM_SMX_BWD_REG=0 the
# two-pass backward), then bench work on Llama-3.2-3B at 4096 and 8192 tokens and Qwen2.5-1.5B at
# 16384 under each (the softmax rows of $L/smx_*.txt; kernels/wk_cuda.cu)
STAGE_TIMEOUT_smxab=200
stage_smxab() {
    local v
    for v in "DM_SMX_NT=128" "DM_SMX_NT=512" "DM_SMX_BWD_REG=0"; do
        [ -x "$D/test_wk_gpu" ] && env "$v" timeout 30 "$D/test_wk_gpu" > "$L/smx_test_${v//=/_}.txt" 2>&1
        echo "test_wk_gpu $v exit $? ($(grep -c '^ok' "$L/smx_test_${v//=/_}.txt") ok, $(grep -c '^not ok' "$L/smx_test_${v//=/_}.txt") not ok)"
    done
    for v in "DM_SMX_NT=256" "DM_SMX_NT=128" "DM_SMX_NT=512" "DM_SMX_BWD_REG=0"; do
        local f="$L/smx_${v//=/_}.txt"
        env "$v" timeout 40 "$D/dmuon" bench work --models llama-3.2-3b --tokens 4096,8192 --no-grid --out "$L/smx_${v//=/_}.csv" > "$f" 2>&1
        env "$v" timeout 40 "$D/dmuon" bench work --models qwen2.5-1.5b --tokens 16384 --no-grid --out "$L/smx16k_${v//=/_}.csv" >> "$f" 2>&1
        echo "== $v"
        grep -E ' softmax(-bwd)? ' "$f" | awk '{print "   ", $2, $3, $4, $7, $11, $12}'
    done
}

# WORK_TOKENS (default 2048,4096): the token counts of the models' kernels; validating at 8192
# tokens wants 8192 in it (the h200-14-tokens call priced 8192 by extrapolation: 7-12% short)
STAGE_TIMEOUT_work=230
stage_work() {
    # measured afresh in the call whose runs they price (WORK_CACHE=1: start from the committed
    # cache): rows of the same kernels from another call's machine differed by up to 21%
    # (traces/device/stepprobe-2026-12-01)
    [ "${WORK_CACHE:-0}" = 1 ] && [ -f traces/costs/work_cache_h200.tsv ] && cp traces/costs/work_cache_h200.tsv "$L/work_cache.tsv"
    timeout 225 "$D/dmuon" bench work --models validation --tokens "${WORK_TOKENS:-2048,4096}" --cache "$L/work_cache.tsv" \
        --max-seconds 200 --out "$L/h200-work.csv" > "$L/work_table.txt" 2> "$L/work_err.txt"
    echo "bench work exit $? ($(grep -vc '^#' "$L/h200-work.csv" 2>/dev/null || echo 0) cost rows)"
    grep -E '^# (dmuon bench work|estimate|sustained|stopped|[0-9]+ kernels timed|wrote)' "$L/work_table.txt"
    # the 1-D backward and the largest kernels of each kind
    grep -E ' vector-bwd ' "$L/work_table.txt" | sort -k7 -n -r | head -3
    grep -E ' softmax(-bwd)? ' "$L/work_table.txt" | sort -k7 -n -r | head -4
    tail -3 "$L/work_err.txt"
}

# workcool: the same kernels and grid timed --cool (each kernel followed by an idle as long as
# its timing, no sustained load first): rows at full clock for the simulator's power model
# ($L/h200-work-cool.csv, its table $L/workcool_table.txt)
STAGE_TIMEOUT_workcool=230
stage_workcool() {
    [ "${WORK_CACHE:-0}" = 1 ] && [ -f traces/costs/work_cache_h200_cool.tsv ] &&
        cp traces/costs/work_cache_h200_cool.tsv "$L/work_cache_cool.tsv"
    timeout 225 "$D/dmuon" bench work --models validation --tokens "${WORK_TOKENS:-2048,4096}" --cool --sustain 0 \
        --cache "$L/work_cache_cool.tsv" --max-seconds 200 --out "$L/h200-work-cool.csv" > "$L/workcool_table.txt" \
        2> "$L/workcool_err.txt"
    echo "bench work --cool exit $? ($(grep -vc '^#' "$L/h200-work-cool.csv" 2>/dev/null || echo 0) cost rows)"
    grep -E '^# (dmuon bench work|estimate|sustained|stopped|bf16 GEMM|[0-9]+ kernels timed|wrote)' "$L/workcool_table.txt"
    tail -3 "$L/workcool_err.txt"
}

# One executor run: MODEL STEPS TIMEOUT [FILE] (the strategy $W3_STRATEGY, default dmuon; the plan's
# preset $W3_CLUSTER, default h200; the model file FILE, default models/MODEL.json)
w3_run() {
    local m=$1 f=${4:-models/$1.json}
    echo "== $m${4:+ ($4)}"
    timeout "$3" $MPIRUN -np 1 --bind-to none "$D/dmuon" run --backend gpu --model "$f" --cluster "${W3_CLUSTER:-h200}" \
        --strategy "${W3_STRATEGY:-dmuon}" --tokens 4096 --steps "$2" --timeout 60 --trace "$L/trace_$m.csv" --csv "$L/run_$m.csv" \
        > "$L/run_$m.txt" 2>&1
    echo "dmuon run $m exit $?"
    grep -E '^# (gpu:|mean over|GPU memory|per layer)|does not fit|rror|skipped' "$L/run_$m.txt" | head -8
}

STAGE_TIMEOUT_steps=140
stage_steps() {
    for m in $W3_MODELS; do w3_run "$m" 4 45; done
}

STAGE_TIMEOUT_stepsvla=130
stage_stepsvla() {
    for m in wall-oss-flow qwen2.5-vl-3b; do w3_run "$m" 2 60; done
}

# torch_layers M FILE TIMEOUT TAG [ARGS...]: tools/torch_step_bench.py of model M at 4096 tokens
# (ARGS added) into $L/torch_M$TAG.json (its output $L/torch_M$TAG.txt, its table printed), then
# tools/trace_layers.py of the executor's trace $L/trace_M.csv (model file FILE) beside it
torch_layers() {
    local m=$1 f=$2 tmo=$3 tag=$4
    shift 4
    timeout "$tmo" python3 tools/torch_step_bench.py --model "$m" --tokens 4096 --steps 5 --warmup 2 "$@" \
        --json "$L/torch_$m$tag.json" > "$L/torch_$m$tag.txt" 2>&1
    echo "torch_step_bench $m$tag exit $?"
    grep -v -i warn "$L/torch_$m$tag.txt" | grep -E '^(#|  )' | head -14
    if [ -f "$L/trace_$m.csv" ] && [ -f "$L/torch_$m$tag.json" ]; then
        python3 tools/trace_layers.py "$L/trace_$m.csv" --model "$f" --torch "$L/torch_$m$tag.json"
    fi
}

STAGE_TIMEOUT_torchstep=190
stage_torchstep() {
    for m in $W3_MODELS; do
        echo "== $m"
        torch_layers "$m" "models/$m.json" 45 ""
    done
    # the MoE model again with transformers' grouped GEMM experts (its default loops over the experts)
    m=moonlight-16b-a3b-6l
    echo "== $m (experts grouped_mm)"
    torch_layers "$m" "models/$m.json" 45 _grouped --experts grouped_mm
}

# causal (--attention causal; first run 2026-12-05, traces/device/causal-2026-12-05): the triangle's kernels timed first (bench
# work --attention causal from the committed cache, so only the new shapes run:
# $L/h200-work-causal.csv, added to the call's costs), then validate with --attention causal at
# 1024 and 4096 tokens (Llama-3.2-3B, Qwen2.5-1.5B; dmuon and adamw) into $L/causal, and
# PyTorch's steps (SDPA, causal) beside for the per-layer comparison (torchstep's models)
STAGE_TIMEOUT_causal=480
# bench work --attention causal's rows of MODELS at TOKENS ($L/h200-work-NAME.csv), of which the
# rows the committed table lacks ($L/h200-work-NAME-new.csv) join the call's costs (extra_costs):
#   causal_rows NAME MODELS TOKENS SECONDS
causal_rows() {
    local n=$1 t0=$SECONDS
    [ -f traces/costs/work_cache_h200.tsv ] && cp traces/costs/work_cache_h200.tsv "$L/work_cache_$n.tsv"
    timeout $(($4 + 20)) "$D/dmuon" bench work --models "$2" --tokens "$3" --attention causal \
        --no-grid --cache "$L/work_cache_$n.tsv" --max-seconds "$4" --out "$L/h200-work-$n.csv" \
        > "$L/work${n}_table.txt" 2> "$L/work${n}_err.txt"
    echo "bench work --attention causal ($n) exit $? ($(grep -vc '^#' "$L/h200-work-$n.csv" 2>/dev/null || echo 0) rows, $((SECONDS - t0)) s)"
    grep -E ' (attn-[a-z]*|softmax(-bwd)?) ' "$L/work${n}_table.txt" | head -12
    # only the rows the committed table lacks (a table may not hold one kernel twice)
    awk -F, 'NR == FNR { if ($0 !~ /^#/) seen[$2 "," $3 "," $4 "," $5 "," $6 "," $7] = 1; next }
        /^#/ || /^gpu,/ || !(($2 "," $3 "," $4 "," $5 "," $6 "," $7) in seen)' traces/costs/h200-work.csv \
        "$L/h200-work-$n.csv" > "$L/h200-work-$n-new.csv" 2>/dev/null
    echo "$(grep -vc '^#' "$L/h200-work-$n-new.csv") rows the committed table lacks"
    [ -s "$L/h200-work-$n-new.csv" ] && printf ',%s' "$L/h200-work-$n-new.csv" >> "$L/extra_costs"
}
stage_causal() {
    T0=$SECONDS
    causal_rows causal llama-3.2-3b,qwen2.5-1.5b 1024,4096 130
    validate_set causal
    [ "${CAUSAL_TORCH:-1}" = 0 ] || for m in llama-3.2-3b qwen2.5-1.5b; do torch_layers "$m" "models/$m.json" 45 ""; done
    echo "causal stage: $((SECONDS - T0)) s"
}

# vl_layers M FILE TIMEOUT: the VLM M (model file FILE) by dmuon run (4 steps, traced; W3_CLUSTER
# the preset of its plan) and by tools/torch_step_bench.py (the whole bundled architecture), its
# decoder layers and its vision tower's blocks each held against the executor's by trace_layers.py
vl_layers() {
    local m=$1 f=$2
    w3_run "$m" 4 "$3" "$f"
    torch_layers "$m" "$f" 100 ""
    if [ -f "$L/trace_$m.csv" ] && [ -f "$L/torch_$m.json" ]; then
        python3 tools/trace_layers.py "$L/trace_$m.csv" --model "$f" --stack visual.blocks \
            --torch "$L/torch_$m.json" --torch-part vision
    fi
}
STAGE_TIMEOUT_torchvl=200
stage_torchvl() { vl_layers qwen2.5-vl-3b models/qwen2.5-vl-3b.json 60; }

# torchvlcut (2026-12-07): torchvl where the VLM's whole step does not fit the card (an H100: 104
# GiB by the estimate): the executor runs Qwen2.5-VL-3B with its language model cut to 4 layers
# (traces/import/new-cuts-2026-12-07/qwen2.5-vl-3b-4l.json: the vision tower, merger, embedding and
# head the model's own; a layer's shapes the same), PyTorch the whole model; per layer, the tower's
# blocks and the decoder layers. TVL_CLUSTER (default h100): the preset the executor's plan is made for.
STAGE_TIMEOUT_torchvlcut=200
stage_torchvlcut() {
    W3_CLUSTER=${TVL_CLUSTER:-h100} vl_layers qwen2.5-vl-3b traces/import/new-cuts-2026-12-07/qwen2.5-vl-3b-4l.json 70
}

# h100tune (2026-12-07): is the H100's Muon optimizer phase slower than the H200's rows say because
# its NS plans take the H200's tuned configurations (kernels/autotune.c at_config_for, rule 4)? The
# NS shapes of two of the new models retuned on this card into the call's copy of the cache (its
# own entries: $L/ns_h100.csv, rows of this card), then their dmuon and muon-ddp cases at 4096
# tokens validated with it (VALIDATE_CLUSTER=h100), to hold against the same cases run with the
# H200's configurations (traces/validate/h100-new-2026-12-07)
STAGE_TIMEOUT_h100tune=430
stage_h100tune() {
    local M=traces/import/new-cuts-2026-12-07 c=traces/kernels/autotune_h200.tsv T0=$SECONDS
    timeout 200 "$D/dmuon" bench kernels --model $M/qwen2.5-7b-5l.json --model $M/glm-4.5-air-2l-16e.json \
        --cache "$c" --retune --no-products --no-elementwise --warmup 2 --reps 10 --out "$L/ns_h100.csv" \
        > "$L/ns_h100.txt" 2>&1
    echo "bench kernels exit $? ($((SECONDS - T0)) s; $(grep -vc '^#' "$L/ns_h100.csv" 2>/dev/null || echo 0) rows)"
    tail -3 "$L/ns_h100.txt"
    cp "$c" "$L/autotune_after.tsv"
    VALIDATE_CLUSTER=${VALIDATE_CLUSTER:-h100} VALIDATE_MODELS=$M/qwen2.5-7b-5l.json,$M/glm-4.5-air-2l-16e.json \
        VALIDATE_STRATEGIES=dmuon,muon-ddp VALIDATE_TOKENS=4096 VALIDATE_TIMEOUT=150 stage_validate
    grep -h "NS plans" "$L"/validate/*/run.log | head -4
}

# h100tuneall (2026-12-07): the H100's own entries in the autotune cache for the NS shapes of the
# models a one-GPU validation runs on it (h100tune showed its phase 2.4-8.5% faster with them): one
# `bench kernels` per model into traces/kernels/autotune_h200.tsv (keyed by GPU; shapes this card
# already has are not tuned again), each under its own timeout (the cache is written when a bench
# ends), the models in order until TUNE_SECONDS (default 360) have gone; $L/autotune_h100.tsv.
STAGE_TIMEOUT_h100tuneall=420
stage_h100tuneall() {
    local c=traces/kernels/autotune_h200.tsv T0=$SECONDS m e=models/extra n=traces/import/new-cuts-2026-12-07
    for m in $n/llama-3.1-8b-5l.json $n/gpt-oss-120b-1l-32e.json $n/paligemma-3b-pt-224-9l.json $n/qwen2-vl-7b-3l.json \
        qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b llama-3.2-3b pi0 pi0.5 qwen2.5-vl-3b moonlight-16b-a3b-6l \
        $e/pythia-1b.json $e/gemma-3-1b-pt.json $e/smollm3-3b.json $e/olmo-2-1124-7b-8l.json \
        $e/granite-3.1-8b-base-8l.json $e/gpt-oss-20b-2l.json $e/qwen2-vl-2b.json $e/olmoe-1b-7b-0924-4l.json \
        $e/qwen1.5-moe-a2.7b-3l.json $e/deepseek-v2-lite-4l.json $e/gemma-2b.json $e/gemma2-2b.json \
        $e/mistral-7b-v0.1-12l.json $e/mixtral-8x7b-v0.1-2l.json $e/starcoder2-3b.json $e/qwen3-30b-a3b-6l.json; do
        if [ $((SECONDS - T0)) -gt "${TUNE_SECONDS:-360}" ]; then echo "stopped before $m: ${TUNE_SECONDS:-360} s gone"; break; fi
        timeout 75 "$D/dmuon" bench kernels --model "$m" --cache "$c" --no-products --no-elementwise --warmup 2 --reps 10 \
            > "$L/tune_$(basename "$m" .json).txt" 2>&1
        echo "$m: exit $? ($((SECONDS - T0)) s, $(grep -c '^NVIDIA H100' "$c") H100 entries)"
    done
    cp "$c" "$L/autotune_h100.tsv"
}

# ---- the lead's stages: validation across models (issue 14) and the kernels' k2 check --------
# validate: dmuon validate of seven bundled models (small and mid dense with and without biases,
# two VLAs, a VLM, a MoE cut to fit) x dmuon/muon-ddp/adamw on one GPU at 4096 tokens, the
# simulator priced with this call's bench work rows; the measured phases (validate.csv) and the
# every case's trace and plan are kept (replayed and calibrated on the build machine; the plans
# let each traced op be held against its price).
# The cost tables a stage prices with: the NS table, this call's bench work rows when the work
# stage ran (else the committed ones), the eager stage's rows when it ran.
call_costs() {
    local K=traces/costs/h200.csv
    if [ -s "$L/h200-work.csv" ]; then K=$K,$L/h200-work.csv; else K=$K,traces/costs/h200-work.csv; fi
    echo "$K$(cat "$L/extra_costs" 2>/dev/null)"
}
# VALIDATE_TOKENS (default 4096; a list such as 2048,8192 runs each) sets the batch per rank;
# VALIDATE_STRATEGIES (default dmuon,muon-ddp,adamw) the strategies; VALIDATE_GPUS (default 1; a
# list such as 1,2) the GPU counts; VALIDATE_TIMEOUT (default 290 s) the command's limit;
# VALIDATE_ATTENTION (unset: whole) every case's --attention; VALIDATE_CLUSTER (default h200) the cluster.
VALIDATE_MODELS="${VALIDATE_MODELS:-llama-3.2-3b,qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-vl-3b,wall-oss-flow,pi0,moonlight-16b-a3b-6l}"
STAGE_TIMEOUT_validate=300
stage_validate() {
    local K
    K=$(call_costs)
    timeout "${VALIDATE_TIMEOUT:-290}" "$D/dmuon" validate --cluster "${VALIDATE_CLUSTER:-h200}" --costs "$K" --models "$VALIDATE_MODELS" \
        --strategies "${VALIDATE_STRATEGIES:-dmuon,muon-ddp,adamw}" --overlaps interleave --gpus "${VALIDATE_GPUS:-1}" --tokens "${VALIDATE_TOKENS:-4096}" --steps 3 \
        --mpirun "$MPIRUN --bind-to none" ${VALIDATE_ATTENTION:+--attention "$VALIDATE_ATTENTION"} \
        --out "$L/validate" > "$L/validate.txt" 2>&1
    echo "validate exit $?"
    sed -n '/^# errors by model/,$p' "$L/validate.txt" | head -30
    # muon-fsdp cases: the PyTorch form's serial gather-then-NS timeline (issue 15)
    for t in "$L"/validate/*.muon-fsdp.*/real.csv; do [ -f "$t" ] && python3 tools/fsdp_serial_check.py "$t"; done
    grep -h -E '^# (GPU memory|per layer|mean over)' "$L"/validate/*/run.log 2>/dev/null | head -30
    # keep what the build machine needs: the measured table, every run log, trace and plan
    for d in "$L"/validate/*/; do rm -f "$d/sim.csv"; done
}
STAGE_TIMEOUT_k2=190
stage_k2() {
    OUT=$L/k2out timeout 185 sh traces/kernels/run_device.sh k2
    echo "k2 exit $?"
}
# ktimes: every forward/backward kernel of a step timed in the executor (DMUON_KERNEL_TIMES),
# for five models, to hold the kernels as the step runs them against bench work's rows
STAGE_TIMEOUT_ktimes=90
stage_ktimes() {
    for m in llama-3.2-3b qwen2.5-1.5b moonlight-16b-a3b-6l wall-oss-flow pi0; do
        DMUON_KERNEL_TIMES="$L/ktimes_$m.csv" timeout 30 "$D/dmuon" run --backend gpu --model "models/$m.json" \
            --cluster h200 --strategy adamw --tokens 4096 --steps 2 --timeout 30 > "$L/ktimes_$m.txt" 2>&1
        echo "ktimes $m exit $? ($(wc -l < "$L/ktimes_$m.csv" 2>/dev/null || echo 0) kernels)"
    done
}
# nsrows: the NS cost rows of the validation models' plans (traces/kernels/validation_shapes:
# every shape and batch their 1-GPU dmuon and muon-ddp plans run, per algorithm), cuBLASLt
# plans autotuned from the committed cache; one CSV per file so that a timeout loses one model
STAGE_TIMEOUT_nsrows=420
stage_nsrows() {
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    local f b a t0=$SECONDS
    for f in traces/kernels/validation_shapes/*.txt; do
        b=$(basename "$f" .txt) a=${b##*.}
        if [ $((SECONDS - t0)) -gt 380 ]; then echo "nsrows: out of time before $b"; continue; fi
        timeout 120 "$D/dmuon" bench kernels --shapes "$f" --algos "$a" --kernels lt --no-products --no-elementwise \
            --no-gemm-tune --warmup 2 --reps 10 --cache "$L/autotune.tsv" --out "$L/ns_$b.csv" > "$L/ns_$b.txt" 2>&1
        echo "nsrows $b exit $? ($(grep -vc '^#' "$L/ns_$b.csv" 2>/dev/null || echo 0) rows, $((SECONDS - t0)) s)"
    done
}
# eager: the NS rows the validation models' plans need beyond traces/costs/h200.csv, measured
# with the committed cache's cuBLASLt configurations re-timed (ns_time_events: the host ahead of
# the GPU, as in a step):
#   $L/ns_eager.csv       direct-eager rows, the PyTorch forms' shapes (traces/kernels/eager_shapes.txt)
#   $L/ns_graph.csv       the same shapes with graphs (beside them, for the comparison)
#   $L/ns_tall_eager.csv  direct-eager rows of the tall matrices (--as-stored, tall_shapes_eager.txt)
#   $L/ns_tall_A.csv      direct and gram rows of the tall matrices of the dmuon plans (tall_shapes_A.txt)
# and PyTorch's own eager NS of the eager shapes in the same call ($L/torch_eager.txt). $L/extra_costs
# names the files the validate and naive stages add to their tables.
STAGE_TIMEOUT_eager=280
stage_eager() {
    local g f a
    bk() { # NAME SHAPES ALGO FLAGS...: one bench kernels run into $L/ns_NAME.csv
        local name=$1 shapes=$2 algo=$3
        shift 3
        cp traces/kernels/autotune_h200.tsv "$L/autotune_$name.tsv"
        timeout 100 "$D/dmuon" bench kernels --shapes "$shapes" --algos "$algo" --kernels lt --retime-cached --no-products \
            --no-elementwise --no-gemm-tune --warmup 3 --reps 15 --cache "$L/autotune_$name.tsv" "$@" \
            --out "$L/ns_$name.csv" > "$L/ns_$name.txt" 2>&1
        echo "bench kernels $name exit $? ($(grep -vc '^#' "$L/ns_$name.csv" 2>/dev/null || echo 0) lines)"
        rm -f "$L/autotune_$name.tsv"
    }
    bk eager traces/kernels/eager_shapes.txt direct --no-graph
    bk graph traces/kernels/eager_shapes.txt direct
    bk tall_eager traces/kernels/tall_shapes_eager.txt direct --as-stored --no-graph
    for a in direct gram; do bk tall_$a traces/kernels/tall_shapes_$a.txt $a --as-stored; done
    : > "$L/extra_costs"
    for f in eager tall_eager tall_direct tall_gram; do
        [ -s "$L/ns_$f.csv" ] && printf ',%s' "$L/ns_$f.csv" >> "$L/extra_costs"
    done
    timeout 90 python3 tools/torch_ns_bench.py --ours "$L/ns_eager.csv" --shapes traces/kernels/eager_shapes.txt \
        --out "$L/torch_eager.txt" > /dev/null 2>&1
    echo "torch_ns_bench exit $?"
    cat "$L/torch_eager.txt" 2>/dev/null | head -45
}
# naive: the naive baselines as PyTorch runs them (muon-ddp, muon-fsdp: one matrix per NS,
# direct, eager launches, classic coefficients; FSDP's gathers in the optimizer step) against
# the simulator, one GPU, four models, priced with this call's eager rows when the eager stage
# ran; every case's plan kept (replayed on the build machine with traces/calib/h200.calib)
STAGE_TIMEOUT_naive=260
stage_naive() {
    local K
    K=$(call_costs)
    timeout 250 "$D/dmuon" validate --cluster h200 --costs "$K" \
        --calibration traces/calib/h200.calib \
        --models llama-3.2-3b,qwen2.5-1.5b,wall-oss-flow,moonlight-16b-a3b-6l --strategies muon-ddp,muon-fsdp \
        --overlaps interleave --gpus 1 --tokens 4096 --steps 3 --mpirun "$MPIRUN --bind-to none" \
        --out "$L/naive" > "$L/naive.txt" 2>&1
    echo "validate exit $?"
    sed -n '/^# errors by model/,$p' "$L/naive.txt" | head -20
    for d in "$L"/naive/*/; do rm -f "$d/sim.csv"; done
}
# tokens: the simulator across batch sizes it was not calibrated at (2048 and 8192 tokens per
# GPU; bench work measured 2048 and 4096): four models x dmuon, adamw on one GPU, plans kept
STAGE_TIMEOUT_tokens=300
stage_tokens() {
    timeout 290 "$D/dmuon" validate --cluster h200 --costs traces/costs/h200.csv,traces/costs/h200-work.csv \
        --calibration traces/calib/h200.calib \
        --models llama-3.2-3b,qwen2.5-1.5b,wall-oss-flow,moonlight-16b-a3b-6l --strategies dmuon,adamw \
        --overlaps interleave --gpus 1 --tokens 2048,8192 --steps 3 --mpirun "$MPIRUN --bind-to none" \
        --out "$L/tokens" > "$L/tokens.txt" 2>&1
    echo "validate exit $?"
    sed -n '/^# errors by model/,$p' "$L/tokens.txt" | grep -v 'kernels:' | head -24
    for d in "$L"/tokens/*/; do rm -f "$d/sim.csv"; done
}

# plugin: the GPU side loaded from dmuon-gpu.so beside the program (core/gpu_api.h): --version
# names it, bench comm --backend gpu on one rank (NCCL through the plug-in, every result checked),
# bench kernels on two small shapes.
STAGE_TIMEOUT_plugin=90
stage_plugin() {
    "$D/dmuon" --version
    timeout 40 $MPIRUN -np 1 "$D/dmuon" bench comm --backend gpu --min-bytes 1M --max-bytes 64M --iters 5
    echo "bench comm --backend gpu exit $?"
    printf '1024 1024 1\n256 1536 1\n' > "$L/plugin_shapes.txt"
    timeout 40 "$D/dmuon" bench kernels --shapes "$L/plugin_shapes.txt" --out "$L/plugin_kernels.csv"
    echo "bench kernels exit $?"
    # --json: one document on stdout, the table on stderr
    for b in "kernels --shapes $L/plugin_shapes.txt" "work --models llama-3.2-3b --tokens 1024 --no-grid"; do
        timeout 60 "$D/dmuon" bench $b --json >"$L/plugin_json.out" 2>"$L/plugin_json.err"
        echo "bench $b --json exit $?: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["format"], d["benchmark"], d["table"], len(d["rows"]), "rows", d["columns"][:6])' "$L/plugin_json.out" 2>&1)"
    done
}

# regress: the GPU machine's regression baseline rewritten (dmuon regress --update, full suite, GPU
# part included) into $L/baselines/h200/full.tsv, the resolved configuration in $L/regress.txt.
STAGE_TIMEOUT_regress=200
stage_regress() {
    mkdir -p "$L/baselines"
    cp -r traces/baselines/h200 "$L/baselines/" 2>/dev/null
    timeout 190 "$D/dmuon" regress --update --baselines "$L/baselines" --machine h200 \
        --reason "${REGRESS_REASON:-re-measured on the GPU machine}"
    echo "regress --update exit $?"
}

# The GPU's SM clock, memory clock, power and temperature sampled beside a run: smi_start FILE
# [MS] (every MS ms, default 50) ... smi_stop FILE (stops it and prints the means)
smi_start() {
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader \
        -lms "${2:-50}" > "$1" 2>&1 &
    SMI=$!
}
smi_stop() {
    kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null
    awk -F', ' '{gsub(/ MHz/,"",$2); gsub(/ W/,"",$4); if ($2+0 > 0) {n++; s+=$2; p+=$4; if ($2 < mn || mn == 0) mn = $2; if ($2 > mx) mx = $2; if ($4 > pm) pm = $4}}
        END {if (n) printf "   SM clock mean %.0f MHz (min %d, max %d), power mean %.0f W (max %.0f) over %d samples\n", s/n, mn, mx, p/n, pm, n}' "$1"
}
# fwdprobe: why a muon-ddp step's forward and backward run 7-8% faster than dmuon's with the same
# kernels (traces/validate/h200-9.tar.xz): Qwen2.5-1.5B on one GPU under dmuon (interleave and overlap
# none: no fetch beside the forward), muon-ddp and adamw, 5 steps each, with the GPU's SM clock,
# power and temperature sampled every 100 ms beside each run ($L/fwdprobe_CASE.{txt,smi})
STAGE_TIMEOUT_fwdprobe=200
stage_fwdprobe() {
    local c st ov
    for c in dmuon:interleave dmuon:none muon-ddp:interleave adamw:interleave muon-ddp-tuned:interleave; do
        st=${c%%:*} ov=${c##*:}
        smi_start "$L/fwdprobe_${st}_$ov.smi" 100
        timeout 40 "$D/dmuon" run --backend gpu --model qwen2.5-1.5b --cluster h200 --strategy "$st" --overlap "$ov" \
            --tokens 4096 --steps 5 --timeout 30 > "$L/fwdprobe_${st}_$ov.txt" 2>&1
        echo "$st $ov exit $?: $(grep '^# mean over' "$L/fwdprobe_${st}_$ov.txt" | cut -c1-160)"
        smi_stop "$L/fwdprobe_${st}_$ov.smi"
    done
}
# stepprobe: where a step's forward/backward kernels lose time against bench work's rows
# (traces/validate/h200-9.tar.xz: the big GEMMs of Qwen2.5-1.5B run 14-18% faster in a step than their
# rows, Llama-3.2-3B's within 3%; dmuon's and adamw's layers 4-11% slower than muon-ddp's):
# every kernel timed in the step (DMUON_KERNEL_TIMES) of Qwen2.5-1.5B and Llama-3.2-3B under
# dmuon, muon-ddp and adamw, the SM clock and power sampled every 50 ms beside each run; then
# bench work of the same two models' kernels at 4096 tokens cold (--sustain 0) and after the
# default 3 s sustained load, each with its clock samples ($L/stepprobe_*.{csv,txt,smi})
STAGE_TIMEOUT_stepprobe=300
# PROBE_MODELS (default the two above), PROBE_TOKENS (default 4096; the runs only) and
# PROBE_BENCH=0 (no bench part) change what it runs.
stage_stepprobe() {
    local m st c
    for m in ${PROBE_MODELS:-qwen2.5-1.5b llama-3.2-3b}; do
        for st in muon-ddp dmuon adamw; do
            c=stepprobe_${m}_$st
            smi_start "$L/$c.smi"
            DMUON_KERNEL_TIMES="$L/$c.csv" timeout 40 "$D/dmuon" run --backend gpu --model "$m" --cluster h200 \
                --strategy "$st" --tokens "${PROBE_TOKENS:-4096}" --steps 4 --timeout 30 --trace "$L/$c.trace.csv" > "$L/$c.txt" 2>&1
            echo "$m $st exit $?: $(grep '^# mean over' "$L/$c.txt" | cut -c1-150)"
            smi_stop "$L/$c.smi"
        done
    done
    [ "${PROBE_BENCH:-1}" = 1 ] || return 0
    for c in 0 3; do
        smi_start "$L/stepprobe_bench_sustain$c.smi"
        timeout 100 "$D/dmuon" bench work --models qwen2.5-1.5b,llama-3.2-3b --tokens 4096 --no-grid --sustain $c \
            --out "$L/stepprobe_bench_sustain$c.csv" > "$L/stepprobe_bench_sustain$c.txt" 2>&1
        echo "bench work sustain $c exit $?: $(grep -c '^NVIDIA' "$L/stepprobe_bench_sustain$c.csv" 2>/dev/null) rows; $(grep '^# sustained' "$L/stepprobe_bench_sustain$c.txt")"
        smi_stop "$L/stepprobe_bench_sustain$c.smi"
    done
}
# allocprobe: what one cudaMalloc of N bytes takes (tools/alloc_probe.py: 64 calls per size,
# cudaMemGetInfo before and after), for the memory estimate's per-tensor state buffers
STAGE_TIMEOUT_allocprobe=40
stage_allocprobe() {
    timeout 35 python3 tools/alloc_probe.py --count 64 --json "$L/alloc_probe.json" > "$L/alloc_probe.txt" 2>&1
    echo "alloc_probe exit $?"
    cat "$L/alloc_probe.txt"
}

# nsreps: are the NS rows of short ops timed below the clock their own load holds? The shapes of
# traces/kernels/nsreps_*.txt (single and batched ops whose in-step time the table's rows miss, and
# large batches they price well; lines 'ROWS COLS BATCH HOT_WARMUP') timed with the committed
# cache's configurations (--retime-cached) three ways: as the table's rows were (--warmup 2 --reps 10, the shapes one
# after another), each alone after 3 s idle (cool), and each after HOT_WARMUP runs (about 1.5 s of
# its own load: the clock that load holds), nvidia-smi beside ($L/nsreps_MODE_ALGO.csv); then the
# executor's Llama-3.2-3B dmuon step at 1024 tokens, whose NS ops these shapes include
STAGE_TIMEOUT_nsreps=240
stage_nsreps() {
    local a i r c b w
    nr() { # MODE ALGO SHAPES FLAGS...
        local mode=$1 a=$2 f=$3
        shift 3
        cp traces/kernels/autotune_h200.tsv "$L/autotune_nsreps.tsv"
        timeout 60 "$D/dmuon" bench kernels --shapes "$f" --algos "$a" --kernels lt --no-products --no-elementwise \
            --no-gemm-tune --retime-cached --cache "$L/autotune_nsreps.tsv" "$@" --out "$L/nsreps_${mode}_$a.csv" > "$L/nsreps_${mode}_$a.txt" 2>&1
        echo "nsreps $mode $a exit $?: $(grep -v '^#' "$L/nsreps_${mode}_$a.csv" 2>/dev/null | grep -v '^gpu' | cut -d, -f3-8 | tr '\n' ' ')"
    }
    for a in direct gram; do
        grep -v '^#' traces/kernels/nsreps_$a.txt | awk '{print $1, $2, $3}' > "$L/nsreps_shapes_$a.txt"
        smi_start "$L/nsreps_rows_$a.smi" 20
        nr rows $a "$L/nsreps_shapes_$a.txt" --warmup 2 --reps 10
        smi_stop "$L/nsreps_rows_$a.smi"
        i=0
        while read -r r c b w; do
            case "$r" in '#'*|'') continue ;; esac
            i=$((i + 1))
            echo "$r $c $b" > "$L/nsreps_one.txt"
            sleep 3
            nr cool$i $a "$L/nsreps_one.txt" --warmup 2 --reps 10
            smi_start "$L/nsreps_hot${i}_$a.smi" 20
            nr hot$i $a "$L/nsreps_one.txt" --warmup "$w" --reps 20
            smi_stop "$L/nsreps_hot${i}_$a.smi"
        done < traces/kernels/nsreps_$a.txt
    done
    # the same NS ops in a step: Llama-3.2-3B dmuon at 1024 tokens (its 3072 x 3072 ops one by one)
    timeout 60 $MPIRUN -np 1 --bind-to none "$D/dmuon" run --backend gpu --model models/llama-3.2-3b.json --cluster h200 \
        --strategy dmuon --tokens 1024 --steps 3 --timeout 50 --trace "$L/nsreps_trace_llama.csv" > "$L/nsreps_run_llama.txt" 2>&1
    echo "dmuon run llama-3.2-3b exit $?: $(grep '^# mean over' "$L/nsreps_run_llama.txt" | cut -c1-120)"
}

# recover: tools/power_probe.py --recover, how fast the clock comes back after a hot phase (the
# idle gaps of --recover-ms, then 8192^3 GEMMs timed in 2 ms windows; and an MLP GEMM right after)
STAGE_TIMEOUT_recover=120
stage_recover() {
    timeout 110 python3 tools/power_probe.py --recover --cool 3 --json "$L/recover.json" > "$L/recover_probe.txt" 2>&1
    echo "power_probe --recover exit $?"
    cat "$L/recover_probe.txt"
}
# power: tools/power_probe.py, how the GPU's throughput follows its power limit (continuous 8192^3
# and MLP-sized GEMMs, 1 GiB copies, GEMM/copy duty cycles, GEMMs with idle gaps, each from a cool
# GPU, 20 ms windows, SM clock and power beside): the data for a power model of the simulator
STAGE_TIMEOUT_power=120
stage_power() {
    timeout 110 python3 tools/power_probe.py --json "$L/power.json" > "$L/power_probe.txt" 2>&1
    echo "power_probe exit $?"
    cat "$L/power_probe.txt"
}
# powerlong: the continuous GEMM phases of tools/power_probe.py for 20 s each after 5 s idle, 50 ms
# windows: whether the clock falls again after the first ~100 ms (a 16384-token step's phases
# run for seconds; 4 s phases showed a second fall at ~2 s)
STAGE_TIMEOUT_powerlong=100
stage_powerlong() {
    timeout 90 python3 tools/power_probe.py --phases gemm-big,gemm-mlp --seconds 20 --cool 5 --window-ms 50 \
        --json "$L/powerlong.json" > "$L/powerlong_probe.txt" 2>&1
    echo "power_probe (long) exit $?"
    cat "$L/powerlong_probe.txt"
}
# coolbench: does `bench work --cool` give rows independent of the run's length? The validation
# models' kernels at 4096 tokens as run (back to back) and with --cool, then only two models'
# kernels (a short run), each with its end-of-run reference GEMM ($L/coolbench_*.{csv,txt});
# compare with tools/kernel_context.py --table A --table B
STAGE_TIMEOUT_coolbench=240
stage_coolbench() {
    local c
    for c in asrun:--sustain=3 cool:--cool short:--cool; do
        local n=${c%%:*} f=${c##*:} m=validation
        [ "$n" = short ] && m=qwen2.5-1.5b,llama-3.2-3b
        timeout 110 "$D/dmuon" bench work --models $m --tokens 4096 --no-grid ${f/=/ } \
            --out "$L/coolbench_$n.csv" > "$L/coolbench_$n.txt" 2>&1
        echo "bench work $n exit $?: $(grep -E '^# (sustained|bf16 GEMM 8192|[0-9]+ kernels timed)' "$L/coolbench_$n.txt" | tr '\n' ' ')"
    done
}

# collab: every collective staged (DM_COLL_STAGE=1: packed into the collective buffers, as the
# executor ran them before the arenas followed the program's buckets, core/arena.h; the
# simulator prices the copies too) on the models whose buckets interleave with their norms and
# biases, beside the validate stage's in-place runs of the same cases (an A/B of the copies on
# one card); COLLAB_STRATEGIES (default dmuon) and COLLAB_MODELS choose the cases
COLLAB_MODELS="${COLLAB_MODELS:-qwen2.5-vl-3b,pi0,moonlight-16b-a3b-6l,qwen2.5-1.5b}"
STAGE_TIMEOUT_collab=150
stage_collab() {
    local K
    K=$(call_costs)
    DM_COLL_STAGE=1 timeout 140 "$D/dmuon" validate --cluster h200 --costs "$K" --models "$COLLAB_MODELS" \
        --strategies "${COLLAB_STRATEGIES:-dmuon}" --overlaps interleave --gpus 1 --tokens 4096 --steps 3 \
        --mpirun "$MPIRUN --bind-to none -x DM_COLL_STAGE" --out "$L/collab" > "$L/collab.txt" 2>&1
    echo "validate (every collective packed) exit $?"
    sed -n '/^# errors by model/,$p' "$L/collab.txt" | head -20
    grep -h -E '^# mean over' "$L"/collab/*/run.log 2>/dev/null | head -10
    for d in "$L"/collab/*/; do rm -f "$d/sim.csv"; done
}

# embedrows: the embedding backward's rows as the step runs it (an untied table zeroed first, row
# keyed by its rows; a tied one only added to, k 0: core/workload.c, kernels/wk_bench.c): the
# work and workcool stages from the committed caches (WORK_CACHE=1: only new kernels timed) at
# 1024-16384 tokens; $L/h200-work.csv, $L/h200-work-cool.csv, whose embed-bwd rows replace the
# committed ones
STAGE_TIMEOUT_embedrows=200
stage_embedrows() {
    WORK_CACHE=1 WORK_TOKENS="${WORK_TOKENS:-1024,2048,4096,8192,16384}" stage_work
    WORK_CACHE=1 WORK_TOKENS="${WORK_TOKENS:-1024,2048,4096,8192,16384}" stage_workcool
    grep -h ' embed-bwd ' "$L/work_table.txt" "$L/workcool_table.txt" | head -24
}

# moeprobe: where transformers' MoE layer spends its time against the executor's (issue 13: the
# MoE model's layer 0.67 / 0.47 of PyTorch's): the executor's Moonlight-6L run (per layer, its
# trace), then transformers with grouped_mm experts, each layer split into attention and MoE
# (--parts) and one step's costliest CUDA kernels (--profile)
STAGE_TIMEOUT_moeprobe=150
stage_moeprobe() {
    local m=moonlight-16b-a3b-6l
    w3_run "$m" 3 60
    torch_layers "$m" "models/$m.json" 60 _parts --experts grouped_mm --parts --profile 40
}

# moeq3: a mixture-of-experts model with standard (GQA) attention against PyTorch (issue 13):
# Qwen3-30B-A3B cut to 6 layers (models/extra/qwen3-30b-a3b-6l.json; transformers' DeepSeek-V3
# layer runs MLA's attention through the memory-efficient kernel, head dims 192/128, which
# moeprobe found to be 36% of its step), the executor's run, transformers' with grouped_mm experts
# and its parts and profile; then dmuon validate on it (no bench rows of its own: interpolated)
STAGE_TIMEOUT_moeq3=260
stage_moeq3() {
    local m=qwen3-30b-a3b-6l f=models/extra/qwen3-30b-a3b-6l.json
    echo "== $m"
    timeout 70 $MPIRUN -np 1 --bind-to none "$D/dmuon" run --backend gpu --model "$f" --cluster h200 \
        --strategy dmuon --tokens 4096 --steps 3 --timeout 60 --trace "$L/trace_$m.csv" --csv "$L/run_$m.csv" \
        > "$L/run_$m.txt" 2>&1
    echo "dmuon run $m exit $?"
    grep -E '^# (gpu:|mean over|GPU memory|per layer)|does not fit|rror' "$L/run_$m.txt" | head -8
    torch_layers "$m" "$f" 60 "" --experts grouped_mm --parts --profile 30
    timeout 110 "$D/dmuon" validate --cluster h200 --costs "$(call_costs)" --calibration traces/calib/h200.calib \
        --models "$f" --strategies dmuon,muon-ddp,adamw --overlaps interleave --gpus 1 --tokens 1024,4096 --steps 3 \
        --mpirun "$MPIRUN --bind-to none" --out "$L/validate_q3" > "$L/validate_q3.txt" 2>&1
    echo "validate exit $?"
    sed -n '/^# errors by model/,$p' "$L/validate_q3.txt" | grep -v 'kernels:' | head -12
    for d in "$L"/validate_q3/*/; do rm -f "$d/sim.csv"; done
}

# checkrows: the gradient check's rows (elem grad-check: the executor's non-finite check of
# each gradient after its backward op, timed as the step runs it): the work and workcool stages
# from the committed caches (only new kernels timed) at 1024-16384 tokens, the Qwen3 MoE cut's
# own kernels beside them (models/extra, not in the tables)
STAGE_TIMEOUT_checkrows=240
stage_checkrows() {
    WORK_CACHE=1 WORK_TOKENS="${WORK_TOKENS:-1024,2048,4096,8192,16384}" stage_work
    WORK_CACHE=1 WORK_TOKENS="${WORK_TOKENS:-1024,2048,4096,8192,16384}" stage_workcool
    grep -h ' grad-check ' "$L/work_table.txt" | sort -k7 -n | sed -n '1,4p;$p'
    for c in "" "--cool --sustain 0"; do
        n=$([ -z "$c" ] && echo asrun || echo cool)
        timeout 60 "$D/dmuon" bench work --models models/extra/qwen3-30b-a3b-6l.json --tokens 1024,4096 --no-grid $c \
            --max-seconds 50 --out "$L/q3-work-$n.csv" > "$L/q3-work-$n.txt" 2>&1
        echo "bench work qwen3-30b-a3b-6l $n exit $?"
    done
}

# adamwrows: the adamw rows as the executor runs an AdamW op's tensor (the gradient converted to
# fp32 and checked, then the update with its bf16 working copy), timed in groups
# (kernels/ns_bench.c bench_elementwise), at the committed rows' sizes; only the adamw rows of
# $L/adamw.csv replace the committed ones
STAGE_TIMEOUT_adamwrows=150
stage_adamwrows() {
    timeout 140 "$D/dmuon" bench kernels --shapes traces/kernels/adamw_shapes.txt --algos direct --batches 1 \
        --sym-blocks 1 --kernels lt --no-gemm-tune --no-products --reps 10 --warmup 2 --out "$L/adamw.csv" \
        > "$L/adamw.txt" 2>&1
    echo "bench kernels (adamw rows) exit $?: $(grep -c ',adamw,' "$L/adamw.csv" 2>/dev/null) adamw rows"
    grep ' adamw ' "$L/adamw.txt" | sed -n '1,4p;$p'
    tail -2 "$L/adamw.txt"
}

# dmuon on one GPU with its optimizer on one stream after the backward and on the second,
# lowest-priority compute stream beside it (--ns-under-backward stream): traces and step CSVs
# per model and mode ($L/lo_{one,stream}_MODEL.*), for `dmuon sim` on the same plans and the
# fit of the cluster's lo_main_rate and lo_rate (issue 16 item 2)
LO_MODELS="llama-3.2-3b qwen2.5-1.5b moonlight-16b-a3b-6l qwen2.5-0.5b wall-oss-flow"
STAGE_TIMEOUT_lostream=330
stage_lostream() {
    for m in $LO_MODELS; do
        for mode in one stream; do
            local extra=""
            [ $mode = stream ] && extra="--ns-under-backward stream"
            timeout 60 $MPIRUN -np 1 --bind-to none "$D/dmuon" run --backend gpu --model "models/$m.json" --cluster h200 \
                --strategy dmuon --tokens 4096 --steps 4 --timeout 60 $extra --trace "$L/lo_${mode}_$m.csv" \
                --csv "$L/lo_${mode}_run_$m.csv" > "$L/lo_${mode}_$m.txt" 2>&1
            echo "== $m $mode exit $?: $(grep -E '^# mean over' "$L/lo_${mode}_$m.txt" | head -1)"
            grep -E 'does not fit|rror|skipped' "$L/lo_${mode}_$m.txt" | head -3
        done
    done
}
# hostprobe: does the host's issuing keep up with the GPU? The last step's ops of dense models at
# 1024 tokens (and one at 4096) under muon-ddp, dmuon and adamw, with the host's issue times beside
# the GPU's (DMUON_HOST_TIMES: op,kind,stream,layer,host_start_us,host_end_us,gpu_start_us,
# gpu_dur_us) and the trace; the gaps summarized by tools/host_times.py ($L/hostprobe_*.csv, .txt).
# PROBE_MODELS and PROBE_TOKENS change what it runs.
STAGE_TIMEOUT_hostprobe=240
stage_hostprobe() {
    local m st t c
    for t in ${PROBE_TOKENS:-1024 4096}; do
        for m in ${PROBE_MODELS:-qwen2.5-0.5b qwen2.5-1.5b llama-3.2-3b}; do
            for st in muon-ddp dmuon adamw; do
                c=hostprobe_${m}_${st}_$t
                DMUON_HOST_TIMES="$L/$c.csv" timeout 40 "$D/dmuon" run --backend gpu --model "$m" --cluster h200 \
                    --strategy "$st" --tokens "$t" --steps 4 --timeout 30 --trace "$L/$c.trace.csv" > "$L/$c.txt" 2>&1
                echo "$m $st $t exit $?: $(grep '^# mean over' "$L/$c.txt" | cut -c1-150)"
                [ -f "$L/$c.csv" ] && python3 tools/host_times.py "$L/$c.csv" | tail -4
            done
        done
    done
}
# blockquick: the block NS kernel's tests and memcheck only (the first part of nsblock)
STAGE_TIMEOUT_blockquick=100
stage_blockquick() { block_checks block block 40 50 5; }
# soloprobe: dmuon, adamw and muon-ddp of two dense models at 1024 tokens (and Qwen2.5-1.5B at
# 4096), host and GPU times per op (DMUON_HOST_TIMES) and the SM clock sampled every 10 ms beside
# each run ($L/solo_*). Written for an executor that skipped NCCL for a group of one unless
# DMUON_SOLO_NCCL=1 (traces/device/soloprobe-2026-12-04: no effect, not kept); one run each now.
STAGE_TIMEOUT_soloprobe=160
stage_soloprobe() {
    local m st t c
    for c in qwen2.5-0.5b:1024 qwen2.5-1.5b:1024 qwen2.5-1.5b:4096 llama-3.2-3b:1024; do
        m=${c%%:*} t=${c##*:}
        for st in muon-ddp dmuon adamw; do
            local f=solo_${m}_${st}_${t}
            smi_start "$L/$f.smi" 10
            DMUON_HOST_TIMES="$L/$f.csv" timeout 40 "$D/dmuon" run --backend gpu --model "$m" \
                --cluster h200 --strategy "$st" --tokens "$t" --steps 4 --timeout 30 > "$L/$f.txt" 2>&1
            local rc=$?
        date +'# run end %s.%N' >> "$L/$f.wall"
        echo "$m $st $t exit $rc: $(grep '^# mean over' "$L/$f.txt" | cut -c1-150)"
            smi_stop "$L/$f.smi"
        done
    done
}
# kdiff: why a dense step's backward runs 12-17% slower under dmuon and adamw than under
# muon-ddp at 1024 tokens on one GPU (traces/device/soloprobe-2026-12-04: the same clocks, the
# collectives a few us): every forward/backward kernel timed (DMUON_KERNEL_TIMES, with the
# operands' addresses mod 4 KiB) under each strategy, twice per strategy in alternation so that
# drift shows, and dmuon with every collective packed (DM_COLL_STAGE=1) ($L/kdiff_*)
STAGE_TIMEOUT_kdiff=200
stage_kdiff() {
    local m st r c t
    for c in qwen2.5-0.5b:1024 qwen2.5-1.5b:1024; do
        m=${c%%:*} t=${c##*:}
        for r in 1 2; do
            for st in muon-ddp dmuon adamw muon-fsdp; do
                local f=kdiff_${m}_${st}_${t}_r$r
                DMUON_KERNEL_TIMES="$L/$f.csv" DMUON_HOST_TIMES="$L/$f.ops.csv" timeout 40 "$D/dmuon" run --backend gpu \
                    --model "$m" --cluster h200 --strategy "$st" --tokens "$t" --steps 4 --timeout 30 > "$L/$f.txt" 2>&1
                echo "$m $st $t run $r exit $?: $(grep '^# mean over' "$L/$f.txt" | cut -c1-130)"
            done
        done
        f=kdiff_${m}_dmuon_${t}_staged
        DM_COLL_STAGE=1 DMUON_KERNEL_TIMES="$L/$f.csv" timeout 40 "$D/dmuon" run --backend gpu --model "$m" \
            --cluster h200 --strategy dmuon --tokens "$t" --steps 4 --timeout 30 > "$L/$f.txt" 2>&1
        echo "$m dmuon $t staged exit $?: $(grep '^# mean over' "$L/$f.txt" | cut -c1-130)"
    done
}
# queueprobe (the DMUON_PROBE knobs of that probe's commit, gone since) and windowprobe (a bound on
# how far the host issues ahead, DMUON_ISSUE_WINDOW, tried and dropped: it did not remove the
# overhead) found where the ~1.4 us per kernel of traces/device/kdiff-2026-12-04 came from: the
# compute stream waiting on the collective streams' events; with one rank the executor now runs
# the collectives on the compute stream (dm_run_stream, core/program.h). Their logs are in
# traces/device/queueprobe-2026-12-04 and traces/device/windowprobe-2026-12-04.
# moeprobe: Moonlight-16B-A3B-6L's forward runs ~13% slower under dmuon than under adamw and
# muon-ddp on one GPU at 1024-2048 tokens (traces/validate/h200-23, h200-24), every layer alike:
# every forward/backward kernel timed under each strategy (DMUON_KERNEL_TIMES), the op times
# (DMUON_HOST_TIMES) and the SM clock every 10 ms ($L/moe_*)
STAGE_TIMEOUT_moeprobe=150
stage_moeprobe() {
    local st t=2048
    for st in dmuon adamw muon-ddp dmuon; do
        local f=moe_${st}_$t
        [ -e "$L/$f.txt" ] && f=${f}_again
        smi_start "$L/$f.smi" 10
        DMUON_KERNEL_TIMES="$L/$f.k.csv" DMUON_HOST_TIMES="$L/$f.ops.csv" timeout 60 "$D/dmuon" run --backend gpu \
            --model moonlight-16b-a3b-6l --cluster h200 --strategy "$st" --tokens "$t" --steps 4 --timeout 30 > "$L/$f.txt" 2>&1
        echo "moonlight $st $t exit $?: $(grep '^# mean over' "$L/$f.txt" | cut -c1-130)"
        smi_stop "$L/$f.smi"
    done
}

# longprobe: why every phase at 16384 tokens is predicted 1-8.5% short (traces/validate/h200-24,
# h200-25/tokens-16384) while 20 s of continuous GEMMs settle within 1 s (powerlong): pi0 under
# adamw at 4096 and 16384 tokens, 3 steps each, every kernel timed (DMUON_KERNEL_TIMES), the ops'
# trace, the SM clock, power and temperature every 10 ms ($L/long_*); LONG_MODEL, LONG_STRATEGY
# and LONG_TOKENS change the case
STAGE_TIMEOUT_longprobe=150
stage_longprobe() {
    local m=${LONG_MODEL:-pi0} st=${LONG_STRATEGY:-adamw} t
    for t in ${LONG_TOKENS:-4096 16384}; do
        local f=long_${m}_${st}_$t
        smi_start "$L/$f.smi" 10
        date +'# run start %s.%N' > "$L/$f.wall"
        DMUON_KERNEL_TIMES="$L/$f.k.csv" timeout 65 "$D/dmuon" run --backend gpu --model "$m" --cluster h200 \
            --strategy "$st" --tokens "$t" --steps 3 --timeout 60 --trace "$L/$f.trace.csv" > "$L/$f.txt" 2>&1
        local rc=$?
        date +'# run end %s.%N' >> "$L/$f.wall"
        echo "$m $st $t exit $rc: $(grep '^# mean over' "$L/$f.txt" | cut -c1-150)"
        grep -E '^# per layer' "$L/$f.txt" | head -4
        smi_stop "$L/$f.smi"
    done
}
# symflat (issue 17): the symmetric products' lower tiles in one pointer-array cuBLASLt GEMM
# against the recursive levels (run on 0eeeae9 plus an uncommitted environment switch, since replaced by
# ns_config.sym_flat: traces/kernels/symflat-2026-12-04).
# nsflat (issue 17): the flat scheme as the autotuner's choice: test_ns_gpu (both schemes checked
# against the float64 reference), the goal table re-tuned from scratch (both schemes, block counts
# 1..16, our kernels, the per-GEMM picks) with PyTorch in the same call, then the 18 large shapes
# re-tuned (cuBLASLt only); the cache and cost rows they leave in $L.
STAGE_TIMEOUT_nsflat=580
stage_nsflat() {
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    timeout 100 "$D/test_ns_gpu" > "$L/nstest.txt" 2>&1
    echo "test_ns_gpu exit $?: $(grep -c '^ok' "$L/nstest.txt") ok, $(grep -c '^not ok' "$L/nstest.txt") not ok"
    grep '^not ok' "$L/nstest.txt" | head -5
    timeout 220 "$D/dmuon" bench kernels --shapes traces/kernels/goal_shapes.txt --cache "$L/autotune.tsv" --retune \
        --sym-blocks 1,2,4,8,16 --reps 10 --warmup 2 --no-elementwise --verbose --out "$L/costs_goal.csv" > "$L/nsgoal.txt" 2>&1
    echo "bench goal exit $?"
    grep -v '^#' "$L/nsgoal.txt" | grep ' ns '
    timeout 50 python3 tools/torch_ns_bench.py --ours "$L/costs_goal.csv" --out "$L/torch_ns.txt" > /dev/null
    echo "torch_ns_bench exit $?"
    cat "$L/torch_ns.txt"
    timeout 200 "$D/dmuon" bench kernels --shapes traces/kernels/big18_shapes.txt --cache "$L/autotune.tsv" --retune \
        --kernels lt --sym-blocks 1,2,4,8,16 --reps 5 --warmup 1 --no-products --no-elementwise --no-gemm-tune \
        --out "$L/costs_big18.csv" > "$L/nsbig.txt" 2>&1
    echo "bench big18 exit $?"
    grep -v '^#' "$L/nsbig.txt" | grep ' ns ' | head -40
}
# flatllama (issue 17): the flat scheme where it counts in a step. The MoE expert batches re-tuned
# in both schemes (traces/kernels/expert_shapes.txt), Llama-3.2-3B's NS shapes at its plans' batches
# re-tuned likewise (validation_shapes/), then Llama-3.2-3B dmuon on the GPU at 4096 tokens with the
# committed cache and with the re-tuned one, alternated twice (the optimizer phase: issue 17's goal).
STAGE_TIMEOUT_flatllama=560
stage_flatllama() {
    cp traces/kernels/autotune_h200.tsv "$L/autotune_old.tsv"
    cp traces/kernels/autotune_h200.tsv "$L/autotune_new.tsv"
    timeout 150 "$D/dmuon" bench kernels --shapes traces/kernels/expert_shapes.txt --cache "$L/autotune_new.tsv" --retune \
        --sym-blocks 1,2,4,8,16 --no-elementwise --reps 5 --warmup 1 --out "$L/costs_experts.csv" > "$L/experts.txt" 2>&1
    echo "bench experts exit $?"
    grep -v '^#' "$L/experts.txt" | grep ' ns \| syrk \| gemm '
    local a c i
    for a in direct gram; do
        timeout 120 "$D/dmuon" bench kernels --shapes traces/kernels/validation_shapes/llama-3.2-3b.$a.txt --algos $a \
            --kernels lt --retune --sym-blocks 1,2,4,8,16 --no-products --no-elementwise --warmup 2 --reps 10 \
            --cache "$L/autotune_new.tsv" --out "$L/ns_llama.$a.csv" > "$L/ns_llama.$a.txt" 2>&1
        echo "bench llama $a exit $?"
        grep -v '^#' "$L/ns_llama.$a.txt" | grep ' ns '
    done
    for i in 1 2; do
        for c in old new; do
            timeout 80 "$D/dmuon" run --backend gpu --model llama-3.2-3b --cluster h200 --strategy dmuon --tokens 4096 \
                --steps 3 --timeout 70 --autotune "$L/autotune_$c.tsv" > "$L/run_$c$i.txt" 2>&1
            echo "run $c $i exit $?: $(grep '^# mean over' "$L/run_$c$i.txt" | cut -c1-200)"
        done
    done
}
# llamaval (issue 17): Llama-3.2-3B with its NS shapes re-tuned in the committed cache (flatllama):
# the two PyTorch-form rows whose cached configuration changed (3072x3072 direct eager, batch 1;
# 8192x3072 gram as stored, batch 1: its wide entry's), then its validation at 1024 and 4096 tokens
# under dmuon, muon-ddp and adamw (replayed on the build machine with those rows merged).
STAGE_TIMEOUT_llamaval=420
stage_llamaval() {
    printf '3072 3072 1\n' > "$L/eager_llama.txt"
    printf '8192 3072 1\n' > "$L/tall_llama.txt"
    cp traces/kernels/autotune_h200.tsv "$L/at_llama.tsv"
    timeout 60 "$D/dmuon" bench kernels --shapes "$L/eager_llama.txt" --algos direct --kernels lt --retime-cached --no-products \
        --no-elementwise --no-gemm-tune --warmup 3 --reps 15 --cache "$L/at_llama.tsv" --no-graph \
        --out "$L/ns_eager_llama.csv" > "$L/ns_eager_llama.txt" 2>&1
    echo "bench eager exit $?"; grep -v '^#' "$L/ns_eager_llama.txt" | grep ' ns '
    timeout 60 "$D/dmuon" bench kernels --shapes "$L/tall_llama.txt" --algos gram --kernels lt --retime-cached --no-products \
        --no-elementwise --no-gemm-tune --warmup 3 --reps 15 --cache "$L/at_llama.tsv" --as-stored \
        --out "$L/ns_tall_gram_llama.csv" > "$L/ns_tall_gram_llama.txt" 2>&1
    echo "bench tall gram exit $?"; grep -v '^#' "$L/ns_tall_gram_llama.txt" | grep ' ns '
    VALIDATE_MODELS=llama-3.2-3b VALIDATE_TOKENS=1024,4096 stage_validate
    (cd "$L" && tar -cJf validate-cases.tar.xz validate && rm -rf validate)
}
# retime_rows NAME SHAPES ALGO KERNELS TIMEOUT FLAGS...: NS rows of SHAPES timed with $L/autotune.tsv's
# configurations (--retime-cached on a copy, so that the cache is not written) into $L/ns_NAME.csv;
# T0 (SECONDS at the stage's start) for the elapsed time in the log line
retime_rows() {
    local name=$1 shapes=$2 algo=$3 kernels=$4 tmo=$5
    shift 5
    cp "$L/autotune.tsv" "$L/at_$name.tsv"
    timeout "$tmo" "$D/dmuon" bench kernels --shapes "$shapes" --algos "$algo" --kernels "$kernels" --retime-cached \
        --no-products --no-elementwise --no-gemm-tune --warmup 3 --reps 15 --cache "$L/at_$name.tsv" "$@" \
        --out "$L/ns_$name.csv" > "$L/ns_$name.txt" 2>&1
    echo "re-time $name exit $? ($(grep -vc '^#' "$L/ns_$name.csv" 2>/dev/null || echo 0) lines, $((SECONDS - T0)) s)"
    rm -f "$L/at_$name.tsv"
}
# validate_set NAME: one of the validations the accuracy record rests on, into $L/NAME (case dirs
# packed): core, the seven validation models at 1024 and 4096 tokens; heldout, the held-out models
# of h200-25 at 1024 and 4096; llama16k, Llama-3.2-3B dmuon at 16384 (the calibration's third
# token count)
validate_set() {
    local n=$1
    case $n in
    core) VALIDATE_TOKENS=1024,4096 stage_validate ;;
    heldout) VALIDATE_MODELS=pi0.5,qwen2.5-3b,wan2.2-ti2v-5b,models/extra/qwen3-30b-a3b-6l.json \
        VALIDATE_TOKENS=1024,4096 stage_validate ;;
    llama16k) VALIDATE_MODELS=llama-3.2-3b VALIDATE_STRATEGIES=dmuon VALIDATE_TOKENS=16384 stage_validate ;;
    multi) VALIDATE_MODELS=llama-3.2-3b,qwen2.5-1.5b,wall-oss-flow VALIDATE_STRATEGIES=dmuon,muon-ddp,muon-fsdp,adamw \
        VALIDATE_GPUS=1,$NGPU VALIDATE_TIMEOUT=400 stage_validate ;;
    unseen) local e=models/extra
        VALIDATE_MODELS=$e/phi-3-mini-4k-instruct.json,$e/gemma-2b.json,$e/gemma2-2b.json,$e/qwen3-8b-12l.json,$e/mistral-7b-v0.1-12l.json,$e/mixtral-8x7b-v0.1-2l.json \
            VALIDATE_TOKENS=2048,8192 stage_validate ;;
    unseen2) local e=models/extra
        VALIDATE_MODELS=$e/gpt-oss-20b-2l.json,$e/gemma-3-1b-pt.json,$e/olmo-2-1124-7b-8l.json,$e/smollm3-3b.json,$e/granite-3.1-8b-base-8l.json,$e/gemma-3-4b-pt.json,$e/starcoder2-3b.json,$e/pythia-1b.json \
            VALIDATE_TOKENS=2048,4096 VALIDATE_TIMEOUT=400 stage_validate ;;
    window) local e=models/extra
        VALIDATE_MODELS=$e/gemma-3-1b-pt.json,$e/phi-3-mini-4k-instruct.json,$e/mistral-7b-v0.1-12l.json,$e/gpt-oss-20b-2l.json \
            VALIDATE_STRATEGIES=adamw,dmuon VALIDATE_TOKENS=4096,8192 VALIDATE_ATTENTION=causal VALIDATE_TIMEOUT=300 \
            stage_validate ;;
    unseen2c) local e=models/extra
        VALIDATE_MODELS=$e/gpt-oss-20b-2l.json,$e/gemma-3-1b-pt.json,$e/olmo-2-1124-7b-8l.json,$e/smollm3-3b.json,$e/granite-3.1-8b-base-8l.json,$e/gemma-3-4b-pt.json,$e/starcoder2-3b.json,$e/pythia-1b.json \
            VALIDATE_TOKENS=2048,4096 VALIDATE_ATTENTION=causal VALIDATE_TIMEOUT=400 stage_validate ;;
    unseen3 | unseen3h100 | unseen3tok | unseen3tokh100) local e=models/extra # (*h100: on an H100, the h100 preset's projection of the H200 tables)
        VALIDATE_MODELS=$e/olmoe-1b-7b-0924-4l.json,$e/qwen1.5-moe-a2.7b-3l.json,$e/deepseek-v2-lite-4l.json,$e/qwen2-vl-2b.json \
            VALIDATE_TOKENS=$(case $n in unseen3tok*) echo 1024,8192 ;; *) echo 2048,4096 ;; esac) VALIDATE_TIMEOUT=300 \
            VALIDATE_CLUSTER=$(case $n in *h100) echo h100 ;; *) echo h200 ;; esac) stage_validate ;;
    corec) VALIDATE_STRATEGIES=${CORE_STRATEGIES:-dmuon,adamw} VALIDATE_TOKENS=4096 VALIDATE_ATTENTION=causal \
        VALIDATE_TIMEOUT=180 stage_validate ;;
    fsdp1) VALIDATE_MODELS=llama-3.2-3b,qwen2.5-1.5b VALIDATE_STRATEGIES=muon-fsdp VALIDATE_TIMEOUT=75 stage_validate ;;
    causal) VALIDATE_MODELS=llama-3.2-3b,qwen2.5-1.5b VALIDATE_STRATEGIES=dmuon,adamw VALIDATE_TOKENS=1024,4096 \
        VALIDATE_ATTENTION=causal VALIDATE_TIMEOUT=200 stage_validate ;;
    passes | passes2 | passesh100 | passesh100b) local e=models/extra # the layer passes (2026-12-06): passes at
        # 4096 tokens, passes2 at 1024 and 8192, passesh100 at 2048 on an H100 (the h100 preset: the H200
        # tables projected), passesh100b at 1024 and 4096 on an H100
        VALIDATE_MODELS=llama-3.2-3b,qwen2.5-1.5b,qwen2.5-vl-3b,$e/pythia-1b.json,$e/phi-3-mini-4k-instruct.json,$e/gpt-oss-20b-2l.json \
            VALIDATE_TOKENS=$(case $n in passes) echo 4096 ;; passes2) echo 1024,8192 ;; passesh100b) echo 1024,4096 ;; *) echo 2048 ;; esac) \
            VALIDATE_CLUSTER=$(case $n in *h100 | *h100b) echo h100 ;; *) echo h200 ;; esac) \
            VALIDATE_TIMEOUT=$(case $n in passes2 | passesh100b) echo 320 ;; *) echo 310 ;; esac) stage_validate ;;
    esac > "$L/validate_$n.log" 2>&1
    echo "$n: $(grep -h '^validate:' "$L/validate.txt" | tail -1) ($((SECONDS - T0)) s)"
    mkdir -p "$L/$n" && mv "$L/validate.txt" "$L/$n/" && mv "$L/validate" "$L/$n/validate"
    (cd "$L/$n" && tar -cJf validate-cases.tar.xz validate && find validate -mindepth 1 -maxdepth 1 ! -name validate.csv -exec rm -rf {} +)
}
# retuneall (issue 17): the executor cache re-tuned with the flat scheme for every NS shape of the
# seven validation models whose short side is >= 512 (block counts > 1 possible: the others keep
# their entries and rows), kernels lt and block, both schemes, block counts 1..16 (--retune); then
# the PyTorch forms' eager rows and the tall rows of those shapes with the new cache. $L/autotune.tsv
# is the new cache; ns_*.csv the rows to merge into traces/costs/h200.csv.
STAGE_TIMEOUT_retuneall=560
stage_retuneall() {
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    local f b a
    T0=$SECONDS
    big() { awk '/^#/ || NF < 2 {next} {m = $1 < $2 ? $1 : $2; if (m >= 512) print}' "$1"; }
    for f in traces/kernels/validation_shapes/*.txt; do
        b=$(basename "$f" .txt) a=${b##*.}
        big "$f" > "$L/shapes_$b.txt"
        [ -s "$L/shapes_$b.txt" ] || continue
        timeout 120 "$D/dmuon" bench kernels --shapes "$L/shapes_$b.txt" --algos "$a" --kernels lt,block --retune \
            --sym-blocks 1,2,4,8,16 --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 10 \
            --cache "$L/autotune.tsv" --out "$L/ns_$b.csv" > "$L/ns_$b.txt" 2>&1
        echo "retune $b exit $? ($(grep -vc '^#' "$L/ns_$b.csv" 2>/dev/null || echo 0) lines, $((SECONDS - T0)) s)"
    done
    rt() { # NAME SHAPES ALGO FLAGS...: the shapes with a short side >= 512, re-timed (retime_rows)
        local name=$1 shapes=$2 algo=$3
        shift 3
        big "$shapes" > "$L/shapes_$name.txt"
        [ -s "$L/shapes_$name.txt" ] || return 0
        retime_rows "$name" "$L/shapes_$name.txt" "$algo" lt 100 "$@"
    }
    rt eager traces/kernels/eager_shapes.txt direct --no-graph
    rt tall_eager traces/kernels/tall_shapes_eager.txt direct --as-stored --no-graph
    for a in direct gram; do rt tall_$a traces/kernels/tall_shapes_$a.txt $a --as-stored; done
}
# valall: after a re-tune of the executor cache (retuneall), gputest and every validation the
# accuracy record rests on, with the committed cache and rows: the seven validation models at 1024
# and 4096 tokens ($L/core), Llama-3.2-3B dmuon at 16384 (the calibration's third token count,
# $L/llama16k), the held-out models of h200-25 at 1024 and 4096 ($L/heldout); case dirs packed.
STAGE_TIMEOUT_valall=560
stage_valall() {
    local n
    T0=$SECONDS
    stage_gputest > "$L/gputest.txt" 2>&1
    tail -3 "$L/gputest.txt"
    for n in core llama16k heldout; do validate_set $n; done
}
# retune2 (issue 17): the executor cache re-tuned for every NS shape and batch the 1-GPU dmuon and
# muon-ddp plans of the 11 validated models run (traces/kernels/retune2-2026-12-04/*.txt, made by
# tools/plan_ns_shapes.py from `dmuon plan -o` on the committed rows) and every batch the table
# holds for those shapes (one regime per shape: retune-2026-12-04/README.md), short side >= 512:
# block counts 1..8 in the flat scheme (--sym-schemes flat), kernels lt and block; the tall and
# eager rows of those shapes re-timed with the new cache; then the new cache put in the tree and the
# validations run on it: the seven models at 1024 and 4096 ($L/core), the held-out four ($L/heldout),
# Llama-3.2-3B dmuon at 16384 ($L/llama16k) while time is left.
STAGE_TIMEOUT_retune2=540
stage_retune2() {
    local S=traces/kernels/retune2-2026-12-04 a n
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    for a in direct gram; do
        timeout 170 "$D/dmuon" bench kernels --shapes $S/wide.$a.txt --algos $a --kernels lt,block --retune \
            --sym-blocks 1,2,4,8 --sym-schemes flat --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 10 \
            --cache "$L/autotune.tsv" --out "$L/ns_wide.$a.csv" > "$L/ns_wide.$a.txt" 2>&1
        echo "retune wide $a exit $? ($(grep -vc '^#' "$L/ns_wide.$a.csv" 2>/dev/null || echo 0) lines, $((SECONDS - T0)) s)"
    done
    retime_rows tall.direct $S/tall.direct.txt direct lt,block 60 --as-stored
    retime_rows tall.gram $S/tall.gram.txt gram lt,block 60 --as-stored
    retime_rows eager $S/eager.txt direct lt,block 60 --no-graph
    retime_rows eager.tall $S/eager.tall.txt direct lt,block 60 --as-stored --no-graph
    cp "$L/autotune.tsv" traces/kernels/autotune_h200.tsv
    for n in core heldout llama16k; do
        local late=460
        case $n in core) late=300 ;; heldout) late=400 ;; esac
        if [ $((SECONDS - T0)) -gt $late ]; then
            echo "$n: skipped at $((SECONDS - T0)) s"; continue
        fi
        validate_set $n
    done
}
# mendcheck: after a refactor of the symmetric products' operand layout (kernels/ns_cuda.cu
# sym_operands, both schemes) and of these stages' helpers: test_ns_gpu (every scheme against the
# float64 reference) and retime_rows on two small shapes with the committed cache.
STAGE_TIMEOUT_mendcheck=150
stage_mendcheck() {
    T0=$SECONDS
    timeout 100 "$D/test_ns_gpu" > "$L/nstest.txt" 2>&1
    echo "test_ns_gpu exit $?: $(grep -c '^ok' "$L/nstest.txt") ok, $(grep -c '^not ok' "$L/nstest.txt") not ok"
    grep '^not ok' "$L/nstest.txt" | head -5
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    printf '3072 3072 1,24\n1024 3072 28\n' > "$L/mend_shapes.txt"
    retime_rows mend.direct "$L/mend_shapes.txt" direct lt,block 40
    retime_rows mend.gram "$L/mend_shapes.txt" gram lt,block 40
    grep -hv '^#' "$L/ns_mend.direct.csv" "$L/ns_mend.gram.csv"
}
# retune_set DIR: the NS shapes of DIR re-tuned with the flat scheme into a copy of the committed
# cache ($L/autotune.tsv): wide.direct.txt and wide.gram.txt (--retune), tall.direct.txt,
# tall.gram.txt (as stored) and eager.txt (the PyTorch form) re-timed with the new cache; the rows
# merged into the table on the device copy ($L/h200-merged.csv), the cache made the committed one
# there, and the core and held-out validations run on them.
retune_set() {
    local S=$1 a n f late
    for a in direct gram; do
        [ -s $S/wide.$a.txt ] || continue
        timeout 150 "$D/dmuon" bench kernels --shapes $S/wide.$a.txt --algos $a --kernels lt,block --retune \
            --sym-blocks 1,2,4,8 --sym-schemes flat --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 10 \
            --cache "$L/autotune.tsv" --out "$L/ns_wide.$a.csv" > "$L/ns_wide.$a.txt" 2>&1
        echo "retune wide $a exit $? ($(grep -vc '^#' "$L/ns_wide.$a.csv" 2>/dev/null || echo 0) lines, $((SECONDS - T0)) s)"
    done
    [ -s $S/tall.direct.txt ] && retime_rows tall.direct $S/tall.direct.txt direct lt,block 50 --as-stored
    [ -s $S/tall.gram.txt ] && retime_rows tall.gram $S/tall.gram.txt gram lt,block 50 --as-stored
    [ -s $S/eager.txt ] && retime_rows eager $S/eager.txt direct lt,block 30 --no-graph
    cp "$L/autotune.tsv" traces/kernels/autotune_h200.tsv
    for f in "$L"/ns_wide.direct.csv "$L"/ns_wide.gram.csv "$L"/ns_tall.direct.csv "$L"/ns_tall.gram.csv "$L"/ns_eager.csv; do
        [ -s "$f" ] && python3 tools/costs_merge.py traces/costs/h200.csv "$f" --note "$(basename "$S") (device copy)" \
            --out traces/costs/h200.csv
    done
    cp traces/costs/h200.csv "$L/h200-merged.csv"
    for n in core heldout; do
        late=290
        [ $n = heldout ] && late=470
        if [ $((SECONDS - T0)) -gt $late ]; then echo "$n: skipped at $((SECONDS - T0)) s"; continue; fi
        validate_set $n
    done
}
# retune3 (issue 17): the rest of the executor's NS cache re-tuned with the flat scheme: every NS
# row of traces/costs/h200.csv with a short side >= 512 that retune2 did not measure, and the
# batches the validated models' plans run now without a row of their own (lists in
# traces/kernels/retune3-2026-12-04, made as its README says), then validated (retune_set). First,
# on a copy of the cache that is not kept, the expert shapes at large batches in both schemes
# (experts.txt).
STAGE_TIMEOUT_retune3=590
stage_retune3() {
    local S=traces/kernels/retune3-2026-12-04
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    cp "$L/autotune.tsv" "$L/at_experts.tsv"
    timeout 60 "$D/dmuon" bench kernels --shapes $S/experts.txt --algos direct,gram --kernels lt --retune \
        --sym-blocks 1,2,4,8 --sym-schemes levels,flat --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 10 \
        --cache "$L/at_experts.tsv" --out "$L/ns_experts.csv" > "$L/ns_experts.txt" 2>&1
    echo "experts exit $? ($((SECONDS - T0)) s)"
    rm -f "$L/at_experts.tsv"
    retune_set $S
}
# retune4: the batches the plans of retune3's validations ran (h200-30) without a row of their own
# (traces/kernels/retune4-2026-12-04), the same way: a re-tune changes the rows, the rows the
# plans' batches (tools/plan_ns_shapes.py).
STAGE_TIMEOUT_retune4=590
stage_retune4() {
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    retune_set traces/kernels/retune4-2026-12-04
}
# nsclock: does an NS op run faster from a cool start than back to back (the bench's rows)? For
# three cached configurations (retune4's cache): five single timed runs, each after 3 s idle and
# one warm-up, then 2 warm-ups and 20 back-to-back runs (median); the GPU's clock and power
# sampled beside (nvidia-smi) while the back-to-back run goes.
STAGE_TIMEOUT_nsclock=200
stage_nsclock() {
    local S=traces/kernels/retune4-2026-12-04 i a
    T0=$SECONDS
    printf '2048 11008 18\n' > "$L/clk_gram.txt"
    printf '3072 3072 1\n1536 8960 18\n' > "$L/clk_direct.txt"
    for a in gram direct; do
        for i in 1 2 3 4 5; do
            sleep 3
            cp $S/autotune.tsv "$L/at_clk.tsv"
            timeout 30 "$D/dmuon" bench kernels --shapes "$L/clk_$a.txt" --algos $a --kernels lt --retime-cached \
                --no-products --no-elementwise --no-gemm-tune --warmup 1 --reps 1 --cache "$L/at_clk.tsv" \
                --out "$L/clk_$a.cool$i.csv" > "$L/clk_$a.cool$i.txt" 2>&1
            grep -hv '^#' "$L/clk_$a.cool$i.csv" | grep -v '^gpu,' | sed "s/^/cool$i /"
        done
        cp $S/autotune.tsv "$L/at_clk.tsv"
        nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > "$L/clk_$a.smi.csv" 2>/dev/null &
        local smi=$!
        timeout 60 "$D/dmuon" bench kernels --shapes "$L/clk_$a.txt" --algos $a --kernels lt --retime-cached \
            --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 20 --cache "$L/at_clk.tsv" \
            --out "$L/clk_$a.hot.csv" > "$L/clk_$a.hot.txt" 2>&1
        kill $smi 2>/dev/null
        grep -hv '^#' "$L/clk_$a.hot.csv" | grep -v '^gpu,' | sed "s/^/hot /"
    done
    rm -f "$L/at_clk.tsv"
    echo "nsclock $((SECONDS - T0)) s"
}
# revalid: retune4's table and cache (the rows of retune3 and retune4 merged into the committed
# table on the device copy, retune4's cache as the executor's) validated once more (core and held
# out), to tell the run-to-run spread of h200-31's misses from the rows.
STAGE_TIMEOUT_revalid=560
stage_revalid() {
    local f
    T0=$SECONDS
    cp traces/kernels/retune4-2026-12-04/autotune.tsv traces/kernels/autotune_h200.tsv
    for f in traces/kernels/retune3-2026-12-04/ns_wide.direct.csv traces/kernels/retune3-2026-12-04/ns_wide.gram.csv \
        traces/kernels/retune3-2026-12-04/ns_tall.direct.csv traces/kernels/retune3-2026-12-04/ns_tall.gram.csv \
        traces/kernels/retune3-2026-12-04/ns_eager.csv traces/kernels/retune4-2026-12-04/ns_wide.direct.csv \
        traces/kernels/retune4-2026-12-04/ns_wide.gram.csv traces/kernels/retune4-2026-12-04/ns_tall.direct.csv \
        traces/kernels/retune4-2026-12-04/ns_tall.gram.csv; do
        python3 tools/costs_merge.py traces/costs/h200.csv "$f" --note "revalid (device copy)" --out traces/costs/h200.csv
    done
    cp traces/costs/h200.csv "$L/h200-merged.csv"
    validate_set core
    validate_set heldout
}
# unseen (issue 14): models no earlier call validated, none with rows or autotune entries of its
# own (models/extra, imported from tests/data/hf: Phi-3-mini with fused qkv and gate-up, Gemma-2B
# with its 256k vocabulary and one kv head, Gemma2-2B, Qwen3-8B and Mistral-7B cut to 12 layers,
# Mixtral-8x7B cut to 2: 8 experts of 14336x4096, top 2) at token counts no call ran (2048,
# 8192), the committed rows and cache; replayed on the build machine with the committed
# calibration.
STAGE_TIMEOUT_unseen=300
stage_unseen() {
    T0=$SECONDS
    validate_set unseen
}
# unseen2 (issue 14): the families imported on 2026-12-05 (models/extra: gpt-oss-20b cut to 2
# layers with its expert biases, router bias and sinks, Gemma-3 1B whole, OLMo-2-7B and
# Granite-3.1-8B cut to 8 layers, SmolLM3-3B whole, the Gemma-3 4B VLM whole: 4096 patches a
# sample; StarCoder2-3B and Pythia-1B whole: LayerNorms and non-gated MLPs with biases) at 2048
# and 4096 tokens, the committed rows and cache; replayed here with the committed calibration
# (ASRUN=1 tools/replay_all.sh).
STAGE_TIMEOUT_unseen2=420
stage_unseen2() {
    T0=$SECONDS
    validate_set unseen2
}
# unseen3 (issue 14, 2026-12-06): the third set of models no call has run (models/README.md,
# models/extra: OLMoE, Qwen1.5-MoE, DeepSeek-V2-Lite cut, Qwen2-VL-2B), dmuon, muon-ddp and adamw at
# 2048 and 4096 tokens, against traces/validate/unseen3-predictions-2026-12-06 (committed before);
# unseen3h100 the same on an H100 (--gpu H100), priced by the h100 preset from the H200 tables
STAGE_TIMEOUT_unseen3=320
stage_unseen3() {
    T0=$SECONDS
    validate_set unseen3
}
# unseen3tok: the same four models at 1024 and 8192 tokens on an H200 (the small and the large batch),
# against traces/validate/unseen3tok-predictions-2026-12-06 (committed before)
STAGE_TIMEOUT_unseen3tok=360
stage_unseen3tok() {
    T0=$SECONDS
    validate_set unseen3tok
}
STAGE_TIMEOUT_unseen3tokh100=360
stage_unseen3tokh100() {
    T0=$SECONDS
    validate_set unseen3tokh100
}
STAGE_TIMEOUT_unseen3h100=320
stage_unseen3h100() {
    T0=$SECONDS
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader
    validate_set unseen3h100
}
# core and heldout: one validation set each (validate_set), as valall runs them
STAGE_TIMEOUT_core=300
stage_core() {
    T0=$SECONDS
    validate_set core
}
STAGE_TIMEOUT_heldout=300
stage_heldout() {
    T0=$SECONDS
    validate_set heldout
}
STAGE_TIMEOUT_llama16k=200
stage_llama16k() {
    T0=$SECONDS
    validate_set llama16k
}
# multi (issues 14-17; a machine of 2 or more GPUs, one node): NCCL's collectives over all its GPUs
# (bench comm: the h200xN calibration's input), then the validation's three core models (dense,
# dense with biases, a VLA) under dmuon, muon-ddp, muon-fsdp and adamw on 1 and on all GPUs at
# 4096 tokens, every case's trace and plan kept (calibrated and replayed on the build machine:
# the 2-GPU validation the notes lack, the naive baselines' timelines with collectives, the
# optimizer window). Nothing on a one-GPU machine.
STAGE_TIMEOUT_multi=560
stage_multi() {
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "$NGPU" -lt 2 ]; then echo "multi: $NGPU GPU(s); it needs 2 or more: nothing run"; return 0; fi
    timeout 120 $MPIRUN -np "$NGPU" --bind-to none "$D/dmuon" bench comm --backend gpu --min-bytes 1K --max-bytes 1G \
        --iters 10 --csv "$L/comm_${NGPU}gpu.csv" > "$L/comm_${NGPU}gpu.txt" 2>&1
    echo "bench comm on $NGPU GPUs exit $? ($(grep -vc '^#' "$L/comm_${NGPU}gpu.csv" 2>/dev/null || echo 0) rows)"
    T0=$SECONDS
    validate_set multi
}
# aligngrid (issue 14; traces/validate/h200-40: Granite-3.1-8B's LM head, vocabulary 49155, ran
# 8x its price from the aligned GEMM rows): GEMMs with a dimension that is not a multiple of 8
# elements (16 bytes of bf16), timed cool (bench work --cool) through the executor's launchers: a grid of odd sizes
# ($L/align_odd.csv) and one of sizes aligned to 2 and 4 elements ($L/align_24.csv), none of
# them a bundled or validated model's; then Granite's own kernels at 2048 and 4096 tokens
# ($L/align_granite.csv: evidence kept apart, never merged into the table its validation is
# priced from); then PyTorch's Qwen2.5-VL step under the profiler (busy time against wall time:
# is its vision tower host-bound?)
STAGE_TIMEOUT_aligngrid=340
stage_aligngrid() {
    local e=models/extra
    timeout 150 "$D/dmuon" bench work --models $e/pythia-1b.json --tokens 1024 --grid-m 1024,4096,8192 \
        --grid-nk 2048,4096,8192,4095,12289,50257 --cool --max-seconds 125 --out "$L/align_odd.csv" > "$L/align_odd.txt" 2>&1
    echo "bench work odd grid exit $? ($(grep -c '^NVIDIA' "$L/align_odd.csv" 2>/dev/null) rows)"
    timeout 60 "$D/dmuon" bench work --models $e/pythia-1b.json --tokens 1024 --grid-m 1024,4096 \
        --grid-nk 4096,24578,40964,32001 --cool --sustain 0 --max-seconds 45 --out "$L/align_24.csv" > "$L/align_24.txt" 2>&1
    echo "bench work 2/4 grid exit $? ($(grep -c '^NVIDIA' "$L/align_24.csv" 2>/dev/null) rows)"
    timeout 45 "$D/dmuon" bench work --models $e/granite-3.1-8b-base-8l.json --tokens 2048,4096 --no-grid --cool --sustain 0 \
        --out "$L/align_granite.csv" > "$L/align_granite.txt" 2>&1
    echo "bench work granite exit $? ($(grep -c '^NVIDIA' "$L/align_granite.csv" 2>/dev/null) rows)"
    timeout 80 python3 tools/torch_step_bench.py --model qwen2.5-vl-3b --tokens 4096 --steps 2 --warmup 1 --profile 25 \
        > "$L/torch_vl_profile.txt" 2>&1
    echo "torch_step_bench qwen2.5-vl-3b --profile exit $?"
    grep '^# profile' "$L/torch_vl_profile.txt"
}
# gapprobe (issue 14: dmuon's forward right after its NS phase runs 1.1-1.2x adamw's, flat over
# the whole forward, traces/device/stepprobe-2026-12-05; the power model gives less): Llama-3.2-3B
# at 1024 tokens, 5 steps, with the GPU left idle X ms between steps (DMUON_STEP_GAP_MS,
# real/real_run.c): if the forward's layers come back to adamw's time as X grows, the clock the
# NS phase leaves is the cause and X how long it takes to recover; if not, something else
# ($L/gap_STRATEGY_X.{txt,trace.csv}; one line per run: the mean forward layer of the last step)
STAGE_TIMEOUT_gapprobe=150
stage_gapprobe() {
    local st x
    for st in dmuon:0 dmuon:25 dmuon:50 dmuon:100 dmuon:200 dmuon:400 dmuon:1000 adamw:0 adamw:400; do
        x=${st#*:} st=${st%:*}
        DMUON_STEP_GAP_MS=$x timeout 40 "$D/dmuon" run --backend gpu --model llama-3.2-3b --cluster h200 --strategy "$st" \
            --tokens 1024 --steps 5 --timeout 30 --trace "$L/gap_${st}_$x.trace.csv" > "$L/gap_${st}_$x.txt" 2>&1
        echo "$st gap $x ms exit $?: $(grep '^# mean over' "$L/gap_${st}_$x.txt" | cut -c1-110); forward layer mean" \
            "$(awk -F, 'NR > 2 && $4 == "forward" && $6 > 300 && $6 < 1000 {s += $6; n++} END {if (n) printf "%.1f us over %d", s / n, n}' \
                "$L/gap_${st}_$x.trace.csv" 2>/dev/null)"
    done
}
# clockprobe (issue 14): the SM clock read on the GPU along the step (DMUON_CLOCK_TRACE,
# kernels/clock_probe.h: cycles over global-timer ns every 20 us, from the second step on), beside
# the last step's ops (--trace) and, in the runs marked k, every kernel (DMUON_KERNEL_TIMES):
# does dmuon's forward after its NS phase run at a lower clock than adamw's, and how does the clock
# come back? Llama-3.2-3B at 1024 and 4096 tokens under the three strategies, two idle gaps between
# steps, Qwen2.5-1.5B at 1024; one run without the probe for its cost
# ($L/clock_NAME.{clk,trace.csv,txt,kt.csv}; tools/clock_trace.py's report in clock_NAME.report).
# CLOCK_CASES='MODEL:STRATEGY:TOKENS:GAP_MS:K ...' runs those instead (K: k with the kernel
# times, - without, noprobe without the probe; MODEL a bundled name or a file)
STAGE_TIMEOUT_clockprobe=420
stage_clockprobe() {
    local c m st tok gap kt name t1
    export CUDA_MODULE_LOADING=EAGER # (the executor asks for it too when DMUON_CLOCK_TRACE is set)
    for c in ${CLOCK_CASES:-llama-3.2-3b:dmuon:1024:0:k llama-3.2-3b:adamw:1024:0:k llama-3.2-3b:muon-ddp:1024:0:k \
        llama-3.2-3b:dmuon:4096:0:- llama-3.2-3b:adamw:4096:0:- llama-3.2-3b:dmuon:1024:25:- \
        llama-3.2-3b:dmuon:1024:100:- qwen2.5-1.5b:dmuon:1024:0:- qwen2.5-1.5b:adamw:1024:0:- \
        llama-3.2-3b:dmuon:1024:0:noprobe}; do
        IFS=: read -r m st tok gap kt <<< "$c"
        name=$(basename "$m" .json)_${st}_${tok}_gap${gap}_$kt t1=$SECONDS
        # (an empty DMUON_CLOCK_TRACE or DMUON_KERNEL_TIMES is off)
        DMUON_CLOCK_TRACE=$([ "$kt" = noprobe ] || echo "$L/clock_$name.clk") \
            DMUON_KERNEL_TIMES=$([ "$kt" = k ] && echo "$L/clock_$name.kt.csv") \
            DMUON_STEP_GAP_MS=$gap timeout 40 "$D/dmuon" run --backend gpu --model "$m" --cluster h200 --strategy "$st" \
            --tokens "$tok" --steps 5 --timeout 30 --trace "$L/clock_$name.trace.csv" > "$L/clock_$name.txt" 2>&1
        echo "$name exit $? in $((SECONDS - t1)) s: $(grep '^# mean over' "$L/clock_$name.txt" | cut -c1-120)"
        grep -h '^# [0-9]* reads' "$L/clock_$name.clk" 2>/dev/null
        if [ $((SECONDS - t1)) -gt 25 ]; then echo "clockprobe: a run took over 25 s (the sampler held it?): stop"; break; fi
        if [ -s "$L/clock_$name.clk" ]; then
            python3 tools/clock_trace.py "$L/clock_$name.clk" "$L/clock_$name.trace.csv" \
                $([ "$kt" = k ] && echo "$L/clock_$name.kt.csv") > "$L/clock_$name.report" 2>&1
            sed -n '2,9p' "$L/clock_$name.report"
        fi
    done
}
# clockprobe2: the next clock runs (traces/device/clockprobe-2026-12-05/README.md): the models whose
# steps the model misses (Qwen2.5-3B and SmolLM3 dmuon at two token counts, whose NS phase runs
# 10-14% faster at the smaller; Mistral-7B adamw at 8192; Gemma-2B dmuon at 8192; Phi-3 dmuon at
# 2048; muon-ddp at 4096) and rested runs (400 ms between steps) whose forward and backward give
# each kernel's own clock at 1024 and 4096 tokens, which tools/clock_fit.py takes as the reference
STAGE_TIMEOUT_clockprobe2=420
stage_clockprobe2() {
    CLOCK_CASES="qwen2.5-3b:dmuon:1024:0:- qwen2.5-3b:dmuon:4096:0:- models/extra/smollm3-3b.json:dmuon:2048:0:- \
models/extra/smollm3-3b.json:dmuon:4096:0:- models/extra/mistral-7b-v0.1-12l.json:adamw:8192:0:- \
models/extra/gemma-2b.json:dmuon:8192:0:- models/extra/phi-3-mini-4k-instruct.json:dmuon:2048:0:- \
llama-3.2-3b:adamw:1024:400:- llama-3.2-3b:adamw:4096:400:- llama-3.2-3b:dmuon:4096:400:- \
llama-3.2-3b:muon-ddp:4096:0:-" stage_clockprobe
}
# nsop (issue 14): why dmuon's single-matrix NS ops run over their rows and its large batches
# under them (traces/validate/ns-op-ratios-2026-12-05): Llama-3.2-3B and Pythia-1B dmuon at 4096
# tokens with the SM clock read along the step (clockprobe: each op at its clock), then the rows of
# those ops (traces/kernels/nsop-2026-12-05: the wide and the tall calls as the executor splits
# them) re-timed on the committed cache in the same call, back to back as the table's were.
STAGE_TIMEOUT_nsop=300
stage_nsop() { nsop_run nsop; }
# nsop_run NAME: nsop's runs, then its rows re-timed as ns_NAME.*
nsop_run() {
    local S=traces/kernels/nsop-2026-12-05 n=$1 x f
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    CLOCK_CASES="llama-3.2-3b:dmuon:4096:0:- models/extra/pythia-1b.json:dmuon:4096:0:-" stage_clockprobe
    for x in wide.direct:direct wide.gram:gram tall.direct:direct tall.gram:gram; do
        f=$S/${x%%:*}.txt
        [ -f "$f" ] || continue
        [ $((SECONDS - T0)) -gt 230 ] && { echo "$n ${x%%:*}: skipped at $((SECONDS - T0)) s"; continue; }
        retime_rows "$n.${x%%:*}" "$f" "${x##*:}" lt,block 60 $([ "${x%%.*}" = tall ] && echo --as-stored)
    done
    echo "$n stage: $((SECONDS - T0)) s"
}
# window (issue 13): the sliding-window bands of --attention causal: bench work's rows of the four
# windowed models of models/extra at 4096 and 8192 tokens (those the committed table lacks), then
# validate --attention causal of them under adamw and dmuon at 4096 and 8192 tokens, against the
# predictions committed before the call (traces/validate/window-predictions-2026-12-05)
STAGE_TIMEOUT_window=500
stage_window() {
    T0=$SECONDS
    local e=models/extra
    causal_rows window $e/gemma-3-1b-pt.json,$e/phi-3-mini-4k-instruct.json,$e/mistral-7b-v0.1-12l.json,$e/gpt-oss-20b-2l.json \
        4096,8192 140
    validate_set window
    echo "window stage: $((SECONDS - T0)) s"
}
# causalunseen2 (issue 13): --attention causal (bands where the model has a window) on the second
# unseen set (validate_set unseen2's models, strategies and token counts), after bench work's rows
# of their causal products; predictions committed before: traces/validate/causal-unseen2-predictions-2026-12-05
STAGE_TIMEOUT_causalunseen2=530
stage_causalunseen2() {
    T0=$SECONDS
    local e=models/extra
    causal_rows unseen2c $e/gpt-oss-20b-2l.json,$e/gemma-3-1b-pt.json,$e/olmo-2-1124-7b-8l.json,$e/smollm3-3b.json,$e/granite-3.1-8b-base-8l.json,$e/gemma-3-4b-pt.json,$e/starcoder2-3b.json,$e/pythia-1b.json \
        2048,4096 90
    validate_set unseen2c
    echo "causalunseen2 stage: $((SECONDS - T0)) s"
}
# causalcore (issue 13): --attention causal on the core set at 4096 tokens (the seven validation
# models under dmuon and adamw: CORE_STRATEGIES), after bench work's rows of their causal products;
# predictions committed before: traces/validate/causal-core-predictions-2026-12-05
STAGE_TIMEOUT_causalcore=270
stage_causalcore() {
    T0=$SECONDS
    causal_rows core llama-3.2-3b,qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-vl-3b,wall-oss-flow,pi0,moonlight-16b-a3b-6l 4096 60
    validate_set corec
    echo "causalcore stage: $((SECONDS - T0)) s"
}
# causalcore2: causalcore's validation alone (no bench rows: the band and triangle shapes priced
# from the committed table's nearest rows, as the predictions price them), for a short call
STAGE_TIMEOUT_causalcore2=170
stage_causalcore2() {
    T0=$SECONDS
    validate_set corec
    echo "causalcore2 stage: $((SECONDS - T0)) s"
}
# fsdp1 (issue 15): muon-fsdp, the PyTorch form (each gradient gathered in the optimizer step, then
# its NS, one matrix at a time, eager), on one GPU: Llama-3.2-3B and Qwen2.5-1.5B at 4096 tokens,
# the measured phases against the simulated ones ($L/fsdp1: validate's cases packed)
STAGE_TIMEOUT_fsdp1=80
stage_fsdp1() {
    T0=$SECONDS
    validate_set fsdp1
    sed -n '/^# errors by model/,/^# goal/p' "$L/fsdp1/validate.txt" | grep -v kernels:
}
# tune_wide_chunks DIR LATE: DIR/wide.direct.txt and DIR/wide.gram.txt tuned into $L/autotune.tsv as
# retune_set does (flat scheme, kernels lt and block, block counts 1, 2, 4, 8), six lines a bench
# run so that a timeout loses one chunk ($L/ns_wide.ALGO.I.csv); no chunk starts after LATE s of
# the stage (T0).
tune_wide_chunks() {
    local S=$1 late=$2 a f i
    for a in direct gram; do
        grep -v '^#' $S/wide.$a.txt | split -l 6 - "$L/chunk.$a."
        i=0
        for f in "$L"/chunk.$a.*; do
            i=$((i + 1))
            if [ $((SECONDS - T0)) -gt $late ]; then echo "wide $a chunk $i: skipped at $((SECONDS - T0)) s"; continue; fi
            timeout 90 "$D/dmuon" bench kernels --shapes "$f" --algos $a --kernels lt,block --retune \
                --sym-blocks 1,2,4,8 --sym-schemes flat --no-products --no-elementwise --no-gemm-tune --warmup 2 --reps 10 \
                --cache "$L/autotune.tsv" --out "$L/ns_wide.$a.$i.csv" > "$L/ns_wide.$a.$i.txt" 2>&1
            echo "wide $a chunk $i exit $? ($(grep -vc '^#' "$L/ns_wide.$a.$i.csv" 2>/dev/null || echo 0) lines, $((SECONDS - T0)) s)"
        done
        rm -f "$L"/chunk.$a.*
    done
}
# heldns (issue 14): the NS rows of the shapes and batches the models/extra plans run that the
# committed table lacks (traces/kernels/heldns-2026-12-05: the lists, and the committed table's
# prices of every row, written before the call), tuned as retune_set does into a copy of the
# committed cache (wide lists, six lines per bench run so that a timeout loses one chunk), the tall
# rows re-timed on it; the rows merged into the device copy of the table ($L/h200-merged.csv), the
# cache made the committed one there ($L/autotune.tsv); then gpt-oss-20b-2l validated on them
# (dmuon and muon-ddp at 4096 tokens) while time is left.
STAGE_TIMEOUT_heldns=560
stage_heldns() {
    local S=traces/kernels/heldns-2026-12-05 a f
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    tune_wide_chunks $S 330
    for a in direct gram; do
        if [ $((SECONDS - T0)) -gt 390 ]; then echo "tall $a: skipped at $((SECONDS - T0)) s"; continue; fi
        retime_rows tall.$a $S/tall.$a.txt $a lt,block 60 --as-stored
    done
    cp "$L/autotune.tsv" traces/kernels/autotune_h200.tsv
    for f in "$L"/ns_wide.*.csv "$L"/ns_tall.*.csv; do
        [ -s "$f" ] && python3 tools/costs_merge.py traces/costs/h200.csv "$f" --note "heldns-2026-12-05 (device copy)" \
            --out traces/costs/h200.csv > /dev/null
    done
    cp traces/costs/h200.csv "$L/h200-merged.csv"
    echo "heldns rows: $((SECONDS - T0)) s"
    if [ $((SECONDS - T0)) -gt 430 ]; then echo "gpt-oss validation: skipped at $((SECONDS - T0)) s"; return; fi
    VALIDATE_MODELS=models/extra/gpt-oss-20b-2l.json VALIDATE_STRATEGIES=dmuon,muon-ddp VALIDATE_TOKENS=4096 \
        VALIDATE_TIMEOUT=120 stage_validate
    echo "heldns stage: $((SECONDS - T0)) s"
}
# heldns2 (issue 14): heldns again on the plans made with its rows (traces/kernels/heldns2-2026-12-05:
# the shapes and batches those plans of models/extra run at 2048-8192 tokens that the table still
# lacks, and the direct-eager rows of muon-ddp's; the committed table's prices written before):
# tuned and re-timed into a copy of the committed cache as heldns does, the eager rows re-timed on it
# without graphs; the cache made the committed one on the device, the table left as committed (so
# that the validation runs the plans the predictions were made of: the eight models of
# validate_set unseen2, dmuon and muon-ddp at 4096 tokens, traces/validate/heldns2-predictions-2026-12-05b; the
# rows' prices: traces/kernels/heldns2-2026-12-05/predictions-b.txt).
STAGE_TIMEOUT_heldns2=420
stage_heldns2() {
    local S=traces/kernels/heldns2-2026-12-05 a e=models/extra
    T0=$SECONDS
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    tune_wide_chunks $S 150
    for a in direct gram; do
        [ $((SECONDS - T0)) -gt 180 ] && { echo "tall $a: skipped at $((SECONDS - T0)) s"; continue; }
        retime_rows tall.$a $S/tall.$a.txt $a lt,block 50 --as-stored
    done
    [ $((SECONDS - T0)) -le 200 ] && retime_rows eager.wide $S/eager.wide.direct.txt direct lt,block 50 --no-graph
    [ $((SECONDS - T0)) -le 220 ] && retime_rows eager.tall $S/eager.tall.direct.txt direct lt,block 50 --as-stored --no-graph
    cp "$L/autotune.tsv" traces/kernels/autotune_h200.tsv
    echo "heldns2 rows: $((SECONDS - T0)) s"
    if [ $((SECONDS - T0)) -gt 330 ]; then echo "validation: skipped at $((SECONDS - T0)) s"; return; fi
    VALIDATE_MODELS=$e/gpt-oss-20b-2l.json,$e/gemma-3-1b-pt.json,$e/olmo-2-1124-7b-8l.json,$e/smollm3-3b.json,$e/granite-3.1-8b-base-8l.json,$e/gemma-3-4b-pt.json,$e/starcoder2-3b.json,$e/pythia-1b.json \
        VALIDATE_STRATEGIES=dmuon,muon-ddp VALIDATE_TOKENS=4096 VALIDATE_TIMEOUT=$((405 - (SECONDS - T0))) stage_validate
    echo "heldns2 stage: $((SECONDS - T0)) s"
}
# h100proj (issue 14): the H200 tables projected to a GPU they were not measured on. On an H100 (the
# call names nvidia-h100-x1), validate --cluster h100 (the preset: datasheet rates, no calibration:
# the power model is the H200's) of six models that fit its 80 GB under adamw at 1024 and 4096
# tokens (adamw: no NS, whose configurations the committed cache holds for the H200 only), against
# the predictions committed before the call (traces/validate/h100proj-predictions-2026-12-05).
STAGE_TIMEOUT_h100proj=260
stage_h100proj() {
    local e=models/extra
    T0=$SECONDS
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    VALIDATE_CLUSTER=h100 VALIDATE_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,$e/gemma-3-1b-pt.json,$e/pythia-1b.json,$e/olmo-2-1124-7b-8l.json,$e/granite-3.1-8b-base-8l.json \
        VALIDATE_STRATEGIES=adamw VALIDATE_TOKENS=1024,4096 VALIDATE_TIMEOUT=240 stage_validate
    echo "h100proj stage: $((SECONDS - T0)) s"
}
# h100proj2 (issue 14): the projection rule of 1157ee2 tested before the fact: on an H100 (call
# with --gpu H100), validate --cluster h100 of the six h100proj models at 2048 and 8192 tokens and
# Gemma-2B, adamw, against traces/validate/h100proj2-predictions-2026-12-05 (committed before).
STAGE_TIMEOUT_h100proj2=300
stage_h100proj2() {
    local e=models/extra
    T0=$SECONDS
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    VALIDATE_CLUSTER=h100 VALIDATE_MODELS=qwen2.5-0.5b,qwen2.5-1.5b,$e/gemma-3-1b-pt.json,$e/pythia-1b.json,$e/olmo-2-1124-7b-8l.json,$e/granite-3.1-8b-base-8l.json,$e/gemma-2b.json \
        VALIDATE_STRATEGIES=adamw VALIDATE_TOKENS=2048,8192 VALIDATE_TIMEOUT=280 stage_validate
    echo "h100proj2 stage: $((SECONDS - T0)) s"
}
# h100rows (issue 14): where the datasheet projection of the H200 rows to an H100 errs (h100proj:
# every phase over-predicted, +7% on the step). On an H100 (device-run.sh --gpu H100), bench work's
# rows of Qwen2.5-0.5B, Qwen2.5-1.5B and Pythia-1B at 4096 tokens, back to back as
# traces/costs/h200-work.csv's were timed, to be set kernel by kernel against those rows and the
# projection's ratio ($L/h100-work.csv; compared on the build machine).
STAGE_TIMEOUT_h100rows=150
stage_h100rows() {
    T0=$SECONDS
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv,noheader
    timeout 130 "$D/dmuon" bench work --models qwen2.5-0.5b,qwen2.5-1.5b,models/extra/pythia-1b.json --tokens 4096 \
        --no-grid --cache "$L/work_cache_h100.tsv" --max-seconds 110 --out "$L/h100-work.csv" > "$L/h100work_table.txt" \
        2> "$L/h100work_err.txt"
    echo "bench work exit $? ($(grep -vc '^#' "$L/h100-work.csv" 2>/dev/null || echo 0) rows, $((SECONDS - T0)) s)"
    tail -3 "$L/h100work_err.txt"
}
# rowclock (issue 14): the clock each NS row holds while it is timed, read by the bench itself
# (ns_time_last_mhz: each SM's cycles over the global timer between marks right before the timed
# calls and right after them, the mean clock over them; `dmuon bench kernels` prints it per row and
# candidate, column MHz). First nsop's two
# steps with the clock read along them (Llama-3.2-3B and Pythia-1B dmuon at 4096 tokens: each NS
# op's time and clock), then their rows re-timed as the table's were (3 warm-up, 15 timed), with
# a longer window (60 timed) and a longer warm-up (30): whether a row's clock depends on how long
# it ran; and once on a rested card (--rest-ms 300, one run): each kind of row's own full clock;
# then every NS row of traces/costs/h200.csv re-timed with its clock, in chunks, as far as the
# budget goes ($L/ns_all.*; 24 shapes a call, 2 warm-up and 10 timed runs a row). A second call
# finishes the table: ROWCLOCK_ROWS_ONLY=1 (no steps, no windows) ROWCLOCK_FROM=K (the first chunk,
# in the order the first call's summary lists them, that it skipped).
STAGE_TIMEOUT_rowclock=${ROWCLOCK_TIMEOUT:-500} # (a call that runs another stage first gives it less, with ROWCLOCK_LATE under it)
stage_rowclock() {
    local S=traces/kernels/nsop-2026-12-05 x f c i
    T0=$SECONDS
    local -x DMUON_CLOCK_DEBUG=1 # (this stage's runs only) each timing's SMs (min, median, max) in the bench's log: the read checked on this card
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    cp traces/kernels/autotune_h200.tsv "$L/autotune.tsv"
    [ "${ROWCLOCK_ROWS_ONLY:-0}" = 1 ] || CLOCK_CASES="llama-3.2-3b:dmuon:4096:0:- models/extra/pythia-1b.json:dmuon:4096:0:-" stage_clockprobe
    for x in wide.direct:direct wide.gram:gram tall.gram:gram; do
        [ "${ROWCLOCK_ROWS_ONLY:-0}" = 1 ] && break
        f=$S/${x%%:*}.txt
        retime_rows "rc15.${x%%:*}" "$f" "${x##*:}" lt,block 60 $([ "${x%%.*}" = tall ] && echo --as-stored)
        retime_rows "rc60.${x%%:*}" "$f" "${x##*:}" lt,block 60 --reps 60 $([ "${x%%.*}" = tall ] && echo --as-stored)
        retime_rows "rcw30.${x%%:*}" "$f" "${x##*:}" lt,block 60 --warmup 30 $([ "${x%%.*}" = tall ] && echo --as-stored)
        # one run on a rested card (300 ms idle first): the clock such a card gives each kind of row
        retime_rows "rest.${x%%:*}" "$f" "${x##*:}" lt,block 60 --warmup 0 --reps 1 --rest-ms 300 $([ "${x%%.*}" = tall ] && echo --as-stored)
        grep -h '^  [0-9]' "$L/ns_rc15.${x%%:*}.txt" "$L/ns_rc60.${x%%:*}.txt" "$L/ns_rcw30.${x%%:*}.txt" "$L/ns_rest.${x%%:*}.txt" | awk '{print "   ", $1, $2, $4, $7, $NF " MHz"}'
    done
    echo "rowclock nsop part: $((SECONDS - T0)) s"
    # the table's rows are re-timed for their clocks: not when the bench read none (column MHz 0)
    if [ "${ROWCLOCK_ROWS_ONLY:-0}" != 1 ] && ! grep -hq '^  [0-9].* [1-9][0-9]*$' "$L"/ns_rc15.*.txt 2>/dev/null; then
        echo "rowclock: no row read a clock (column MHz 0 or absent): the table's rows not re-timed"
        return 0
    fi
    # every NS row of the table: shape files per kind (wide/tall, graph/eager), 30 rows a chunk
    python3 - "$L" <<'PY'
import sys, collections
L = sys.argv[1]
kinds = collections.OrderedDict()
for line in open('traces/costs/h200.csv'):
    f = line.rstrip('\n').split(',')
    if len(f) < 10 or f[1] != 'ns':
        continue
    m, n, b = int(f[3]), int(f[4]), int(f[5])
    k = ('tall' if m > n else 'wide') + '.' + f[2]
    kinds.setdefault(k, collections.OrderedDict()).setdefault((m, n), []).append(b)
for k in ('wide.direct', 'wide.gram', 'tall.gram', 'tall.direct', 'wide.direct-eager', 'tall.direct-eager'):
    rows = list(kinds.get(k, {}).items())
    for i in range(0, len(rows), 24):
        with open(f'{L}/all.{k}.{i // 24:03d}.txt', 'w') as o:
            for (m, n), bs in rows[i:i + 24]:
                o.write(f'{m} {n} {",".join(map(str, sorted(bs)))}\n')
PY
    local k=0
    for f in "$L"/all.*.txt; do
        c=$(basename "$f" .txt)
        c=${c#all.}
        k=$((k + 1))
        [ $k -lt "${ROWCLOCK_FROM:-1}" ] && continue # a later call goes on from the first chunk not done
        if [ $((SECONDS - T0)) -gt ${ROWCLOCK_LATE:-450} ]; then echo "$c: skipped at $((SECONDS - T0)) s"; continue; fi
        i=${c%.*}
        case $i in # 2 warm-up and 10 timed runs a row, as tune_wide_chunks timed most of them
        wide.direct) retime_rows "all.$c" "$f" direct lt,block 90 --warmup 2 --reps 10 ;;
        wide.gram) retime_rows "all.$c" "$f" gram lt 90 --warmup 2 --reps 10 ;;
        tall.gram) retime_rows "all.$c" "$f" gram lt 90 --warmup 2 --reps 10 --as-stored ;;
        tall.direct) retime_rows "all.$c" "$f" direct lt,block 90 --warmup 2 --reps 10 --as-stored ;;
        wide.direct-eager) retime_rows "all.$c" "$f" direct lt,block 90 --warmup 2 --reps 10 --no-graph ;;
        tall.direct-eager) retime_rows "all.$c" "$f" direct lt,block 90 --warmup 2 --reps 10 --as-stored --no-graph ;;
        esac
    done
    rm -f "$L"/all.*.txt
    echo "rowclock stage: $((SECONDS - T0)) s"
}
# rowclockh100 (issue 14): rowclock's question on an H100 (the call found no H200): StarCoder2-3B
# (1024 tokens: its dmuon step fits the H100's 80 GB) and Pythia-1B (4096) dmuon with the clock
# read along the step, then the rows of their NS ops (traces/kernels/rowclock-2026-12-06/h100.*:
# tools/plan_ns_shapes.py of their plans) timed with the bench's clock read, on the default NS
# configuration both sides run here (the committed cache holds the H200's: --sym-blocks 1
# --heuristics 0 --kernels lt, no cache), at three windows (3 + 15 runs, 3 + 60, 30 + 15) and once
# on a rested card (--rest-ms 300).
STAGE_TIMEOUT_rowclockh100=330
stage_rowclockh100() {
    local S=traces/kernels/rowclock-2026-12-06 x f v
    T0=$SECONDS
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    [ "${ROWCLOCK_NO_STEPS:-0}" = 1 ] || # (the steps of an earlier call stand: the bench's rows alone)
        CLOCK_CASES="models/extra/starcoder2-3b.json:dmuon:1024:0:- models/extra/pythia-1b.json:dmuon:4096:0:-" stage_clockprobe
    for x in direct:direct gram:gram gram.tall:gram; do
        f=$S/h100.${x%%:*}.txt
        for v in "rc15:3:15:0" "rc60:3:60:0" "rcw30:30:15:0" "rest:0:1:300"; do
            IFS=: read -r n w r z <<< "$v"
            DMUON_CLOCK_DEBUG=1 timeout 90 "$D/dmuon" bench kernels --shapes "$f" --algos "${x##*:}" --kernels lt --sym-blocks 1 --heuristics 0 \
                --no-gemm-tune --no-products --no-elementwise --warmup "$w" --reps "$r" --rest-ms "$z" $(case $x in *tall*) echo --as-stored ;; esac) \
                --out "$L/ns_$n.${x%%:*}.csv" > "$L/ns_$n.${x%%:*}.txt" 2>&1
            echo "$n ${x%%:*} exit $? ($((SECONDS - T0)) s)"
            grep -h '^  [0-9]' "$L/ns_$n.${x%%:*}.txt" | awk '{print "   ", $1, $2, $4, $7, $NF " MHz"}'
        done
    done
    echo "rowclockh100 stage: $((SECONDS - T0)) s"
}
# publishgpu (issue 16 item 2): the GPU executor runs --publish (the first layer's fetch after its
# update, run again on a skipped step: real_gpu.c republish) on one GPU: Qwen2.5-0.5B dmuon and
# adamw at 1024 tokens, 4 steps with a NaN in the embedding's gradient at step 2 (skipped), with
# and without --publish 1: the saved weights must be the same bytes; step times beside.
STAGE_TIMEOUT_publishgpu=150
stage_publishgpu() {
    local s p
    for s in dmuon adamw; do
        for p in 0 1; do
            "$D/dmuon" plan --model qwen2.5-0.5b --gpus 1 --cluster h200 --strategy $s --tokens 1024 --publish $p \
                -o "$L/pub-$s-$p.json" > /dev/null 2>&1
            timeout 60 "$D/dmuon" run --backend gpu --program "$L/pub-$s-$p.json" --model qwen2.5-0.5b --tokens 1024 \
                --steps 4 --inject-nan 2:0:0 --save-weights "/tmp/pubw-$s-$p.bin" > "$L/pub-$s-$p.txt" 2>&1
            echo "$s publish=$p exit $?: $(grep -c ' ok$' "$L/pub-$s-$p.txt") ok, $(grep -c 'skipped' "$L/pub-$s-$p.txt") skip lines; $(grep '^# mean over' "$L/pub-$s-$p.txt" | cut -c1-100)"
        done
        cmp "/tmp/pubw-$s-0.bin" "/tmp/pubw-$s-1.bin" && echo "$s: the weights with and without --publish 1 are the same bytes"
        rm -f "/tmp/pubw-$s-0.bin" "/tmp/pubw-$s-1.bin" # (not under $OUT: 0.5 GB each)
    done
}
# passes (issue 13, 2026-12-06): the layer passes (activations, rotary embeddings, residual adds:
# core/workload.h) on the GPU: test_wk_gpu (every kind against the CPU, the passes included), then
# stages passrows and passval.
STAGE_TIMEOUT_passes=590
stage_passes() {
    T0=$SECONDS
    stage_wktest > "$L/wktest.txt" 2>&1
    echo "test_wk_gpu: $(grep -c '^ok' "$L/wktest.txt") ok, $(grep -c '^not ok' "$L/wktest.txt") not ok ($((SECONDS - T0)) s)"
    grep -E '^not ok' "$L/wktest.txt" | head -20
    stage_passrows
    stage_passval
}
PASS_OPS='act|act-bwd|glu|glu-bwd|rope|rope-bwd|resid|resid-bwd'
# pass_bench NAME MODELS CACHE COOL_S PLAIN_S SLACK OPS: dmuon bench work of MODELS at 1024-8192
# tokens, --cool for at most COOL_S seconds, then plain for PLAIN_S (each command's timeout SLACK s
# more), from the committed caches when CACHE is 1 (only what they lack is timed); the rows in
# $L/NAME-cool.csv and $L/NAME-work.csv, only the op kinds OPS (a|b|...: bench work --ops a,b,...)
# timed and their lines shown
pass_bench() {
    local name=$1 models=$2 cache=$3 ops=$7 x T1=$SECONDS
    for x in cool work; do
        local flags="--sustain 3" lim=$5 c=traces/costs/work_cache_h200.tsv
        [ $x = cool ] && flags="--cool --sustain 0" lim=$4 c=traces/costs/work_cache_h200_cool.tsv
        if [ "$cache" = 1 ]; then cp "$c" "$L/cache_$x.tsv" && flags="$flags --cache $L/cache_$x.tsv"; fi
        # shellcheck disable=SC2086
        timeout $((lim + $6)) "$D/dmuon" bench work --models "$models" --tokens 1024,2048,4096,8192 --no-grid $flags \
            --ops "$(printf '%s' "$ops" | tr '|' ',')" --max-seconds $lim --out "$L/$name-$x.csv" > "$L/${name}_$x.txt" 2> "$L/${name}_${x}_err.txt"
        echo "bench work $name $x exit $? ($(grep -cE ",($ops)," "$L/$name-$x.csv" 2>/dev/null || echo 0) rows of $ops; $((SECONDS - T1)) s)"
        grep -E '^# ([0-9]+ kernels timed|estimate|stopped|wrote)' "$L/${name}_$x.txt"
        tail -2 "$L/${name}_${x}_err.txt"
        rm -f "$L/cache_$x.tsv"
    done
    grep -hE " ($ops) " "$L/${name}_cool.txt" | head -30
}
# passrows: the validation models' rows from the committed caches, so that only the passes' kernels
# are timed ($L/passes-cool.csv and $L/passes-work.csv: the calibration prices from the cool rows,
# the uncalibrated presets and the default study from the plain ones)
STAGE_TIMEOUT_passrows=260
stage_passrows() { pass_bench passes validation 1 140 80 15 "$PASS_OPS"; }
# passact: the plain activation's rows (act, act-bwd: the validation models have no plain MLP at
# scale) from Pythia-1B's kernels ($L/passact-cool.csv, $L/passact-work.csv)
STAGE_TIMEOUT_passact=150
stage_passact() { pass_bench passact models/extra/pythia-1b.json 0 70 60 10 'act|act-bwd'; }
# roperows (2026-12-06): the rotary kernel with 32-bit indices (kernels/wk_cuda.cu k_rope) on the
# validation models' shapes, glu beside it as the control (its rows are in the committed tables);
# $L/roperows-cool.csv, $L/roperows-work.csv
STAGE_TIMEOUT_roperows=150
stage_roperows() { pass_bench roperows validation 0 60 50 10 'rope|rope-bwd|glu'; }
# passval, passval2, passvalh100: validate_set passes, passes2, passesh100 (the pass set against
# traces/validate/passes-predictions-2026-12-06, committed before)
STAGE_TIMEOUT_passval=320
stage_passval() {
    T0=$SECONDS
    validate_set passes
}
STAGE_TIMEOUT_passval2=330
stage_passval2() {
    T0=$SECONDS
    validate_set passes2
}
STAGE_TIMEOUT_passvalh100=320
stage_passvalh100() {
    T0=$SECONDS
    validate_set passesh100
}
STAGE_TIMEOUT_passvalh100b=330
stage_passvalh100b() {
    T0=$SECONDS
    validate_set passesh100b
}
# ropeab (2026-12-06): the rotary kernel before (64-bit pair index, a modulo per pair) and after
# (32-bit, one modulo per vector) in the same call: the binaries of the commit before the change
# carried packed in .devreal-old.txz (tools/build-device.sh run on that commit); each times every
# kernel of Llama-3.2-3B and Qwen2.5-1.5B at 4096 and 8192 tokens (--cool), old, new, old, new;
# the pass rows of each run side by side ($L/ropeab_*.csv)
STAGE_TIMEOUT_ropeab=200
stage_ropeab() {
    if [ ! -f .devreal-old.txz ]; then echo "no .devreal-old.txz carried"; return 0; fi
    local old=/tmp/ropeab-old r b
    rm -rf $old && mkdir -p $old && tar -xJf .devreal-old.txz -C $old
    for r in 1 2; do
        for b in old new; do
            local bin=$D/dmuon
            [ $b = old ] && bin=$old/.devreal/dmuon
            timeout 45 "$bin" bench work --models llama-3.2-3b,qwen2.5-1.5b --tokens 4096,8192 --no-grid --cool \
                --sustain 0 --out "$L/ropeab_${b}_$r.csv" > "$L/ropeab_${b}_$r.txt" 2>&1
            echo "$b run $r exit $? ($(grep -c ',elem,' "$L/ropeab_${b}_$r.csv" 2>/dev/null) elem rows)"
        done
    done
    python3 - "$L" <<'PY'
import csv, sys, glob, os
L = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(L, 'ropeab_*_*.csv'))):
    b, r = os.path.basename(f)[7:-4].split('_')
    for line in open(f):
        p = line.strip().split(',')
        if len(p) < 9 or p[1] != 'elem' or p[2] not in ('rope', 'rope-bwd', 'glu', 'glu-bwd', 'resid'):
            continue
        key = ','.join(p[2:7])
        rows.setdefault(key, {})[b + r] = float(p[8])
print('%-34s %9s %9s %9s %9s %7s' % ('kernel (op,m,n,k,batch)', 'old1', 'new1', 'old2', 'new2', 'new/old'))
for k in sorted(rows):
    v = rows[k]
    o = [v.get('old1'), v.get('old2')]; n = [v.get('new1'), v.get('new2')]
    if None in o or None in n:
        continue
    print('%-34s %9.2f %9.2f %9.2f %9.2f %7.3f' % (k, o[0], n[0], o[1], n[1], (n[0] + n[1]) / (o[0] + o[1])))
PY
}

# nsb16 (2026-12-07, issue 17): kernel "block16" (kernels/ns_block.cu k_b16: one CTA per matrix,
# every product whole in 16 x 16 warp tiles) beside "block", the cached cuBLASLt plan and
# PyTorch: the block tests (both kernels), memcheck and racecheck on them, the SASS of k_b16 for
# sm_80 and sm_90, the small shapes timed (the bundled models' pi0 32x1024 among them), CTA 0's
# clock per product (--profile). (Its first two runs, as "nsrows", timed a form that split the
# products' rows over a cluster: traces/kernels/blockrow-2026-12-07.)
STAGE_TIMEOUT_nsb16=240
stage_nsb16() {
    block_checks b16 "block, block16" 60 60 8
    block_race_sass b16 "block, block16" k_b16
    printf '32 32 1\n48 48 1\n64 64 1,8,64\n96 96 1\n100 120 1\n128 128 1,8\n64 256 1\n64 800 1\n32 1024 1\n1000 30 1\n128 256 1\n' > "$L/b16_shapes.txt"
    timeout 90 "$D/dmuon" bench kernels --shapes "$L/b16_shapes.txt" --kernels lt,block,block16 --algos direct \
        --no-products --no-elementwise --no-gemm-tune --reps 20 --warmup 3 --verbose --out "$L/b16.csv" > "$L/b16_bench.txt" 2>&1
    echo "bench exit $?"
    grep -E '^#   candidate' "$L/b16_bench.txt" | sed 's/^#   candidate //' | head -60
    printf '64 64 1\n128 128 1\n' > "$L/b16_prof_shapes.txt"
    timeout 40 "$D/dmuon" bench kernels --shapes "$L/b16_prof_shapes.txt" --kernels block,block16 --algos direct --profile \
        --no-products --no-elementwise --no-gemm-tune --reps 10 --warmup 2 --out "$L/b16_prof.csv" > "$L/b16_prof.txt" 2>&1
    echo "bench --profile exit $?"
    grep -E '^#     block|^#       iteration [04]' "$L/b16_prof.txt" | head -20
    timeout 40 python3 tools/torch_ns_bench.py --ours "$L/b16.csv" --shapes "$L/b16_shapes.txt" --out "$L/b16_torch.txt" > /dev/null
    echo "torch_ns_bench exit $?"
    cat "$L/b16_torch.txt"
}
