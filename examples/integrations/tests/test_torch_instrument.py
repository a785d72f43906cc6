"""laptime.torch.instrument(loader): a DataLoader's samples, collate, wait and pinning timed with
no change to the Dataset, in real worker processes of every start method (docs/workers.md)."""

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader

import laptime
import laptime.torch
from integ_helpers import counts, fresh_laptime, measurement  # noqa: F401 (autouse fixture)

import loader_example

SAMPLES, BATCH = 24, 4  # 6 batches per epoch


def run(**kwargs):
    """``loader_example.main`` (warm-up 0: every interval counts) and the Stopwatch's results."""
    kwargs.setdefault("samples", SAMPLES)
    kwargs.setdefault("batch_size", BATCH)
    kwargs.setdefault("step_ms", 0.0)
    kwargs.setdefault("work", 5)
    batches = loader_example.main(**kwargs)
    return batches, laptime.Stopwatch().results()


def worker_counts(results, name):
    """[(label, count)] of ``name``'s worker processes, sorted."""
    return sorted((w["label"], w["count"]) for w in measurement(results, name).get("workers", []))


def check_counts(results, epochs, workers):
    """Every sample loaded once per epoch, one collate and one wait per batch, each in the
    process that ran it. The epoch's last ``next()`` (it raises StopIteration and joins the
    workers, after the last finish_iter) and an IterableDataset iterator's last one are
    discarded: no batch, no sample."""
    batches = epochs * SAMPLES // BATCH
    c = counts(results)
    assert c["load sample"] == epochs * SAMPLES, c
    assert c["collate"] == batches, c
    assert c["data wait"] == batches, c
    if workers:
        per_worker = worker_counts(results, "load sample")
        assert len(per_worker) == workers, per_worker
        assert sum(n for _, n in per_worker) == epochs * SAMPLES
        assert sum(n for _, n in worker_counts(results, "collate")) == batches
        assert worker_counts(results, "data wait") == []  # the main process's own
    else:
        assert results.get("worker_processes", 0) == 0
        assert measurement(results, "load sample").get("workers") is None
    assert results["verdict"]["data_name"] == "data wait"


def test_num_workers_0_times_in_the_main_process_and_leaves_the_dataset_alone():
    loader = loader_example.make_loader(SAMPLES, BATCH, workers=0, work=5)
    dataset_class = type(loader.dataset)
    assert laptime.torch.instrument(loader) is loader
    assert isinstance(loader, DataLoader)
    laptime.Stopwatch().enable(0)
    for _ in loader:
        laptime.Stopwatch().finish_iter()
    check_counts(laptime.Stopwatch().results(), epochs=1, workers=0)
    assert type(loader.dataset) is dataset_class  # the user's object is not changed
    assert loader.dataset.calls == SAMPLES


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_worker_processes_of_every_start_method_time_samples_and_collate(context):
    batches, results = run(workers=2, context=context, epochs=2)
    assert batches == 2 * SAMPLES // BATCH
    check_counts(results, epochs=2, workers=4)  # new workers each epoch: 2 × 2 processes
    # The user's worker_init_fn ran after instrument's: its label is the one in the report.
    labels = [label for label, _ in worker_counts(results, "load sample")]
    assert labels == ["reader 0", "reader 0", "reader 1", "reader 1"]


def test_persistent_workers_are_timed_across_epochs():
    _, results = run(workers=2, persistent=True, epochs=3)
    check_counts(results, epochs=3, workers=2)
    labels = [label for label, _ in worker_counts(results, "load sample")]
    assert labels == ["reader 0", "reader 1"]


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_dataset_times_each_next_of_its_iterator(workers):
    _, results = run(workers=workers, iterable=True, epochs=2, persistent=workers > 0)
    # Each worker streams half the samples: 3 batches of 4 per worker, 6 per epoch. Each of the
    # dataset's iterators (one per epoch and worker) ends with a next() that makes no sample.
    check_counts(results, epochs=2, workers=workers)


def test_instrumenting_twice_times_once_and_renames():
    names = dict(sample="decode+augment", collate="stack", wait="next batch")
    _, results = run(workers=2, twice=True, names=names)
    c = counts(results)
    assert c["decode+augment"] == SAMPLES and c["stack"] == SAMPLES // BATCH, c
    assert c["next batch"] == SAMPLES // BATCH, c  # the epoch-ending next() discarded
    assert "load sample" not in c and "data wait" not in c
    assert results["verdict"]["data_name"] == "next batch"


def test_a_part_named_none_is_not_timed():
    _, results = run(workers=0, names=dict(collate=None, sample=None))
    assert set(counts(results)) == {"data wait"}


def test_a_dataset_calling_its_own_getitem_is_timed_once_per_sample():
    class Retry(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return self[i + 1] if i % 2 else i  # an odd sample retried with the next one

    laptime.Stopwatch().enable(0)
    loader = laptime.torch.instrument(DataLoader(Retry(), batch_size=2, num_workers=1))
    assert [b.tolist() for b in loader] == [[0, 2], [2, 4], [4, 6], [6, 8]]
    assert counts(laptime.Stopwatch().results())["load sample"] == 8


def test_a_subset_is_timed_per_batched_fetch():
    laptime.Stopwatch().enable(0)
    data = loader_example.Images(16, work=1)
    subset = torch.utils.data.Subset(data, range(12))  # torch's Subset has __getitems__
    for workers in (0, 2):
        laptime.Stopwatch().reset()
        loader = laptime.torch.instrument(DataLoader(subset, batch_size=4, num_workers=workers))
        assert sum(len(b[1]) for b in loader) == 12
        c = counts(laptime.Stopwatch().results())
        assert c["load samples (batched)"] == 3 and "load sample" not in c, (workers, c)


def test_the_users_collate_and_worker_init_are_kept():
    loader = loader_example.make_loader(workers=2)
    laptime.torch.instrument(loader)
    assert loader.collate_fn.collate_fn is loader_example.stack
    assert loader.worker_init_fn.user_fn is loader_example.seed_worker


def test_pinning_is_timed_on_the_thread_that_pins():
    # Without an accelerator torch does not pin; torch's pin_memory function, which both the pin
    # thread and a single-process loader call, is timed once per batch, nested calls inside.
    loader = laptime.torch.instrument(DataLoader(list(range(8)), batch_size=4, pin_memory=True))
    from torch.utils.data._utils import pin_memory

    laptime.Stopwatch().enable(0)
    batch = {"a": [1, 2], "b": "text"}  # no tensor: pinned as is, through nested calls
    assert pin_memory.pin_memory(batch) == batch
    assert counts(laptime.Stopwatch().results())["pin memory"] == 1
    assert laptime.torch.instrument(loader, pin="pinning") is loader
    pin_memory.pin_memory(batch)
    assert counts(laptime.Stopwatch().results())["pinning"] == 1


def test_instrument_takes_a_dataloader_only():
    with pytest.raises(TypeError, match="DataLoader"):
        laptime.torch.instrument([1, 2, 3])


def test_import_laptime_imports_neither_torch_nor_dali():
    code = ("import sys, laptime; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'nvidia')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_loader_rebuilt_from_an_instrumented_ones_attributes_is_timed_once():
    # Lightning rebuilds a user's loader as type(loader)(**its arguments) to add a sampler: the
    # class is the instrumented one, collate_fn and worker_init_fn the wrapped ones.
    first = laptime.torch.instrument(loader_example.make_loader(SAMPLES, BATCH, workers=2, work=5),
                                     sample="decode")
    rebuilt = type(first)(first.dataset, batch_size=BATCH, num_workers=2,
                          collate_fn=first.collate_fn, worker_init_fn=first.worker_init_fn)
    laptime.Stopwatch().enable(0)
    assert sum(len(labels) for _, labels in rebuilt) == SAMPLES
    c = counts(laptime.Stopwatch().results())
    assert c == {"data wait": SAMPLES // BATCH, "decode": SAMPLES,
                 "collate": SAMPLES // BATCH}, c


def test_with_lightnings_callback_the_verdict_reads_the_loaders_own_wait():
    from integ_helpers import train_in_process

    pytest.importorskip("lightning")
    results, out = train_in_process("lightning_example", steps=6, warmup=0, workers=2,
                                    persistent=True, instrument_loader=True)
    c = counts(results)
    # The callback's names, and the loader's from inside: Lightning fetches a batch ahead.
    assert c["training loop"] == 6 and c["data fetch"] >= 5, c
    assert 6 <= c["data wait"] <= 8 and c["collate"] >= 6 and c["sample"] >= 6 * 16, c
    assert c["load sample"] == c["sample"]  # the Dataset's own name, inside instrument's
    assert len(measurement(results, "sample")["workers"]) == 2, out[-3000:]
    assert results["verdict"]["data_name"] == "data wait"
