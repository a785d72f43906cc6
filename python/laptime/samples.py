"""Reading the recorded intervals of laptime's JSON (``"samples"``, from ``enable_recording`` or
``LAPTIME_RECORD=N``), shared by ``laptime plot``, ``trace``, ``html`` and the gate of
``compare --fail-above``.

The section is compact: names once, then one array per interval::

    "samples": {"clock": "steady_clock_ns", "capacity": 4096,
                "fields": ["name", "start_ns", "dur_ns", "iter"], "unrecorded": 0,
                "names": ["data fetch", "Training step"],
                "iterations": [[0, 1234567890], ...],          # [iteration, end_ns]
                "threads": [{"tid": 4242, "name": "loader-0",
                             "intervals": [[0, 1234000000, 52000, 0], ...]}]}

``iter`` is the iteration in which the interval ended (``finish_iter`` calls before its end);
iterations below ``num_warmup_iters`` are warm-up. Intervals are in the order they ended.
``laptime.results.read`` checks the section (every interval matches ``fields``) before these
functions read it.
"""

from collections import namedtuple

from laptime.results import NO_SAMPLES, SAMPLE_FIELDS, ResultsError

Interval = namedtuple("Interval", "name start_ns dur_ns iter tid thread")


def samples_of(results, what="results"):
    """The ``samples`` section, or a ``ResultsError`` that says how to record them."""
    s = results.get("samples")
    if not s:
        raise ResultsError(f"{what}: {NO_SAMPLES}")
    return s


def intervals(samples):
    """Every recorded interval (``Interval`` tuples), thread by thread, in the order they ended.
    Each interval's values are read at the positions ``fields`` names (it may list more)."""
    names = samples["names"]
    name, start, dur, it = (samples["fields"].index(f) for f in SAMPLE_FIELDS)
    out = []
    for t in samples["threads"]:
        for iv in t["intervals"]:
            out.append(Interval(names[iv[name]], iv[start], iv[dur], iv[it], t["tid"],
                                t.get("name", "")))
    return out


def per_iteration(samples):
    """{name: {iteration: summed seconds}}: what each name cost in each recorded iteration."""
    out = {}
    for iv in intervals(samples):
        per = out.setdefault(iv.name, {})
        per[iv.iter] = per.get(iv.iter, 0.0) + iv.dur_ns / 1e9
    return out


def whole_iterations(results):
    """The measured iterations whose intervals are all still recorded, in order: finished (in
    ``iterations``), past warm-up, and after the oldest interval of any ring that is full (it may
    have overwritten some of that iteration's, and all of those before)."""
    s = results["samples"]
    first = results.get("num_warmup_iters") or 0
    capacity = s.get("capacity")
    for t in s["threads"]:
        kept = intervals({**s, "threads": [t]})
        if kept and capacity is not None and len(kept) >= capacity:
            first = max(first, min(iv.iter for iv in kept) + 1)
    return sorted(k for k, _ in (s.get("iterations") or []) if k >= first)
