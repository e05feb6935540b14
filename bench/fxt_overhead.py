#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What dtnn's own StarPU costs when FxT is compiled in but not recording: the same training steps with dtnn
built against our StarPU (scripts/build_starpu.sh: FxT, 256 CPU workers, MPI, CUDA where nvcc exists; no --fxt)
and against Debian's libstarpu-dev (no FxT, 4 CPU workers), runs alternating so that the machine's drift hits
both alike. Optionally a third arm records the FxT trace (--fxt), for what tracing itself costs.

  bench/fxt_overhead.py [--ours build] [--debian build-debian-starpu] [--runs 7] [--models simplecnn,resnet20_cifar10]
                        [--steps 20] [--workers 2] [--traced] [--json FILE]

Each run is `dtnn benchmark` (synthetic data, a warm-up epoch then --steps timed steps); the figure is the
step time of the timed epoch, the median over --runs runs; the ratio is ours / Debian's (1.00 = no cost), both
as the ratio of the medians and as the median of each round's ratio.
Then, free of that noise, what one empty task costs each StarPU (bench/starpu_task_cost.c, 2 and 8 buffers).
The Debian build is configured and built here (targets dtnn and starpu_task_cost) when its folder has no
bin/dtnn yet; it needs Debian's libstarpu-dev (scripts/setup.sh bench installs it).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    get = lambda key: fields.get(key, "?").strip()
    avx512 = "AVX-512" if "avx512f" in get("Flags").split() else "no AVX-512"
    return (f"{get('Model name')} (family {get('CPU family')} model {get('Model')}, {get('CPU(s)')} CPUs, "
            f"{avx512})")


def starpu_library(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "libstarpu-1.3" in line:
            return line.split("=>")[1].split()[0]
    return "?"


def build_debian(folder):
    env = dict(os.environ)
    env.pop("PKG_CONFIG_PATH", None)  # Debian's StarPU is the one pkg-config finds by default
    subprocess.run(["cmake", "-S", HERE, "-B", folder, "-DCMAKE_BUILD_TYPE=Release", "-DDTNN_STARPU_PREFIX=",
                    "-DDTNN_CUDA=OFF", "-DDTNN_BUILD_TESTS=OFF"], check=True, env=env)
    subprocess.run(["cmake", "--build", folder, "-j", str(os.cpu_count() or 1), "--target", "dtnn",
                    "starpu_task_cost"], check=True, env=env)


def task_cost_us(binary, buffers):
    run = subprocess.run([binary, "50000", str(buffers), "1"], capture_output=True, text=True,
                         env=dict(os.environ, STARPU_SILENT="1"), check=True)
    return float(run.stdout.split()[-1])


def step_seconds(binary, model, steps, workers, batch, extra):
    with tempfile.TemporaryDirectory(prefix="dtnn-fxt-bench-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [binary, "benchmark", "--model", model, "--steps-per-epoch", str(steps), "--workers", str(workers),
               "--batch-size", str(batch), "--quiet", "--report", report] + extra(tmp)
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, STARPU_SILENT="1"))
        if run.returncode != 0:
            sys.exit(f"fxt_overhead.py: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
        with open(report) as f:
            doc = json.load(f)
    return batch / doc["images_per_second_after_first_epoch"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ours", default=os.path.join(HERE, "build"), help="dtnn built against our StarPU")
    p.add_argument("--debian", default=os.path.join(HERE, "build-debian-starpu"),
                   help="dtnn built against Debian's StarPU (built here if missing)")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--models", default="simplecnn,resnet20_cifar10")
    p.add_argument("--steps", type=int, default=20, help="timed steps per run (after as many warm-up steps)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--traced", action="store_true", help="a third arm: our StarPU recording its FxT trace")
    p.add_argument("--json", help="write the figures to this file")
    a = p.parse_args()
    if a.runs < 5:
        p.error(f"--runs {a.runs}: expected at least 5 (medians of fewer runs do not hold still)")

    ours = os.path.join(a.ours, "bin", "dtnn")
    debian = os.path.join(a.debian, "bin", "dtnn")
    if not os.path.exists(ours):
        sys.exit(f"fxt_overhead.py: no {ours}, expected dtnn built against our StarPU (scripts/setup.sh build)")
    if not os.path.exists(debian):
        build_debian(a.debian)
    arms = {"debian": (debian, lambda tmp: []), "ours": (ours, lambda tmp: [])}
    if a.traced:
        arms["ours_traced"] = (ours, lambda tmp: ["--fxt", tmp])
    print(f"CPU: {cpu_name()}")
    for name, (binary, _) in arms.items():
        print(f"{name}: {binary} loads {starpu_library(binary)}")
    print(f"dtnn benchmark, batch {a.batch_size}, {a.workers} workers, {a.steps} timed steps, {a.runs} runs "
          f"alternating; median step time in ms")

    results = {"cpu": cpu_name(), "runs": a.runs, "steps": a.steps, "batch_size": a.batch_size,
               "workers": a.workers, "models": {}}
    for model in a.models.split(","):
        times = {name: [] for name in arms}
        names = list(arms)
        for run in range(a.runs):
            # The arms take turns in every position (a rotation per run): on a shared machine a run's position
            # in the round (first after a pause, or right after another run) shifts its time by several percent.
            order = names[run % len(names):] + names[:run % len(names)]
            for name in order:
                binary, extra = arms[name]
                times[name].append(step_seconds(binary, model, a.steps, a.workers, a.batch_size, extra))
        med = {name: statistics.median(t) for name, t in times.items()}
        row = {name: {"median_ms": med[name] * 1e3, "runs_ms": [x * 1e3 for x in t]} for name, t in times.items()}
        # Besides the ratio of the medians, the median of the per-round ratios: the two runs of a round share the
        # machine's load of that moment.
        paired = lambda num, den: statistics.median(x / y for x, y in zip(times[num], times[den]))
        row["ratio_ours_to_debian"] = med["ours"] / med["debian"]
        row["paired_ratio_ours_to_debian"] = paired("ours", "debian")
        line = f"{model:>18}: debian {med['debian'] * 1e3:8.2f}  ours {med['ours'] * 1e3:8.2f}  " \
               f"ours/debian {row['ratio_ours_to_debian']:.3f} (paired {row['paired_ratio_ours_to_debian']:.3f})"
        if a.traced:
            row["ratio_traced_to_ours"] = med["ours_traced"] / med["ours"]
            row["paired_ratio_traced_to_ours"] = paired("ours_traced", "ours")
            line += f"  traced {med['ours_traced'] * 1e3:8.2f} (traced/ours {row['ratio_traced_to_ours']:.3f}, " \
                    f"paired {row['paired_ratio_traced_to_ours']:.3f})"
        spread = {name: (min(t) * 1e3, max(t) * 1e3) for name, t in times.items()}
        line += "  range " + ", ".join(f"{n} {lo:.1f}-{hi:.1f}" for n, (lo, hi) in spread.items())
        print(line, flush=True)
        results["models"][model] = row
    # What one task costs each StarPU, free of the step's noise: empty tasks (bench/starpu_task_cost.c).
    costs = {"debian": os.path.join(a.debian, "bin", "starpu_task_cost"),
             "ours": os.path.join(a.ours, "bin", "starpu_task_cost")}
    if all(os.path.exists(b) for b in costs.values()):
        for buffers in (2, 8):
            us = {name: [] for name in costs}
            for run in range(a.runs):
                for name in (list(costs) if run % 2 == 0 else list(reversed(costs))):
                    us[name].append(task_cost_us(costs[name], buffers))
            med = {name: statistics.median(v) for name, v in us.items()}
            results[f"task_us_{buffers}_buffers"] = med
            print(f"empty task, {buffers} buffers, 1 worker: debian {med['debian']:.2f} us, "
                  f"ours {med['ours']:.2f} us (median of {a.runs}, each the best of 3 x 50,000)", flush=True)
    else:
        print("(no bin/starpu_task_cost in both build folders: per-task cost not measured)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
