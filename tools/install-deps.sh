#!/bin/sh
# install-deps.sh: install the Debian packages dmuon needs to build and test (run as root).
# CUDA and NCCL are optional and not installed here; configure finds them under /usr/local/cuda.
# libblis-dev: an optimized CBLAS for the CPU backend's GEMMs (configure falls back to GSL's).
set -e
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential autoconf automake pkg-config \
    libgsl-dev liblpsolve55-dev libblis-dev \
    libopenmpi-dev openmpi-bin gnuplot-nox valgrind >/dev/null
