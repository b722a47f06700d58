#!/bin/sh
# sim_golden.sh: `dmuon sim` against its golden output (a small plan on a pinned roofline cost
# table, simulated times included), identical bytes on repeated runs, trace files in both
# formats, a saved program (and the options it fixes refused beside it), exit statuses. DMUON_REGEN=1 rewrites the golden file instead of comparing.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
golden=$DM_SRCDIR/tests/golden/sim_qwen2.5-0.5b_a800_16.txt
costs=$DM_SRCDIR/tests/data/sim_costs.csv
tmp=${TMPDIR:-/tmp}/sim_golden.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
# Paths and the wall-clock line differ between machines and build folders.
norm() { sed -e "s|$DM_SRCDIR/||g" -e '/^speed:/d'; }
same_file() { # same_file DESCRIPTION GOT WANT: diff shown as diagnostics
    tap_n=$((tap_n + 1))
    if diff -u "$3" "$2" >"$tmp/diff" 2>&1; then echo "ok $tap_n - $1"; else
        echo "not ok $tap_n - $1"; sed 's/^/#   /' "$tmp/diff" | head -40; tap_fail=$((tap_fail + 1)); fi
}

run="$DMUON sim --model qwen2.5-0.5b --gpus 16 --cluster a800 --costs $costs"
$run --trace "$tmp/a.json" --csv "$tmp/a.csv" >"$tmp/raw.txt"
is "sim exits 0" "$?" 0
norm <"$tmp/raw.txt" >"$tmp/out.txt"
[ -n "$DMUON_REGEN" ] && cp "$tmp/out.txt" "$golden"
same_file "sim output matches $golden" "$tmp/out.txt" "$golden"
$run --trace "$tmp/b.json" --csv "$tmp/b.csv" >/dev/null
ok "repeated run: identical trace JSON bytes" cmp "$tmp/a.json" "$tmp/b.json"
ok "repeated run: identical trace CSV bytes" cmp "$tmp/a.csv" "$tmp/b.csv"
like "trace JSON is a Chrome trace" "$(head -c 200 "$tmp/a.json")" '{"traceEvents": ['
like "trace JSON names rank processes" "$(grep -m1 process_name "$tmp/a.json")" '"rank 0"'
nx=$(grep -c '"ph": "X"' "$tmp/a.json")
nc=$(($(wc -l <"$tmp/a.csv") - 2))
is "CSV has the JSON's $nx complete events" "$nc" "$nx"
like "CSV header" "$(sed -n 2p "$tmp/a.csv")" "rank,stream,op,kind,ts_us,dur_us,bytes,flops,layer,coll,wait_us"
like "--quiet prints one line" "$($run --quiet)" "Qwen2.5-0.5B dmuon 16 GPUs a800: step"
json=$($run --json)
like "--json: one object" "$json" '"format": "dmuon-sim-1"'
is "--json: step_us agrees with the table" \
    "$(printf '%s\n' "$json" | sed -n 's/^ *"step_us": \([0-9.]*\),$/\1/p' | awk '{printf "%.3f", $1 / 1000}')" \
    "$(sed -n 's/^step time *\([0-9.]*\) ms$/\1/p' "$golden")"
$DMUON plan --model qwen2.5-0.5b --gpus 16 --cluster a800 --costs "$costs" -o "$tmp/p.json" >/dev/null
is "a saved plan simulates to the same step (cluster from the program)" \
    "$($DMUON sim --program "$tmp/p.json" --costs "$costs" --quiet)" "$($run --quiet)"
# --attention causal: the program records its tile, and a saved one simulates to the same step
# (its attention products, not the whole ones: a shorter step)
$DMUON plan --model qwen2.5-0.5b --gpus 16 --cluster a800 --costs "$costs" --attention causal -o "$tmp/pc.json" >/dev/null
like "--attention causal: the program records its tile" "$(grep causal_tile "$tmp/pc.json")" '"causal_tile": 512'
causal=$($DMUON sim --model qwen2.5-0.5b --gpus 16 --cluster a800 --costs "$costs" --attention causal --quiet)
is "a saved causal plan simulates to the same step" "$($DMUON sim --program "$tmp/pc.json" --costs "$costs" --quiet)" \
    "$causal"
is "the causal step is shorter than the whole one" \
    "$(printf '%s\n%s\n' "$causal" "$($run --quiet)" | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p' | awk 'NR==1{c=$1} NR==2{print (c < $1) ? "yes" : "no"}')" yes
# The program fixes the model, the GPU count and the plan: options that would change them are
# refused beside --program instead of being ignored (they were, silently).
for opt in "--gpus 16" "--model qwen2.5-7b" "--strategy adamw" "--balance milp" "--gpus-per-node 4" "--tokens 8192"; do
    is "sim --program refuses $opt" "$(status_of $DMUON sim --program "$tmp/p.json" --costs "$costs" --quiet $opt)" 2
done
like "  ... and says why" "$($DMUON sim --program "$tmp/p.json" --costs "$costs" --gpus 16 2>&1)" \
    "dmuon sim: --gpus: the program fixes the model, the GPU count and the plan; not allowed with --program"
is "sim --program still takes --cluster and --algo" \
    "$(status_of $DMUON sim --program "$tmp/p.json" --costs "$costs" --cluster a800 --algo ring --quiet)" 0
is "sim without --gpus exits 2" "$(status_of $DMUON sim --model qwen2.5-0.5b)" 2
is "sim --algo bogus exits 2" "$(status_of $DMUON sim --model qwen2.5-0.5b --gpus 2 --algo bogus)" 2
is "sim on an unknown cluster exits 1" "$(status_of $DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster nope)" 1
like "unknown cluster named" "$($DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster nope 2>&1)" 'unknown cluster "nope"'
like "sim --help shows plan options" "$($DMUON sim --help)" "--strategy"
# Memory: the executor's per-rank peak against the cluster's GPU (core/memory.h).
like "the report says the plan fits" "$(grep '^  memory' "$golden")" ": fits on A800-SXM4-80GB (80.0 GiB)"
out=$($DMUON sim --model deepseek-v3 --gpus 8 2>&1)
is "sim --model deepseek-v3 --gpus 8 exits 0" "$?" 0
like "  ... and says it does not fit" "$out" "does not fit on GPU A800-SXM4-80GB: needs "
like "  ... also with --quiet" "$($DMUON sim --model deepseek-v3 --gpus 8 --quiet)" "(does not fit in GPU memory)"
like "  ... and in --json" "$($DMUON sim --model deepseek-v3 --gpus 8 --json)" '"memory_fits": false'
like "a saved program: the model it names gives the memory" \
    "$($DMUON sim --program "$tmp/p.json" --costs "$costs" | grep '^  memory' | sed 's/(rank [0-9]*:/(rank R:/')" " GiB per rank (rank R: weights+grads"
# a forward naming a param the model lacks (an edited file): simulated (the simulator reads no
# param of it), the memory line says why it is not estimated
sed '0,/"kind":"forward"\(.*\)"params":\[[0-9]*/s//"kind":"forward"\1"params":[999999/' "$tmp/p.json" > "$tmp/bad.json"
like "a saved program naming a param its model lacks: the memory line names it" \
    "$($DMUON sim --program "$tmp/bad.json" --costs "$costs" | grep '^  memory')" \
    "not estimated: program: rank 0 op "
tap_end
