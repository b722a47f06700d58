#!/bin/sh
# hf_sim.sh: every config of tests/data/hf (each family `dmuon model import` takes) imports, and
# the model it writes plans and simulates under dmuon and muon-fsdp on 2 ranks with its memory
# estimated: the import, the workload of its architecture, the plan and the simulator end to end
# on models no bundled file describes (the checks of each family's tensors: test_hf_families);
# and a config.json given straight to --model.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
tmp=${TMPDIR:-/tmp}/hf_sim.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$DM_SRCDIR"/tests/data/hf/*.json; do
    b=$(basename "$f" .json)
    $DMUON model import "$f" --out "$tmp/$b.json" >"$tmp/import.out" 2>&1
    is "$b: imports" "$?" 0
    for s in dmuon muon-fsdp; do
        out=$($DMUON sim -m "$tmp/$b.json" -g 2 --strategy $s 2>&1)
        rc=$?
        like "$b $s on 2 ranks: simulated (exit $rc), a step and a memory estimate" \
            "$rc $(printf '%s\n' "$out" | grep -c -E '^step time +[0-9.]+ ms|^  memory +peak [0-9.]+ GiB')" "0 2"
    done
done
# a config.json given straight to --model is imported as `model import` writes it: the same step
for b in qwen3-8b gpt-oss-20b; do
    a=$($DMUON sim -m "$DM_SRCDIR/tests/data/hf/$b.json" -g 2 --strategy dmuon 2>&1 | grep -E '^step time')
    c=$($DMUON sim -m "$tmp/$b.json" -g 2 --strategy dmuon 2>&1 | grep -E '^step time')
    is "$b: sim --model CONFIG.json simulates the imported model's step ($a)" "$a" "$c"
done
tap_end
