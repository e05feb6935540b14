#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The scheduler laboratory: StarPU's policies (and dtnn's own) on DNN training graphs, side by side in one run.

For each model, policy, tile count and priority setting it trains a few steps of synthetic data with
`dtnn train`, several runs, and reports per configuration:
  - the median steady-state step time (each run: the median of its steps after the warm-up; then the median
    over runs). The warm-up covers the first two steps (first touch, calibration) and the two after them, which
    only fill the two-step pipeline (the driver's interval for them is a few ms),
  - two lower bounds computed from one timed step's own task graph (`--dag`, the middle of the timed steps) with
    its measured task durations: the critical path and the total work / workers; efficiency = max(bounds) / step
    time (the bounds are one step's, the time the mean of several: within the noise it can exceed 1),
  - worker idle % = 1 - work / (workers x step time): the share of the workers' time in a step not spent on
    that step's tasks,
  - the weights checksum, which must be the same for every policy of a model and tile count (the graph fixes
    the order of every sum).
  - a common bound per model and tile count: the same two bounds computed with each task's shortest duration
    seen under any policy of the study, so that policies are compared against one yardstick (a policy's own
    bound rises when its placement makes tasks slower, e.g. lost cache locality, which its own efficiency
    then hides); common efficiency = common bound / step time.
A policy that fails or does not finish within --timeout is a row that says so.

Runs are interleaved: round r runs every configuration once before round r + 1 starts, so that drifts of a
shared machine's load hit every configuration alike. --lock FILE takes an flock on FILE around each run (other
measurements wait between runs, not for the whole study); --resume continues an interrupted study from OUT.json.

  python3 bench/sched_lab.py --out bench/results/sched_lab            # the focused design (see --design)
  python3 bench/sched_lab.py --models simplecnn --policies lws,dmdas,dtnn-uprank --tiles 1,2,4,8 --runs 5

Writes OUT.json (every row and run), OUT.md (the tables) and OUT.png (step time and efficiency per policy).
"""
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DTNN = HERE.parent / "build" / "bin" / "dtnn"
MODELS = {
    # model: (batch size, dataset arguments)
    "simplecnn": 64,
    "resnet18_cifar10": 32,
    "vgg16_cifar10": 32,
    "densenet121_cifar10": 16,
    "gpt_char": 8,  # windows of 256 bytes: 2048 tokens a step (synthetic token ids)
}
FOCUS = ["lws", "dmdas", "dtnn-uprank", "prio", "eager"]


def cpu_name():
    name = "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
    except OSError:
        pass
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    isa = "AVX-512" if " avx512f" in flags else ("AVX2" if " avx2" in flags else "no AVX2")
    return f"{name}, {os.cpu_count()} CPUs, {isa}"


def policies_of(dtnn):
    out = subprocess.run([str(dtnn), "schedulers"], capture_output=True, text=True, check=True).stdout.splitlines()
    starpu = out[1].split()
    own = [line.split()[0] for line in out[3:] if line.startswith("  ")]
    return starpu + own


def run_one(dtnn, model, policy, tiles, priorities, args, workdir):
    report, dag = workdir / "report.json", workdir / "dag.json"
    for f in (report, dag):
        f.unlink(missing_ok=True)
    steps = args.warmup + args.steps + 1  # the last step drains into the end of training: not timed
    cmd = [str(dtnn), "train", "--quiet", "--no-test", "--model", model, "--dataset", "synthetic",
           "--synthetic-samples", str(MODELS.get(model, 32) * steps), "--batch-size", str(MODELS.get(model, 32)),
           "--epochs", "1", "--steps-per-epoch", str(steps), "--tiles", str(tiles), "--scheduler", policy,
           "--priorities", priorities, "--workers", str(args.workers), "--seed", "0",
           "--dag", str(dag), "--dag-step", str(args.warmup + args.steps // 2), "--report", str(report)]
    env = dict(os.environ, STARPU_SILENT="1", STARPU_HOME=str(workdir / "starpu-home"))
    started = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"status": f"did not finish in {args.timeout:.0f} s (deadlock or far too slow)"}, None
    if p.returncode != 0 or not report.exists() or not dag.exists():
        last = (p.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return {"status": f"failed (exit {p.returncode}): {last}"}, None
    r = json.loads(report.read_text())
    d = json.loads(dag.read_text())
    timed = r["step_seconds"][args.warmup:]
    if not timed:
        return {"status": "failed: no timed step in the report"}, None
    step_us = statistics.median(timed) * 1e6
    b = d["bounds"]
    return {"status": "ok", "step_us": step_us, "critical_path_us": b["critical_path_us"], "work_us": b["work_us"],
            "workers": b["workers"], "tasks": len(d["tasks"]), "edges": len(d["edges"]),
            "checksum": r["weights_checksum"], "wall_s": time.monotonic() - started}, d


class Reference:
    """Per model and tile count: the step's graph and each task's shortest duration seen in any run.

    The graph is the same under every policy and priority setting (the driver submits the same tasks with the
    same accesses); tasks are matched by (name, tile), which is unique within a step."""

    def __init__(self, doc=None):
        self.graphs = {}  # "model|tiles" -> {"keys": [...], "edges": [[from, to], ...], "best_us": [...]}
        if doc:
            self.graphs = doc

    def add(self, model, tiles, dag):
        key = f"{model}|{tiles}"
        keys = [f"{t['name']}|{t['tile']}" for t in dag["tasks"]]
        durations = [max(0.0, t["end_us"] - t["start_us"]) for t in dag["tasks"]]
        g = self.graphs.get(key)
        if g is None or g["keys"] != keys:
            if g is not None:
                print(f"sched_lab: {model} at {tiles} tiles: a run's graph differs from the first one's "
                      f"({len(keys)} against {len(g['keys'])} tasks); keeping the first", file=sys.stderr)
                return
            self.graphs[key] = {"keys": keys, "edges": dag["edges"], "best_us": durations}
            return
        g["best_us"] = [min(a, b) for a, b in zip(g["best_us"], durations)]

    def bound_us(self, model, tiles, workers):
        g = self.graphs.get(f"{model}|{tiles}")
        if g is None:
            return None
        best = g["best_us"]
        # Ids follow submission order, a topological order: the longest chain in one pass.
        finish = list(best)
        preds = {}
        for a, b in g["edges"]:
            preds.setdefault(b, []).append(a)
        for i in range(len(best)):
            if i in preds:
                finish[i] = best[i] + max(finish[a] for a in preds[i])
        cp = max(finish) if finish else 0.0
        return max(cp, sum(best) / workers), cp, sum(best) / workers


def summarise(runs):
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {"status": runs[0]["status"], "runs": runs}
    step = statistics.median(r["step_us"] for r in ok)
    cp = statistics.median(r["critical_path_us"] for r in ok)
    work = statistics.median(r["work_us"] for r in ok)
    workers = ok[0]["workers"]
    bound = max(cp, work / workers)
    checksums = sorted({r["checksum"] for r in ok})
    status = "ok" if len(ok) == len(runs) else f"{len(runs) - len(ok)} of {len(runs)} runs failed: {runs[0]['status']}"
    return {"status": status, "step_ms": step / 1e3, "critical_path_ms": cp / 1e3, "work_per_worker_ms":
            work / workers / 1e3, "efficiency": bound / step, "idle_pct": 100.0 * max(0.0, 1.0 - work / (workers * step)),
            "checksums": checksums, "tasks": ok[0]["tasks"], "edges": ok[0]["edges"], "workers": workers, "runs": runs}


def add_common_bound(row, reference, memo):
    if "step_ms" not in row:
        return row
    key = (row["model"], row["tiles"], row["workers"])
    if key not in memo:
        memo[key] = reference.bound_us(*key)
    common = memo[key]
    if common:
        row["common_bound_ms"] = common[0] / 1e3
        row["common_efficiency"] = common[0] / 1e3 / row["step_ms"]
    return row


def configurations(design, policies, tiles_list, prio_list, focus):
    if design == "full":
        return [(p, t, q) for p in policies for t in tiles_list for q in prio_list]
    # focused: every policy at 2 tiles with priorities; tiles and priorities swept for the focus policies.
    out = [(p, 2, "on") for p in policies]
    for p in [p for p in focus if p in policies]:
        for t in tiles_list:
            for q in prio_list:
                if (p, t, q) not in out:
                    out.append((p, t, q))
    return out


def table(rows, cpu):
    lines = [f"CPU: {cpu}", ""]
    by_model = {}
    for row in rows:
        by_model.setdefault(row["model"], []).append(row)
    for model, rs in by_model.items():
        lines += [f"### {model}", "",
                  "| policy | tiles | priorities | step ms | critical path ms | work/workers ms | efficiency | idle % | "
                  "common bound ms | common efficiency | weights |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        sums = {}
        for r in rs:
            if r["status"].startswith("ok") or "step_ms" in r:
                sums.setdefault(r["tiles"], set()).update(r["checksums"])
        for r in sorted(rs, key=lambda r: (r["tiles"], r["priorities"] != "on", r.get("step_ms", 1e18))):
            if "step_ms" not in r:
                lines.append(f"| {r['policy']} | {r['tiles']} | {r['priorities']} | {r['status']} | | | | | | | |")
                continue
            same = "same" if len(sums[r["tiles"]]) == 1 else "DIFFER: " + ",".join(r["checksums"])
            note = "" if r["status"] == "ok" else f" ({r['status']})"
            lines.append(f"| {r['policy']}{note} | {r['tiles']} | {r['priorities']} | {r['step_ms']:.1f} | "
                         f"{r['critical_path_ms']:.1f} | {r['work_per_worker_ms']:.1f} | {r['efficiency']:.3f} | "
                         f"{r['idle_pct']:.1f} | {r.get('common_bound_ms', float('nan')):.1f} | "
                         f"{r.get('common_efficiency', float('nan')):.3f} | {same} |")
        good = [r for r in rs if "step_ms" in r]
        if good:
            best = min(good, key=lambda r: r["step_ms"])
            lines += ["", f"best: {best['policy']} at {best['tiles']} tiles, priorities {best['priorities']}: "
                          f"{best['step_ms']:.1f} ms/step, efficiency {best['efficiency']:.3f}"]
        lines.append("")
    return "\n".join(lines)


def plot(rows, file, cpu):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sched_lab: matplotlib not installed (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return False
    models = sorted({r["model"] for r in rows}, key=list(MODELS).index if all(m in MODELS for m in
                                                                             {r["model"] for r in rows}) else str)
    fig, axes = plt.subplots(len(models), 1, figsize=(14, 3.6 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        rs = [r for r in rows if r["model"] == model and r["tiles"] == 2 and r["priorities"] == "on"]
        rs.sort(key=lambda r: r.get("step_ms", 1e18))
        names = [r["policy"] for r in rs]
        steps = [r.get("step_ms", 0.0) for r in rs]
        colors = ["tab:blue" if "step_ms" in r else "tab:red" for r in rs]
        ax.bar(range(len(rs)), steps, color=colors)
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("step ms (bars)")
        ax.set_title(f"{model}: 2 tiles, priorities on (red: failed)", fontsize=9)
        ax2 = ax.twinx()
        ax2.plot(range(len(rs)), [r.get("efficiency", float("nan")) for r in rs], "o", color="tab:orange")
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("efficiency (dots)")
    fig.suptitle(f"dtnn scheduler laboratory — {cpu}", fontsize=10)
    fig.tight_layout()
    fig.savefig(file, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtnn", default=str(DEFAULT_DTNN))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--policies", default="all", help="comma-separated, or all (every policy `dtnn schedulers` lists)")
    ap.add_argument("--tiles", default="1,2,4,8")
    ap.add_argument("--priorities", default="on,off")
    ap.add_argument("--design", choices=["focused", "full"], default="focused",
                    help="full: every policy x tiles x priorities; focused: every policy at 2 tiles with priorities, "
                         "the sweeps of tiles and priorities for the --focus policies")
    ap.add_argument("--focus", default=",".join(FOCUS), help="the policies whose tiles and priorities the focused "
                                                             "design sweeps")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=4, help="untimed steps first (calibration, first touch, the "
                                                         "pipeline's fill)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per run")
    ap.add_argument("--workers", type=int, default=0, help="CPU workers (0: every core)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a run counts as hung")
    ap.add_argument("--out", default=str(HERE / "results" / "sched_lab"))
    ap.add_argument("--combine", default="", help="comma-separated JSON files of earlier studies: only write their "
                                                   "rows together as OUT.md and OUT.png")
    ap.add_argument("--lock", default="", help="flock this file around each run (shared machines: other "
                                               "measurements take turns with the study's runs)")
    ap.add_argument("--resume", action="store_true", help="continue the study in OUT.json (same models, policies, "
                                                          "tiles and priorities): runs already there are kept")
    args = ap.parse_args()
    if args.combine:
        rows, cpus = [], set()
        for f in args.combine.split(","):
            doc = json.loads(Path(f).read_text())
            rows += doc["rows"]
            cpus.add(doc["cpu"])
        cpu = "; ".join(sorted(cpus))
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps({"cpu": cpu, "combined": args.combine.split(","), "rows": rows},
                                                       indent=1))
        text = table(rows, cpu)
        out.with_suffix(".md").write_text(text + "\n")
        print(text)
        if plot(rows, out.with_suffix(".png"), cpu):
            print(f"plot: {out.with_suffix('.png')}")
        return
    dtnn = Path(args.dtnn)
    policies = policies_of(dtnn) if args.policies == "all" else args.policies.split(",")
    tiles_list = [int(t) for t in args.tiles.split(",")]
    prio_list = args.priorities.split(",")
    cpu = cpu_name()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    configs = [(m, p, t, q) for m in args.models.split(",")
               for p, t, q in configurations(args.design, policies, tiles_list, prio_list, args.focus.split(","))]
    runs = {c: [] for c in configs}
    ref_file = out.with_suffix(".ref.json")  # the graphs and shortest durations behind the common bounds
    reference = Reference()
    if args.resume and out.with_suffix(".json").exists():
        doc = json.loads(out.with_suffix(".json").read_text())
        for row in doc["rows"]:
            c = (row["model"], row["policy"], row["tiles"], row["priorities"])
            if c in runs:
                runs[c] = row["runs"]
        if ref_file.exists():
            reference = Reference(json.loads(ref_file.read_text()))
        print(f"sched_lab: resuming: {sum(len(r) for r in runs.values())} runs kept from {out.with_suffix('.json')}")

    def rows_now():
        memo = {}
        return [add_common_bound({"model": m, "policy": p, "tiles": t, "priorities": q, **summarise(runs[(m, p, t, q)])},
                                 reference, memo) for (m, p, t, q) in configs if runs[(m, p, t, q)]]

    lock = open(args.lock, "a") if args.lock else None  # noqa: SIM115 (held for the whole study)
    with tempfile.TemporaryDirectory(prefix="dtnn-sched-lab-") as tmp:
        workdir = Path(tmp)
        for r in range(args.runs):
            for c in configs:
                if len(runs[c]) > r:
                    continue
                model, policy, tiles, prio = c
                if lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    run, dag = run_one(dtnn, model, policy, tiles, prio, args, workdir)
                finally:
                    if lock:
                        fcntl.flock(lock, fcntl.LOCK_UN)
                runs[c].append(run)
                if dag is not None:
                    reference.add(model, tiles, dag)
                shown = f"{run['step_us'] / 1e3:.1f} ms" if run["status"] == "ok" else run["status"]
                print(f"round {r + 1}/{args.runs} {model:18s} {policy:34s} tiles {tiles} prio {prio:3s}: {shown}",
                      flush=True)
                # Written as it goes, so that an interrupted study keeps what it measured (--resume).
                out.with_suffix(".json").write_text(json.dumps({"cpu": cpu, "args": vars(args), "rows": rows_now()},
                                                               indent=1))
                ref_file.write_text(json.dumps(reference.graphs))
    rows = rows_now()
    text = table(rows, cpu)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    if plot(rows, out.with_suffix(".png"), cpu):
        print(f"plot: {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
