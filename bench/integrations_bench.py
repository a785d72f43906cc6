"""Overhead of laptime's framework integrations per optimisation step, as a ratio to the same
framework's step without them: the tiny models of examples/integrations, on CPU.

    python bench/integrations_bench.py [--steps 60] [--repeats 5] [--frameworks lightning,transformers,mmengine]

Two figures per framework:

1. The ratio: each run trains ``--steps`` steps and a probe (a callback of the framework that takes
one ``time.perf_counter()`` per step end, present in every configuration) records the step times;
a run's figure is the median step time after the first ``--skip`` steps. Runs without laptime,
with it, and with it but ``track_cpu=False`` ("ratio-cpu") alternate, ``--repeats`` of each, in
one process (laptime reset after each round). Printed: the median over runs of each, and the
ratios to the run without laptime. The Stopwatch's own report is not printed
(``print_report=False``). On a loaded machine step times vary by more than the overhead; the
second figure does not.
2. The hooks' own cost per step: the callback's hooks of one step called directly, ``--calls``
times, with laptime enabled, in microseconds: with the "training loop" CPU sampling (the default,
two /proc reads per step) and without it (``track_cpu=False``); the ratio the first implies is
(step + cost) / step. A last line splits it: the C++ tracked pair alone, and one read of
/proc/stat, two of which are most of that pair (their cost grows with the machine's CPU count).
3. ``laptime.torch.instrument(loader)``'s cost per sample (``--loader-only`` runs this alone): a
sample's timed ``__getitem__`` (the worker's class, laptime enabled, no CPU tracking) against the
plain call; a batch's timed collate and timed ``next()`` against the plain ones, spread over
``--batch-size`` samples; and a whole ``num_workers=0`` loader of trivial samples iterated with and
without ``instrument`` (rounds alternate; the median of the rounds' differences), per sample.
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


def hook_cost(framework, calls, track_cpu=True):
    """Seconds per step of the integration's hooks alone, called as the framework calls them."""
    from types import SimpleNamespace

    if framework == "lightning":
        from laptime.integrations.lightning import LaptimeCallback

        cb = LaptimeCallback(num_warmup_iters=0, print_report=False, track_cpu=track_cpu)
        trainer = SimpleNamespace(should_stop=False, fit_loop=SimpleNamespace(
            epoch_loop=SimpleNamespace(_is_training_done=False)))
        cb.setup(trainer, None, "fit")  # the run: this trainer's fit
        cb.on_train_epoch_start(None, None)

        def step():
            cb.on_train_batch_start(trainer, None, None, 0)
            cb.on_before_optimizer_step(trainer, None, None)
            cb.on_train_batch_end(trainer, None, None, None, 0)
    elif framework == "transformers":
        from transformers import TrainerControl, TrainerState

        from laptime.integrations.transformers import LaptimeCallback

        cb = LaptimeCallback(num_warmup_iters=0, print_report=False, track_cpu=track_cpu)
        state, control = TrainerState(max_steps=10**9, epoch=0.5), TrainerControl()
        cb.on_train_begin(None, state, control)
        cb.on_epoch_begin(None, state, control)

        def step():
            cb.on_step_begin(None, state, control)
            cb.on_pre_optimizer_step(None, state, control)
            cb.on_step_end(None, state, control)
    else:
        from laptime.integrations.mmengine import LaptimeHook

        hook = LaptimeHook(num_warmup_iters=0, print_report=False, track_cpu=track_cpu)
        runner = SimpleNamespace(train_loop=SimpleNamespace(), iter=0, max_iters=10**9)
        hook.meter.start_run(runner)
        hook.before_train_epoch(None)

        def step():
            hook.before_train_iter(runner, 0)
            hook._stepped = True  # what the wrapped optim_wrapper.step does
            hook.meter.optimizer_begin()
            hook.after_train_iter(runner, 0)
    import laptime

    for _ in range(100):
        step()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    cost = (time.perf_counter() - start) / calls
    laptime._laptime._testing_reset()  # the next framework's integration configures afresh
    return cost


def boundary_cost(calls):
    """Seconds of a Stopwatch start_meas/end_meas pair of a CPU-tracked name (two samples of the
    process, docs/resources.md) and of the read that dominates it, one ``pread`` of /proc/stat,
    whose cost grows with the machine's CPU count (the kernel formats every CPU's line)."""
    import laptime

    sw = laptime.Stopwatch()
    sw.enable(0, None, False)
    sw.set_cpu_usage_meas_name("bench tracked pair")
    for _ in range(100):
        sw.start_meas("bench tracked pair")
        sw.end_meas("bench tracked pair")
    start = time.perf_counter()
    for _ in range(calls):
        sw.start_meas("bench tracked pair")
        sw.end_meas("bench tracked pair")
    pair = (time.perf_counter() - start) / calls
    laptime._laptime._testing_reset()
    fd = os.open("/proc/stat", os.O_RDONLY)
    try:
        start = time.perf_counter()
        for _ in range(calls):
            os.pread(fd, 4096, 0)
        stat = (time.perf_counter() - start) / calls
    finally:
        os.close(fd)
    return pair, stat


def _best_of(rounds, calls, func):
    """The least seconds per call of ``func`` (``calls`` calls a round) over ``rounds`` rounds."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        func(calls)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def loader_cost(calls, batch_size, rounds):
    """``laptime.torch.instrument``'s cost, in seconds: (per sample's ``__getitem__``, per
    batch's collate + next(), per sample end to end through a num_workers=0 DataLoader, the
    loader's own time per sample without laptime)."""
    import torch.utils.data as data

    import laptime
    import laptime.torch as lt

    class Trivial(data.Dataset):
        def __len__(self):
            return calls

        def __getitem__(self, i):
            return i

    sw = laptime.Stopwatch()
    sw.enable(0, None, False)
    plain = Trivial()
    timed = Trivial()
    lt._time_dataset_in_worker(timed, lt._Names(lt.DEFAULT_NAMES, True))  # what a worker does

    def getitems(ds):
        def run(n):
            for i in range(n):
                ds[i]
        return run

    sample = (_best_of(rounds, calls, getitems(timed)) -
              _best_of(rounds, calls, getitems(plain)))

    def collate_and_next(collate, wrap):
        def run(n):
            it = wrap(iter(range(n)))
            for _ in range(n):
                collate(next(it))
        return run

    def same(batch):
        return batch

    names = lt._Names(lt.DEFAULT_NAMES, True)
    raw = _best_of(rounds, calls, collate_and_next(same, lambda it: it))
    batch = _best_of(rounds, calls, collate_and_next(lt._TimedCollate(same, names),
                                                     lambda it: lt._WaitTimed(it, names))) - raw

    def epoch(instrumented):
        loader = data.DataLoader(Trivial(), batch_size=batch_size, collate_fn=list)
        if instrumented:
            lt.instrument(loader)
        start = time.perf_counter()
        for _ in loader:
            pass
        return (time.perf_counter() - start) / calls

    epoch(True), epoch(False)
    without, differences = [], []
    for _ in range(rounds):
        off, on = epoch(False), epoch(True)
        without.append(off)
        differences.append(on - off)
    laptime._laptime._testing_reset()
    return sample, batch, statistics.median(differences), statistics.median(without)


def print_loader_cost(calls, batch_size, rounds):
    sample, batch, end_to_end, without = loader_cost(calls, batch_size, rounds)
    print(f"laptime.torch.instrument, CPU tracking off: a sample's __getitem__ +{sample * 1e6:.2f} "
          f"µs; a batch's collate + next() +{batch * 1e6:.2f} µs (+{batch / batch_size * 1e6:.2f} "
          f"µs a sample at batch size {batch_size}); a num_workers=0 loader end to end "
          f"+{end_to_end * 1e6:.2f} µs a sample (its own {without * 1e6:.2f} µs a sample; median "
          f"of {rounds} rounds of {calls} samples)")


def one_run(framework, laptime_on, steps, skip, track_cpu=True):
    import importlib

    example = importlib.import_module(f"{framework}_example")
    times = []
    example.main(steps=steps, warmup=skip, laptime_on=laptime_on, extra=[_probe(framework, times)],
                 print_report=False, track_cpu=track_cpu)
    deltas = [b - a for a, b in zip(times, times[1:])][skip:]
    return statistics.median(deltas)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--skip", type=int, default=10, help="first steps left out (warm-up)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--frameworks", default="lightning,transformers,mmengine")
    p.add_argument("--calls", type=int, default=20000, help="steps of the direct hook benchmark")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (steadier)")
    p.add_argument("--loader-only", action="store_true",
                   help="only laptime.torch.instrument's cost per sample")
    p.add_argument("--batch-size", type=int, default=32, help="of the loader benchmark")
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    if a.loader_only:
        print_loader_cost(a.calls, a.batch_size, a.repeats)
        return
    import laptime
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(f"{'framework':<14}{'without':>12}{'with':>12}{'ratio':>8}{'ratio-cpu':>10}"
          f"{'hooks/step':>13}{'implied':>9}{'no cpu':>12}   (median step time over {a.repeats} "
          f"runs of {a.steps} steps, first "
          f"{a.skip} left out; hooks alone, {a.calls} steps)")
    for framework in a.frameworks.split(","):
        cost = hook_cost(framework, a.calls)
        cost_untracked = hook_cost(framework, a.calls, track_cpu=False)
        runs = {"off": [], "on": [], "no cpu": []}
        for _ in range(a.repeats):
            runs["off"].append(one_run(framework, False, a.steps, a.skip))
            # CPU tracking, once set up for a name, stays: the untracked run first, then a reset.
            runs["no cpu"].append(one_run(framework, True, a.steps, a.skip, track_cpu=False))
            runs["on"].append(one_run(framework, True, a.steps, a.skip))
            laptime._laptime._testing_reset()
        off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
        on_untracked = statistics.median(runs["no cpu"])
        print(f"{framework:<14}{off * 1e3:>10.3f}ms{on * 1e3:>10.3f}ms{on / off:>8.3f}"
              f"{on_untracked / off:>10.3f}{cost * 1e6:>10.1f} µs{(off + cost) / off:>9.3f}"
              f"{cost_untracked * 1e6:>9.1f} µs", flush=True)
    pair, stat = boundary_cost(a.calls)
    print(f"of which: a tracked start_meas/end_meas pair {pair * 1e6:.1f} µs; one /proc/stat read "
          f"{stat * 1e6:.1f} µs (two per pair) on {os.cpu_count()} CPUs")
    print_loader_cost(a.calls, a.batch_size, a.repeats)


if __name__ == "__main__":
    main()
