#!/bin/bash
# run.sh: where DMuon's HSDP pays against the flat plan (issue 15): dmuon's simulated steady-state
# step (--steps 3, A800 preset, 4096 tokens, ZeRO-2, the default balance) flat and --hsdp, and
# the network bytes per step `dmuon plan` reports, over models and GPU counts. Run from the
# repository root with ./dmuon built:  traces/plan/hsdp-map-2026-12-04/run.sh > .../map.txt
set -u
printf '%-20s %5s %12s %12s %8s %14s %14s\n' model gpus flat_ms hsdp_ms hsdp/flat flat_net_GB hsdp_net_GB
for m in qwen2.5-7b llama-3.1-8b wall-oss-flow pi0 moonlight-16b-a3b qwen2.5-72b; do
    for g in 16 32 64 128 256 512 1024; do
        f=$(./dmuon sim -m $m -g $g --steps 3 --quiet 2>/dev/null | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p')
        h=$(./dmuon sim -m $m -g $g --steps 3 --hsdp --quiet 2>/dev/null | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p')
        fn=$(./dmuon plan -m $m -g $g 2>/dev/null | sed -n 's/^network *\([0-9.]*\) GB.*/\1/p')
        hn=$(./dmuon plan -m $m -g $g --hsdp 2>/dev/null | sed -n 's/^network *\([0-9.]*\) GB.*/\1/p')
        r=$(python3 -c "print('%.3f' % ($h / $f))" 2>/dev/null || echo -)
        printf '%-20s %5d %12s %12s %8s %14s %14s\n' $m $g "${f:--}" "${h:--}" "$r" "${fn:--}" "${hn:--}"
    done
done
