"""The report in the seed tool's layout (docs/stopwatch.md, "The seed's report layout"): a program
written for the seed, with only its import changed, run with LAPTIME_REPORT_FORMAT=seed, prints
sections that a parser of the seed's logs reads as before, with laptime's figures; from code,
`set_report_format("seed")`."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

import laptime

# In the seed's style: enable, one name tracked for CPU, print every 4 measured iterations.
SEED_PROGRAM = """
import time
from laptime import Stopwatch

stopwatch = Stopwatch()
stopwatch.enable(2, 4, False)
stopwatch.set_cpu_usage_meas_name("training loop")
stopwatch.start_one_time_measurement("complete_run")
for _ in range(10):
    stopwatch.start_meas("training loop")
    stopwatch.start_meas("data loading")
    time.sleep(0.004)
    stopwatch.end_meas("data loading")
    stopwatch.end_meas("training loop")
    stopwatch.finish_iter()
stopwatch.end_one_time_measurement("complete_run")
stopwatch.print_eval_times()
"""


def parse_seed_log(text, name):
    """What a parser of the seed's logs took from the last report: seconds per iteration of
    `name`, the CPU line, the measured iterations."""
    last = text.split("Average runtime per iteration:")[-1]
    per_iter = float(re.search(r"`%s`: ([0-9.eE+-]+)" % re.escape(name), last).group(1))
    cpu = float(re.search(r"Mean CPU usage during `[^`]+`: ([0-9.eE+-]+)", last).group(1))
    iters = int(re.findall(r"Num. measured iterations: (\d+)", text)[-1])
    return per_iter, cpu, iters


def run_program(tmp_path, **env_vars):
    script = tmp_path / "seed_program.py"
    script.write_text(textwrap.dedent(SEED_PROGRAM))
    env = dict(os.environ, **env_vars)
    for name in ("LAPTIME_PROFILE", "LAPTIME_OUTPUT", "LAPTIME_PRINT_AT_EXIT"):
        env.pop(name, None)
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def test_a_seed_program_with_only_its_import_changed_prints_the_seeds_sections(tmp_path):
    run = run_program(tmp_path, LAPTIME_REPORT_FORMAT="seed")
    out = run.stdout
    # Two periodic reports (after 4 and 8 measured iterations) and the final one.
    assert out.count("######################### Stopwatch #########################\n") == 3
    assert re.findall(r"Num. measured iterations: (\d+)", out) == ["4", "8", "8"]
    per_iter, cpu, iters = parse_seed_log(out, "data loading")
    assert iters == 8
    assert 0.004 <= per_iter < 0.5  # seconds, as the seed printed
    assert 0.0 <= cpu <= 100.0
    assert "One-time measurements:\n  `complete_run`: " in out
    assert "laptime stopwatch" not in out and not run.stderr


def test_the_table_stays_the_default(tmp_path):
    out = run_program(tmp_path).stdout
    assert "laptime stopwatch: 8 measured iterations" in out
    assert "Average runtime per iteration:" not in out


def test_a_malformed_value_is_warned_about_once_and_the_table_printed(tmp_path):
    run = run_program(tmp_path, LAPTIME_REPORT_FORMAT="old")
    assert "laptime stopwatch: 8 measured iterations" in run.stdout
    assert run.stderr.count("LAPTIME_REPORT_FORMAT") == 1, run.stderr


def test_set_report_format_from_code(capsys):
    sw = laptime.Stopwatch()
    sw.reset()
    sw.enable(0)
    try:
        with sw.measure("step"):
            pass
        sw.finish_iter()
        sw.set_report_format("seed")
        assert sw.report().startswith("######################### Stopwatch ####")
        sw.print_eval_times()
        assert "Average runtime per measured interval:\n  `step`: " in capsys.readouterr().out
        sw.set_report_format("table")
        assert sw.report().startswith("laptime stopwatch")
        with pytest.raises(ValueError, match="'old' is not one of 'table', 'seed'"):
            sw.set_report_format("old")
        with pytest.raises(TypeError):
            sw.set_report_format(1)
    finally:
        sw.set_report_format("table")
        sw.disable()
        sw.reset()
