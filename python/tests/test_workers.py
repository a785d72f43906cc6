"""Worker processes in the parent's report (docs/workers.md): what
a child measures — started by fork, spawn or forkserver, or a PyTorch DataLoader worker — is merged
into the report of the process that enabled the Stopwatch, with no code in the child beyond the
measurements; a killed worker keeps what it completed."""

import multiprocessing
import os
import signal
import time

import pytest

import laptime

METHODS = ["fork", "spawn", "forkserver"]


def work(name, times, label=None):
    """A worker's body: `times` intervals of about a millisecond under `name`."""
    sw = laptime.Stopwatch()
    if label is not None:
        sw.set_worker_label(label)
    for _ in range(times):
        with sw.measure(name):
            time.sleep(0.001)


def work_then_hang(name, times, ready):
    work(name, times)
    laptime.Stopwatch().start_meas(name)  # killed inside it
    ready.set()
    time.sleep(600)


def by_name(results, name):
    return next((m for m in results["measurements"] if m["name"] == name), None)


@pytest.mark.parametrize("method", METHODS)
def test_workers_of_every_start_method_reach_the_parent(stopwatch, method, capfd):
    stopwatch.enable(0)
    ctx = multiprocessing.get_context(method)
    procs = [
        ctx.Process(target=work, args=("decode", 3 + i, f"worker {i}")) for i in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = stopwatch.results()
    decode = by_name(results, "decode")
    assert decode is not None, results
    assert decode["count"] == 3 + 4
    assert decode["min_s"] >= 0.0009  # the workers' own clocks
    workers = sorted(decode["workers"], key=lambda w: w["label"])
    assert [(w["label"], w["count"], w["pid"]) for w in workers] == [
        ("worker 0", 3, procs[0].pid),
        ("worker 1", 4, procs[1].pid),
    ]
    assert not any(w["alive"] for w in workers)
    assert results["worker_processes"] == 2
    capfd.readouterr()
    stopwatch.print_eval_times()
    assert "decode \u00b7 2 workers" in capfd.readouterr().out


def test_a_killed_worker_keeps_what_it_completed(stopwatch):
    stopwatch.enable(0)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=work_then_hang, args=("decode", 4, ready))
    p.start()
    assert ready.wait(60)
    os.kill(p.pid, signal.SIGKILL)
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    decode = by_name(stopwatch.results(), "decode")
    assert decode["count"] == 4
    assert [w["alive"] for w in decode["workers"]] == [False]


def test_a_worker_counts_only_after_the_parents_warm_up(stopwatch):
    stopwatch.enable(2)
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=work, args=("decode", 3))
    p.start()
    p.join(60)  # the parent is still in its warm-up
    stopwatch.finish_iter()
    stopwatch.finish_iter()
    p = ctx.Process(target=work, args=("decode", 2))
    p.start()
    p.join(60)
    assert by_name(stopwatch.results(), "decode")["count"] == 2


class MeasuredDataset:
    """A map-style dataset whose items are timed where they are made: in the loader's workers."""

    def __len__(self):
        return 24

    def __getitem__(self, index):
        sw = laptime.Stopwatch()
        with sw.measure("decode"):
            time.sleep(0.001)
        with sw.measure("augment"):
            pass
        return index


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pytorch_dataloader_workers_need_no_code(stopwatch, method):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed here (the H200 runs it)")
    stopwatch.enable(0)
    loader = torch.utils.data.DataLoader(
        MeasuredDataset(), batch_size=4, num_workers=2, multiprocessing_context=method
    )
    for _ in loader:
        with stopwatch.measure("step"):
            pass
        stopwatch.finish_iter()
    del loader
    results = stopwatch.results()
    decode = by_name(results, "decode")
    assert decode["count"] == 24
    assert len(decode["workers"]) == 2
    assert sum(w["count"] for w in decode["workers"]) == 24
    assert by_name(results, "step")["count"] == 6
    assert "workers" not in by_name(results, "step")


def report_worker(queue, fn, *args):
    queue.put(fn(*args))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_worker_that_enables_at_import_stays_a_worker(stopwatch, method):
    import workers_toplevel

    stopwatch.enable(0)
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    p = ctx.Process(target=report_worker, args=(queue, workers_toplevel.work, "toplevel", 3))
    p.start()
    assert queue.get(timeout=60) is True  # is_worker in the child
    p.join(60)
    assert by_name(stopwatch.results(), "toplevel")["count"] == 3
