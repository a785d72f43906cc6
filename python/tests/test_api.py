"""The rest of the Python API: singletons, context managers and decorators, results, reset,
configuration from the environment, GPU timing arguments, printing."""

import ast
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import laptime
from laptime import NVTXRangeWrapper, Stopwatch


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=120)


def test_constructors_return_the_singletons_and_enable_with_arguments():
    assert Stopwatch() is Stopwatch() and NVTXRangeWrapper() is NVTXRangeWrapper()
    assert not Stopwatch().is_enabled
    sw = Stopwatch(3, print_every_n_iters=None, do_cuda_sync=False)
    assert sw is Stopwatch() and sw.is_enabled
    assert "enabled" in repr(sw)
    nvtx = NVTXRangeWrapper(sync_on_push=False, sync_on_pop=False, keep_track_of_range_order=True)
    assert nvtx.is_enabled
    assert isinstance(sw, Stopwatch) and type(sw).__module__ == "laptime"


def test_is_enabled_is_a_read_only_property(stopwatch, nvtx):
    assert stopwatch.is_enabled is False and nvtx.is_enabled is False
    with pytest.raises(AttributeError):
        stopwatch.is_enabled = True


def test_calls_before_enable_record_nothing(stopwatch, nvtx):
    stopwatch.start_meas("x")
    stopwatch.end_meas("never started either")
    stopwatch.finish_iter()
    nvtx.range_pop("nothing open")
    with stopwatch.measure("y"), nvtx.range("z"):
        pass
    assert stopwatch.results()["measurements"] == []
    assert stopwatch.get_num_nonwarmup_iters_measured() == 0


def test_measure_as_context_manager_ends_on_exceptions(stopwatch):
    stopwatch.enable(0)
    with stopwatch.measure("block"):
        pass
    with pytest.raises(KeyError):
        with stopwatch.measure("block"):
            raise KeyError("inside")
    m = stopwatch.results()["measurements"][0]
    assert m["name"] == "block" and m["count"] == 2 and not m["running"]


def test_measure_entered_before_enable_ends_nothing(stopwatch):
    with stopwatch.measure("whole run"):
        stopwatch.enable(0)  # enabled inside the block: no error at its end
    assert stopwatch.results()["measurements"] == []


def test_measure_and_range_as_decorators(stopwatch, nvtx):
    stopwatch.enable(0)
    nvtx.enable(False, False, True)

    @stopwatch.measure("decorated")
    @nvtx.range("decorated range")
    def work(x, *, scale=2):
        """Doc."""
        nvtx.range_push("inside")
        nvtx.range_pop("inside")
        return x * scale

    assert work.__name__ == "work" and work.__doc__ == "Doc." and work.__wrapped__ is not None
    assert work(3) == 6 and work(1, scale=5) == 5
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stopwatch.results()["measurements"][0]["count"] == 6
    nvtx.range_push("still balanced")
    nvtx.range_pop("still balanced")


def test_scope_objects_describe_themselves(stopwatch, nvtx):
    m = stopwatch.measure("x")
    r = nvtx.range("y")
    assert (m.name, m.kind) == ("x", "measure") and (r.name, r.kind) == ("y", "range")
    assert "measure 'x'" in repr(m) and "nvtx range 'y'" in repr(r)


def test_range_context_manager_checks_its_own_pop(nvtx):
    nvtx.enable(False, False, True)
    with pytest.raises(laptime.UsageError, match="innermost open range is 'left open'"):
        with nvtx.range("outer"):
            nvtx.range_push("left open")
    nvtx.range_pop("left open")
    nvtx.range_pop("outer")


def test_range_pop_accepts_expected_by_keyword_and_none(nvtx):
    nvtx.enable(False, False, True)
    nvtx.range_push("a")
    nvtx.range_pop(expected="a")
    nvtx.range_push("b")
    nvtx.range_pop(None)
    with pytest.raises(TypeError):
        nvtx.range_pop("a", "b")
    with pytest.raises(TypeError):
        nvtx.range_pop(name="a")


def test_results_mirror_the_json_schema(stopwatch):
    stopwatch.enable(1)
    stopwatch.track_cpu_usage("tracked")
    stopwatch.start_one_time_measurement("pipe_create")
    stopwatch.end_one_time_measurement("pipe_create")
    for _ in range(3):
        for name in ("tracked", "plain"):
            stopwatch.start_meas(name)
            stopwatch.end_meas(name)
        stopwatch.finish_iter()
    r = stopwatch.results()
    assert r == json.loads(stopwatch.to_json())
    for key in ("schema", "rank", "world_size", "pid", "host", "num_warmup_iters",
                "iterations_measured", "measurements", "one_time"):
        assert key in r
    assert r["schema"] == 1 and r["pid"] == os.getpid() and r["iterations_measured"] == 2
    tracked, plain = r["measurements"]
    for key in ("name", "count", "total_s", "mean_per_iter_s", "mean_per_interval_s", "min_s",
                "median_s", "p90_s", "p99_s", "max_s", "running"):
        assert key in tracked and key in plain
    assert set(tracked["cpu"]) >= {"process_percent", "process_cores", "system_percent"}
    assert set(tracked["io"]) >= {"read_mb_per_s", "write_mb_per_s"}
    assert "cpu" not in plain
    assert r["one_time"][0]["name"] == "pipe_create" and r["one_time"][0]["duration_s"] >= 0


def test_names_seen_only_in_warmup_are_reported_without_division_by_zero(stopwatch):
    stopwatch.enable(5)
    stopwatch.start_meas("warm-up only")
    stopwatch.end_meas("warm-up only")
    stopwatch.finish_iter()
    m = stopwatch.results()["measurements"][0]
    assert m["count"] == 0 and m["mean_per_interval_s"] is None
    assert "no measurement after warm-up" in stopwatch.report()


def test_reset_drops_results_and_keeps_configuration(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("x")
    stopwatch.end_meas("x")
    stopwatch.finish_iter()
    stopwatch.reset()
    assert stopwatch.is_enabled and stopwatch.get_num_nonwarmup_iters_measured() == 0
    assert stopwatch.results()["measurements"] == []


def test_disable_then_enable_with_other_arguments(stopwatch):
    stopwatch.enable(1)
    stopwatch.disable()
    assert not stopwatch.is_enabled
    stopwatch.enable(2)
    assert stopwatch.results()["num_warmup_iters"] == 2


def test_non_ascii_names_round_trip(stopwatch, nvtx):
    stopwatch.enable(0)
    nvtx.enable(False, False, True)
    for name in ("données", "步骤", "emoji 🚀"):
        stopwatch.start_meas(name)
        nvtx.range_push(name)
        nvtx.range_pop(name)
        stopwatch.end_meas(name)
    assert [m["name"] for m in stopwatch.results()["measurements"]] == ["données", "步骤",
                                                                       "emoji 🚀"]


def test_dynamic_names_are_measured_by_content(stopwatch):
    stopwatch.enable(0)
    for i in range(50):
        name = "".join(["batch ", str(i % 2)])  # a new str object each time
        stopwatch.start_meas(name)
        stopwatch.end_meas("".join(["batch ", str(i % 2)]))
    assert {m["name"]: m["count"] for m in stopwatch.results()["measurements"]} == {
        "batch 0": 25, "batch 1": 25}


def test_print_eval_times_to_a_file(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("x")
    stopwatch.end_meas("x")
    buf = io.StringIO()
    stopwatch.print_eval_times(buf)
    stopwatch.print_eval_times(file=buf)
    assert buf.getvalue().count("laptime stopwatch:") == 2


def test_configure_from_env(monkeypatch, stopwatch, nvtx):
    monkeypatch.setenv("LAPTIME_PROFILE", "debugging")
    monkeypatch.setenv("LAPTIME_WARMUP", "3")
    monkeypatch.setenv("LAPTIME_TRACK_CPU", "training loop,loader")
    monkeypatch.setenv("LAPTIME_PRINT_EVERY", "not a number")
    applied = laptime.configure_from_env()
    assert applied["stopwatch"] and applied["nvtx"] and applied["nvtx_check_order"]
    assert applied["num_warmup_iters"] == 3 and applied["print_every_n_iters"] is None
    assert applied["track_cpu"] == ["training loop", "loader"]
    assert any("LAPTIME_PRINT_EVERY" in w for w in applied["warnings"])
    assert stopwatch.is_enabled and nvtx.is_enabled
    nvtx.range_push("a")
    with pytest.raises(laptime.UsageError):  # order checks are on
        nvtx.range_pop("b")


def test_configure_from_env_without_variables_does_nothing(monkeypatch, stopwatch, nvtx):
    for name in list(os.environ):
        if name.startswith("LAPTIME_") and not name.startswith("LAPTIME_SINGLETON_"):
            monkeypatch.delenv(name)
    applied = laptime.configure_from_env()
    assert not applied["stopwatch"] and not applied["nvtx"]
    assert not stopwatch.is_enabled and not nvtx.is_enabled


def test_configure_from_env_returns_every_setting_it_applies(monkeypatch):
    # Each variable of docs/configuration.md's table that configure_from_env() reads shows in the
    # dict: LAPTIME_PROFILE=profiling turns on the ranges and counters, which it must show.
    monkeypatch.setenv("LAPTIME_PROFILE", "profiling")
    monkeypatch.setenv("LAPTIME_DATA_NAME", "data wait")
    monkeypatch.setenv("LAPTIME_PROGRESS", "off")
    monkeypatch.setenv("LAPTIME_GPU_TIMING", "forward,backward")
    applied = laptime.configure_from_env()
    assert applied["nvtx_ranges"] and applied["nvtx_counters"]
    assert applied["nvtx_counters_hz"] == 10.0
    assert applied["data_name"] == "data wait" and applied["progress"] == "off"
    assert applied["gpu_timing_names"] == ["forward", "backward"]


class FakeTorchStream:
    """What laptime reads from a torch.cuda.Stream: its int handle."""

    cuda_stream = 0


def test_gpu_timing_accepts_torch_like_streams_ints_and_none(stopwatch):
    stopwatch.enable_gpu_timing(FakeTorchStream())
    stopwatch.enable_gpu_timing(stream=0)
    stopwatch.set_gpu_stream(None)
    stopwatch.enable_gpu_timing()
    with pytest.raises(TypeError, match="cuda_stream"):
        stopwatch.enable_gpu_timing("default")
    with pytest.raises(TypeError):
        stopwatch.enable_gpu_timing(0, 1)
    stopwatch.disable_gpu_timing()


def test_gpu_timing_without_a_gpu_keeps_host_timing(stopwatch):
    if laptime.cuda_status().startswith("CUDA driver"):
        pytest.skip("a CUDA driver is present: tests/test_gpu.py covers GPU timing")
    stopwatch.enable(0, None, True)  # do_cuda_sync without a driver: warns once, keeps timing
    stopwatch.enable_gpu_timing()
    stopwatch.start_meas("x")
    stopwatch.end_meas("x")
    stopwatch.wait_for_gpu_timings()
    assert stopwatch.results()["measurements"][0]["count"] == 1


def test_laptime_does_not_import_torch():
    r = run_python("import sys, laptime; laptime.Stopwatch(0).enable_gpu_timing(); "
                   "print('torch' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_exit_after_periodic_printing_is_clean():
    code = ("import laptime, threading\n"
            "sw = laptime.Stopwatch(0, 1)\n"
            "def loop():\n"
            "    for _ in range(3):\n"
            "        sw.start_meas('t'); sw.end_meas('t'); sw.finish_iter()\n"
            "t = threading.Thread(target=loop); t.start(); t.join()\n")
    r = run_python(code, LAPTIME_PRINT_AT_EXIT="1")
    assert r.returncode == 0, r.stderr
    # Three periodic reports through sys.stdout, then laptime's at-exit report, written to the C
    # stdout after the interpreter let go of it.
    assert r.stdout.count("laptime stopwatch:") == 4


def test_the_stubs_cover_the_public_api():
    stubs = Path(laptime.__file__).with_name("_laptime.pyi")
    assert stubs.exists() and stubs.with_name("py.typed").exists()
    tree = ast.parse(stubs.read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for cls in (Stopwatch, NVTXRangeWrapper):
        declared = {n.name for n in classes[cls.__name__].body
                    if isinstance(n, ast.FunctionDef)}
        public = {a for a in dir(cls) if not a.startswith("_")}
        assert public <= declared, public - declared
    assert {"set_error_policy", "error_policy", "configure_from_env", "cuda_status"} <= functions
    assert "UsageError" in classes


def test_the_extension_exports_only_its_init_function():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("needs nm (binutils)")
    so = laptime._laptime.__file__
    out = subprocess.run([nm, "-D", "--defined-only", so], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    exported = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
    assert exported == ["PyInit__laptime"]


def test_pytorch_imports_after_laptime():
    pytest.importorskip("torch", reason="needs PyTorch")
    r = run_python("import laptime, torch; laptime.Stopwatch(0).start_meas('x'); print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
