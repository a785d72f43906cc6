"""``laptime merge``: one report over the results of every rank of a distributed run.

Each rank of a job writes its own results (``LAPTIME_OUTPUT=results/rank{rank}.json``, or
``Stopwatch().to_json()``); this module lines them up by measurement name and shows, per name, how
the ranks differ: min / median / max across ranks of the mean time per iteration, and the slowest
rank. In data-parallel training every rank waits for the slowest one at the gradient all-reduce,
so the slowest rank's "data fetch" or "Training step" is what the whole job pays.

The same code serves both ways of getting the results together::

    laptime merge results/rank*.json              # the command: files written by each rank
    laptime merge results/rank*.json --json all.json

    from laptime import distributed               # in-process, torch.distributed initialised
    distributed.report()                          # gathers to_json() of every rank, rank 0 prints

``merge(results)`` takes the parsed JSON of each rank (a list of dicts, schema 1) and returns the
merged dict; ``format_report(merged)`` turns it into text. Both are plain functions of their
input, tested with fixtures (``python/tests/test_merge.py``).
"""

import json
import statistics
import sys

from laptime.results import SCHEMA, ResultsError, check, printable, read

# The inputs cannot be merged (not laptime results, nothing to merge); the command reports it as
# it reports any input it cannot read (cli.main).
MergeError = ResultsError


def _spread(per_rank, key):
    """min / median / max of ``key`` over the ranks that have a value, and which rank is where."""
    values = [(r[key], r["rank"]) for r in per_rank if r.get(key) is not None]
    if not values:
        return None
    nums = [v for v, _ in values]
    slowest = max(values, key=lambda vr: (vr[0], -vr[1]))
    fastest = min(values, key=lambda vr: (vr[0], vr[1]))
    return {
        "min": min(nums),
        "median": statistics.median(nums),
        "max": max(nums),
        "slowest_rank": slowest[1],
        "fastest_rank": fastest[1],
        "ranks": len(nums),
    }


def merge(results, ranks=None):
    """Merges the results of several ranks.

    ``results``: a list of dicts as ``Stopwatch().to_json()`` writes them (schema 1, docs/python.md). ``ranks``:
    the rank of each, overriding the ``rank`` key; without it the ``rank`` key is used, or the
    position in the list where two results claim the same rank (files from runs outside a
    launcher all say rank 0).
    """
    if not results:
        raise MergeError("nothing to merge: no results given")
    for i, r in enumerate(results):
        check(r, f"input {i}")
    warnings, kept = _same_runs(results)
    if len(kept) < len(results):  # a file given twice is one rank's run: merged once
        results = [results[i] for i in kept]
        ranks = None if ranks is None else [ranks[i] for i in kept]
    if ranks is None:
        ranks = [r.get("rank", i) for i, r in enumerate(results)]
        if len(set(ranks)) != len(ranks):
            results, ranks, left_out = _without_other_runs(results, ranks)
            warnings += left_out
        if len(set(ranks)) != len(ranks):
            warnings.append(
                f"the inputs claim ranks {ranks}: not unique, numbered by input order instead"
            )
            ranks = list(range(len(results)))
    order = sorted(range(len(results)), key=lambda i: ranks[i])
    world_sizes = sorted({r.get("world_size") for r in results if r.get("world_size") is not None})
    if len(world_sizes) > 1:
        warnings.append(f"the inputs come from different world sizes {world_sizes}")
    if world_sizes and len(results) < world_sizes[-1]:
        warnings.append(f"{len(results)} of {world_sizes[-1]} ranks merged")
    elif world_sizes and len(results) > world_sizes[-1]:
        warnings.append(f"{len(results)} inputs for a world size of {world_sizes[-1]}")
    rank_info = [_rank_info(results[i], ranks[i]) for i in order]
    silent = [ri["rank"] for ri in rank_info if not ri["measured_anything"]]
    if silent:
        warnings.append(
            f"rank(s) {silent} measured nothing: was the Stopwatch enabled there? "
            "(configure_from_env enables it on rank 0 only unless LAPTIME_RANKS=all)"
        )
    # Each rank's entries by name (the first of a name), in first-seen order over the ranks, as
    # each rank's report keeps it: one pass, not a search per name and rank (4096 names of 64
    # ranks took a minute).
    ranked = [(_by_name(results[i].get("measurements", [])), ranks[i]) for i in order]
    ranked_once = [(_by_name(results[i].get("one_time", [])), ranks[i]) for i in order]
    names = list(dict.fromkeys(n for entries, _ in ranked for n in entries))
    one_time = list(dict.fromkeys(n for entries, _ in ranked_once for n in entries))
    return {
        "schema": SCHEMA,
        "merged": True,
        "world_size": world_sizes[-1] if world_sizes else len(results),
        "ranks": rank_info,
        "measurements": [_merged_name(name, ranked, rank_info) for name in names],
        "one_time": [_merged_one_time(name, ranked_once, rank_info) for name in one_time],
        "warnings": warnings,
    }


def _without_other_runs(results, ranks):
    """(results, ranks, [a warning for each left out]) without the inputs of a smaller world
    that claim a rank an input of the largest world claims too: a launcher's own results
    (``torch.multiprocessing.spawn``: rank 0 of a world of 1, written beside rank 0's file as
    ``rank0.<pid>.json``) that a ``rank*.json`` pattern picked up. Numbering the inputs by
    their order instead would give every rank another's number."""
    sizes = [r.get("world_size") for r in results]
    largest = max((s for s in sizes if s is not None), default=None)
    if largest is None or largest < 2:
        return results, ranks, []
    claimed = {k for k, s in zip(ranks, sizes) if s == largest}
    keep = [i for i, (k, s) in enumerate(zip(ranks, sizes)) if s == largest or k not in claimed]
    left = [
        f"an input of world size {sizes[i]} (host {results[i].get('host')}, pid "
        f"{results[i].get('pid')}) claims rank {ranks[i]} of the world of {largest}: left out "
        "(a launcher's own results, written beside rank 0's file?)"
        for i in range(len(results)) if i not in keep
    ]
    return [results[i] for i in keep], [ranks[i] for i in keep], left


def _same_runs(results):
    """([a warning for each input identical to an earlier one], [the positions of the others]):
    a file given twice is one rank's run, not two ranks' (two runs never agree in every figure)."""
    seen, warnings, kept = {}, [], []
    for i, r in enumerate(results):
        key = json.dumps(r, sort_keys=True)
        if key in seen:
            warnings.append(f"inputs {seen[key]} and {i} are the same run (identical results; "
                            f"host {r.get('host')}, pid {r.get('pid')}): merged once; was a file "
                            "given twice?")
        else:
            seen[key] = i
            kept.append(i)
    return warnings, kept


def _rank_info(r, rank):
    """What the merged result says about one rank's input."""
    return {
        "rank": rank,
        "host": r.get("host"),
        "pid": r.get("pid"),
        "num_warmup_iters": r.get("num_warmup_iters"),
        "iterations_measured": r.get("iterations_measured", 0),
        "measured_anything": bool(r.get("measurements") or r.get("one_time")
                                  or r.get("iterations_measured")),
    }


def _per_rank(m, rank):
    """One rank's figures of one name."""
    cpu = m.get("cpu") or {}
    return {
        "rank": rank,
        "count": m.get("count", 0),
        "mean_per_iter_s": m.get("mean_per_iter_s"),
        "mean_per_interval_s": m.get("mean_per_interval_s"),
        "median_s": m.get("median_s"),
        "max_s": m.get("max_s"),
        "total_s": m.get("total_s"),
        "running": m.get("running", False),
        "cpu_process_percent": cpu.get("process_percent"),
        "cpu_process_cores": cpu.get("process_cores"),
        "cpu_system_percent": cpu.get("system_percent"),
    }


def _by_name(entries):
    """{name: entry}, the first entry of each name, in their order."""
    found = {}
    for e in entries:
        found.setdefault(e["name"], e)
    return found


def _merged_name(name, ranked, rank_info):
    """One name over the ranks (``ranked``: each rank's measurements by name, and its rank): each
    rank's figures, the ranks that lack it, the spreads."""
    per_rank = []
    for measurements, rank in ranked:
        m = measurements.get(name)
        # A name a rank timed in its warm-up only has count 0 and zero means there: no figures
        # of that rank (one still running is, for the flag below).
        if m is not None and (m.get("count", 0) > 0 or m.get("running", False)):
            per_rank.append(_per_rank(m, rank))
    entry = {
        "name": name,
        "per_rank": per_rank,
        "missing_ranks": _missing_ranks(rank_info, per_rank),
        "count": _spread(per_rank, "count"),
        "mean_per_iter_s": _spread(per_rank, "mean_per_iter_s"),
        "max_s": _spread(per_rank, "max_s"),
        # a crashed or killed job: the name's interval was open when the rank's file was written
        "running_ranks": [p["rank"] for p in per_rank if p["running"]],
    }
    cpu = _spread(per_rank, "cpu_process_percent")
    if cpu is not None:
        # Each rank's figure is its own process tree as % of the machine; ranks on one host
        # add up to the job's share of that host.
        cpu["sum"] = sum(p["cpu_process_percent"] for p in per_rank
                         if p["cpu_process_percent"] is not None)
        entry["cpu_process_percent"] = cpu
    return entry


def _missing_ranks(rank_info, per_rank):
    """The ranks of ``rank_info`` that have no entry in ``per_rank``."""
    present = {p["rank"] for p in per_rank}
    return [ri["rank"] for ri in rank_info if ri["rank"] not in present]


def _merged_one_time(name, ranked, rank_info):
    """One one-time measurement over the ranks: each rank's duration, the spread of those that
    ended, the ranks that lack it and those where it still ran."""
    per_rank = []
    for one_time, rank in ranked:
        o = one_time.get(name)
        if o is not None:
            per_rank.append({"rank": rank, "duration_s": o.get("duration_s"),
                             "running": o.get("running", False)})
    ended = [p for p in per_rank if not p["running"]]
    return {
        "name": name,
        "per_rank": per_rank,
        "missing_ranks": _missing_ranks(rank_info, per_rank),
        "duration_s": _spread(ended, "duration_s"),
        "running_ranks": [p["rank"] for p in per_rank if p["running"]],
    }


def _one_time_lines(merged):
    """The report's lines of the one-time measurements: min / median / max over the ranks."""
    lines = []
    if merged.get("one_time"):
        lines.append("  one-time measurements, over the ranks: min / median / max")
    for o in merged.get("one_time", []):
        parts = []
        d = o["duration_s"]
        if d is not None:
            parts.append(f"{_t(d['min'])} / {_t(d['median'])} / {_t(d['max'])}, "
                         f"slowest rank {d['slowest_rank']}")
        if o["running_ranks"]:
            parts.append(f"still running on rank(s) {o['running_ranks']}")
        if o["missing_ranks"]:
            parts.append(f"not measured on rank(s) {o['missing_ranks']}")
        lines.append(f"    {printable(o['name'])}: {'; '.join(parts)}")
    return lines


def _t(seconds):
    """A duration with a unit chosen for reading (as the Stopwatch's report does)."""
    if seconds is None:
        return "-"
    s = abs(seconds)
    # Each unit from where the smaller one's rounding would print 1000 of it.
    if s >= 1.0 - 0.5e-6:
        return f"{seconds:.3f} s"
    if s >= 1e-3 - 0.05e-6:
        return f"{seconds * 1e3:.3f} ms"
    if s >= 1e-6 - 0.5e-9:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e9:.0f} ns"


def format_report(merged):
    """The cross-rank report of ``merge()``'s result, as text."""
    ranks = merged["ranks"]
    lines = []
    iters = sorted({r["iterations_measured"] for r in ranks})
    iters_txt = str(iters[0]) if len(iters) == 1 else f"{iters[0]}-{iters[-1]} (differ)"
    lines.append(
        f"laptime: cross-rank report, {len(ranks)} rank(s) of world size {merged['world_size']}, "
        f"{iters_txt} measured iterations per rank"
    )
    for r in ranks:
        lines.append(
            f"  rank {r['rank']}: {printable(r['host'])} pid {r['pid']}, "
            f"{r['iterations_measured']} measured after {r['num_warmup_iters']} warm-up"
        )
    ms = merged["measurements"]
    names = {m["name"]: printable(m["name"]) for m in ms}
    # A name longer than 40 characters widens its own row only.
    width = min(40, max([len("name")] + [len(n) for n in names.values()]))
    lines.append(
        f"  {'name':<{width}}  {'count per rank':>18}  {'per iter: min':>13}  {'median':>11}  "
        f"{'max':>11}  slowest"
    )
    for m in ms:
        counts = m["count"]
        if counts is None:
            count_txt = "-"
        elif counts["min"] == counts["max"] and m["missing_ranks"]:
            count_txt = f"{counts['min']} on {len(m['per_rank'])} of {len(ranks)}"
        elif counts["min"] == counts["max"]:
            count_txt = f"{counts['min']} on each"
        else:
            count_txt = f"{counts['min']}..{counts['max']}"
        t = m["mean_per_iter_s"]
        if t is None:
            lines.append(f"  {names[m['name']]:<{width}}  {count_txt:>18}  no measurement after "
                         "warm-up")
        else:
            lines.append(
                f"  {names[m['name']]:<{width}}  {count_txt:>18}  {_t(t['min']):>13}  "
                f"{_t(t['median']):>11}  {_t(t['max']):>11}  rank {t['slowest_rank']}"
            )
        if m["missing_ranks"]:
            lines.append(f"  {'':<{width}}  not measured on rank(s) {m['missing_ranks']}")
        if m.get("running_ranks"):
            lines.append(f"  {'':<{width}}  still running on rank(s) {m['running_ranks']} when "
                         "the file was written (an interval cut short: a crash or a kill?)")
    tracked = [m for m in ms if "cpu_process_percent" in m]
    if tracked:
        lines.append("  CPU usage (process tree incl. workers, % of the machine), per rank:")
        for m in tracked:
            per = ", ".join(
                f"rank {p['rank']} "
                + ("-" if p["cpu_process_percent"] is None else f"{p['cpu_process_percent']:.1f} %")
                for p in m["per_rank"]
            )
            c = m["cpu_process_percent"]
            lines.append(
                f"    {names[m['name']]}: {per}; min {c['min']:.1f} median {c['median']:.1f} "
                f"max {c['max']:.1f} %, sum {c['sum']:.1f} %"
            )
    lines += _one_time_lines(merged)
    for w in merged.get("warnings", []):
        lines.append(f"  warning: {printable(w)}")
    return "\n".join(lines) + "\n"


def load(paths):
    """The results in each file, checked (``laptime.results.read``)."""
    return [read(p) for p in paths]


def write_json(merged, path):
    """Writes the merged results to ``path`` as laptime's own files are written: a regular file
    (or none yet) is replaced atomically, keeping the old file's permission bits (a new one gets
    the umask's); a symbolic link's target is what is written; a device or a pipe
    (``/dev/stdout``) is written in place, never replaced."""
    import errno
    import os
    import stat
    import tempfile

    text = json.dumps(merged, indent=1) + "\n"
    try:
        # A pipe or a device named through a descriptor's link (/dev/stdout is /proc/self/fd/1,
        # whose link text "pipe:[N]" names no file): opened by the kernel, never resolved.
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if mode is not None and not stat.S_ISREG(mode):
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
        return
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".laptime-merge-",
                               suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---- the `laptime merge` subcommand (python/laptime/cli.py) ----


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="RANK.json",
                        help="laptime results of each rank (LAPTIME_OUTPUT=...rank{rank}.json)")
    parser.add_argument("--json", metavar="OUT", help="also write the merged results to OUT")


def run(args):
    from laptime.cli import check_outputs, is_stdout

    if args.json:
        check_outputs([args.json], args.files)
    merged = merge(load(args.files))
    if args.json:  # first: a path it cannot write is one line on stderr, not a report, then that
        write_json(merged, args.json)
    # On stderr where the JSON itself went to stdout (--json /dev/stdout | jq): it stays JSON.
    report = sys.stderr if args.json and is_stdout(args.json) else sys.stdout
    report.write(format_report(merged))
    return 0
