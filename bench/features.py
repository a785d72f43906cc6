"""The features table: the Stopwatch pair built up step by step (bench/bench_floor.cpp), from two
cycle-counter reads to laptime's real pairs (bench/bench.cpp). Each step shows its median, what
it adds over the step it builds on (the difference taken in each run, then its median over runs),
and its ratio to two steady_clock::now() of the same run (the goals' baseline). Informative: no
goal, no verdict. bench/table.py prints it below the goals' table.
"""
import statistics

CLOCK = "BM_SteadyClockPair/threads:1"
PAIR = "BM_StopwatchPair_Enabled/threads:1"

# (step, benchmark, the benchmark it adds to or None). A chain per name layout; the steps before
# the name lookup are shared.
STEPS = [
    ("two steady_clock::now() (the baseline)", CLOCK, None),
    ("floor: two cycle-counter reads, the difference added to a thread-local total",
     "BM_Floor_Tsc", None),
    ("+ laptime's clock (the counter scaled to ns)", "BM_Floor_Clock", "BM_Floor_Tsc"),
    ("+ the thread's record, at start and at end", "BM_Floor_Record", "BM_Floor_Clock"),
    ("+ name lookup, a literal (the start in its slot)", "BM_Floor_Lookup_Literal",
     "BM_Floor_Record"),
    ("+ statistics and histogram, a literal", "BM_Floor_Histogram_Literal",
     "BM_Floor_Lookup_Literal"),
    ("= the Stopwatch pair, a literal", PAIR, "BM_Floor_Histogram_Literal"),
    ("+ recording intervals", "BM_StopwatchPair_Recording", PAIR),
    ("+ name lookup, a reused std::string buffer", "BM_Floor_Lookup_ReusedBuffer",
     "BM_Floor_Record"),
    ("+ statistics and histogram, the buffer", "BM_Floor_Histogram_ReusedBuffer",
     "BM_Floor_Lookup_ReusedBuffer"),
    ("= the Stopwatch pair, the buffer", "BM_StopwatchPair_ReusedBuffer",
     "BM_Floor_Histogram_ReusedBuffer"),
    ("+ name lookup, 1000 names round-robin", "BM_Floor_Lookup_RoundRobin1000",
     "BM_Floor_Record"),
    ("+ statistics and histogram, 1000 names", "BM_Floor_Histogram_RoundRobin1000",
     "BM_Floor_Lookup_RoundRobin1000"),
    ("= the Stopwatch pair, 1000 names round-robin", "BM_StopwatchPair_RoundRobin1000",
     "BM_Floor_Histogram_RoundRobin1000"),
]


def benchmarks():
    """Every benchmark the table reads (for bench/table.py --check-rows)."""
    return {name for _, name, _ in STEPS}


def _with_range(xs, fmt, unit):
    """The median with its unit, and [min, max] over the runs where there are several."""
    text = fmt(statistics.median(xs)) + unit
    return text if len(xs) < 2 else f"{text} [{fmt(min(xs))}, {fmt(max(xs))}]"


def lines(runs, fmt_figure, short):
    """The table's lines for the runs of one build, or [] where no step ran. fmt_figure(key, xs)
    and short(name) are bench/table.py's."""
    rows = []
    for label, name, prev in STEPS:
        values = [r[name] for r in runs if name in r]
        if not values:
            continue
        adds = [r[name] - r[prev] for r in runs if name in r and prev and prev in r]
        ratios = [r[name] / r[CLOCK] for r in runs if name in r and r.get(CLOCK)]
        add = _with_range(adds, "{:+.2f}".format, " ns") if adds else ""
        ratio = _with_range(ratios, "{:.2f}".format, "×") if ratios else "—"
        rows.append(f"| {label} | {short(name)} | {fmt_figure(name, values)} | {add} | {ratio} |")
    if not rows:
        return []
    return ["", "Where the pair's time goes (bench/bench_floor.cpp; no goal):", "",
            "| step | benchmark | median | + over the step before | / two steady_clock::now() |",
            "|---|---|---:|---:|---:|"] + rows
