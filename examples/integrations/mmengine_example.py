"""A tiny model trained for a few iterations on CPU with an MMEngine ``Runner`` and laptime's hook,
named in the config as ``custom_hooks=[dict(type="LaptimeHook")]``.

    python examples/integrations/mmengine_example.py --steps 20 --warmup 5 [--accumulate 2]
"""

import argparse
import tempfile

import laptime
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn


class TinyModel(BaseModel):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x, labels=None, mode="tensor"):
        out = self.net(x)
        if mode == "loss":
            return {"loss": nn.functional.mse_loss(out, labels)}
        if mode == "predict":
            return [out]
        return out


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


def main(steps=20, warmup=5, accumulate=1, laptime_on=True, nvtx=False, extra=(),
         print_report=True, track_cpu=True, workers=0, by_epoch=False, laptime_hooks=1):
    """Trains for ``steps`` optimisation steps; ``extra``: more hooks (the benchmark's probe);
    ``workers``: DataLoader worker processes; ``by_epoch``: MMEngine's epoch-based loop (one
    epoch of ``steps`` iterations) instead of the iteration-based one; ``laptime_hooks``: how many
    LaptimeHooks (more than one is a mistake the tests make)."""
    custom_hooks = []
    if laptime_on:
        import laptime.integrations.mmengine  # noqa: F401  registers LaptimeHook

        custom_hooks += [dict(type="LaptimeHook", num_warmup_iters=warmup, nvtx=nvtx,
                              print_report=print_report, track_cpu=track_cpu)
                         for _ in range(laptime_hooks)]
    custom_hooks += list(extra)
    iterations = steps * accumulate
    if by_epoch:
        sampler, train_cfg = "DefaultSampler", dict(by_epoch=True, max_epochs=1)
    else:
        sampler, train_cfg = "InfiniteSampler", dict(by_epoch=False, max_iters=iterations)
    with tempfile.TemporaryDirectory() as work_dir:
        runner = Runner(
            model=TinyModel(), work_dir=work_dir,
            train_dataloader=dict(dataset=Pairs(16 * iterations, measure=workers > 0),
                                  batch_size=16, num_workers=workers,
                                  sampler=dict(type=sampler, shuffle=False),
                                  collate_fn=dict(type="default_collate")),
            optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.01),
                               accumulative_counts=accumulate),
            train_cfg=train_cfg,
            default_hooks=dict(checkpoint=None, logger=None),
            custom_hooks=custom_hooks, log_level="WARNING")
        runner.train()
    return runner


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--no-laptime", action="store_true")
    a = p.parse_args()
    main(a.steps, a.warmup, a.accumulate, not a.no_laptime)
