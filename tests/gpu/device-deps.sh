#!/usr/bin/env bash
# Packs, on this (Debian 12) machine, what the whole project needs at build time beside CUDA
# and that a GPU machine's image may lack: the header-only JSON and CLI11 libraries with their
# CMake configs, GoogleTest's static libraries, and OpenBLAS with its Fortran runtime. The
# archive, build-cuda/device-deps.tar.xz (git-ignored), travels to the device with the `carry`
# option; tests/gpu/device-check.sh unpacks it there only if configuring with the image's own
# packages fails. MPI is not packed: where the image has none, the check builds with the
# single-process stand-in (tests/gpu/mpi-single, -DTRIDENT_MPI_SINGLE=ON).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
D=$STAGE/device-deps
ARCH_LIB=lib/x86_64-linux-gnu
mkdir -p "$D/include" "$D/share/cmake" "$D/lib" "$D/$ARCH_LIB/cmake"

# nlohmann-json3-dev and libcli11-dev: headers plus relocatable CMake configs (their targets
# find the headers two or three directories above the config file).
cp -r /usr/include/nlohmann "$D/include/"
cp -r /usr/share/cmake/nlohmann_json "$D/share/cmake/"
cp -r /usr/include/CLI "$D/include/"
cp -r /usr/share/cmake/CLI11 "$D/share/cmake/"
# libgtest-dev: static libraries, headers, CMake config.
cp -r /usr/include/gtest /usr/include/gmock "$D/include/"
cp /usr/$ARCH_LIB/libgtest.a /usr/$ARCH_LIB/libgtest_main.a /usr/$ARCH_LIB/libgmock.a \
   /usr/$ARCH_LIB/libgmock_main.a "$D/$ARCH_LIB/"
cp -r /usr/$ARCH_LIB/cmake/GTest "$D/$ARCH_LIB/cmake/"
# OpenBLAS (pthread build) and what it links: libgfortran, libquadmath. CMake's FindBLAS looks
# for libopenblas.so in the prefix's lib/; at run time LD_LIBRARY_PATH points there.
cp -L /usr/$ARCH_LIB/libopenblas.so.0 /usr/$ARCH_LIB/libgfortran.so.5 \
   /usr/$ARCH_LIB/libquadmath.so.0 "$D/lib/"
ln -s libopenblas.so.0 "$D/lib/libopenblas.so"
for h in cblas.h openblas_config.h f77blas.h; do
  cp -L /usr/include/x86_64-linux-gnu/$h "$D/include/"
done

mkdir -p "$ROOT/build-cuda"
tar -C "$STAGE" -cJf "$ROOT/build-cuda/device-deps.tar.xz" device-deps
ls -la "$ROOT/build-cuda/device-deps.tar.xz"
