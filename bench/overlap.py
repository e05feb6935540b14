#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Gradient allreduce overlap in data-parallel training: 2 MPI ranks, --allreduce blocking vs overlapped.

For each model, both modes train a few steps (after a warm-up epoch) with the trace on; from each rank's trace it
computes the fraction of allreduce time during which a worker of that rank was computing (hidden behind
computation), and it reports the step time of each mode.

On one machine's shared memory (the default), two transports of Open MPI, chosen with
OMPI_MCA_btl_vader_single_copy_mechanism: "single-copy" (cma, Open MPI's default: the receiver reads the sender's
memory, the copy costs CPU time on this machine's cores) and "two-copy" (none: fragments through a shared buffer,
paced by how often the communication thread tests the request, like a slower network).

Over a network (--network GBPS,...; root): each rank in a network namespace of its own on an emulated cluster
(scripts/netns_cluster.sh), over Open MPI's TCP transport on links shaped to each bandwidth. Then one rank alone
is the baseline too, and with the step times of the three (one rank, blocking, overlapped) the allreduce's cost
is what blocking adds to one rank's step, its exposed part what overlapped adds, and the share hidden
1 - exposed / cost; the backward pass is the one rank's worker time in backward tasks per step (from its trace).

  bench/overlap.py [--models vgg16_cifar10,resnet18_cifar10] [--batch 32] [--steps 6] [--runs 3] [--bucket-mb 25]
                   [--transports single-copy,two-copy | --network 0.5,1,2] [--tiles 2] [--traces DIR] [--json F]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "scripts", "netns_cluster.sh")
COMM_ROW = 1000  # the tracer's row for the MPI communication thread
BACKWARD = ("bwd_data", "bwd_weights", "bwd_sum", "tile_sum")  # trace categories of the backward pass


def trace_events(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def timed_epoch(events, steps, tiles):
    """The second (timed) epoch's events: from its first step's batch loads on (a step loads one batch per tile, the
    next step's while it computes, but the first epoch ends before the second loads)."""
    loads = sorted(e["ts"] for e in events if e.get("cat") == "load")
    if len(loads) < 2 * steps * tiles:
        sys.exit(f"overlap.py: {len(loads)} batch loads in a trace, expected {2 * steps * tiles} (2 epochs)")
    t_from = loads[-steps * tiles]
    return [e for e in events if e["ts"] >= t_from]


def hidden_fraction(events):
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] == COMM_ROW]
    work = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] != COMM_ROW)
    # Union of the workers' busy intervals, then its intersection with each allreduce.
    busy = []
    for s, e in work:
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    total = sum(e - s for s, e in comm)
    covered = 0.0
    for s, e in comm:
        for bs, be in busy:
            if be <= s:
                continue
            if bs >= e:
                break
            covered += min(e, be) - max(s, bs)
    return covered / total if total > 0 else float("nan"), total / 1e3, len(comm)


TRANSPORTS = {"single-copy": "cma", "two-copy": "none"}


def dtnn_args(exe, model, mode, a, trace, report):
    args = [exe, "benchmark", "--model", model, "--batch-size", str(a.batch), "--epochs", "2", "--steps-per-epoch",
            str(a.steps), "--workers", "1", "--tiles", str(a.tiles), "--bucket-mb", str(a.bucket_mb), "--trace", trace,
            "--report", report, "--quiet"]
    return args + a.extra.split() + (["--allreduce", mode] if mode != "one rank" else [])


def step_ms(report, steps):
    with open(report) as f:
        return 1e3 * json.load(f)["history"][1]["seconds"] / steps


def run(exe, model, mode, a, where, tmp):
    """One run: 'one rank' alone, or two ranks in `mode` over `where` (a transport, or a link speed in Gb/s).
    Returns its step time in ms and each rank's timed-epoch trace events."""
    tag = f"{model}-{mode.replace(' ', '-')}-{where}"
    trace = os.path.join(tmp, f"{tag}.json")
    report = os.path.join(tmp, f"{tag}-report.json")
    args = dtnn_args(exe, model, mode, a, trace, report)
    env = dict(os.environ, STARPU_SILENT="1")
    if mode == "one rank":
        cmd, ranks = args, 1
    elif a.network:
        cmd, ranks = ["bash", CLUSTER, "--ranks", "2", "--gbps", str(where), "--"] + args, 2
    else:
        cmd, ranks = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root"] + args, 2
        env["OMPI_MCA_btl_vader_single_copy_mechanism"] = TRANSPORTS[where]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"overlap.py: {' '.join(cmd)} failed with status {done.returncode}:\n{done.stderr[-3000:]}")
    traces = [trace] if ranks == 1 else [trace.replace(".json", f".rank{r}.json") for r in range(ranks)]
    events = [timed_epoch(trace_events(t), a.steps, a.tiles) for t in traces]
    if a.traces:
        for t in traces:
            os.replace(t, os.path.join(a.traces, os.path.basename(t)))
    return step_ms(report, a.steps), events


def busy_ms(events, steps):
    """The worker's time in tasks per step: against the one rank's, how much longer its tasks last while the
    allreduce runs beside them on the same cores."""
    return sum(e["dur"] for e in events if e["tid"] != COMM_ROW) / 1e3 / steps


def backward_ms(events, steps):
    """Worker time in backward tasks per step (one worker: the backward pass's length without waits)."""
    return sum(e["dur"] for e in events if e.get("cat") in BACKWARD and e["tid"] != COMM_ROW) / 1e3 / steps


def shared_memory(a):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for transport in a.transports.split(","):
            for model in a.models.split(","):
                # Blocking and overlapped alternate run after run, so that the machine's drift touches both; the
                # ratio is the median of the pairs' ratios.
                got = {"blocking": ([], [], []), "overlapped": ([], [], [])}
                ratios = []
                for _ in range(a.runs):
                    pair = {}
                    for mode in ("blocking", "overlapped"):
                        ms, events = run(a.dtnn, model, mode, a, transport, tmp)
                        fr = [hidden_fraction(ev) for ev in events]
                        pair[mode] = ms
                        got[mode][0].append(ms)
                        got[mode][1].append(statistics.mean(f[0] for f in fr))
                        got[mode][2].append(statistics.mean(f[1] for f in fr) / max(1, statistics.mean(f[2] for f in fr)))
                    ratios.append(pair["overlapped"] / pair["blocking"])
                for mode in ("blocking", "overlapped"):
                    steps, hidden, comm_ms = got[mode]
                    rows.append((transport, model, mode, statistics.median(steps), statistics.median(hidden),
                                 statistics.median(comm_ms), statistics.median(ratios) if mode == "overlapped" else None))
                    print(f"{transport:11} {model:18} {mode:10} step {rows[-1][3]:8.1f} ms  "
                          f"allreduce {rows[-1][5]:6.1f} ms per reduction  hidden {100 * rows[-1][4]:5.1f}%", flush=True)
                print(f"{transport:11} {model:18} overlapped / blocking per pair: "
                      f"{' '.join(f'{r:.3f}' for r in ratios)}", flush=True)
    print(f"\n2 ranks x 1 worker, batch {a.batch} per rank, {a.steps} timed steps, bucket {a.bucket_mb} MiB, "
          f"medians of {a.runs} runs (blocking and overlapped alternating)")
    print(f"{'transport':11} {'model':18} {'mode':10} {'step ms':>9} {'ms/reduction':>13} {'hidden':>7} "
          f"{'overlapped/blocking':>20}")
    for transport, model, mode, step, hidden, comm, ratio in rows:
        shown = f"{ratio:.3f}" if ratio is not None else ""
        print(f"{transport:11} {model:18} {mode:10} {step:9.1f} {comm:13.1f} {100 * hidden:6.1f}% {shown:>20}")
    return {"mode": "shared memory", "rows": [dict(zip(("transport", "model", "mode", "step_ms", "trace_hidden",
                                                          "ms_per_reduction", "overlapped_over_blocking"), r))
                                              for r in rows]}


def network(a):
    speeds = [float(g) for g in a.network.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            # Per run: one rank, then blocking and overlapped at every speed, so that the machine's drift touches
            # all of them; each figure is the median over the runs.
            one, back, one_busy = [], [], []
            got = {(g, m): ([], [], [], []) for g in speeds for m in ("blocking", "overlapped")}
            for _ in range(a.runs):
                ms, events = run(a.dtnn, model, "one rank", a, "alone", tmp)
                one.append(ms)
                back.append(backward_ms(events[0], a.steps))
                one_busy.append(busy_ms(events[0], a.steps))
                for g in speeds:
                    for mode in ("blocking", "overlapped"):
                        ms, events = run(a.dtnn, model, mode, a, g, tmp)
                        fr = [hidden_fraction(ev) for ev in events]
                        got[(g, mode)][0].append(ms)
                        got[(g, mode)][1].append(statistics.mean(f[0] for f in fr))
                        got[(g, mode)][2].append(statistics.mean(f[1] for f in fr) / a.steps)
                        got[(g, mode)][3].append(statistics.mean(busy_ms(ev, a.steps) for ev in events))
                print(f"{model}: one rank {ms_list(one)}; " + "; ".join(
                    f"{g:g} Gb/s {m} {ms_list(got[(g, m)][0])}" for g in speeds for m in ("blocking", "overlapped")),
                    flush=True)
            base, bwd = statistics.median(one), statistics.median(back)
            for g in speeds:
                blocking = statistics.median(got[(g, "blocking")][0])
                overlapped = statistics.median(got[(g, "overlapped")][0])
                cost, exposed = blocking - base, overlapped - base
                rows.append({"model": model, "link_gbps": g, "one_rank_step_ms": base, "backward_ms": bwd,
                             "allreduce_ms": cost, "allreduce_over_backward": cost / bwd, "exposed_ms": exposed,
                             "hidden": 1 - exposed / cost if cost > 0 else float("nan"),
                             "blocking_step_ms": blocking, "overlapped_step_ms": overlapped,
                             "comm_thread_ms_per_step": statistics.median(got[(g, "overlapped")][2]),
                             "slowdown_ms": statistics.median(got[(g, "overlapped")][3]) - statistics.median(one_busy),
                             "trace_hidden": statistics.median(got[(g, "overlapped")][1])})
    print(f"\n2 ranks x 1 worker, one per network namespace, Open MPI over TCP on links shaped with tc tbf; batch "
          f"{a.batch} per rank, {a.tiles} tile(s), bucket {a.bucket_mb} MiB, {a.steps} timed steps after a warm-up "
          f"epoch, medians of {a.runs} runs; CPU: {cpu_name()}")
    print("allreduce = blocking step - one rank's step; exposed = overlapped step - one rank's step; "
          "hidden = 1 - exposed / allreduce; backward = the one rank's worker time in backward tasks per step;")
    print("comm = the communication thread's time in collectives per step, trace-hidden = the share of it during "
          "which the rank's worker computed (overlapped runs); slower = how much more time per step the worker "
          "spent in its tasks than the one rank's did (overlapped runs: what the communication's CPU work on the "
          "same cores costs the tasks)")
    print(f"{'model':18} {'Gb/s':>5} {'1 rank':>7} {'backward':>8} {'allreduce':>9} {'ar/bwd':>6} {'exposed':>8} "
          f"{'hidden':>7} {'blocking':>8} {'overlap':>8} {'comm':>7} {'trace-hidden':>12} {'slower':>7}")
    for r in rows:
        print(f"{r['model']:18} {r['link_gbps']:5g} {r['one_rank_step_ms']:7.0f} {r['backward_ms']:8.0f} "
              f"{r['allreduce_ms']:9.0f} {r['allreduce_over_backward']:6.2f} {r['exposed_ms']:8.0f} "
              f"{100 * r['hidden']:6.1f}% {r['blocking_step_ms']:8.0f} {r['overlapped_step_ms']:8.0f} "
              f"{r['comm_thread_ms_per_step']:7.0f} {100 * r['trace_hidden']:11.1f}% {r['slowdown_ms']:7.0f}")
    return {"mode": "network", "rows": rows}


def ms_list(values):
    return "/".join(f"{v:.0f}" for v in values) + " ms"


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="vgg16_cifar10,resnet18_cifar10")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--tiles", type=int, default=None, help="tiles per rank (default 2 on shared memory, 1 on a "
                    "network)")
    ap.add_argument("--transports", default="single-copy,two-copy")
    ap.add_argument("--network", default=None, help="comma-separated link speeds in Gb/s: ranks on an emulated "
                    "cluster (scripts/netns_cluster.sh, root) instead of shared memory")
    ap.add_argument("--extra", default="", help="more options for every dtnn run (e.g. '--tail-buckets 0')")
    ap.add_argument("--traces", default=None, help="keep every run's traces in this folder")
    ap.add_argument("--json", default=None, help="write the table as JSON to this file")
    ap.add_argument("--dtnn", default=os.path.join(HERE, "..", "build", "bin", "dtnn"))
    a = ap.parse_args()
    if a.tiles is None:
        a.tiles = 1 if a.network else 2
    if a.network:
        if os.geteuid() != 0:
            sys.exit("overlap.py: --network makes network namespaces and needs root, expected to run as root")
    else:
        for t in a.transports.split(","):
            if t not in TRANSPORTS:
                sys.exit(f"--transports: {t!r}, expected some of {','.join(TRANSPORTS)}")
    if a.traces:
        os.makedirs(a.traces, exist_ok=True)
    result = network(a) if a.network else shared_memory(a)
    result.update({"batch": a.batch, "steps": a.steps, "runs": a.runs, "bucket_mb": a.bucket_mb, "tiles": a.tiles,
                   "extra": a.extra, "cpu": cpu_name()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
