"""Overhead of laptime's framework integrations per optimisation step, as a ratio to the same
framework's step without them: the tiny models of examples/integrations, on CPU.

    python bench/integrations_bench.py [--steps 60] [--repeats 5] [--frameworks lightning,transformers,mmengine]

Each run trains ``--steps`` steps and a probe (a callback of the framework that takes one
``time.perf_counter()`` per step end, present in both configurations) records the step times; a run's
figure is the median step time after the first ``--skip`` steps. Runs with and without laptime
alternate, ``--repeats`` of each, in one process (laptime stays enabled once a run enabled it: the
configuration without the callback does not call it). Printed: the median over runs of each, and
their ratio. The Stopwatch's own report is not printed (``print_report=False``).
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "integrations"))


def _probe(framework, times):
    """A callback/hook that appends perf_counter() at each step end."""
    if framework == "lightning":
        try:
            import lightning.pytorch as pl
        except ImportError:
            import pytorch_lightning as pl

        class Probe(pl.Callback):
            def on_train_batch_end(self, *args, **kwargs):
                times.append(time.perf_counter())
        return Probe()
    if framework == "transformers":
        from transformers import TrainerCallback

        class Probe(TrainerCallback):
            def on_step_end(self, *args, **kwargs):
                times.append(time.perf_counter())
        return Probe()
    from mmengine.hooks import Hook

    class Probe(Hook):
        priority = "LOWEST"

        def after_train_iter(self, *args, **kwargs):
            times.append(time.perf_counter())
    return Probe()


def one_run(framework, laptime_on, steps, skip):
    import importlib

    example = importlib.import_module(f"{framework}_example")
    times = []
    example.main(steps=steps, warmup=skip, laptime_on=laptime_on, extra=[_probe(framework, times)],
                 print_report=False)
    deltas = [b - a for a, b in zip(times, times[1:])][skip:]
    return statistics.median(deltas)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--skip", type=int, default=10, help="first steps left out (warm-up)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--frameworks", default="lightning,transformers,mmengine")
    a = p.parse_args()
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(f"{'framework':<14}{'without':>12}{'with':>12}{'ratio':>8}   (median step time over "
          f"{a.repeats} runs of {a.steps} steps, first {a.skip} left out)")
    for framework in a.frameworks.split(","):
        runs = {False: [], True: []}
        for _ in range(a.repeats):
            for on in (False, True):
                runs[on].append(one_run(framework, on, a.steps, a.skip))
        off, on = statistics.median(runs[False]), statistics.median(runs[True])
        print(f"{framework:<14}{off * 1e3:>10.3f}ms{on * 1e3:>10.3f}ms{on / off:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
