#!/bin/sh
# compare_validate.sh: `dmuon validate` end to end on the CPU backend (a tiny model, 1 and 2
# ranks): every case runs the executor and the simulator on one saved plan and is compared; the
# table, validate.csv, per-case traces and the plot of one case are written; --max-error decides
# the exit status; --dry-run prints the commands. (CPU times against an H200 model: the errors
# are large by design here; the GPU machine is where the accuracy is measured.)
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then echo "1..0 # SKIP no mpirun"; exit 0; fi
if ! "$DMUON" run --help >/dev/null 2>&1; then echo "1..0 # SKIP dmuon run not in this build"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# As in real_cpu.sh: the executor processes (MPI) run without leak checking in a sanitizer build
# (Open MPI leaks in components it has unloaded, which no suppression can name).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
tmp=$(mktemp -d /tmp/dmuon-validate-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
cat >"$tmp/tiny.json" <<'JSON'
{"format": "dmuon-model-1", "name": "tiny", "source": "compare_validate.sh",
 "stacks": [{"name": "layers", "layers": 2}],
 "tensors": [
  {"name": "layers.*.q.weight", "shape": [32, 32], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.up.weight", "shape": [64, 32], "count": 2, "stack": "layers", "role": "muon"},
  {"name": "layers.*.norm.weight", "shape": [32], "count": 2, "stack": "layers", "role": "adamw"}
 ]}
JSON
V="$DMUON validate --models $tmp/tiny.json --backend cpu --tokens 16 --steps 2 --mpirun $MPIRUN"

out=$($V --strategies dmuon,muon-ddp --overlaps interleave --gpus 1,2 --out "$tmp/v" --max-error 1000000 2>&1)
rc=$?
is "4 cases run and compare (exit 0 under a huge --max-error)" "$rc" 0
[ "$rc" != 0 ] && printf '%s\n' "$out" | sed 's/^/#   /' | tail -20
like "summary line" "$out" "validate: 4 cases, 4 ran, 0 failed"
is "validate.csv: 5 phases x 4 cases" "$(grep -c ',dmuon,\|,muon-ddp,' "$tmp/v/validate.csv")" 20
ok "per-case program and traces" test -s "$tmp/v/tiny.dmuon.interleave.2gpu/program.json" -a -s "$tmp/v/tiny.dmuon.interleave.2gpu/real.csv" -a -s "$tmp/v/tiny.dmuon.interleave.2gpu/sim.csv"
like "the plotted case is the dmuon case on 2 GPUs" "$out" "plot: case 3 tiny.dmuon.interleave.2gpu"
ok "timeline data written" test -s "$tmp/v/plot/timeline_measured.dat" -a -s "$tmp/v/plot/compare.gp"
# The saved traces compare the same way through dmuon compare.
out2=$($DMUON compare "$tmp/v/tiny.dmuon.interleave.2gpu/sim.csv" "$tmp/v/tiny.dmuon.interleave.2gpu/real.csv" 2>&1)
like "dmuon compare reads the saved traces, every op matched" "$out2" "0 only predicted, 0 only measured, 0 with different kinds"

# validate.csv is written after every case (so that a call cut short keeps what it measured): read
# while the call still runs, it holds the cases done so far, five whole rows each.
$V --strategies dmuon,muon-ddp --overlaps interleave,none --gpus 1 --out "$tmp/p" --max-error 1000000 >/dev/null 2>&1 &
vpid=$!
i=0
while [ $i -lt 3000 ] && [ ! -s "$tmp/p/validate.csv" ] && kill -0 "$vpid" 2>/dev/null; do sleep 0.02; i=$((i + 1)); done
cp "$tmp/p/validate.csv" "$tmp/partial.csv" 2>/dev/null
running=0
kill -0 "$vpid" 2>/dev/null && running=1
wait "$vpid"
rows=$(grep -c ',tiny\.json,\|/tiny\.json,' "$tmp/partial.csv" 2>/dev/null || echo 0)
if [ "$running" = 1 ]; then
    ok "validate.csv while the call runs: whole cases so far ($rows rows, fewer than 20)" \
        test "$rows" -ge 5 -a $((rows % 5)) -eq 0 -a "$rows" -lt 20
else
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - validate.csv while the call runs # SKIP the call ended before its first case was seen"
fi
is "validate.csv at the end: 4 cases" "$(grep -c ',tiny\.json,\|/tiny\.json,' "$tmp/p/validate.csv")" 20

# A run whose log names a GPU other than the cluster's (a launcher that says so before it runs the
# ranks) is compared all the same and flagged as a comparison across GPUs.
cat >"$tmp/other-gpu-launcher" <<EOF
#!/bin/sh
echo "# gpu: NVIDIA H100 80GB HBM3 (device 0 of rank 0), NCCL 22803"
exec $MPIRUN "\$@"
EOF
chmod +x "$tmp/other-gpu-launcher"
out=$($DMUON validate --models "$tmp/tiny.json" --backend cpu --tokens 16 --steps 2 --mpirun "$tmp/other-gpu-launcher" \
    --cluster h200 --strategies dmuon --overlaps none --gpus 2 --out "$tmp/o" 2>&1)
like "a run on another GPU than the cluster's is said to be" "$out" "note: 1 case ran on NVIDIA H100 80GB HBM3, not on the cluster's H200-SXM"
like "  ... and compared all the same" "$out" "validate: 1 cases, 1 ran, 0 failed"

is "--max-error 5 fails (CPU against an H200 model)" "$(status_of $V --strategies dmuon --overlaps none --gpus 1 --out "$tmp/w" --max-error 5)" 1
out=$($V --strategies dmuon --overlaps none,interleave --gpus 2 --out "$tmp/d" --dry-run 2>&1)
like "--dry-run prints the mpirun command" "$out" "-np 2 --oversubscribe"
# A case the executor refuses for want of memory (the CPU backend's check before it allocates:
# Qwen2.5-72B whole on one rank) is reported as not fitting, not as a failed run.
out=$($DMUON validate --models qwen2.5-72b --backend cpu --tokens 16 --steps 1 --strategies adamw --overlaps none \
      --gpus 1 --mpirun "$MPIRUN" --out "$tmp/nf" 2>&1)
is "a run stopped for want of memory: exit 0 (no case failed)" "$?" 0
like "  ... reported as not fitting" "$out" "does not fit (stopped for want of memory"
like "  ... the summary counts it, not as a failure" "$out" "validate: 1 cases, 0 ran, 0 failed, 1 do not fit in memory"
# validate plans each case as dmuon plan does (--balance auto simulates its candidates: milp,
# 7% faster, on this model at 2 GPUs), so the program it runs is the one plan reports and sim predicts
A="$DM_SRCDIR/tests/data/arch_cpu.json"
$DMUON validate --models "$A" --backend cpu --tokens 16 --gpus 2 --strategies dmuon --overlaps interleave \
    --out "$tmp/vp" --dry-run >/dev/null 2>&1
$DMUON plan --model "$A" --gpus 2 --tokens 16 -o "$tmp/vp-plan.json" >/dev/null 2>&1
ok "validate's program of a case is dmuon plan's, byte for byte" cmp -s "$tmp/vp/arch_cpu.dmuon.interleave.2gpu/program.json" "$tmp/vp-plan.json"
like "... the faster candidate's (milp)" "$(cat "$tmp/vp/arch_cpu.dmuon.interleave.2gpu/program.json" 2>&1)" "balance=milp "
is "bad strategy is a usage error" "$(status_of $DMUON validate --strategies nope)" 2
tap_end
