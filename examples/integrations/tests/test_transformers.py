"""laptime.integrations.transformers.LaptimeCallback on a tiny model, CPU, a few steps."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # transformers.Trainer needs it with torch

import laptime
from integ_helpers import (  # noqa: F401
    counts, fresh_laptime, measurement, nvtx_pushes, nvtx_recorder, train_in_process, train_traced)

NAMES = ("training loop", "data fetch", "Training step", "Optimizer step")


def test_gradient_accumulation_2_one_training_step_per_optimisation_step():
    import transformers_example

    transformers_example.main(steps=5, warmup=2, accumulate=2)
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 5 and r["iterations_measured"] == 3
    # The Trainer fetches both batches of a step before on_step_begin: one fetch per step too.
    assert {n: counts(r)[n] for n in NAMES} == {n: 3 for n in NAMES}
    assert not any(m["running"] for m in r["measurements"])


def test_epoch_ends_leave_no_extra_fetch():
    import transformers_example

    # 3 batches per epoch, 7 steps: three epochs, the last one cut short by max_steps.
    transformers_example.main(steps=7, warmup=1, samples=48)
    c = counts(laptime.Stopwatch().results())
    assert {n: c[n] for n in NAMES} == {n: 6 for n in NAMES}


def test_nvtx_ranges_and_environment_warmup(nvtx_recorder):
    results, events, out = train_traced(nvtx_recorder, "transformers_example",
                                        env={"LAPTIME_NVTX": "1", "LAPTIME_WARMUP": "1"},
                                        steps=4, warmup=3)
    assert nvtx_pushes(events) == {n: 4 for n in NAMES}
    assert results["iterations_measured"] == 3  # LAPTIME_WARMUP=1 beat warmup=3
    assert "laptime stopwatch: 3 measured iterations (1 warm-up)" in out


def test_persistent_loader_workers_figures_reach_the_report():
    results, out = train_in_process("transformers_example", steps=4, warmup=0, workers=2,
                                    persistent=True)
    loaded = measurement(results, "load sample")
    assert results["worker_processes"] >= 1, out[-3000:]
    assert loaded is not None and loaded["count"] > 0 and loaded["workers"], out[-3000:]
