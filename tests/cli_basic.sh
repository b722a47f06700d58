#!/bin/sh
# cli_basic.sh: the dmuon command's conventions: --help (golden), dmuon help CMD, --version and
# the backends built, exit status 2 on bad usage, the short options plan shares with sim and
# scale, the data folders a build-tree dmuon reads, calibrations by name, and the model commands
# on bundled models (golden values).
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}" "${DM_BUILDDIR:?}"

like "--help lists commands" "$($DMUON --help)" "Commands:"
is "--help (golden; PKGDATADIR, PKGLIBDIR for the installed folders)" \
    "$($DMUON --help | sed "s|${DM_PKGDATADIR:?}/|PKGDATADIR/|; s|${DM_PKGLIBDIR:?}/|PKGLIBDIR/|")" \
    "$(cat "$DM_SRCDIR/tests/golden/help.txt")"
is "dmuon help: the top-level help" "$($DMUON help)" "$($DMUON --help)"
for c in $($DMUON --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\)  *.*/\1/p'); do
    h=$($DMUON "$c" --help 2>&1)
    is "dmuon help $c = dmuon $c --help" "$($DMUON help "$c" 2>&1)" "$h"
    case "$h" in "$($DMUON --help)") r=top ;; *) r=own ;; esac
    is "dmuon help $c is not the top-level help" "$r" own
done
is "dmuon help bench comm = dmuon bench comm --help" "$($DMUON help bench comm 2>&1)" "$($DMUON bench comm --help 2>&1)"
is "dmuon help: unknown command exits 2" "$(status_of $DMUON help frobnicate)" 2
like "dmuon help: unknown command named" "$($DMUON help frobnicate 2>&1)" "help: unknown command 'frobnicate'"

# --version: the version, then each backend as config.h has it
cfg=$DM_BUILDDIR/config.h
cdef() { sed -n "s/^#define $1 \"\(.*\)\"$/\1/p" "$cfg"; }
has() { grep -q "^#define $1 1" "$cfg" && echo yes || echo no; }
v=$($DMUON --version)
is "--version: first line" "$(echo "$v" | head -1)" "dmuon $(cdef PACKAGE_VERSION)"
want_cuda=no; [ "$(has DM_HAVE_CUDA)" = yes ] && want_cuda="$(cdef DM_VERSION_CUDA), kernels for compute capabilities $(cdef DM_CUDA_ARCH)"
want_nccl=no; [ "$(has DM_HAVE_NCCL)" = yes ] && want_nccl=$(cdef DM_VERSION_NCCL)
want_mpi=no; [ "$(has DM_HAVE_MPI)" = yes ] && want_mpi=$(cdef DM_VERSION_MPI)
is "--version: CUDA" "$(echo "$v" | sed -n 's/^  CUDA  *//p')" "$want_cuda"
is "--version: NCCL" "$(echo "$v" | sed -n 's/^  NCCL  *//p')" "$want_nccl"
is "--version: MPI" "$(echo "$v" | sed -n 's/^  MPI  *//p')" "$want_mpi"
is "--version: lp_solve" "$(echo "$v" | sed -n 's/^  lp_solve  *//p')" "$(cdef DM_VERSION_LPSOLVE)"
is "--version: GSL" "$(echo "$v" | sed -n 's/^  GSL  *//p')" "$(cdef DM_VERSION_GSL)"
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists gsl 2>/dev/null; then
    is "--version: GSL is the installed one" "$(cdef DM_VERSION_GSL)" "$(pkg-config --modversion gsl)"
fi
case "$(cdef DM_VERSION_LPSOLVE)" in [0-9]*.[0-9]*.[0-9]*.[0-9]*) r=yes ;; *) r=no ;; esac
is "--version: lp_solve version found by configure" "$r" yes
is "unknown command exits 2" "$(status_of $DMUON frobnicate)" 2
is "unknown option exits 2" "$(status_of $DMUON --frobnicate)" 2
is "no command exits 2" "$(status_of $DMUON)" 2
like "unknown command message" "$($DMUON frobnicate 2>&1)" "unknown command 'frobnicate'"
is "models: unknown option exits 2" "$(status_of $DMUON models --bogus)" 2
is "model show: unknown option exits 2" "$(status_of $DMUON model show --bogus qwen2.5-7b)" 2
is "model show: missing model exits 1" "$(status_of $DMUON model show no-such-model)" 1
like "model show: unknown model named" "$($DMUON model show no-such-model 2>&1)" 'unknown model "no-such-model"'

out=$($DMUON model show qwen2.5-7b)
like "qwen2.5-7b: 196 Muon matrices" "$out" "muon:  196 matrices"
like "qwen2.5-7b: 7.62 B parameters" "$out" "(7.62 B) in"
json=$($DMUON model show qwen2.5-7b --json)
like "model show --json totals" "$json" '"muon_matrices": 196'
csv=$($DMUON model show qwen2.5-7b --csv | head -1)
is "model show --csv header" "$csv" "tensor,rows,cols,ndim,count,stack,first_layer,layer_span,role,params,use,stream"
out=$($DMUON model show qwen2.5-7b --role '*q_proj.weight=adamw')
like "--role override moves q_proj to adamw" "$out" "muon:  168 matrices"
is "--role bad value exits 2" "$(status_of $DMUON model show qwen2.5-7b --role 'x=sgd')" 2
like "models lists wall-oss-flow" "$($DMUON models)" "wall-oss-flow"
tmp=${TMPDIR:-/tmp}/dmuon-cli.$$
mkdir -p "$tmp"
out=$($DMUON model import "$DM_SRCDIR/tests/data/hf/qwen2.5-7b.json" --out "$tmp/q.json" 2>&1)
like "model import writes a file and says so" "$out" "wrote $tmp/q.json"
like "imported model shows 196 Muon matrices" "$($DMUON model show "$tmp/q.json")" "muon:  196 matrices"
is "model import: missing file exits 1" "$(status_of $DMUON model import "$tmp/none.json")" 1
printf '{"model_type": "llama"}' > "$tmp/bad.json"
like "model import: missing key named" "$($DMUON model import "$tmp/bad.json" 2>&1)" "bad.json:1:1: expected field"

# plan's short options in sim and scale: -m -g -c (and -o, scale's --out)
long=$($DMUON sim --model qwen2.5-0.5b --gpus 2 --cluster h200 --quiet 2>&1)
like "sim --model --gpus --cluster" "$long" "step"
is "sim -m -g -c = the long options" "$($DMUON sim -m qwen2.5-0.5b -g 2 -c h200 --quiet 2>&1)" "$long"
is "sim -mNAME -gN -cC (attached values)" "$($DMUON sim -mqwen2.5-0.5b -g2 -ch200 --quiet 2>&1)" "$long"
is "sim: -x still unknown" "$(status_of $DMUON sim -x)" 2
like "sim: -x named" "$($DMUON sim -x 2>&1)" "unknown option '-x'"
is "sim: -g without its value exits 2" "$(status_of $DMUON sim -m qwen2.5-0.5b -g)" 2
is "sim: nothing rewritten after --" "$(status_of $DMUON sim --model qwen2.5-0.5b --gpus 2 -- -g 4)" 2
$DMUON scale -m qwen2.5-0.5b -g 1,2 -c h200 -o "$tmp/sc" --strategies dmuon --no-plots --no-progress >/dev/null 2>&1
is "scale -m -g -c -o: exit 0" "$?" 0
ok "scale -o DIR writes into DIR" test -s "$tmp/sc/scale.csv"
is "plan -m -g -c (its own)" "$(status_of $DMUON plan -m qwen2.5-0.5b -g 2 -c h200)" 0

# the data a dmuon in its build tree reads: the source tree's, after $DMUON_MODELS
like "build tree: models from the source tree" "$($DMUON sim -m qwen2.5-0.5b -g 1 2>&1)" "($DM_SRCDIR/models/qwen2.5-0.5b.json)"
mkdir -p "$tmp/models"
cp "$DM_SRCDIR/models/pi0.json" "$tmp/models/"
is "DMUON_MODELS comes first" "$(DMUON_MODELS=$tmp/models $DMUON models --csv | cut -d, -f1 | tr '\n' ' ')" "file pi0 "
like "DMUON_MODELS that is not a folder is passed over" "$(DMUON_MODELS=$tmp/none $DMUON models)" "qwen2.5-72b"
like "models --help says the order" "$($DMUON models --help)" "\$DMUON_MODELS, the installed"
like "regress --help says the order" "$($DMUON regress --help)" "else the source tree's traces/baselines"

# a calibration by name: NAME.calib in the calibrations folder
like "--calibration h200x2 is the source tree's h200x2.calib" \
    "$($DMUON sim -m qwen2.5-0.5b -g 2 -c h200x2 --calibration h200x2 2>&1)" "$DM_SRCDIR/traces/calib/h200x2.calib"
is "--calibration NAME that is nowhere: exit 1" "$(status_of $DMUON sim -m qwen2.5-0.5b -g 2 --calibration no-such)" 1

# "1 rank", not "1 ranks"
$DMUON sim -m qwen2.5-0.5b -g 1 --csv "$tmp/one.csv" --quiet >/dev/null 2>&1
$DMUON compare "$tmp/one.csv" "$tmp/one.csv" --plot "$tmp/one" >/dev/null 2>&1
like "compare's plot title: 1 rank" "$(cat "$tmp/one/compare.gp")" "dmuon, 1 rank'"

# --trace has one meaning (FILE.csv: the CSV trace, else Chrome JSON); outputs checked before the work
$DMUON sim -m qwen2.5-0.5b -g 2 --trace "$tmp/t.csv" --quiet >/dev/null 2>&1
like "sim --trace FILE.csv writes the CSV trace" "$(head -1 "$tmp/t.csv")" "# dmuon-trace-1 source=sim"
out=$($DMUON sim -m qwen2.5-0.5b -g 2 --trace "$tmp/none/t.json" 2>&1)
is "sim --trace into a missing folder: exit 1" "$?" 1
like "sim --trace into a missing folder: said before the work, no report" "$out" "the folder $tmp/none does not exist"
is "sim --trace into a missing folder: no report printed" "$(printf '%s\n' "$out" | grep -c 'step time')" 0
out=$($DMUON plan -m qwen2.5-0.5b -g 2 --csv - --json 2>&1)
is "plan --csv - --json: usage error (both on stdout)" "$?" 2
like "plan --csv - --json: says why" "$out" "both write to stdout"
out=$($DMUON plan -m qwen2.5-0.5b -g 2 -o "$tmp" 2>&1)
is "plan -o FOLDER: exit 1" "$?" 1
like "plan -o FOLDER: refused before planning" "$out" "not a regular file (a folder)"
if $DMUON --help | grep -q '^  run '; then
    out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 \
        $DMUON run --backend cpu -m qwen2.5-0.5b --tokens 8 --steps 1 --trace "$tmp/none/t.csv" 2>&1)
    is "run --trace into a missing folder: exit 1" "$?" 1
    like "run --trace into a missing folder: said before the steps" "$out" "the folder $tmp/none does not exist"
    is "run: '1 rank', '1 group' (no plural s)" "$(printf '%s\n' "$out" | grep -c '1 ranks\|1 groups')" 0
fi
# --ns-split under --balance auto: the plan without splits simulated beside it, the faster kept
# (Qwen2.5-VL-3B on A800s: its 5120 x 5120 merger split over 2 GPUs pays at 64 GPUs; at 512 the
# split's extra collectives cost more than it saves)
out=$($DMUON sim -m qwen2.5-vl-3b -g 512 --ns-split 2 2>&1)
like "sim --ns-split 2, Qwen2.5-VL-3B, 512 GPUs: the split is simulated and not kept" "$out" "--ns-split's split matrices not kept (with them: "
out=$($DMUON sim -m qwen2.5-vl-3b -g 64 --ns-split 2 2>&1)
like "sim --ns-split 2, Qwen2.5-VL-3B, 64 GPUs: the split is kept" "$out" "--ns-split's split matrices kept (without them: "
out=$($DMUON sim -m "$DM_SRCDIR/models/wall-oss-flow.json" -g 128 --ns-split auto 2>&1)
is "sim --ns-split auto, WALL-OSS, 128 GPUs: P = 2, 4, 8 simulated beside none, one kept" \
    "$(printf '%s\n' "$out" | grep -cE -- '--ns-split auto: [248] kept \(none [0-9.]+ ms, 2 [0-9.]+ ms, 4 [0-9.]+ ms, 8 [0-9.]+ ms\)')" 1
# --publish 1 (WALL-OSS on 64 A800s): the embedding's 625 MB all-gather, which started the step with
# nothing beside it, runs at the end beside the NS tail: dmuon's step shorter, within AdamW's
st() { printf '%s\n' "$1" | sed -n 's/.*: step \([0-9.]*\) ms.*/\1/p'; }
w="$DM_SRCDIR/models/wall-oss-flow.json"
s0=$(st "$($DMUON sim -m "$w" -g 64 --quiet 2>&1)") s1=$(st "$($DMUON sim -m "$w" -g 64 --publish 1 --quiet 2>&1)")
s3=$(st "$($DMUON sim -m "$w" -g 64 --publish 1 --steps 3 --quiet 2>&1)")
sa=$(st "$($DMUON sim -m "$w" -g 64 --strategy adamw --quiet 2>&1)")
is "sim --publish 1, WALL-OSS, 64 GPUs: dmuon's step shorter ($s0 -> $s1 ms; 3 steps $s3; adamw $sa)" \
    "$(awk -v a="$s0" -v b="$s1" -v c="$s3" -v d="$sa" 'BEGIN{print (b < a && c < a && b < d * 1.001) ? "yes" : "no"}')" yes
# --publish auto: 1 on more than one GPU (prefetching overlap, zero 2), none on one (its fetches are
# the identity) nor with --overlap none
n_pub() { $DMUON plan -m qwen2.5-0.5b -g "$1" --tokens 1024 --publish auto $2 -o "$tmp/pa.json" >/dev/null 2>&1 &&
    printf '%s %s' "$(grep -c '"publish"' "$tmp/pa.json")" "$(grep -o 'publish=[0-9]*' "$tmp/pa.json" | head -1)"; }
is "plan --publish auto: 4 GPUs publish the first layer, 1 GPU and --overlap none nothing" \
    "$(n_pub 4) | $(n_pub 1) | $(n_pub 4 '--overlap none')" "4 publish=1 | 0  | 0 "
# the progress line of sim and plan: only with --progress when stderr is not a terminal, ended by a
# newline there, and the report the same with it or without
sa=$($DMUON sim -m qwen2.5-0.5b -g 8 --progress 2>"$tmp/perr" | grep -v '^speed')
sb=$($DMUON sim -m qwen2.5-0.5b -g 8 2>"$tmp/nerr" | grep -v '^speed')
is "sim --progress: the report as without it" "$sa" "$sb"
is "sim: no progress line when stderr is not a terminal" "$(cat "$tmp/nerr")" ""
like "sim --progress: the candidates named as they are simulated" "$(tr '\r' '\n' <"$tmp/perr")" "lpt: simulating its "
is "sim --progress: the line ended by one newline" "$(tail -c 1 "$tmp/perr" | od -An -c | tr -d ' ')" '\n'
$DMUON sim -m qwen2.5-0.5b -g 8 --progress --trace "$tmp/p.csv" >/dev/null 2>"$tmp/perr"
like "sim --progress --trace: the final simulation named" "$(tr '\r' '\n' <"$tmp/perr")" "simulating the plan's "
pa=$($DMUON plan -m qwen2.5-0.5b -g 8 --progress 2>"$tmp/perr" | grep '^program')
pb=$($DMUON plan -m qwen2.5-0.5b -g 8 --no-progress 2>"$tmp/nerr" | grep '^program')
is "plan --progress: the same program as with --no-progress" "$pa" "$pb"
is "plan --no-progress: nothing on stderr" "$(cat "$tmp/nerr")" ""
like "plan --progress: a candidate named" "$(tr '\r' '\n' <"$tmp/perr")" "lpt: assigning owners"
rm -rf "$tmp"
tap_end
