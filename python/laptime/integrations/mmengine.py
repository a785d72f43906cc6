"""laptime for MMEngine: a hook in MMEngine's ``HOOKS`` registry, the successor of the seed's
subclassed ``IterBasedRunnerWithTime`` and ``Fp16OptimizerHookWithTime``: no runner to replace.

In a config (the import registers the hook)::

    custom_imports = dict(imports=["laptime.integrations.mmengine"], allow_failed_imports=False)
    custom_hooks = [dict(type="LaptimeHook", num_warmup_iters=10)]

What each name measures (docs/integrations.md):

- "data fetch": from ``before_train_epoch`` or ``after_train_iter`` to the next
  ``before_train_iter``: the train loop's ``next(dataloader)``, plus what the loop does between
  iterations (the hooks of lower priority than this one, validation every ``val_interval``).
- "Training step": ``before_train_iter`` to the optimizer's ``step()`` (wrapped on
  ``runner.optim_wrapper`` when training starts): data preprocessing, forward, loss, backward.
  Once per iteration, so with ``accumulative_counts`` several times per optimisation step.
- "Optimizer step": the optimizer's ``step()`` to ``after_train_iter``: the step, ``zero_grad``.
- "training loop": one optimisation step, its fetches included (CPU usage tracked).
- "Validation step": ``before_val_iter`` to ``after_val_iter``.

The hook enables laptime when it is built: MMEngine builds its hooks in ``Runner(...)``, before
``runner.train()`` builds the train loop, and the iteration-based loop (``by_epoch=False``) starts
its DataLoader's workers in its constructor, before any hook runs. Workers forked then find
laptime enabled, and spawned ones find it through the environment (docs/workers.md).

The hook has priority ``VERY_HIGH``: its ``before_train_iter`` runs before the other hooks', so
their per-iteration work lands in "Training step" and (after the iteration) in "data fetch".
"""

from typing import Optional

import functools

from . import LoopMeter, _missing

try:
    from mmengine.hooks import Hook as _Hook
    from mmengine.registry import HOOKS as _HOOKS
    from mmengine.runner import BaseLoop as _BaseLoop
    from mmengine.runner import EpochBasedTrainLoop as _EpochBasedTrainLoop
except ImportError as _error:
    raise _missing("mmengine", "mmengine", _error) from None

__all__ = ["LaptimeHook"]


def _optim_wrappers(optim_wrapper):
    """The wrappers whose ``step`` updates parameters (an ``OptimWrapperDict`` holds several)."""
    if hasattr(optim_wrapper, "optim_wrappers"):
        return list(optim_wrapper.optim_wrappers.values())
    return [optim_wrapper]


@_HOOKS.register_module(force=True)
class LaptimeHook(_Hook):
    """Times MMEngine's train loop with laptime under the seed's names.

    ``num_warmup_iters``, ``print_every_n_iters``, ``do_cuda_sync`` and ``nvtx`` configure laptime
    unless a LAPTIME_* variable the user set says otherwise (``laptime.integrations.configure``).
    ``track_cpu``: sample CPU usage during "training loop" (two /proc reads per step).
    ``print_report``: print the report when training ends (rank 0, across ranks when distributed).
    Wrong arguments raise here (TypeError / ValueError naming the argument). Building the hook
    enables laptime (see the module's docstring); each ``runner.train()`` is a run of its own (a
    later one starts with ``Stopwatch.reset()``), and a second LaptimeHook in one run does
    nothing, with one warning (docs/integrations.md)."""

    priority = "VERY_HIGH"

    def __init__(self, num_warmup_iters: int = 10, print_every_n_iters: Optional[int] = None,
                 do_cuda_sync: bool = False, nvtx: bool = False, print_report: bool = True,
                 track_cpu: bool = True) -> None:
        self.meter = LoopMeter(num_warmup_iters, print_every_n_iters, do_cuda_sync, nvtx,
                               print_report, track_cpu)
        self._stepped = False
        self._wrapped = []
        self.meter.configure()

    def _wrap_step(self, wrapper):
        original = wrapper.step

        @functools.wraps(original)
        def step(*args, **kwargs):
            self._stepped = True
            self.meter.optimizer_begin()
            return original(*args, **kwargs)

        wrapper.step = step  # an instance attribute: the class and other runners are untouched
        self._wrapped.append(wrapper)

    def _unwrap_steps(self):
        for wrapper in self._wrapped:
            vars(wrapper).pop("step", None)  # the class's step again
        self._wrapped.clear()

    def _guard_train_loop(self, runner):
        """MMEngine calls no hook when training raises: the train loop's ``run`` (the instance's,
        built by ``runner.train()`` before ``before_run``) is wrapped so that a failure leaves
        nothing wrapped and nothing running, and a later ``runner.train()`` starts clean."""
        loop = getattr(runner, "_train_loop", None)
        if not isinstance(loop, _BaseLoop) or "run" in vars(loop):
            return
        original = loop.run

        @functools.wraps(original)
        def run(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            except BaseException:
                self._unwrap_steps()
                self.meter.abandon()  # the step it was in never completed
                self.meter.end_run()
                raise
            finally:
                vars(loop).pop("run", None)

        loop.run = run

    def before_run(self, runner):
        # Again where the hook was built before torch.distributed was initialised: every rank
        # measures then.
        self.meter.configure()
        self._guard_train_loop(runner)

    def before_train(self, runner):
        self._unwrap_steps()
        if self.meter.start_run(runner):
            for wrapper in _optim_wrappers(runner.optim_wrapper):
                self._wrap_step(wrapper)

    def before_train_epoch(self, runner):
        self.meter.fetch_begin()

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self._stepped = False
        self.meter.step_begin()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        loop = runner.train_loop
        # runner.iter is this iteration's index until the loop increments it after the hooks.
        more = runner.iter + 1 < runner.max_iters and not getattr(loop, "stop_training", False)
        if more and isinstance(loop, _EpochBasedTrainLoop):  # not the epoch's last batch
            more = batch_idx + 1 < len(loop.dataloader)
        if self._stepped:
            self.meter.step_end(more)
        else:
            self.meter.micro_step_end()
            if more:
                self.meter.fetch_begin()

    def after_train_epoch(self, runner):
        self.meter.close()

    def before_val_iter(self, runner, batch_idx, data_batch=None):
        self.meter.validation_begin()

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.meter.validation_end()

    def after_train(self, runner):
        self.meter.close()
        self._unwrap_steps()
        self.meter.report()
        self.meter.end_run()
