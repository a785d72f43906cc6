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

import os

from .._laptime import NVTXRangeWrapper, Stopwatch
from .._laptime import configure_from_env as _configure_from_env

__all__ = ["LOOP", "FETCH", "TRAIN", "OPTIMIZER", "VALIDATION", "LoopMeter", "configure"]

LOOP = "training loop"
FETCH = "data fetch"
TRAIN = "Training step"
OPTIMIZER = "Optimizer step"
VALIDATION = "Validation step"


def _missing(framework, extra, error):
    """The ImportError raised by an integration whose framework is not installed."""
    return ImportError(
        f"laptime.integrations.{extra} needs {framework}: pip install 'laptime[{extra}]' "
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


def configure(num_warmup_iters=10, print_every_n_iters=None, do_cuda_sync=False, nvtx=False):
    """Enables the Stopwatch (and the NVTX wrapper when ``nvtx``) with these settings, unless the
    environment says otherwise: a LAPTIME_* variable the user set wins over the argument
    (``LAPTIME_WARMUP``, ``LAPTIME_PRINT_EVERY``, ``LAPTIME_CUDA_SYNC``, ``LAPTIME_STOPWATCH``,
    ``LAPTIME_NVTX``, ``LAPTIME_PROFILE`` and the rest of ``laptime.configure_from_env()``).
    Under ``torch.distributed`` with several ranks every rank measures (``LAPTIME_RANKS=all``
    unless the user set ``LAPTIME_RANKS``), for the cross-rank report of ``laptime.distributed``.
    A Stopwatch the program enabled itself is left as it is. Returns the settings applied, or
    None when the program had configured laptime already.

    The arguments become defaults of the variables the user did not set, for the duration of one
    ``configure_from_env()`` call: laptime parses and applies them in one place, with its usual
    precedence and warnings."""
    sw, nv = Stopwatch(), NVTXRangeWrapper()
    if sw.is_enabled:
        if nvtx and not nv.is_enabled and not _env_set("LAPTIME_NVTX"):
            nv.enable(False, False, False)
        return None
    added = []

    def default(var, value):
        if value is not None and not _env_set(var):
            os.environ[var] = value
            added.append(var)

    if not _env_set("LAPTIME_PROFILE"):
        default("LAPTIME_STOPWATCH", "1")
        default("LAPTIME_NVTX", "1" if nvtx else None)
    default("LAPTIME_WARMUP", str(int(num_warmup_iters)))
    every = print_every_n_iters
    default("LAPTIME_PRINT_EVERY", None if every is None else str(int(every)))
    default("LAPTIME_CUDA_SYNC", "1" if do_cuda_sync else None)
    try:
        if _distributed() is not None:
            from .. import distributed

            return distributed.configure_from_env()
        return _configure_from_env()
    finally:
        for var in added:
            del os.environ[var]


class LoopMeter:
    """The measurements every integration makes, apart from the framework's hooks that drive them.

    An iteration runs ``fetch_begin`` (the previous step ended, the next batch is being fetched),
    ``step_begin`` (a batch is in hand), ``optimizer_begin`` (the optimizer is about to update)
    and ``step_end`` (one optimisation step done: ``finish_iter``). "training loop" spans the
    whole iteration, its fetch included, as in the seed's runner. Every name is also an NVTX range
    of the same name when the NVTX wrapper is on. A call out of order is tolerated: a name is
    ended only if this meter started it, so a missed hook loses a measurement, never training."""

    def __init__(self, num_warmup_iters=10, print_every_n_iters=None, do_cuda_sync=False,
                 nvtx=False, print_report=True, track_cpu=True):
        self.track_cpu = track_cpu
        self.settings = dict(num_warmup_iters=num_warmup_iters,
                             print_every_n_iters=print_every_n_iters, do_cuda_sync=do_cuda_sync,
                             nvtx=nvtx)
        self.print_report = print_report
        self.stopwatch = Stopwatch()
        self.nvtx = NVTXRangeWrapper()
        self._open = []  # names this meter started, innermost last (NVTX ranges nest)
        self._sw_on = False
        self._nvtx_on = False
        self.steps = 0  # optimisation steps ended (finish_iter calls)

    def setup(self):
        """Configures laptime (``configure``) once training starts; safe to call again."""
        configure(**self.settings)
        self._sw_on = self.stopwatch.is_enabled
        self._nvtx_on = self.nvtx.is_enabled
        if self._sw_on and self.track_cpu:
            # Two /proc samples per step (~50-100 µs each on a loaded 2-core machine): the bulk of
            # the integrations' cost (bench/integrations_bench.py); track_cpu=False drops it.
            self.stopwatch.set_cpu_usage_meas_name(LOOP)

    def is_open(self, name):
        return name in self._open

    def begin(self, name):
        if name in self._open:
            return
        self._open.append(name)
        if self._nvtx_on:
            self.nvtx.range_push(name)
        if self._sw_on:
            self.stopwatch.start_meas(name)

    def end(self, name):
        """Ends ``name`` if this meter started it (and the ranges opened after it, innermost
        first, so that NVTX ranges stay nested)."""
        if name not in self._open:
            return
        while self._open:
            top = self._open.pop()
            if self._sw_on:
                self.stopwatch.end_meas(top)
            if self._nvtx_on:
                self.nvtx.range_pop(top)
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
        self.end(LOOP)
        if self._sw_on:
            self.stopwatch.finish_iter()
        self.steps += 1
        if more:
            self.fetch_begin()

    def close(self):
        """Ends whatever is still open (training stopped early); those intervals count."""
        while self._open:
            self.end(self._open[0])

    def validation_begin(self):
        self.begin(VALIDATION)

    def validation_end(self):
        self.end(VALIDATION)

    def report(self):
        """The report: across ranks (collective, rank 0 prints) under ``torch.distributed``,
        else this process's ``print_eval_times``."""
        if not self.print_report:
            return
        if _distributed() is not None:
            from .. import distributed

            distributed.report()
        elif self._sw_on:
            self.stopwatch.print_eval_times()
