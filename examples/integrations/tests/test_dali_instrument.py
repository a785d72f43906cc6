"""laptime.dali.instrument(iterator): each next() of a DALI iterator timed as the data wait, with a
real DALI pipeline on the CPU and with iterators written like DALI's (docs/workers.md)."""

import time

import pytest

import laptime
import laptime.dali
from integ_helpers import counts, fresh_laptime, measurement  # noqa: F401 (autouse fixture)


def cpu_pipeline_iterator(batches, batch_size=4):
    """A DALIGenericIterator over a CPU-only pipeline (no GPU needed): ``batches`` per epoch."""
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        x = dali.fn.random.uniform(range=[0.0, 1.0], shape=[8], seed=1)
        return x, x * 2.0

    p = pipe()
    p.build()
    with pytest.warns(Warning):  # DALI asks for reader_name instead of size
        return DALIGenericIterator([p], ["x", "y"], size=batches * batch_size,
                                   last_batch_policy=LastBatchPolicy.DROP)


def test_a_real_dali_iterator_is_the_same_object_its_next_timed_each_epoch():
    it = cpu_pipeline_iterator(batches=5)
    cls = type(it)
    laptime.Stopwatch().enable(0)
    assert laptime.dali.instrument(it) is it
    assert isinstance(it, cls)
    seen = 0
    for epoch in range(2):
        for batch in it:
            assert batch[0]["x"].shape == (4, 8)
            seen += 1
            laptime.Stopwatch().finish_iter()
        it.reset()
    assert seen == 10
    results = laptime.Stopwatch().results()
    # One wait per batch, and each epoch's last next() (StopIteration).
    assert counts(results) == {"data wait": 12}
    assert results["verdict"]["data_name"] == "data wait"
    laptime.dali.instrument(it, "dali wait")  # again: renamed, not timed twice
    next(it)
    it.next()
    assert counts(laptime.Stopwatch().results()) == {"data wait": 12, "dali wait": 2}


class SlowIterator:
    """Written like DALI's framework iterators: __next__, next(), __iter__ returning self."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        time.sleep(0.002)
        return self.n

    def next(self):
        return self.__next__()

    def __len__(self):
        return self.n


def test_a_duck_typed_iterator_is_timed_the_same_way():
    laptime.Stopwatch().enable(0)
    it = laptime.dali.instrument(SlowIterator(3))
    assert isinstance(it, SlowIterator) and len(it) == 3
    assert list(it) == [2, 1, 0]
    wait = measurement(laptime.Stopwatch().results(), "data wait")
    assert wait["count"] == 4 and wait["median_s"] >= 0.0019


def test_a_generator_comes_back_wrapped_and_timed():
    laptime.Stopwatch().enable(0)
    it = laptime.dali.instrument((i for i in range(3)), "gen wait", data_name=False)
    assert list(it) == [0, 1, 2]
    results = laptime.Stopwatch().results()
    assert counts(results) == {"gen wait": 4}
    assert results["verdict"]["data_name"] in (None, "")  # not chosen: no default name seen
    assert laptime.dali.instrument(it, "again") is it  # renamed, not wrapped again


def test_instrument_takes_an_iterator_only():
    with pytest.raises(TypeError, match="iterator"):
        laptime.dali.instrument([1, 2])
