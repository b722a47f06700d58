#!/bin/sh
# real_gpu.sh: the GPU backend of `dmuon run` on the GPUs of this machine (one rank per GPU, at
# most 2): every strategy runs on a tiny model; dmuon and muon-ddp-tuned, the same math through
# different collectives and owners, give the same losses to a bf16-level tolerance (muon-ddp
# itself runs the PyTorch form: other coefficients, direct NS); a NaN
# gradient skips the step on every rank; an overflow that only the reduction makes (every local
# gradient finite) skips the step too and changes nothing (the parameters equal bit for bit those
# of a run without the faulty step), and under every strategy a step skipped early changes
# nothing either: the kept steps after it end bit for bit where the run without it ends (the
# ping-pong optimizer state of real_gpu.c: skipped updates are never committed, and the next
# step reads the committed buffers); a run killed after a checkpoint and resumed ends with
# parameters bit-identical to an uninterrupted run's; muon-fsdp's parameters on 2 GPUs agree
# with a one-GPU run over the same tokens to bf16 precision (real_exec_weights over FSDP shards);
# a model that does not fit (Qwen2.5-72B on one GPU) is refused before allocating, with the
# estimate; the architecture model (every kernel kind of the workload) follows the CPU
# executor's losses and parameters to bf16 precision, and so does a model whose collectives run in
# place across the arenas' alignment gaps (equal bit for bit to the same run with every collective
# packed); dmuon with its optimizer on the low-priority compute stream (--ns-under-backward
# stream) ends bit for bit where dmuon on one stream does; a stalled peer makes --timeout abort NCCL
# and exit non-zero; the clock probe (DMUON_CLOCK_TRACE) marks the steps and reads a plausible
# clock. Skips where there is no
# GPU (CI). NCCL's NVLink multicast stays off. Expected under 120 s on 2 x H200 (the same script
# on the CPU backend, 2 ranks oversubscribed on 2 cores: 42 s):
#   real/run_device.sh gputest     (on the device, from the repository root)
: "${DM_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
MPIRUN=${MPIRUN:-mpirun}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! command -v "$MPIRUN" >/dev/null 2>&1; then echo "1..0 # SKIP no mpirun"; exit 0; fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpu:-0}" -lt 1 ]; then echo "1..0 # SKIP no GPU"; exit 0; fi
np=$([ "$ngpu" -ge 2 ] && echo 2 || echo 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny=$DM_SRCDIR/tests/data/tiny_gpu.json
R="$DMUON run --backend gpu --model $tiny --tokens 256 --steps 4 --timeout 30"
for s in dmuon muon-ddp muon-ddp-tuned muon-fsdp muon-rr adamw; do
    out=$("$MPIRUN" -np $np --bind-to none $R --strategy $s --csv "$tmp/$s.csv" --save-weights "$tmp/$s.w" 2>&1)
    rc=$?
    is "gpu $s on $np rank(s): 4 ok steps (exit $rc)" "$rc/$(printf '%s\n' "$out" | grep -c ' ok$')" "0/4"
done
l_d=$(sed -n 's/^3,\([^,]*\),.*/\1/p' "$tmp/dmuon.csv"); l_m=$(sed -n 's/^3,\([^,]*\),.*/\1/p' "$tmp/muon-ddp-tuned.csv")
is "gpu: dmuon and muon-ddp-tuned losses agree within 1e-3 ($l_d, $l_m)" \
    "$(awk -v a="$l_d" -v b="$l_m" 'BEGIN{d=a-b; if (d<0) d=-d; print (a != "" && d <= 1e-3*b) ? "yes" : "no"}')" yes
l0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/dmuon.csv")
is "gpu: the loss falls" "$(awk -v a="$l0" -v b="$l_d" 'BEGIN{print (b < a) ? "yes" : "no"}')" yes
out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --steps 3 --inject-nan 1:$((np - 1)):1 2>&1)
like "gpu: a NaN gradient skips the step and names it" "$out" "skipped: non-finite gradient of layers.0.q.weight (rank $((np - 1)))"
# the relative Frobenius error that --check-weights printed (empty if none)
err_of() { printf '%s\n' "$1" | sed -n 's/.*largest relative Frobenius error \([^ ]*\) .*/\1/p'; }
# the optimizer on the second, lowest-priority compute stream beside the backward: the same
# kernels on the same data, so the same parameters bit for bit as dmuon on one stream
out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --ns-under-backward stream --check-weights "$tmp/dmuon.w" 2>&1)
like "gpu dmuon --ns-under-backward stream: parameters bit-identical to dmuon's" "$out" \
    "largest relative Frobenius error 0 (every matrix bit-identical)"

# checkpoints: killed while step 2 stalls (after the step-2 checkpoint), resumed to step 4
"$MPIRUN" -np $np --bind-to none $R --strategy dmuon --checkpoint "$tmp/ck" --inject-stall 2:0:60 --timeout 120 \
    >"$tmp/killed.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "step 2 " "$tmp/ck/latest" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill $pid 2>/dev/null
wait $pid 2>/dev/null
like "gpu checkpoint: the killed run had saved step 2" "$(cat "$tmp/ck/latest" 2>/dev/null)" "dmuon-checkpoint-2 step 2 "
out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --checkpoint "$tmp/ck" --resume --csv "$tmp/res.csv" \
    --check-weights "$tmp/dmuon.w" 2>&1)
like "gpu checkpoint: resumed after step 1" "$out" "resumed from $tmp/ck after step 1"
like "gpu checkpoint: parameters bit-identical to the uninterrupted run's" "$out" \
    "largest relative Frobenius error 0 (every matrix bit-identical)"
l_r=$(sed -n 's/^3,\([^,]*\),.*/\1/p' "$tmp/res.csv")
is "gpu checkpoint: the last loss equals the uninterrupted run's to 1e-6 ($l_r, $l_d)" \
    "$(awk -v a="$l_r" -v b="$l_d" 'BEGIN{d=a-b; if (d<0) d=-d; print (a != "" && d <= 1e-6*b) ? "yes" : "no"}')" yes
# a model that cannot fit one GPU: refused before allocating, with the estimate
out=$(timeout 60 "$MPIRUN" -np 1 --bind-to none $DMUON run --backend gpu --model "$DM_SRCDIR/models/qwen2.5-72b.json" \
    --tokens 4096 --steps 1 2>&1)
rc=$?
like "gpu: Qwen2.5-72B on one GPU does not fit: the estimate and the GPU's memory" "$out" "does not fit in memory on GPU 0: this rank needs about"
is "gpu: Qwen2.5-72B on one GPU: non-zero exit, no crash ($rc)" "$([ $rc -eq 1 ] && echo yes)" yes
# every kernel kind of the workload (tests/data/arch_cpu.json: a second stream with its table and
# attention, grouped-query and cross attention, MoE routing, a lookup), bound on the GPU as on
# the CPU: the same data and initial weights on both backends (the counter hash), so the GPU's
# losses and parameters follow the CPU executor's to bf16 precision; a kernel bound to the
# wrong buffer moves them by far more (its matrix's update takes another direction: three steps
# move a matrix by up to 10%, bf16 changes an update by about 1% of that)
arch=$DM_SRCDIR/tests/data/arch_cpu.json
A="run --model $arch --tokens 16 --seq-len 8 --steps 3 --timeout 30 --strategy dmuon"
"$MPIRUN" -np 1 --bind-to none $DMUON $A --backend gpu --csv "$tmp/arch_gpu.csv" --save-weights "$tmp/arch_gpu.w" \
    >"$tmp/arch_gpu.log" 2>&1
is "gpu: the architecture model runs 3 ok steps" "$(grep -c ' ok$' "$tmp/arch_gpu.log")" 3
out=$("$MPIRUN" -np 1 --bind-to none $DMUON $A --backend cpu --csv "$tmp/arch_cpu.csv" --check-weights "$tmp/arch_gpu.w" 2>&1)
g0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/arch_gpu.csv"); c0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/arch_cpu.csv")
g2=$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/arch_gpu.csv"); c2=$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/arch_cpu.csv")
is "gpu arch: the first step's loss is the CPU's within 2e-2 (gpu $g0, cpu $c0): the forward kernels" \
    "$(awk -v a="$g0" -v b="$c0" 'BEGIN{d=a-b; if (d<0) d=-d; print (a != "" && b > 0 && d <= 2e-2*b) ? "yes" : "no"}')" yes
is "gpu arch: the loss falls as on the CPU, within 15% (gpu $g0 -> $g2, cpu $c0 -> $c2): the backward kernels" \
    "$(awk -v a="$g0" -v b="$g2" -v c="$c0" -v d="$c2" 'BEGIN{x=a-b; y=c-d; e=x-y; if (e<0) e=-e; print (y > 0 && e <= 0.15*y) ? "yes" : "no"}')" yes
e=$(err_of "$out")
is "gpu arch: parameters after 3 steps equal the CPU backend's within 1e-2 (bf16; got $e)" \
    "$(awk -v e="$e" 'BEGIN{print (e != "" && e <= 1e-2) ? "yes" : "no"}')" yes
# --attention causal: the causal block's triangle as 3 products per window (tiles of 2 of the 8
# tokens; strided and grouped-query pointer-array batches), and in layer 0, whose sliding window
# is 3 tokens, the first tile's square and 3 rectangles of 2 x 4 (pointer arrays); the products
# are cost only, so the
# parameters are the whole run's (tests/test_models.c checks the geometry's operand bounds)
"$MPIRUN" -np 1 --bind-to none $DMUON $A --attention causal:2 --backend gpu --check-weights "$tmp/arch_gpu.w" \
    >"$tmp/arch_causal.log" 2>&1
e=$(err_of "$(cat "$tmp/arch_causal.log")")
is "gpu arch --attention causal:2: 3 ok steps, parameters the whole run's within 1e-6 (got $e)" \
    "$(grep -c ' ok$' "$tmp/arch_causal.log")/$(awk -v e="$e" 'BEGIN{print (e != "" && e <= 1e-6) ? "yes" : "no"}')" 3/yes
# collectives in place across the arenas' alignment gaps (tests/data/gap_gpu.json: a 132-row
# bias and a 100-wide norm share muon-ddp's all-reduce with the matrices; real_coll_place): the
# GPU's parameters follow the CPU backend's to bf16 precision (3e-2: this model's AdamW vectors
# move more than the architecture model's; 9.6e-3 under muon-ddp and 1.8e-2 under dmuon on one
# H200, traces/validate/h200-19, with the packed run bit-identical), and equal bit for bit those
# of the same run with every collective packed into the collective buffers (DM_COLL_STAGE=1)
gap=$DM_SRCDIR/tests/data/gap_gpu.json
for s in muon-ddp dmuon; do
    GP="run --model $gap --tokens 64 --steps 3 --timeout 30 --strategy $s"
    "$MPIRUN" -np 1 --bind-to none $DMUON $GP --backend gpu --save-weights "$tmp/gap_$s.w" >"$tmp/gap_$s.log" 2>&1
    is "gpu gap $s: 3 ok steps" "$(grep -c ' ok$' "$tmp/gap_$s.log")" 3
    out=$("$MPIRUN" -np 1 --bind-to none $DMUON $GP --backend cpu --check-weights "$tmp/gap_$s.w" 2>&1)
    e=$(err_of "$out")
    is "gpu gap $s: parameters after 3 steps equal the CPU backend's within 3e-2 (bf16; got $e)" \
        "$(awk -v e="$e" 'BEGIN{print (e != "" && e <= 3e-2) ? "yes" : "no"}')" yes
    out=$(DM_COLL_STAGE=1 "$MPIRUN" -np 1 --bind-to none -x DM_COLL_STAGE $DMUON $GP --backend gpu \
        --check-weights "$tmp/gap_$s.w" 2>&1)
    like "gpu gap $s: every collective packed (DM_COLL_STAGE=1): the same parameters bit for bit" "$out" \
        "largest relative Frobenius error 0 (every matrix bit-identical)"
done
# the clock probe (DMUON_CLOCK_TRACE): steps 1..3 marked, reads every ~20 us, a clock the card
# can run at (its cycles over the global timer: 200-3000 MHz for any current GPU)
out=$(DMUON_CLOCK_TRACE="$tmp/clk.csv" $DMUON run --backend gpu --model $tiny --tokens 256 --steps 4 --timeout 30 \
    --strategy dmuon 2>&1)
is "gpu: the clock probe writes 3 step marks (exit $?)" \
    "$(sed -n 's/^# step marks[^:]*: *//p' "$tmp/clk.csv" 2>/dev/null | wc -w)" 3
is "gpu: the clock probe's reads: over 20, median clock 200-3000 MHz" "$(awk -F, 'NR > 4 && $3 > 0 {print $3}' \
    "$tmp/clk.csv" 2>/dev/null | sort -n | awk '{v[NR] = $1} END {m = v[int((NR + 1) / 2)];
    print (NR > 20 && m >= 200 && m <= 3000) ? "yes" : "no (" NR " reads, median " m ")"}')" yes
if [ "$np" -ge 2 ]; then
    # an overflow only in the reduction at the 5th step: skipped, named, and the parameters
    # equal those of the 4-step run bit for bit (nothing modified, every rank agreeing)
    out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --steps 5 --inject-overflow 4:1 --check-weights "$tmp/dmuon.w" 2>&1)
    like "gpu: an overflow in the reduced gradient skips the step and names it" "$out" \
        "skipped: non-finite gradient of layers.0.q.weight (rank "
    is "gpu: ... the other 4 steps ran" "$(printf '%s\n' "$out" | grep -c ' ok$')" 4
    like "gpu: ... and nothing changed (parameters of the 4-step run, bit for bit)" "$out" \
        "largest relative Frobenius error 0 (every matrix bit-identical)"
    # an overflow at step 1 of 5 under every strategy: skipped, then 4 kept steps that end where
    # the 4-step run ends, bit for bit (same tokens every step; AdamW's step count skips it too)
    for s in dmuon muon-ddp muon-fsdp muon-rr adamw; do
        out=$("$MPIRUN" -np $np --bind-to none $R --strategy $s --steps 5 --inject-overflow 1:1 \
            --check-weights "$tmp/$s.w" 2>&1)
        is "gpu $s: an overflow at step 1 of 5: skipped, 4 ok steps" \
            "$(printf '%s\n' "$out" | grep -c 'step 1 skipped: non-finite')/$(printf '%s\n' "$out" | grep -c ' ok$')" "1/4"
        like "gpu $s: ... and the parameters equal the 4-step run's bit for bit" "$out" \
            "largest relative Frobenius error 0 (every matrix bit-identical)"
    done
    # muon-fsdp: 2 GPUs against 1 GPU over the same 512 tokens (bf16 sums in another order)
    out=$("$MPIRUN" -np 1 --bind-to none $DMUON run --backend gpu --model $tiny --tokens 512 --steps 4 \
        --timeout 30 --strategy muon-fsdp --check-weights "$tmp/muon-fsdp.w" 2>&1)
    e=$(err_of "$out")
    is "gpu: muon-fsdp parameters on 2 GPUs equal the 1-GPU run's within 3e-2 (bf16; got $e)" \
        "$(awk -v e="$e" 'BEGIN{print (e != "" && e <= 3e-2) ? "yes" : "no"}')" yes
    # muon-ddp's all-reduces across alignment gaps on 2 GPUs against the 1-GPU run
    out=$("$MPIRUN" -np $np --bind-to none $DMUON run --backend gpu --model $gap --tokens 32 --steps 3 --timeout 30 \
        --strategy muon-ddp --check-weights "$tmp/gap_muon-ddp.w" 2>&1)
    e=$(err_of "$out")
    is "gpu gap: muon-ddp parameters on 2 GPUs (32 tokens each) equal the 1-GPU run's within 3e-2 (bf16; got $e)" \
        "$(awk -v e="$e" 'BEGIN{print (e != "" && e <= 3e-2) ? "yes" : "no"}')" yes
    out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --steps 3 --timeout 3 --inject-stall 1:1:15 2>&1)
    rc=$?
    like "gpu: a stalled peer: --timeout aborts the communicators" "$out" "communicators aborted"
    is "gpu: a stalled peer: non-zero exit" "$([ $rc -ne 0 ] && echo yes)" yes
fi
tap_end
