#!/bin/sh
# plan_golden.sh: `dmuon plan` against golden output on qwen2.5-0.5b with the shipped roofline
# cost table (the default, --balance auto, on 8 ranks: its candidates simulated; MILP report as
# JSON on 128 ranks, where lp_solve proves the plan optimal well within the time limit), the
# written program's hash, exit statuses. Wall-clock times are masked. DMUON_REGEN=1 rewrites the golden files instead of comparing.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
costs=$DM_SRCDIR/traces/costs/roofline.csv
tmp=${TMPDIR:-/tmp}/plan_golden.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
norm() {
    sed -e "s|$DM_SRCDIR/||g" -e 's/assignment [0-9.]* s, plan [0-9.]* s/assignment T s, plan T s/' \
        -e 's/vars\(, warm start\)*, [0-9.]* s)/vars\1, T s)/' -e 's/"solver_s": [0-9.]*, "plan_s": [0-9.]*/"solver_s": T, "plan_s": T/' \
        -e '/^  \(lpt\|milp\|lpt-ns\) /s/ \+[0-9.]\+ \+[0-9.]\+  \([a-z]\)/ T T  \1/' \
        -e "s|$tmp/||g"
}
same_file() { # same_file DESCRIPTION GOT WANT
    tap_n=$((tap_n + 1))
    if diff -u "$3" "$2" >"$tmp/diff" 2>&1; then echo "ok $tap_n - $1"; else
        echo "not ok $tap_n - $1"; sed 's/^/#   /' "$tmp/diff" | head -40; tap_fail=$((tap_fail + 1)); fi
}
check() { # check NAME ARGS...: run, normalize, compare with tests/golden/plan_NAME.txt
    name=$1; shift
    golden=$DM_SRCDIR/tests/golden/plan_$name.txt
    $DMUON plan --costs "$costs" "$@" >"$tmp/raw.txt"
    is "plan $name exits 0" "$?" 0
    norm <"$tmp/raw.txt" >"$tmp/$name.txt"
    [ -n "$DMUON_REGEN" ] && cp "$tmp/$name.txt" "$golden"
    same_file "plan $name matches $golden" "$tmp/$name.txt" "$golden"
}

check qwen2.5-0.5b --model qwen2.5-0.5b --gpus 8 --out "$tmp/p.json"
check qwen2.5-0.5b_milp --model qwen2.5-0.5b --gpus 128 --balance milp --milp-time 60 --json
like "program file written" "$(head -c 60 "$tmp/p.json")" '"format": "dmuon-program-1"'
h1=$($DMUON plan --costs "$costs" --model qwen2.5-0.5b --gpus 8 | grep '^program')
h2=$($DMUON plan --costs "$costs" --model qwen2.5-0.5b --gpus 8 | grep '^program')
is "same plan, same hash" "$h1" "$h2"
like "strategies differ in hash" "$($DMUON plan --costs "$costs" --model qwen2.5-0.5b --gpus 8 --strategy muon-ddp)" "all-reduce"
is "missing --gpus exits 2" "$(status_of $DMUON plan --model qwen2.5-0.5b)" 2
is "bad --strategy exits 2" "$(status_of $DMUON plan --model qwen2.5-0.5b --gpus 8 --strategy nope)" 2
like "bad --strategy message" "$($DMUON plan --model qwen2.5-0.5b --gpus 8 --strategy nope 2>&1)" "--strategy: expected"
is "unknown model exits 1" "$(status_of $DMUON plan --model no-such-model --gpus 8)" 1
is "bad cost table exits 1" "$(status_of $DMUON plan --model qwen2.5-0.5b --gpus 8 --costs "$DM_SRCDIR/tests/plan_golden.sh")" 1
$DMUON plan --costs "$costs" --model qwen2.5-0.5b --gpus 4 --csv "$tmp/p.csv" >/dev/null
is "--csv: the case line, header and one row per owner" "$(head -1 "$tmp/p.csv" | cut -d" " -f2-3),$(grep -v "^#" "$tmp/p.csv" | head -1),$(grep -c "^[0-9]" "$tmp/p.csv")" "dmuon-plan-1 model=Qwen2.5-0.5B,owner,ns_load_us,ns_ops,4"
like "--help shows plan options" "$($DMUON plan --help)" "--balance B"
$DMUON plan --write-roofline "$tmp/roof.csv" --gpu A800 >/dev/null
like "roofline table written for the A800" "$(head -3 "$tmp/roof.csv")" "# gpu: NVIDIA A800-SXM4-80GB"
tap_end
