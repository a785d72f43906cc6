"""What all three integrations share: one callback per training run, the program's own intervals
around it, each fit() a run of its own, and arguments checked in Python. Tiny models, CPU."""

import importlib
import os
import time
import warnings

import pytest

import laptime
from integ_helpers import counts, fresh_laptime, measurement  # noqa: F401

# framework: (its example, the integration's module and class, the example's count of callbacks)
FRAMEWORKS = {
    "lightning": ("lightning_example", "laptime.integrations.lightning", "LaptimeCallback",
                  "laptime_callbacks"),
    "transformers": ("transformers_example", "laptime.integrations.transformers",
                     "LaptimeCallback", "laptime_callbacks"),
    "mmengine": ("mmengine_example", "laptime.integrations.mmengine", "LaptimeHook",
                 "laptime_hooks"),
}
NAMES = ("training loop", "data fetch", "Training step", "Optimizer step")


@pytest.fixture(params=list(FRAMEWORKS))
def framework(request):
    """(the example module, the callback class, the example's keyword for several callbacks)."""
    example, module, cls, copies = FRAMEWORKS[request.param]
    pytest.importorskip("torch")
    try:
        integration = importlib.import_module(module)
        trainer = importlib.import_module(example)
    except ImportError as e:
        pytest.skip(f"{request.param} is not installed: {e}")
    return trainer, getattr(integration, cls), copies


def test_a_second_callback_in_one_run_does_nothing_but_warn_once(framework):
    example, _, copies = framework
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        example.main(steps=3, warmup=0, **{copies: 2})
    ours = [w for w in caught if "second laptime callback" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 3
    assert {n: counts(r)[n] for n in NAMES} == {n: 3 for n in NAMES}


def test_the_programs_own_training_loop_around_fit_holds_the_callbacks(framework):
    example, _, _ = framework
    sw = laptime.Stopwatch()
    sw.enable(0)
    sw.start_meas("training loop")
    example.main(steps=3, warmup=0)
    sw.end_meas("training loop")
    r = sw.results()
    c = counts(r)
    # The program's interval around fit(), the callback's per step under its own name inside it.
    assert c["training loop"] == 1 and c["training loop (callback)"] == 3
    assert c["Training step"] == 3 and r["iterations_measured"] == 3
    outer = measurement(r, "training loop")["total_s"]
    assert outer > measurement(r, "training loop (callback)")["total_s"]
    assert not any(m["running"] for m in r["measurements"])


def test_each_fit_is_a_run_of_its_own(framework):
    example, _, _ = framework
    example.main(steps=4, warmup=2)
    time.sleep(0.5)  # the gap between two fits: never an iteration
    example.main(steps=5, warmup=2)
    r = laptime.Stopwatch().results()
    assert r["iterations_finished"] == 5 and r["iterations_measured"] == 3  # warm-up honoured
    assert {n: counts(r)[n] for n in NAMES} == {n: 3 for n in NAMES}
    assert measurement(r, "training loop")["max_s"] < 0.5
    # The loop time behind the verdict covers the second fit's steps only.
    assert r["loop"]["count"] == 3 and r["loop"]["max_s"] < 0.5


@pytest.mark.parametrize("kwargs, error, shown", [
    (dict(num_warmup_iters="ten"), TypeError, "'ten'"),
    (dict(num_warmup_iters=2.5), ValueError, "2.5"),
    (dict(num_warmup_iters=-1), ValueError, "-1"),
    (dict(num_warmup_iters=True), TypeError, "True"),
    (dict(print_every_n_iters=-3), ValueError, "-3"),
    (dict(print_every_n_iters="5"), TypeError, "'5'"),
    (dict(do_cuda_sync="no"), TypeError, "'no'"),
    (dict(nvtx=2), TypeError, "2"),
    (dict(print_report=None), TypeError, "None"),
    (dict(track_cpu="yes"), TypeError, "'yes'"),
])
def test_a_wrong_argument_raises_naming_it_and_its_value(framework, kwargs, error, shown):
    _, callback, _ = framework
    (argument,) = kwargs
    with pytest.raises(error) as e:
        callback(**kwargs)
    assert argument in str(e.value) and shown in str(e.value)
    assert "LAPTIME_" not in str(e.value)
    assert not laptime.Stopwatch().is_enabled


def test_integral_floats_are_counts(framework):
    example, callback, _ = framework
    callback(num_warmup_iters=5.0, print_every_n_iters=0.0)  # as configuration files give numbers


def test_a_malformed_variable_falls_back_to_the_codes_value(framework, monkeypatch, capfd):
    example, _, _ = framework
    monkeypatch.setenv("LAPTIME_WARMUP", "abc")  # the user's mistake: warned about once, ignored
    example.main(steps=4, warmup=1)
    assert laptime.Stopwatch().results()["iterations_measured"] == 3  # the code's 1, not 10
    err = capfd.readouterr().err
    # Variables the user never set are never named.
    assert "LAPTIME_PRINT_EVERY" not in err and "LAPTIME_STOPWATCH" not in err


def test_the_arguments_never_pass_through_os_environ(framework, monkeypatch):
    example, _, _ = framework
    seen = []
    real_setitem = type(os.environ).__setitem__

    before = dict(os.environ)

    def spy(self, key, value):
        # A LAPTIME_ variable given a value it did not have when the run started: accelerate
        # clears the environment and writes it back as it was, the test runner's variables too.
        if self is os.environ and key.startswith("LAPTIME_") and before.get(key) != value:
            seen.append(key)
        return real_setitem(self, key, value)

    monkeypatch.setattr(type(os.environ), "__setitem__", spy)
    example.main(steps=2, warmup=1, nvtx=True)
    assert seen == [] and laptime.Stopwatch().is_enabled and laptime.NVTXRangeWrapper().is_enabled
