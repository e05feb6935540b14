#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Gradient allreduce overlap in data-parallel training: 2 MPI ranks, --allreduce blocking vs overlapped.

For each model, both modes train a few steps (after a warm-up epoch) with the trace on; from each rank's trace it
computes the fraction of allreduce time during which a worker of that rank was computing (hidden behind
computation), and it reports the step time of each mode.

Two transports of Open MPI's shared memory, chosen with OMPI_MCA_btl_vader_single_copy_mechanism: "single-copy"
(cma, Open MPI's default: the receiver reads the sender's memory, the copy costs CPU time on this machine's cores)
and "two-copy" (none: fragments through a shared buffer, paced by how often the communication thread tests the
request, like a slower network).

  bench/overlap.py [--models vgg16_cifar10,resnet18_cifar10] [--batch 32] [--steps 6] [--runs 3] [--bucket-mb 25]
                   [--transports single-copy,two-copy]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COMM_ROW = 1000  # the tracer's row for the MPI communication thread


def hidden_fraction(trace_file, t_from):
    with open(trace_file) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["tid"] == COMM_ROW and e["ts"] >= t_from]
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


def run(exe, model, mode, batch, steps, bucket_mb, transport, tmp):
    trace = os.path.join(tmp, f"{model}-{mode}.json")
    report = os.path.join(tmp, f"{model}-{mode}-report.json")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root", exe, "benchmark", "--model", model,
           "--batch-size", str(batch), "--epochs", "2", "--steps-per-epoch", str(steps), "--workers", "1",
           "--tiles", "2", "--allreduce", mode, "--bucket-mb", str(bucket_mb), "--trace", trace, "--report", report,
           "--quiet"]
    env = dict(os.environ, STARPU_SILENT="1", OMPI_MCA_btl_vader_single_copy_mechanism=TRANSPORTS[transport])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(report) as f:
        doc = json.load(f)
    second = doc["history"][1]
    step_ms = 1e3 * second["seconds"] / steps
    # Only the second (timed) epoch: it starts after the first epoch's events.
    rank_fractions = []
    for r in range(2):
        path = trace.replace(".json", f".rank{r}.json")
        with open(path) as f:
            ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        start = min(e["ts"] for e in ev)
        end = max(e["ts"] + e["dur"] for e in ev)
        t_from = start + (end - start) * 0.5  # the second half of the run: the timed epoch
        rank_fractions.append(hidden_fraction(path, t_from))
    return step_ms, rank_fractions


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="vgg16_cifar10,resnet18_cifar10")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--transports", default="single-copy,two-copy")
    ap.add_argument("--dtnn", default=os.path.join(HERE, "..", "build", "bin", "dtnn"))
    a = ap.parse_args()
    transports = a.transports.split(",")
    for t in transports:
        if t not in TRANSPORTS:
            sys.exit(f"--transports: {t!r}, expected some of {','.join(TRANSPORTS)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for transport in transports:
            for model in a.models.split(","):
                # Blocking and overlapped alternate run after run, so that the machine's drift touches both; the
                # ratio is the median of the pairs' ratios.
                got = {"blocking": ([], [], []), "overlapped": ([], [], [])}
                ratios = []
                for _ in range(a.runs):
                    pair = {}
                    for mode in ("blocking", "overlapped"):
                        step_ms, fr = run(a.dtnn, model, mode, a.batch, a.steps, a.bucket_mb, transport, tmp)
                        pair[mode] = step_ms
                        got[mode][0].append(step_ms)
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

if __name__ == "__main__":
    sys.exit(main())
