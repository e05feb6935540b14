#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What `--rank-sum ordered` costs (docs/data-parallel.md, "Ordered sums over the ranks"): a model trained by 2 MPI
ranks x 1 worker (local batch B, 1 tile) with the allreduce and with ordered sums, and by 1 rank x 2 workers (batch
2B, 2 tiles), runs interleaved; the median step time of each run's second half of steps (the report's step_seconds,
the last step left out), the median of the runs, and each configuration's weights checksums (the ordered run's must
equal the one rank's).

  python3 bench/rank_sum.py [--model gpt_char] [--dataset text] [--batch 8] [--steps 16] [--runs 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTNN = os.path.join(ROOT, "build", "bin", "dtnn")
MPIRUN = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt_char")
    ap.add_argument("--dataset", default="text")
    ap.add_argument("--batch", type=int, default=8, help="per rank; the one rank trains twice as many")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    base = ["train", "--model", a.model, "--dataset", a.dataset, "--epochs", "1", "--steps-per-epoch", str(a.steps),
            "--no-test", "--quiet"]
    local = ["--batch-size", str(a.batch), "--tiles", "1", "--workers", "1"]
    configs = {
        "2 ranks x 1 worker, allreduce": MPIRUN + [DTNN] + base + local,
        "2 ranks x 1 worker, ordered": MPIRUN + [DTNN] + base + local + ["--rank-sum", "ordered"],
        "1 rank x 2 workers, 2 tiles": [DTNN] + base + ["--batch-size", str(2 * a.batch), "--tiles", "2", "--workers",
                                                        "2"],
    }
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    print(f"CPU: {cpu}, {os.cpu_count()} CPUs; {a.model} on {a.dataset}, {a.steps} steps a run", flush=True)
    steps = {k: [] for k in configs}
    checksums = {}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        for r in range(a.runs):
            for name, cmd in configs.items():
                subprocess.run(cmd + ["--report", report], check=True, stdout=subprocess.DEVNULL)
                with open(report) as f:
                    doc = json.load(f)
                s = doc["step_seconds"]
                steps[name].append(statistics.median(s[len(s) // 2:-1]))
                checksums[name] = doc["weights_checksums"]
                print(f"run {r + 1}: {name}: {steps[name][-1] * 1000:.1f} ms a step", flush=True)
    tokens = 2 * a.batch
    for name, values in steps.items():
        med = statistics.median(values)
        print(f"{name}: {med * 1000:.1f} ms a step ({tokens / med:.1f} samples/s), runs "
              f"{', '.join(f'{v * 1000:.1f}' for v in values)}; weights checksums {', '.join(checksums[name])}")


if __name__ == "__main__":
    main()
