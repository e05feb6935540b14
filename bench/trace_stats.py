#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises a dtnn --trace file: time per task type, worker utilisation, and how much of the run had
several workers busy at once (the parallelism the task graph exposed).

  bench/trace_stats.py trace.json [--top 20]
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        raise SystemExit(f"{a.trace}: no task events")
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    span = end - start
    workers = sorted({e["tid"] for e in events})

    by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in events:
        row = by_name[e["name"]]
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
    print(f"\n{'task':28} {'count':>7} {'total s':>9} {'mean us':>9} {'GFLOP/s':>8}")
    for name, (count, dur, flops) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:a.top]:
        rate = flops / dur / 1e3 if dur > 0 else 0.0
        print(f"{name:28} {count:7d} {dur / 1e6:9.3f} {dur / count:9.1f} {rate:8.1f}")


if __name__ == "__main__":
    main()
