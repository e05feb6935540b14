#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Training throughput of the default CNN (simplecnn) in dtnn and in PyTorch, side by side in one run.

Both train the same model (2 x conv3x3+ReLU+maxpool, dense 128, dense 10) on Fashion-MNIST at the same batch
size and thread count with SGD + momentum, for the same number of steps; the first epoch of each run is a
warm-up and is not timed. Runs alternate between the two so that machine noise hits both; medians are
reported with the ratio dtnn / PyTorch.

  bench/compare_pytorch_cnn.py [--runs 3] [--steps 150] [--batch 64] [--threads 2] [--dtnn build/bin/dtnn]
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/datasets/fashion-mnist"


def run_dtnn(exe, steps, batch, threads, tiles):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [exe, "train", "--model", "simplecnn", "--dataset", "fashion-mnist", "--epochs", "2",
               "--steps-per-epoch", str(steps), "--batch-size", str(batch), "--workers", str(threads),
               "--tiles", str(tiles), "--lr", "0.01", "--momentum", "0.9", "--quiet", "--no-test",
               "--report", report.name]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, STARPU_SILENT="1"))
        with open(report.name) as f:
            doc = json.load(f)
    return doc["images_per_second_after_first_epoch"], doc["engine"]


TORCH_CHILD = r"""
import gzip, sys, time, numpy as np, torch, torch.nn as nn
steps, batch, threads = map(int, sys.argv[1:4])
torch.set_num_threads(threads)
torch.manual_seed(0)
raw = gzip.open(sys.argv[4] + "/train-images-idx3-ubyte.gz").read()
x = torch.tensor(np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32) / 255)
y = torch.tensor(np.frombuffer(gzip.open(sys.argv[4] + "/train-labels-idx1-ubyte.gz").read(), np.uint8, offset=8).astype(np.int64))
m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                  nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
def epoch():
    perm = torch.randperm(x.shape[0])
    for s in range(steps):
        idx = perm[s * batch:(s + 1) * batch]
        xb, yb = x[idx], y[idx]   # a real loop gathers its batch every step too
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(m(xb), yb).backward()
        opt.step()
epoch()
t = time.perf_counter()
epoch()
print(steps * batch / (time.perf_counter() - t))
"""


def run_torch(steps, batch, threads):
    out = subprocess.run(["/usr/bin/python3", "-c", TORCH_CHILD, str(steps), str(batch), str(threads), DATA],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=2)
    ap.add_argument("--dtnn", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "dtnn"))
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()

    ours, theirs, engine = [], [], ""
    for r in range(a.runs):
        ips, engine = run_dtnn(a.dtnn, a.steps, a.batch, a.threads, a.tiles)
        ours.append(ips)
        theirs.append(run_torch(a.steps, a.batch, a.threads))
        print(f"run {r + 1}: dtnn {ours[-1]:8.1f} images/s   PyTorch {theirs[-1]:8.1f} images/s", flush=True)
    med_ours, med_theirs = statistics.median(ours), statistics.median(theirs)
    print(f"\nsimplecnn, Fashion-MNIST, batch {a.batch}, {a.threads} threads, {a.steps} timed steps, "
          f"median of {a.runs} runs")
    print(f"  dtnn    {med_ours:8.1f} images/s   ({engine})")
    import torch  # noqa: E402  (only for its version string)
    print(f"  PyTorch {med_theirs:8.1f} images/s   (torch {torch.__version__}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')})")
    print(f"  ratio dtnn / PyTorch: {med_ours / med_theirs:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"dtnn": ours, "pytorch": theirs, "ratio": med_ours / med_theirs, "batch": a.batch,
                       "threads": a.threads, "steps": a.steps, "engine": engine}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
