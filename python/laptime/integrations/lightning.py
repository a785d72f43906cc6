"""laptime for PyTorch Lightning: ``Trainer(callbacks=[LaptimeCallback()])``.

Works with ``lightning`` (``lightning.pytorch``) and with ``pytorch_lightning``, whichever is
installed (``lightning`` first). What each name measures (docs/integrations.md):

- "data fetch": from the end of one batch (``on_train_batch_end``) or the start of the epoch
  (``on_train_epoch_start``) to the next ``on_train_batch_start``. Lightning fetches the batch
  inside its loop with no callback around it, so the gap between the two hooks is measured: the
  fetch (and the transfer to the device), plus what Lightning does between batches (logging,
  callbacks that run after this one, mid-epoch validation when ``val_check_interval`` asks).
- "Training step": ``on_train_batch_start`` to ``on_before_optimizer_step``: ``training_step``
  (forward, loss), ``zero_grad`` and backward. With gradient accumulation, once per batch.
- "Optimizer step": ``on_before_optimizer_step`` to ``on_train_batch_end``: gradient clipping and
  ``optimizer.step()``.
- "training loop": one optimisation step, its fetches included (CPU usage tracked).
- Manual optimisation (``automatic_optimization = False``: the model's ``training_step`` calls
  ``optimizer.step()``, once per optimizer): one iteration per batch that stepped, "Training
  step" the whole batch, no "Optimizer step".
- "Validation step": ``on_validation_batch_start`` to ``on_validation_batch_end``.
"""

from typing import Optional

from . import LoopMeter, _missing

try:
    try:
        import lightning.pytorch as _pl
    except ImportError:
        import pytorch_lightning as _pl
except ImportError as _error:
    raise _missing("PyTorch Lightning (lightning or pytorch-lightning)", "lightning", _error) from None

__all__ = ["LaptimeCallback"]


def _more_batches_follow(trainer):
    """Whether another training batch of this epoch follows the one that just ended. From the epoch
    loop's own stop condition (max_steps, the epoch's batch count, the last-batch flag); where those
    internals are missing, True (a fetch then may be measured once more at the end)."""
    try:
        loop = trainer.fit_loop.epoch_loop
        return not (loop._is_training_done or trainer.should_stop)
    except AttributeError:
        return True


class LaptimeCallback(_pl.Callback):
    """Times Lightning's training loop with laptime under the seed's names.

    Example::

        trainer = Trainer(max_steps=100, callbacks=[LaptimeCallback(num_warmup_iters=10)])

    ``num_warmup_iters``, ``print_every_n_iters``, ``do_cuda_sync`` and ``nvtx`` configure laptime
    unless a LAPTIME_* variable the user set says otherwise (``laptime.integrations.configure``).
    ``track_cpu``: sample CPU usage during "training loop" (two /proc reads per step).
    ``print_report``: print the report when training ends (rank 0, across ranks under DDP).
    Wrong arguments raise here (TypeError / ValueError naming the argument).

    Each ``fit()`` is a run of its own (a later one starts with ``Stopwatch.reset()``); a second
    laptime callback in one fit does nothing, with one warning (docs/integrations.md)."""

    def __init__(self, num_warmup_iters: int = 10, print_every_n_iters: Optional[int] = None,
                 do_cuda_sync: bool = False, nvtx: bool = False, print_report: bool = True,
                 track_cpu: bool = True) -> None:
        super().__init__()
        self.meter = LoopMeter(num_warmup_iters, print_every_n_iters, do_cuda_sync, nvtx,
                               print_report, track_cpu)
        self._stepped = False
        self._manual = False

    def setup(self, trainer, pl_module, stage):
        # Before Lightning builds the dataloaders and starts their workers: forked workers find
        # laptime enabled (docs/workers.md).
        if stage == "fit":
            self.meter.start_run(trainer)

    def on_train_epoch_start(self, trainer, pl_module):
        self.meter.fetch_begin()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._stepped = False
        self._manual = getattr(pl_module, "automatic_optimization", True) is False
        self.meter.step_begin()

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self._stepped = True
        # Manual optimisation calls optimizer.step() inside training_step, once per optimizer
        # (a GAN's two): no "Optimizer step" of its own there; "Training step" is the batch.
        if not self._manual:
            self.meter.optimizer_begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        more = _more_batches_follow(trainer)
        if self._stepped:
            self.meter.step_end(more)
        else:
            self.meter.micro_step_end()
            if more:
                self.meter.fetch_begin()

    def on_train_epoch_end(self, trainer, pl_module):
        # A batch with no optimizer step at the end of an epoch: the step never came.
        self.meter.close()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.meter.validation_begin()

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                dataloader_idx=0):
        self.meter.validation_end()

    def on_exception(self, trainer, pl_module, exception):
        self.meter.abandon()  # the step it was in never completed
        self.meter.end_run()  # nothing left running for a later fit() in this process

    def on_train_end(self, trainer, pl_module):
        self.meter.close()
        self.meter.report()
        self.meter.end_run()

    def teardown(self, trainer, pl_module, stage):
        if stage == "fit":
            self.meter.end_run()
