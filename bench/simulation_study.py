#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validation of `dtnn simulate` (docs/simulation.md): the step time SimGrid predicts from calibrations of each model
against the step time `dtnn train` measures on this machine, for 1 and 2 workers under lws and dmdas and for 2
MPI ranks x 1 worker; then predictions nobody here can measure (--scaling).

  bench/simulation_study.py [--models simplecnn,resnet18_cifar10,vgg16_cifar10] [--reps 3] [--lock]
                            [--out bench/results/simulation_study] [--scaling] [--gpu] [--gpu-scaling]
                            [--resimulate]

Per model, in each of --reps rounds: per number of busy cores (1, 2) an untimed calibration, then `build/bin/dtnn
calibrate` (lws) into OUT/machines/<model>-w<busy>-r<round>.tar.xz, and the same under `mpirun -np 2` with one worker
per rank into OUT/machines/<model>-ranks2-r<round>.tar.xz (rank 0's models, for the 2-rank rows); then, alternating the configurations, `dtnn train` on
synthetic data (median step time of the second half of the steps, from the report's step_seconds) and
`build-simgrid/bin/dtnn simulate` on that round's calibration with as many busy cores (ranks x workers). A row's
error is the median of its rounds' errors. Each row is predicted with durations at their models' means on cores
alike, with the calibrated cores' speeds (--worker-speeds), with scattered durations (--scatter), and with the speeds
but without the calibration's time between tasks (--task-overhead-us 0). The ranks' network is measured by `mpirun -np 2 build/bin/allreduce_cost` (MPI_Allreduce by size, fitted as a ring's link).
--lock takes /work/locks/quiet.lock around every timed command (calibration, real runs), one at a time.
Writes OUT.json and OUT.md. Calibrations are machine archives (`dtnn calibrate --out NAME.tar.xz`, one file each);
a machine folder of the same name (an older run's) is read where there is no archive.
"""
import argparse
import json
import os
import statistics
import subprocess
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REAL = os.path.join(ROOT, "build", "bin", "dtnn")
SIM = os.path.join(ROOT, "build-simgrid", "bin", "dtnn")
LOCK = "/work/locks/quiet.lock"
# batch, tiles, calibration steps, measured steps
SETUP = {
    "simplecnn": (64, 2, 30, 30),
    "resnet18_cifar10": (32, 2, 12, 16),
    "vgg16_cifar10": (32, 2, 12, 16),
    "gpt_char": (8, 2, 8, 10),
}
CONFIGS = [(1, "lws"), (2, "lws"), (1, "dmdas"), (2, "dmdas")]
# Open MPI's shared-memory transport as dtnn chooses it (runtime/mpi.cpp: single copy where the kernel allows it).
MPIRUN = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root", "-x", "STARPU_SILENT"]


ARCHIVE = ".tar.xz"


def machine_path(machines, name):
    """The calibration `name` in the folder `machines`: its archive, else a machine folder of that name (written by
    an older run), else the archive to write."""
    archive = os.path.join(machines, name + ARCHIVE)
    folder = os.path.join(machines, name)
    return folder if not os.path.exists(archive) and os.path.isdir(folder) else archive


def machine_json(machine):
    """machine.json of a machine archive or folder (None where there is none)."""
    if os.path.isdir(machine):
        path = os.path.join(machine, "machine.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)
    if not os.path.exists(machine):
        return None
    with tarfile.open(machine) as t:
        for name in ("machine.json", "./machine.json"):
            try:
                return json.load(t.extractfile(name))
            except KeyError:
                continue
    return None


def locked(cmd, lock):
    return (["flock", LOCK] if lock else []) + cmd


def run(cmd):
    env = dict(os.environ, STARPU_SILENT="1")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return p.stdout


def measure(model, workers, sched, ranks, a):
    batch, tiles, _, steps = SETUP[model]
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [REAL, "train", "--model", model, "--dataset", "synthetic", "--synthetic-samples",
               str(batch * ranks * steps), "--batch-size", str(batch), "--steps-per-epoch", str(steps), "--epochs",
               "1", "--tiles", str(tiles), "--workers", str(workers), "--scheduler", sched, "--no-test", "--quiet",
               "--report", report.name]
        run(locked((MPIRUN if ranks > 1 else []) + cmd, a.lock))
        with open(report.name) as f:
            doc = json.load(f)
    # The steady state: the second half of the steps, without the last (it ends when every task has run). The
    # first steps are no measure: after the first touches the driver runs ahead by its window of two steps while
    # the backward passes catch up (resnet18_cifar10, 2 workers: 3502, 2266, 8, 9, 197, 479, 484 ms).
    times = doc["step_seconds"]
    return statistics.median(times[len(times) // 2:-1]) * 1e3


def run_simulation(args, ranks=1, net=None):
    """`dtnn simulate ARGS` (the ranks on net's links when ranks > 1); its JSON report."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [SIM, "simulate", *args, "--report", report.name]
        if ranks > 1:
            cmd += ["--ranks", str(ranks), "--link-gbps", str(net["link_gbps"]), "--link-latency-us",
                    str(net["link_latency_us"])]
            if net.get("sums_on_cores"):
                cmd += ["--sums-on-cores"]
        run(cmd)
        with open(report.name) as f:
            return json.load(f)


def validation_network(net):
    """The validation's ranks exchange through shared memory on this machine's cores: each sum is CPU time of
    the rank's cores (dtnn simulate --sums-on-cores), on the link fitted by allreduce_cost."""
    return dict(net, sums_on_cores=True)


def core_speeds(machine, c):
    """`dtnn simulate --worker-speeds` of configuration c = (workers, scheduler, ranks) from the speeds of the CPU
    workers its calibration measured (machine.json; None for a calibration from before they were): this VM's two
    cores differ by 20-40%, which core varying over tens of minutes (docs/simulation.md). One rank's workers run at
    the calibrated cores' speeds; of several ranks of one worker each (one core each), every rank waits for the
    sums of the slowest, so the one simulated rank runs at the slowest core's speed."""
    speeds = machine_json(machine)["calibrations"][-1].get("cpu_worker_speeds")
    if not speeds:
        return None
    if c[2] > 1:
        return [min(speeds)] * c[0]
    return speeds if len(speeds) == c[0] else None


def predict(model, machine, c, net):
    """A validation configuration c = (workers, scheduler, ranks) simulated on one calibration: the report with
    durations at their models' means on cores alike, the step with the calibrated cores' speeds (core_speeds; the
    means' where there are none), the step with scattered durations (SCATTER), the speeds, and the step with the
    speeds but without the calibration's time between tasks (--task-overhead-us 0: StarPU's own 1 us a buffer)."""
    net = validation_network(net)
    doc = simulate(model, machine, c[0], c[1], c[2], net)
    speeds = core_speeds(machine, c)
    with_speeds = ("--worker-speeds", ",".join(map(str, speeds))) if speeds else ()
    speeds_ms = simulate(model, machine, c[0], c[1], c[2], net, with_speeds)["step_ms"] if speeds else doc["step_ms"]
    bare_ms = simulate(model, machine, c[0], c[1], c[2], net, (*with_speeds, "--task-overhead-us", "0"))["step_ms"]
    return doc, speeds_ms, simulate(model, machine, c[0], c[1], c[2], net, SCATTER)["step_ms"], speeds, bare_ms


def simulate(model, machine, workers, sched, ranks=1, net=None, extra=()):
    batch, tiles, _, _ = SETUP.get(model, (64, 2, 0, 0))
    return run_simulation(["--model", model, "--machine", machine, "--batch-size", str(batch), "--tiles", str(tiles),
                           "--workers", str(workers), "--scheduler", sched, "--steps", "12", "--warmup", "2", *extra],
                          ranks, net)


# Predictions for machines we do not have: nodes of 32 cores (this machine's cores, --cpu-speed 1), batch 32 per
# node in 32 tiles (one sample per core), 25 MiB buckets, 1..64 nodes on a 100 Gb/s, 2 us network.
SCALING_MODELS = ["resnet50_imagenet", "vgg16_imagenet"]
SCALING_RANKS = [1, 2, 4, 8, 16, 32, 64]
SCALING_NET = {"link_gbps": 100.0, "link_latency_us": 2.0}


def scaling(a):
    machines = os.path.join(os.path.dirname(a.out), "machines")
    rows = []
    for model in a.scaling_models.split(","):
        machine = machine_path(machines, f"{model}-b32-t32")
        if machine_json(machine) is None:
            print(run(locked([REAL, "calibrate", "--model", model, "--out", machine, "--batch-size", "32", "--tiles",
                              "32", "--workers", "2", "--steps", "12", "--warmup", "2"], a.lock)), flush=True)
        base = None
        for ranks in [int(r) for r in a.scaling_ranks.split(",")]:
            doc = run_simulation(["--model", model, "--machine", machine, "--batch-size", "32", "--tiles", "32",
                                  "--cpus", "32", "--workers", "32", "--scheduler", "lws", "--steps", "12",
                                  "--warmup", "2"], ranks, SCALING_NET)
            step = doc["step_ms"]
            base = base or step
            net = doc["network"]["allreduce_ms_per_step"] if ranks > 1 else 0.0
            rows.append({"model": model, "ranks": ranks, "step_ms": step, "images_per_second":
                         doc["images_per_second"], "allreduce_ms_per_step": net, "exposed_ms": step - base,
                         "efficiency": base / step})
            print(f"{model:10} {ranks:3} nodes: step {step:9.1f} ms, {doc['images_per_second']:9.1f} images/s, "
                  f"allreduce {net:7.1f} ms a step, exposed {step - base:7.1f} ms, efficiency "
                  f"{100 * base / step:5.1f}%", flush=True)
    with open(a.out + "_scaling.json", "w") as f:
        json.dump({"network": SCALING_NET, "rows": rows}, f, indent=1)
    with open(a.out + "_scaling.md", "w") as f:
        f.write("Nodes of 32 simulated cores (this machine's, calibrated here), batch 32 per node in 32 tiles, lws, "
                f"25 MiB buckets, ring allreduce over {SCALING_NET['link_gbps']:.0f} Gb/s links of "
                f"{SCALING_NET['link_latency_us']:.0f} us\n\n")
        f.write("| model | nodes | step ms | images/s | allreduce ms a step | exposed ms | efficiency |\n"
                "|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['ranks']} | {r['step_ms']:.1f} | {r['images_per_second']:.1f} | "
                    f"{r['allreduce_ms_per_step']:.1f} | {r['exposed_ms']:.1f} | {100 * r['efficiency']:.1f}% |\n")
    print(f"wrote {a.out}_scaling.json and .md")


# The GPU machine: bench/results/machines/h200_xeon16.tar.xz, calibrated by bench/gpu_check.sh on a borrowed H200 with 16
# Xeon cores (2026-12-04): each model at batch 64, 1 tile, --device cuda, 2 CPU workers, dmdas, 20 steps.
GPU_MACHINE = os.path.join(HERE, "results", "machines", "h200_xeon16" + ARCHIVE)
# vgg16_cifar10 and resnet18_cifar10 are not simulated: that calibration left tile_sum shapes with fewer than 10
# samples (docs/simulation.md).
GPU_SCALING = [("resnet50_imagenet", 64)]
# 1..64 nodes, 12 steps each, the median after 2 (with 4 steps, the window of two steps in flight had not filled:
# 249 ms against 133 at 20).
GPU_NODES = [1, 2, 4, 8, 16, 32, 64]


def gpu_simulate(model, batch, gpus=1, ranks=1, steps=12):
    return run_simulation(["--model", model, "--machine", GPU_MACHINE, "--batch-size", str(batch), "--tiles", "1",
                           "--workers", "2", "--device", "cuda", "--gpus", str(gpus), "--scheduler", "dmdas",
                           "--steps", str(steps), "--warmup", "2"], ranks, SCALING_NET)


def gpu_validation(a):
    """Each GPU calibration's own measured step (the median after 2 of its 20 steps, on the H200) against the
    simulation of the same configuration from the models it wrote."""
    machine = machine_json(GPU_MACHINE)
    rows = []
    for c in machine["calibrations"]:
        try:
            doc = gpu_simulate(c["model"], c["batch_size"], steps=c["steps"])
        except RuntimeError as e:
            # StarPU stops a simulation at a shape its calibration saw fewer than 10 times.
            reason = [l for l in str(e).splitlines() if "perfmodel" in l or "calibrated" in l][:1]
            rows.append({"model": c["model"], "batch": c["batch_size"], "measured_ms": c["step_ms"],
                         "failed": reason[0] if reason else str(e)[-300:]})
            print(f"{c['model']:18} not simulated: {rows[-1]['failed']}", flush=True)
            continue
        pred, real = doc["step_ms"], c["step_ms"]
        rows.append({"model": c["model"], "batch": c["batch_size"], "measured_ms": real, "predicted_ms": pred,
                     "error": pred / real - 1.0,
                     "measured_gpu_utilisation": c["worker_use"][0]["utilisation"],
                     "predicted_gpu_utilisation": [w["utilisation"] for w in doc["worker_use"]
                                                   if w["name"].startswith("CUDA")][0]})
        print(f"{c['model']:18} measured {real:8.2f} ms  predicted {pred:8.2f} ms  error {100 * (pred / real - 1):+6.1f}%",
              flush=True)
    with open(a.out + "_gpu.json", "w") as f:
        json.dump({"machine": GPU_MACHINE, "cpu": machine.get("cpu"), "rows": rows}, f, indent=1)
    with open(a.out + "_gpu.md", "w") as f:
        f.write("NVIDIA H200 with 16 Xeon cores (bench/results/machines/h200_xeon16.tar.xz): batch 64, 1 tile, --device "
                "cuda, 2 CPU workers, dmdas; measured: the calibration's own 20 steps (median after 2)\n\n")
        f.write("| model | batch | measured ms | predicted ms | error | GPU busy measured | GPU busy predicted |\n"
                "|---|---|---|---|---|---|---|\n")
        for r in rows:
            if "failed" in r:
                f.write(f"| {r['model']} | {r['batch']} | {r['measured_ms']:.2f} | not simulated | | | |\n")
                continue
            f.write(f"| {r['model']} | {r['batch']} | {r['measured_ms']:.2f} | {r['predicted_ms']:.2f} | "
                    f"{100 * r['error']:+.1f}% | {100 * r['measured_gpu_utilisation']:.0f}% | "
                    f"{100 * r['predicted_gpu_utilisation']:.0f}% |\n")
    print(f"wrote {a.out}_gpu.json and .md")


def gpu_scaling(a):
    """Nodes of 1 or 4 H200s (copies of the calibrated one), one rank per GPU, batch 64 per GPU, the ring over
    every rank: a ring's inter-node hops carry what a 1-GPU-per-node ring's do, so the node link is the
    bottleneck either way."""
    rows = []
    for model, batch in GPU_SCALING:
        base = None
        for per_node in (1, 4):
            for nodes in GPU_NODES:
                ranks = nodes * per_node
                doc = gpu_simulate(model, batch, ranks=ranks, steps=12)
                step = doc["step_ms"]
                base = base or step
                net = doc["network"]["allreduce_ms_per_step"] if ranks > 1 else 0.0
                rows.append({"model": model, "gpus_per_node": per_node, "nodes": nodes, "ranks": ranks,
                             "step_ms": step, "images_per_second": doc["images_per_second"],
                             "allreduce_ms_per_step": net, "exposed_ms": step - base, "efficiency": base / step})
                print(f"{model:18} {per_node} GPU/node {nodes:3} nodes: step {step:8.2f} ms, "
                      f"{doc['images_per_second']:10.1f} images/s, allreduce {net:7.2f} ms a step, exposed "
                      f"{step - base:7.2f} ms, efficiency {100 * base / step:5.1f}%", flush=True)
    with open(a.out + "_gpu_scaling.json", "w") as f:
        json.dump({"machine": GPU_MACHINE, "network": SCALING_NET, "rows": rows}, f, indent=1)
    with open(a.out + "_gpu_scaling.md", "w") as f:
        f.write("Nodes of 1 or 4 simulated H200s (bench/results/machines/h200_xeon16.tar.xz), one rank per GPU, batch 64 "
                "per GPU, dmdas, 25 MiB buckets, ring allreduce over every rank on "
                f"{SCALING_NET['link_gbps']:.0f} Gb/s links of {SCALING_NET['link_latency_us']:.0f} us\n\n")
        f.write("| model | GPUs per node | nodes | step ms | images/s | allreduce ms a step | exposed ms | "
                "efficiency |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['gpus_per_node']} | {r['nodes']} | {r['step_ms']:.2f} | "
                    f"{r['images_per_second']:.0f} | {r['allreduce_ms_per_step']:.2f} | {r['exposed_ms']:.2f} | "
                    f"{100 * r['efficiency']:.1f}% |\n")
    print(f"wrote {a.out}_gpu_scaling.json and .md")


def calibration_name(model, busy, rep, ranks=1):
    """The name of round rep's calibration with `busy` workers in one process, or of `ranks` ranks x 1 worker."""
    return f"{model}-w{busy}-r{rep}" if ranks == 1 else f"{model}-ranks{ranks}-r{rep}"


def calibrate(model, busy, rep, machines, a, ranks=1):
    """Round rep's calibration (lws) into machines/<calibration_name>.tar.xz: `busy` workers in one process, or under
    mpirun `ranks` ranks of one worker each summing their gradients (rank 0's models: its tasks as they last beside
    its driver and communication thread on its core), after an untimed one: on this VM the first second of work
    after a pause runs up to 40% slower (simplecnn, 1 worker: a calibration of 0.85 s measured 29.5 ms a step, the
    next one 20.9 ms), and a calibration that short would keep the cold durations in its models."""
    batch, tiles, cal_steps, _ = SETUP[model]
    name = calibration_name(model, busy, rep, ranks)
    machine = os.path.join(machines, name + ARCHIVE)
    # A new calibration, not one more in an earlier archive (nor a folder of that name that would be read instead).
    run(["rm", "-rf", machine, os.path.join(machines, name)])
    workers = busy if ranks == 1 else 1
    launch = [REAL] if ranks == 1 else MPIRUN[:2] + [str(ranks)] + MPIRUN[3:] + [REAL]
    args = ["--batch-size", str(batch), "--tiles", str(tiles), "--workers", str(workers), "--steps", str(cal_steps)]
    with tempfile.TemporaryDirectory() as cold:
        run(locked(launch + ["calibrate", "--model", model, "--out", os.path.join(cold, "m"), *args], a.lock))
    print(run(locked(launch + ["calibrate", "--model", model, "--out", machine, *args], a.lock)), flush=True)
    return machine


# The second prediction of each validation row: task durations drawn around their models' means with the
# calibration's own deviations (dtnn simulate --scatter), as real durations scatter.
SCATTER = ("--scatter", "--seed", "1")


def row(model, c, batch, tiles, measured, runs):
    """A validation row from its rounds' measured steps and predictions (predict's, one per round): the errors of
    the predictions with durations at their means on cores alike, with the calibrated cores' speeds, and with
    scattered durations; a row's error is the median of its rounds' (each round against its own calibration)."""
    predicted = [run[0]["step_ms"] for run in runs]
    speeds_ms = [run[1] for run in runs]
    scattered = [run[2] for run in runs]
    bare = [run[4] for run in runs]

    def errors_of(p):
        return [x / m - 1.0 for x, m in zip(p, measured)]
    errors, speeds_errors, scatter_errors = errors_of(predicted), errors_of(speeds_ms), errors_of(scattered)
    bare_errors = errors_of(bare)
    r = {"model": model, "workers": c[0], "scheduler": c[1], "ranks": c[2], "batch": batch,
         "calibration_workers": c[0] * c[2], "calibration_ranks": c[2], "tiles": tiles, "measured_ms": statistics.median(measured),
         "measured_runs_ms": measured, "predicted_ms": statistics.median(predicted), "predicted_runs_ms": predicted,
         "errors": errors, "error": statistics.median(errors),
         "predicted_utilisation": [[w["utilisation"] for w in run[0]["worker_use"]] for run in runs],
         "worker_speeds": [run[3] for run in runs],
         "task_overhead_us": [run[0].get("task_overhead_us", 0.0) for run in runs],
         "predicted_bare_ms": statistics.median(bare), "predicted_bare_runs_ms": bare, "bare_errors": bare_errors,
         "bare_error": statistics.median(bare_errors),
         "predicted_speeds_ms": statistics.median(speeds_ms), "predicted_speeds_runs_ms": speeds_ms,
         "speeds_errors": speeds_errors, "speeds_error": statistics.median(speeds_errors),
         "predicted_scatter_ms": statistics.median(scattered), "predicted_scatter_runs_ms": scattered,
         "scatter_errors": scatter_errors, "scatter_error": statistics.median(scatter_errors)}
    overheads = ", ".join(f"{us:.1f}" for us in r["task_overhead_us"])
    print(f"{model:18} {c[2]}x{c[0]} {c[1]:6} measured {r['measured_ms']:8.1f} ms  predicted "
          f"{r['predicted_ms']:8.1f} ms  error {100 * r['error']:+6.1f}%; calibrated core speeds "
          f"{r['predicted_speeds_ms']:8.1f} ms error {100 * r['speeds_error']:+6.1f}% (rounds: "
          f"{', '.join(f'{100 * e:+.1f}%' for e in speeds_errors)}); scattered {r['predicted_scatter_ms']:8.1f} ms "
          f"error {100 * r['scatter_error']:+6.1f}%; without the time between tasks ({overheads} us) "
          f"{r['predicted_bare_ms']:8.1f} ms error {100 * r['bare_error']:+6.1f}%", flush=True)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="simplecnn,resnet18_cifar10,vgg16_cifar10")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--lock", action="store_true")
    p.add_argument("--out", default=os.path.join(HERE, "results", "simulation_study"))
    p.add_argument("--scaling", action="store_true", help="only the predictions: resnet50 and vgg16 on 1..64 "
                   "nodes of 32 cores")
    p.add_argument("--scaling-models", default=",".join(SCALING_MODELS), help="models of --scaling")
    p.add_argument("--scaling-ranks", default=",".join(map(str, SCALING_RANKS)), help="node counts of --scaling")
    p.add_argument("--gpu", action="store_true", help="only the GPU machine: its calibrations predicted "
                   "(OUT_gpu), and resnet50/vgg16 on 1..64 nodes of 1 and 4 GPUs (OUT_gpu_scaling)")
    p.add_argument("--gpu-scaling", action="store_true", help="only the GPU scaling predictions (OUT_gpu_scaling)")
    p.add_argument("--resimulate", action="store_true", help="only the predictions of OUT.json's rows again, from "
                   "the same calibrations, the measurements kept (after a change of the simulator)")
    a = p.parse_args()
    if a.resimulate:
        resimulate(a)
        return
    if a.gpu or a.gpu_scaling:
        if a.gpu:
            gpu_validation(a)
        gpu_scaling(a)
        return
    if a.scaling:
        scaling(a)
        return
    models = a.models.split(",")
    machines = os.path.join(os.path.dirname(a.out), "machines")
    cpu = run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo; grep -m1 'cpu family' /proc/cpuinfo; "
                          "grep -m1 '^model' /proc/cpuinfo; nproc"]).split("\n")
    rows = []
    net = json.loads(run(locked(MPIRUN + [os.path.join(ROOT, "build", "bin", "allreduce_cost")], a.lock))
                     .strip().splitlines()[-1])
    print(f"network (MPI_Allreduce, 2 ranks here): {net['link_gbps']:.2f} Gb/s, {net['link_latency_us']:.2f} us",
          flush=True)
    for model in models:
        batch, tiles, _, _ = SETUP[model]
        # One calibration per number of busy cores: a task takes longer while the other core works too (memory
        # bandwidth, shared cache, clocks; simplecnn's tasks 17% longer with 2 workers than with 1), so a
        # configuration is simulated with the models of a run that kept as many cores busy (ranks x workers), in
        # the same layout: the 2-rank rows with those of a calibration of 2 ranks, whose tasks share their cores
        # with each rank's driver and communication thread (simplecnn's tasks 10% longer than in one process).
        # And one per round: this VM's speed drifts by up to 30% over minutes (simplecnn's single-worker step
        # measured 21-22 ms in one round and 28-29 in another, docs/simulation.md), so each round's runs are
        # predicted from the calibrations taken just before them; a row's error is the median of its rounds'.
        configs = [(w, s, 1) for w, s in CONFIGS] + [(1, "lws", 2)]
        measured = {c: [] for c in configs}
        predicted = {c: [] for c in configs}
        for rep in range(a.reps):
            machine_of = {(busy, 1): calibrate(model, busy, rep, machines, a) for busy in (1, 2)}
            machine_of[(1, 2)] = calibrate(model, 2, rep, machines, a, ranks=2)
            for c in (configs if rep % 2 == 0 else list(reversed(configs))):
                measured[c].append(measure(model, c[0], c[1], c[2], a))
                print(f"  {model} {c}: {measured[c][-1]:.1f} ms", flush=True)
            for c in configs:
                predicted[c].append(predict(model, machine_of[(c[0], c[2])], c, net))
        for c in configs:
            rows.append(row(model, c, batch, tiles, measured[c], predicted[c]))
    # Rows of the models not run this time are kept from an earlier run.
    if os.path.exists(a.out + ".json"):
        with open(a.out + ".json") as f:
            rows = [r for r in json.load(f)["rows"] if r["model"] not in models] + rows
    write_validation(a, cpu, net, rows)


def resimulate(a):
    """Every row of OUT.json predicted again from the calibrations it used (OUT's machines/<model>-w<busy>-r<k>.tar.xz,
    one per round), the measurements kept: what a change of the simulator alone does to the errors."""
    with open(a.out + ".json") as f:
        doc = json.load(f)
    machines = os.path.join(os.path.dirname(a.out), "machines")
    for r in doc["rows"]:
        c = (r["workers"], r["scheduler"], r["ranks"])
        runs = [predict(r["model"], machine_path(machines, calibration_name(
            r["model"], r["calibration_workers"], k, r.get("calibration_ranks", 1))), c, doc["network"])
            for k in range(len(r["measured_runs_ms"]))]
        new = row(r["model"], c, r["batch"], r["tiles"], r["measured_runs_ms"], runs)
        r.clear()
        r.update(new)
    write_validation(a, doc["cpu"], doc["network"], doc["rows"])


def write_validation(a, cpu, net, rows):
    doc = {"cpu": cpu, "network": net, "rows": rows}
    with open(a.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"CPU: {', '.join(x for x in cpu if x)}; network of the ranks (MPI_Allreduce here, fitted): "
                f"{net['link_gbps']:.2f} Gb/s, {net['link_latency_us']:.2f} us\n\n")
        f.write("| model | batch | ranks x workers | scheduler | measured ms (median) | runs | predicted ms, cores "
                "alike | error | predicted ms, calibrated core speeds | error | error per round | predicted ms, "
                "scattered | error | time between tasks, us | predicted ms, core speeds without it | error |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            # Rows kept from a run before the core speeds have no such prediction.
            speeds = (f"{r['predicted_speeds_ms']:.1f} | {100 * r['speeds_error']:+.1f}% | "
                      f"{', '.join(f'{100 * e:+.1f}%' for e in r['speeds_errors'])}" if "speeds_errors" in r
                      else "(not predicted) | | ")
            # Rows kept from a run before the time between tasks have no prediction without it.
            bare = (f"{', '.join(f'{us:.1f}' for us in r['task_overhead_us'])} | {r['predicted_bare_ms']:.1f} | "
                    f"{100 * r['bare_error']:+.1f}%" if "bare_errors" in r else "(not measured) | | ")
            f.write(f"| {r['model']} | {r['batch']} | {r['ranks']} x {r['workers']} | {r['scheduler']} | "
                    f"{r['measured_ms']:.1f} | {', '.join(f'{x:.1f}' for x in r['measured_runs_ms'])} | "
                    f"{r['predicted_ms']:.1f} | {100 * r['error']:+.1f}% | {speeds} | "
                    f"{r['predicted_scatter_ms']:.1f} | {100 * r['scatter_error']:+.1f}% | {bare} |\n")
    print(f"wrote {a.out}.json and .md")


if __name__ == "__main__":
    main()
