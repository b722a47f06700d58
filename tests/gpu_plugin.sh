#!/bin/sh
# gpu_plugin.sh: the dmuon program starts and works without CUDA (core/gpu_api.h): it links no
# CUDA, cuBLAS or NCCL library; planning and simulating load none of them; the GPU side is a
# plug-in, loaded on demand, and a missing or foreign plug-in gives one clear error (bench
# kernels, run --backend gpu) or the CPU backend (run's default), never a crash.
. "$DM_SRCDIR/tests/tap.sh"
: "${DMUON:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# 1. the program's own dependencies: no CUDA library among them
if command -v readelf >/dev/null 2>&1; then
    needed=$(readelf -d "$DMUON" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    is "dmuon needs no CUDA, cuBLAS or NCCL library (needs: $needed)" \
        "$(printf '%s\n' "$needed" | grep -c 'cudart\|cublas\|nccl')" 0
else
    echo "ok $((tap_n += 1)) # SKIP no readelf"
fi

# 2. a plan and a simulation load no CUDA library (the dynamic loader's own record)
LD_DEBUG=files "$DMUON" sim --model qwen2.5-0.5b --gpus 8 --cluster a800 >"$tmp/sim.out" 2>"$tmp/ld.log"
rc=$?
is "dmuon sim runs (exit $rc)" "$rc" 0
is "dmuon sim loads no CUDA library" "$(grep -c 'file=.*\(cudart\|cublas\|nccl\|dmuon-gpu\)' "$tmp/ld.log")" 0
like "dmuon sim reports a step" "$(cat "$tmp/sim.out")" "step"

if "$DMUON" --version | grep -q '^GPU side: not in this build'; then
    # a build without CUDA: every GPU command says so, --backend gpu too; the default runs on the CPU
    out=$("$DMUON" bench kernels 2>&1)
    is "no GPU side in this build: bench kernels exits 1" "$?" 1
    like "no GPU side in this build: bench kernels says so" "$out" "the GPU side is not in this build"
    if "$DMUON" --help | grep -q '^  run '; then
        cp "$DM_SRCDIR/tests/data/tiny_cpu.json" "$tmp/tiny.json"
        out=$("$DMUON" run --model "$tmp/tiny.json" --tokens 8 --steps 2 2>&1)
        rc=$?
        is "no GPU side in this build: run's default backend is the CPU (exit $rc)" "$rc" 0
        out=$("$DMUON" run --backend gpu --model "$tmp/tiny.json" --tokens 8 --steps 2 2>&1)
        like "no GPU side in this build: run --backend gpu says so" "$out" "the GPU side is not in this build"
    fi
else
    # 3. no plug-in where DMUON_GPU points: one clear error, or the CPU backend
    out=$(DMUON_GPU="$tmp/none.so" "$DMUON" bench kernels --shapes 128x128 2>&1)
    rc=$?
    is "bench kernels without the plug-in: exit 1" "$rc" 1
    like "bench kernels without the plug-in: says where it looked" "$out" "$tmp/none.so (\$DMUON_GPU)"
    out=$(DMUON_GPU="$tmp/none.so" "$DMUON" bench work --help 2>&1)
    rc=$?
    is "bench work --help without the plug-in: exit 0" "$rc" 0
    like "bench work --help without the plug-in: says why" "$out" "not available here"

    # 4. something that is not a plug-in
    printf 'not an ELF file\n' >"$tmp/bad.so"
    out=$(DMUON_GPU="$tmp/bad.so" "$DMUON" bench kernels 2>&1)
    is "a file that is not a shared object: exit 1" "$?" 1
    like "a file that is not a shared object: the loader's reason" "$out" "cannot load the GPU side"
    libm=$(ldconfig -p 2>/dev/null | sed -n 's/.*libm\.so\.6 .*=> \(.*\)/\1/p' | head -1)
    if [ -n "$libm" ]; then
        out=$(DMUON_GPU="$libm" "$DMUON" bench kernels 2>&1)
        like "a shared object that is not dmuon's: refused" "$out" "not a dmuon GPU plug-in"
    else
        echo "ok $((tap_n += 1)) # SKIP no libm found by ldconfig"
    fi

    # 5. the executor: its default backend falls back to the CPU; --backend gpu says why not
    if "$DMUON" --help | grep -q '^  run '; then
        cp "$DM_SRCDIR/tests/data/tiny_cpu.json" "$tmp/tiny.json"
        out=$(DMUON_GPU="$tmp/none.so" "$DMUON" run --model "$tmp/tiny.json" --tokens 8 --steps 2 2>&1)
        rc=$?
        is "run without the plug-in: the default backend runs on the CPU (exit $rc)" "$rc" 0
        like "run without the plug-in: the CPU backend" "$out" "cpu"
        out=$(DMUON_GPU="$tmp/none.so" "$DMUON" run --backend gpu --model "$tmp/tiny.json" --tokens 8 --steps 2 2>&1)
        rc=$?
        is "run --backend gpu without the plug-in: fails" "$([ "$rc" -ne 0 ] && echo failed)" failed
        like "run --backend gpu without the plug-in: says where it looked" "$out" "is not installed: looked for"
        is "run --backend gpu without the plug-in: one error line" \
            "$(printf '%s\n' "$out" | grep -c 'looked for')" 1
    else
        echo "ok $((tap_n += 1)) # SKIP no dmuon run (no MPI)"
    fi
fi

# 6. a machine without CUDA: the CUDA folder hidden (a mount namespace, where that is allowed)
cuda=$(readelf -d "$DM_BUILDDIR/dmuon-gpu.so" 2>/dev/null | sed -n 's/.*R\(UN\)*PATH.*\[\(.*\)\]/\2/p' | cut -d: -f1)
if [ -f "$DM_BUILDDIR/dmuon-gpu.so" ] && [ -n "$cuda" ] && [ -d "$cuda" ] &&
    unshare -rm sh -c 'mount -t tmpfs none "$1"' sh "$cuda" 2>/dev/null; then
    nocuda() { unshare -rm sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh "$cuda" "$@"; }
    out=$(nocuda "$DMUON" sim --model qwen2.5-0.5b --gpus 8 --cluster a800 2>&1)
    is "without CUDA ($cuda hidden): dmuon sim runs" "$?" 0
    out=$(nocuda "$DMUON" --version 2>&1)
    like "without CUDA: --version says the GPU side cannot load, and why" "$out" "GPU side: not loadable here: cannot load"
    out=$(nocuda "$DMUON" bench kernels 2>&1)
    like "without CUDA: bench kernels names the missing library" "$out" ".so"
else
    echo "ok $((tap_n += 1)) # SKIP no CUDA folder to hide or no mount namespace here"
fi

# 7. --version names the GPU side
like "--version names the GPU side or says why not" "$("$DMUON" --version)" "GPU side"
tap_end
