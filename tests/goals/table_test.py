#!/usr/bin/env python3
"""bench/table.py on synthetic laptime_bench results: what it prints for one run, for two runs of
one build (medians over runs, spreads, PASS/MISS on the median of the runs' ratios), for two
builds side by side (after / before of runs taken in turn, the after build's verdict), and for
rows that are absent, in error or left out by a filter.

    python3 tests/goals/table_test.py [ROOT]
"""
import json
import os
import pathlib
import stat
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else __file__).resolve()
ROOT = ROOT if (ROOT / "bench" / "table.py").exists() else ROOT.parents[2]
TABLE = ROOT / "bench" / "table.py"

CLOCK = "BM_SteadyClockPair/threads:1"
PAIR = "BM_StopwatchPair_Enabled/threads:1"
RAW = "BM_NvtxRawPushPop"
WRAPPER = "BM_NvtxWrapperPushPop"
MEMORY = "BM_MemoryPerThreadName/iterations:1/real_time"
# The benchmarks the synthetic runs hold: every row reading another one is left out.
FILTER = ("^BM_(SteadyClockPair/threads:1|StopwatchPair_Enabled/threads:1|NvtxRawPushPop|"
          "NvtxWrapperPushPop|MemoryPerThreadName/iterations:1/real_time)$")


def median_entry(name, ns, **counters):
    """A benchmark's median aggregate as Google Benchmark writes it (CPU time ns)."""
    return {"name": f"{name}_median", "run_name": name, "run_type": "aggregate",
            "aggregate_name": "median", "repetitions": 3, "threads": 1, "iterations": 1000,
            "real_time": ns * 1.1, "cpu_time": ns, "time_unit": "ns", **counters}


def run_file(directory, label, pair, clock, wrapper=3.0, rss=700.0, load=1.0, extra=()):
    entries = [median_entry(CLOCK, clock), median_entry(PAIR, pair), median_entry(RAW, 1.0),
               median_entry(WRAPPER, wrapper),
               median_entry(MEMORY, 5e6, rss_bytes_per_pair=rss, malloc_bytes_per_pair=rss + 50)]
    path = pathlib.Path(directory) / f"{label}.json"
    path.write_text(json.dumps({"context": {"load_avg": [load, 0.5, 0.2], "nvtx_tool": "none"},
                                "benchmarks": entries + list(extra)}))
    return str(path)


def table(*args):
    done = subprocess.run([sys.executable, str(TABLE), *args], capture_output=True, text=True)
    return done.returncode, done.stdout


def row(output, label):
    """The cells of the row whose first cell is label."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in:\n{output}")


class OneBuild(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_one_run_shows_each_figure_without_a_spread(self):
        rc, out = table("--filter", FILTER, run_file(self.dir.name, "a", pair=31.2, clock=40))
        self.assertEqual(row(out, "Stopwatch pair, enabled")[2:],
                         ["31.2 ns", "SteadyClockPair/threads:1", "40.0 ns", "0.78×", "≤ 1.5×",
                          "PASS"])
        self.assertEqual(row(out, "Stopwatch pair, cycle-counter clock")[-1], "MISS")
        self.assertEqual(rc, 1)

    def test_two_runs_give_medians_spreads_and_the_median_of_the_runs_ratios(self):
        # Run 1: 30 / 40 = 0.75; run 2: 57 / 60 = 0.95. Median of the ratios 0.85 (the ratio of
        # the medians, 43.5 / 50, would read 0.87).
        runs = [run_file(self.dir.name, "a", pair=30, clock=40, wrapper=3.0, rss=700, load=1.5),
                run_file(self.dir.name, "b", pair=57, clock=60, wrapper=4.5, rss=900, load=2.5)]
        rc, out = table("--filter", FILTER, *runs)
        self.assertEqual(row(out, "Stopwatch pair, enabled")[2:],
                         ["43.5 ns (62.1%)", "SteadyClockPair/threads:1", "50.0 ns (40.0%)",
                          "0.85× [0.75, 0.95]", "≤ 1.5×", "PASS"])
        self.assertEqual(row(out, "Stopwatch pair, cycle-counter clock")[-3:],
                         ["0.85× [0.75, 0.95]", "≤ 0.5×", "MISS"])
        self.assertEqual(row(out, "NVTX push+pop over raw, untracked")[5:],
                         ["+2.75 ns [+2.00, +3.50]", "≤ baseline + 3 ns", "PASS"])
        self.assertEqual(row(out, "bytes of RSS per (thread, name)")[2:],
                         ["800 (25.0%)", "—", "—", "800 [700, 900]", "≤ 2048", "PASS"])
        self.assertIn("over 2 runs", out)
        self.assertIn("at the start of each run: 1.50, 2.50", out)
        self.assertIn("laptime bench: 1 goal(s) missed, 0 absent or in error", out)
        self.assertEqual(rc, 1)

    def test_all_goals_met_exits_0(self):
        # 18 / 40 and 19 / 40: under the cycle-counter clock's 0.5×, the strictest goal here.
        runs = [run_file(self.dir.name, "a", pair=18, clock=40),
                run_file(self.dir.name, "b", pair=19, clock=40)]
        rc, out = table("--filter", FILTER, *runs)
        self.assertIn("laptime bench: all goals met", out)
        self.assertEqual(rc, 0)

    def test_rows_without_figures_say_why(self):
        error = {"name": "BM_CpuSample_Self", "run_name": "BM_CpuSample_Self",
                 "run_type": "iteration", "error_occurred": True, "error_message": "no /proc"}
        path = run_file(self.dir.name, "a", pair=30, clock=40, extra=[error])
        rc, out = table(path)  # no filter: every row was wanted
        self.assertEqual(row(out, "/proc sample, self, vs its raw reads")[-1],
                         "ERROR (CpuSample_Self: no /proc)")
        self.assertEqual(row(out, "Stopwatch pair, recording intervals")[-1],
                         "ABSENT (not in the results)")
        self.assertEqual(rc, 2)
        rc, out = table("--filter", FILTER, path)  # the filter left them out: counted, not shown
        self.assertNotIn("Stopwatch pair, recording intervals", out)
        self.assertRegex(out, r"row\(s\) left out by --benchmark_filter")
        # A negative filter (a leading "-", as Google Benchmark reads it) leaves out what it names.
        rc, out = table("--filter=-StopwatchPair_Recording", path)
        self.assertNotIn("Stopwatch pair, recording intervals", out)
        self.assertEqual(row(out, "Stopwatch pair, in a shared object")[-1],
                         "ABSENT (not in the results)")


class Features(unittest.TestCase):
    def test_each_step_shows_what_it_adds_and_its_ratio_to_the_clock_pair(self):
        # Run 1: 18 - 16 = +2 ns, 18 / 40 = 0.45; run 2: 24.4 - 20 = +4.4 ns, 24.4 / 40 = 0.61.
        with tempfile.TemporaryDirectory() as d:
            runs = [run_file(d, f"r{i}", pair=30, clock=40,
                             extra=[median_entry("BM_Floor_Tsc", tsc),
                                    median_entry("BM_Floor_Clock", clock)])
                    for i, (tsc, clock) in enumerate([(16, 18), (20, 24.4)])]
            _, out = table("--filter", FILTER, *runs)
        self.assertIn("Where the pair's time goes", out)
        self.assertEqual(row(out, "+ laptime's clock (the counter scaled to ns)")[1:],
                         ["Floor_Clock", "21.2 ns (30.2%)", "+3.20 ns [+2.00, +4.40]",
                          "0.53× [0.45, 0.61]"])
        # A step whose previous step did not run shows no difference.
        self.assertEqual(row(out, "= the Stopwatch pair, a literal")[3:],
                         ["", "0.75× [0.75, 0.75]"])
        self.assertNotIn("+ recording intervals", out)


class TwoBuilds(unittest.TestCase):
    def test_before_and_after_side_by_side(self):
        with tempfile.TemporaryDirectory() as d:
            # Runs in turn: before 50, 60 ns; after 40, 54 ns; the clock 50 ns throughout.
            before = [run_file(d, "b1", pair=50, clock=50), run_file(d, "b2", pair=60, clock=50)]
            after = [run_file(d, "a1", pair=40, clock=50), run_file(d, "a2", pair=54, clock=50)]
            rc, out = table("--filter", FILTER, "--before", *before, "--after", *after)
        # after / before per pair of runs: 40 / 50 = 0.80, 54 / 60 = 0.90.
        self.assertEqual(row(out, "Stopwatch pair, enabled")[2:],
                         ["55.0 ns (18.2%)", "47.0 ns (29.8%)", "0.85× [0.80, 0.90]",
                          "1.10× → 0.94× [0.80, 1.08]", "≤ 1.5×", "PASS"])
        self.assertEqual(row(out, "Stopwatch pair, cycle-counter clock")[-1], "MISS")
        self.assertEqual(rc, 1)

    def test_one_build_without_the_other_is_refused(self):
        rc, _ = table("--before", "x.json")
        self.assertEqual(rc, 2)


class CheckRows(unittest.TestCase):
    def test_a_row_whose_benchmark_is_not_registered_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            fake = pathlib.Path(d) / "laptime_bench"
            fake.write_text(f"#!/bin/sh\necho {CLOCK}\necho {PAIR}\n")
            fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
            rc, out = table("--check-rows", str(fake))
        self.assertEqual(rc, 1)
        self.assertIn("row benchmark BM_NvtxRawPushPop is not registered", out)
        self.assertNotIn(f"row benchmark {PAIR} is not", out)


if __name__ == "__main__":
    os.chdir(ROOT)
    unittest.main(argv=[sys.argv[0], "-v"])
