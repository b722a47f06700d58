#!/bin/sh
# bench_work.sh: `dmuon bench work` without a GPU (--dry-run): which kernels of the models' steps
# it would time (every kind of the workload, distinct shapes once, the grid), its time estimate,
# and bad usage. The timings themselves need the device (tools/device-stages.sh: work).
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
if ! "$DMUON" bench work --help >/dev/null 2>&1 || "$DMUON" bench work --help | grep -q 'not available'; then
    echo "1..0 # SKIP built without CUDA"
    exit 0
fi
out=$("$DMUON" bench work --dry-run --tokens 2048,4096 2>&1)
is "dry run of the validation models at 2048,4096 tokens: exit 0" "$?" 0
like "it counts the models' kernels and the grid's" "$out" "of the models' steps at 2048,4096 tokens per rank, 1326 of the GEMM grid"
like "it prints its time estimate before starting" "$out" "# estimate: about "
n=$(printf '%s\n' "$out" | sed -n 's/.*: \([0-9]*\) distinct kernels.*/\1/p')
is "distinct kernels: more than the grid alone ($n)" "$([ "${n:-0}" -gt 1400 ] && echo yes)" yes
l=$("$DMUON" bench work --dry-run --no-grid --tokens 4096 --models moonlight-16b-a3b-6l,llama-3.2-3b --list 2>&1)
for k in "gemm,fwd," "gemm,dgrad," "gemm,wgrad," "bgemm,fwd,384,1408,2048,64" "bgemm,attn-score,4096,4096,128,24|h24/8" \
         "bgemm,attn-dkey," "elem,loss," "elem,vector-bwd," "elem,embed,4096,3072,128256" "elem,embed-bwd," \
         "elem,route,24576,2048," "elem,route-bwd," "elem,softmax,98304,4096," "elem,softmax-bwd,98304,4096,"; do
    like "the list has $k" "$l" "$k"
done
is "each kernel once" "$(printf '%s\n' "$l" | grep '^  ' | awk '{print $1}' | sort | uniq -d | wc -l)" 0
# --ops: only the kinds named, every one of them (the same rows as in the full list)
r=$("$DMUON" bench work --dry-run --no-grid --tokens 4096 --models moonlight-16b-a3b-6l,llama-3.2-3b --list --ops rope,glu-bwd 2>&1)
is "--ops rope,glu-bwd: exit 0" "$?" 0
is "--ops rope,glu-bwd: only those kinds" "$(printf '%s\n' "$r" | grep '^  ' | awk '{print $1}' | grep -vcE '^elem,(rope|glu-bwd),')" 0
is "--ops rope,glu-bwd: every such kernel of the full list" \
    "$(printf '%s\n' "$r" | grep '^  ' | awk '{print $1}' | sort | tr '\n' ' ')" \
    "$(printf '%s\n' "$l" | grep '^  ' | awk '{print $1}' | grep -E '^elem,(rope|glu-bwd),' | sort | tr '\n' ' ')"
is "--ops rope,glu-bwd: some kernels" "$(printf '%s\n' "$r" | grep -c '^  elem,rope,')" \
    "$(printf '%s\n' "$l" | grep -c '^  elem,rope,' | sed 's/^0$/none in the full list/')"
e=$("$DMUON" bench work --dry-run --ops rope,bogus 2>&1)
is "--ops with an unknown kind: exit 2" "$(status_of "$DMUON" bench work --dry-run --ops rope,bogus)" 2
like "--ops with an unknown kind: names it and the known ones" "$e" "unknown op kind 'bogus' (known: fwd, dgrad"
is "a model file it does not know: exit 1" "$(status_of "$DMUON" bench work --dry-run --models no-such-model)" 1
is "--tokens 0: exit 2" "$(status_of "$DMUON" bench work --dry-run --tokens 0)" 2
is "an unknown option: exit 2" "$(status_of "$DMUON" bench work --bogus)" 2
tap_end
