"""One-line integrations of laptime with training frameworks (docs/integrations.md).

- ``laptime.integrations.lightning.LaptimeCallback``: PyTorch Lightning (``lightning.pytorch`` or
  ``pytorch_lightning``), ``Trainer(callbacks=[LaptimeCallback()])``
- ``laptime.integrations.transformers.LaptimeCallback``: Hugging Face ``transformers.Trainer``,
  ``Trainer(..., callbacks=[LaptimeCallback()])``
- ``laptime.integrations.mmengine.LaptimeHook``: MMEngine, ``custom_hooks=[dict(type="LaptimeHook")]``

Each one measures the seed's names (``seeds/001``, ``examples/nuscenes/train_hooks.py``), so that
reports of different frameworks read alike: "training loop" (one optimisation step, its data
fetch included, CPU usage tracked), "data fetch", "Training step", "Optimizer step", and
"Validation step" where the framework has per-batch validation hooks. One laptime iteration
(``finish_iter``) is one optimisation step.

This package imports no framework: ``import laptime.integrations`` works without any of them; each
submodule imports its own framework and names the pip extra when it is missing.
"""

import concurrent.futures
import math
import numbers
import os
import warnings
import weakref
from typing import Any, Dict, Optional

from .._laptime import NVTXRangeWrapper, Stopwatch
from .._laptime import configure_from_env as _configure_from_env

__all__ = ["LOOP", "FETCH", "TRAIN", "OPTIMIZER", "VALIDATION", "OWN_SUFFIX", "LoopMeter",
           "configure"]

LOOP = "training loop"
FETCH = "data fetch"
TRAIN = "Training step"
OPTIMIZER = "Optimizer step"
VALIDATION = "Validation step"
# Added to a name the program itself has running when training starts (its own "training loop"
# around fit()): the callback measures under "training loop (callback)" inside the program's.
OWN_SUFFIX = " (callback)"


def _missing(framework, extra, error):
    """The ImportError raised by an integration whose framework is not installed."""
    return ImportError(
        f"laptime.integrations.{extra} needs {framework}: pip install '<laptime checkout>[{extra}]' "
        f"(or install {framework} yourself) [{error}]")


def _distributed():
    """``torch.distributed`` when initialised with more than one rank, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def _env_set(var):
    return os.environ.get(var, "").strip() != ""


def check_count(argument, value, optional=False):
    """``value`` as an int >= 0: an int, or a float with an integral value (``5.0``, as
    configuration files give numbers), as ``Stopwatch.enable`` takes them; None where
    ``optional``. TypeError or ValueError naming ``argument`` and the value otherwise."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, numbers.Real)):
        raise TypeError(f"{argument} must be an int >= 0{' or None' if optional else ''}, "
                        f"not {value!r} ({type(value).__name__})")
    if not isinstance(value, numbers.Integral):
        if not math.isfinite(value) or value != math.floor(value):
            raise ValueError(f"{argument} must be a whole number of iterations, not {value!r}")
    if value < 0:
        raise ValueError(f"{argument} must be >= 0, not {value!r}")
    return int(value)


def check_flag(argument, value):
    """``value`` as a bool: True, False (or 1, 0); TypeError naming ``argument`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{argument} must be True or False, not {value!r} ({type(value).__name__})")


def configure(num_warmup_iters: int = 10, print_every_n_iters: Optional[int] = None,
              do_cuda_sync: bool = False, nvtx: bool = False) -> Optional[Dict[str, Any]]:
    """Enables the Stopwatch (and the NVTX wrapper when ``nvtx``) with these settings, unless the
    environment says otherwise: a LAPTIME_* variable the user set wins over the argument
    (``LAPTIME_WARMUP``, ``LAPTIME_PRINT_EVERY``, ``LAPTIME_CUDA_SYNC``, ``LAPTIME_STOPWATCH``,
    ``LAPTIME_NVTX``, ``LAPTIME_PROFILE`` and the rest of ``laptime.configure_from_env()``).
    Under ``torch.distributed`` with several ranks every rank measures (``LAPTIME_RANKS=all``
    unless the user set ``LAPTIME_RANKS``), for the cross-rank report of ``laptime.distributed``.
    A Stopwatch the program enabled itself is left as it is. Returns the settings the environment
    asked for (``configure_from_env()``'s dict), or None when the program had configured laptime
    already. The arguments are checked first (TypeError / ValueError naming the argument).

    The environment is applied first (``configure_from_env()``), then ``Stopwatch.enable`` with
    the arguments, in which a variable the user set overrides the code (docs/configuration.md):
    the arguments never travel through ``os.environ``."""
    warmup = check_count("num_warmup_iters", num_warmup_iters)
    every = check_count("print_every_n_iters", print_every_n_iters, optional=True)
    sync = check_flag("do_cuda_sync", do_cuda_sync)
    nvtx = check_flag("nvtx", nvtx)
    sw, nv = Stopwatch(), NVTXRangeWrapper()
    nvtx_from_user = nvtx and not _env_set("LAPTIME_NVTX") and not _env_set("LAPTIME_PROFILE")
    if sw.is_enabled:
        if nvtx_from_user and not nv.is_enabled:
            nv.enable(False, False, False)
        return None
    if _distributed() is not None:
        from .. import distributed

        settings = distributed.configure_from_env()
    else:
        settings = _configure_from_env()
    # The environment's rank rule (LAPTIME_RANKS: rank 0 only unless "all"); LAPTIME_STOPWATCH=0
    # and LAPTIME_PROFILE=training make this enable() a no-op.
    if sw.is_enabled or settings["stopwatch_all_ranks"] or sw.results()["rank"] == 0:
        sw.enable(warmup, every, sync)
    if nvtx_from_user and not nv.is_enabled:
        nv.enable(settings["nvtx_sync_on_push"], settings["nvtx_sync_on_pop"],
                  settings["nvtx_check_order"], domain=settings["nvtx_domain"] or None)
    return settings


# The meter measuring the training run in progress, and that run (a weak reference to the
# framework's object for it: the Trainer, the TrainerState, the Runner): one meter per run.
_claim = None


def _claimed_by(run):
    if _claim is None:
        return None
    meter, ref = _claim
    return meter if ref() is run else None  # a run that ended without end_run() is gone


class LoopMeter:
    """The measurements every integration makes, apart from the framework's hooks that drive them.

    A training run (one ``fit()``) goes ``start_run`` ... ``end_run``. An iteration runs
    ``fetch_begin`` (the previous step ended, the next batch is being fetched), ``step_begin``
    (a batch is in hand), ``optimizer_begin`` (the optimizer is about to update) and ``step_end``
    (one optimisation step done: ``finish_iter``). "training loop" spans the whole iteration, its
    fetch included, as in the seed's runner. Every name is also an NVTX range of the same name
    when the NVTX wrapper is on. A call out of order is tolerated: a name is ended only if this
    meter started it, so a missed hook loses a measurement, never training. The arguments are
    checked here (TypeError / ValueError naming the argument and the value)."""

    def __init__(self, num_warmup_iters: int = 10, print_every_n_iters: Optional[int] = None,
                 do_cuda_sync: bool = False, nvtx: bool = False, print_report: bool = True,
                 track_cpu: bool = True) -> None:
        self.settings = dict(num_warmup_iters=check_count("num_warmup_iters", num_warmup_iters),
                             print_every_n_iters=check_count("print_every_n_iters",
                                                             print_every_n_iters, optional=True),
                             do_cuda_sync=check_flag("do_cuda_sync", do_cuda_sync),
                             nvtx=check_flag("nvtx", nvtx))
        self.print_report = check_flag("print_report", print_report)
        self.track_cpu = check_flag("track_cpu", track_cpu)
        self.stopwatch = Stopwatch()
        self.nvtx = NVTXRangeWrapper()
        self.names = {n: n for n in (LOOP, FETCH, TRAIN, OPTIMIZER, VALIDATION)}
        self._open = []  # names this meter started, innermost last (NVTX ranges nest)
        self._sw_on = False
        self._nvtx_on = False
        self._idle = True  # outside a run, or another meter measures this one
        self._finisher = None  # a thread for finish_iter while the program's own interval runs
        self.steps = 0  # optimisation steps ended (finish_iter calls)

    def configure(self):
        """Enables laptime (``configure``); safe to call again. Before the run where the
        framework starts its loader's workers before the run's first hook (docs/workers.md)."""
        configure(**self.settings)

    def start_run(self, run):
        """A training run starts (``run``: the framework's object for it). Returns False, with
        one warning, when another meter measures this run already (the callback added twice):
        this one then does nothing until the run ends. A run that starts with iterations already
        finished (an earlier fit() of this process) starts with ``Stopwatch.reset()``: its own
        warm-up, and the gap between the runs never counted as an iteration."""
        global _claim
        owner = _claimed_by(run)
        if owner is not None and owner is not self:
            self._idle = True
            warnings.warn("laptime: a second laptime callback in this training run does nothing "
                          "(the first one measures it)", RuntimeWarning, stacklevel=3)
            return False
        try:
            ref = weakref.ref(run)
        except TypeError:  # an object without weak references: held until the run ends
            ref = lambda: run  # noqa: E731
        _claim = (self, ref)
        self._idle = False
        self.configure()
        self._sw_on = self.stopwatch.is_enabled
        self._nvtx_on = self.nvtx.is_enabled
        self.steps = 0
        # Left open by a run that raised (no end hook runs then): the step it was in never
        # completed, and its names must not be found running by this run, nor what that run
        # measured counted in this one.
        raised = self.abandon()
        if self._sw_on:
            if raised or self.stopwatch.results()["iterations_finished"] > 0:
                self.stopwatch.reset()
            self._avoid_running_names()
            if self.track_cpu:
                # Two /proc samples per step (~10 µs each on a 2-core machine, mostly the read of
                # /proc/stat, which grows with the CPU count): the bulk of the integrations' cost
                # (bench/integrations_bench.py); track_cpu=False drops it.
                self.stopwatch.set_cpu_usage_meas_name(self.names[LOOP])
        return True

    def _avoid_running_names(self):
        """The program's own intervals running as training starts (``start_meas`` around
        ``fit()``): a name of ours among them is measured as "<name> (callback)", and
        finish_iter runs on a helper thread, since laptime refuses to end an iteration on a
        thread whose interval still runs (measurements of other threads are fine)."""
        running = {m["name"] for m in self.stopwatch.results()["measurements"] if m["running"]}
        self.names = {n: n + OWN_SUFFIX if n in running else n for n in self.names}
        if running and self._finisher is None:
            self._finisher = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="laptime-finish-iter")

    def end_run(self):
        """The run ended (or failed): closes what is open and lets the next run be claimed."""
        global _claim
        if not self._idle:
            self.close()
        if _claim is not None and _claim[0] is self:
            _claim = None
        self._idle = True
        if self._finisher is not None:
            self._finisher.shutdown()
            self._finisher = None

    @property
    def active(self):
        """Whether this meter measures the run in progress."""
        return not self._idle

    def is_open(self, name):
        return name in self._open

    def begin(self, name):
        if self._idle or name in self._open:
            return
        self._open.append(name)
        if self._nvtx_on:
            self.nvtx.range_push(self.names[name])
        if self._sw_on:
            self.stopwatch.start_meas(self.names[name])

    def end(self, name, discard=()):
        """Ends ``name`` if this meter started it (and the ranges opened after it, innermost
        first, so that NVTX ranges stay nested); the names in ``discard`` end uncounted."""
        if name not in self._open:
            return
        while self._open:
            top = self._open.pop()
            if self._sw_on:
                if top in discard:
                    self.stopwatch.discard_meas(self.names[top])
                else:
                    self.stopwatch.end_meas(self.names[top])
            if self._nvtx_on:
                self.nvtx.range_pop(self.names[top])
            if top == name:
                return

    def fetch_begin(self):
        self.begin(LOOP)
        self.begin(FETCH)

    def step_begin(self):
        """A batch is in hand: the fetch ends, "Training step" starts."""
        self.end(FETCH)
        self.begin(LOOP)
        self.begin(TRAIN)

    def optimizer_begin(self):
        self.end(TRAIN)
        self.begin(OPTIMIZER)

    def micro_step_end(self):
        """A batch done without an optimizer step (gradient accumulation): the iteration goes on."""
        self.end(TRAIN)
        self.end(OPTIMIZER)

    def step_end(self, more=True):
        """One optimisation step done: ``finish_iter``. With ``more``, the next fetch starts now
        (its end is the next ``step_begin``); pass False where no step is known to follow, so that
        no interval is left open when training ends."""
        if self._idle:
            return
        self.end(LOOP)
        if self._sw_on:
            if self._finisher is None:
                self.stopwatch.finish_iter()
            else:
                self._finisher.submit(self.stopwatch.finish_iter).result()
        self.steps += 1
        if more:
            self.fetch_begin()

    def close(self):
        """Ends whatever is still open (the epoch or training ended, or stopped early). The work
        intervals count; a "training loop" that no optimisation step ended and a "data fetch"
        that no batch ended are discarded: they were begun for a step that never came (a stop
        requested after this meter's hook, the data running out, batches with no optimizer step
        at an epoch's end), and counting them would give more of them than iterations."""
        while self._open:
            self.end(self._open[0], discard=(LOOP, FETCH))

    def abandon(self):
        """Ends whatever is still open uncounted: the run it belonged to raised. Returns whether
        anything was."""
        if not self._open:
            return False
        self.end(self._open[0], discard=tuple(self._open))
        return True

    def validation_begin(self):
        self.begin(VALIDATION)

    def validation_end(self):
        self.end(VALIDATION)

    def report(self):
        """The report: across ranks (collective, rank 0 prints) under ``torch.distributed``,
        else this process's ``print_eval_times``."""
        if self._idle or not self.print_report:
            return
        if _distributed() is not None:
            from .. import distributed

            distributed.report()
        elif self._sw_on:
            self.stopwatch.print_eval_times()
