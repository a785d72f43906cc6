"""One line to time a DALI iterator's wait: ``it = laptime.dali.instrument(it)``.

Each ``next()`` of the iterator (``for batch in it``, ``next(it)``, ``it.next()``) is timed as
``"data wait"``, the name the report's bottleneck verdict reads as the loop's wait for data
(``Stopwatch.set_data_name``; ``LAPTIME_DATA_NAME`` still wins). Works with DALI's framework
iterators (``DALIGenericIterator``, ``DALIClassificationIterator``, ``DALIRaggedIterator``) and
any iterator written like them: the object returned is the same one, its class swapped for a
subclass of it (``isinstance`` holds; ``reset()``, ``len()`` and the rest are its own). An
iterator whose class cannot be swapped (a generator, an extension type) comes back wrapped in an
object that forwards everything else to it. The last ``next()`` of an epoch, the one that raises
``StopIteration``, is timed too: the loop waits for it.

This module imports no DALI (docs/workers.md, "One line: laptime.dali.instrument").
"""

from typing import Iterator, Optional, TypeVar

from ._laptime import Stopwatch

__all__ = ["instrument", "DEFAULT_WAIT"]

DEFAULT_WAIT = "data wait"

_stopwatch = Stopwatch()
_It = TypeVar("_It", bound=Iterator)


def _timed_next(self):
    name = self._laptime_wait
    if name is None:
        return self._laptime_next()
    _stopwatch.start_meas(name)
    try:
        return self._laptime_next()
    finally:
        _stopwatch.end_meas(name)


# Per iterator class, its subclass with next() timed.
_classes = {}


def _timed_class(cls):
    made = _classes.get(cls)
    if made is None:
        next_of_class = cls.__next__

        def _laptime_next(self):
            return next_of_class(self)

        made = type(cls)(cls.__name__, (cls,), {
            "__next__": _timed_next, "_laptime_next": _laptime_next, "_laptime_timed": True,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__})
        _classes[cls] = made
    return made


class _Wrapped:
    """An iterator whose class cannot be swapped, its ``next()`` timed."""

    def __init__(self, iterator, name):
        self._laptime_iterator = iterator
        self._laptime_wait = name

    def _laptime_next(self):
        return next(self._laptime_iterator)

    __next__ = _timed_next
    next = _timed_next

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._laptime_iterator)

    def __getattr__(self, attr):
        return getattr(self._laptime_iterator, attr)


def instrument(iterator: _It, wait: Optional[str] = DEFAULT_WAIT, *,
               data_name: bool = True) -> _It:
    """Times each ``next()`` of ``iterator`` as ``wait`` (None: not timed) and returns it::

        it = laptime.dali.instrument(DALIGenericIterator([pipe], ["images", "labels"]))
        for batch in it:
            ...

    ``data_name``: the verdict reads ``wait`` as the data wait (``Stopwatch.set_data_name``).
    Instrumenting again renames; nothing is timed twice."""
    if wait is not None and (not isinstance(wait, str) or not wait):
        raise TypeError(f"laptime.dali.instrument: wait= must be a non-empty str or None, "
                        f"not {wait!r}")
    if not callable(getattr(type(iterator), "__next__", None)):
        raise TypeError(f"laptime.dali.instrument takes an iterator (an object with __next__), "
                        f"not {type(iterator).__name__}")
    if isinstance(iterator, _Wrapped) or getattr(type(iterator), "_laptime_timed", False):
        if isinstance(iterator, _Wrapped):
            iterator._laptime_wait = wait
        else:
            iterator.__dict__["_laptime_wait"] = wait
    else:
        try:
            iterator.__dict__["_laptime_wait"] = wait
            iterator.__class__ = _timed_class(type(iterator))
        except (AttributeError, TypeError):
            iterator = _Wrapped(iterator, wait)
    if data_name and wait is not None:
        _stopwatch.set_data_name(wait)
    return iterator
