"""A tiny model trained for a few steps on CPU with PyTorch Lightning and laptime's callback.

    python examples/integrations/lightning_example.py --steps 20 --warmup 5 [--no-laptime]
    python examples/integrations/lightning_example.py --devices 2    # DDP, one cross-rank report
"""

import argparse

import laptime
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl


class TinyModule(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Pairs(Dataset):
    """(x, sum of x) pairs; each item's loading is timed as "load sample" when there are loader
    workers (the measurement then runs in the worker processes)."""

    def __init__(self, n, measure=False):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.y = self.x.sum(1, keepdim=True)
        self.measure = measure

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if not self.measure:
            return self.x[i], self.y[i]
        with laptime.Stopwatch().measure("load sample"):
            return self.x[i], self.y[i]


def loader(n, batch_size=16, workers=0, persistent=False):
    return DataLoader(Pairs(n, measure=workers > 0), batch_size=batch_size, num_workers=workers,
                      persistent_workers=persistent)


def main(steps=20, warmup=5, accumulate=1, laptime_on=True, validate=False, nvtx=False,
         batches_per_epoch=None, extra=(), print_report=True, track_cpu=True, devices=1,
         workers=0, persistent=False, laptime_callbacks=1, instrument_loader=False):
    """Trains for ``steps`` optimisation steps; ``extra``: more callbacks (the benchmark's probe);
    ``workers``: DataLoader worker processes (``persistent``: kept across epochs);
    ``laptime_callbacks``: how many LaptimeCallbacks (more than one is a mistake the tests make);
    ``instrument_loader``: the training loader through ``laptime.torch.instrument`` (its samples
    as "sample": the Dataset times its own "load sample" inside)."""
    callbacks = []
    if laptime_on:
        from laptime.integrations.lightning import LaptimeCallback

        callbacks += [LaptimeCallback(num_warmup_iters=warmup, nvtx=nvtx,
                                      print_report=print_report, track_cpu=track_cpu)
                      for _ in range(laptime_callbacks)]
    callbacks += list(extra)
    batches = batches_per_epoch or steps * accumulate
    trainer = pl.Trainer(
        max_steps=steps, accelerator="cpu", devices=devices, callbacks=callbacks,
        strategy="ddp" if devices > 1 else "auto",
        accumulate_grad_batches=accumulate, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, limit_val_batches=2 if validate else 0)
    train = loader(batches * 16, workers=workers, persistent=persistent)
    if instrument_loader:
        import laptime.torch

        laptime.torch.instrument(train, sample="sample")
    trainer.fit(TinyModule(), train, loader(32) if validate else None)
    return trainer


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--validate", action="store_true")
    p.add_argument("--devices", type=int, default=1, help="> 1: DDP over CPU processes (gloo)")
    p.add_argument("--no-laptime", action="store_true")
    a = p.parse_args()
    main(a.steps, a.warmup, a.accumulate, not a.no_laptime, a.validate, devices=a.devices)
    # DDP: the process group ends before the interpreter does. Left to exit, gloo's threads were
    # once torn down under a live group and the process aborted ("terminate called without an
    # active exception", 1 of 5 runs of the 2-process test on a loaded 2-core machine).
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
