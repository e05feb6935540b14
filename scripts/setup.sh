#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package dtnn needs, builds it, and runs what was asked:
#   scripts/setup.sh train   install, build the program (only), train the default CNN on Fashion-MNIST (one epoch)
#                            and test it
#   scripts/setup.sh test    install, build, run the whole test suite (what CI runs), then the simulation
#                            configuration (SimGrid) and its tests, each fuzz harness for 5 s (scripts/fuzz.sh), then
#                            the I/O tests again under AddressSanitizer
#   scripts/setup.sh build   install and build only
#   scripts/setup.sh bench   install the benchmark peers too (python3-torch, oneDNN, matplotlib for the plots), then build
#
# StarPU: dtnn is always built against a StarPU of its own, built from Debian's source package (1.3.10) into a
# prefix outside the clone by scripts/build_starpu.sh (up to 256 CPU workers, FxT, MPI, CUDA where nvcc is at
# $CUDA_HOME, default /usr/local/cuda), reused while its version and options are unchanged. Every
# configuration below (CPU, CUDA, sanitizers) shares that one build; binaries load it through their RPATH.
# `train`, `build` and `bench` on a machine without a GPU build it without CUDA: a CUDA StarPU links cudart,
# cuBLAS and cuSPARSE, which every process then loads (~190 MiB resident, docs/building.md), GPU or not. `test`
# keeps the CUDA one wherever nvcc exists, for build-cuda.
# CUDA: with DTNN_CUDA=1, or when a GPU is present (DTNN_CUDA=auto, the default) and nvcc exists, dtnn is
# configured with its CUDA codelets. DTNN_CUDA=0 never does (and its StarPU has no CUDA). `test` also builds the
# CUDA configuration in build-cuda wherever nvcc exists, GPU or not, and runs its CUDA tests (they skip without
# a GPU), so that it keeps compiling and linking.
# Simulation: `test` also builds the SimGrid variant of StarPU (scripts/build_starpu.sh --simgrid, Debian's
# libsimgrid-dev) and dtnn's simulation configuration against it in build-simgrid (DTNN_SIMGRID=ON: the program
# and the simulation tests, docs/simulation.md); `simgrid` does only that.
# Tests: `test` runs them with DTNN_TEST_STRICT=1 unless told otherwise: it installed PyTorch, h5py and Fashion-MNIST
# and built StarPU with FxT, so a test that would skip for want of one fails instead (tests/support/environment.hpp).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
action="${1:-build}"
case "$action" in
  train|test|build|bench|simgrid) ;;
  *) echo "setup.sh: unknown action '$action', expected train, test, build, bench or simgrid" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config
  libhwloc-dev libfxt-dev
  libblis-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  libhdf5-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev libarchive-dev
  dataset-fashion-mnist
  fortunes
)
# The test suite checks PyTorch interchange (tools/*.py) with Debian's torch and h5py; its network tests and
# bench/overlap.py --network build a cluster of namespaces with ip and tc (scripts/netns_cluster.sh).
if [ "$action" = test ] || [ "$action" = bench ]; then
  packages+=(python3 python3-torch python3-numpy python3-h5py iproute2)
fi
# The program's and the simulation's tests extract machine archives (.tar.xz) with tar, which needs xz.
if [ "$action" = test ] || [ "$action" = simgrid ]; then
  packages+=(libsimgrid-dev xz-utils)
fi
# The fuzz harnesses (scripts/fuzz.sh): clang with the libFuzzer, ASan and UBSan run-time libraries it links.
if [ "$action" = test ]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi
# Debian's own StarPU only for bench/fxt_overhead.py, which compares dtnn built against it with our build; jemalloc
# and tcmalloc for PyTorch at its best in bench/compare_pytorch.py (glibc's malloc page-faults its tensors in every
# step).
if [ "$action" = bench ]; then
  packages+=(hdf5-tools libstarpu-dev python3-matplotlib libjemalloc2 libgoogle-perftools4)
fi

# Where the time goes: phase NAME closes the phase begun at the previous call (or the start), and `test` prints the
# list at its end (CI's budget is managed with these numbers, docs/testing.md).
phase_start=$SECONDS
phases=()
phase() {
  phases+=("$(printf '%6d s  %s' $((SECONDS - phase_start)) "$1")")
  phase_start=$SECONDS
}
print_phases() {
  echo "setup.sh: where the time went (${SECONDS} s in all):"
  printf '  %s\n' "${phases[@]}"
}

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

if [ "$action" = test ]; then
  export DTNN_TEST_STRICT="${DTNN_TEST_STRICT:-1}"
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
cuda_mode="${DTNN_CUDA:-auto}"
case "$cuda_mode" in
  0|1|auto) ;;
  *) echo "setup.sh: DTNN_CUDA='$cuda_mode', expected 0, 1 or auto" >&2; exit 2 ;;
esac
have_nvcc=0
[ -x "$cuda_home/bin/nvcc" ] && have_nvcc=1
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then have_gpu=1; fi
if [ "$cuda_mode" = 1 ] && [ "$have_nvcc" = 0 ]; then
  echo "setup.sh: DTNN_CUDA=1 but no nvcc at $cuda_home/bin/nvcc (set CUDA_HOME)" >&2
  exit 2
fi
use_cuda=0
if [ "$cuda_mode" = 1 ] || { [ "$cuda_mode" = auto ] && [ "$have_gpu" = 1 ] && [ "$have_nvcc" = 1 ]; }; then
  use_cuda=1
fi

starpu_options=()
if [ "$cuda_mode" = 0 ] || { [ "$use_cuda" = 0 ] && [ "$action" != test ]; }; then
  starpu_options+=(--cuda off)
fi
starpu_prefix=""
# `simgrid` needs only the SimGrid StarPU (simgrid_config).
if [ "$action" != simgrid ]; then
  starpu_prefix="$(bash "$here/scripts/build_starpu.sh" "${starpu_options[@]}" | tail -n 1)"
fi
phase "packages and StarPU"

# Configures and builds dtnn in $1 against our StarPU (further CMake options after it; DTNN_TARGET: build only
# those targets, separated by spaces), then checks that its program loads that StarPU.
build_config() {
  local dir="$1"
  shift
  cmake -S "$here" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDTNN_STARPU_PREFIX="$starpu_prefix" "$@"
  local targets=()
  [ -z "${DTNN_TARGET:-}" ] || read -r -a targets <<< "$DTNN_TARGET"
  cmake --build "$dir" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
  [ -x "$dir/bin/dtnn" ] || return 0
  local loaded
  loaded="$(ldd "$dir/bin/dtnn" | awk '/libstarpu-1.3/ {print $3}')"
  case "$loaded" in
    "$starpu_prefix"/*) ;;
    *) echo "setup.sh: $dir/bin/dtnn loads StarPU from '$loaded', expected $starpu_prefix/lib" >&2; exit 1 ;;
  esac
}
cuda_options=(-DDTNN_CUDA=ON -DCMAKE_CUDA_COMPILER="$cuda_home/bin/nvcc")

# The simulation configuration: dtnn against the SimGrid StarPU, in build-simgrid; its tests simulate simplecnn on
# the machine folder committed in tests/data (seconds).
simgrid_config() {
  local simgrid_prefix
  simgrid_prefix="$(bash "$here/scripts/build_starpu.sh" --simgrid | tail -n 1)"
  starpu_prefix="$simgrid_prefix" build_config "$here/build-simgrid" -DDTNN_SIMGRID=ON -DDTNN_CUDA=OFF \
    -DDTNN_BUILD_BENCH=OFF
  phase "build-simgrid (its StarPU included)"
  (cd "$here/build-simgrid" && ctest --output-on-failure --timeout 600)
  phase "simulation tests"
}
if [ "$action" = simgrid ]; then
  simgrid_config
  exit 0
fi

build="$here/build"
# `train` builds only the program it runs (the libraries and dtnn; no test or benchmark program).
build_targets=""
[ "$action" = train ] && build_targets="dtnn"
if [ "$use_cuda" = 1 ] && [ "$action" != test ]; then
  DTNN_TARGET="$build_targets" build_config "$build" "${cuda_options[@]}"
else
  DTNN_TARGET="$build_targets" build_config "$build" -DDTNN_CUDA=OFF
fi
phase "build"

case "$action" in
  train)
    exec "$build/bin/dtnn" train --model simplecnn --dataset fashion-mnist --epochs 1 --batch-size 64 \
      --report "$build/train-report.json"
    ;;
  test)
    # Each test's duration as JUnit XML (ctest's entries, GoogleTest's cases), then the slowest listed: the suite's
    # time is managed with numbers (docs/testing.md).
    rm -rf "$build/test-results"
    (cd "$build" && ctest --output-on-failure --timeout 1200 --output-junit "$build/test-results/ctest.xml")
    python3 "$here/scripts/slowest_tests.py" "$build/test-results"
    phase "test suite"
    if [ "$cuda_mode" != 0 ] && [ "$have_nvcc" = 1 ]; then
      # The CUDA configuration: compiles and links everywhere nvcc exists; its CUDA tests compare every codelet
      # on a GPU with its CPU version (they skip without a GPU). With a GPU, the whole suite runs in it too.
      # Without a GPU only what holds CUDA code and the tests that run are built: the libraries, the program and
      # the cuda and runtime tests (the other test programs have no CUDA code; building them cost CI ~2 minutes).
      if [ "$have_gpu" = 1 ]; then
        build_config "$here/build-cuda" "${cuda_options[@]}" -DDTNN_BUILD_BENCH=OFF
        phase "build-cuda"
        (cd "$here/build-cuda" && ctest --output-on-failure --timeout 1200)
      else
        DTNN_TARGET="dtnn api_example test_cuda test_runtime" build_config "$here/build-cuda" "${cuda_options[@]}" \
          -DDTNN_BUILD_BENCH=OFF
        phase "build-cuda"
        (cd "$here/build-cuda" && ctest --output-on-failure --timeout 1200 -R '^(cuda|runtime)$')
      fi
      phase "CUDA configuration's tests"
    fi
    simgrid_config
    # Every reader of untrusted input fuzzed a few seconds (fuzz/, docs/fuzzing.md): clang, ASan, UBSan and
    # libFuzzer in build-fuzz; a finding fails the run and is left in build-fuzz/findings.
    DTNN_STARPU_PREFIX="$starpu_prefix" bash "$here/scripts/fuzz.sh" 5
    phase "fuzzing (build-fuzz and 5 s a harness)"
    # Corrupt and truncated files (checkpoints, datasets) once more under AddressSanitizer and UBSan: a bad
    # file must give an error, never a memory error.
    asan="$here/build-asan"
    DTNN_TARGET=test_io build_config "$asan" -DCMAKE_BUILD_TYPE=Debug -DDTNN_SANITIZE=ON -DDTNN_BUILD_BENCH=OFF \
      -DDTNN_CUDA=OFF
    phase "build-asan"
    status=0
    (cd "$asan" && ctest --output-on-failure --timeout 1200 -R '^io$') || status=$?
    phase "I/O tests under AddressSanitizer"
    print_phases
    exit "$status"
    ;;
esac
