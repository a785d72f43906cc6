"""Misuse raises laptime.UsageError (an AssertionError) naming the call, the name and the thread,
and leaves the singletons working: no misuse corrupts state."""

import os
import subprocess
import time
import sys
import threading

import pytest

import laptime


def thread_tag():
    return f"thread {threading.get_native_id()}"


def raises_usage(fn, *args):
    with pytest.raises(laptime.UsageError) as info:
        fn(*args)
    message = str(info.value)
    assert message.startswith("laptime: ")
    assert thread_tag() in message
    return message


def test_usage_error_is_an_assertion_error():
    assert issubclass(laptime.UsageError, AssertionError)
    assert laptime.UsageError.__module__ == "laptime"


def test_end_meas_of_a_name_never_started(stopwatch):
    stopwatch.enable(0)
    message = raises_usage(stopwatch.end_meas, "data fetch")
    assert "end_meas('data fetch')" in message and "is not running" in message


def test_start_meas_twice_on_one_thread(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("step")
    message = raises_usage(stopwatch.start_meas, "step")
    assert "start_meas('step')" in message and "already running" in message
    stopwatch.end_meas("step")  # the first one still runs and ends normally
    assert stopwatch.results()["measurements"][0]["count"] == 1


def test_finish_iter_with_a_measurement_running_on_this_thread(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("step")
    message = raises_usage(stopwatch.finish_iter)
    assert "finish_iter()" in message and "'step'" in message
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    assert stopwatch.get_num_nonwarmup_iters_measured() == 1


@pytest.mark.parametrize("misuse", ["end_meas", "start_meas", "finish_iter", "one_time"])
def test_misuse_raises_during_warm_up_too(stopwatch, misuse):
    stopwatch.enable(5)  # every call below happens in the first (warm-up) iteration
    if misuse == "end_meas":
        raises_usage(stopwatch.end_meas, "never started")
    elif misuse == "start_meas":
        stopwatch.start_meas("step")
        raises_usage(stopwatch.start_meas, "step")
    elif misuse == "finish_iter":
        stopwatch.start_meas("step")
        raises_usage(stopwatch.finish_iter)
    else:
        stopwatch.start_one_time_measurement("build")
        raises_usage(stopwatch.start_one_time_measurement, "build")
    assert stopwatch.results()["iterations_finished"] == 0


def test_enable_again_with_other_arguments(stopwatch):
    stopwatch.enable(5, 10, False)
    stopwatch.enable(5, 10, False)  # same arguments: nothing happens
    message = raises_usage(stopwatch.enable, 6)
    assert "already enabled" in message and "num_warmup_iters=5" in message


def test_a_negative_print_every_is_an_error_that_names_none(stopwatch):
    message = raises_usage(stopwatch.enable, 1, -3)
    assert "print_every_n_iters" in message
    assert not stopwatch.is_enabled


def test_print_every_zero_means_never(stopwatch, capsys):
    stopwatch.enable(0, 0)
    assert stopwatch.is_enabled
    stopwatch.enable(0, None)  # the same setting
    for _ in range(3):
        stopwatch.finish_iter()
    assert capsys.readouterr().out == ""


def test_one_time_measurement_names_are_used_once(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_one_time_measurement("pipe_create")
    stopwatch.end_one_time_measurement("pipe_create")
    message = raises_usage(stopwatch.start_one_time_measurement, "pipe_create")
    assert "'pipe_create'" in message and "already measured" in message
    raises_usage(stopwatch.end_one_time_measurement, "never")


def test_nvtx_enable_again_with_other_arguments(nvtx):
    nvtx.enable(False, False, True)
    message = raises_usage(nvtx.enable, False, False, False)
    assert "already enabled" in message


def test_range_pop_on_an_empty_stack(nvtx):
    nvtx.enable(False, False, True)
    message = raises_usage(nvtx.range_pop, "loss")
    assert "'loss'" in message and "no open range" in message


def test_an_unhashable_name_is_a_type_error_when_enabled(stopwatch, nvtx):
    # Not enabled, any name is accepted (test_dropin.py); enabled, a name is a str or hashable,
    # as the seed's dict of names required.
    stopwatch.enable(0)
    nvtx.enable(False, False, True)
    for call in (stopwatch.start_meas, stopwatch.end_meas, nvtx.range_push, nvtx.range_pop,
                 stopwatch.set_cpu_usage_meas_name):
        with pytest.raises(TypeError, match="hashable"):
            call([42])


def test_warn_policy_prints_one_line_and_carries_on(stopwatch, capfd):
    laptime.set_error_policy("warn")
    assert laptime.error_policy() == "warn"
    stopwatch.enable(0)
    stopwatch.end_meas("never started")  # no exception
    err = capfd.readouterr().err
    assert "end_meas('never started')" in err and thread_tag() in err
    stopwatch.start_meas("ok")
    stopwatch.end_meas("ok")
    assert stopwatch.results()["measurements"][-1]["count"] == 1


def test_warn_policy_a_nested_block_of_a_running_name_leaves_the_outer_one_whole(stopwatch,
                                                                                  capfd):
    # recursion, or two generators suspended inside one name: the inner block is warned about
    # and ends nothing; the outer block is measured whole
    laptime.set_error_policy("warn")
    stopwatch.enable(0)

    @stopwatch.measure("rec")
    def rec(n):
        if n:
            rec(n - 1)
        time.sleep(0.01)

    rec(2)
    with stopwatch.measure("nested"):
        with stopwatch.measure("nested"):
            time.sleep(0.01)
        time.sleep(0.02)
    assert "already running" in capfd.readouterr().err
    laptime.set_error_policy("throw")
    stopwatch.finish_iter()  # nothing left running
    m = {x["name"]: x for x in stopwatch.results()["measurements"]}
    assert m["rec"]["count"] == 1 and m["rec"]["max_s"] >= 0.03
    assert m["nested"]["count"] == 1 and m["nested"]["max_s"] >= 0.03


def test_warn_policy_a_held_scope_reentered_ends_only_what_it_started(stopwatch, capfd):
    # `timer = sw.measure(name)` kept and re-entered: one object, several blocks
    laptime.set_error_policy("warn")
    stopwatch.enable(0)
    timer = stopwatch.measure("held")

    def rec(n):
        with timer:
            if n:
                rec(n - 1)
            time.sleep(0.01)

    rec(2)
    a, b = stopwatch.measure("pair"), stopwatch.measure("pair")
    with a:
        with b:
            time.sleep(0.01)
        time.sleep(0.02)
    capfd.readouterr()
    laptime.set_error_policy("throw")
    stopwatch.finish_iter()  # nothing left running
    m = {x["name"]: x for x in stopwatch.results()["measurements"]}
    assert m["held"]["count"] == 1 and m["held"]["max_s"] >= 0.03
    assert m["pair"]["count"] == 1 and m["pair"]["max_s"] >= 0.03


def test_warn_policy_overlapping_tasks_or_generators_calling_measure_each_end_their_own(
        stopwatch, capfd):
    # Two blocks of one name overlap on one thread; the second is refused. With measure(name)
    # called in each block (not one scope object held by both: a known limit), the first block's
    # exit ends the first block, whichever of the two ends first.
    import asyncio
    laptime.set_error_policy("warn")
    stopwatch.enable(0)

    def running(name):
        return [m["running"] for m in stopwatch.results()["measurements"] if m["name"] == name]

    seen = []

    async def first(entered, leave):
        with stopwatch.measure("task"):
            entered.set()
            await leave.wait()
        seen.append(running("task"))  # the first block ended here

    async def second(entered, leave):
        await entered.wait()
        with stopwatch.measure("task"):  # refused: "task" runs
            leave.set()
            await asyncio.sleep(0.01)
        seen.append(running("task"))

    async def main():
        entered, leave = asyncio.Event(), asyncio.Event()
        await asyncio.gather(first(entered, leave), second(entered, leave))

    asyncio.run(main())
    assert seen == [[False], [False]]

    def gen():
        with stopwatch.measure("gen"):
            yield

    g1, g2 = gen(), gen()
    next(g1)
    next(g2)  # refused
    g1.close()
    assert running("gen") == [False]
    g2.close()
    capfd.readouterr()
    laptime.set_error_policy("throw")
    m = {x["name"]: x for x in stopwatch.results()["measurements"]}
    assert m["task"]["count"] == 1 and m["gen"]["count"] == 1


def test_warn_policy_a_held_scope_refused_through_exit_stack_leaves_the_outer_block_whole(
        stopwatch, capfd):
    # The refused inner block is entered and exited from other frames than the outer one's
    # (ExitStack, a class forwarding to the scope): its exit ends nothing.
    import contextlib
    laptime.set_error_policy("warn")
    stopwatch.enable(0)
    timer = stopwatch.measure("stacked")
    with timer:
        with contextlib.ExitStack() as stack:
            stack.enter_context(timer)  # refused: "stacked" runs
        time.sleep(0.02)
    capfd.readouterr()
    laptime.set_error_policy("throw")
    m = {x["name"]: x for x in stopwatch.results()["measurements"]}
    assert m["stacked"]["count"] == 1 and m["stacked"]["max_s"] >= 0.02


def test_unknown_policy_is_a_value_error():
    with pytest.raises(ValueError, match="throw"):
        laptime.set_error_policy("ignore")
    assert laptime.error_policy() == "throw"


def test_abort_policy_aborts_the_process():
    code = ("import laptime; laptime.set_error_policy('abort'); sw = laptime.Stopwatch(0); "
            "sw.end_meas('x')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert "aborting" in result.stderr and "end_meas('x')" in result.stderr


def test_the_error_policy_comes_from_the_environment():
    code = "import laptime; print(laptime.error_policy())"
    env = dict(os.environ, LAPTIME_ON_ERROR="warn")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "warn"


def test_nested_ranges_of_one_name_keep_the_cached_scope_no_new_object(nvtx):
    # ranges of one name nest legitimately (a recursive @nvtx.range function): no scope object is
    # made per level; only a measurement's nested start, an error, takes a fresh one
    nvtx.enable(False, False, True)
    outer = nvtx.range("level")
    with outer:
        assert nvtx.range("level") is outer
        with nvtx.range("level"):
            pass
