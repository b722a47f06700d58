#!/bin/bash
# tools/build-device.sh: build the GPU binaries on this (build) machine and collect what a bare
# GPU machine of the device tool lacks into .devreal/, the layout real/run_device.sh,
# valid/run_device.sh and traces/kernels/run_device.sh expect:
#   .devreal/dmuon, .devreal/test_ns_gpu,    the binaries (CUDA kernels for --with-cuda-arch)
#   .devreal/test_wk_gpu, .devreal/dmuon-gpu.so  and dmuon's GPU plug-in, found beside it
#   .devreal/libbase/                        shared libraries the device has no package for
#                                            (GSL, lp_solve's colamd and SuiteSparse config,
#                                            a CBLAS when linked): everything ldd
#                                            resolves except the C runtime, CUDA, cuBLAS, NCCL
#                                            and Open MPI, which the device has (its own
#                                            Open MPI 4 is ABI-compatible with Debian 12's)
#   .devreal/MANIFEST                        what was built (git revision, configure line,
#                                            CUDA arch list) and each library's origin
# The folder is ignored by git; pass it to the device tool as `carry: [".devreal"]`.
#   tools/build-device.sh [CONFIGURE ARGS...]    (default: the tree's configuration, or a new
#                                                  ./configure when the tree has none)
#   DEVREAL_TESTS=0 tools/build-device.sh        without the two test binaries (8 MiB less, for
#                                                  calls that run no test stage: the tree and
#                                                  the carried folder share the tool's 64 MiB)
# Exit status 0 when both binaries were built with CUDA; 1 otherwise, with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'build-device: %s\n' "$*" >&2; }
if [ $# -gt 0 ] || [ ! -f config.status ]; then
    [ -x configure ] || ./autogen.sh >/dev/null
    say "./configure $*"
    ./configure "$@" >/dev/null
fi
if ! grep -q '^#define DM_HAVE_CUDA 1' config.h 2>/dev/null; then
    say "this build has no CUDA (configure found no nvcc/cuBLAS): nothing to carry"
    exit 1
fi
jobs=$(nproc 2>/dev/null || echo 2)
BINS="dmuon dmuon-gpu.so"
[ "${DEVREAL_TESTS:-1}" = 0 ] || BINS="$BINS tests/test_ns_gpu tests/test_wk_gpu"
say "make -j$jobs $BINS"
# shellcheck disable=SC2086
make -j"$jobs" $BINS >/dev/null
D=.devreal
T=$(mktemp -d "$PWD/.devreal.tmp.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/libbase"
# shellcheck disable=SC2086
cp $BINS "$T/"
{
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "configure: $(sed -n 's/^  \$ \(.*\)/\1/p' config.log | head -1)"
    echo "nvcc gencode: $(sed -n 's/^NVCC_GENCODE = //p' Makefile)"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo "libraries:"
} > "$T/MANIFEST"
# What the device has: the C runtime, CUDA (cudart, cuBLAS, cuBLASLt), NCCL and Open MPI with
# its helpers (hwloc, libevent, udev, zlib come with it).
device_has() {
    case "$(basename "$1")" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libgcc_s.so* | \
        libstdc++.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libnccl.so* | libmpi.so* | \
        libopen-rte.so* | libopen-pal.so* | libhwloc.so* | libevent*.so* | libudev.so* | libz.so*) return 0 ;;
    esac
    return 1
}
for bin in $BINS; do
    ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
    device_has "$lib" && continue
    cp -L "$lib" "$T/libbase/"
    pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1 || true)
    ver=$([ -n "$pkg" ] && dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
    echo "  $(basename "$lib")  ${pkg:-?} ${ver}" >> "$T/MANIFEST"
done
# symbols and debug sections are not needed there and count against the 64 MiB the device tool
# carries with the tree (the kernels' fatbins stay: cuobjdump reads the SASS from them)
strip --strip-unneeded "$T"/dmuon* "$T"/test_* "$T"/libbase/*.so* 2>/dev/null || true
rm -rf "$D"
mv "$T" "$D"
trap - EXIT
size=$(du -sm "$D" | cut -f1)
say "wrote $D/ ($size MiB): $(ls "$D" | tr '\n' ' ')"
# the same packed (carry [".devreal.txz"]; tools/device-run.sh unpacks it when .devreal/ is not
# there): the tree's traces leave too little of the 64 MiB for the unpacked binaries
tar -cJf "$D.txz.tmp" -C "$(dirname "$D")" "$(basename "$D")" && mv "$D.txz.tmp" "$D.txz"
say "wrote $D.txz ($(du -sm "$D.txz" | cut -f1) MiB)"
