"""Stopwatch.discard_meas (docs/python.md): an interval begun for work that never came ends
uncounted; a name not running on this thread is a UsageError; before enable() nothing."""

import pytest

import laptime


def _count(stopwatch, name):
    return next(m["count"] for m in stopwatch.results()["measurements"] if m["name"] == name)


def test_discard_meas_ends_the_interval_uncounted(stopwatch):
    stopwatch.discard_meas("before enable")  # nothing, as the seed's methods before enable
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("fetch")
    stopwatch.end_meas("fetch")
    stopwatch.start_meas("fetch")
    stopwatch.discard_meas(name="fetch")
    stopwatch.finish_iter()  # nothing runs on this thread any more
    assert _count(stopwatch, "fetch") == 1
    with pytest.raises(laptime.UsageError, match="'fetch' is not running on this thread"):
        stopwatch.discard_meas("fetch")
