#!/usr/bin/env python3
"""Turns offset_planners_bench's JSON output into the Markdown tables of BENCHMARKS.md.

    build/bench/offset_planners_bench --benchmark_format=json > offsets.json
    bench/benchmarks_table.py offsets.json

One row per trace, one column per planner: arena / lower bound (4 decimals; "1" exactly when
the arena equals the bound), a star when the plan is proven optimal, and the planning time.
"""
import json
import sys

PLANNERS = ["greedy-by-size", "best-fit", "best-fit+local-search", "exact", "auto"]


def cell(run):
    ratio = run["ratio"]
    exact = run["arena"] == run["lower_bound"]
    text = "1" if exact else f"{ratio:.4f}"
    if run["proven"]:
        text += "*"
    seconds = run["seconds"]
    time = f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
    return f"{text} ({time})"


def main(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    by_trace = {}
    for run in runs:
        trace, planner = run["run_name"].split("/")[:2]
        by_trace.setdefault(trace, {})[planner] = run
    print("| trace | items | lower bound (bytes) | " + " | ".join(PLANNERS) + " |")
    print("|---|---:|---:|" + "---|" * len(PLANNERS))
    for trace in sorted(by_trace, key=lambda t: (t.startswith("mm_"), t)):
        row = by_trace[trace]
        first = next(iter(row.values()))
        cells = [cell(row[p]) if p in row else "" for p in PLANNERS]
        print(f"| {trace} | {int(first['items'])} | {int(first['lower_bound'])} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
