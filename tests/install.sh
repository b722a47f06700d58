#!/bin/sh
# install.sh: an installed dmuon reads its installed data. `make install DESTDIR=STAGE`, then the
# staged program runs from another folder with the source and build trees hidden (a private
# mount namespace lays empty folders over them; where none can be made, the trees stay and the
# paths the commands print are checked instead): dmuon models, dmuon scale --gpus 8 --no-plots,
# dmuon regress --quick. Also: the data and a man page per command are installed.
. "$DM_SRCDIR/tests/tap.sh"
: "${DM_BUILDDIR:?}" "${DM_BINDIR:?}" "${DM_PKGDATADIR:?}" "${DM_MAN1DIR:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dmuon-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
stage=$tmp/stage
unset DMUON_MODELS DMUON_COSTS DMUON_PLOTS

${MAKE:-make} -C "$DM_BUILDDIR" install DESTDIR="$stage" >"$tmp/install.log" 2>&1
rc=$?
is "make install DESTDIR=STAGE succeeds" "$rc" 0
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/install.log" | tail -20
bin=$stage$DM_BINDIR/dmuon
data=$stage$DM_PKGDATADIR
ok "dmuon installed" test -x "$bin"
for f in models/qwen2.5-7b.json models/wall-oss-flow.json costs/h200.csv costs/roofline.csv calib/h200x2.calib \
    costs/h200-work.csv costs/h200-work-cool.csv calib/h200.calib calib/h200-asrun.calib \
    baselines/cpu-2core/quick.tsv baselines/cpu-2core/full.tsv baselines/h200/full.tsv plots/scale.gp plots/styles.gp \
    plots/compare.gp kernels/autotune_h200.tsv; do
    ok "installed: $f" test -f "$data/$f"
done
is "every bundled model installed" "$(cd "$data/models" 2>/dev/null && ls *.json)" "$(cd "$DM_SRCDIR/models" && ls *.json)"
ok "dmuon.1 installed" test -f "$stage$DM_MAN1DIR/dmuon.1"
for c in $("$bin" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p'); do
    ok "man page of $c installed" test -f "$stage$DM_MAN1DIR/dmuon-$c.1"
done

# The trees to hide, the inner one first (the build tree may lie inside the source tree).
src=$(cd "$DM_SRCDIR" && pwd -P)
build=$(cd "$DM_BUILDDIR" && pwd -P)
if [ ${#build} -ge ${#src} ]; then inner=$build outer=$src; else inner=$src outer=$build; fi
hidden=no
case "$tmp/" in
"$src"/* | "$build"/*) ;; # the stage itself would be hidden
*) unshare -rm sh -c 'mount -t tmpfs none "$1"' sh "$tmp" 2>/dev/null && hidden=yes ;;
esac
mkdir -p "$tmp/work"
# A sanitizer build's LeakSanitizer suppressions (.ci/run names fuzz/lsan.supp in the source tree)
# must stay readable once the trees are hidden: the staged program reads a copy in the stage.
lsan= supp=
oldifs=$IFS IFS=:
for kv in ${LSAN_OPTIONS:-}; do
    case $kv in suppressions=*) supp=${kv#suppressions=} kv=suppressions=$tmp/lsan.supp ;; esac
    lsan=${lsan:+$lsan:}$kv
done
IFS=$oldifs
if [ -n "$supp" ] && [ -r "$supp" ] && cp "$supp" "$tmp/lsan.supp"; then export LSAN_OPTIONS="$lsan"; fi
# staged CMD...: the staged dmuon from $tmp/work, the trees hidden when that is possible
staged() {
    if [ $hidden = yes ]; then
        unshare -rm sh -c 'mount -t tmpfs none "$1" && { [ "$1" = "$2" ] || mount -t tmpfs none "$2"; } &&
            test ! -e "$1/configure.ac" -a ! -e "$2/configure.ac" && cd "$3" && shift 3 && exec "$@"' \
            sh "$inner" "$outer" "$tmp/work" "$bin" "$@"
    else
        (cd "$tmp/work" && "$bin" "$@")
    fi
}
if [ $hidden = yes ]; then echo "# source and build trees hidden (mount namespace)"
else echo "# no mount namespace here: the trees stay, the paths printed are checked"; fi
[ $hidden = no ] || ok "the trees are out of sight of the staged program" staged --version

out=$(staged models 2>&1)
is "installed dmuon models: exit 0" "$?" 0
like "installed dmuon models lists wall-oss-flow" "$out" "wall-oss-flow"
like "installed dmuon models lists qwen2.5-72b" "$out" "qwen2.5-72b"

out=$(staged scale --gpus 8 --no-plots 2>&1)
is "installed dmuon scale --gpus 8 --no-plots: exit 0" "$?" 0
like "scale reads the installed model" "$out" "($data/models/wall-oss-flow.json)"
like "scale wrote its table in the working folder" "$(ls "$tmp/work/dmuon-scale" 2>&1)" "scale.csv"
like "scale reads the installed kernel table" "$out" "($data/costs/h200.csv"

out=$(CI=true staged regress --quick --no-gpu --machine cpu-2core 2>&1)
is "installed dmuon regress --quick: exit 0" "$?" 0
like "regress compares with the installed baseline" "$out" "baseline    $data/baselines/cpu-2core/quick.tsv"
like "regress plans on the installed pinned table" "$out" "($data/costs/roofline.csv"
like "regress: no prediction changed" "$out" " 0 changed, 0 worse"

out=$(staged sim --model qwen2.5-0.5b --gpus 2 --cluster h200x2 --calibration h200x2 2>&1)
is "installed dmuon sim --calibration h200x2 (a name): exit 0" "$?" 0
like "the named calibration is the installed one" "$out" "$data/calib/h200x2.calib"
out=$(staged sim --model qwen2.5-0.5b --gpus 1 --cluster h200 --calibration h200 2>&1)
is "installed dmuon sim --calibration h200 (the power model's): exit 0" "$?" 0
like "its installed table at full clock" "$out" "$data/calib/../costs/h200-work-cool.csv"
like "its clock line" "$out" "clock          power limit 700 W"

# the GPU plug-in (a build with CUDA): installed, and the staged program loads its own
if "$DMUON" --version | grep -q '^GPU side: /'; then
    ok "installed: the GPU plug-in" test -f "$stage$DM_PKGLIBDIR/dmuon-gpu.so"
    like "the staged dmuon loads the staged plug-in" "$(staged --version 2>&1)" "GPU side: $stage$DM_PKGLIBDIR/dmuon-gpu.so"
else
    echo "ok $((tap_n += 1)) # SKIP no GPU plug-in in this build"
fi

if [ $hidden = no ]; then # the trees are there: nothing may have come from them
    out=$(cd "$tmp/work" && "$bin" scale --gpus 8 --no-plots --strategies dmuon 2>&1; CI=true "$bin" regress --quick --no-gpu \
        --machine cpu-2core 2>&1)
    case "$out" in *"$src/models"* | *"$src/traces/baselines"*) r=found ;; *) r=none ;; esac
    is "no model or baseline read from the source tree" "$r" none
fi

${MAKE:-make} -C "$DM_BUILDDIR" uninstall DESTDIR="$stage" >"$tmp/uninstall.log" 2>&1
is "make uninstall DESTDIR=STAGE succeeds" "$?" 0
is "uninstall leaves no file behind" "$(find "$stage" -type f | sed "s|$stage||" | head -5)" ""
tap_end
