#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU check of the CUDA backend, one script for a machine with one NVIDIA GPU (H100/H200), CUDA 13, cuDNN 9,
# NCCL and PyTorch, no internet and no package manager. Under 8 minutes:
#   1. the binaries: gpu-bundle.tar.xz at the root of the clone if it is there (made on a Debian machine by
#      scripts/gpu_bundle.sh: dtnn, test_cuda and the libraries they need beyond CUDA's), else a build with
#      `DTNN_CUDA=1 scripts/setup.sh build` (a Debian machine with a GPU);
#   2. the CUDA tests: every codelet on the GPU against its CPU version, and a training step on the GPU
#      against the CPU step;
#   3. resnet50_imagenet on synthetic data, batch 128, 20 steps (the first 10 untimed), on the GPU: images/s;
#   4. torchvision's resnet50 in PyTorch on the same GPU, same batch and steps: images/s and the ratio.
#
#   bench/gpu_check.sh [--steps 20] [--batch 128]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=20
batch=128
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    *) echo "gpu_check.sh: unknown option '$1', expected --steps N or --batch N" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
say() { printf '[gpu_check %4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
nvidia-smi -L || { echo "gpu_check.sh: nvidia-smi lists no GPU" >&2; exit 1; }

# 1. Binaries.
work="${TMPDIR:-/tmp}/dtnn-gpu-check"
rm -rf "$work" && mkdir -p "$work"
if [ -f "$here/gpu-bundle.tar.xz" ]; then
  tar -C "$work" -xJf "$here/gpu-bundle.tar.xz"
  bin="$work/gpu-bundle/bin"
  libs="$work/gpu-bundle/lib"
  say "using the bundle gpu-bundle.tar.xz"
else
  say "no gpu-bundle.tar.xz: building (DTNN_CUDA=1 scripts/setup.sh build)"
  DTNN_CUDA=1 bash "$here/scripts/setup.sh" build >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
  bin="$here/build/bin"
  libs=""
fi
# cuDNN, cuBLAS and NCCL: CUDA's own folder, and the wheels PyTorch brought (nvidia/*/lib).
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
export LD_LIBRARY_PATH="${libs:+$libs:}$cuda_home/lib64:$cuda_home/lib${pylibs:+:$pylibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STARPU_HOME="$work/starpu-home" STARPU_SILENT=1
missing="$(ldd "$bin/dtnn" | grep 'not found' || true)"
if [ -n "$missing" ]; then
  echo "gpu_check.sh: libraries missing for $bin/dtnn:" >&2
  echo "$missing" >&2
  exit 1
fi
"$bin/dtnn" models >/dev/null || exit 1
say "binaries ready"

# 2. CUDA tests.
status=0
say "CUDA tests (test_cuda)"
timeout 240 "$bin/test_cuda" --gtest_brief=1 || { status=1; say "CUDA tests FAILED"; }

# 3. dtnn on the GPU.
half=$(( steps / 2 ))
say "dtnn: resnet50_imagenet, batch $batch, $steps steps ($half untimed), --device cuda"
timeout 300 "$bin/dtnn" benchmark --model resnet50_imagenet --dataset synthetic --batch-size "$batch" \
  --synthetic-samples $(( batch * half )) --epochs 2 --steps-per-epoch "$half" --tiles 1 --device cuda \
  --quiet --report "$work/dtnn.json" || { status=1; say "dtnn benchmark FAILED"; }
dtnn_ips="$(python3 -c "import json; r=json.load(open('$work/dtnn.json')); print(round(r['images_per_second_after_first_epoch'], 1)); print(r['engine'])" 2>/dev/null | head -1)"
python3 -c "import json; print('dtnn engine:', json.load(open('$work/dtnn.json'))['engine'])" 2>/dev/null

# 4. PyTorch on the same GPU.
say "PyTorch: torchvision resnet50, batch $batch, $steps steps ($half untimed)"
torch_json="$(timeout 240 python3 "$here/bench/gpu_pytorch.py" --batch "$batch" --steps "$steps" --warmup "$half" | tail -1)"
echo "$torch_json"
torch_ips="$(python3 -c "import json,sys; print(round(json.loads(sys.argv[1])['images_per_second'], 1))" "$torch_json" 2>/dev/null)"

echo
echo "| model | batch | dtnn images/s | PyTorch images/s | ratio |"
echo "|---|---|---|---|---|"
ratio="$(python3 -c "import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 3))" "${dtnn_ips:-nan}" "${torch_ips:-nan}" 2>/dev/null)"
echo "| resnet50_imagenet | $batch | ${dtnn_ips:-n/a} | ${torch_ips:-n/a} | ${ratio:-n/a} |"
say "done (status $status)"
exit $status
