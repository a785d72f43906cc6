"""The seed's calls keep working after changing only the import (docs/python.md):
whatever the seed accepted, in the spellings it accepted, and silence where it was silent."""

import io
import json
import os
from pathlib import Path

import pytest

import laptime

UNHASHABLE = [["a list"], {"a": "dict"}, {1, 2}]


def names(stopwatch):
    return {m["name"]: m["count"] for m in stopwatch.results()["measurements"]}


def test_not_enabled_every_call_is_a_no_op_whatever_its_argument(stopwatch, nvtx):
    # The seed's "training: everything off" configuration: its methods were empty then.
    for name in ["str", 42, None, 2.5, b"bytes", ("a", 1), Path("x.jpg"), *UNHASHABLE]:
        stopwatch.start_meas(name)
        stopwatch.end_meas(name)
        stopwatch.set_cpu_usage_meas_name(name)
        stopwatch.start_one_time_measurement(name)
        stopwatch.end_one_time_measurement(name)
        nvtx.range_push(name)
        nvtx.range_pop(name)
        nvtx.range_pop()
        with stopwatch.measure(name), nvtx.range(name):
            pass
    stopwatch.finish_iter()
    assert stopwatch.results()["measurements"] == [] and stopwatch.results()["one_time"] == []


def test_not_enabled_set_cpu_usage_meas_name_keeps_nothing(stopwatch):
    # The seed's method was empty before enable: no str() taken, no name kept, none tracked later;
    # laptime's own track_cpu_usage is kept from before enable.
    class NoStr:
        def __str__(self):
            raise RuntimeError("str() called")

    stopwatch.set_cpu_usage_meas_name(NoStr())
    for i in range(5000):  # more distinct names than the table holds (4096)
        stopwatch.set_cpu_usage_meas_name(f"pass {i}")
    stopwatch.set_cpu_usage_meas_name("step")
    stopwatch.track_cpu_usage("load")
    stopwatch.enable(0)
    for name in ("step", "load"):
        stopwatch.start_meas(name)
        stopwatch.end_meas(name)
    stopwatch.finish_iter()
    by_name = {m["name"]: m for m in stopwatch.results()["measurements"]}
    assert sorted(by_name) == ["load", "step"]
    assert "cpu" not in by_name["step"] and "cpu" in by_name["load"]


def test_the_seeds_keyword_spellings(stopwatch, nvtx):
    stopwatch.enable(num_warmup_iters=0, print_every_n_iters=None, do_cuda_sync=False)
    nvtx.enable(sync_on_push=False, sync_on_pop=False, keep_track_of_range_order=True)
    stopwatch.set_cpu_usage_meas_name(name="loop")
    stopwatch.start_meas(name="loop")
    nvtx.range_push(range_name="step")
    nvtx.range_pop(range_name="step")
    nvtx.range_push(range_name="step")
    nvtx.range_pop(expected="step")  # laptime 0.1's spelling stays
    nvtx.range_push(range_name="step")
    nvtx.range_pop(range_name=None)
    stopwatch.end_meas(name="loop")
    stopwatch.start_one_time_measurement(name="setup")
    stopwatch.end_one_time_measurement(name="setup")
    stopwatch.finish_iter()
    r = stopwatch.results()
    assert [(m["name"], m["count"]) for m in r["measurements"]] == [("loop", 1)]
    assert "cpu" in r["measurements"][0]
    assert [o["name"] for o in r["one_time"]] == ["setup"]
    # The seed's constructor forwards its arguments to enable, keywords included.
    assert laptime.Stopwatch(num_warmup_iters=0, print_every_n_iters=None,
                             do_cuda_sync=False) is stopwatch
    with pytest.raises(TypeError, match="name"):
        stopwatch.start_meas(nam="x")
    with pytest.raises(TypeError):
        stopwatch.start_meas()
    with pytest.raises(TypeError):
        stopwatch.start_meas("a", "b")


def test_hashable_names_are_recorded_under_their_str(stopwatch, nvtx):
    stopwatch.enable(0)
    nvtx.enable(False, False, True)
    path = Path("data") / "x.jpg"
    for _ in range(3):
        stopwatch.start_meas(7)
        stopwatch.end_meas(7)
        stopwatch.start_meas(("epoch", 1))
        stopwatch.end_meas(("epoch", 1))  # an equal tuple, another object
        stopwatch.start_meas(path)
        stopwatch.end_meas(Path("data/x.jpg"))
        nvtx.range_push(3)
        nvtx.range_pop(3)
    # 1 == True, as in the seed's dict: one name.
    stopwatch.start_meas(1)
    stopwatch.end_meas(True)
    with stopwatch.measure(2.0):
        pass
    stopwatch.finish_iter()
    assert names(stopwatch) == {"7": 3, "('epoch', 1)": 3, str(path): 3, "1": 1, "2.0": 1}
    # A non-str name and its str are the same name.
    stopwatch.start_meas(7)
    stopwatch.end_meas("7")


def test_unhashable_names_are_a_type_error_when_enabled(stopwatch):
    stopwatch.enable(0)
    for name in UNHASHABLE:
        with pytest.raises(TypeError, match="hashable"):
            stopwatch.start_meas(name)
    stopwatch.start_meas("still works")
    stopwatch.end_meas("still works")


def test_file_names_with_undecodable_bytes_are_recorded(stopwatch, nvtx, capsys):
    # os.fsdecode of a Latin-1 file name: lone surrogates, which have no UTF-8 form.
    name = os.fsdecode(b"caf\xe9.jpg")
    assert name == "caf\udce9.jpg"
    stopwatch.enable(0)
    nvtx.enable(False, False, True)
    for _ in range(2):
        stopwatch.start_meas(name)
        nvtx.range_push(name)
        nvtx.range_pop(name)
        stopwatch.end_meas(name)
    stopwatch.start_meas("\ud800 lone")  # not from surrogateescape: written as \ud800
    stopwatch.end_meas("\ud800 lone")
    stopwatch.finish_iter()
    r = json.loads(stopwatch.to_json())  # valid JSON
    recorded = [m["name"] for m in r["measurements"]]
    assert len(recorded) == 2 and all(m["count"] >= 1 for m in r["measurements"])
    assert recorded[0].startswith("caf") and recorded[0].endswith(".jpg")
    assert recorded[1] == "\\ud800 lone"
    # The report shows the file's byte as `ls -b` does, and is printable on a strict UTF-8 stream.
    stopwatch.print_eval_times()
    assert "caf\\xe9.jpg" in capsys.readouterr().out
    stopwatch.report().encode("utf-8")
    with pytest.raises(laptime.UsageError, match=r"caf\\xe9\.jpg"):
        stopwatch.end_meas(name)


def test_enable_takes_integral_floats_and_bools_as_the_seed_did(stopwatch):
    stopwatch.enable(2.0, 3.0, False)  # numbers from a YAML or JSON config
    for _ in range(5):
        stopwatch.finish_iter()
    assert stopwatch.get_num_nonwarmup_iters_measured() == 3
    stopwatch.enable(2, 3, 0)  # the same settings: no error
    stopwatch.disable()
    stopwatch.reset()  # a new run, a new warm-up (past one that was done, it stays)
    stopwatch.enable(True, None, False)  # True is 1 in the seed's arithmetic
    assert stopwatch.results()["num_warmup_iters"] == 1
    stopwatch.disable()
    with pytest.raises(ValueError, match="whole number"):
        stopwatch.enable(2.5, None, False)
    with pytest.raises(ValueError, match="whole number"):
        stopwatch.enable(0, float("nan"), False)
    with pytest.raises(TypeError, match="int"):
        stopwatch.enable("5", None, False)
    with pytest.raises(OverflowError):
        stopwatch.enable(1e30, None, False)
    assert not stopwatch.is_enabled


class _Float32:
    """A number that is not a float but converts to one, as numpy.float32(5.0) from a config."""

    def __init__(self, value):
        self.value = value

    def __float__(self):
        return self.value


def test_enable_takes_numbers_that_convert_to_an_integral_float(stopwatch):
    stopwatch.enable(_Float32(2.0), _Float32(3.0), False)
    assert stopwatch.results()["num_warmup_iters"] == 2
    stopwatch.disable()
    with pytest.raises(ValueError, match="whole number"):
        stopwatch.enable(_Float32(2.5), None, False)
    assert not stopwatch.is_enabled


def test_print_eval_times_prints_nothing_when_not_enabled(stopwatch, capsys):
    stopwatch.print_eval_times()
    buf = io.StringIO()
    stopwatch.print_eval_times(buf)
    assert capsys.readouterr().out == "" and buf.getvalue() == ""
    # report() returns the report whatever: the empty one's header before enable()
    assert stopwatch.report().startswith("laptime stopwatch: 0 measured iterations")
    stopwatch.enable(0)
    stopwatch.print_eval_times()
    assert "laptime stopwatch:" in capsys.readouterr().out
    # Turned off after measuring: the results are still there to print.
    stopwatch.start_meas("x")
    stopwatch.end_meas("x")
    stopwatch.disable()
    stopwatch.print_eval_times()
    assert "x" in capsys.readouterr().out


def test_seed_tests_patch_the_class_the_instance_takes_no_attributes(stopwatch, nvtx):
    """The seed's instance was a plain object; laptime's has no __dict__ (one would slow every
    method lookup, docs/python.md). Test code patches the class, which works for the
    singleton; an attribute set on the instance is an AttributeError, not silently lost."""
    from unittest import mock

    with mock.patch.object(laptime.Stopwatch, "print_eval_times") as printed:
        laptime.Stopwatch().print_eval_times()
    assert printed.called
    with mock.patch.object(laptime.NVTXRangeWrapper, "range_push") as pushed:
        laptime.NVTXRangeWrapper().range_push("x")
    assert pushed.call_args == mock.call("x")
    with pytest.raises(AttributeError):
        stopwatch.run_tag = "baseline"
