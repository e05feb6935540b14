#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what bench/gpu_check.sh needs on a GPU machine that has CUDA 13, cuDNN 9 and NCCL but perhaps no package
# manager and another distribution: the CUDA configuration's binaries (dtnn, test_cuda), every shared library
# they load that is neither glibc nor CUDA's (StarPU's CUDA build, BLIS, hwloc, Open MPI, HDF5, ...), and the
# check itself, into gpu-bundle.tar.xz at the root of the clone (ignored by git; carry it with the source tree):
#
#   gpu-bundle/bin/{dtnn,test_cuda}
#   gpu-bundle/lib/            libraries the binaries need, found first (LD_LIBRARY_PATH of dtnn's commands only)
#   gpu-bundle/lib/compat/     libstdc++ and libgcc_s of the build machine, used only where the host's are missing
#                              or older than the binaries need (a newer host one serves the host's CUDA libraries too)
#   gpu-bundle/bench/{gpu_check.sh,gpu_pytorch.py,gpu_vs_cpu.py}
#
# glibc is never shipped (its loader and libc must match each other and the kernel interface of the host); CUDA's
# runtime, cuBLAS, cuDNN, NCCL and the driver's libraries come from the GPU machine.
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
root="$stage/gpu-bundle"
mkdir -p "$root/bin" "$root/lib/compat" "$root/bench"
cp "$build/bin/dtnn" "$build/bin/test_cuda" "$root/bin/"
cp "$here/bench/gpu_check.sh" "$here/bench/gpu_pytorch.py" "$here/bench/gpu_vs_cpu.py" "$root/bench/"
glibc='^(linux-vdso|ld-linux|libc\.|libm\.|libmvec\.|libdl\.|libpthread\.|librt\.|libresolv\.|libnss_|libutil\.|libanl\.|libBrokenLocale\.|libthread_db\.)'
from_host='^(libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvidia|libnvrtc|libnvJitLink|libcusparse|libcufft|libcurand)'
compat='^(libstdc\+\+|libgcc_s)\.'
for b in dtnn test_cuda; do
  ldd "$build/bin/$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if [[ "$name" =~ $glibc || "$name" =~ $from_host ]]; then
      continue
    elif [[ "$name" =~ $compat ]]; then
      cp -nL "$path" "$root/lib/compat/$name"
    else
      cp -nL "$path" "$root/lib/$name"
    fi
  done
done
strip --strip-unneeded "$root/bin/"* "$root/lib/"*.so* "$root/lib/compat/"* 2>/dev/null || true
# What the binaries were built against, for the check's report.
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  echo "cuda: $("${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  inc="${CUDA_HOME:-/usr/local/cuda}/include"
  echo "cudnn: $(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / { printf "%s%s", sep, $3; sep = "." }' "$inc/cudnn_version.h" 2>/dev/null)"
  echo "nccl: $(awk '/define NCCL_(MAJOR|MINOR|PATCH) / { printf "%s%s", sep, $3; sep = "." }' "$inc/nccl.h" 2>/dev/null)"
} >"$root/BUILD-INFO"
tar -C "$stage" -cJf "$here/gpu-bundle.tar.xz" gpu-bundle
echo "gpu_bundle.sh: $here/gpu-bundle.tar.xz ($(du -h "$here/gpu-bundle.tar.xz" | cut -f1)); libraries:"
(cd "$root/lib" && find . -type f | sed 's|^\./||' | sort)
