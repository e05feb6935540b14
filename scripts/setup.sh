#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package dtnn needs, builds it, and runs what was asked:
#   scripts/setup.sh train   install, build, train the default CNN on Fashion-MNIST (one epoch) and test it
#   scripts/setup.sh test    install, build, run the whole test suite (what CI runs), then the I/O tests again
#                            under AddressSanitizer
#   scripts/setup.sh build   install and build only
#   scripts/setup.sh bench   install the benchmark peers too (python3-torch, oneDNN), then build
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
action="${1:-build}"
case "$action" in
  train|test|build|bench) ;;
  *) echo "setup.sh: unknown action '$action', expected train, test, build or bench" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config
  libstarpu-dev libhwloc-dev
  libblis-dev
  libopenmpi-dev openmpi-bin
  libhdf5-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist
)
# The test suite checks PyTorch interchange (tools/*.py) with Debian's torch and h5py.
if [ "$action" = test ] || [ "$action" = bench ]; then
  packages+=(python3 python3-torch python3-numpy python3-h5py)
fi
if [ "$action" = bench ]; then
  packages+=(libdnnl-dev hdf5-tools)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build="$here/build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"

case "$action" in
  train)
    exec "$build/bin/dtnn" train --model simplecnn --dataset fashion-mnist --epochs 1 --batch-size 64 \
      --report "$build/train-report.json"
    ;;
  test)
    (cd "$build" && ctest --output-on-failure --timeout 1200)
    # Corrupt and truncated files (checkpoints, datasets) once more under AddressSanitizer and UBSan: a bad
    # file must give an error, never a memory error.
    asan="$here/build-asan"
    cmake -S "$here" -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DDTNN_SANITIZE=ON -DDTNN_BUILD_BENCH=OFF
    cmake --build "$asan" -j "$(nproc)" --target test_io
    cd "$asan"
    exec ctest --output-on-failure --timeout 1200 -R '^io$'
    ;;
esac
