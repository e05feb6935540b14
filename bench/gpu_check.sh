#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU check of the CUDA backend: one script for a machine with an NVIDIA GPU, CUDA 13, cuDNN 9 and NCCL, perhaps
# no package manager, no internet, perhaps no python3, PyTorch or nvidia-smi. It runs dtnn's binaries from the
# bundle that scripts/gpu_bundle.sh makes (gpu-bundle.tar.xz), and writes every figure to ONE JSON file,
# $OUT/gpu_check.json (the device tool's output folder; else --out), with the whole log beside it
# (gpu_check.log). Parts, each with its own time-out inside one budget (--budget, 540 s: under 9 minutes):
#   host        what the machine is (nvidia-smi if there, glibc, python3);
#   binaries    the bundle unpacked, `ldd` of dtnn and test_cuda against the host's CUDA, cuDNN and NCCL (CUDA's
#               folder and the nvidia-* wheels that PyTorch brought); the bundle's libstdc++ only where the host's
#               is missing or too old;
#   test_cuda   every CUDA codelet against its CPU version, training steps on the GPU against the CPU, the CUDA
#               runtime's start-up: each test suite in a process of its own (a CUDA error that makes StarPU abort
#               costs that suite only);
#   dtnn        resnet50_imagenet on synthetic data, --batch 128, --steps 20 (the first half untimed), one tile,
#               --device cuda: training images/s;
#   pytorch     torchvision's resnet50, same batch and steps, on the same GPU (bench/gpu_pytorch.py), and the ratio;
#   tf32        the same two runs in TF32: dtnn --precision tf32 (cuDNN's and cuBLAS's TF32 math) against PyTorch
#               with allow_tf32 on (its default for convolutions), and the ratio;
#   startup     the start-up lines of `--device cuda --workers 0` (CPU workers: the cores less one per CUDA
#               worker) and `--device cpu --workers 0` (every core);
#   calibrate   `dtnn calibrate --device cuda` of the simulation's models (--calibrate, model:batch pairs) into
#               the machine archive $OUT/machine-gpu.tar.xz (StarPU's CUDA models and bus files, for
#               docs/simulation.md: `dtnn simulate --machine` reads it as it is; commit it as
#               bench/results/machines/<name>.tar.xz);
#   cpu_scaling images/s of --scaling-model (resnet18_cifar10, batch 64) on 1, 2, 4, ... CPU workers up to the
#               machine's cores, tiles = max(2, workers): every core of a real node;
#   cpu_bf16    --scaling-model on every core in fp32 against --precision bf16-amx --conv auto (AMX's TDPBF16PS,
#               which the GPU machines' Xeon hosts have; skipped where the CPU has no AMX-BF16): images/s and ratio;
#   device_all  --device all (CPU and GPU workers, placed by dmdas) against --device cuda, on a model whose tasks
#               a CPU core can take (--all-model resnet20_cifar10, batch 256, 8 tiles);
#   cpu_vs_gpu  bench/gpu_vs_cpu.py: the weights that 3 training steps give on the GPU against the CPU's, per
#               step and tensor, and a second GPU run against the first (needs python3 with numpy and h5py).
# --parts LIST runs only those (host and binaries always run); default: every part.
# A part that cannot run for a reason outside dtnn (no GPU, no python3, no torch, no nvidia-smi) is "skipped" with
# the reason in the JSON; the exit status is 1 only when a part failed, timed out or crashed.
#
#   bench/gpu_check.sh [--steps 20] [--batch 128] [--budget 540] [--all-model NAME] [--all-batch 256]
#                      [--all-tiles 8] [--all-steps 30] [--calibrate M:B,...|none] [--scaling-model M|none]
#                      [--parts test_cuda,startup,...] [--compare-args "ARGS of gpu_vs_cpu.py"] [--out DIR]
#                      [--cpu-rehearsal]
#
# Where the binaries come from, first found: the folder above this script when it lies in an unpacked bundle
# (gpu-bundle/bench/gpu_check.sh); $DTNN_GPU_BUNDLE (a bundle folder or .tar.xz); gpu-bundle.tar.xz at the root
# of the clone; the clone's build-cuda/bin. With the device tool: carry gpu-bundle.tar.xz and run
# `bash bench/gpu_check.sh`. --cpu-rehearsal runs the dtnn and PyTorch parts on the CPU at toy sizes where no GPU
# is, to exercise the script itself (its figures say nothing about a GPU).
set -uo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
steps=""
batch=""
budget=540
all_model=resnet20_cifar10
all_batch=""
all_tiles=8
all_steps=""
calibrate_list=""
scaling_model=resnet18_cifar10
parts_list=all
compare_args=""
out_dir="${OUT:-}"
rehearsal=0
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --all-model) all_model="$2"; shift 2 ;;
    --all-batch) all_batch="$2"; shift 2 ;;
    --all-tiles) all_tiles="$2"; shift 2 ;;
    --all-steps) all_steps="$2"; shift 2 ;;
    --calibrate) calibrate_list="$2"; shift 2 ;;
    --scaling-model) scaling_model="$2"; shift 2 ;;
    --parts) parts_list="$2"; shift 2 ;;
    --compare-args) compare_args="$2"; shift 2 ;;
    --out) out_dir="$2"; shift 2 ;;
    --cpu-rehearsal) rehearsal=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown option '$1', expected one of --steps, --batch, --budget, --all-model, --all-batch," \
            "--all-tiles, --all-steps, --calibrate, --scaling-model, --parts, --compare-args, --out, --cpu-rehearsal" >&2; exit 2 ;;
  esac
done
if [ "$rehearsal" = 1 ]; then
  steps="${steps:-4}"; batch="${batch:-4}"; all_batch="${all_batch:-64}"; all_steps="${all_steps:-4}"
  calibrate_list="${calibrate_list:-simplecnn:16}"
  main_device=cpu; all_device=cpu; cuda_device=cpu; torch_device=cpu
else
  steps="${steps:-20}"; batch="${batch:-128}"; all_batch="${all_batch:-256}"; all_steps="${all_steps:-30}"
  calibrate_list="${calibrate_list:-resnet50_imagenet:64,vgg16_cifar10:64,resnet18_cifar10:64,simplecnn:64}"
  main_device=cuda; all_device=all; cuda_device=cuda; torch_device=cuda
fi
for v in steps batch budget all_batch all_tiles all_steps; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check.sh: --${v//_/-} ${!v}, expected a positive integer" >&2; exit 2; }
done
[ "$steps" -ge 2 ] || { echo "gpu_check.sh: --steps $steps, expected at least 2 (half of them untimed)" >&2; exit 2; }
[ "$all_steps" -ge 2 ] || { echo "gpu_check.sh: --all-steps $all_steps, expected at least 2" >&2; exit 2; }
known_parts=" test_cuda startup dtnn_resnet50 pytorch_resnet50 dtnn_resnet50_tf32 pytorch_resnet50_tf32 calibrate cpu_scaling cpu_bf16 device_cuda device_all cpu_vs_gpu "
if [ "$parts_list" != all ]; then
  for p in ${parts_list//,/ }; do
    [[ "$known_parts" == *" $p "* ]] ||
      { echo "gpu_check.sh: --parts entry '$p', expected all or some of:$known_parts" >&2; exit 2; }
  done
fi
calibrations=()
if [ "$calibrate_list" != none ]; then
  IFS=, read -r -a calibrations <<<"$calibrate_list"
  for c in "${calibrations[@]}"; do
    [[ "$c" =~ ^[a-z0-9_]+:[1-9][0-9]*$ ]] ||
      { echo "gpu_check.sh: --calibrate entry '$c', expected MODEL:BATCH (e.g. resnet50_imagenet:64) or none" >&2; exit 2; }
  done
fi
[[ "$scaling_model" =~ ^[a-z0-9_]+$ ]] ||
  { echo "gpu_check.sh: --scaling-model '$scaling_model', expected a model name or none" >&2; exit 2; }

start=$(date +%s)
deadline=$((start + budget))
started_utc="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
work="$(mktemp -d "${TMPDIR:-/tmp}/dtnn-gpu-check.XXXXXX")"
out_dir="${out_dir:-${TMPDIR:-/tmp}/dtnn-gpu-check-out}"
mkdir -p "$out_dir" || { echo "gpu_check.sh: cannot create the output folder $out_dir" >&2; exit 2; }
json_file="$out_dir/gpu_check.json"
log_file="$out_dir/gpu_check.log"
: >"$log_file"

say() {
  local line
  line="$(printf '[gpu_check %4ss] %s' "$(( $(date +%s) - start ))" "$*")"
  echo "$line"
  echo "$line" >>"$log_file"
}

# ---- JSON, without python or jq ----
# A JSON string: ASCII printable characters, tabs and newlines, escaped.
js() {
  printf '"%s"' "$(printf '%s' "$1" | LC_ALL=C tr -d '\000-\010\013\014\016-\037\177-\377' |
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' -e 's/\r/\\r/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}
# A JSON number, or null when $1 is not one.
jn() {
  if [[ "$1" =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then printf '%s' "$1"; else printf null; fi
}
# An object of key/raw-value pairs: jo key1 value1 key2 value2 ...
jo() {
  local body="" sep=""
  while [ $# -ge 2 ]; do body+="$sep$(js "$1"):$2"; sep=","; shift 2; done
  printf '{%s}' "$body"
}
# An array of raw values.
ja() {
  local body="" sep="" v
  for v in "$@"; do body+="$sep$v"; sep=","; done
  printf '[%s]' "$body"
}
# The JSON document in file $1 as a raw value when it parses (python3 where there is one, else a first and last
# character check), else as a string.
jfile() {
  local f="$1"
  if command -v python3 >/dev/null 2>&1; then
    if python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" >/dev/null 2>&1; then cat "$f"; return; fi
  elif [ "$(head -c 1 "$f")" = "{" ] && [ "$(tail -c 2 "$f" | tr -d '\n')" = "}" ]; then
    cat "$f"; return
  fi
  js "$(cat "$f")"
}
# The value of a top-level "key": number line of a JSON file written one key per line (dtnn's --report).
json_number() { sed -n "s/^  \"$2\": \\(-\\{0,1\\}[0-9][0-9.eE+-]*\\),\\{0,1\\}\$/\\1/p" "$1" | head -1; }
json_string() { sed -n "s/^  \"$2\": \"\\(.*\\)\",\\{0,1\\}\$/\\1/p" "$1" | head -1; }
# a / b to 3 decimals, or nothing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b }' 2>/dev/null; }

declare -A part=()
order=()
declare -A figure=()
figure_order=()
set_part() {
  [ -n "${part[$1]+x}" ] || order+=("$1")
  part[$1]="$2"
}
set_figure() {
  [ -n "$2" ] || return 0
  [ -n "${figure[$1]+x}" ] || figure_order+=("$1")
  figure[$1]="$2"
}
# Whether part $1 runs (--parts); when not, it is recorded as skipped.
runs_part() {
  [ "$parts_list" = all ] && return 0
  [[ ",$parts_list," == *",$1,"* ]] && return 0
  set_part "$1" "$(jo status "$(js skipped)" reason "$(js "not in --parts $parts_list")")"
  return 1
}
overall_status() {
  local name
  for name in "${order[@]}"; do
    case "${part[$name]}" in
      *'"status":"fail"'*|*'"status":"timeout"'*|*'"status":"crashed"'*) echo fail; return ;;
    esac
  done
  echo ok
}
write_json() {
  local state="$1" parts=() figs=() name skipped=()
  for name in "${order[@]}"; do
    parts+=("$(js "$name"):${part[$name]}")
    [[ "${part[$name]}" == *'"status":"skipped"'* ]] && skipped+=("$(js "$name")")
  done
  for name in "${figure_order[@]}"; do figs+=("$(js "$name"):${figure[$name]}"); done
  local IFS=,
  {
    printf '{"check":"bench/gpu_check.sh","started_utc":%s,"seconds":%s,"budget_seconds":%s,"state":%s,' \
      "$(js "$started_utc")" "$(( $(date +%s) - start ))" "$budget" "$(js "$state")"
    printf '"status":%s,"cpu_rehearsal":%s,' "$(js "$(overall_status)")" "$([ "$rehearsal" = 1 ] && echo true || echo false)"
    printf '"options":%s,' "$(jo steps "$steps" batch "$batch" all_model "$(js "$all_model")" all_batch "$all_batch" \
      all_tiles "$all_tiles" all_steps "$all_steps")"
    printf '"skipped_parts":[%s],"figures":{%s},"parts":{%s}}\n' "${skipped[*]}" "${figs[*]}" "${parts[*]}"
  } >"$json_file.tmp" && mv "$json_file.tmp" "$json_file"
}
on_signal() {
  say "interrupted by a signal: writing what was measured"
  write_json interrupted
  exit 130
}
trap on_signal INT TERM

# ---- running commands ----
# Seconds a part may take: its cap, or what is left of the budget less a margin for the report and less what
# the parts after it are kept (so that a slow part cannot leave nothing for them).
allow() {
  local want="$1" left=$(( deadline - $(date +%s) - 5 - ${2:-0} ))
  [ "$left" -lt "$want" ] && want="$left"
  [ "$want" -lt 0 ] && want=0
  echo "$want"
}
have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1
# run_limited SECONDS LOG COMMAND...: stdout and stderr to LOG; the exit status, 124 on a time-out.
run_limited() {
  local secs="$1" log="$2"
  shift 2
  if [ "$secs" -le 0 ]; then
    echo "gpu_check.sh: no time left in the budget" >"$log"
    return 124
  fi
  if [ "$have_timeout" = 1 ]; then
    timeout -k 10 "$secs" "$@" >"$log" 2>&1 </dev/null
  else
    "$@" >"$log" 2>&1 </dev/null
  fi
}
# What an exit status says: pass, timeout, crashed (a signal: SIGABRT is StarPU's assertion on a CUDA error) or fail.
status_of() {
  case "$1" in
    0) echo pass ;;
    124|137) echo timeout ;;
    13[0-9]|14[0-9]|15[0-9]) echo crashed ;;
    *) echo fail ;;
  esac
}
# The status of a run that did not give its result: status_of, with a clean exit counted as a failure.
failure_of() {
  local s
  s="$(status_of "$1")"
  [ "$s" = pass ] && s=fail
  echo "$s"
}
# The last lines of a log, for the JSON.
tail_of() { tail -n "${2:-25}" "$1" 2>/dev/null; }
append_log() {
  { echo "---- $1 ----"; cat "$2"; echo; } >>"$log_file" 2>/dev/null
}

# ---- host ----
say "work folder $work, report $json_file"
os="$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}")"
glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -1)"
mem_kb="$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null)"
smi=""
for c in nvidia-smi /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi; do
  if command -v "$c" >/dev/null 2>&1; then smi="$(command -v "$c")"; break; fi
done
gpu_seen=unknown
smi_json="$(js "not found: GPU names and driver unknown")"
if [ -n "$smi" ]; then
  if run_limited "$(allow 20)" "$work/smi.log" "$smi" --query-gpu=name,driver_version,memory.total,compute_cap \
    --format=csv,noheader; then
    gpus=()
    while IFS= read -r line; do
      [ -n "$line" ] && gpus+=("$(js "$line")")
    done <"$work/smi.log"
    smi_json="$(ja "${gpus[@]}")"
    gpu_seen=$([ "${#gpus[@]}" -gt 0 ] && echo yes || echo no)
  else
    smi_json="$(js "$smi failed: $(tail_of "$work/smi.log" 3)")"
    gpu_seen=no
  fi
  append_log nvidia-smi "$work/smi.log"
fi
python_json="$(js "not found")"
if command -v python3 >/dev/null 2>&1; then
  python_json="$(js "$(command -v python3) $(python3 -c 'import platform; print(platform.python_version())' 2>&1 | head -1)")"
fi
set_part host "$(jo status "$(js pass)" os "$(js "$os")" kernel "$(js "$(uname -r)")" cpus "$(jn "$(nproc 2>/dev/null)")" \
  memory_mib "$(jn "$(( ${mem_kb:-0} / 1024 ))")" glibc "$(js "$glibc")" gpus "$smi_json" gpu_seen "$(js "$gpu_seen")" \
  python3 "$python_json")"
say "host: $os, $(nproc) CPUs, GPUs: $(printf '%s' "$smi_json" | tr -d '"[]')"
write_json running

# ---- binaries ----
binaries_ok=0
t0=$(date +%s)
bundle=""
bundle_lib=""
bin=""
source_desc=""
if [ -x "$root/bin/dtnn" ] && [ -x "$root/bin/test_cuda" ]; then
  bundle="$root"
  source_desc="unpacked bundle $root"
elif [ -n "${DTNN_GPU_BUNDLE:-}" ] && [ -d "${DTNN_GPU_BUNDLE}" ]; then
  bundle="$DTNN_GPU_BUNDLE"
  source_desc="DTNN_GPU_BUNDLE folder $bundle"
else
  tarball=""
  if [ -n "${DTNN_GPU_BUNDLE:-}" ] && [ -f "${DTNN_GPU_BUNDLE}" ]; then
    tarball="$DTNN_GPU_BUNDLE"
  elif [ -f "$root/gpu-bundle.tar.xz" ]; then
    tarball="$root/gpu-bundle.tar.xz"
  fi
  if [ -n "$tarball" ]; then
    if tar -C "$work" -xJf "$tarball" 2>"$work/untar.log"; then
      bundle="$work/gpu-bundle"
      source_desc="$tarball"
    else
      source_desc="$tarball (could not unpack: $(tail_of "$work/untar.log" 3))"
    fi
  elif [ -x "$root/build-cuda/bin/dtnn" ] && [ -x "$root/build-cuda/bin/test_cuda" ]; then
    source_desc="the clone's build-cuda"
  fi
fi
if [ -n "$bundle" ]; then
  bin="$bundle/bin"
  bundle_lib="$bundle/lib"
elif [ "$source_desc" = "the clone's build-cuda" ]; then
  bin="$root/build-cuda/bin"
  bundle_lib=""
else
  bin=""
fi
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
# cuDNN, cuBLAS and NCCL beside CUDA's own folder: the nvidia-* wheels of PyTorch (nvidia/*/lib, nvidia/cu13/lib).
pylibs=""
if command -v python3 >/dev/null 2>&1; then
  pylibs="$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(sorted({d for r in roots for d in glob.glob(os.path.join(r, "*", "lib"))})))
PY
)"
fi
dtnn_ld="${bundle_lib:+$bundle_lib:}$cuda_home/lib64:$cuda_home/lib${pylibs:+:$pylibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lddx() {
  if command -v ldd >/dev/null 2>&1; then
    env LD_LIBRARY_PATH="$dtnn_ld" ldd "$1" 2>&1
  else
    env LD_LIBRARY_PATH="$dtnn_ld" LD_TRACE_LOADED_OBJECTS=1 "$1" 2>&1
  fi
}
missing_of() {
  local b
  for b in dtnn test_cuda; do lddx "$bin/$b" | grep -E 'not found' | sed "s|^|$b: |"; done | sort -u
}
compat_used=false
missing=""
if [ -n "$bin" ]; then
  missing="$(missing_of)"
  if [ -n "$missing" ] && [ -n "$bundle_lib" ] && [ -d "$bundle_lib/compat" ] &&
    printf '%s\n' "$missing" | grep -qE 'libstdc\+\+|libgcc_s|GLIBCXX_|CXXABI_|GCC_[0-9]'; then
    dtnn_ld="$bundle_lib/compat:$dtnn_ld"
    compat_used=true
    missing="$(missing_of)"
  fi
  { lddx "$bin/dtnn"; lddx "$bin/test_cuda"; } >"$work/ldd.log"
  append_log ldd "$work/ldd.log"
fi
resolved=()
if [ -n "$bin" ]; then
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] && resolved+=("$(js "$name"):$(js "$path")")
  done < <(grep -E 'libcudart|libcublas\.|libcublasLt|libcudnn|libnccl|libstdc\+\+|libgcc_s|libstarpu|libcuda\.' \
             "$work/ldd.log" | sort -u -k1,1)
fi
resolved_json="{$(IFS=,; echo "${resolved[*]}")}"
# Libraries taken from the host that are neither glibc, CUDA's, the C++ runtime nor the driver's: the bundle should
# have brought them (on the build machine itself they are found through the binaries' RUNPATH).
other_host=()
if [ -n "$bin" ] && [ -n "$bundle_lib" ]; then
  while read -r name path; do
    case "$path" in "$bundle_lib"/*) continue ;; esac
    [[ "$name" =~ ^(linux-vdso|ld-linux|libc\.|libm\.|libmvec\.|libdl\.|libpthread\.|librt\.|libresolv\.|libnss_|libutil\.|libanl\.) ]] && continue
    [[ "$name" =~ ^(libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvidia|libnvrtc|libnvJitLink|libcusparse|libcufft|libcurand|libstdc\+\+|libgcc_s) ]] && continue
    other_host+=("$(js "$name => $path")")
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' "$work/ldd.log" | sort -u)
fi
build_info="$( [ -n "$bundle" ] && cat "$bundle/BUILD-INFO" 2>/dev/null)"
# StarPU may speak (its warnings belong in the log); its calibration files live in the work folder.
dtnn_env=(env "LD_LIBRARY_PATH=$dtnn_ld" "STARPU_HOME=$work/starpu-home")
if [ -z "$bin" ]; then
  reason="no binaries: no gpu-bundle.tar.xz (make it with scripts/gpu_bundle.sh and carry it), no DTNN_GPU_BUNDLE, no build-cuda"
  [ -n "$source_desc" ] && reason="$source_desc"
  set_part binaries "$(jo status "$(js fail)" reason "$(js "$reason")")"
  say "binaries: FAILED: $reason"
elif [ -n "$missing" ]; then
  set_part binaries "$(jo status "$(js fail)" source "$(js "$source_desc")" reason "$(js "libraries missing or too old")" \
    missing "$(js "$missing")" compat_libstdcxx "$compat_used" ld_library_path "$(js "$dtnn_ld")" \
    resolved "$resolved_json" build "$(js "$build_info")")"
  say "binaries: FAILED: libraries missing:"
  printf '%s\n' "$missing"
else
  run_limited "$(allow 30)" "$work/smoke.log" "${dtnn_env[@]}" "$bin/dtnn" models
  rc=$?
  append_log "dtnn models" "$work/smoke.log"
  if [ "$rc" = 0 ]; then
    binaries_ok=1
    set_part binaries "$(jo status "$(js pass)" seconds "$(( $(date +%s) - t0 ))" source "$(js "$source_desc")" \
      compat_libstdcxx "$compat_used" ld_library_path "$(js "$dtnn_ld")" resolved "$resolved_json" \
      other_host_libraries "$(ja "${other_host[@]}")" build "$(js "$build_info")")"
    say "binaries: $source_desc, libraries resolved (bundled libstdc++: $compat_used, other host libraries:" \
      "${#other_host[@]})"
  else
    set_part binaries "$(jo status "$(js "$(status_of "$rc")")" exit_code "$rc" source "$(js "$source_desc")" \
      reason "$(js "'dtnn models' failed")" tail "$(js "$(tail_of "$work/smoke.log")")" resolved "$resolved_json")"
    say "binaries: 'dtnn models' FAILED (exit $rc)"
    tail_of "$work/smoke.log" 10
  fi
fi
write_json running

# ---- test_cuda: one process per suite ----
t0=$(date +%s)
if ! runs_part test_cuda; then
  :
elif [ "$binaries_ok" != 1 ]; then
  set_part test_cuda "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
else
  test_cap=$(allow 150 300)
  test_deadline=$(( $(date +%s) + test_cap ))
  say "test_cuda: listing the suites (at most ${test_cap}s for the whole part)"
  run_limited "$(allow 60)" "$work/list.log" "${dtnn_env[@]}" "$bin/test_cuda" --gtest_list_tests
  rc=$?
  append_log "test_cuda --gtest_list_tests" "$work/list.log"
  suites=()
  while IFS= read -r s; do suites+=("$s"); done < <(sed -n 's/^\([A-Za-z_][A-Za-z0-9_/]*\)\.\( .*\)\{0,1\}$/\1/p' "$work/list.log")
  if [ "$rc" != 0 ] || [ "${#suites[@]}" = 0 ]; then
    st="$(failure_of "$rc")"
    set_part test_cuda "$(jo status "$(js "$st")" exit_code "$rc" \
      reason "$(js "test_cuda --gtest_list_tests failed or listed no suite")" tail "$(js "$(tail_of "$work/list.log")")")"
    say "test_cuda: $st: could not list the suites (exit $rc)"
    tail_of "$work/list.log" 10
  else
    suite_json=()
    total_pass=0 total_fail=0 total_skip=0 total_unfinished=0 bad_suites=0 skip_reason=""
    for s in "${suites[@]}"; do
      left=$(( test_deadline - $(date +%s) ))
      secs=$(allow "$([ "$left" -lt 120 ] && echo "$left" || echo 120)")
      log="$work/suite.log"
      ts=$(date +%s)
      run_limited "$secs" "$log" "${dtnn_env[@]}" "$bin/test_cuda" --gtest_filter="$s.*" --gtest_color=no
      rc=$?
      append_log "test_cuda $s" "$log"
      passed=$(grep -cE '^\[ +OK \] .* \([0-9]+ ms\)$' "$log")
      failed=$(grep -cE '^\[ +FAILED +\] .* \([0-9]+ ms\)$' "$log")
      skipped=$(grep -cE '^\[ +SKIPPED +\] .* \([0-9]+ ms\)$' "$log")
      started=$(grep -cE '^\[ RUN +\] ' "$log")
      unfinished=$(( started - passed - failed - skipped ))
      failed_names=()
      while IFS= read -r n; do failed_names+=("$(js "$n")"); done < <(sed -nE 's/^\[ +FAILED +\] (.*) \([0-9]+ ms\)$/\1/p' "$log")
      if [ -z "$skip_reason" ] && [ "$skipped" -gt 0 ]; then
        skip_reason="$(grep -A1 ': Skipped$' "$log" | sed -n 2p)"
      fi
      st="$(status_of "$rc")"
      [ "$st" = pass ] && [ "$failed" -gt 0 ] && st=fail
      total_pass=$((total_pass + passed)); total_fail=$((total_fail + failed)); total_skip=$((total_skip + skipped))
      total_unfinished=$((total_unfinished + unfinished))
      fields=(suite "$(js "$s")" status "$(js "$st")" seconds "$(( $(date +%s) - ts ))" passed "$passed" failed "$failed"
              skipped "$skipped")
      [ "$rc" != 0 ] && fields+=(exit_code "$rc")
      [ "${#failed_names[@]}" -gt 0 ] && fields+=(failed_tests "$(ja "${failed_names[@]}")")
      if [ "$st" != pass ]; then
        bad_suites=$((bad_suites + 1))
        [ "$unfinished" -gt 0 ] && fields+=(unfinished_test "$(js "$(sed -nE 's/^\[ RUN +\] (.*)$/\1/p' "$log" | tail -1)")")
        fields+=(tail "$(js "$(grep -vE '^\[ +(OK|RUN) +\]' "$log" | tail -n 40)")")
        say "test_cuda $s: $st (exit $rc): $passed passed, $failed failed, $skipped skipped"
      fi
      suite_json+=("$(jo "${fields[@]}")")
    done
    if [ "$bad_suites" -gt 0 ]; then
      st=fail
      reason="$bad_suites of ${#suites[@]} suites failed, timed out or crashed"
    elif [ "$total_pass" = 0 ] && [ "$total_skip" -gt 0 ]; then
      if [ "$gpu_seen" = yes ] && [ "$rehearsal" = 0 ]; then
        st=fail
        reason="every case skipped although nvidia-smi lists a GPU: no CUDA worker started ($skip_reason)"
      else
        st=skipped
        reason="every CUDA case skips: $skip_reason"
      fi
    elif [ "$total_skip" -gt 0 ] && [ "$rehearsal" = 0 ]; then
      st=fail
      reason="$total_skip cases skipped on a machine with a CUDA worker"
    else
      st=pass
      reason=""
    fi
    set_part test_cuda "$(jo status "$(js "$st")" reason "$(js "$reason")" seconds "$(( $(date +%s) - t0 ))" \
      suites "${#suites[@]}" passed "$total_pass" failed "$total_fail" skipped "$total_skip" \
      unfinished "$total_unfinished" by_suite "$(ja "${suite_json[@]}")")"
    set_figure test_cuda_passed "$total_pass"
    set_figure test_cuda_failed "$total_fail"
    set_figure test_cuda_skipped "$total_skip"
    say "test_cuda: $st: ${#suites[@]} suites, $total_pass passed, $total_fail failed, $total_skip skipped${reason:+ ($reason)}"
  fi
fi
write_json running

# ---- start-up lines: how many CPU workers beside the GPUs, and on every core ----
startup_line() {  # LOG: the engine's start-up line of a dtnn run
  grep -m1 '^dtnn: StarPU' "$1" | sed 's/^dtnn: //'
}
if ! runs_part startup; then
  :
elif [ "$binaries_ok" != 1 ]; then
  set_part startup "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
else
  t0=$(date +%s)
  fields=()
  st=pass
  devices=(cpu)
  [ "$cuda_device" != cpu ] && devices=("$cuda_device" cpu)
  for dev in "${devices[@]}"; do
    log="$work/startup_$dev.log"
    run_limited "$(allow 30 280)" "$log" "${dtnn_env[@]}" "$bin/dtnn" benchmark --model simplecnn --dataset synthetic \
      --batch-size 64 --synthetic-samples 128 --epochs 1 --steps-per-epoch 2 --device "$dev" --workers 0
    rc=$?
    append_log "startup --device $dev --workers 0" "$log"
    line="$(startup_line "$log")"
    fields+=("device_${dev}_workers_0" "$(js "${line:-exit $rc: $(tail_of "$log" 5)}")")
    [ "$rc" != 0 ] && st="$(failure_of "$rc")"
    say "startup --device $dev --workers 0: ${line:-exit $rc}"
  done
  set_part startup "$(jo status "$(js "$st")" seconds "$(( $(date +%s) - t0 ))" cores "$(jn "$(nproc)")" "${fields[@]}")"
fi
write_json running

# ---- dtnn runs ----
# dtnn_bench PART DEVICE MODEL BATCH TILES STEPS CAP RESERVE [PRECISION]: a benchmark run of 2 epochs of STEPS/2
# steps, at most CAP seconds and leaving RESERVE for the parts after it; sets ips (images/s after the first epoch)
# and part_status; records the part.
dtnn_bench() {
  local name="$1" device="$2" model="$3" b="$4" tiles="$5" n="$6" cap="$7" reserve="$8" precision="${9:-fp32}"
  local half=$(( n / 2 )) report="$work/$name.json" log="$work/$name.log" ts rc st fields
  ips=""
  part_status=skipped
  if [ "$binaries_ok" != 1 ]; then
    set_part "$name" "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
    return
  fi
  say "$name: $model, batch $b, $tiles tiles, $((2 * half)) steps ($half untimed), --device $device, $precision"
  ts=$(date +%s)
  rm -f "$report"
  run_limited "$(allow "$cap" "$reserve")" "$log" "${dtnn_env[@]}" "$bin/dtnn" benchmark --model "$model" --dataset synthetic \
    --batch-size "$b" --synthetic-samples $(( b * half )) --epochs 2 --steps-per-epoch "$half" --tiles "$tiles" \
    --device "$device" --precision "$precision" --quiet --report "$report"
  rc=$?
  append_log "$name" "$log"
  st="$(status_of "$rc")"
  fields=(device "$(js "$device")" precision "$(js "$precision")" model "$(js "$model")" batch "$b" tiles "$tiles"
          timed_steps "$half"
          seconds "$(( $(date +%s) - ts ))")
  if [ "$rc" != 0 ] && grep -q 'no GPU found' "$log"; then
    if [ "$gpu_seen" = yes ]; then
      part_status=fail
      set_part "$name" "$(jo status "$(js fail)" reason "$(js "nvidia-smi lists a GPU, dtnn found none: $(grep -m1 'no GPU found' "$log")")" \
        "${fields[@]}")"
      say "$name: FAILED: nvidia-smi lists a GPU, dtnn found none"
    else
      set_part "$name" "$(jo status "$(js skipped)" reason "$(js "no GPU: $(grep -m1 'no GPU found' "$log")")" "${fields[@]}")"
      say "$name: skipped (no GPU)"
    fi
    return
  fi
  if [ "$rc" = 0 ] && [ -f "$report" ]; then
    ips="$(json_number "$report" images_per_second_after_first_epoch)"
    fields+=(images_per_second "$(jn "$ips")" images_per_second_all_epochs "$(jn "$(json_number "$report" images_per_second)")"
             cpu_workers "$(jn "$(json_number "$report" workers)")" cuda_workers "$(jn "$(json_number "$report" cuda_workers)")"
             engine "$(js "$(json_string "$report" engine)")" report "$(jfile "$report")")
    say "$name: ${ips:-?} images/s after the first epoch ($(json_string "$report" engine))"
  else
    [ "$st" = pass ] && st=fail
    fields+=(exit_code "$rc" tail "$(js "$(tail_of "$log" 40)")")
    say "$name: $st (exit $rc)"
    tail_of "$log" 15
  fi
  part_status="$st"
  set_part "$name" "$(jo status "$(js "$st")" "${fields[@]}")"
}

ips=""
runs_part dtnn_resnet50 && dtnn_bench dtnn_resnet50 "$main_device" resnet50_imagenet "$batch" 1 "$steps" 90 200
dtnn_ips="$ips"
set_figure dtnn_resnet50_images_per_second "$(jn "$dtnn_ips")"
write_json running

# ---- PyTorch on the same GPU ----
# torch_bench PART CAP RESERVE [--tf32]: bench/gpu_pytorch.py; sets torch_ips and records the part.
torch_bench() {
  local name="$1" cap="$2" reserve="$3" t0 rc line st
  shift 3
  t0=$(date +%s)
  torch_ips=""
  if ! command -v python3 >/dev/null 2>&1; then
    set_part "$name" "$(jo status "$(js skipped)" reason "$(js "python3 not found")")"
    say "$name: skipped (no python3)"
  elif [ ! -f "$script_dir/gpu_pytorch.py" ]; then
    set_part "$name" "$(jo status "$(js skipped)" reason "$(js "no $script_dir/gpu_pytorch.py")")"
  else
    say "$name: torchvision resnet50, batch $batch, $steps steps ($((steps / 2)) untimed), device $torch_device $*"
    # PyTorch's own environment: none of the bundle's libraries.
    run_limited "$(allow "$cap" "$reserve")" "$work/$name.log" python3 "$script_dir/gpu_pytorch.py" --batch "$batch" \
      --steps "$steps" --warmup $((steps / 2)) --device "$torch_device" "$@"
    rc=$?
    append_log "$name" "$work/$name.log"
    line="$(grep '^{' "$work/$name.log" | tail -1)"
    printf '%s\n' "$line" >"$work/$name.json"
    if [ "$rc" = 0 ] && [[ "$line" == *'"skipped"'* ]]; then
      set_part "$name" "$(jo status "$(js skipped)" reason "$(js "$(printf '%s' "$line" | sed -n 's/.*"skipped": *"\([^"]*\)".*/\1/p')")")"
      say "$name: skipped ($(printf '%s' "$line" | sed -n 's/.*"skipped": *"\([^"]*\)".*/\1/p'))"
    elif [ "$rc" = 0 ] && [ -n "$line" ]; then
      torch_ips="$(printf '%s' "$line" | sed -n 's/.*"images_per_second": *\([0-9.eE+-]*\).*/\1/p')"
      set_part "$name" "$(jo status "$(js pass)" seconds "$(( $(date +%s) - t0 ))" \
        images_per_second "$(jn "$torch_ips")" result "$(jfile "$work/$name.json")")"
      say "$name: ${torch_ips:-?} images/s"
    else
      st="$(failure_of "$rc")"
      set_part "$name" "$(jo status "$(js "$st")" exit_code "$rc" seconds "$(( $(date +%s) - t0 ))" \
        tail "$(js "$(tail_of "$work/$name.log" 30)")")"
      say "$name: $st (exit $rc)"
      tail_of "$work/$name.log" 10
    fi
  fi
}
torch_ips=""
runs_part pytorch_resnet50 && torch_bench pytorch_resnet50 90 160
set_figure pytorch_resnet50_images_per_second "$(jn "$torch_ips")"
set_figure dtnn_over_pytorch "$(jn "$(ratio "$dtnn_ips" "$torch_ips")")"
write_json running

# ---- TF32: dtnn --precision tf32 against PyTorch with allow_tf32 ----
ips=""
runs_part dtnn_resnet50_tf32 &&
  dtnn_bench dtnn_resnet50_tf32 "$main_device" resnet50_imagenet "$batch" 1 "$steps" 60 150 tf32
dtnn_tf32_ips="$ips"
set_figure dtnn_resnet50_tf32_images_per_second "$(jn "$dtnn_tf32_ips")"
torch_ips=""
runs_part pytorch_resnet50_tf32 && torch_bench pytorch_resnet50_tf32 60 140 --tf32
set_figure pytorch_resnet50_tf32_images_per_second "$(jn "$torch_ips")"
set_figure dtnn_over_pytorch_tf32 "$(jn "$(ratio "$dtnn_tf32_ips" "$torch_ips")")"
write_json running

# ---- GPU calibration for the simulation (docs/simulation.md) ----
t0=$(date +%s)
if ! runs_part calibrate; then
  :
elif [ "${#calibrations[@]}" = 0 ]; then
  set_part calibrate "$(jo status "$(js skipped)" reason "$(js "--calibrate none")")"
elif [ "$binaries_ok" != 1 ]; then
  set_part calibrate "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
else
  # An archive of this run's own (dtnn calibrate --out extracts, calibrates, packs back): the calibrations of
  # the models accumulate in it, and it is copied out whole.
  machine="$work/machine-gpu.tar.xz"
  rows=()
  st=pass
  for c in "${calibrations[@]}"; do
    m="${c%%:*}"
    b="${c##*:}"
    log="$work/calibrate_$m.log"
    say "calibrate: $m, batch $b, 1 tile, --device $cuda_device, dmdas"
    run_limited "$(allow 60 110)" "$log" "${dtnn_env[@]}" "$bin/dtnn" calibrate --model "$m" --batch-size "$b" --tiles 1 \
      --workers 2 --scheduler dmdas --device "$cuda_device" --out "$machine" --report "$work/calibrate_$m.json"
    rc=$?
    append_log "calibrate $m" "$log"
    if [ "$rc" = 0 ]; then
      step_ms="$(json_number "$work/calibrate_$m.json" step_ms)"
      rows+=("$(jo model "$(js "$m")" batch "$b" status "$(js pass)" step_ms "$(jn "$step_ms")")")
      set_figure "calibrate_${m}_step_ms" "$(jn "$step_ms")"
      say "calibrate $m: ${step_ms:-?} ms per step"
    else
      st="$(failure_of "$rc")"
      rows+=("$(jo model "$(js "$m")" batch "$b" status "$(js "$st")" exit_code "$rc" tail "$(js "$(tail_of "$log" 30)")")")
      say "calibrate $m: $st (exit $rc)"
      tail_of "$log" 10
    fi
  done
  packed=""
  if [ -f "$machine" ] && cp "$machine" "$out_dir/machine-gpu.tar.xz"; then
    packed="$out_dir/machine-gpu.tar.xz"
  fi
  set_part calibrate "$(jo status "$(js "$st")" seconds "$(( $(date +%s) - t0 ))" packed "$(js "$packed")" \
    runs "$(ja "${rows[@]}")")"
fi
write_json running

# ---- every core: CPU workers 1, 2, 4, ... up to the machine's cores ----
t0=$(date +%s)
if ! runs_part cpu_scaling; then
  :
elif [ "$scaling_model" = none ]; then
  set_part cpu_scaling "$(jo status "$(js skipped)" reason "$(js "--scaling-model none")")"
elif [ "$binaries_ok" != 1 ]; then
  set_part cpu_scaling "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
else
  cores=$(nproc)
  counts=()
  for ((n = 1; n < cores; n *= 2)); do counts+=("$n"); done
  counts+=("$cores")
  sb=$([ "$rehearsal" = 1 ] && echo 8 || echo 64)
  rows=()
  st=pass
  for n in "${counts[@]}"; do
    tiles=$(( n < 2 ? 2 : n ))
    log="$work/scaling_$n.log"
    run_limited "$(allow 40 80)" "$log" "${dtnn_env[@]}" "$bin/dtnn" benchmark --model "$scaling_model" --dataset synthetic \
      --batch-size "$sb" --synthetic-samples $(( sb * 2 )) --epochs 2 --steps-per-epoch 2 --tiles "$tiles" --device cpu \
      --workers "$n" --quiet --report "$work/scaling_$n.json"
    rc=$?
    append_log "cpu_scaling $n workers" "$log"
    if [ "$rc" = 0 ]; then
      v="$(json_number "$work/scaling_$n.json" images_per_second_after_first_epoch)"
      rows+=("$(jo workers "$n" tiles "$tiles" images_per_second "$(jn "$v")")")
      say "cpu_scaling: $scaling_model batch $sb, $n CPU workers, $tiles tiles: ${v:-?} images/s"
    else
      st="$(failure_of "$rc")"
      rows+=("$(jo workers "$n" tiles "$tiles" status "$(js "$st")" exit_code "$rc" tail "$(js "$(tail_of "$log" 20)")")")
      say "cpu_scaling: $n workers: $st (exit $rc)"
      break
    fi
  done
  set_part cpu_scaling "$(jo status "$(js "$st")" seconds "$(( $(date +%s) - t0 ))" model "$(js "$scaling_model")" \
    batch "$sb" cpu "$(js "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')")" runs "$(ja "${rows[@]}")")"
fi
write_json running

# ---- every core in fp32 against bf16 on AMX ----
t0=$(date +%s)
if ! runs_part cpu_bf16; then
  :
elif [ "$scaling_model" = none ]; then
  set_part cpu_bf16 "$(jo status "$(js skipped)" reason "$(js "--scaling-model none")")"
elif [ "$binaries_ok" != 1 ]; then
  set_part cpu_bf16 "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
else
  cores=$(nproc)
  sb=$([ "$rehearsal" = 1 ] && echo 8 || echo 64)
  fields=()
  st=pass
  declare -A bf16_ips=()
  for precision in fp32 bf16-amx; do
    log="$work/cpu_bf16_$precision.log"
    extra=()
    [ "$precision" != fp32 ] && extra=(--precision "$precision" --conv auto)
    run_limited "$(allow 60 60)" "$log" "${dtnn_env[@]}" "$bin/dtnn" benchmark --model "$scaling_model" --dataset synthetic \
      --batch-size "$sb" --synthetic-samples $(( sb * 2 )) --epochs 2 --steps-per-epoch 2 --tiles "$cores" --device cpu \
      --workers 0 --quiet --report "$work/cpu_bf16_$precision.json" "${extra[@]}"
    rc=$?
    append_log "cpu_bf16 $precision" "$log"
    if [ "$rc" = 0 ]; then
      bf16_ips[$precision]="$(json_number "$work/cpu_bf16_$precision.json" images_per_second_after_first_epoch)"
      fields+=("${precision//-/_}_images_per_second" "$(jn "${bf16_ips[$precision]}")")
      say "cpu_bf16: $scaling_model batch $sb, $cores workers, $precision: ${bf16_ips[$precision]:-?} images/s"
    elif [ "$precision" != fp32 ] && grep -q "AMX-BF16" "$log"; then
      st=skipped
      fields+=(reason "$(js "$(grep -m1 "AMX-BF16" "$log")")")
      say "cpu_bf16: skipped, this CPU has no AMX-BF16"
    else
      st="$(failure_of "$rc")"
      fields+=("${precision//-/_}_exit_code" "$rc" "${precision//-/_}_tail" "$(js "$(tail_of "$log" 20)")")
      say "cpu_bf16: $precision: $st (exit $rc)"
      break
    fi
  done
  set_part cpu_bf16 "$(jo status "$(js "$st")" seconds "$(( $(date +%s) - t0 ))" model "$(js "$scaling_model")" \
    batch "$sb" workers "$cores" bf16_amx_over_fp32 "$(jn "$(ratio "${bf16_ips[bf16-amx]:-}" "${bf16_ips[fp32]:-}")")" \
    "${fields[@]}")"
fi
write_json running

# ---- --device all against --device cuda ----
ips=""
part_status=skipped
runs_part device_cuda && dtnn_bench device_cuda "$cuda_device" "$all_model" "$all_batch" "$all_tiles" "$all_steps" 45 30
cuda_ips="$ips"
cuda_status="$part_status"
if ! runs_part device_all; then
  all_ips=""
elif [ "$cuda_status" = skipped ]; then
  set_part device_all "$(jo status "$(js skipped)" reason "$(js "no --device cuda run to compare with (part device_cuda)")")"
  all_ips=""
else
  dtnn_bench device_all "$all_device" "$all_model" "$all_batch" "$all_tiles" "$all_steps" 50 0
  all_ips="$ips"
fi
set_figure "${all_model}_cuda_images_per_second" "$(jn "$cuda_ips")"
set_figure "${all_model}_all_images_per_second" "$(jn "$all_ips")"
set_figure all_over_cuda "$(jn "$(ratio "$all_ips" "$cuda_ips")")"
write_json running

# ---- the GPU's weights against the CPU's ----
t0=$(date +%s)
if ! runs_part cpu_vs_gpu; then
  :
elif [ "$binaries_ok" != 1 ]; then
  set_part cpu_vs_gpu "$(jo status "$(js skipped)" reason "$(js "the binaries cannot run (part binaries)")")"
elif ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import numpy, h5py' >/dev/null 2>&1; then
  set_part cpu_vs_gpu "$(jo status "$(js skipped)" reason "$(js "no python3 with numpy and h5py")")"
elif [ ! -f "$script_dir/gpu_vs_cpu.py" ]; then
  set_part cpu_vs_gpu "$(jo status "$(js skipped)" reason "$(js "no $script_dir/gpu_vs_cpu.py")")"
else
  secs=$(allow 200 0)
  say "cpu_vs_gpu: bench/gpu_vs_cpu.py (at most ${secs}s)"
  run_limited "$secs" "$work/cpu_vs_gpu.log" python3 "$script_dir/gpu_vs_cpu.py" --dtnn "$bin/dtnn" \
    --env "LD_LIBRARY_PATH=$dtnn_ld" --env "STARPU_HOME=$work/starpu-home" \
    --test-device "$cuda_device" --budget $(( secs * 2 / 3 )) --out "$work/cpu_vs_gpu.json" $compare_args
  rc=$?
  append_log cpu_vs_gpu "$work/cpu_vs_gpu.log"
  cat "$work/cpu_vs_gpu.log"
  cp "$work/cpu_vs_gpu.json" "$out_dir/cpu_vs_gpu.json" 2>/dev/null
  st="$(status_of "$rc")"
  fields=(seconds "$(( $(date +%s) - t0 ))" exit_code "$rc")
  [ -f "$work/cpu_vs_gpu.json" ] && fields+=(result "$(jfile "$work/cpu_vs_gpu.json")") ||
    fields+=(tail "$(js "$(tail_of "$work/cpu_vs_gpu.log" 30)")")
  set_part cpu_vs_gpu "$(jo status "$(js "$st")" "${fields[@]}")"
fi

# ---- summary ----
write_json done
status="$(overall_status)"
echo
echo "| part | status |"
echo "|---|---|"
for name in "${order[@]}"; do
  echo "| $name | $(printf '%s' "${part[$name]}" | sed -n 's/^{"status":"\([a-z]*\)".*/\1/p') |"
done
echo
echo "| figure | value |"
echo "|---|---|"
for name in "${figure_order[@]}"; do echo "| $name | ${figure[$name]} |"; done
say "done: status $status, $json_file"
rm -rf "$work"
[ "$status" = ok ]
