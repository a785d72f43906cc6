"""Subclassing the tools, as seed users do, and the limit on distinct names
(LAPTIME_MAX_NAMES, docs/configuration.md)."""

import os
import subprocess
import sys
import textwrap

import pytest

import laptime


def subclasses():
    """A seed user's subclasses (made here, not at import, so that each test fails on its own
    where subclassing is refused)."""

    class CountingStopwatch(laptime.Stopwatch):
        """A seed user's subclass: counts calls, then lets the Stopwatch do the work."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.__dict__.setdefault("started", [])

        def start_meas(self, name):
            self.started.append(name)
            super().start_meas(name)

    class CheckingNVTX(laptime.NVTXRangeWrapper):
        def range_pop(self, range_name=None):
            self.popped = range_name
            super().range_pop(range_name)

    return CountingStopwatch, CheckingNVTX


def test_a_subclass_overrides_a_method_and_reaches_the_singleton_through_super(stopwatch):
    CountingStopwatch, _ = subclasses()
    sw = CountingStopwatch()
    assert sw is CountingStopwatch()  # one instance per subclass, like the base class
    assert isinstance(sw, laptime.Stopwatch) and sw is not stopwatch
    sw.started.clear()
    sw.enable(0, None, False)
    assert stopwatch.is_enabled  # the same process-wide state
    sw.start_meas("step")
    sw.end_meas("step")
    stopwatch.start_meas("step")  # the base singleton sees the same name
    stopwatch.end_meas("step")
    sw.finish_iter()
    assert sw.started == ["step"]
    assert [(m["name"], m["count"]) for m in stopwatch.results()["measurements"]] == [("step", 2)]
    # Constructed with arguments, the subclass enables, as Stopwatch(*args) does.
    stopwatch.disable()
    stopwatch.reset()  # a new run: a new warm-up
    CountingStopwatch(num_warmup_iters=3)
    assert stopwatch.results()["num_warmup_iters"] == 3


def test_an_nvtx_subclass_checks_the_order_through_the_singleton(nvtx):
    _, CheckingNVTX = subclasses()
    wrapper = CheckingNVTX(False, False, True)
    assert nvtx.is_enabled and wrapper.is_enabled
    wrapper.range_push("outer")
    nvtx.range_push("inner")
    with pytest.raises(laptime.UsageError, match="inner"):
        wrapper.range_pop("outer")
    assert wrapper.popped == "outer"
    wrapper.range_pop("inner")
    wrapper.range_pop(range_name="outer")


def run_python(code, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=environment, timeout=120)


# A fresh process: names stay interned for the life of a process, so a limit is tested on a
# process that has interned none yet.
COUNT_NAMES = """
    import laptime
    sw = laptime.Stopwatch()
    sw.enable(0)
    print("limit", laptime.max_names())
    {before}
    for i in range({n}):
        try:
            sw.start_meas(f"name {{i}}")
            sw.end_meas(f"name {{i}}")
        except laptime.UsageError as e:
            print("refused", i, e)
            break
    else:
        print("all measured")
"""


def test_the_name_limit_from_the_environment():
    r = run_python(COUNT_NAMES.format(before="", n=5), LAPTIME_MAX_NAMES="3")
    assert "limit 3" in r.stdout, r.stderr
    assert "refused 3" in r.stdout and "more than 3 distinct measurement names" in r.stdout


def test_a_limit_above_the_capacity_is_clamped_and_a_malformed_one_ignored_with_one_warning():
    capacity = laptime.build_info()["max_names_capacity"]
    r = run_python(COUNT_NAMES.format(before="laptime.set_max_names(10)", n=1),
                   LAPTIME_MAX_NAMES=str(capacity + 1))
    assert f"limit {capacity}" in r.stdout, r.stderr
    assert r.stderr.count("LAPTIME_MAX_NAMES") == 1 and "capacity" in r.stderr
    r = run_python(COUNT_NAMES.format(before="", n=1), LAPTIME_MAX_NAMES="many")
    assert f"limit {capacity}" in r.stdout, r.stderr
    assert r.stderr.count("LAPTIME_MAX_NAMES='many'") == 1


def test_set_max_names_at_run_time_and_the_environment_wins():
    r = run_python(COUNT_NAMES.format(before="print('set', laptime.set_max_names(2))", n=5))
    assert "set 2" in r.stdout and "refused 2" in r.stdout, r.stdout + r.stderr
    r = run_python(COUNT_NAMES.format(before="print('set', laptime.set_max_names(2))", n=5),
                   LAPTIME_MAX_NAMES="4")
    assert "set 4" in r.stdout and "refused 4" in r.stdout, r.stdout + r.stderr
    capacity = laptime.build_info()["max_names_capacity"]
    r = run_python(f"import laptime; print(laptime.set_max_names({capacity} * 2))")
    assert r.stdout.strip() == str(capacity) and "capacity" in r.stderr
    with pytest.raises(ValueError):
        laptime.set_max_names(0)
    with pytest.raises(TypeError):
        laptime.set_max_names("10")
