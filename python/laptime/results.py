"""Reading laptime's JSON results from a file, checked, for every ``laptime`` subcommand.

``read(path)`` returns the results (a dict, schema 1) or raises ``ResultsError`` whose message
names the file and what is wrong with it, in one line: a file that is missing, a folder, empty,
not UTF-8, not JSON (truncated, ``NaN``, nested too deeply), JSON that is not one run's results
(another schema, a merged report, a trace), or results whose fields have the wrong types, including
a ``samples`` section whose intervals do not match its ``fields``. The ``laptime`` command turns a
``ResultsError`` into that line on stderr and exit status 2 (``cli.main``), so the subcommands read
their inputs with ``read`` and handle no error themselves.

Only the fields the tools read are checked; keys this version does not know are left alone (the
schema may grow, docs/reports.md).
"""

import json
import math
import re

SCHEMA = 1

# The largest file read: a run's results, recorded intervals included, are far below it.
MAX_BYTES = 1 << 30

# The largest figure accepted (seconds, percent, cores, MB/s): laptime's are far below it, and the
# tools' arithmetic on larger ones overflows.
MAX_FIGURE = 1e12

# The interval fields the tools read; a ``samples`` section may list more.
SAMPLE_FIELDS = ("name", "start_ns", "dur_ns", "iter")

NO_SAMPLES = ("no recorded intervals: run with LAPTIME_RECORD=N "
              "(or Stopwatch().enable_recording(N))")

# Figures laptime writes as a number, or null where it could not measure one.
_MEASUREMENT_FIGURES = ("total_s", "mean_per_iter_s", "mean_per_interval_s", "min_s", "median_s",
                        "p90_s", "p99_s", "max_s")
_SECTION_FIGURES = {
    "cpu": ("process_percent", "process_cores", "main_cores", "system_percent"),
    "io": ("read_mb_per_s", "write_mb_per_s", "rchar_mb_per_s", "wchar_mb_per_s"),
}
_COUNTS = ("rank", "world_size", "pid", "num_warmup_iters", "iterations_measured")

# JSON a user may pass by mistake, recognised by a key laptime's results do not have.
_OTHER_DOCUMENTS = {
    "merged": "a merged report (laptime merge --json), not one run's results",
    "traceEvents": "a Chrome trace (laptime trace), not laptime's results",
}


class ResultsError(ValueError):
    """Input the laptime tools cannot read: the message says which and what is wrong."""


def read(path, samples=False):
    """The checked results in the JSON file ``path``; with ``samples``, they must hold recorded
    intervals (``laptime plot`` and ``trace`` draw nothing else)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ResultsError(f"{path}: {_lower_first(e.strerror or str(e))}") from None
    if len(data) > MAX_BYTES:  # /dev/zero, a log: nothing laptime writes is that large
        raise ResultsError(f"{path}: larger than {MAX_BYTES >> 30} GiB, not laptime's results")
    results = _parse(data, path)
    if re.search(rb"\\u[dD][89a-fA-F]", data):  # a surrogate's escape: rare, so looked at then only
        results = _without_lone_surrogates(results)
    results = check(results, path)
    if samples and not results.get("samples"):
        raise ResultsError(f"{path}: {NO_SAMPLES}")
    return results


def _without_lone_surrogates(value):
    """``value`` with each string that holds a lone surrogate (JSON's "\\ud800", which no
    encoding can write: matplotlib and UTF-8 files refuse it) in its escaped form."""
    if isinstance(value, str):
        if any("\ud800" <= c <= "\udfff" for c in value):
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_lone_surrogates(v) for k, v in value.items()}
    return value


def check(results, source="results"):
    """``results`` itself when it is laptime's results as the tools read them, else a
    ``ResultsError`` that names ``source`` and the first field that is wrong."""
    try:
        _check_results(results)
    except _Wrong as e:
        where, what = e.args
        raise ResultsError(f"{source}: {where}{': ' if where else ''}{what}") from None
    return results


class _Wrong(Exception):
    """(where, what): the field that is wrong, and how."""


def _check_results(results):
    if not isinstance(results, dict):
        raise _Wrong("", f"not laptime results (a JSON {_kind(results)}, not an object)")
    for key, what in _OTHER_DOCUMENTS.items():
        if key in results:
            raise _Wrong("", what)
    if "schema" not in results:
        keys = ", ".join(list(results)[:5]) or "none"
        raise _Wrong("", f"not laptime results (no \"schema\" key; keys: {keys})")
    if results["schema"] != SCHEMA:
        raise _Wrong("", f"schema {_show(results['schema'])}, but this laptime reads schema "
                         f"{SCHEMA}")
    for key in _COUNTS:
        _count(results, key, "")
    _typed(results, "host", str, "")
    for i, m in enumerate(_list_of_objects(results, "measurements")):
        where = f"measurements[{i}]"
        _name(m, where)
        _count(m, "count", where)
        for key in _MEASUREMENT_FIGURES:
            _figure(m, key, where)
        _typed(m, "running", bool, where)
        for section, keys in _SECTION_FIGURES.items():
            if m.get(section) is not None:
                inner = _typed(m, section, dict, where)
                for key in keys:
                    _figure(inner, key, f"{where}.{section}")
    for i, o in enumerate(_list_of_objects(results, "one_time")):
        _name(o, f"one_time[{i}]")
        _figure(o, "duration_s", f"one_time[{i}]")
        _typed(o, "running", bool, f"one_time[{i}]")
    if results.get("verdict") is not None:
        _typed(_typed(results, "verdict", dict, ""), "text", str, "verdict")
    if results.get("slow_tail") is not None:
        _check_tail(_typed(results, "slow_tail", dict, ""))
    if results.get("samples") is not None:
        _check_samples(_typed(results, "samples", dict, ""))


def _check_tail(t):
    """The slow tail (``slow_tail``): its counts and figures, each slow iteration and cause."""
    for key in ("iterations", "over_3x_median"):
        _count(t, key, "slow_tail")
    for key in ("median_s", "p99_s"):
        _figure(t, key, "slow_tail")
    _typed(t, "tail_bound", bool, "slow_tail")
    for i, s in enumerate(_list_of_objects(t, "slowest", "slow_tail")):
        where = f"slow_tail.slowest[{i}]"
        _count(s, "iteration", where)
        _figure(s, "time_s", where)
        for j, c in enumerate(_list_of_objects(s, "causes", where)):
            at = f"{where}.causes[{j}]"
            _name(c, at)
            for key in ("time_s", "median_s"):
                _figure(c, key, at)
            _figure(c, "over_median_s", at, signed=True)  # a difference
            for key in ("tid", "threads"):
                _count(c, key, at)
            _typed(c, "thread", str, at)


def _check_samples(s):
    _count(s, "capacity", "samples")
    fields = s.get("fields")
    if (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)
            or len(set(fields)) != len(fields)):
        raise _Wrong("samples.fields", f"{_show(fields)}, not a list of distinct field names")
    missing = [f for f in SAMPLE_FIELDS if f not in fields]
    if missing:
        raise _Wrong("samples.fields", f"{json.dumps(fields)} lacks {', '.join(missing)}")
    column = {f: fields.index(f) for f in SAMPLE_FIELDS}
    names = s.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _Wrong("samples.names", f"{_show(names)}, not a list of names")
    _not_null(s, "iterations", "samples")
    for i, pair in enumerate(_typed(s, "iterations", list, "samples") or []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) for v in pair)):
            raise _Wrong(f"samples.iterations[{i}]", f"{_show(pair)}, not [iteration, end_ns]")
    threads = s.get("threads")
    if not isinstance(threads, list):
        raise _Wrong("samples.threads", f"{_show(threads)}, not a list")
    for t, thread in enumerate(threads):
        where = f"samples.threads[{t}]"
        if not isinstance(thread, dict):
            raise _Wrong(where, f"{_show(thread)}, not an object")
        if not _is_int(thread.get("tid")):
            raise _Wrong(f"{where}.tid", f"{_show(thread.get('tid'))}, not an integer")
        _typed(thread, "name", str, where)
        intervals = thread.get("intervals")
        if not isinstance(intervals, list):
            raise _Wrong(f"{where}.intervals", f"{_show(intervals)}, not a list")
        for k, iv in enumerate(intervals):
            at = f"{where}.intervals[{k}]"
            if not isinstance(iv, list):
                raise _Wrong(at, f"{_show(iv)}, not a list")
            if len(iv) != len(fields):
                raise _Wrong(at, f"{len(iv)} values where samples.fields names {len(fields)} "
                                 f"{json.dumps(fields)}")
            values = {f: iv[column[f]] for f in SAMPLE_FIELDS}
            # Times are in the clock's epoch (any integer); the rest counts from 0.
            for f, v in values.items():
                if not _is_int64(v) or (f != "start_ns" and v < 0):
                    bound = "" if f == "start_ns" else " >= 0"
                    raise _Wrong(at, f"{f} {_show(v)}, not an integer{bound}")
            if values["name"] >= len(names):
                raise _Wrong(at, f"name {values['name']} indexes none of the {len(names)} names")


def _parse(data, path):
    if not data.strip():
        raise ResultsError(f"{path}: empty file, not JSON")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        guess = "a binary file?" if b"\0" in data[:4096] else "text in another encoding?"
        raise ResultsError(f"{path}: not UTF-8 (byte 0x{data[e.start]:02x} at offset "
                           f"{e.start}): {guess}") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        end = "it ends early (truncated?) at" if e.pos >= len(text.rstrip()) else f"{e.msg} at"
        raise ResultsError(f"{path}: not JSON: {end} line {e.lineno} column {e.colno}") from None
    except _Constant as e:
        raise ResultsError(f"{path}: not JSON: {e} is not a JSON number "
                           "(laptime writes null for a figure it could not measure)") from None
    except RecursionError:
        raise ResultsError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as e:  # an integer longer than Python converts
        raise ResultsError(f"{path}: not JSON laptime reads: {e}") from None


class _Constant(Exception):
    pass


def _no_constant(name):
    raise _Constant(name)


def _list_of_objects(obj, key, where=""):
    _not_null(obj, key, where)
    items = _typed(obj, key, list, where) or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Wrong(f"{_join(where, key)}[{i}]", f"{_show(item)}, not an object")
    return items


def _not_null(obj, key, where):
    """A list laptime always writes (an empty one at least) must not be null."""
    if key in obj and obj[key] is None:
        raise _Wrong(_join(where, key), "null, not a list")


def _typed(obj, key, kind, where):
    """``obj[key]`` (None when absent), which must be a ``kind`` when present."""
    v = obj.get(key)
    if v is not None and (not isinstance(v, kind) or (kind is not bool and isinstance(v, bool))):
        raise _Wrong(_join(where, key), f"{_show(v)}, not {_KIND_NAMES[kind]}")
    return v


def _name(obj, where):
    if not isinstance(obj.get("name"), str):
        raise _Wrong(_join(where, "name"), f"{_show(obj.get('name'))}, not a string")


def _count(obj, key, where):
    """An integer where the key is there (laptime writes counts as int64: never null)."""
    if key in obj and not _is_int64(obj[key]):
        raise _Wrong(_join(where, key), f"{_show(obj[key])}, not an integer")


def _figure(obj, key, where, signed=False):
    v = obj.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Wrong(_join(where, key), f"{_show(v)}, not a number")
    try:
        finite = math.isfinite(v)
    except OverflowError:  # an integer too long for a float
        finite = False
    if not finite:
        raise _Wrong(_join(where, key), f"{_show(v)}, not a finite number")
    if not (-MAX_FIGURE if signed else 0) <= v <= MAX_FIGURE:  # times, shares, rates: never < 0
        raise _Wrong(_join(where, key), f"{_show(v)}, not a figure laptime writes (0 to "
                                        f"{MAX_FIGURE:g})")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int64(v):
    """An integer as laptime writes them (int64): a longer one is not from laptime."""
    return _is_int(v) and -(1 << 63) <= v < (1 << 63)


def _join(where, key):
    return f"{where}.{key}" if where else key


_KIND_NAMES = {str: "a string", bool: "true or false", dict: "an object", list: "a list"}


def _kind(v):
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number")


def _show(v):
    """A short picture of a JSON value for a one-line message."""
    try:
        text = json.dumps(v, ensure_ascii=False, allow_nan=False)
    except (ValueError, RecursionError):  # NaN or infinity; a structure nested deeply
        text = repr(v) if isinstance(v, float) else f"a JSON {_kind(v)}"
    return text if len(text) <= 40 else text[:37] + "..."


def _lower_first(text):
    return text[:1].lower() + text[1:]


def printable(text):
    """``text`` on one line: a control character (a newline or an escape in a name or a host) shown
    escaped, so that a file's text can never forge a line of a report or drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
