#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises a dtnn --trace file: time per task type, worker utilisation, and how much of the run had
several workers busy at once (the parallelism the task graph exposed).

  bench/trace_stats.py trace.json [--top 20] [--group task|codelet] [--skip-steps K] [--gaps]

--group codelet adds up the tasks of every layer by codelet and pass ("batch_norm_fwd_relu:fwd", "relu_fwd:fwd"):
what each kind of pass costs the whole step, e.g. before and after a fusion. --skip-steps K leaves out the tasks
that ran before the K-th data:load task group of the run's steps (warm-up).

--gaps splits each worker's time between two of its tasks by what it waited for, from each task's wait_us (the
time from its last dependency's end to its start; traces of dtnn 2026-12 and later, real or simulated):
  dispatch   the task was ready before the worker's previous task ended: the gap is the worker's own overhead
             between two tasks (its scheduler's pop, StarPU's bookkeeping);
  no work    the worker had nothing ready: from its previous task's end to the moment this one became ready (the
             graph's or the scheduler's plan's doing);
  hand-over  from that moment to the start, split by who made the task ready: the last task to end before it
             ran on the same worker or on another (a queue behind other work, or a sleeping worker's wake-up).
"""
import argparse
import bisect
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--group", choices=["task", "codelet"], default="task",
                    help="task: by task name (layer:pass); codelet: by codelet and pass over all layers")
    ap.add_argument("--gaps", action="store_true", help="where the workers' idle time between tasks went")
    ap.add_argument("--skip-steps", type=int, default=0,
                    help="leave out the tasks that started before the load tasks of this step (0-based)")
    a = ap.parse_args()
    with open(a.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        raise SystemExit(f"{a.trace}: no task events")
    if a.skip_steps > 0:
        # Every step starts with one data:load task per tile.
        loads = [e for e in events if e["name"].startswith("data:")]
        tiles = len({e["args"].get("tile", 0) for e in loads}) or 1
        starts = sorted(e["ts"] for e in loads)
        per_step = starts[::tiles]
        if a.skip_steps >= len(per_step):
            raise SystemExit(f"{a.trace}: {len(per_step)} steps, cannot skip {a.skip_steps}")
        cut = per_step[a.skip_steps]
        events = [e for e in events if e["ts"] >= cut]
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    span = end - start
    workers = sorted({e["tid"] for e in events})

    def key(e):
        if a.group == "codelet":
            return f'{e["args"].get("codelet", "?")}:{e.get("cat", "")}'
        return e["name"]

    by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in events:
        row = by_name[key(e)]
        row[0] += 1
        row[1] += e["dur"]
        row[2] += e["args"].get("flops", 0.0)
    busy = sum(r[1] for r in by_name.values())

    # Sweep over start/end points: time during which k workers run a task.
    points = sorted([(e["ts"], 1) for e in events] + [(e["ts"] + e["dur"], -1) for e in events])
    at_level = collections.Counter()
    level, last = 0, start
    for t, d in points:
        at_level[level] += t - last
        level += d
        last = t

    print(f"{len(events)} tasks on {len(workers)} workers over {span / 1e6:.3f} s; "
          f"busy {busy / 1e6:.3f} s = {100 * busy / (span * len(workers)):.1f}% of the workers' time")
    for k in sorted(at_level):
        print(f"  {k} workers busy: {100 * at_level[k] / span:5.1f}% of the time")
    print(f"\n{'task':40} {'count':>7} {'total s':>9} {'share':>6} {'mean us':>9} {'GFLOP/s':>8}")
    for name, (count, dur, flops) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:a.top]:
        rate = flops / dur / 1e3 if dur > 0 else 0.0
        print(f"{name:40} {count:7d} {dur / 1e6:9.3f} {100 * dur / busy:5.1f}% {dur / count:9.1f} {rate:8.1f}")
    if a.gaps:
        print_gaps(a.trace, events, workers, span)


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if v else 0.0


def print_gaps(trace, events, workers, span):
    if not any("wait_us" in e["args"] for e in events):
        raise SystemExit(f"{trace}: no wait_us in its tasks (a trace of a dtnn older than 2026-12): no --gaps")
    # The tasks only: the communication thread's allreduces (no wait_us) are no worker's.
    events = [e for e in events if "wait_us" in e["args"]]
    workers = sorted({e["tid"] for e in events})
    ends = sorted((e["ts"] + e["dur"], e["tid"]) for e in events)
    end_times = [t for t, _ in ends]
    kinds = ("dispatch", "no work", "hand-over, same worker", "hand-over, other worker")
    gaps = {k: [] for k in kinds}
    for w in workers:
        mine = sorted((e for e in events if e["tid"] == w), key=lambda e: e["ts"])
        for prev, e in zip(mine, mine[1:]):
            prev_end = prev["ts"] + prev["dur"]
            ready = e["ts"] - e["args"].get("wait_us", 0.0)
            if ready <= prev_end:
                gaps["dispatch"].append(max(0.0, e["ts"] - prev_end))
                continue
            gaps["no work"].append(ready - prev_end)
            # The task that made it ready: the last to end at or before its ready time.
            i = bisect.bisect_right(end_times, ready + 1e-3) - 1
            maker = ends[i][1] if i >= 0 else w
            gaps["hand-over, same worker" if maker == w else "hand-over, other worker"].append(e["ts"] - ready)
    print(f"\n{'idle between tasks':26} {'count':>7} {'median us':>10} {'p90 us':>9} {'share of workers time':>22}")
    for k in kinds:
        v = sorted(gaps[k])
        p90 = v[int(0.9 * (len(v) - 1))] if v else 0.0
        print(f"{k:26} {len(v):7d} {median(v):10.1f} {p90:9.1f} {100 * sum(v) / (span * len(workers)):21.1f}%")


if __name__ == "__main__":
    main()
