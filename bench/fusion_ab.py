#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fused passes against the same engine's unfused passes (dtnn --fusion on|off), side by side in one run: training
images/s after a warm-up epoch and peak memory of each arm (medians of --runs, the arms alternating so that the
machine's drift hits both), and with --trace the time every kind of pass takes (bench/trace_stats.py --group
codelet) and the tasks of one step.

  bench/fusion_ab.py [--models resnet18_cifar10,vgg16_cifar10,vgg16bn_cifar10] [--runs 3] [--steps 8] [--trace DIR]

Run it under the quiet lock (flock /work/locks/quiet.lock ...): it quotes timings.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(exe, model, fusion, a, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [exe, "benchmark", "--model", model, "--dataset", "synthetic",
               "--synthetic-samples", str(max(a.steps * a.batch, 256)), "--epochs", "2",
               "--steps-per-epoch", str(a.steps), "--batch-size", str(a.batch), "--workers", str(a.threads),
               "--tiles", str(a.tiles), "--fusion", fusion, "--quiet", "--report", report.name, *extra]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, STARPU_SILENT="1"))
        with open(report.name) as f:
            doc = json.load(f)
    return doc["images_per_second_after_first_epoch"], doc["peak_rss_mb"], doc["engine"]


def pass_times(trace, skip_steps):
    """Seconds per kind of pass (codelet:pass) after the first skip_steps steps, and the number of steps."""
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    loads = [e for e in events if e["name"].startswith("data:")]
    tiles = len({e["args"].get("tile", 0) for e in loads}) or 1
    starts = sorted(e["ts"] for e in loads)[::tiles]
    cut = starts[skip_steps] if skip_steps < len(starts) else starts[-1]
    steps = len(starts) - skip_steps
    out = collections.Counter()
    for e in events:
        if e["ts"] >= cut:
            out[f'{e["args"].get("codelet", "?")}:{e.get("cat", "")}'] += e["dur"] / 1e6
    return out, steps


def task_count(dag):
    with open(dag) as f:
        doc = json.load(f)
    return len(doc["tasks"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18_cifar10,vgg16_cifar10,vgg16bn_cifar10")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="steps per epoch (the first epoch is not timed)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tiles", type=int, default=2)
    ap.add_argument("--dtnn", default=os.path.join(HERE, "..", "build", "bin", "dtnn"))
    ap.add_argument("--trace", help="folder: also trace one run of each arm and compare the passes")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()

    results, engine = {}, ""
    for model in a.models.split(","):
        arms = {"off": ([], []), "on": ([], [])}
        for r in range(a.runs):
            for fusion in (("off", "on") if r % 2 == 0 else ("on", "off")):
                ips, rss, engine = run(a.dtnn, model, fusion, a)
                arms[fusion][0].append(ips)
                arms[fusion][1].append(rss)
            print(f"{model} run {r + 1}: unfused {arms['off'][0][-1]:7.1f} images/s {arms['off'][1][-1]:7.0f} MiB   "
                  f"fused {arms['on'][0][-1]:7.1f} images/s {arms['on'][1][-1]:7.0f} MiB", flush=True)
        res = {f: {"images_per_second": v[0], "peak_rss_mb": v[1]} for f, v in arms.items()}
        res["speedup"] = statistics.median(arms["on"][0]) / statistics.median(arms["off"][0])
        res["memory_ratio"] = statistics.median(arms["on"][1]) / statistics.median(arms["off"][1])
        if a.trace:
            os.makedirs(a.trace, exist_ok=True)
            times, tasks = {}, {}
            for fusion in ("off", "on"):
                trace = os.path.join(a.trace, f"{model}.fusion-{fusion}.json")
                dag = os.path.join(a.trace, f"{model}.fusion-{fusion}.dag.json")
                run(a.dtnn, model, fusion, a, ["--trace", trace, "--dag", dag])
                times[fusion], steps = pass_times(trace, 2)
                tasks[fusion] = task_count(dag)
            res["tasks_per_step"] = tasks
            res["pass_seconds_per_step"] = {f: {k: v / steps for k, v in t.items()} for f, t in times.items()}
            print(f"\n{model}: tasks in one step {tasks['off']} unfused, {tasks['on']} fused; seconds per step:")
            keys = sorted(set(times["off"]) | set(times["on"]), key=lambda k: -(times["off"][k] + times["on"][k]))
            for k in keys:
                if not k.startswith("conv2d") and times["off"][k] + times["on"][k] > 0:
                    print(f"  {k:44} {times['off'][k] / steps:8.4f} {times['on'][k] / steps:8.4f}")
            total = {f: sum(v for k, v in t.items() if not k.startswith("conv2d")) / steps for f, t in times.items()}
            print(f"  {'all but the convolutions':44} {total['off']:8.4f} {total['on']:8.4f}")
        results[model] = res
        print(f"{model}: fused/unfused images/s {res['speedup']:.3f}, peak memory {res['memory_ratio']:.3f}\n",
              flush=True)
    print(f"batch {a.batch}, {a.threads} workers, {a.tiles} tiles, medians of {a.runs} runs, first epoch untimed")
    print(f"dtnn: {engine}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"engine": engine, "batch": a.batch, "threads": a.threads, "tiles": a.tiles,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
