#!/bin/sh
# real_cpu.sh: the real executor's CPU backend under MPI: tests/test_real_cpu on 1 to 4 ranks
# (every strategy's parameters against one-rank runs, determinism, non-finite gradients), and
# `dmuon run --backend cpu` on a tiny model (table, CSV, NaN skip, bad input, mismatched ranks,
# damaged checkpoints, programs the executor must refuse, fault-injection targets), and a tiny
# gpt-oss HuggingFace config.json run straight from --model.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then echo "1..0 # SKIP no mpirun"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# In a sanitizer build, LeakSanitizer reports Open MPI's own allocations in components it has
# already unloaded (frames "<unknown module>", so no suppression can name them): leak checking is
# off for the MPI processes here; the same code paths are leak-checked single-process elsewhere.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
builddir=$(dirname "$DMUON")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for n in 1 2 3 4; do
    out=$("$MPIRUN" --oversubscribe -np $n "$builddir/tests/test_real_cpu" 2>&1)
    rc=$?
    bad=$(printf '%s\n' "$out" | grep -c '^not ok')
    total=$(printf '%s\n' "$out" | grep -c '^ok')
    is "test_real_cpu on $n ranks: $total checks pass (exit $rc)" "$rc/$bad" "0/0"
    if [ "$rc" != 0 ] || [ "$bad" != 0 ]; then printf '%s\n' "$out" | grep -v '^ok' | sed 's/^/#   /' | head -30; fi
done

out=$("$MPIRUN" --oversubscribe -np 3 "$builddir/tests/test_real_bench" 2>&1)
rc=$?
is "bench comm on 3 ranks: every collective checked, CSV complete (exit $rc)" "$rc/$(printf '%s\n' "$out" | grep -c '^not ok')" "0/0"
[ "$rc" != 0 ] && printf '%s\n' "$out" | sed 's/^/#   /' | head -20

cat >"$tmp/tiny.json" <<'JSON'
{"format": "dmuon-model-1", "name": "tiny", "source": "real_cpu.sh",
 "stacks": [{"name": "layers", "layers": 2}],
 "tensors": [
  {"name": "layers.*.q.weight", "shape": [16, 16], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.up.weight", "shape": [32, 16], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.norm.weight", "shape": [16], "count": 2, "stack": "layers", "role": "adamw"}
 ]}
JSON
run() { "$MPIRUN" --oversubscribe -np "$@"; }
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 8 --steps 3 --csv "$tmp/run.csv" 2>&1)
like "dmuon run prints the resolved configuration" "$out" "strategy dmuon"
like "dmuon run checks the program hash" "$out" "# program "
like "dmuon run prints step rows" "$out" "     2 "
is "dmuon run: three ok steps" "$(printf '%s\n' "$out" | grep -c ' ok$')" 3
is "dmuon run --csv: header and 3 rows" "$(grep -vc '^#' "$tmp/run.csv")" 4
l0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/run.csv"); l2=$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/run.csv")
is "dmuon run: the loss falls" "$(awk -v a="$l0" -v b="$l2" 'BEGIN{print (b < a) ? "yes" : "no"}')" yes
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --tokens 8 --steps 2 --trace "$tmp/t.csv" 2>&1)
like "dmuon run --trace: written" "$out" "trace of step 1 written"
is "trace: the header of the shared format" "$(sed -n 2p "$tmp/t.csv")" "rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us"
"$DMUON" plan --model "$tmp/tiny.json" --gpus 2 --strategy muon-fsdp --tokens 8 -o "$tmp/pf.json" >/dev/null 2>&1
nops=$(grep -o '{"id":' "$tmp/pf.json" | wc -l)
is "trace: one event per op of the program" "$(($(wc -l <"$tmp/t.csv") - 2))" "$nops"
# muon-fsdp as PyTorch runs it: each matrix's gradient gathered in the optimizer step, after the
# backward, one gather per NS (one matrix each), and each NS after a gather that ended before it
ser=$(awk -F, 'NR > 2 && $1 == 0 { k[NR] = $4; s[NR] = $5; e[NR] = $5 + $6; if ($4 == "backward" && $5 + $6 > bend) bend = $5 + $6 }
    END { for (i in k) if (k[i] == "all-gather" && s[i] >= bend) g++
          for (i in k) if (k[i] == "ns") { n++; ok = 0; for (j in k) if (k[j] == "all-gather" && s[j] >= bend && e[j] <= s[i] + 1e-3) ok = 1; serial += ok }
          print g + 0, n + 0, serial + 0 }' "$tmp/t.csv")
set -- $ser
is "muon-fsdp (PyTorch form): one gradient gather per NS after the backward, each NS after one ($ser)" "$1 $3" "$2 $2"
# the PyTorch forms: every NS op launched eagerly, the classic coefficients (the program's
# ns_coeffs, which the run takes unless --ns-coeffs is given); the tuned form neither
is "muon-fsdp program: every NS op eager" "$(grep -c '"kind":"ns"' "$tmp/pf.json") $(grep -c '"kind":"ns".*"launch":"eager"' "$tmp/pf.json")" \
    "$(grep -c '"kind":"ns"' "$tmp/pf.json") $(grep -c '"kind":"ns"' "$tmp/pf.json")"
like "muon-fsdp program: the classic coefficients" "$(grep '"ns_coeffs"' "$tmp/pf.json")" '"ns_coeffs": "jordan"'
"$DMUON" plan --model "$tmp/tiny.json" --gpus 2 --strategy muon-fsdp-tuned --tokens 8 -o "$tmp/pft.json" >/dev/null 2>&1
is "muon-fsdp-tuned program: no eager op, no coefficient set" "$(grep -c 'launch\|ns_coeffs' "$tmp/pft.json")" 0
like "muon-fsdp run: NS jordan" "$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --tokens 8 --steps 1 2>&1)" "(NS jordan)"
like "muon-fsdp run --ns-coeffs overrides the program's" \
    "$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --tokens 8 --steps 1 --ns-coeffs polar-express 2>&1)" "(NS polar-express)"
like "muon-fsdp-tuned run: NS polar-express" "$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp-tuned --tokens 8 --steps 1 2>&1)" "(NS polar-express)"
out2=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 8 --steps 3 --csv "$tmp/run2.csv" 2>&1)
is "dmuon run: two runs give the same losses" "$(cut -d, -f2 "$tmp/run.csv")" "$(cut -d, -f2 "$tmp/run2.csv")"

out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-ddp --tokens 8 --steps 3 --inject-nan 1:1:0 2>&1)
like "NaN gradient: step 1 skipped and the parameter named" "$out" "skipped: non-finite gradient of layers.0.q.weight (rank 1)"
is "NaN gradient: steps 0 and 2 ran" "$(printf '%s\n' "$out" | grep -c ' ok$')" 2

# an overflow inside the reduction (every local gradient finite): caught where the owner reads
# the reduced gradient, the step skipped on every rank and nothing changed (the next step's
# loss equals the skipped one's)
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 8 --steps 3 --inject-overflow 1:0 --csv "$tmp/ovf.csv" 2>&1)
like "reduced-gradient overflow: step 1 skipped, the parameter named" "$out" "skipped: non-finite gradient of layers.0.q.weight (rank "
is "reduced-gradient overflow: steps 0 and 2 ran" "$(printf '%s\n' "$out" | grep -c ' ok$')" 2
is "reduced-gradient overflow: nothing changed (loss of step 2 = loss of step 1)" \
    "$(sed -n 's/^1,\([^,]*\),.*/\1/p' "$tmp/ovf.csv")" "$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/ovf.csv")"
# parameters of an FSDP run on 2 ranks against a one-rank run over the same tokens, summed in the
# same chunks: bit-identical (--save-weights / --check-weights through real_exec_weights)
run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --zero 3 --tokens 8 --steps 3 --save-weights "$tmp/w2.bin" >/dev/null 2>&1
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --zero 3 --tokens 16 --grad-chunks 2 --steps 3 --check-weights "$tmp/w2.bin" 2>&1)
like "muon-fsdp Z3 weights: 2 ranks equal 1 rank bit for bit" "$out" "largest relative Frobenius error 0 "
# HSDP on 4 ranks in 2 shard groups of 2 ("nodes", --gpus-per-node 2): its weights after 3 steps
# equal a one-rank run's that sums the Muon gradients' 4 chunks in 2 groups of 2 first (the
# two-stage reduce's order), bit for bit; Z2 and Z3, the publish leading each step's fetch. The
# replicas form named (run plans as plan does: --balance auto may keep the world forms, whose
# sums run flat over the 4 ranks, below)
for z in 2 3; do
    run 4 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --hsdp --hsdp-muon replicas \
        --hsdp-adamw replicas --gpus-per-node 2 --zero $z \
        --tokens 8 --steps 3 --save-weights "$tmp/wh$z.bin" >"$tmp/hsdp$z.out" 2>&1
    is "hsdp Z$z on 4 ranks (2 shard groups): exit 0" "$?" 0
    out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --zero $z --tokens 32 \
        --grad-chunks 4 --grad-chunk-group 2 --steps 3 --check-weights "$tmp/wh$z.bin" 2>&1)
    like "hsdp Z$z weights: 4 ranks equal 1 rank (chunks summed per shard group) bit for bit" "$out" \
        "largest relative Frobenius error 0 "
done
# the AdamW parameters sharded over all 4 ranks instead (--hsdp-adamw world): the same but for
# their gradients' summation order (flat over the 4 ranks, where the reference groups them by 2)
run 4 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --hsdp --hsdp-adamw world --gpus-per-node 2 \
    --tokens 8 --steps 3 --save-weights "$tmp/whw.bin" >/dev/null 2>&1
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 32 --grad-chunks 4 \
    --grad-chunk-group 2 --steps 3 --check-weights "$tmp/whw.bin" 2>&1)
e=$(printf '%s\n' "$out" | sed -n 's/.*largest relative Frobenius error \([0-9.e+-]*\).*/\1/p' | head -1)
is "hsdp --hsdp-adamw world on 4 ranks: equal to 1 rank to rounding (error $e)" \
    "$(awk -v e="${e:-1}" 'BEGIN { print (e < 1e-6) ? "yes" : "no" }')" yes
# the Muon matrices' pairs over all 4 ranks (--hsdp-muon world, what --balance auto keeps where it
# simulates faster): their gradients summed flat over the 4 ranks, so equal to rounding
run 4 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --hsdp --hsdp-muon world --gpus-per-node 2 \
    --tokens 8 --steps 3 --save-weights "$tmp/whm.bin" >/dev/null 2>&1
is "hsdp --hsdp-muon world on 4 ranks: exit 0" "$?" 0
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 32 --grad-chunks 4 \
    --grad-chunk-group 2 --steps 3 --check-weights "$tmp/whm.bin" 2>&1)
e=$(printf '%s\n' "$out" | sed -n 's/.*largest relative Frobenius error \([0-9.e+-]*\).*/\1/p' | head -1)
is "hsdp --hsdp-muon world on 4 ranks: equal to 1 rank to rounding (error $e)" \
    "$(awk -v e="${e:-1}" 'BEGIN { print (e < 1e-6) ? "yes" : "no" }')" yes
# 6 ranks in 2 shard groups of 3 (parts of unequal size): the same, bit for bit
run 6 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --shard 3 --hsdp-muon replicas \
    --hsdp-adamw replicas --tokens 8 --steps 3 \
    --save-weights "$tmp/wh6.bin" >/dev/null 2>&1
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 48 --grad-chunks 6 \
    --grad-chunk-group 3 --steps 3 --check-weights "$tmp/wh6.bin" 2>&1)
like "hsdp --shard 3 on 6 ranks: equal to 1 rank bit for bit" "$out" "largest relative Frobenius error 0 "
for s in muon-fsdp-tuned muon-ddp muon-ddp-tuned; do
    w="$tmp/w_$(printf '%s' "$s" | tr -c 'a-z0-9' _).bin"
    run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy $s --tokens 8 --steps 3 --save-weights "$w" >/dev/null 2>&1
    out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy $s --tokens 16 --grad-chunks 2 --steps 3 --check-weights "$w" 2>&1)
    like "$s weights: 2 ranks equal 1 rank bit for bit" "$out" "largest relative Frobenius error 0 "
done
# NS under the backward (4 layers): the owners' NS ops sit between backward ops in the compute
# stream, and the weights still equal the one-rank run's
sed 's/"layers": 2/"layers": 4/; s/"count": 2/"count": 4/g' "$tmp/tiny.json" > "$tmp/tiny4.json"
run 2 "$DMUON" run --backend cpu --model "$tmp/tiny4.json" --strategy dmuon --ns-under-backward 1 --max-batch 1 --tokens 8 --steps 3 --save-weights "$tmp/we.bin" >/dev/null 2>&1
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny4.json" --strategy dmuon --ns-under-backward 1 --max-batch 1 --tokens 16 --grad-chunks 2 --steps 3 --check-weights "$tmp/we.bin" 2>&1)
like "dmuon --ns-under-backward 1 weights: 2 ranks equal 1 rank bit for bit" "$out" "largest relative Frobenius error 0 "
"$DMUON" plan --model "$tmp/tiny4.json" --gpus 2 --strategy dmuon --ns-under-backward 1 --max-batch 1 --tokens 8 -o "$tmp/pe.json" >/dev/null 2>&1
is "--ns-under-backward 1: an NS op before the last backward op of rank 0" \
    "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); o=p["ranks"][0]["ops"]; k=[x["kind"] for x in o]; b=max(i for i,x in enumerate(k) if x=="backward"); print("yes" if any(x=="ns" for x in k[:b]) else "no")' "$tmp/pe.json" 2>&1)" yes
# NS on the second compute stream (--ns-under-backward stream): every optimizer op on
# compute-lo, each waiting on its gradients; weights equal to the one-rank run (2 and 4 ranks)
for np in 2 4; do
    run $np "$DMUON" run --backend cpu --model "$tmp/tiny4.json" --strategy dmuon --ns-under-backward stream --max-batch 1 \
        --tokens 8 --steps 3 --save-weights "$tmp/ws$np.bin" >/dev/null 2>&1
    out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny4.json" --strategy dmuon --max-batch 1 \
        --tokens $((8 * np)) --grad-chunks $np --steps 3 --check-weights "$tmp/ws$np.bin" 2>&1)
    like "dmuon --ns-under-backward stream weights: $np ranks equal 1 rank bit for bit" "$out" \
        "largest relative Frobenius error 0 "
done
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny4.json" --strategy dmuon --ns-under-backward stream --max-batch 1 \
    --tokens 16 --grad-chunks 2 --steps 3 --check-weights "$tmp/ws2.bin" 2>&1)
like "dmuon --ns-under-backward stream on 1 rank (NS waits on the backward) equals 2 ranks" "$out" \
    "largest relative Frobenius error 0 "
"$DMUON" plan --model "$tmp/tiny4.json" --gpus 2 --strategy dmuon --ns-under-backward stream --max-batch 1 --tokens 8 \
    -o "$tmp/pst.json" >/dev/null 2>&1
is "--ns-under-backward stream: every optimizer op on compute-lo, every other op elsewhere" \
    "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); o=[x for r in p["ranks"] for x in r["ops"]]; opt=("ns","muon-update","adamw"); print("yes" if o and all((x["stream"]=="compute-lo")==(x["kind"] in opt) for x in o) else "no")' "$tmp/pst.json" 2>&1)" yes
out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-fsdp --tokens 16 --steps 4 --check-weights "$tmp/w2.bin" 2>&1)
e=$(printf '%s\n' "$out" | sed -n 's/.*largest relative Frobenius error \([^ ]*\) .*/\1/p')
is "--check-weights: a different run differs ($e)" "$(awk -v e="$e" 'BEGIN{print (e != "" && e > 1e-6) ? "yes" : "no"}')" yes
# the GPU backend where there is no GPU (or no GPU backend in the build): one line, non-zero
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 0 ]; then
    out=$(run 2 "$DMUON" run --backend gpu --model "$tmp/tiny.json" --tokens 8 --steps 1 2>&1 >/dev/null)
    rc=$?
    is "--backend gpu without a GPU: exits non-zero" "$([ $rc -ne 0 ] && echo yes)" yes
    is "--backend gpu without a GPU: one line of cause" "$(printf '%s\n' "$out" | grep -c '^dmuon run')" 1
    is "--backend gpu without a GPU: it names the cause" \
        "$(printf '%s\n' "$out" | grep -cE 'no usable CUDA device|GPU side is not in this build|cannot load the GPU side')" 1
else
    for k in 1 2 3; do tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP --backend gpu without a GPU: this machine has one"; done
fi

out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy dmuon --tokens 8 --steps 2 --timeout 1 --inject-stall 1:1:4 2>&1)
rc=$?
like "a stalled peer: --timeout gives up with the cause" "$out" "no progress for 1 s (--timeout)"
is "a stalled peer: the run exits non-zero" "$([ $rc -ne 0 ] && echo yes)" yes
# checkpoints: a run killed between steps and resumed ends bit for bit where an
# uninterrupted run ends (same losses, same final state files)
R="$DMUON run --backend cpu --model $tmp/tiny.json --strategy muon-fsdp --tokens 8"
run 2 $R --steps 6 --checkpoint "$tmp/ck_full" --csv "$tmp/full.csv" >/dev/null 2>&1
"$MPIRUN" --oversubscribe -np 2 $R --steps 6 --checkpoint "$tmp/ck" --inject-stall 3:0:60 --timeout 120 >/dev/null 2>&1 &
pid=$! # mpirun itself (not a subshell), so that killing it ends the run
i=0
while [ $i -lt 300 ] && ! grep -q "step 3 " "$tmp/ck/latest" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill $pid 2>/dev/null
wait $pid 2>/dev/null
like "checkpoint: the killed run had saved step 3" "$(cat "$tmp/ck/latest" 2>/dev/null)" "dmuon-checkpoint-2 step 3 "
out=$(run 2 $R --steps 6 --checkpoint "$tmp/ck" --resume --csv "$tmp/res.csv" 2>&1)
like "checkpoint: resumed after step 2" "$out" "resumed from $tmp/ck after step 2"
is "checkpoint: resumed losses equal the uninterrupted run's" "$(grep '^[345],' "$tmp/res.csv" | cut -d, -f1,2)" \
    "$(grep '^[345],' "$tmp/full.csv" | cut -d, -f1,2)"
ok "checkpoint: final state of rank 0 bit-identical" cmp "$tmp/ck/step-6/rank-0.bin" "$tmp/ck_full/step-6/rank-0.bin"
ok "checkpoint: final state of rank 1 bit-identical" cmp "$tmp/ck/step-6/rank-1.bin" "$tmp/ck_full/step-6/rank-1.bin"
out=$(run 2 $R --seed 7 --steps 6 --checkpoint "$tmp/ck" --resume 2>&1)
like "checkpoint: resuming another run's checkpoint is refused" "$out" "the checkpoint is of another run"
# resuming with other options is refused, naming each one
out=$(run 2 $R --steps 7 --checkpoint "$tmp/ck" --resume --lr-muon 0.05 --grad-chunks 2 2>&1)
rc=$?
like "checkpoint: another --lr-muon is named" "$out" "--lr-muon 0.02 (this run: 0.05)"
like "checkpoint: another --grad-chunks is named" "$out" "--grad-chunks 1 (this run: 2)"
is "checkpoint: resuming with other options exits non-zero" "$([ $rc -ne 0 ] && echo yes)" yes
out=$(run 2 $R --steps 7 --checkpoint "$tmp/ck" --resume --ns-coeffs polar-express 2>&1)
like "checkpoint: other --ns-coeffs are named" "$out" "other --ns-coeffs"
# damaged rank files are refused by name, before anything is installed (each on a copy)
damaged() { # damaged NAME: a fresh copy of the final checkpoint in $tmp/NAME
    rm -rf "$tmp/$1"; cp -r "$tmp/ck_full" "$tmp/$1"; }
resume_from() { run 2 $R --steps 7 --checkpoint "$tmp/$1" --resume 2>&1; }
damaged ckr # matrix 0's owned range end (offset 18 + 6*8 + 16) set to 1e9
printf '\000\312\232\073\000\000\000\000' | dd of="$tmp/ckr/step-6/rank-1.bin" bs=1 seek=82 conv=notrunc 2>/dev/null
out=$(resume_from ckr); rc=$?
like "checkpoint: a corrupted owned range is refused by name" "$out" \
    "step-6/rank-1.bin: matrix 0 (layers.0.q.weight): owned range [0, 1000000000) outside its 256 elements"
is "checkpoint: ... and the run exits 1, no crash ($rc)" "$rc" 1
damaged ckb # one bit of a weight
printf '\001' | dd of="$tmp/ckb/step-6/rank-0.bin" bs=1 seek=300 conv=notrunc 2>/dev/null
like "checkpoint: a flipped bit is found by the checksum" "$(resume_from ckb)" "step-6/rank-0.bin: checksum mismatch"
damaged cks # rank files swapped
mv "$tmp/cks/step-6/rank-0.bin" "$tmp/cks/x"; mv "$tmp/cks/step-6/rank-1.bin" "$tmp/cks/step-6/rank-0.bin"
mv "$tmp/cks/x" "$tmp/cks/step-6/rank-1.bin"
like "checkpoint: swapped rank files are refused" "$(resume_from cks)" "step-6/rank-0.bin: holds rank 1 of 2 ranks' state"
damaged ckg # trailing garbage
printf 'garbage' >>"$tmp/ckg/step-6/rank-1.bin"
like "checkpoint: trailing garbage is refused" "$(resume_from ckg)" "step-6/rank-1.bin: "
like "checkpoint: ... saying why" "$(resume_from ckg)" "(truncated, or data after its end)"
# a run whose every step is skipped has nothing to show: non-zero
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --strategy muon-ddp --tokens 8 --steps 1 --inject-nan 0:1:0 2>&1)
rc=$?
like "every step skipped: said" "$out" "no step was kept: all 1 skipped"
is "every step skipped: exit 1" "$rc" 1
# fault injection naming a rank or parameter that does not exist is refused, not ignored
for f in "--inject-nan 0:2:0|--inject-nan: rank 2 does not exist (ranks 0..1)" \
         "--inject-nan 0:1:6|--inject-nan: parameter 6 does not exist (tiny has 6: 0..5)" \
         "--inject-overflow 0:99|--inject-overflow: parameter 99 does not exist" \
         "--inject-stall 0:5:1|--inject-stall: rank 5 does not exist"; do
    opt=${f%%|*}; want=${f#*|}
    out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --tokens 8 --steps 1 $opt 2>&1)
    rc=$?
    like "$opt: refused" "$out" "$want"
    is "$opt: exit 1" "$rc" 1
done
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --tokens 8 --steps 2 --compare muon-ddp,adamw 2>&1)
like "--compare: a comparison table" "$out" "# comparison"
is "--compare: three strategies run" "$(printf '%s\n' "$out" | grep -c '^# mean over')" 3
like "--compare: muon-ddp row against dmuon" "$out" "  muon-ddp "
is "--compare with an unknown strategy exits 2" "$(status_of run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --tokens 8 --steps 1 --compare sgd)" 2
out=$(run 1 "$DMUON" run --backend cpu --model "$DM_SRCDIR/models/llama-3.2-3b.json" --tokens 1000000 --steps 1 2>&1)
like "a model that cannot fit the CPU backend: a clear message" "$out" "the CPU backend needs about"
is "dmuon run without --model exits 2" "$(status_of "$DMUON" run --backend cpu)" 2
is "dmuon run --backend bogus exits 2" "$(status_of "$DMUON" run --backend bogus --model "$tmp/tiny.json")" 2
is "dmuon run on an unknown model exits 1" "$(status_of "$DMUON" run --backend cpu --model no-such-model)" 1
like "dmuon run --help names the plan options" "$("$DMUON" run --help)" "--strategy"
"$DMUON" plan --model "$tmp/tiny.json" --gpus 3 --strategy dmuon --tokens 8 -o "$tmp/p3.json" >/dev/null 2>&1
ok "dmuon plan -o writes a program" test -s "$tmp/p3.json"
if [ -s "$tmp/p3.json" ]; then
    out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --program "$tmp/p3.json" --steps 1 2>&1)
    like "a 3-rank program on 2 ranks is refused" "$out" "the program is for 3 ranks; this run has 2"
    out=$(run 3 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --program "$tmp/p3.json" --steps 2 2>&1)
    is "a saved program runs (--program)" "$(printf '%s\n' "$out" | grep -c ' ok$')" 2
    # a program whose broadcast root differs on one rank: refused by every rank with the reason,
    # before any collective (it used to hang until --timeout)
    awk '/"rank": 1,/ {r = 1} r && !done && /"kind":"broadcast"/ && /"root":0/ {sub(/"root":0/, "\"root\":1"); done = 1} {print}' \
        "$tmp/p3.json" >"$tmp/p3root.json"
    out=$(run 3 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --program "$tmp/p3root.json" --steps 1 --timeout 30 2>&1)
    rc=$?
    like "a program with a root that differs on one rank is refused" "$out" "dmuon run: program: rank 1 op"
    like "... naming the mismatch" "$out" "is broadcast (group"
    is "... exit 1" "$rc" 1
    # --program names its model: found by that name (the models folder), or given as --model,
    # which must then be the program's
    like "--program without --model: a model not in the models folder needs --model" \
        "$(run 3 "$DMUON" run --backend cpu --program "$tmp/p3.json" --steps 1 2>&1)" "give --model FILE if it is not a bundled one"
    mkdir -p "$tmp/models" && cp "$tmp/tiny.json" "$tmp/models/tiny.json"
    out=$(DMUON_MODELS="$tmp/models" run 3 "$DMUON" run --backend cpu --program "$tmp/p3.json" --steps 1 2>&1)
    is "--program without --model runs the model the program names" "$(printf '%s\n' "$out" | grep -c ' ok$')" 1
    sed 's/"name": "tiny"/"name": "tiny2"/' "$tmp/tiny.json" >"$tmp/tiny2.json"
    like "--model other than the program's is refused" \
        "$(run 3 "$DMUON" run --backend cpu --model "$tmp/tiny2.json" --program "$tmp/p3.json" --steps 1 2>&1)" \
        "is 'tiny2'; the program is for 'tiny'"
fi
# the program's forward/backward ops carry their kernels (program.h's works): a program whose
# work is not the model's at the run's tokens is refused before the first step, naming the op
# and the kernel (the executor runs exactly the kernels the simulator prices)
"$DMUON" plan --model "$tmp/tiny.json" --gpus 2 --strategy dmuon --tokens 8 -o "$tmp/pw.json" >/dev/null 2>&1
sed '0,/"kind":"gemm","op":"fwd","m":8,/s//"kind":"gemm","op":"fwd","m":9,/' "$tmp/pw.json" >"$tmp/pw_bad.json"
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny.json" --program "$tmp/pw_bad.json" --steps 1 2>&1)
rc=$?
like "a program whose work is another's is refused" "$out" "(forward, layer 0): kernel 0 of its work is gemm fwd 9x16x16"
like "... naming what the model's is at the run's tokens" "$out" "the model's at 8 tokens per rank and seq-len 8, layer passes on as the program records, is gemm fwd 8x16x16"
is "... exit 1" "$rc" 1
# every kernel kind of the workload end to end (a second stream with its table and attention,
# grouped-query and cross attention, MoE routing, a lookup) on 2 ranks: the loss falls
out=$(run 2 "$DMUON" run --backend cpu --model "$DM_SRCDIR/tests/data/arch_cpu.json" --strategy dmuon --tokens 16 \
    --seq-len 8 --steps 3 --csv "$tmp/arch.csv" 2>&1)
is "the architecture model: three ok steps" "$(printf '%s\n' "$out" | grep -c ' ok$')" 3
l0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/arch.csv"); l2=$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/arch.csv")
is "the architecture model: the loss falls ($l0 -> $l2)" "$(awk -v a="$l0" -v b="$l2" 'BEGIN{print (b < a) ? "yes" : "no"}')" yes
like "the run prints its decoder layers' mean forward and backward" "$out" "# per layer of stack layers (2 layers, rank 0, step 2): forward "
# run plans as plan and sim do: --balance auto (the default) simulates its candidates and keeps
# the faster (milp here, by 9%), and the program run is the one `dmuon plan` reports
ph=$("$DMUON" plan --model "$DM_SRCDIR/tests/data/arch_cpu.json" --gpus 2 --cluster h200 --tokens 16 2>&1 |
    sed -n 's/.*hash \([0-9a-f]*\).*/\1/p')
out=$(run 2 "$DMUON" run --backend cpu --model "$DM_SRCDIR/tests/data/arch_cpu.json" --cluster h200 --tokens 16 --steps 1 2>&1)
like "run --balance auto: the program dmuon plan reports ($ph)" "$out" "# program ${ph:-none}: "
like "... the faster candidate's (milp)" "$out" "balance=milp "
out=$(run 2 "$DMUON" run --backend cpu --model "$DM_SRCDIR/tests/data/arch_cpu.json" --tokens 16 --seq-len 5 --steps 1 2>&1)
like "--tokens not a multiple of --seq-len is refused" "$out" "must be a multiple of --seq-len"
# a HuggingFace config.json given to run --model: a tiny gpt-oss (experts with biases, the
# router's bias, attention sinks) imported and run on 2 ranks, every step ok, the loss falling
cat >"$tmp/tiny-gptoss.json" <<'JSON'
{"model_type": "gpt_oss", "hidden_size": 32, "intermediate_size": 16, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 100,
 "num_local_experts": 4, "num_experts_per_tok": 2, "tie_word_embeddings": false}
JSON
out=$(run 2 "$DMUON" run --backend cpu --model "$tmp/tiny-gptoss.json" --strategy dmuon --tokens 16 --steps 3 \
    --csv "$tmp/gptoss.csv" 2>&1)
is "run --model CONFIG.json (a tiny gpt-oss): three ok steps on 2 ranks" "$(printf '%s\n' "$out" | grep -c ' ok$')" 3
l0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/gptoss.csv"); l2=$(sed -n 's/^2,\([^,]*\),.*/\1/p' "$tmp/gptoss.csv")
is "run --model CONFIG.json: the loss falls ($l0 -> $l2)" "$(awk -v a="$l0" -v b="$l2" 'BEGIN{print (b < a) ? "yes" : "no"}')" yes

# --ns-split: one matrix (1024 x 128, stored tall) whose NS alone outlasts the others' mean load on
# a slow GPU (0.1 TFLOP/s, the roofline table) is split over the 4 ranks of a node: per rank its
# rows slice, the Gram all-reduced each iteration. The executor runs the plan's program; after 3
# steps the weights match a one-rank run over the ranks' tokens (whole NS): the largest difference,
# rounding, is on the split matrix.
cat >"$tmp/split.json" <<'JSON'
{"format": "dmuon-model-1", "name": "splitty", "source": "real_cpu.sh",
 "stacks": [{"name": "layers", "layers": 2}, {"name": "head", "layers": 1}],
 "tensors": [
  {"name": "layers.*.q.weight", "shape": [32, 32], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.up.weight", "shape": [64, 32], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.norm.weight", "shape": [32], "count": 2, "stack": "layers", "role": "adamw"},
  {"name": "head.*.proj.weight", "shape": [1024, 128], "count": 1, "stack": "head", "role": "muon"}
 ]}
JSON
printf 'name = slow\ngpu = A800-SXM4-80GB\ngpu_bf16_tflops = 0.1\ngpu_fp16_tflops = 0.1\ngpus_per_node = 4\nnvlink_GBps = 200\nnics_per_node = 4\nnic_Gbps = 200\n' >"$tmp/slow.cluster"
roof="$DM_SRCDIR/traces/costs/roofline.csv"
"$DMUON" plan --model "$tmp/split.json" --gpus 4 --cluster "$tmp/slow.cluster" --costs "$roof" --tokens 8 --ns-split 4 \
    -o "$tmp/split-p.json" >/dev/null 2>&1
is "--ns-split 4: the split matrix's 10 stages on each of 4 ranks, 5 gram all-reduces" \
    "$(grep -o '"stage":[0-9]*' "$tmp/split-p.json" | wc -l) $(grep -o '"payload":"gram"' "$tmp/split-p.json" | wc -l)" "36 20"
# split_run NP PROGRAM TOKENS WHAT: NP ranks run PROGRAM 3 steps (every step ok), then one rank over
# their tokens (whole NS) checks the weights: the largest difference, rounding, on the split matrix
split_run() {
    what=$4
    run "$1" "$DMUON" run --backend cpu --program "$2" --model "$tmp/split.json" --tokens "$3" --steps 3 \
        --save-weights "$tmp/ws.bin" >"$tmp/split.out" 2>&1
    is "--ns-split, $what: the CPU executor runs the program, three ok steps" "$(grep -c ' ok$' "$tmp/split.out")" 3
    out=$(run 1 "$DMUON" run --backend cpu --model "$tmp/split.json" --cluster "$tmp/slow.cluster" \
        --tokens $(($1 * $3)) --grad-chunks "$1" --steps 3 --check-weights "$tmp/ws.bin" 2>&1)
    err=$(printf '%s\n' "$out" | sed -n 's/.*largest relative Frobenius error \([^ ]*\) (\(.*\))/\1 \2/p')
    set -- $err
    is "--ns-split, $what: weights against one rank's whole NS: the split matrix differs by rounding ($err)" \
        "$(awk -v e="$1" 'BEGIN{print (e > 0 && e < 1e-5) ? "yes" : "no"}') $2" "yes head.0.proj.weight"
}
split_run 4 "$tmp/split-p.json" 8 "4 ranks"
# a split run checkpointed after step 2 and resumed ends bit for bit as the uninterrupted one
R="$DMUON run --backend cpu --program $tmp/split-p.json --model $tmp/split.json --tokens 8"
run 4 $R --steps 4 --save-weights "$tmp/sfull.bin" >/dev/null 2>&1
run 4 $R --steps 2 --checkpoint "$tmp/sck" >/dev/null 2>&1
run 4 $R --steps 4 --checkpoint "$tmp/sck" --resume --save-weights "$tmp/sres.bin" >"$tmp/sres.out" 2>&1
like "--ns-split: resumed from the step-2 checkpoint" "$(cat "$tmp/sres.out")" "resumed from $tmp/sck after step 1"
is "--ns-split: the resumed run's weights equal the uninterrupted run's" "$(cmp "$tmp/sfull.bin" "$tmp/sres.bin" && echo same)" same
# an overflow in the split matrix's reduced gradient (element size/2: part 2 of 4): the member that
# holds that part catches it and every rank skips the step
out=$(run 4 $R --steps 3 --inject-overflow 1:6 2>&1)
like "--ns-split: a non-finite part of a split gradient: the step skipped, its member named" "$out" \
    "step 1 skipped: non-finite gradient of head.0.proj.weight (rank 2)"
# 8 ranks (2 nodes of 4): the split runs on a reserved block, the last node's 4 ranks, which run
# no other NS; the balance places the other matrices on ranks 0-3
"$DMUON" plan --model "$tmp/split.json" --gpus 8 --cluster "$tmp/slow.cluster" --costs "$roof" --tokens 4 --ns-split 4 \
    -o "$tmp/split8.json" >/dev/null 2>&1
is "--ns-split 4 on 8 ranks: whole NS ops on ranks 0-3 only, the split's gram all-reduces on ranks 4-7" \
    "$(awk '/"rank": /{r=$2+0} /"kind":"ns"/ && !/"parts"/ {w = w (r >= 4 ? "x" : "")} /"payload":"gram"/ {g[r]++}
            END {for (k = 0; k < 8; k++) printf "%d", g[k] + 0; print " " w}' "$tmp/split8.json")" "00005555 "
split_run 8 "$tmp/split8.json" 4 "8 ranks, a reserved block"
out=$("$DMUON" plan --model "$tmp/split.json" --gpus 8 --cluster "$tmp/slow.cluster" --ns-split 8 2>&1)
like "--ns-split wider than a node is refused" "$out" "a split runs on the GPUs of one node, and a node has 4"
out=$("$DMUON" plan --model "$tmp/split.json" --gpus 8 --cluster "$tmp/slow.cluster" --ns-split 2 --hsdp 2>&1)
like "--ns-split with --hsdp is refused" "$out" "--ns-split works with the flat dmuon plan, not with --hsdp"
out=$("$DMUON" plan --model "$tmp/split.json" --gpus 8 --ns-split 1 2>&1)
like "--ns-split 1 is refused" "$out" "--ns-split: expected ranks per split matrix"

# --publish: the first layers' fetch at the end of the step (after their updates, into the staged
# weights the step commits). The forward reads the same weights either way, so on 4 ranks the
# weights after 4 steps are bit for bit those without it, under every strategy that fetches; so
# with a step skipped (a NaN in a published layer's gradient, and in the other layer's), and after
# a checkpoint and resume
for s in dmuon adamw muon-rr muon-fsdp; do
    for p in 0 1 2; do
        "$DMUON" plan --model "$tmp/tiny.json" --gpus 4 --strategy $s --tokens 8 --publish $p -o "$tmp/pub-$s-$p.json" \
            >/dev/null 2>&1
    done
    is "--publish 1, $s: the first layer's fetch ops marked publish, at the end of each rank's list" \
        "$(awk '/"rank": /{seen = 0} /"id":/ {if (/"publish":1/) {n++; seen = 1; if (/"layer":[1-9]/) bad++} else if (seen) bad++}
                END {print (n > 0 && !bad) ? "yes" : n " " bad}' "$tmp/pub-$s-1.json")" yes
    for p in 0 1 2; do
        for inj in none 1:2:0 2:0:4; do
            a=; [ "$inj" != none ] && a="--inject-nan $inj"
            run 4 "$DMUON" run --backend cpu --program "$tmp/pub-$s-$p.json" --model "$tmp/tiny.json" --tokens 8 --steps 4 \
                $a --save-weights "$tmp/pw-$s-$p-$inj.bin" >"$tmp/pub.out" 2>&1
            [ "$p" = 0 ] && continue
            is "--publish $p, $s, NaN ${inj}: the same weights as without (steps ok $(grep -c ' ok$' "$tmp/pub.out"))" \
                "$(cmp "$tmp/pw-$s-0-$inj.bin" "$tmp/pw-$s-$p-$inj.bin" && echo same)" same
        done
    done
done
for p in 0 2; do # NS under the backward (an update of layer 1 listed before the backward of layer 0)
    "$DMUON" plan --model "$tmp/tiny.json" --gpus 4 --tokens 8 --publish $p --ns-under-backward 1 -o "$tmp/pubn-$p.json" \
        >/dev/null 2>&1
    run 4 "$DMUON" run --backend cpu --program "$tmp/pubn-$p.json" --model "$tmp/tiny.json" --tokens 8 --steps 4 \
        --inject-nan 2:0:4 --save-weights "$tmp/pwn-$p.bin" >"$tmp/pub.out" 2>&1
done
is "--publish 2 with --ns-under-backward 1, a step skipped: the same weights as without (steps ok $(grep -c ' ok$' "$tmp/pub.out"))" \
    "$(cmp "$tmp/pwn-0.bin" "$tmp/pwn-2.bin" && echo same)" same
for p in 0 1; do # HSDP (shard groups of 2): the stages' fetch published
    "$DMUON" plan --model "$tmp/tiny.json" --gpus 4 --hsdp --shard 2 --tokens 8 --publish $p -o "$tmp/pubh-$p.json" >/dev/null 2>&1
    run 4 "$DMUON" run --backend cpu --program "$tmp/pubh-$p.json" --model "$tmp/tiny.json" --tokens 8 --steps 4 \
        --inject-nan 2:1:0 --save-weights "$tmp/pwh-$p.bin" >"$tmp/pub.out" 2>&1
done
is "--publish 1, HSDP, a step skipped: the same weights as without (steps ok $(grep -c ' ok$' "$tmp/pub.out"))" \
    "$(cmp "$tmp/pwh-0.bin" "$tmp/pwh-1.bin" && echo same)" same
R="$DMUON run --backend cpu --program $tmp/pub-dmuon-1.json --model $tmp/tiny.json --tokens 8"
run 4 $R --steps 2 --checkpoint "$tmp/pck" >/dev/null 2>&1
run 4 $R --steps 4 --checkpoint "$tmp/pck" --resume --save-weights "$tmp/pres.bin" >"$tmp/pres.out" 2>&1
is "--publish: resumed from a checkpoint, the weights of the uninterrupted run" \
    "$(grep -c 'resumed from' "$tmp/pres.out") $(cmp "$tmp/pw-dmuon-1-none.bin" "$tmp/pres.bin" && echo same)" "1 same"
# --layer-passes: a program records them ("layer_passes": 1); one without the field (written
# before them) or planned --layer-passes off has none, and each runs as its program says: the
# arch model's plans on 2 ranks, the weights the same with and without the passes (they are cost
# only), and the old program's with the field removed the same as --layer-passes off's
A="$DM_SRCDIR/tests/data/arch_cpu.json"
"$DMUON" plan --model "$A" --gpus 2 --tokens 16 -o "$tmp/lp-on.json" >/dev/null 2>&1
"$DMUON" plan --model "$A" --gpus 2 --tokens 16 --layer-passes off -o "$tmp/lp-off.json" >/dev/null 2>&1
grep -v '"layer_passes"' "$tmp/lp-on.json" > "$tmp/lp-bad.json"
is "a program records its layer passes; --layer-passes off's (the old format) has neither field nor kernels" \
    "$(grep -c '"layer_passes": 1' "$tmp/lp-on.json") $(grep -c '"layer_passes"' "$tmp/lp-off.json") $(grep -c '"op":"\(glu\|resid\|act\|rope\)' "$tmp/lp-off.json")" "1 0 0"
ok "the passes are kernels of the program" grep -q '"op":"resid"' "$tmp/lp-on.json"
for v in on off; do
    run 2 "$DMUON" run --backend cpu --program "$tmp/lp-$v.json" --model "$A" --tokens 16 --steps 2 \
        --save-weights "$tmp/lpw-$v.bin" >"$tmp/lp-$v.out" 2>&1
done
is "with and without the layer passes each program runs (steps ok)" \
    "$(grep -c ' ok$' "$tmp/lp-on.out") $(grep -c ' ok$' "$tmp/lp-off.out")" "2 2"
is "the passes change no weight (cost only)" "$(cmp "$tmp/lpw-on.bin" "$tmp/lpw-off.bin" && echo same)" same
like "a program whose kernels hold passes its header does not record is refused" \
    "$(run 2 "$DMUON" run --backend cpu --program "$tmp/lp-bad.json" --model "$A" --tokens 16 --steps 1 2>&1)" \
    "layer passes off as the program records"
like "--layer-passes takes on or off" "$("$DMUON" plan --model "$A" --gpus 2 --layer-passes maybe 2>&1)" \
    "--layer-passes: expected on or off, found 'maybe'"
like "validate's --layer-passes says it alike" "$("$DMUON" validate --layer-passes maybe 2>&1)" \
    "--layer-passes: expected on or off, found 'maybe'"
out=$("$DMUON" plan --model "$tmp/tiny.json" --gpus 4 --strategy muon-fsdp --zero 3 --publish 1 2>&1)
like "--publish with --zero 3 is refused" "$out" "--publish keeps the first layers' weights"
out=$("$DMUON" plan --model "$tmp/tiny.json" --gpus 4 --publish 3 2>&1)
like "--publish past the layers fetched before the forward is refused" "$out" "--publish 3: only the layers fetched before any forward compute"
tap_end
