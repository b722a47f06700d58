#!/bin/sh
# hsdp_muon.sh: HSDP's Muon pairs, --hsdp-muon (sched.h sched_hsdp_muon; plan_best.c): under
# --balance auto (the default) both the HSDP stages and the pairs over all ranks are simulated and
# the faster kept, said on the balance line; a model of many small expert matrices on 2 nodes (the
# stages' worst case, traces/plan/hsdp-map-2026-12-04) keeps the pairs over all ranks and is no
# slower than the stages forced; replicas and world force one (world: its AdamW parameters' alternative
# is every layer's over all ranks); a bad value exits 2.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
step() { sed -n 's/.*step \([0-9.]*\) ms.*/\1/p' | head -1; }
out=$($DMUON sim -m moonlight-16b-a3b -g 16 --steps 3 --hsdp 2>&1)
like "auto: the balance line says which the Muon pairs took" "$out" "with HSDP's Muon matrices over all ranks, as the flat plan (simulated step"
auto=$(printf '%s\n' "$out" | grep '^step time' | sed 's/[^0-9.]*\([0-9.]*\) ms.*/\1/')
rep=$($DMUON sim -m moonlight-16b-a3b -g 16 --steps 3 --hsdp --hsdp-muon replicas --quiet 2>&1 | step)
wor=$($DMUON sim -m moonlight-16b-a3b -g 16 --steps 3 --hsdp --hsdp-muon world --quiet 2>&1 | step)
is "auto no slower than the stages forced ($auto <= $rep ms)" "$(awk -v a="$auto" -v b="$rep" 'BEGIN { print (a + 0 > 0 && a <= b) ? "yes" : "no" }')" yes
is "auto is the world's plan ($auto ms, forced $wor ms)" "$auto" "$wor"
like "the forced scheme is in the program's options" "$($DMUON plan -m moonlight-16b-a3b -g 16 --hsdp --hsdp-muon world 2>&1)" \
    "hsdp-muon=world"
like "world: every layer's AdamW parameters over all ranks simulated too (the flat plan's)" \
    "$($DMUON sim -m pi0 -g 32 --steps 3 --hsdp --hsdp-muon world 2>&1 | grep '^  balance')" "every layer's over all ranks: "
out=$($DMUON sim -m qwen2.5-0.5b -g 8 --hsdp --quiet 2>&1)
is "one shard group (8 ranks, 8 a node): nothing to choose, no line" "$(printf '%s\n' "$out" | grep -c "Muon matrices")" 0
$DMUON sim -m qwen2.5-0.5b -g 16 --hsdp --hsdp-muon sideways >/dev/null 2>&1
is "--hsdp-muon sideways: exit 2" "$?" 2
like "--hsdp-muon sideways: what is expected" "$($DMUON sim -m qwen2.5-0.5b -g 16 --hsdp --hsdp-muon sideways 2>&1)" \
    "--hsdp-muon: expected auto, replicas or world, found 'sideways'"
tap_end
