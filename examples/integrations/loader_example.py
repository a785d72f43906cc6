"""A DataLoader seen from inside with one line: ``laptime.torch.instrument(loader)``.

    python examples/integrations/loader_example.py --workers 4 --epochs 2 [--context spawn]
        [--persistent] [--iterable] [--no-laptime]

The Dataset below has no laptime call: its samples ("load sample", per worker), the collate
function ("collate"), the main loop's wait for each batch ("data wait", read by the verdict) are
timed by ``instrument``. The Dataset decodes (a small busy loop) and augments (a flip) each sample;
the loop's "step" sleeps, as a training step would keep the main process busy.
"""

import argparse
import time

import laptime
import laptime.torch
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset


def decode(i, work):
    """Busy work standing for a JPEG decode: ``work`` rounds of arithmetic on a small tensor."""
    x = torch.full((64,), float(i))
    for _ in range(work):
        x = x * 1.0001 + 0.5
    return x


class Images(Dataset):
    """``n`` samples of (image, label), decoded and flipped in ``__getitem__``."""

    def __init__(self, n, work=50):
        self.n = n
        self.work = work
        self.calls = 0  # in the main process: stays 0 unless num_workers == 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.calls += 1
        return decode(i, self.work).flip(0), i % 10


class ImageStream(IterableDataset):
    """The same samples as a stream, split between the workers (each yields every k-th sample)."""

    def __init__(self, n, work=50):
        self.n = n
        self.work = work

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(first, self.n, step):
            yield decode(i, self.work).flip(0), i % 10


def stack(samples):
    """The user's own collate function: images stacked, labels as a tensor."""
    images, labels = zip(*samples)
    return torch.stack(images), torch.tensor(labels)


def seed_worker(worker_id):
    """The user's own worker_init_fn, still called after instrument: it seeds the worker and
    labels its figures in the report ("reader 0", after instrument's "loader worker 0")."""
    torch.manual_seed(worker_id)
    laptime.Stopwatch().set_worker_label(f"reader {worker_id}")


def make_loader(samples=64, batch_size=8, workers=2, context=None, persistent=False,
                iterable=False, work=50, own_collate=True, own_init=True):
    dataset = (ImageStream if iterable else Images)(samples, work)
    return DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                      multiprocessing_context=context if workers else None,
                      persistent_workers=persistent and workers > 0,
                      collate_fn=stack if own_collate else None,
                      worker_init_fn=seed_worker if own_init else None)


def main(samples=64, batch_size=8, workers=2, context=None, persistent=False, iterable=False,
         epochs=1, warmup=0, step_ms=1.0, work=50, instrument=True, twice=False,
         print_report=False, names=None):
    loader = make_loader(samples, batch_size, workers, context, persistent, iterable, work)
    if instrument:
        same = laptime.torch.instrument(loader, **(names or {}))
        assert same is loader
        if twice:
            laptime.torch.instrument(loader, **(names or {}))
    sw = laptime.Stopwatch()
    sw.enable(warmup)
    batches = 0
    for _ in range(epochs):
        for images, labels in loader:
            assert images.shape == (len(labels), 64)
            time.sleep(step_ms / 1000)
            sw.finish_iter()
            batches += 1
    if print_report:
        sw.print_eval_times()
    return batches


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--context", choices=["fork", "spawn", "forkserver"])
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--iterable", action="store_true")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--step-ms", type=float, default=2.0)
    p.add_argument("--work", type=int, default=200, help="decode rounds per sample")
    p.add_argument("--no-laptime", action="store_true", help="iterate without instrument()")
    a = p.parse_args()
    main(a.samples, a.batch_size, a.workers, a.context, a.persistent, a.iterable, a.epochs,
         a.warmup, a.step_ms, a.work, instrument=not a.no_laptime, print_report=True)
