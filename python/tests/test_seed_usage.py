"""The seed's Python usage (seeds/001), line by line, with only the import changed."""

import os
import re
import threading
from types import SimpleNamespace

import pytest

import laptime
from laptime import NVTXRangeWrapper, Stopwatch

# The seed's module-level singletons.
stopwatch = Stopwatch()
nvtx_wrp = NVTXRangeWrapper()


def configure(cfg, rank=0):
    """train.py, lines 285-292."""
    runtime_meas_cfg = cfg.get("runtime_meas_config", None)
    if runtime_meas_cfg is not None:
        stopwatch_cfg = runtime_meas_cfg.stopwatch
        nvtx_rng_wrp_cfg = runtime_meas_cfg.nvtx_range_wrapper
        if stopwatch_cfg.enable and rank == 0:
            stopwatch.enable(stopwatch_cfg.num_warmup_iters, stopwatch_cfg.print_every_n_iters,
                             stopwatch_cfg.do_cuda_sync)
        if nvtx_rng_wrp_cfg.enable:
            nvtx_wrp.enable(nvtx_rng_wrp_cfg.sync_on_push, nvtx_rng_wrp_cfg.sync_on_pop,
                            nvtx_rng_wrp_cfg.keep_track_of_range_order)


def config(stopwatch_enable=True, warmup=2, print_every=None, nvtx_enable=True, check=False):
    return {
        "runtime_meas_config": SimpleNamespace(
            stopwatch=SimpleNamespace(enable=stopwatch_enable, num_warmup_iters=warmup,
                                      print_every_n_iters=print_every, do_cuda_sync=False),
            nvtx_range_wrapper=SimpleNamespace(enable=nvtx_enable, sync_on_push=False,
                                               sync_on_pop=False,
                                               keep_track_of_range_order=check),
        )
    }


class Fp16OptimizerHookWithTime:
    """optimizer_with_time.py, lines 153-184 (the loss scaler replaced by a little work)."""

    def after_train_iter(self, runner):
        nvtx_wrp.range_push("optimizer.after_train_iter")
        stopwatch.start_meas("Optimizer step")
        runner.outputs["loss"] = sum(i * i for i in range(2000))
        nvtx_wrp.range_pop()
        stopwatch.end_meas("Optimizer step")


class IterBasedRunnerWithTime:
    """The seed's runner: run() lines 184-225, train() lines 86-124."""

    def __init__(self, max_iters):
        self.iter = 0
        self._max_iters = max_iters
        self.hook = Fp16OptimizerHookWithTime()

    def train(self, data_loader, **kwargs):
        stopwatch.start_meas("IterBasedRunnerWithTime.train")
        self.mode = "train"
        data_batch = next(data_loader)
        stopwatch.start_meas("Training step")
        self.outputs = {"loss": sum(data_batch)}
        stopwatch.end_meas("Training step")
        self.hook.after_train_iter(self)
        self.iter += 1
        stopwatch.end_meas("IterBasedRunnerWithTime.train")

    def run(self, data_loaders, workflow, **kwargs):
        iter_loaders = [iter(x) for x in data_loaders]
        while self.iter < self._max_iters:
            stopwatch.set_cpu_usage_meas_name("training loop")
            for i, flow in enumerate(workflow):
                stopwatch.start_meas("training loop")
                mode, iters = flow
                iter_runner = getattr(self, mode)
                for _ in range(iters):
                    if mode == "train" and self.iter >= self._max_iters:
                        break
                    iter_runner(iter_loaders[i], **kwargs)
                stopwatch.end_meas("training loop")
                stopwatch.finish_iter()


def loader():
    while True:
        yield list(range(100))


def test_runner_loop_and_optimizer_hook_measure_every_name(capsys):
    configure(config(warmup=2))
    assert stopwatch.is_enabled and nvtx_wrp.is_enabled
    IterBasedRunnerWithTime(max_iters=7).run([loader()], [("train", 1)])
    stopwatch.print_eval_times()  # train.py line 526

    assert stopwatch.get_num_nonwarmup_iters_measured() == 5
    r = stopwatch.results()
    names = [m["name"] for m in r["measurements"]]
    assert names == ["training loop", "IterBasedRunnerWithTime.train", "Training step",
                     "Optimizer step"]
    assert all(m["count"] == 5 for m in r["measurements"])
    assert r["iterations_measured"] == 5 and r["num_warmup_iters"] == 2
    by_name = {m["name"]: m for m in r["measurements"]}
    # CPU usage only for the name given to set_cpu_usage_meas_name.
    assert "cpu" in by_name["training loop"] and "io" in by_name["training loop"]
    assert "cpu" not in by_name["Training step"]
    # Nesting: the outer interval contains the inner ones.
    assert by_name["training loop"]["total_s"] >= by_name["IterBasedRunnerWithTime.train"]["total_s"]
    assert (by_name["IterBasedRunnerWithTime.train"]["total_s"]
            >= by_name["Training step"]["total_s"] + by_name["Optimizer step"]["total_s"])

    out = capsys.readouterr().out  # through Python's sys.stdout, so pytest captured it
    assert "5 measured iterations (2 warm-up)" in out
    for name in names:
        assert name in out
    assert "cpu: process tree" in out


def test_evaluation_config_enables_only_the_stopwatch_and_training_config_nothing():
    configure(config(stopwatch_enable=False, nvtx_enable=False))  # training
    assert not stopwatch.is_enabled and not nvtx_wrp.is_enabled
    IterBasedRunnerWithTime(max_iters=3).run([loader()], [("train", 1)])
    assert stopwatch.results()["measurements"] == []

    configure(config(nvtx_enable=False))  # evaluation
    assert stopwatch.is_enabled and not nvtx_wrp.is_enabled


def test_only_rank_0_enables_the_stopwatch():
    configure(config(), rank=1)
    assert not stopwatch.is_enabled
    assert nvtx_wrp.is_enabled


def test_periodic_printing_goes_to_sys_stdout(capsys):
    configure(config(warmup=1, print_every=2))
    IterBasedRunnerWithTime(max_iters=6).run([loader()], [("train", 1)])
    out = capsys.readouterr().out
    # (finished - warmup) % 2 == 0 after iterations 3 and 5, as the seed printed.
    assert re.findall(r"(\d+) measured iterations", out) == ["2", "4"]


def test_range_pop_with_the_expected_name_passes_when_the_order_is_right():
    configure(config(check=True))
    # HungarianAssigner2DBatched, lines 320-324.
    nvtx_wrp.range_push("HungarianAssigner2DBatched.assign")
    nvtx_wrp.range_push("HungarianAssigner2DBatched.match")
    nvtx_wrp.range_pop()
    nvtx_wrp.range_pop("HungarianAssigner2DBatched.assign")
    with pytest.raises(laptime.UsageError):  # the stack is empty now
        nvtx_wrp.range_pop()


def test_range_mismatch_names_expected_actual_thread_and_stack():
    configure(config(check=True))
    nvtx_wrp.range_push("HungarianAssigner2DBatched.assign")
    nvtx_wrp.range_push("cost matrix")
    with pytest.raises(AssertionError) as info:  # what the seed's users catch
        nvtx_wrp.range_pop("HungarianAssigner2DBatched.assign")
    assert isinstance(info.value, laptime.UsageError)
    message = str(info.value)
    assert "expected to close range 'HungarianAssigner2DBatched.assign'" in message
    assert "innermost open range is 'cost matrix'" in message
    assert f"thread {threading.get_native_id()}" in message
    assert "'HungarianAssigner2DBatched.assign' > 'cost matrix'" in message
    # Nothing was popped: the right order still works.
    nvtx_wrp.range_pop("cost matrix")
    nvtx_wrp.range_pop("HungarianAssigner2DBatched.assign")


def test_without_order_tracking_the_expected_name_is_not_checked():
    configure(config(check=False))  # profiling: checks off
    nvtx_wrp.range_push("a")
    nvtx_wrp.range_pop("not a")


def test_profiler_start_stop_are_safe_without_cuda():
    configure(config())
    if nvtx_wrp.is_enabled and os.environ.get("RANK", "0") == "0":
        started = nvtx_wrp.profiler_start()
        stopped = nvtx_wrp.profiler_stop()
    assert started == stopped
    assert isinstance(started, bool)
