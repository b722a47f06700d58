#!/bin/sh
# gen_models.sh: tools/gen_models.py regenerates the committed models/*.json byte for byte from
# the reference tensor list (skipped when the reference or python3 is not available).
. "$DM_SRCDIR/tests/tap.sh"
ref=${DM_REFERENCE:-/work/shared/reference/model-shapes.json}
if [ ! -r "$ref" ] || ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP no reference file ($ref) or no python3"
    exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/dm_gen_models.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
ok "generator runs" python3 "$DM_SRCDIR/tools/gen_models.py" "$ref" "$out"
is "same file list" "$(cd "$out" && ls *.json)" "$(cd "$DM_SRCDIR/models" && ls *.json)"
for f in "$out"/*.json; do
    b=$(basename "$f")
    ok "$b is up to date" cmp -s "$f" "$DM_SRCDIR/models/$b"
done
tap_end
