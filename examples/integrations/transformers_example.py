"""A tiny model trained for a few steps on CPU with ``transformers.Trainer`` and laptime's callback.

    python examples/integrations/transformers_example.py --steps 20 --warmup 5 [--accumulate 2]
"""

import argparse
import tempfile

import laptime
import torch
from torch import nn
from transformers import Trainer, TrainingArguments


class TinyRegressor(nn.Module):
    """The Trainer's contract: keyword inputs, a dict with "loss" out."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x, labels=None):
        out = self.net(x)
        loss = None if labels is None else nn.functional.mse_loss(out, labels)
        return {"loss": loss, "logits": out}


class Pairs(torch.utils.data.Dataset):
    """Each item's loading is timed as "load sample" where ``measure`` (with loader workers: the
    measurement runs in the worker processes)."""

    def __init__(self, n, measure=False):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 32, generator=g)
        self.measure = measure

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if not self.measure:
            return {"x": self.x[i], "labels": self.x[i].sum(0, keepdim=True)}
        with laptime.Stopwatch().measure("load sample"):
            return {"x": self.x[i], "labels": self.x[i].sum(0, keepdim=True)}


def main(steps=20, warmup=5, accumulate=1, laptime_on=True, nvtx=False, samples=None, extra=(),
         print_report=True, track_cpu=True, workers=0, persistent=False, laptime_callbacks=1):
    """Trains for ``steps`` optimisation steps; ``extra``: more callbacks (the benchmark's probe);
    ``workers``: DataLoader worker processes (``persistent``: kept across epochs);
    ``laptime_callbacks``: how many LaptimeCallbacks (more than one is a mistake the tests make)."""
    callbacks = []
    if laptime_on:
        from laptime.integrations.transformers import LaptimeCallback

        callbacks += [LaptimeCallback(num_warmup_iters=warmup, nvtx=nvtx,
                                      print_report=print_report, track_cpu=track_cpu)
                      for _ in range(laptime_callbacks)]
    callbacks += list(extra)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, max_steps=steps, per_device_train_batch_size=16,
            gradient_accumulation_steps=accumulate, learning_rate=1e-2, use_cpu=True,
            report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
            dataloader_num_workers=workers, dataloader_persistent_workers=persistent)
        trainer = Trainer(model=TinyRegressor(), args=args,
                          train_dataset=Pairs(samples or steps * accumulate * 16,
                                              measure=workers > 0),
                          callbacks=callbacks)
        trainer.train()
    return trainer


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--no-laptime", action="store_true")
    a = p.parse_args()
    main(a.steps, a.warmup, a.accumulate, not a.no_laptime)
