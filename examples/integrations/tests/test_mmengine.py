"""laptime.integrations.mmengine.LaptimeHook on a tiny model, CPU, a few iterations."""

import pytest

pytest.importorskip("torch")
try:
    import mmengine.runner  # noqa: F401
except Exception as e:  # mmengine lags torch at times: say why rather than fail to collect
    pytest.skip(f"mmengine cannot be imported with this torch: {e!r}", allow_module_level=True)

import laptime
from integ_helpers import (  # noqa: F401
    counts, fresh_laptime, measurement, nvtx_pushes, nvtx_recorder, train_in_process, train_traced)

NAMES = ("training loop", "data fetch", "Training step", "Optimizer step")


def test_config_names_the_hook_and_counts_one_step_per_iteration():
    from mmengine.registry import HOOKS

    import laptime.integrations.mmengine
    import mmengine_example

    assert HOOKS.get("LaptimeHook") is laptime.integrations.mmengine.LaptimeHook
    mmengine_example.main(steps=5, warmup=2)
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 5 and r["iterations_measured"] == 3
    assert {n: counts(r)[n] for n in NAMES} == {n: 3 for n in NAMES}
    assert not any(m["running"] for m in r["measurements"])


def test_accumulative_counts_one_iteration_per_optimizer_step():
    import mmengine_example

    mmengine_example.main(steps=3, warmup=1, accumulate=2)
    r = laptime.Stopwatch().results()
    c = counts(r)
    assert r["iterations_measured"] == 2
    assert (c["training loop"], c["Optimizer step"], c["data fetch"], c["Training step"]) == (2, 2, 4, 4)


def test_the_optimizer_step_is_unwrapped_after_training():
    import mmengine_example

    runner = mmengine_example.main(steps=2, warmup=0)
    assert "step" not in vars(runner.optim_wrapper)


def test_nvtx_ranges_of_the_same_names(nvtx_recorder):
    results, events, out = train_traced(nvtx_recorder, "mmengine_example",
                                        env={"LAPTIME_PROFILE": "debugging"}, steps=4, warmup=1)
    assert nvtx_pushes(events) == {n: 4 for n in NAMES}
    assert results["iterations_measured"] == 3


@pytest.mark.parametrize("by_epoch", [False, True], ids=["iteration-based", "epoch-based"])
def test_loader_workers_figures_reach_the_report_with_either_loop(by_epoch):
    # The iteration-based loop starts its DataLoader's workers when runner.train() builds it,
    # before any hook runs: the hook enables laptime when it is built, in Runner(...).
    results, out = train_in_process("mmengine_example", steps=4, warmup=0, workers=2,
                                    by_epoch=by_epoch)
    loaded = measurement(results, "load sample")
    assert results["worker_processes"] >= 1, out[-3000:]
    assert loaded is not None and loaded["count"] > 0 and loaded["workers"], out[-3000:]


def test_a_failed_train_leaves_nothing_wrapped_or_running_and_may_run_again():
    from mmengine.hooks import Hook
    from mmengine.registry import HOOKS

    import mmengine_example

    @HOOKS.register_module(force=True)
    class FailOnce(Hook):
        runner = None

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            if FailOnce.runner is None and runner.iter == 1:
                FailOnce.runner = runner
                raise RuntimeError("a failing step")

    with pytest.raises(RuntimeError, match="a failing step"):
        mmengine_example.main(steps=4, warmup=0, extra=[dict(type="FailOnce")])
    runner = FailOnce.runner
    assert "step" not in vars(runner.optim_wrapper)
    assert not any(m["running"] for m in laptime.Stopwatch().results()["measurements"])
    runner.train()  # again, on the same runner: measured as a run of its own
    assert "step" not in vars(runner.optim_wrapper)
    r = laptime.Stopwatch().results()
    assert not any(m["running"] for m in r["measurements"]) and r["iterations_finished"] > 0
