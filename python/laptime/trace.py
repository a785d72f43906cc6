"""``laptime trace run.json -o run.trace.json``: the recorded intervals as Chrome's Trace Event
Format (JSON object form), which ui.perfetto.dev and chrome://tracing open.

One process (the run's pid, named after host and rank), one track per thread (its tid and OS
name), an ``"X"`` complete event per interval with the start and duration as measured (so
intervals nest on a track as they nested in the program), and an instant ``"i"`` event at each
iteration end. Timestamps are microseconds (floats keep the nanoseconds) from the first recorded
event, so that the viewer's time axis starts at 0.
"""

import json
import sys


def add_arguments(parser):
    parser.add_argument("file", metavar="RUN.json", help="laptime JSON results with samples")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.trace.json")


def events(results):
    """The trace's events (a list of dicts) for ``results`` (a dict of laptime's JSON)."""
    from laptime.samples import intervals, samples_of

    s = samples_of(results)
    pid = results.get("pid", 0)
    warmup = results.get("num_warmup_iters", 0)
    ivs = intervals(s)
    starts = [iv.start_ns for iv in ivs] + [t for _, t in s.get("iterations", [])]
    origin = min(starts) if starts else 0
    us = lambda ns: (ns - origin) / 1e3  # noqa: E731
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": f"laptime {results.get('host', '')} rank {results.get('rank', 0)}"}}]
    named = set()
    for iv in ivs:
        if iv.tid not in named:
            named.add(iv.tid)
            label = f"{iv.thread} ({iv.tid})" if iv.thread else f"thread {iv.tid}"
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": iv.tid,
                        "args": {"name": label}})
    # Longer first at equal starts: a viewer nests an event in the one before it.
    for iv in sorted(ivs, key=lambda v: (v.tid, v.start_ns, -v.dur_ns)):
        out.append({"ph": "X", "name": iv.name, "cat": "laptime", "pid": pid, "tid": iv.tid,
                    "ts": us(iv.start_ns), "dur": iv.dur_ns / 1e3,
                    "args": {"iteration": iv.iter, "warmup": iv.iter < warmup}})
    for it, end in s.get("iterations", []):
        out.append({"ph": "i", "s": "p", "name": f"iteration {it} end", "cat": "iteration",
                    "pid": pid, "tid": 0, "ts": us(end), "args": {"iteration": it}})
    return out


def trace(results):
    """The whole trace document (a dict)."""
    return {"traceEvents": events(results), "displayTimeUnit": "ms",
            "otherData": {"source": "laptime", "clock": "steady_clock"}}


def run(args):
    from laptime.cli import check_outputs, is_stdout
    from laptime.results import printable, read

    check_outputs([args.output], [args.file])
    doc = trace(read(args.file, samples=True))
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(doc, f)
    except OSError as e:  # a full disk fails the write or the close: name the file
        raise OSError(e.errno, e.strerror, args.output) from None
    n = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    # On stderr where the trace itself went to stdout (-o /dev/stdout | jq): it stays JSON.
    print(f"laptime trace: {n} intervals -> {printable(args.output)} (open in ui.perfetto.dev)",
          file=sys.stderr if is_stdout(args.output) else sys.stdout)
    return 0
