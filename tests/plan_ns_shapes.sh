#!/bin/sh
# plan_ns_shapes.sh: tools/plan_ns_shapes.py lists the NS shapes and batches of step programs as
# `bench kernels --shapes` input: every NS op of a plan is on a list (its matrices stored tall on a
# .tall list, rows > cols), the lists parse as ROWS COLS B1,B2,..; --min-side drops small shapes;
# an unreadable program is named. (Skipped without python3.)
. "${DM_SRCDIR:-.}/tests/tap.sh"
DMUON=${DMUON:-./dmuon}
SRC=${DM_SRCDIR:-.}
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP no python3"
    exit 0
fi
tmp=$(mktemp -d /tmp/dmuon-nsshapes-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
T="python3 $SRC/tools/plan_ns_shapes.py"
$DMUON plan -m wall-oss-flow -g 1 --cluster h200 --tokens 1024 -o "$tmp/w.json" >/dev/null 2>&1
is "a plan to list" "$?" 0
$T --out-prefix "$tmp/l" "$tmp/w.json"
is "the tool exits 0" "$?" 0
ok "  ... a direct list and a gram list" test -s "$tmp/l.direct.txt" -a -s "$tmp/l.gram.txt"
bad=$(cat "$tmp"/l.*.txt | grep -v '^#' | grep -cvE '^[0-9]+ [0-9]+ [0-9]+(,[0-9]+)*$')
is "  ... every line is ROWS COLS B1,B2,.." "$bad" 0
wide=$(grep -hv '^#' "$tmp/l.direct.txt" "$tmp/l.gram.txt" | awk '$1 > $2' | wc -l)
is "  ... the wide lists hold rows <= cols" "$wide" 0
ok "  ... WALL-OSS's tall matrices are on a .tall list" test -s "$tmp/l.direct.tall.txt" -o -s "$tmp/l.gram.tall.txt"
notall=$(cat "$tmp"/l.*.tall.txt 2>/dev/null | grep -v '^#' | awk '$1 <= $2' | wc -l)
is "  ... stored tall: rows > cols" "$notall" 0
# every matrix of every NS op counted once: the lists' batches add up to the program's NS matrices
want=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
print(sum(int(o.get("batch") or 1) for r in p["ranks"] for o in r["ops"] if o.get("kind") == "ns"))' "$tmp/w.json")
got=$(python3 -c '
import json, sys
from collections import Counter
p = json.load(open(sys.argv[1]))
c = Counter()
for r in p["ranks"]:
    for o in r["ops"]:
        if o.get("kind") == "ns":
            m, n, b, t = int(o["m"]), int(o["n"]), int(o.get("batch") or 1), min(int(o.get("tall") or 0), int(o.get("batch") or 1))
            if b > t: c[(min(m, n), max(m, n), b - t)] += b - t
            if t: c[(max(m, n), min(m, n), t)] += t
listed = set()
for f in sys.argv[2:]:
    for l in open(f):
        if l.startswith("#"): continue
        m, n, bs = l.split()
        for b in bs.split(","): listed.add((int(m), int(n), int(b)))
print(sum(v for k, v in c.items() if k in listed))' "$tmp/w.json" "$tmp"/l.*.txt)
is "  ... every NS matrix of the plan is on a list ($want)" "$got" "$want"
big=$($T --min-side 1024 "$tmp/w.json" | grep -v '^#' | awk '{m = $1 < $2 ? $1 : $2} m < 1024' | wc -l)
is "--min-side 1024 drops shapes with a shorter side" "$big" 0
out=$($T "$tmp/none.json" 2>&1)
is "a missing program exits non-zero" "$?" 1
like "  ... and names it" "$out" "none.json"
tap_end
