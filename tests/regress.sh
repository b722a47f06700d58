#!/bin/sh
# regress.sh: `dmuon regress` (the CPU part, quick suite): the committed baseline passes on an
# unchanged tree (CI mode), a fresh baseline passes against itself, a deliberate 25% slowdown
# (DM_TEST_SLOWDOWN=1.25: a busy-wait inside the timed region, see cli/cmd_regress.c) is flagged,
# and changed predictions (a perturbed cost table through --costs) fail even under CI.
#
# Timing checks on a shared machine: a fresh baseline is measured right before each timing
# comparison, and a comparison that the machine's noise spoils (an unchanged run flagged, or a
# slowdown hidden by a noise threshold above 25%) is retried, up to 3 attempts; the attempts are
# reported as TAP diagnostics.
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
SRC=${DM_SRCDIR:-.}
tmp=$(mktemp -d /tmp/dmuon-regress-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

out=$(CI=true $DMUON regress --quick --no-gpu --machine cpu-2core --baselines "$SRC/traces/baselines" 2>&1)
rc=$?
is "committed cpu-2core quick baseline: unchanged tree passes under CI=true" "$rc" 0
like "no prediction changed against the committed baseline" "$out" " 0 changed, 0 worse"

$DMUON regress --quick --no-gpu --reps 5 --baselines "$tmp/b" --machine t --update >"$tmp/u.txt" 2>&1
is "--update writes a baseline" "$?" 0
ok "baseline file has the format line" grep -q '^# dmuon-regress-1$' "$tmp/b/t/quick.tsv"
ok "no temporary file left behind" sh -c "! ls '$tmp/b/t/' | grep -q tmp"
like "baseline holds the 72B plan time" "$(cat "$tmp/b/t/quick.tsv")" "plan.qwen2.5-72b.a800.64.lpt.plan_cpu_s	time"

# Unchanged tree, --strict, outside CI: passes. This checks the pass path, not the machine's
# noise: under the sanitizer build on a busy 2-core CI machine, contention from parallel tests
# slowed single medians by more than the measured noise threshold even on 3 attempts (a 30% floor
# was not enough either: the 14 ms simulation of simspeed.* came out 1.5x its baseline measured
# just before, CI of dc19189), so the comparison uses a 100% floor threshold (the 25% slowdown
# check below keeps the default).
attempt=0 rc=1
while [ $attempt -lt 3 ] && [ $rc -ne 0 ]; do
    attempt=$((attempt + 1))
    $DMUON regress --quick --no-gpu --reps 5 --baselines "$tmp/b" --machine t --update >/dev/null 2>&1
    out=$(CI= $DMUON regress --quick --no-gpu --reps 5 --threshold 1.0 --baselines "$tmp/b" --machine t --strict 2>&1)
    rc=$?
done
echo "# unchanged tree: $attempt attempt(s)"
is "unchanged tree passes with --strict" "$rc" 0
like "unchanged tree prints PASS" "$out" "PASS"

# A 25% slowdown of the timed code: flagged (exit 1 with --strict, SLOWER in the table). A 10%
# slowdown hid under the noise threshold of a fully loaded 2-core machine (1 run in 3).
attempt=0 rc=0
while [ $attempt -lt 3 ] && [ $rc -ne 1 ]; do
    attempt=$((attempt + 1))
    $DMUON regress --quick --no-gpu --reps 5 --baselines "$tmp/b" --machine t --update >/dev/null 2>&1
    out=$(CI= DM_TEST_SLOWDOWN=1.25 $DMUON regress --quick --no-gpu --reps 5 --baselines "$tmp/b" --machine t --strict 2>&1)
    rc=$?
done
echo "# 25% slowdown: $attempt attempt(s)"
is "25% slowdown fails with --strict" "$rc" 1
like "25% slowdown is marked SLOWER" "$out" "SLOWER"
like "the hook is announced" "$out" "DM_TEST_SLOWDOWN=1.25"
out=$(CI=true DM_TEST_SLOWDOWN=1.25 $DMUON regress --quick --no-gpu --reps 5 --baselines "$tmp/b" --machine t --strict 2>&1)
is "timing changes only warn under CI=true" "$?" 0

# A changed prediction: the roofline table made "measured" with NS 10% slower.
sed 's/^# source: roofline/# source: measured/' "$SRC/traces/costs/roofline.csv" |
    awk -F, 'BEGIN { OFS = "," } $2 == "ns" { $8 *= 1.1; $9 *= 1.1; $10 *= 1.1 } { print }' >"$tmp/perturbed.csv"
out=$(CI=true $DMUON regress --quick --no-gpu --reps 3 --baselines "$tmp/b" --machine t --costs "$tmp/perturbed.csv" 2>&1)
is "changed predictions fail, even under CI=true" "$?" 1
like "changed predictions are marked CHANGED" "$out" "CHANGED"
like "the failure says why" "$out" "FAIL: predictions changed"

is "missing baseline is an error" "$(status_of $DMUON regress --quick --no-gpu --reps 1 --baselines "$tmp/none" --machine t)" 1
is "bad option is a usage error" "$(status_of $DMUON regress --reps 0)" 2
is "bad DM_TEST_SLOWDOWN is a usage error" "$(status_of env DM_TEST_SLOWDOWN=abc $DMUON regress --quick)" 2
tap_end
