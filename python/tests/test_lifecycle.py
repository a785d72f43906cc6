"""An interval's life, from Python (docs/stopwatch.md): the enable/reset period it belongs to, and the end
of an interval on another thread than its start (the seed allowed a start in one callback and the
end in another)."""

import threading
import time

import pytest

import laptime


def count(stopwatch, name):
    for m in stopwatch.results()["measurements"]:
        if m["name"] == name:
            return m["count"]
    return 0


def test_an_interval_started_before_reset_is_not_counted_after_it(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("step")
    stopwatch.reset()
    stopwatch.end_meas("step")  # dropped, no error
    assert count(stopwatch, "step") == 0
    stopwatch.start_meas("step")
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    assert count(stopwatch, "step") == 1


def test_disable_then_enable_leaves_nothing_running(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("step")
    stopwatch.disable()
    stopwatch.end_meas("step")  # not enabled: a no-op that leaves nothing behind
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("step")  # no false "already running"
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    assert count(stopwatch, "step") == 1


def test_a_one_time_measurement_ended_while_disabled_is_counted(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_one_time_measurement("setup")
    stopwatch.disable()
    stopwatch.end_one_time_measurement("setup")
    (setup,) = stopwatch.results()["one_time"]
    assert setup["name"] == "setup" and not setup.get("running", False)
    assert setup["duration_s"] is not None


def test_end_meas_on_another_thread_ends_the_interval_started_there(stopwatch):
    stopwatch.enable(0, None, False)
    started = threading.Event()
    ended = threading.Event()
    errors = []

    def callback_thread():
        stopwatch.start_meas("hook")  # a start in one callback ...
        started.set()
        ended.wait()
        try:
            stopwatch.finish_iter()  # nothing of this thread's runs any more
        except laptime.UsageError as e:
            errors.append(e)

    t = threading.Thread(target=callback_thread)
    t.start()
    started.wait()
    time.sleep(0.01)
    stopwatch.end_meas("hook")  # ... the end in another
    ended.set()
    t.join()
    assert errors == []
    m = next(m for m in stopwatch.results()["measurements"] if m["name"] == "hook")
    assert m["count"] == 1
    assert m["min_s"] >= 0.008
    with pytest.raises(laptime.UsageError, match="is not running"):
        stopwatch.end_meas("hook")


def test_set_rank_labels_the_results(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.set_rank(2, world_size=4)
    r = stopwatch.results()
    assert (r["rank"], r["world_size"]) == (2, 4)
    with pytest.raises(laptime.UsageError):
        stopwatch.set_rank(-1)


def test_gpu_timing_of_selected_names_only(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.enable_gpu_timing_for("forward")
    for name in ("forward", "data fetch"):
        stopwatch.start_meas(name)
        stopwatch.end_meas(name)
    stopwatch.finish_iter()
    by_name = {m["name"]: m for m in stopwatch.results()["measurements"]}
    assert "gpu" in by_name["forward"]
    assert by_name["data fetch"].get("gpu") is None
    stopwatch.disable_gpu_timing()


def test_messages_say_none_in_python(stopwatch):
    with pytest.raises(laptime.UsageError, match="None"):
        stopwatch.enable(0, -1)
