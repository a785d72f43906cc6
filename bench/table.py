#!/usr/bin/env python3
"""Turns laptime_bench's JSON output into the cost table (docs/performance.md): each hot path's
median next to its raw baseline, the ratio or difference, the goal, and PASS/MISS.

    bench/table.py RUN.json [RUN.json ...]             one build, one or more runs
    bench/table.py --before B1.json B2.json --after A1.json A2.json   two builds, side by side
    bench/table.py --check-rows build/bench/bench/laptime_bench      every row is registered

The figure of a run is the median over its repetitions of the CPU time per iteration of each
thread (Google Benchmark's cpu_time): on a shared 2-core machine it leaves out the time a thread
waits for a core, which wall time does not. With several runs (files) of one build, a row shows
the median over runs of those per-run medians, with the spread over runs ((max - min) / median),
and its measure (ratio, difference) is taken in each run, row and baseline of the same run, and
judged on the median of those. With two builds, each row shows both builds' medians, the ratio
after / before (the i-th after run over the i-th before run: bench/goals.sh runs them in turn),
and the after build's verdict.

Below the goals' table, the features table (bench/features.py): the pair built up step by step
from two cycle-counter reads, each step's cost, for the runs of one build (the after build).

--filter REGEX names the --benchmark_filter the runs used: the rows it leaves out are counted in
the last line instead of showing as ABSENT. A benchmark that reported an error says the error.
Exits 1 when a goal is missed, 2 when a selected row is absent or reported an error (of the after
build, with two builds).
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

import features

# Google Benchmark's own fields of a result; any other number is a user counter.
STANDARD_KEYS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index",
                 "threads", "iterations", "real_time", "cpu_time"}

COUNTER_NAME = re.compile(r"[A-Za-z_]\w*$")

# (label, benchmark, baseline or None, kind, limit)
#   kind "ratio":    median / baseline <= limit
#   kind "diff":     median - baseline <= limit (ns)
#   kind "per_call": median / 2 <= limit (ns); the benchmark times a pair of calls
#   kind "info":     reported, no goal
#   kind "time":     reported as a time per iteration (no baseline), no goal
#   kind "max":      a user counter ("<benchmark>:<counter>") <= limit, in its own unit
NO_GOAL = ("info", "time")
ROWS = [
    ("Stopwatch pair, not enabled", "BM_StopwatchPair_NotEnabled", None, "per_call", 1.0),
    ("NVTX push+pop, not enabled", "BM_NvtxWrapperPushPop_NotEnabled", None, "per_call", 1.0),
    ("Stopwatch pair, compiled out", "BM_StopwatchPair_Disabled", "BM_EmptyLoop", "diff", 0.2),
    ("LAPTIME_MEAS, compiled out", "BM_ScopedMeasurement_Disabled", "BM_EmptyLoop", "diff", 0.2),
    ("NVTX push+pop, compiled out", "BM_NvtxWrapperPushPop_Disabled", "BM_EmptyLoop", "diff", 0.2),
    ("Stopwatch pair, enabled", "BM_StopwatchPair_Enabled/threads:1",
     "BM_SteadyClockPair/threads:1", "ratio", 1.5),
    ("Stopwatch pair, enabled, same name", "BM_StopwatchPair_Enabled_SameName/threads:1",
     "BM_SteadyClockPair/threads:1", "ratio", 1.5),
    ("Stopwatch pair, recording intervals", "BM_StopwatchPair_Recording",
     "BM_StopwatchPair_Enabled/threads:1", "ratio", 1.3),
    ("Stopwatch pair, in a shared object", "BM_StopwatchPair_Enabled_SharedObject",
     "BM_SteadyClockPair_SharedObject", "ratio", 1.5),
    ("Stopwatch pair, 2 threads, own names", "BM_StopwatchPair_Enabled/threads:2",
     "BM_StopwatchPair_Enabled/threads:1", "ratio", 1.3),
    ("Stopwatch pair, 2 threads, same name", "BM_StopwatchPair_Enabled_SameName/threads:2",
     "BM_StopwatchPair_Enabled_SameName/threads:1", "ratio", 1.3),
    ("Stopwatch pair, 2 threads, vs clock", "BM_StopwatchPair_Enabled/threads:2",
     "BM_SteadyClockPair/threads:2", "ratio", 1.5),
    ("NVTX push+pop, enabled", "BM_NvtxWrapperPushPop", "BM_NvtxRawPushPop", "diff", 15.0),
    ("NVTX push+pop, tracked", "BM_NvtxWrapperPushPop_Tracked/threads:1", "BM_NvtxRawPushPop",
     "diff", 25.0),
    ("CPU-tracked pair, 16 busy children", "BM_CpuTrackedPair/children:16",
     "BM_CpuTrackedPair/children:0", "ratio", 1.5),
    ("/proc sample, self, vs its raw reads", "BM_CpuSample_Self", "BM_ProcFilesRaw", "ratio", 1.5),
    ("NVTX push+pop, tracked, 2 threads", "BM_NvtxWrapperPushPop_Tracked/threads:2",
     "BM_NvtxWrapperPushPop_Tracked/threads:1", "ratio", 1.3),
    # Informative: no goal of their own.
    ("report, recording on, 65536 intervals", "BM_Report_Recorded/65536", None, "time", None),
    ("report, recording on, 1048576 intervals", "BM_Report_Recorded/1048576", None, "time", None),
    ("Stopwatch pair, a name past the name limit (warn)", "BM_StopwatchPair_PastNameLimit/1", None,
     "time", None),
    ("Stopwatch pair, 1000 names past the limit in turn", "BM_StopwatchPair_PastNameLimit/1000",
     None, "time", None),
    ("end_meas of another thread's interval (end only)",
     "BM_StopwatchEnd_OtherThread/manual_time", "BM_StopwatchPair_Enabled/threads:1", "info",
     None),
    ("steady_clock pair, 2 threads (machine)", "BM_SteadyClockPair/threads:2",
     "BM_SteadyClockPair/threads:1", "info", None),
    ("clock_gettime pair", "BM_ClockGettimePair", "BM_SteadyClockPair/threads:1", "info", None),
    ("Stopwatch pair, dynamic name", "BM_StopwatchPair_Enabled_DynamicName",
     "BM_SteadyClockPair/threads:1", "info", None),
    ("Stopwatch pair, shared object, TLS descriptors", "BM_StopwatchPair_Enabled_SharedObject_TlsDesc",
     "BM_SteadyClockPair_SharedObject", "info", None),
    ("LAPTIME_MEAS, enabled", "BM_ScopedMeasurement_Enabled", "BM_SteadyClockPair/threads:1",
     "info", None),
    ("NVTX Ex push+pop (raw, as the wrapper)", "BM_NvtxRawDomainPushPopEx", "BM_NvtxRawPushPop",
     "info", None),
    ("LAPTIME_RANGE, tracked", "BM_NvtxScopedRange_Tracked", "BM_NvtxRawPushPop", "info", None),
    ("/proc sample, self", "BM_CpuSample_Self", "BM_ProcessCpuClock", "info", None),
    ("/proc sample, 8 children", "BM_CpuSample_Tree8", "BM_CpuSample_Self", "info", None),
    # The stricter goals (docs/performance.md, "The goals"): the cycle-counter clock, every name
    # layout, NVTX over raw, memory per (thread, name).
    ("Stopwatch pair, cycle-counter clock", "BM_StopwatchPair_Enabled/threads:1",
     "BM_SteadyClockPair/threads:1", "ratio", 0.5),
    ("Stopwatch pair, 64 dense literals", "BM_StopwatchPair_DenseLiterals",
     "BM_SteadyClockPair/threads:1", "ratio", 0.75),
    ("Stopwatch pair, a reused std::string buffer", "BM_StopwatchPair_ReusedBuffer",
     "BM_SteadyClockPair/threads:1", "ratio", 0.75),
    ("Stopwatch pair, 1000 names round-robin", "BM_StopwatchPair_RoundRobin1000",
     "BM_SteadyClockPair/threads:1", "ratio", 0.75),
    ("NVTX push+pop over raw, untracked", "BM_NvtxWrapperPushPop", "BM_NvtxRawPushPop",
     "diff", 3.0),
    ("NVTX push+pop over raw, tracked", "BM_NvtxWrapperPushPop_Tracked/threads:1",
     "BM_NvtxRawPushPop", "diff", 5.0),
    ("bytes of RSS per (thread, name)",
     "BM_MemoryPerThreadName/iterations:1/real_time:rss_bytes_per_pair", None, "max", 2048),
    ("malloc'd bytes per (thread, name)",
     "BM_MemoryPerThreadName/iterations:1/real_time:malloc_bytes_per_pair", None, "info", None),
    ("histogram insert (sparse blocks vs the dense 22 KiB array)", "BM_HistogramAdd",
     "BM_HistogramAdd_Dense", "info", None),
    ("CPU-tracked pair, no children", "BM_CpuTrackedPair/children:0",
     "BM_SteadyClockPair/threads:1", "info", None),
    ("/proc files by open+read+close", "BM_ProcFilesOpenRead", "BM_ProcFilesRaw", "info", None),
    # A worker process's pair (its slots in the shared file) against the parent's.
    ("Stopwatch pair in a worker process",
     "BM_StopwatchPair_WorkerBatch/iterations:2000/manual_time",
     "BM_StopwatchPair_ParentBatch/iterations:2000/manual_time", "ratio", 1.1),
    # docs/nvtx.md: every Stopwatch interval an NVTX range (set_nvtx_ranges) costs no
    # more than the Stopwatch pair with the wrapper's push/pop written next to it, same run.
    ("Stopwatch pair as NVTX range vs by hand", "BM_UnifiedRange", "BM_ByHandRange",
     "ratio", 1.0),
    ("the same, order tracking on", "BM_UnifiedRange_Tracked", "BM_ByHandRange_Tracked",
     "ratio", 1.0),
    ("the same, vs the sum of the two rows", "BM_UnifiedRange",
     "BM_StopwatchPair_Enabled/threads:1+BM_NvtxWrapperPushPop", "info", None),
]


def benchmark_of(key):
    """The benchmark of a key: a user counter's key is "<run_name>:<counter>", a counter's name
    an identifier (a run name's own colons are followed by digits: "threads:2",
    "iterations:2000/manual_time")."""
    head, _, tail = key.rpartition(":")
    return head if head and COUNTER_NAME.match(tail) else key


def is_counter(key):
    return benchmark_of(key) != key


def benchmarks_of(key):
    """The benchmarks a row's name or baseline reads ("A+B" is the sum of two)."""
    return [benchmark_of(part) for part in key.split("+")]


def load_run(path):
    """One run (one laptime_bench output file): its context, {key: median over repetitions} for
    every benchmark (by run name), user counter ("<run_name>:<counter>") and "A+B" baseline, and
    {run name: error message} for the benchmarks that reported an error."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    values, errors = {}, {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
            continue
        # The median aggregate where there are repetitions; with --benchmark_repetitions=1 there
        # are no aggregates and the single run is the median.
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if b.get("run_type") == "iteration" and b.get("repetitions", 1) > 1:
            continue
        # time_unit is ns for every benchmark here. A benchmark that times only part of each
        # iteration itself (UseManualTime) reports that part as its real time.
        values[name] = b["real_time"] if name.endswith("/manual_time") else b["cpu_time"]
        for key, value in b.items():
            if key not in STANDARD_KEYS and isinstance(value, (int, float)):
                values[f"{name}:{key}"] = value
    for _, _, base, _, _ in ROWS:
        parts = base.split("+") if base else []
        if len(parts) > 1 and all(p in values for p in parts):
            values[base] = sum(values[p] for p in parts)
    return data.get("context", {}), values, errors


def load_runs(paths):
    """Several runs of one build: their contexts, their value maps, their errors merged."""
    contexts, runs, errors = [], [], {}
    for path in paths:
        context, values, errs = load_run(path)
        contexts.append(context)
        runs.append(values)
        errors.update(errs)
    return contexts, runs, errors


# ---- Statistics over runs ----------------------------------------------------------------------


def measure(kind, v, b):
    """What a row's goal is about, from the row's figure v and its baseline's b (one run)."""
    if kind == "per_call":
        return v / 2
    if kind == "diff":
        return v - b
    if b is None:
        return v
    return v / b if b else float("inf")


def figures(runs, key):
    return [r[key] for r in runs if key in r]


def evaluate(row, runs):
    """A row over the runs of one build, or None where no run has both the row and its baseline:
    the row's and the baseline's figures, the measure of each run and its median, PASS or not."""
    _, name, base, kind, limit = row
    pairs = [(r[name], r[base] if base else None) for r in runs
             if name in r and (base is None or base in r)]
    if not pairs:
        return None
    measures = [measure(kind, v, b) for v, b in pairs]
    median = statistics.median(measures)
    return {"values": [v for v, _ in pairs], "bases": [b for _, b in pairs if b is not None],
            "measures": measures, "measure": median, "ok": kind in NO_GOAL or median <= limit}


def spread(xs):
    """The spread of a figure over runs, (max - min) / median in %; None for a single run."""
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / abs(m) * 100 if m else float("inf")


def pair_ratios(before, after, key):
    """after / before of the i-th run of each build (bench/goals.sh runs them in turn)."""
    return [a[key] / b[key] for b, a in zip(before, after) if key in a and key in b and b[key]]


# ---- Formatting --------------------------------------------------------------------------------


def fmt_ns(v):
    if abs(v) >= 10_000_000:
        return f"{v / 1e6:.1f} ms"
    if abs(v) >= 10000:
        return f"{v / 1000:.1f} µs"
    if abs(v) >= 100:
        return f"{v:.0f} ns"
    if abs(v) >= 10:
        return f"{v:.1f} ns"
    return f"{v:.2f} ns"


def fmt_figure(key, xs):
    """A figure's median over runs, with its spread where there are several: "31.2 ns (2.1%)"."""
    if not xs:
        return "—"
    m = statistics.median(xs)
    text = f"{m:.0f}" if is_counter(key) else fmt_ns(m)
    s = spread(xs)
    return text if s is None else f"{text} ({s:.1f}%)"


def fmt_measure(kind, key, x, unit=True):
    if kind == "time":
        return fmt_ns(x)
    if kind == "max" or (kind == "info" and is_counter(key)):
        return f"{x:.0f}"
    if kind == "per_call":
        return f"{x:.2f}" + (" ns/call" if unit else "")
    if kind == "diff":
        return f"{x:+.2f}" + (" ns" if unit else "")
    return f"{x:.2f}" + ("×" if unit else "")


def fmt_measures(kind, key, result):
    """The median measure, with its range over runs where there are several:
    "0.87× [0.85, 0.89]"."""
    text = fmt_measure(kind, key, result["measure"])
    ms = result["measures"]
    if len(ms) < 2:
        return text
    low, high = (fmt_measure(kind, key, x, unit=False) for x in (min(ms), max(ms)))
    return f"{text} [{low}, {high}]"


def goal_text(kind, limit):
    if kind in NO_GOAL:
        return "(info)"
    return {"max": f"≤ {limit:g}", "per_call": f"≤ {limit:g} ns per call",
            "diff": f"≤ baseline + {limit:g} ns", "ratio": f"≤ {limit:g}×"}[kind]


def short(name):
    return "+".join(n[3:] if n.startswith("BM_") else n for n in name.split("+"))


def selector(pattern):
    """Google Benchmark's --benchmark_filter as a predicate on a benchmark's name (a leading "-"
    negates it); every benchmark without one."""
    if not pattern or pattern == "all":
        return lambda name: True
    negate = pattern.startswith("-")
    regex = re.compile(pattern[1:] if negate else pattern)
    return lambda name: (regex.search(name) is None) == negate


def not_run(row, errors, selected):
    """Why a row has no figures: ("filtered", text), ("error", text) or ("absent", text)."""
    _, name, base, _, _ = row
    names = benchmarks_of(name) + (benchmarks_of(base) if base else [])
    if not all(selected(n) for n in names):
        return "filtered", ""
    for n in names:
        if n in errors:
            return "error", f"ERROR ({short(n)}: {errors[n]})"
    return "absent", "ABSENT (not in the results)"


def summary(counts):
    missed, absent = counts["missed"], counts["absent"] + counts["error"]
    text = "all goals met" if missed == 0 and absent == 0 else (
        f"{missed} goal(s) missed, {absent} absent or in error")
    if counts["filtered"]:
        text += f"; {counts['filtered']} row(s) left out by --benchmark_filter"
    return f"laptime bench: {text}"


def exit_status(counts):
    if counts["absent"] or counts["error"]:
        return 2
    return 1 if counts["missed"] else 0


# ---- The tables --------------------------------------------------------------------------------


def one_build_table(runs, errors, selected):
    """The table of one build (one or more runs): lines and the counts of verdicts."""
    lines = [
        "| path | benchmark | median | baseline | baseline median | measured | goal | |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    counts = {"missed": 0, "absent": 0, "error": 0, "filtered": 0}
    for row in ROWS:
        label, name, base, kind, limit = row
        result = evaluate(row, runs)
        if result is None:
            state, why = not_run(row, errors, selected)
            if kind != "info":
                counts[state] += 1
            if kind != "info" and state != "filtered":
                lines.append(f"| {label} | {short(name)} | — | | | | | {why} |")
            continue
        verdict = "" if kind in NO_GOAL else ("PASS" if result["ok"] else "MISS")
        counts["missed"] += 0 if result["ok"] else 1
        lines.append(
            f"| {label} | {short(name)} | {fmt_figure(name, result['values'])} | "
            f"{short(base) if base else '—'} | "
            f"{fmt_figure(base, result['bases']) if base else '—'} | "
            f"{fmt_measures(kind, name, result)} | {goal_text(kind, limit)} | {verdict} |")
    return lines, counts


def two_builds_table(before, after, errors, selected):
    """The table of two builds: each row's figure before and after, after / before, the measure
    of the goal in each build, and the after build's verdict (counted)."""
    lines = [
        "| path | benchmark | before | after | after / before | measured, before → after | goal "
        "| after |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    counts = {"missed": 0, "absent": 0, "error": 0, "filtered": 0}
    for row in ROWS:
        label, name, base, kind, limit = row
        result, old = evaluate(row, after), evaluate(row, before)
        if result is None:
            state, why = not_run(row, errors, selected)
            if kind != "info":
                counts[state] += 1
            if kind != "info" and state != "filtered":
                old_figure = fmt_figure(name, figures(before, name))
                lines.append(f"| {label} | {short(name)} | {old_figure} | — | | | | {why} |")
            continue
        ratios = pair_ratios(before, after, name)
        change = "—" if not ratios else fmt_measures("ratio", name, {
            "measure": statistics.median(ratios), "measures": ratios})
        old_measure = fmt_measure(kind, name, old["measure"]) if old else "—"
        verdict = "" if kind in NO_GOAL else ("PASS" if result["ok"] else "MISS")
        counts["missed"] += 0 if result["ok"] else 1
        lines.append(
            f"| {label} | {short(name)} | {fmt_figure(name, figures(before, name))} | "
            f"{fmt_figure(name, figures(after, name))} | {change} | {old_measure} → "
            f"{fmt_measures(kind, name, result)} | {goal_text(kind, limit)} | {verdict} |")
    return lines, counts


def load_averages(contexts):
    firsts = [f"{c['load_avg'][0]:.2f}" for c in contexts if c.get("load_avg")]
    return ", ".join(firsts) if firsts else "?"


def footer(contexts, runs):
    per_run = "" if runs == 1 else (
        f" over {runs} runs: each figure the median of the runs' medians, (x%) its spread "
        "(max − min) / median, [a, b] the range of a measure over the runs")
    return (f"Median CPU time per iteration and thread{per_run}; load average (1 min) at the start "
            f"of each run: {load_averages(contexts)}; NVTX tool attached: "
            f"{contexts[0].get('nvtx_tool', '?') if contexts else '?'}.")


def check_rows(binary):
    """Every row's benchmarks are registered in laptime_bench (--benchmark_list_tests): 0, or 1
    with the names that are not."""
    listed = subprocess.run([binary, "--benchmark_list_tests"], capture_output=True, text=True,
                            check=True).stdout.split()
    wanted = {n for _, name, base, _, _ in ROWS for key in (name, base) if key
              for n in benchmarks_of(key)} | features.benchmarks()
    missing = sorted(wanted - set(listed))
    for name in missing:
        print(f"bench/table.py: row benchmark {name} is not registered in {binary}")
    print(f"bench/table.py: {len(wanted) - len(missing)} of {len(wanted)} row benchmarks "
          "registered")
    return 1 if missing else 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("runs", nargs="*", help="laptime_bench JSON files of one build")
    parser.add_argument("--before", nargs="+", default=[], help="the runs of the build before")
    parser.add_argument("--after", nargs="+", default=[], help="the runs of the build after")
    parser.add_argument("--filter", default="", help="the --benchmark_filter the runs used")
    parser.add_argument("--check-rows", metavar="LAPTIME_BENCH",
                        help="check that every row's benchmark is registered, and exit")
    args = parser.parse_args(argv[1:])
    if args.check_rows:
        return check_rows(args.check_rows)
    if bool(args.before) != bool(args.after) or bool(args.runs) == bool(args.before):
        parser.error("give the runs of one build, or --before and --after")
    selected = selector(args.filter)
    if args.runs:
        contexts, runs, errors = load_runs(args.runs)
        lines, counts = one_build_table(runs, errors, selected)
    else:
        _, before, _ = load_runs(args.before)
        contexts, runs, errors = load_runs(args.after)
        lines, counts = two_builds_table(before, runs, errors, selected)
    print("\n".join(lines + features.lines(runs, fmt_figure, short)))
    print(f"\n{footer(contexts, len(runs))}")
    print(summary(counts))
    return exit_status(counts)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
