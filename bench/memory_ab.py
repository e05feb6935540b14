#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Peak memory and training speed of dtnn arms side by side in one run: builds (a binary from before a change
against one after it) or options (--host-allocator pool|system|starpu). Every round runs each arm once, in a
rotating order, so that the machine's drift hits all; reported: medians of images/s after a warm-up epoch, of the
process's peak RSS, each arm's ratios to the first arm, and the report's memory breakdown (memory_mb) where the
binary writes one.

  bench/memory_ab.py --arm base=/tmp/old/dtnn --arm pool=build/bin/dtnn:--host-allocator,pool \
                     --arm system=build/bin/dtnn:--host-allocator,system [--models resnet18_cifar10] [--runs 3]
                     [--steps 6] [--batch 64] [--json FILE]

An arm is LABEL=BINARY[:OPTION,VALUE,...]. Run it under the quiet lock (flock /work/locks/quiet.lock ...): it
quotes timings.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(binary, extra, model, a):
    batch = a.imagenet_batch if model.endswith("_imagenet") else a.batch
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [binary, "benchmark", "--model", model, "--dataset", "synthetic",
               "--synthetic-samples", str(max(a.steps * batch, 256) if not model.endswith("_imagenet")
                                          else (a.steps + 1) * batch),
               "--epochs", "2", "--steps-per-epoch", str(a.steps), "--batch-size", str(batch),
               "--workers", str(a.threads), "--tiles", str(a.tiles), "--quiet", "--report", report.name, *extra]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, STARPU_SILENT="1"))
        with open(report.name) as f:
            doc = json.load(f)
    return doc["images_per_second_after_first_epoch"], doc["peak_rss_mb"], doc.get("memory_mb"), doc["engine"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", action="append", required=True, help="LABEL=BINARY[:OPTION,VALUE,...]")
    ap.add_argument("--models", default="resnet18_cifar10")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6, help="steps per epoch (the first epoch is not timed)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--imagenet-batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=2)
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    arms = []
    for spec in a.arm:
        label, _, rest = spec.partition("=")
        binary, _, options = rest.partition(":")
        arms.append((label, binary, [o for o in options.split(",") if o]))

    med = statistics.median
    results, engine = {}, ""
    for model in a.models.split(","):
        got = {label: {"ips": [], "rss": [], "memory": None} for label, _, _ in arms}
        for r in range(a.runs):
            for i in range(len(arms)):
                label, binary, extra = arms[(i + r) % len(arms)]
                ips, rss, memory, engine = run(binary, extra, model, a)
                got[label]["ips"].append(ips)
                got[label]["rss"].append(rss)
                got[label]["memory"] = memory
                print(f"{model} round {r + 1} {label}: {ips:8.1f} images/s {rss:7.0f} MiB", flush=True)
        results[model] = got
    first = arms[0][0]
    print(f"\n{a.threads} workers, {a.tiles} tiles, medians of {a.runs} rounds, first epoch untimed; {engine}")
    print(f"{'model':20} {'arm':10} {'img/s':>8} {'ratio':>6} {'peak MiB':>9} {'ratio':>6}  memory_mb")
    for model, got in results.items():
        for label, _, _ in arms:
            g, f = got[label], got[first]
            print(f"{model:20} {label:10} {med(g['ips']):8.1f} {med(g['ips']) / med(f['ips']):6.2f} "
                  f"{med(g['rss']):9.0f} {med(g['rss']) / med(f['rss']):6.2f}  {json.dumps(g['memory'])}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "arms": a.arm, "engine": engine}, f, indent=2)


if __name__ == "__main__":
    main()
