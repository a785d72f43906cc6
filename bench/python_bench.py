#!/usr/bin/env python3
"""What laptime's Python calls cost, next to their baselines in the same run (goals:
docs/python.md and docs/performance.md).

    PYTHONPATH=build-py/python python3 bench/python_bench.py      # a development build
    python3 bench/python_bench.py                                 # laptime installed (pip)

Each case is a loop calling the pair the way user code does (a module-global object, a str
literal), unrolled 10 times; the cost of the empty loop is subtracted. A loop is timed in CPU
time of the thread (time.thread_time_ns), as the C++ table is: on a loaded machine a loop that
was preempted would otherwise count the time it waited for a core. The cases of a phase run
round-robin, --reps times, and the table shows the median per pair. Phases: nothing enabled;
Stopwatch and NVTX wrapper enabled (no order tracking); NVTX order tracking on. Baselines:

  - C no-op pair: a builtin METH_O method doing nothing (the floor of any C binding), called
    twice; and, for information, `_noop` then `_noop2`, two such methods: like start_meas and
    end_meas, two C functions called from the same interpreter instruction, whose indirect call
    the CPU then predicts less well (docs/performance.md, goal 5);
  - Python empty pair: a pure-Python method with an empty body;
  - clock pair: two time.perf_counter_ns() calls;
  - seed-like Stopwatch / NVTX: pure-Python singletons doing what the seed did per call
    (perf_counter_ns bookkeeping in dicts; a list as the range stack, without the NVTX call
    itself, which torch.cuda.nvtx adds on top).

No tool is attached to NVTX here, so a push or pop reaches NVTX's no-op stub.

The last table holds the Python ratios beside their goals (docs/performance.md, goals 5a-5e): in
each repetition a case and its baseline ran side by side, so each repetition gives a ratio; the
row shows their median and quartiles (the spread), and each case's median ns with the
interquartile range of its repetitions over that median. The script exits 1 when a median misses its
goal (bench/goals.sh runs it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import laptime
from laptime import _laptime

UNROLL = 10


class SeedStopwatch:
    """A pure-Python Stopwatch doing the seed's per-call work."""

    def __init__(self) -> None:
        self.is_enabled = False
        self._starts: dict = {}
        self._totals: dict = {}
        self._counts: dict = {}
        self._finished = 0
        self._warmup = 0

    def start_meas(self, name: str) -> None:
        if not self.is_enabled:
            return
        assert name not in self._starts, f"{name} is already running"
        self._starts[name] = time.perf_counter_ns()

    def end_meas(self, name: str) -> None:
        if not self.is_enabled:
            return
        t = time.perf_counter_ns()
        assert name in self._starts, f"{name} is not running"
        dt = t - self._starts.pop(name)
        if self._finished >= self._warmup:
            self._totals[name] = self._totals.get(name, 0) + dt
            self._counts[name] = self._counts.get(name, 0) + 1


class SeedNVTX:
    """A pure-Python NVTX wrapper doing the seed's bookkeeping (not the NVTX call)."""

    def __init__(self) -> None:
        self.is_enabled = False
        self.track = False
        self._stack: list = []

    def range_push(self, name: str) -> None:
        if not self.is_enabled:
            return
        if self.track:
            self._stack.append(name)

    def range_pop(self, expected: str | None = None) -> None:
        if not self.is_enabled:
            return
        if self.track:
            top = self._stack.pop()
            assert expected is None or top == expected, f"expected {expected}, got {top}"


class Empty:
    def start_meas(self, name: str) -> None:
        pass

    def end_meas(self, name: str) -> None:
        pass


stopwatch = laptime.Stopwatch()
nvtx = laptime.NVTXRangeWrapper()
seed_sw = SeedStopwatch()
seed_nvtx = SeedNVTX()
empty = Empty()
noop = stopwatch._noop
scope_x = stopwatch.measure("x")  # one scope object entered again and again (no creation)
perf_counter_ns = time.perf_counter_ns
cpu_time_ns = time.thread_time_ns

# name -> the statement timed (one "pair")
CASES = {
    "loop": "pass",
    "C no-op pair": 'stopwatch._noop("x"); stopwatch._noop("x")',
    "Python empty pair": 'empty.start_meas("x"); empty.end_meas("x")',
    "clock pair": "perf_counter_ns(); perf_counter_ns()",
    "seed-like start/end": 'seed_sw.start_meas("x"); seed_sw.end_meas("x")',
    "start/end": 'stopwatch.start_meas("x"); stopwatch.end_meas("x")',
    "with measure()": 'with stopwatch.measure("x"): pass',
    "with measure(), reused": "with scope_x: pass",
    "finish_iter": "stopwatch.finish_iter()",
    "seed-like push/pop": 'seed_nvtx.range_push("x"); seed_nvtx.range_pop("x")',
    "push/pop": 'nvtx.range_push("x"); nvtx.range_pop()',
    'push/pop("x")': 'nvtx.range_push("x"); nvtx.range_pop("x")',
    "with nvtx.range()": 'with nvtx.range("x"): pass',
}

# Two different empty methods (an extension without _noop2, older than this script, has none).
if hasattr(stopwatch, "_noop2"):
    CASES["C no-op pair, two functions"] = 'stopwatch._noop("x"); stopwatch._noop2("x")'

# What the seed's NVTX wrapper called, where PyTorch is installed (laptime never imports it).
try:
    import torch.cuda.nvtx as torch_nvtx

    CASES["torch.cuda.nvtx push/pop"] = 'torch_nvtx.range_push("x"); torch_nvtx.range_pop()'
except ImportError:
    torch_nvtx = None


def compile_case(statement: str):
    body = "\n".join("        " + statement for _ in range(UNROLL))
    source = (
        "def run(n):\n"
        "    t0 = cpu_time_ns()\n"
        "    for _ in range(n):\n"
        f"{body}\n"
        "    return cpu_time_ns() - t0\n"
    )
    code = compile(source, "<bench>", "exec")
    exec(code, globals())
    return globals().pop("run")


def run_phase(n: int, reps: int) -> dict:
    runs = {name: compile_case(stmt) for name, stmt in CASES.items()}
    for run in runs.values():  # warm up: specialise the bytecode, fill laptime's name caches
        run(max(1, n // 10))
    samples: dict = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            samples[name].append(run(n) / (n * UNROLL))
    loop = statistics.median(samples.pop("loop"))
    return {name: [max(0.0, v - loop) for v in s] for name, s in samples.items()}


def medians(phase: dict) -> dict:
    return {name: statistics.median(s) for name, s in phase.items()}


def set_phase(phase: str) -> None:
    _laptime._testing_reset()
    seed_sw.is_enabled = seed_nvtx.is_enabled = phase != "off"
    seed_nvtx.track = phase == "tracking"
    if phase != "off":
        stopwatch.enable(0)
        nvtx.enable(False, False, phase == "tracking")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="loop iterations per repetition")
    parser.add_argument("--reps", type=int, default=11, help="repetitions per case (median)")
    args = parser.parse_args()

    samples = {}
    for phase in ("off", "on", "tracking"):
        set_phase(phase)
        samples[phase] = run_phase(args.n, args.reps)
    _laptime._testing_reset()
    off, on, tracking = (medians(samples[p]) for p in ("off", "on", "tracking"))

    def fmt(v: float) -> str:
        return f"{v:.1f}"

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 0 else "n/a"

    print(
        f"laptime {laptime.__version__}, Python {sys.version.split()[0]}; ns per pair, median of "
        f"{args.reps} x {args.n * UNROLL} pairs, empty loop subtracted"
    )
    print()
    print("| call (a pair) | not enabled | enabled | seed-like, enabled | laptime / seed-like "
          "| goal (enabled / not) |")
    print("|---|---:|---:|---:|---:|---|")
    rows = [
        ("start_meas + end_meas", "start/end", "seed-like start/end", "≤ 100 / ≤ 40"),
        ("`with stopwatch.measure()`", "with measure()", "seed-like start/end", ""),
        ("range_push + range_pop()", "push/pop", "seed-like push/pop", "≤ 120 / ≤ 40"),
        ("range_push + range_pop(name), order tracking", 'push/pop("x")', "seed-like push/pop",
         "≤ 120 / ≤ 40"),
        ("`with nvtx.range()`, order tracking", "with nvtx.range()", "seed-like push/pop", ""),
    ]
    for label, case, seed, goal in rows:
        enabled = tracking[case] if "tracking" in label else on[case]
        seed_enabled = tracking[seed] if "tracking" in label else on[seed]
        print(f"| {label} | {fmt(off[case])} | {fmt(enabled)} | {fmt(seed_enabled)} | "
              f"{ratio(enabled, seed_enabled)} | {goal} |")
    print(f"| finish_iter (one call) | {fmt(off['finish_iter'])} | {fmt(on['finish_iter'])} | "
          "| | |")
    print()
    print("| baseline (a pair) | ns | laptime start/end enabled / baseline |")
    print("|---|---:|---:|")
    for label, case in (
        ("C no-op method pair (METH_O, str argument)", "C no-op pair"),
        ("Python empty method pair", "Python empty pair"),
        ("time.perf_counter_ns() pair", "clock pair"),
        ("seed-like start/end, not enabled", "seed-like start/end"),
        ("C no-op pair of two methods (`_noop`, `_noop2`)", "C no-op pair, two functions"),
    ):
        if case not in off:
            continue
        value = off[case] if case != "clock pair" else on[case]
        print(f"| {label} | {fmt(value)} | {ratio(on['start/end'], value)} |")
    if torch_nvtx is not None:
        value = off["torch.cuda.nvtx push/pop"]
        print(f"| torch.cuda.nvtx range_push + range_pop (the seed's NVTX call) | {fmt(value)} | "
              f"push/pop enabled: {ratio(on['push/pop'], value)} |")
    return print_goals(samples)


# The Python ratios (docs/performance.md, goals 5a-5e): (label, phase, case, baseline case, limit).
GOALS = [
    ("start/end enabled / two perf_counter_ns()", "on", "start/end", "clock pair", 0.5),
    ("`with measure()` / explicit start/end, enabled", "on", "with measure()", "start/end", 1.3),
    ("start/end not enabled / two C no-op calls", "off", "start/end", "C no-op pair", 1.2),
    ("push/pop not enabled / two C no-op calls", "off", "push/pop", "C no-op pair", 1.2),
    ("`with nvtx.range()` / explicit push/pop(name), tracking", "tracking", "with nvtx.range()",
     'push/pop("x")', 1.3),
]


def ratio_spread(values: list, bases: list) -> tuple:
    """The ratio of each repetition (a case and its baseline ran side by side in it): median,
    first and third quartile."""
    ratios = sorted(v / b if b > 0 else float("inf") for v, b in zip(values, bases))
    if len(ratios) < 2:
        return ratios[0], ratios[0], ratios[0]
    q1, q2, q3 = statistics.quantiles(ratios, n=4)
    return q2, q1, q3


def with_spread(values: list) -> str:
    """A case's median ns with its spread over the repetitions, the interquartile range over the
    median: "52.7 (4%)"."""
    median = statistics.median(values)
    if len(values) < 2 or median <= 0:
        return f"{median:.1f}"
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{median:.1f} ({(q3 - q1) / median * 100:.0f}%)"


def print_goals(samples: dict) -> int:
    """Prints the Python ratios beside their goals, each the median of the repetitions' ratios with
    its spread (quartiles); 1 when a median misses its goal."""
    off, on, tracking = (medians(samples[p]) for p in ("off", "on", "tracking"))
    print()
    print("| Python ratio (goals 5a-5e) | ns (spread) | baseline ns (spread) | ratio, median "
          "| spread (quartiles) | goal | |")
    print("|---|---:|---:|---:|---|---|---|")
    missed = 0
    for label, phase, case, base, limit in GOALS:
        r, q1, q3 = ratio_spread(samples[phase][case], samples[phase][base])
        ok = r <= limit
        missed += 0 if ok else 1
        value, base_ns = with_spread(samples[phase][case]), with_spread(samples[phase][base])
        print(f"| {label} | {value} | {base_ns} | {r:.2f}× | {q1:.2f}–{q3:.2f} "
              f"| ≤ {limit:g}× | {'PASS' if ok else 'MISS'} |")
    r, q1, q3 = ratio_spread(samples["on"]["with measure(), reused"], samples["on"]["start/end"])
    print("| (info) `with` on a reused scope object / explicit start/end, enabled | "
          f"{on['with measure(), reused']:.1f} | {on['start/end']:.1f} | {r:.2f}× | "
          f"{q1:.2f}–{q3:.2f} | | |")
    if "C no-op pair, two functions" in off:
        r, q1, q3 = ratio_spread(samples["off"]["start/end"],
                                 samples["off"]["C no-op pair, two functions"])
        print("| (info) start/end not enabled / `_noop` + `_noop2` (two functions, as start/end) "
              f"| {off['start/end']:.1f} | {off['C no-op pair, two functions']:.1f} | {r:.2f}× | "
              f"{q1:.2f}–{q3:.2f} | | |")
    print("\nns: median over the repetitions, (x%) their interquartile range over the median; "
          "ratio: the median of the repetitions' ratios, each case beside its baseline.")
    print(f"laptime python bench: "
          f"{'all goals met' if missed == 0 else f'{missed} goal(s) missed'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
