#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what bench/gpu_check.sh needs on a GPU machine that has CUDA, cuDNN, NCCL and PyTorch but no package
# manager: the CUDA configuration's binaries (dtnn, test_cuda) and every shared library they load that is not
# part of the C runtime or of CUDA (StarPU's CUDA build, BLIS, hwloc, Open MPI, HDF5, ...), into
# gpu-bundle.tar.xz at the root of the clone (ignored by git; carry it with the source tree).
#
#   scripts/gpu_bundle.sh [BUILD_DIR]     (default build-cuda; build it first: DTNN_CUDA=1 scripts/setup.sh test)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-cuda}"
for b in dtnn test_cuda; do
  [ -x "$build/bin/$b" ] || { echo "gpu_bundle.sh: no $build/bin/$b: build the CUDA configuration first" >&2; exit 2; }
done
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu-bundle/bin" "$stage/gpu-bundle/lib"
cp "$build/bin/dtnn" "$build/bin/test_cuda" "$stage/gpu-bundle/bin/"
# The C runtime, the compiler's runtime and CUDA's libraries come from the GPU machine itself.
skip='^(linux-vdso|libc\.|libm\.|libdl\.|libpthread\.|librt\.|ld-linux|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvidia|libnvrtc|libnvJitLink|libcusparse|libresolv|libnss_|libutil\.|libanl\.|libcrypt\.)'
for b in dtnn test_cuda; do
  ldd "$build/bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if ! [[ "$name" =~ $skip ]]; then
      cp -nL "$path" "$stage/gpu-bundle/lib/$name"
    fi
  done
done
strip --strip-unneeded "$stage/gpu-bundle/bin/"* "$stage/gpu-bundle/lib/"* 2>/dev/null || true
tar -C "$stage" -cJf "$here/gpu-bundle.tar.xz" gpu-bundle
echo "gpu_bundle.sh: $here/gpu-bundle.tar.xz ($(du -h "$here/gpu-bundle.tar.xz" | cut -f1)); libraries:"
ls "$stage/gpu-bundle/lib"
