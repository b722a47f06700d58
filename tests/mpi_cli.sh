#!/bin/sh
# mpi_cli.sh: the MPI commands' command line on 2 ranks: `dmuon run --json` (rank 0 prints exactly
# one JSON document, dmuon-run-1, on stdout; the report goes to stderr), and errors once: a bad
# option or argument of `dmuon run` and `dmuon bench comm` is printed by rank 0 alone, in the
# project's words (no getopt text), with exit status 2.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then echo "1..0 # SKIP no mpirun"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # as in real_cpu.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run2() { "$MPIRUN" --oversubscribe -np 2 "$@"; }
cp "$DM_SRCDIR/tests/data/tiny_cpu.json" "$tmp/tiny.json"
RUN="$DMUON run --backend cpu --model $tmp/tiny.json --tokens 8"

# ---- run --json -------------------------------------------------------------------------------
run2 $RUN --steps 3 --compare muon-ddp --json >"$tmp/r.json" 2>"$tmp/r.err"
is "run --json --compare on 2 ranks: exit 0" "$?" 0
like "  ... the report went to stderr" "$(cat "$tmp/r.err")" "# dmuon run: model tiny, strategy dmuon"
like "  ... the step rows too" "$(cat "$tmp/r.err")" "  ok"
if command -v python3 >/dev/null 2>&1; then
    is "  ... stdout is exactly one dmuon-run-1 object (rank 0's), top-level fields as documented" \
        "$(python3 -c 'import json,sys
t = open(sys.argv[1]).read()
d = json.loads(t)
assert t.endswith("}\n") and t.count("\"format\": \"dmuon-run-1\"") == 1
print(d["format"], ",".join(d))' "$tmp/r.json" 2>&1)" \
        "dmuon-run-1 format,model,cluster,gpus,backend,strategy,steps,seed,lr_muon,lr_adamw,ns_coeffs,runs,comparison"
    is "  ... identifying fields, two runs of 3 steps each, the comparison" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(d["model"], d["cluster"], d["gpus"], d["backend"], d["strategy"], [(r["strategy"], len(r["steps"]), r["counted"]) for r in d["runs"]], [c["strategy"] for c in d["comparison"]])' "$tmp/r.json" 2>&1)" \
        "tiny a800 2 cpu dmuon [('dmuon', 3, 2), ('muon-ddp', 3, 2)] ['dmuon', 'muon-ddp']"
    is "  ... each run names its NS coefficients (the PyTorch form: the classic set)" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([(r["strategy"], r["ns_coeffs"]) for r in d["runs"]])' "$tmp/r.json" 2>&1)" \
        "[('dmuon', 'polar-express'), ('muon-ddp', 'jordan')]"
    is "  ... the mean step equals the text's" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % d["runs"][0]["mean"]["step_ms"])' "$tmp/r.json" 2>&1)" \
        "$(sed -n 's/^# mean over 2 steps (first left out): step \([0-9.]*\) ms.*/\1/p' "$tmp/r.err" | head -1)"
    is "  ... a step's fields" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(",".join(d["runs"][0]["steps"][0]))' "$tmp/r.json" 2>&1)" \
        "step,loss,step_ms,forward_ms,backward_ms,optimizer_ms,opt_window_ms,exposed_comm_ms,ns_min_ms,ns_max_ms,skipped,status"
else
    for i in 1 2 3 4; do tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP no python3"; done
fi
run2 $RUN --steps 2 >"$tmp/t.out" 2>/dev/null
like "run without --json: the report on stdout" "$(cat "$tmp/t.out")" "# dmuon run: model tiny"

# bench comm --json: one document (dmuon-bench-1) on stdout, the table on stderr
run2 $DMUON bench comm --backend cpu --max-bytes 4K --iters 2 --warmup 1 --json >"$tmp/b.json" 2>"$tmp/b.err"
is "bench comm --json: exit 0" "$?" 0
if command -v python3 >/dev/null 2>&1; then
    is "bench comm --json: the rows, columns and header fields of its CSV" \
        "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["format"], d["benchmark"], d["table"], d["meta"]["ranks"], d["columns"][0], len(d["rows"]), d["rows"][0]["coll"])' "$tmp/b.json" 2>&1)" \
        "dmuon-bench-1 comm dmuon-comm-1 2 coll 15 broadcast"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP no python3"
fi
like "bench comm --json: the table on stderr" "$(cat "$tmp/b.err")" "# dmuon bench comm: 2 ranks"

# ---- errors once ------------------------------------------------------------------------------
# once WHAT WANT COMMAND...: exit 2, exactly one line from dmuon on stderr (mpirun's own notes
# about the exit status aside), holding WANT, and no getopt text.
once() {
    what=$1 want=$2
    shift 2
    run2 "$@" >"$tmp/o.out" 2>"$tmp/o.err"
    st=$?
    lines=$(grep -c '^dmuon ' "$tmp/o.err")
    is "$what: exit 2, one error line" "$st $lines" "2 1"
    like "  ... in the project's words" "$(grep '^dmuon ' "$tmp/o.err")" "$want"
    is "  ... no getopt text, nothing on stdout" \
        "$(grep -ciE 'unrecognized option|requires an argument|invalid option|illegal option' "$tmp/o.err")$(cat "$tmp/o.out")" 0
}
once "run --bogus" "dmuon run: unknown option '--bogus' (try 'dmuon run --help')" $RUN --bogus
once "run --steps (no value)" "dmuon run: option '--steps' needs an argument" $RUN --steps
once "run -x" "dmuon run: unknown option '-x'" $RUN -x
once "run --steps x" "dmuon run: --steps: expected an integer, found 'x'" $RUN --steps x
once "run --strategy bogus" "dmuon run: --strategy: expected adamw" $RUN --strategy bogus
once "run --backend bogus" "dmuon run: --backend: expected cpu, gpu or auto" $DMUON run --model "$tmp/tiny.json" --backend bogus
once "run with an operand" "dmuon run: unexpected argument 'extra'" $RUN extra
once "run --json --bogus" "dmuon run: unknown option '--bogus'" $RUN --json --bogus
once "bench comm --bogus" "dmuon bench comm: unknown option '--bogus' (try 'dmuon bench comm --help')" \
    $DMUON bench comm --backend cpu --bogus
once "bench comm --iters (no value)" "dmuon bench comm: option '--iters' needs an argument" $DMUON bench comm --backend cpu --iters
once "bench comm --iters 0" "dmuon bench comm: --iters: expected a value in [1, 100000], found 0" \
    $DMUON bench comm --backend cpu --iters 0
once "bench comm --backend bogus" "dmuon bench comm: --backend: expected cpu or gpu" $DMUON bench comm --backend bogus
once "bench comm with an operand" "dmuon bench comm: unexpected argument 'extra'" $DMUON bench comm --backend cpu extra
run2 $DMUON bogus >/dev/null 2>"$tmp/u.err"
is "an unknown command under mpirun: exit 2, said once" "$? $(grep -c "^dmuon: unknown command 'bogus'" "$tmp/u.err")" "2 1"
run2 $RUN --model "$tmp/none.json" >/dev/null 2>"$tmp/m.err"
is "run --model of a missing file: exit 1, said once" "$? $(grep -c '^dmuon ' "$tmp/m.err")" "1 1"
tap_end
