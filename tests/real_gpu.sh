#!/bin/sh
# real_gpu.sh: the GPU backend of `dmuon run` on the GPUs of this machine (one rank per GPU, at
# most 2): every strategy runs on a tiny model; dmuon and muon-ddp, the same math through
# different collectives and owners, give the same losses to a bf16-level tolerance; a NaN
# gradient skips the step on every rank; a stalled peer makes --timeout abort NCCL and exit
# non-zero. Skips where there is no GPU (CI). NCCL's NVLink multicast stays off.
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
cat >"$tmp/tiny.json" <<'JSON'
{"format": "dmuon-model-1", "name": "tiny", "source": "real_gpu.sh",
 "stacks": [{"name": "embed", "layers": 1}, {"name": "layers", "layers": 3}],
 "tensors": [
  {"name": "embed.weight", "shape": [512, 128], "count": 1, "stack": "embed", "role": "adamw"},
  {"name": "layers.*.q.weight", "shape": [128, 128], "count": 3, "stack": "layers", "role": "muon"},
  {"name": "layers.*.up.weight", "shape": [384, 128], "count": 3, "stack": "layers", "role": "muon"},
  {"name": "layers.*.down.weight", "shape": [128, 384], "count": 3, "stack": "layers", "role": "muon"},
  {"name": "layers.*.norm.weight", "shape": [128], "count": 3, "stack": "layers", "role": "adamw"}
 ]}
JSON
R="$DMUON run --backend gpu --model $tmp/tiny.json --tokens 256 --steps 4 --timeout 30"
for s in dmuon muon-ddp muon-fsdp muon-rr adamw; do
    out=$("$MPIRUN" -np $np --bind-to none $R --strategy $s --csv "$tmp/$s.csv" 2>&1)
    rc=$?
    is "gpu $s on $np rank(s): 4 ok steps (exit $rc)" "$rc/$(printf '%s\n' "$out" | grep -c ' ok$')" "0/4"
done
l_d=$(sed -n 's/^3,\([^,]*\),.*/\1/p' "$tmp/dmuon.csv"); l_m=$(sed -n 's/^3,\([^,]*\),.*/\1/p' "$tmp/muon-ddp.csv")
is "gpu: dmuon and muon-ddp losses agree within 1e-3 ($l_d, $l_m)" \
    "$(awk -v a="$l_d" -v b="$l_m" 'BEGIN{d=a-b; if (d<0) d=-d; print (a != "" && d <= 1e-3*b) ? "yes" : "no"}')" yes
l0=$(sed -n 's/^0,\([^,]*\),.*/\1/p' "$tmp/dmuon.csv")
is "gpu: the loss falls" "$(awk -v a="$l0" -v b="$l_d" 'BEGIN{print (b < a) ? "yes" : "no"}')" yes
out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --steps 3 --inject-nan 1:$((np - 1)):1 2>&1)
like "gpu: a NaN gradient skips the step and names it" "$out" "skipped: non-finite gradient of layers.0.q.weight (rank $((np - 1)))"
if [ "$np" -ge 2 ]; then
    out=$("$MPIRUN" -np $np --bind-to none $R --strategy dmuon --steps 3 --timeout 3 --inject-stall 1:1:15 2>&1)
    rc=$?
    like "gpu: a stalled peer: --timeout aborts the communicators" "$out" "communicators aborted"
    is "gpu: a stalled peer: non-zero exit" "$([ $rc -ne 0 ] && echo yes)" yes
fi
tap_end
