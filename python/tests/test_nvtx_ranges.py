"""Stopwatch intervals as NVTX ranges (Stopwatch.enable(..., nvtx=True), set_nvtx_ranges,
LAPTIME_NVTX_RANGES), as a profiler receives them: the NVTX injection library of the C++ tests
(tests/nvtx_recorder) records every event of a child Python process."""

import os
import re
import subprocess
import sys

import pytest

PRELUDE = r"""
import ctypes, sys, threading
import laptime
sw, nvtx = laptime.Stopwatch(), laptime.NVTXRangeWrapper()
recorder = ctypes.CDLL(sys.argv[1])
recorder.nvtx_recorder_events.restype = ctypes.c_char_p
recorder.nvtx_recorder_stats.restype = ctypes.c_char_p
def dump():
    sys.stdout.write(recorder.nvtx_recorder_events().decode())
    sys.stdout.write("stats " + recorder.nvtx_recorder_stats().decode() + "\n")
"""


def record(nvtx_recorder, body, **env_vars):
    """Runs PRELUDE + body under the recorder; returns (events without tid, stats, tids)."""
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(nvtx_recorder))
    for key in ("LAPTIME_PROFILE", "LAPTIME_NVTX_RANGES", "LAPTIME_NVTX", "LAPTIME_STOPWATCH"):
        env.pop(key, None)
    env.update(env_vars)
    r = subprocess.run([sys.executable, "-c", PRELUDE + body + "\ndump()\n", str(nvtx_recorder)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    stats = lines.pop()
    lines = [line for line in lines if not line.startswith(("domain-create", "note"))]
    tids = [re.search(r" tid=(\d+)$", line).group(1) for line in lines]
    return [re.sub(r" tid=\d+$", "", line) for line in lines], stats, tids


def test_enable_nvtx_true_makes_each_interval_a_range_of_the_same_registered_name(nvtx_recorder):
    events, stats, _ = record(nvtx_recorder, r"""
nvtx.enable(False, False, False)
sw.enable(0, nvtx=True)
for _ in range(2):
    sw.start_meas("step")
    with sw.measure("forward"):
        nvtx.range_push("step")   # by hand: the same registered string
        nvtx.range_pop()
    sw.end_meas("step")
    sw.finish_iter()
""")
    assert events == [
        "register global step", "push global step",
        "register global forward", "push global forward",
        "push global step", "pop global", "pop global", "pop global",
        "mark global iteration 1",
        "push global step", "push global forward", "push global step", "pop global",
        "pop global", "pop global",
        "mark global iteration 2",
    ]
    assert "registered=6" in stats and "ascii=2" in stats


def test_without_nvtx_or_with_nvtx_false_no_range_is_sent(nvtx_recorder):
    events, _, _ = record(nvtx_recorder, r"""
nvtx.enable(False, False, False)
sw.enable(0)
sw.start_meas("plain"); sw.end_meas("plain")
sw.set_nvtx_ranges(True)
sw.enable(0, nvtx=False)          # the same enable again, ranges off
sw.start_meas("plain"); sw.end_meas("plain")
sw.enable(0, nvtx=None)           # None: the setting stays (off)
sw.start_meas("plain"); sw.end_meas("plain")
assert sw.results()["measurements"][0]["count"] == 3
""")
    assert events == []


def test_set_nvtx_ranges_and_an_interval_ended_on_another_thread(nvtx_recorder):
    events, _, tids = record(nvtx_recorder, r"""
nvtx.enable(False, False, True)
sw.enable(0)
sw.set_nvtx_ranges(True)
def end_there():
    t = threading.Thread(target=sw.end_meas, args=("batch",)); t.start(); t.join()
sw.start_meas("batch"); end_there()   # pushed here: popped at this thread's next start
sw.start_meas("batch"); end_there()   # a start/end range from now on
""")
    assert events == ["register global batch", "push global batch",
                      "pop global", "start global batch", "end global"]
    assert tids[0] == tids[1] == tids[2] == tids[3] and tids[4] != tids[0]


@pytest.mark.parametrize("variables", [{"LAPTIME_PROFILE": "profiling"},
                                       {"LAPTIME_NVTX_RANGES": "1", "LAPTIME_NVTX": "1"}])
def test_the_environment_turns_the_ranges_on_and_wins_over_the_code(nvtx_recorder, variables):
    events, _, _ = record(nvtx_recorder, r"""
laptime.configure_from_env()
sw.enable(0, nvtx=False)   # the environment's choice wins (docs/configuration.md)
sw.start_meas("profiled"); sw.end_meas("profiled")
""", LAPTIME_WARMUP="0", **variables)
    # The profiling profile also turns on the NVTX counters (counters-test): their registrations
    # and samples are not ranges.
    ranges = [e for e in events if not e.startswith("counter-")]
    assert ranges == ["register global profiled", "push global profiled", "pop global"]


def test_set_nvtx_ranges_wants_a_truth_value():
    import laptime

    class Bad:
        def __bool__(self):
            raise ValueError("no truth")

    with pytest.raises(ValueError):
        laptime.Stopwatch().set_nvtx_ranges(Bad())
    with pytest.raises(ValueError):
        laptime.Stopwatch().enable(0, nvtx=Bad())
    with pytest.raises(TypeError):
        laptime.Stopwatch().enable(0, None, False, True)  # nvtx is keyword-only


def test_a_with_range_pushes_and_checks_its_own_name_on_every_block_also_after_a_reset(
        nvtx_recorder):
    # Scope objects held across a test reset and a re-enable into another domain: each block
    # still pushes its own name (str, non-ASCII, any object by its str()) in the domain in force,
    # and its pop is checked against that name.
    events, _, _ = record(nvtx_recorder, r"""
held = (nvtx.range("step"), nvtx.range("café"), nvtx.range(7))
for domain in (None, "trainer"):
    laptime._laptime._testing_reset()
    nvtx.enable(False, False, True, domain=domain)
    for _ in range(2):
        with held[0], held[1], held[2]:
            pass
try:
    with nvtx.range("outer"):
        nvtx.range_push("inner")
    raise SystemExit("the pop of 'outer' with 'inner' innermost was not refused")
except laptime.UsageError as e:
    assert "'outer'" in str(e) and "'inner'" in str(e), str(e)
""")
    block = ["push {d} step", "push {d} café", "push {d} 7", "pop {d}", "pop {d}", "pop {d}"]
    pushed = [e for e in events if not e.startswith("register")]
    assert pushed == ([e.format(d="global") for e in block * 2]
                      + [e.format(d="trainer") for e in block * 2] + ["push trainer outer",
                                                                     "push trainer inner"])


def test_a_domain_with_lone_surrogates_is_named_by_the_bytes_a_name_would_have(nvtx_recorder):
    # As a range name: a surrogate of a file name decoded with surrogateescape becomes its byte
    # again, any other is written as \udxxx. Before, enable() raised UnicodeEncodeError.
    events, _, _ = record(nvtx_recorder, r"""
nvtx.enable(False, False, True, domain="run\ud800")
nvtx.range_push("step")
nvtx.range_pop("step")
""")
    assert [e for e in events if not e.startswith("register")] == [
        "push run\\ud800 step", "pop run\\ud800"]
