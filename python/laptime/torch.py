"""One line to see inside a PyTorch DataLoader: ``loader = laptime.torch.instrument(loader)``.

Times, with no change to the Dataset (docs/workers.md, "One line: laptime.torch.instrument"):

- ``"load sample"``: each sample's ``__getitem__`` (an IterableDataset: each ``next()`` of its
  iterator), in the process that ran it: a worker process (its figures merged into the main
  report, per worker) or the main process with ``num_workers=0``. A Dataset with a batched
  ``__getitems__`` (torch's ``Subset``, ``StackDataset``, or the user's) is timed per call of it,
  as ``"load samples (batched)"``.
- ``"collate"``: the collate function (the user's own or torch's default), where it runs.
- ``"data wait"``: the main process's wait in ``next()`` for the next batch; the name the report's
  bottleneck verdict reads as the data wait (``Stopwatch.set_data_name``; ``LAPTIME_DATA_NAME``
  still wins).
- ``"pin memory"``: torch's pinning of a batch, where the loader pins (``pin_memory=True`` and an
  accelerator), on whichever thread pins it.

The loader returned is the same object, its class swapped for a subclass of it (``isinstance``
holds) whose ``__iter__`` times the wait. Its ``collate_fn`` and ``worker_init_fn`` are wrapped
(the user's are kept and called); in each worker the Dataset's copy gets a subclass of its class
that times ``__getitem__``; the main process's Dataset object is never changed. Instrumenting a
loader again changes only its names (nothing is timed twice). Instrument before the first
``iter()`` of a loader with ``persistent_workers``: workers started before keep what they had.

This module imports torch; ``import laptime`` does not.
"""

import functools as _functools
import operator as _operator
import threading
import warnings
from typing import Optional, TypeVar

import torch.utils.data as _data

from ._laptime import Stopwatch

__all__ = ["instrument", "DEFAULT_NAMES"]

DEFAULT_NAMES = {
    "sample": "load sample",
    "batch": "load samples (batched)",
    "collate": "collate",
    "wait": "data wait",
    "pin": "pin memory",
}

_stopwatch = Stopwatch()
_Loader = TypeVar("_Loader", bound=_data.DataLoader)


class _Names:
    """The names one loader is timed under (None: that part is not timed). Shared by the loader,
    its collate and worker_init wrappers, and pickled with them to spawned workers, so that
    instrumenting again before iterating renames everything at once."""

    __slots__ = tuple(DEFAULT_NAMES) + ("label_workers",)

    def __init__(self, names, label_workers):
        self.update(names, label_workers)

    def update(self, names, label_workers):
        for key, value in names.items():
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"laptime.torch.instrument: {key}= must be a non-empty str or "
                                f"None, not {value!r}")
            setattr(self, key, value)
        self.label_workers = bool(label_workers)

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            setattr(self, k, v)


# The threads inside a timed sample now: a Dataset that calls ``self[j]`` from ``__getitem__``
# (retry on a bad sample) is timed once, at the outer call (starting a name running on the same
# thread is a usage error). A set of thread ids, not a threading.local: an attribute of one costs
# ~150 ns a set on the build machine, the set ~40 ns an operation.
_inside = set()
_thread_id = threading.get_ident


_start, _end, _discard = _stopwatch.start_meas, _stopwatch.end_meas, _stopwatch.discard_meas


def _timed(call, name_of):
    """A method ``timed(self, arg)``: ``call(self, arg)`` timed under ``name_of(self)`` (None:
    not timed), unless this thread is timing a sample already. The timed ``__getitem__``,
    ``__getitems__`` and iterator ``__next__`` all are one of these: they run once per sample,
    so no ``*args`` and no ``with`` (bench/integrations_bench.py)."""
    inside, enter, leave = _inside, _inside.add, _inside.discard

    def timed(self, arg=None):
        name = name_of(self)
        thread = _thread_id()
        if name is None or thread in inside:
            return call(self, arg)
        enter(thread)
        _start(name)
        stop = _end
        try:
            return call(self, arg)
        except StopIteration:  # the data ran out: no sample was made, nothing to count
            stop = _discard
            raise
        finally:
            stop(name)
            leave(thread)

    return timed


class _TimedIterator:
    """A dataset's iterator whose ``next()`` is timed as ``name`` (an IterableDataset's sample)."""

    __slots__ = ("_next", "_name")

    def __init__(self, iterator, name):
        self._next = iterator.__next__
        self._name = name

    def __iter__(self):
        return self

    __next__ = _timed(lambda self, _: self._next(), _operator.attrgetter("_name"))


# Per Dataset class, its timed subclass (made in the worker process, once per class).
_timed_classes = {}


def _timed_class(cls):
    """A subclass of ``cls`` whose ``__getitem__`` (``__getitems__``, ``__iter__``) is timed
    under the names the instance carries in ``_laptime_names``."""
    if getattr(cls, "_laptime_timed", False):
        return cls
    made = _timed_classes.get(cls)
    if made is not None:
        return made
    body = {"_laptime_timed": True, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    if issubclass(cls, _data.IterableDataset):
        def __iter__(self):
            return _TimedIterator(cls.__iter__(self), self._laptime_names.sample)
        body["__iter__"] = __iter__
    else:
        body["__getitem__"] = _timed(cls.__getitem__,
                                     _operator.attrgetter("_laptime_names.sample"))
        if callable(getattr(cls, "__getitems__", None)):
            body["__getitems__"] = _timed(cls.__getitems__,
                                          _operator.attrgetter("_laptime_names.batch"))
    made = type(cls)(cls.__name__, (cls,), body)
    _timed_classes[cls] = made
    return made


def _time_dataset_in_worker(dataset, names):
    """Times this worker's copy of the Dataset (its class swapped for the timed subclass); the
    main process's object is another one. A Dataset whose class cannot be swapped (``__slots__``
    without ``__dict__``, an extension type) is left untimed, with one warning."""
    try:
        dataset.__dict__["_laptime_names"] = names
        dataset.__class__ = _timed_class(type(dataset))
    except (AttributeError, TypeError) as e:
        warnings.warn(f"laptime.torch.instrument: samples of {type(dataset).__name__} are not "
                      f"timed ({e})", RuntimeWarning, stacklevel=2)


class _WorkerInit:
    """The loader's ``worker_init_fn``: in each worker, labels it ("loader worker 3" in the
    report), times its Dataset copy, then calls the user's ``worker_init_fn``."""

    def __init__(self, user_fn, names):
        self.user_fn = user_fn
        self.names = names

    def __call__(self, worker_id):
        info = _data.get_worker_info()
        if self.names.label_workers:
            _stopwatch.set_worker_label(f"loader worker {worker_id}")
        if info is not None and (self.names.sample or self.names.batch):
            _time_dataset_in_worker(info.dataset, self.names)
        if self.user_fn is not None:
            self.user_fn(worker_id)


class _TimedCollate:
    """The loader's ``collate_fn``: the user's (or torch's default) timed as "collate"."""

    def __init__(self, collate_fn, names):
        self.collate_fn = collate_fn
        self.names = names

    def __call__(self, batch):
        name = self.names.collate
        if name is None:
            return self.collate_fn(batch)
        _stopwatch.start_meas(name)
        try:
            return self.collate_fn(batch)
        finally:
            _stopwatch.end_meas(name)


class _TimedView:
    """The main process's Dataset as the single-process fetcher sees it (``num_workers=0``):
    ``dataset[i]`` timed; the user's object untouched."""

    def __init__(self, dataset, names):
        self._dataset = dataset
        self._names = names
        self._getitem = dataset.__getitem__
        if callable(getattr(dataset, "__getitems__", None)):
            self.__getitems__ = _functools.partial(_TimedView._getitems, self)

    __getitem__ = _timed(lambda self, index: self._getitem(index),
                         _operator.attrgetter("_names.sample"))
    _getitems = _timed(lambda self, indices: self._dataset.__getitems__(indices),
                       _operator.attrgetter("_names.batch"))

    def __len__(self):
        return len(self._dataset)

    def __getattr__(self, attr):
        return getattr(self._dataset, attr)


def _time_main_process_samples(iterator, names):
    """``num_workers=0``: the samples are fetched by the iterator's fetcher in this process."""
    fetcher = getattr(iterator, "_dataset_fetcher", None)
    if fetcher is None:
        return
    if hasattr(fetcher, "dataset_iter"):  # an IterableDataset: its iterator was made already
        if not isinstance(fetcher.dataset_iter, _TimedIterator) and names.sample:
            fetcher.dataset_iter = _TimedIterator(fetcher.dataset_iter, names.sample)
    elif not isinstance(fetcher.dataset, _TimedView):
        fetcher.dataset = _TimedView(fetcher.dataset, names)


class _WaitTimed:
    """The loader's iterator whose ``next()`` is timed as the data wait; everything else is the
    iterator's (``len``, ``_reset`` of persistent workers, ...)."""

    def __init__(self, iterator, names):
        self._laptime_iterator = iterator
        self._laptime_next = iterator.__next__
        self._laptime_names = names

    def __iter__(self):
        return self

    def __next__(self):
        name = self._laptime_names.wait
        if name is None:
            return self._laptime_next()
        _start(name)
        stop = _end
        try:
            return self._laptime_next()
        except StopIteration:  # the epoch's end (and the join of its workers): no batch waited for
            stop = _discard
            raise
        finally:
            stop(name)

    def __len__(self):
        return len(self._laptime_iterator)

    def __getattr__(self, attr):
        return getattr(self._laptime_iterator, attr)


def _iter(self):
    """The instrumented loader's ``__iter__``: torch's, its iterator's wait timed."""
    iterator = super(self._laptime_class, self).__iter__()
    if isinstance(iterator, _WaitTimed):  # a subclass of an instrumented class
        return iterator
    names = self.__dict__.get("_laptime_names")
    if names is None:  # built as type(loader)(...): Lightning rebuilds a loader to add a sampler
        names = _names_of(self)
    if self.num_workers == 0 and (names.sample or names.batch):
        _time_main_process_samples(iterator, names)
    return _WaitTimed(iterator, names)


def _names_of(loader):
    """The names of a loader of an instrumented class that ``instrument`` did not see: those its
    wrapped collate_fn or worker_init_fn carry (its arguments came from an instrumented loader),
    else the defaults; the loader is instrumented with them (nothing is wrapped twice)."""
    for part in (loader.collate_fn, loader.worker_init_fn):
        if isinstance(part, (_TimedCollate, _WorkerInit)):
            names = part.names
            break
    else:
        names = _Names(DEFAULT_NAMES, True)
    loader._laptime_names = names
    instrument(loader, **{key: getattr(names, key) for key in DEFAULT_NAMES},
               label_workers=names.label_workers, data_name=False)
    return names


# Per DataLoader class, its instrumented subclass.
_loader_classes = {}


def _loader_class(cls):
    made = _loader_classes.get(cls)
    if made is None:
        made = type(cls)(cls.__name__, (cls,), {"__iter__": _iter, "__module__": cls.__module__,
                                           "__qualname__": cls.__qualname__,
                                           "_laptime_instrumented": True})
        made._laptime_class = made
        _loader_classes[cls] = made
    return made


_pin_patch = threading.Lock()


def _time_pin_memory():
    """Times torch's ``pin_memory`` (the one function both the pin thread and a single-process
    loader call, through its module); nested calls for a batch's parts are inside the outer one.
    Process-wide, once: every pinning loader's pinning counts under the first pin name."""
    from torch.utils.data._utils import pin_memory as module

    with _pin_patch:
        original = module.pin_memory
        if getattr(original, "_laptime_timed", None) is not None:
            return original
        local = threading.local()

        def pin_memory(data, *args, **kwargs):
            if getattr(local, "inside", False):
                return original(data, *args, **kwargs)
            local.inside = True
            name = pin_memory._laptime_timed
            _stopwatch.start_meas(name)
            try:
                return original(data, *args, **kwargs)
            finally:
                _stopwatch.end_meas(name)
                local.inside = False

        pin_memory._laptime_timed = DEFAULT_NAMES["pin"]
        module.pin_memory = pin_memory
    return pin_memory


def instrument(loader: _Loader, *, sample: Optional[str] = DEFAULT_NAMES["sample"],
               batch: Optional[str] = DEFAULT_NAMES["batch"],
               collate: Optional[str] = DEFAULT_NAMES["collate"],
               wait: Optional[str] = DEFAULT_NAMES["wait"],
               pin: Optional[str] = DEFAULT_NAMES["pin"],
               label_workers: bool = True, data_name: bool = True) -> _Loader:
    """Times ``loader``'s samples, collate, the main process's wait and pinning (the names above;
    None leaves a part untimed) and returns ``loader`` itself::

        loader = laptime.torch.instrument(DataLoader(ds, num_workers=8, collate_fn=my_collate))
        laptime.Stopwatch().enable(10)
        for batch in loader:
            ...

    ``label_workers``: each worker's figures carry "loader worker N" (a ``worker_init_fn`` of the
    user's may set its own label after). ``data_name``: the verdict reads ``wait`` as the data
    wait (``Stopwatch.set_data_name``). Works for any ``num_workers``, ``persistent_workers``,
    fork, spawn and forkserver, map-style and iterable Datasets. A second call renames (nothing
    is wrapped twice)."""
    if not isinstance(loader, _data.DataLoader):
        raise TypeError(f"laptime.torch.instrument takes a torch.utils.data.DataLoader, not "
                        f"{type(loader).__name__}")
    given = dict(sample=sample, batch=batch, collate=collate, wait=wait, pin=pin)
    names = loader.__dict__.get("_laptime_names")
    if names is None:
        names = _Names(given, label_workers)
    else:
        names.update(given, label_workers)
    if not isinstance(loader.collate_fn, _TimedCollate):
        loader.collate_fn = _TimedCollate(loader.collate_fn, names)
    if not isinstance(loader.worker_init_fn, _WorkerInit):
        loader.worker_init_fn = _WorkerInit(loader.worker_init_fn, names)
    if not getattr(type(loader), "_laptime_instrumented", False):
        loader.__class__ = _loader_class(type(loader))
    loader._laptime_names = names
    if pin is not None and loader.pin_memory:
        _time_pin_memory()._laptime_timed = pin
    if data_name and wait is not None:
        _stopwatch.set_data_name(wait)
    return loader
