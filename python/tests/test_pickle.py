"""A scope kept in an object (``timer = stopwatch.measure(name)``, docs/python.md) travels where
the object does: a dataset that keeps its timer is pickled to spawned and forkserver DataLoader
workers, and copied by ``copy.deepcopy``. It arrives as the same ``measure(name)`` /
``range(name)`` of the process it lands in, with nothing open."""

import copy
import multiprocessing
import pickle

import laptime


class Dataset:
    def __init__(self):
        self.timer = laptime.Stopwatch().measure("decode")
        self.span = laptime.NVTXRangeWrapper().range("decode range")

    def item(self):
        with self.timer, self.span:
            return sum(range(100))


def _count(stopwatch, name):
    return next(m["count"] for m in stopwatch.results()["measurements"] if m["name"] == name)


def _use_in_child(dataset):
    laptime.Stopwatch().enable(0, None, False)
    for _ in range(3):
        dataset.item()
        laptime.Stopwatch().finish_iter()
    return _count(laptime.Stopwatch(), "decode")


def test_scopes_pickle_and_copy_as_the_same_call(stopwatch):
    for scope in (laptime.Stopwatch().measure("decode"), laptime.NVTXRangeWrapper().range("r")):
        for twin in (pickle.loads(pickle.dumps(scope)), copy.copy(scope), copy.deepcopy(scope)):
            assert type(twin) is type(scope)
            assert (twin.kind, twin.name) == (scope.kind, scope.name)
    stopwatch.enable(0, None, False)
    kept = pickle.loads(pickle.dumps(Dataset()))
    kept.item()
    stopwatch.finish_iter()
    assert _count(stopwatch, "decode") == 1


def test_a_dataset_keeping_its_timer_reaches_a_spawned_process():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_use_in_child, (Dataset(),)) == 3
