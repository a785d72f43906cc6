#!/usr/bin/env python3
"""Turns laptime_bench's JSON output into the cost table (docs/performance.md): each hot path's median next to its
raw baseline, the ratio or difference, the goal, and PASS/MISS.

    bench/table.py build/bench/bench-results.json

The figure is the median over repetitions of the CPU time per iteration of each thread
(Google Benchmark's cpu_time): on a shared 2-core machine it leaves out the time a thread waits
for a core, which wall time does not. Exits 1 when a goal is missed, 2 when a benchmark is absent.
"""
import json
import sys


# Google Benchmark's own fields of a result; any other number is a user counter.
STANDARD_KEYS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index",
                 "threads", "iterations", "real_time", "cpu_time"}


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    medians, errors = {}, {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            errors[b.get("run_name", b["name"])] = b.get("error_message", "error")
            continue
        # With --benchmark_repetitions=1 there are no aggregates: the single run is the median.
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        # time_unit is ns for every benchmark here. A benchmark that times only part of each
        # iteration itself (UseManualTime) reports that part as its real time.
        manual = b["run_name"].endswith("/manual_time")
        medians[b["run_name"]] = b["real_time"] if manual else b["cpu_time"]
        # User counters (state.counters) as "<run_name>:<counter>", for rows of kind "max".
        for key, value in b.items():
            if key not in STANDARD_KEYS and isinstance(value, (int, float)):
                medians[f'{b["run_name"]}:{key}'] = value
    # A baseline "A+B" is the sum of two rows' medians (a cost next to its two parts).
    for _, _, base, _, _ in ROWS:
        if base and "+" in base:
            parts = base.split("+")
            if all(p in medians for p in parts):
                medians[base] = sum(medians[p] for p in parts)
    return data["context"], medians, errors


# (label, benchmark, baseline or None, kind, limit)
#   kind "ratio":    median / baseline <= limit
#   kind "diff":     median - baseline <= limit (ns)
#   kind "per_call": median / 2 <= limit (ns); the benchmark times a pair of calls
#   kind "info":     reported, no goal
#   kind "max":      a user counter ("<benchmark>:<counter>") <= limit, in its own unit
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
     "BM_SteadyClockPair/threads:1", "ratio", 0.75),
    ("Stopwatch pair, 64 dense literals", "BM_StopwatchPair_DenseLiterals",
     "BM_SteadyClockPair/threads:1", "ratio", 1.0),
    ("Stopwatch pair, a reused std::string buffer", "BM_StopwatchPair_ReusedBuffer",
     "BM_SteadyClockPair/threads:1", "ratio", 1.0),
    ("Stopwatch pair, 1000 names round-robin", "BM_StopwatchPair_RoundRobin1000",
     "BM_SteadyClockPair/threads:1", "ratio", 1.0),
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


def fmt_ns(v):
    if v >= 10000:
        return f"{v / 1000:.1f} µs"
    if v >= 100:
        return f"{v:.0f} ns"
    if v >= 10:
        return f"{v:.1f} ns"
    return f"{v:.2f} ns"


def is_counter(name):
    """A user counter's key, "<run_name>:<counter>" (a run name may end in "threads:2")."""
    return ":" in name and not name.rsplit(":", 1)[1].isdigit()


def short(name):
    return "+".join(n[3:] if n.startswith("BM_") else n for n in name.split("+"))


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    context, medians, errors = load(argv[1])
    lines = [
        "| path | benchmark | median | baseline | baseline median | measured | goal | |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    missed = absent = 0
    for label, name, base, kind, limit in ROWS:
        if name not in medians or (base is not None and base not in medians):
            why = errors.get(name) or errors.get(base) or "not run"
            if kind != "info":
                absent += 1
                lines.append(f"| {label} | {short(name)} | — | | | | | ABSENT ({why}) |")
            continue
        v = medians[name]
        b = medians.get(base) if base else None
        if kind == "max" or (kind == "info" and is_counter(name)):
            measured, ok = v, kind == "info" or v <= limit
            shown = f"{v:.0f}"
            goal = f"≤ {limit:g}" if kind == "max" else "(info)"
        elif kind == "per_call":
            measured, ok = v / 2, v / 2 <= limit
            shown = f"{v / 2:.2f} ns/call"
            goal = f"≤ {limit:g} ns per call"
        elif kind == "diff":
            measured = v - b
            ok = measured <= limit
            shown = f"{measured:+.2f} ns"
            goal = f"≤ baseline + {limit:g} ns"
        else:
            measured = v / b if b else float("inf")
            ok = kind == "info" or measured <= limit
            shown = f"{measured:.2f}×"
            goal = f"≤ {limit:g}×" if kind == "ratio" else "(info)"
        verdict = "" if kind == "info" else ("PASS" if ok else "MISS")
        missed += 0 if ok else 1
        lines.append(
            f"| {label} | {short(name)} | {f'{v:.0f}' if is_counter(name) else fmt_ns(v)} | "
            f"{short(base) if base else '—'} | "
            f"{fmt_ns(b) if b is not None else '—'} | {shown} | {goal} | {verdict} |")
    print("\n".join(lines))
    print(f"\nMedian CPU time per iteration and thread; load average at start "
          f"{', '.join(f'{x:.2f}' for x in context.get('load_avg', []))}; "
          f"NVTX tool attached: {context.get('nvtx_tool', '?')}.")
    verdicts = "all goals met" if missed == 0 and absent == 0 else (
        f"{missed} goal(s) missed, {absent} absent")
    print(f"laptime bench: {verdicts}")
    if absent:
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
