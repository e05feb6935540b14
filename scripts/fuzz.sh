#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fuzzes every reader of untrusted input (fuzz/, docs/fuzzing.md): builds the libFuzzer harnesses with clang under
# AddressSanitizer and UBSan in build-fuzz (-DDTNN_FUZZ=ON), runs each for SECONDS (default 60) from its seeds
# (fuzz/corpus/<harness>), one after the other, and prints a table: harness, seconds, executions, crashes.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]     e.g. scripts/fuzz.sh 300 idx checkpoint
# Harnesses: idx cifar text h5dataset h5tokens checkpoint machine_folder machine_archive options (all by default).
# A run stops at its first finding (a crash, a sanitizer report, a leak, an input slower than 25 s, one allocation
# of ours over 128 MB, 2 GB resident), which libFuzzer writes to build-fuzz/findings/<harness>/ (crash-*, leak-*,
# timeout-*, oom-*); reproduce it with build-fuzz/bin/fuzz_<harness> FILE. The inputs a run found new coverage with
# stay in build-fuzz/corpus/<harness>, where the next run starts. Exit status 1 when a harness found something.
# Needs clang-14 and libclang-rt-14-dev (scripts/setup.sh test installs them); StarPU: $DTNN_STARPU_PREFIX, else
# scripts/build_starpu.sh's (the machine harnesses take its headers, the options harness the whole program).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
[ "$#" -gt 0 ] && shift
case "$seconds" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS '$seconds', expected a whole number of seconds" >&2; exit 2 ;;
esac
all=(idx cifar text h5dataset h5tokens checkpoint machine_folder machine_archive options)
harnesses=("$@")
[ "${#harnesses[@]}" -gt 0 ] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  [ -d "$here/fuzz/corpus/$h" ] || { echo "fuzz.sh: no harness '$h', expected one of ${all[*]}" >&2; exit 2; }
done
for tool in clang-14 clang++-14; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
done

prefix="${DTNN_STARPU_PREFIX:-}"
[ -n "$prefix" ] || prefix="$(bash "$here/scripts/build_starpu.sh" | tail -n 1)"
build="$here/build-fuzz"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DDTNN_FUZZ=ON -DDTNN_BUILD_TESTS=OFF -DDTNN_BUILD_BENCH=OFF -DDTNN_CUDA=OFF \
  -DDTNN_STARPU_PREFIX="$prefix" "${launcher[@]}" >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

# One scratch folder of the harnesses' files for the whole run, in memory where there is /dev/shm.
scratch="$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/dtnn-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
rows=()
found=0
for h in "${harnesses[@]}"; do
  findings="$build/findings/$h"
  corpus="$build/corpus/$h"
  mkdir -p "$findings" "$corpus"
  log="$build/findings/$h.log"
  # Inputs as long as the longest seed (at least libFuzzer's default 4096 bytes): a longer seed would be cut.
  longest="$(find "$here/fuzz/corpus/$h" -type f -printf '%s\n' | sort -n | tail -n 1)"
  max_len=$(( ${longest:-0} > 4096 ? longest : 4096 ))
  # One allocation of 128 MB is already far more than these small inputs can justify; the HDF5 harnesses keep that
  # limit on our allocations themselves, and libhdf5's are left to fail as they do outside (fuzz/fuzz_hdf5.hpp).
  malloc_limit=128
  case "$h" in h5dataset|h5tokens|checkpoint) malloc_limit=1048576 ;; esac
  start=$(date +%s)
  rc=0
  # No -ignore_crashes, no dictionary: a run stops at what it finds.
  TMPDIR="$scratch" "$build/bin/fuzz_$h" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
    -malloc_limit_mb="$malloc_limit" -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$here/fuzz/corpus/$h" \
    >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  runs="$(awk '/stat::number_of_executed_units:/ {print $2}' "$log" | tail -n 1)"
  [ -n "$runs" ] || runs="$(grep -o '#[0-9]*' "$log" | tail -n 1 | tr -d '#')"
  crashes=0
  if [ "$rc" != 0 ]; then
    crashes=1
    found=1
    echo "fuzz.sh: fuzz_$h found something (exit status $rc): $log" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|dtnn fuzz:|terminate called|  what\(\))' "$log" | head -n 8 >&2 || true
    ls -t "$findings" | head -n 1 | sed "s|^|  input: $findings/|" >&2
  fi
  rows+=("$(printf '%-16s %8s %12s %8s' "$h" "$took" "${runs:-?}" "$crashes")")
done

printf '%-16s %8s %12s %8s\n' harness seconds executions crashes
printf '%s\n' "${rows[@]}"
exit "$found"
