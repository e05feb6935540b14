#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Does the GPU train the weights the CPU trains? For each model and tile count: `dtnn train` on synthetic data
(SGD with momentum, the same seed), a checkpoint after every step, once with --device cpu and --cuda-runs times
with --device cuda; then every floating-point tensor of the checkpoints (parameters, buffers, optimizer state)
compared after each step:

  rel = max |cuda - cpu| / max(1e-3, max |cpu|)     (per tensor; the CUDA test's yardstick, 1e-4)

The first step shows a layer's error before training amplifies it: the deepest parameter over 1e-4 after one
step is where the backward pass first goes wrong. CUDA against CUDA (a second run) shows whether the GPU is
deterministic (a race between streams would show here). For reference, the CPU's two convolution algorithms
(convgemm, im2col) differ by 2.4e-6 on resnet20_cifar10 after 3 steps (Zen 5, 2026-12-04).

Needs numpy and h5py. Prints a table and writes --out JSON.

  bench/gpu_vs_cpu.py --dtnn build-cuda/bin/dtnn --models resnet20_cifar10,vgg11bn_cifar10 --tiles 1,2 --steps 3
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time


def load(path):
    import h5py
    import numpy as np
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
                out[name] = np.asarray(obj[()], dtype=np.float64)
        f.visititems(visit)
    return out


def compare(want, got):
    import numpy as np
    rows = []
    for key, a in want.items():
        if key not in got or got[key].shape != a.shape:
            rows.append((key, float("inf")))
            continue
        scale = max(1e-3, float(np.abs(a).max()) if a.size else 0.0)
        rows.append((key, float(np.abs(a - got[key]).max()) / scale if a.size else 0.0))
    rows.sort(key=lambda r: -r[1])
    return rows


def train(dtnn, model, device, tiles, steps, batch, folder, timeout, env, extra=()):
    cmd = [dtnn, "train", "--model", model, "--dataset", "synthetic", "--synthetic-samples", str(batch * steps),
           "--batch-size", str(batch), "--epochs", "1", "--steps-per-epoch", str(steps), "--tiles", str(tiles),
           "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--seed", "7", "--device", device,
           "--checkpoint-dir", folder, "--checkpoint-steps", "1", "--keep", str(steps + 2), "--quiet", *extra]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stdout + p.stderr)[-1500:]}")
    files = {}
    for path in glob.glob(os.path.join(folder, "ckpt-*step*.h5")):
        step = int(path.rsplit("step", 1)[1].split(".")[0])
        files[step] = path
    if sorted(files) != list(range(1, steps + 1)):
        raise RuntimeError(f"{model} --device {device}: checkpoints of steps {sorted(files)}, expected 1..{steps}")
    return files, time.time() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtnn", default="build-cuda/bin/dtnn")
    p.add_argument("--models", default="resnet20_cifar10,resnet18_cifar10,vgg11bn_cifar10,simplecnn")
    p.add_argument("--tiles", default="1,2")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--cuda-runs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per dtnn run")
    p.add_argument("--budget", type=float, default=0.0, help="stop starting new models after this many seconds")
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--out", default="")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set in dtnn's environment only (e.g. its LD_LIBRARY_PATH), not in this script's")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=ARG,...|ENV=VALUE,...",
                   help="a variant of every comparison: dtnn options (--fusion,off) and environment settings "
                        "(DTNN_KEEP_DEAD_TENSORS=1) given to both sides; default: one variant, 'default', with none")
    p.add_argument("--test-device", default="cuda", choices=["cuda", "all", "cpu"],
                   help="the side compared with --device cpu (cpu: rehearse the script where there is no GPU)")
    a = p.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        if "=" not in kv:
            p.error(f"--env {kv}, expected KEY=VALUE")
        k, v = kv.split("=", 1)
        env[k] = v
    variants = []
    for v in a.variant or ["default="]:
        label, _, spec = v.partition("=")
        args, venv = [], {}
        for item in filter(None, spec.split(",")):
            if "=" in item and not item.startswith("-"):
                k, val = item.split("=", 1)
                venv[k] = val
            else:
                args.append(item)
        variants.append((label, args, venv))
    start = time.time()
    results = []
    for model, tiles, (label, extra, venv) in [(m, int(t), v) for m in a.models.split(",")
                                               for t in a.tiles.split(",") for v in variants]:
        run_env = dict(env, **venv)
        if a.budget and time.time() - start > a.budget:
            results.append({"model": model, "tiles": tiles, "variant": label, "status": "skipped",
                            "reason": "budget"})
            continue
        row = {"model": model, "tiles": tiles, "variant": label, "batch": a.batch, "steps": a.steps}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                cpu, row["cpu_seconds"] = train(a.dtnn, model, "cpu", tiles, a.steps, a.batch,
                                                os.path.join(tmp, "cpu"), a.timeout, run_env, extra)
                cudas = []
                for r in range(a.cuda_runs):
                    files, secs = train(a.dtnn, model, a.test_device, tiles, a.steps, a.batch,
                                        os.path.join(tmp, f"cuda{r}"), a.timeout, run_env, extra)
                    cudas.append(files)
                    row[f"cuda{r}_seconds"] = secs
                row["by_step"] = []
                for step in range(1, a.steps + 1):
                    want = load(cpu[step])
                    got = load(cudas[0][step])
                    rows = compare(want, got)
                    entry = {"step": step, "worst": rows[0][1] if rows else 0.0,
                             "over_tolerance": sum(1 for _, r in rows if r > a.tolerance),
                             "tensors": len(rows), "top": [[k, r] for k, r in rows[:6]],
                             "all": [[k, r] for k, r in rows]}
                    if len(cudas) > 1:
                        again = compare(got, load(cudas[1][step]))
                        entry["cuda_vs_cuda_worst"] = again[0][1] if again else 0.0
                        entry["cuda_vs_cuda_top"] = [[k, r] for k, r in again[:3]]
                    row["by_step"].append(entry)
                row["status"] = "pass" if all(e["over_tolerance"] == 0 for e in row["by_step"]) else "fail"
        except Exception as e:  # a failed run is a row that says so
            row["status"] = "error"
            row["error"] = str(e)[-2000:]
        results.append(row)
        if row.get("by_step"):
            for e in row["by_step"]:
                print(f"{model:20s} tiles {tiles} {label:10s} step {e['step']}: cuda vs cpu worst {e['worst']:.3g} "
                      f"({e['over_tolerance']}/{e['tensors']} over {a.tolerance:g}; {e['top'][0][0]}), "
                      f"cuda vs cuda {e.get('cuda_vs_cuda_worst', float('nan')):.3g}", flush=True)
        else:
            print(f"{model:20s} tiles {tiles} {label:10s}: {row['status']} {row.get('error', row.get('reason', ''))}",
                  flush=True)
    doc = {"tool": "bench/gpu_vs_cpu.py", "tolerance": a.tolerance, "seconds": time.time() - start,
           "results": results}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0 if all(r["status"] in ("pass", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
