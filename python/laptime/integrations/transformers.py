"""laptime for Hugging Face ``transformers.Trainer``: ``Trainer(..., callbacks=[LaptimeCallback()])``.

What each name measures (docs/integrations.md):

- "data fetch": from ``on_epoch_begin`` or ``on_step_end`` to the next ``on_step_begin``. The
  Trainer fetches all batches of one optimisation step (``gradient_accumulation_steps`` of them)
  before ``on_step_begin`` and has no callback around the fetch, so the gap is measured: the
  fetch, plus logging, evaluation and checkpointing the Trainer does after ``on_step_end``.
- "Training step": ``on_step_begin`` to ``on_pre_optimizer_step``: forward, loss and backward of
  every batch of the optimisation step, and gradient clipping. Once per optimisation step.
- "Optimizer step": ``on_pre_optimizer_step`` to ``on_step_end``: ``optimizer.step()``, the
  scheduler step and ``zero_grad``. (transformers without ``on_pre_optimizer_step``: not measured,
  "Training step" ends at ``on_step_end``.)
- "training loop": one optimisation step, its fetch included (CPU usage tracked).

The Trainer's evaluation has no per-batch begin hook, so there is no "Validation step" here.
"""

from typing import Optional

from . import LoopMeter, _missing

try:
    from transformers import TrainerCallback as _TrainerCallback
except ImportError as _error:
    raise _missing("transformers", "transformers", _error) from None

__all__ = ["LaptimeCallback"]


def _more_steps_follow(state):
    """Whether another optimisation step of this epoch follows: not at ``max_steps`` and not at the
    epoch's end (the Trainer sets ``state.epoch`` to a whole number after an epoch's last step)."""
    if state.max_steps and state.global_step >= state.max_steps:
        return False
    epoch = state.epoch
    return epoch is None or abs(epoch - round(epoch)) > 1e-9


class LaptimeCallback(_TrainerCallback):
    """Times the Trainer's loop with laptime under the seed's names.

    Example::

        trainer = Trainer(model, args, train_dataset=ds, callbacks=[LaptimeCallback()])

    ``num_warmup_iters``, ``print_every_n_iters``, ``do_cuda_sync`` and ``nvtx`` configure laptime
    unless a LAPTIME_* variable the user set says otherwise (``laptime.integrations.configure``).
    ``track_cpu``: sample CPU usage during "training loop" (two /proc reads per step).
    ``print_report``: print the report when training ends (rank 0, across ranks when distributed).
    Wrong arguments raise here (TypeError / ValueError naming the argument).

    Each ``train()`` is a run of its own (a later one starts with ``Stopwatch.reset()``); a second
    laptime callback in one run does nothing, with one warning (docs/integrations.md)."""

    def __init__(self, num_warmup_iters: int = 10, print_every_n_iters: Optional[int] = None,
                 do_cuda_sync: bool = False, nvtx: bool = False, print_report: bool = True,
                 track_cpu: bool = True) -> None:
        self.meter = LoopMeter(num_warmup_iters, print_every_n_iters, do_cuda_sync, nvtx,
                               print_report, track_cpu)

    def on_train_begin(self, args, state, control, **kwargs):
        # Before the Trainer iterates its dataloader: forked workers find laptime enabled
        # (docs/workers.md). ``state`` is this train() call's own.
        self.meter.start_run(state)

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.meter.fetch_begin()

    def on_step_begin(self, args, state, control, **kwargs):
        self.meter.step_begin()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.meter.optimizer_begin()

    def on_step_end(self, args, state, control, **kwargs):
        stop = control.should_training_stop or control.should_epoch_stop
        self.meter.step_end(more=not stop and _more_steps_follow(state))

    def on_epoch_end(self, args, state, control, **kwargs):
        self.meter.close()

    def on_train_end(self, args, state, control, **kwargs):
        self.meter.close()
        self.meter.report()
        self.meter.end_run()
