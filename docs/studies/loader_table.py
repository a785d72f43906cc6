#!/usr/bin/env python3
"""The loader study's table from laptime's JSON results, with medians beside the means.

    python3 docs/studies/loader_table.py LABEL=RUN.json [LABEL=RUN.json ...] [--name NAME]
        [--unit batch|iter] [--by mean|median]

The first run is the reference. Per run: the mean and the median time per batch of NAME (default
"data loading loop", the runner's CPU-tracked loop; train.py's is "training loop", with --unit
iter), its p90, the seed's CPU figure (process tree CPU as % of the machine, averaged over the
loop: a rate) and the CPU time per batch (process tree cores x mean interval: the work one batch
costs; a total, so it goes with the mean whichever statistic leads). Then each run against the
reference: speedup on means and on medians, the change of CPU % and of CPU time per batch.

``--by`` says which statistic leads (its column and speedup first): ``mean`` (default) where
batches come at a steady rate, ``median`` where a few stalls carry the mean (run_study.sh uses it
on the CPU, whose 4-batch epochs start with a stall each).
"""
import argparse
import json


def loop_figures(path, name):
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    for m in results["measurements"]:
        if m["name"] == name:
            cpu = m.get("cpu") or {}
            mean_s = m["total_s"] / m["count"]
            cores = cpu.get("process_cores")
            return {
                "count": m["count"],
                "mean_ms": 1e3 * mean_s,
                "median_ms": 1e3 * m["median_s"],
                "p90_ms": 1e3 * m["p90_s"],
                "cpu_percent": cpu.get("process_percent"),
                "cores": cores,
                "core_ms_per_batch": None if cores is None else 1e3 * cores * mean_s,
            }
    raise SystemExit(f"{path}: no measurement named {name!r}")


def fmt(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def change(new, old):
    if new is None or old is None or old == 0:
        return "—"
    return f"{100.0 * (new - old) / old:+.1f} %"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=RUN.json")
    parser.add_argument("--name", default="data loading loop")
    parser.add_argument("--unit", default="batch", help="what one interval is (batch, iter)")
    parser.add_argument("--by", choices=("mean", "median"), default="mean",
                        help="the statistic that leads the tables (default mean)")
    args = parser.parse_args()
    runs = []
    for spec in args.runs:
        label, _, path = spec.partition("=")
        runs.append((label, loop_figures(path, args.name)))
    stats = ["mean", "median"] if args.by == "mean" else ["median", "mean"]
    u = args.unit
    count = {"batch": "batches", "iter": "iterations"}.get(u, u + "s")
    print(f"| run | {count} |"
          + "".join(f" {st} [ms/{u}] |" for st in stats)
          + f" p90 [ms] | CPU [% of machine] (cores) | CPU time [core-ms/{u}] |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, r in runs:
        print(f"| {label} | {r['count']} |" + "".join(f" {fmt(r[st + '_ms'])} |" for st in stats)
              + f" {fmt(r['p90_ms'])} | {fmt(r['cpu_percent'])} ({fmt(r['cores'], 2)}) "
              f"| {fmt(r['core_ms_per_batch'])} |")
    print()
    ref_label, ref = runs[0]
    print(f"| against {ref_label} |" + "".join(f" speedup, {st}s |" for st in stats)
          + f" CPU % of machine | CPU time per {u} |")
    print("|---|---:|---:|---:|---:|")
    for label, r in runs[1:]:
        print(f"| {label} |"
              + "".join(f" ×{ref[st + '_ms'] / r[st + '_ms']:.2f} |" for st in stats)
              + f" {change(r['cpu_percent'], ref['cpu_percent'])} "
              f"| {change(r['core_ms_per_batch'], ref['core_ms_per_batch'])} |")


if __name__ == "__main__":
    main()
