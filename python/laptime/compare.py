"""``laptime compare REF.json OTHER.json [...]``: the seed's comparison table from laptime's JSON.

For each file: the average runtime per iteration of the loop measurement and the process tree's
CPU usage during it (% of the machine; the seed's tool read the whole machine's, the JSON's
``system_percent``, which other load on the machine inflates); then, for every file after the first, the speedup
(reference runtime / its runtime) and the CPU saved (1 - its CPU / the reference's)::

    Method | Average runtime [ms/batch] | Average CPU usage [%]
    ref    | 416                        | 3.2
    dali   | 181                        | 1.3
    Speedup × 2.30 (dali vs ref)
    Savings 59 % (dali vs ref)

The loop measurement is ``--name``, or else the first measurement whose CPU usage was tracked
(``set_cpu_usage_meas_name``), or else the first measurement.

Several runs per side (``laptime compare --ref a1.json a2.json --test b1.json b2.json``, ``--test``
repeatable for more methods): each cell is the median over the runs with the spread as min–max in
parentheses, and Speedup/Savings compare the medians. ``--markdown`` prints a GitHub table for a
pull request instead (either form).

``--fail-above 5%`` gates CI on a slowdown: after the table, each measured name (or ``--name``)
and, with recorded intervals, the iteration's wall time, with the difference of test against
reference and its bootstrap confidence interval; exit status 1 when some interval lies wholly
above the threshold, else 0 (``laptime.gate``; docs/reports.md, "Gating CI on a slowdown").
"""

import math
import os
import re
import statistics

from laptime import gate
from laptime.cli import UsageError
from laptime import results as _results
from laptime.results import ResultsError


class _Files:
    """Each file read once per command: a pipe (``/dev/stdin``, ``<(...)``) has no second read."""

    def __init__(self):
        self._parsed = {}

    def __call__(self, path):
        if path not in self._parsed:
            self._parsed[path] = _results.read(path)
        return self._parsed[path]



def add_arguments(parser):
    parser.add_argument("files", nargs="*", metavar="FILE.json",
                        help="laptime JSON results; the first is the reference")
    parser.add_argument("--ref", nargs="+", metavar="RUN.json",
                        help="several runs of the reference (median and min–max)")
    parser.add_argument("--test", nargs="+", action="append", metavar="RUN.json",
                        help="several runs of a method compared with --ref (repeatable)")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (pull requests)")
    parser.add_argument("--name", help="the measurement to compare (default: the CPU-tracked one)")
    parser.add_argument("--labels", help="comma-separated method names (default: file names)")
    parser.add_argument("--unit", default="batch", help="what one iteration is (default: batch)")
    parser.add_argument("--fail-above", metavar="THRESHOLD",
                        help="exit 1 when a test side is slower than the reference by more than "
                             "THRESHOLD (5%% or 0.05) with confidence (a CI gate)")
    parser.add_argument("--confidence", default="95%", metavar="LEVEL",
                        help="the gate's two-sided confidence level (default: 95%%)")
    parser.add_argument("--seed", type=int, default=gate.SEED,
                        help=f"the bootstrap's random seed (default: {gate.SEED})")


def _loop(results, name, path):
    measurements = results.get("measurements", [])
    if name is not None:
        found = [m for m in measurements if m.get("name") == name]
    else:
        # The CPU-tracked loop, else the first name (a benchmark that tracks no CPU).
        found = [m for m in measurements if m.get("cpu") is not None] or measurements[:1]
    if not found:
        what = f"no measurement {name!r}" if name else "no measurement"
        raise ResultsError(f"{path}: {what} (names: "
                           f"{', '.join(repr(m.get('name')) for m in measurements) or 'none'})")
    return found[0]


def rows(files, name=None, labels=None, reader=None):
    """[(label, ms per iteration or None, CPU % or None)] for ``files``."""
    reader = reader or _results.read
    out = []
    for i, path in enumerate(files):
        m = _loop(reader(path), name, path)
        per_iter = m.get("mean_per_iter_s")
        cpu = (m.get("cpu") or {}).get("process_percent")
        label = _results.printable(labels[i] if labels else
                                   os.path.splitext(os.path.basename(path))[0])
        out.append((label, None if per_iter is None else per_iter * 1e3, cpu))
    return out


def _ms(x):
    if x is None:
        return "n/a"
    if x == 0 or x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    # three significant digits below 1 ms (a per-sample loop), never "0.00" nor an exponent
    decimals = 2 - math.floor(math.log10(abs(x)))
    return f"{x:.{decimals}f}".rstrip("0").rstrip(".")


def _saved(cpu, ref_cpu):
    """The CPU saved against the reference, whole percent; equal figures are "0 %", never "-0 %"."""
    return f"{round((1 - cpu / ref_cpu) * 100)} %"  # an int: no "-0"


def _pct(x):
    return "n/a" if x is None else f"{x:.1f}"


def table(rows_, unit="batch"):
    """The table as text: a header, one line per method, then Speedup/Savings lines."""
    header = ("Method", f"Average runtime [ms/{unit}]", "Average CPU usage [%]")
    body = [(label, _ms(ms), _pct(cpu)) for label, ms, cpu in rows_]
    widths = [max(len(r[c]) for r in [header] + body) for c in range(3)]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
             for r in [header] + body]
    ref_label, ref_ms, ref_cpu = rows_[0]
    for label, ms, cpu in rows_[1:]:
        speedup = "n/a" if not ms or ref_ms is None else f"{ref_ms / ms:.2f}"
        savings = "n/a" if cpu is None or not ref_cpu else _saved(cpu, ref_cpu)
        lines.append(f"Speedup × {speedup} ({label} vs {ref_label})")
        lines.append(f"Savings {savings} ({label} vs {ref_label})")
    return "\n".join(lines)


def groups(sides, name=None, labels=None, reader=None):
    """[(label, [ms per iteration], [CPU %])] for ``sides``, a list of lists of files (the first
    the reference); None figures are left out. Without ``name``, the reference's first file's
    loop is every file's: two runs never compare two different names."""
    reader = reader or _results.read
    if name is None:
        name = _loop(reader(sides[0][0]), None, sides[0][0]).get("name")
    out = []
    for i, files in enumerate(sides):
        r = rows(files, name, reader=reader)
        label = (_results.printable(labels[i]) if labels else
                 _common_label([lab for lab, _, _ in r]))
        out.append((label, [ms for _, ms, _ in r if ms is not None],
                     [cpu for _, _, cpu in r if cpu is not None]))
    return out


def _common_label(names):
    prefix = os.path.commonprefix(names).rstrip("-_. ")
    return prefix or names[0]


def spread(values):
    """(median, min, max) of ``values``, or None when empty."""
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def _cell(values, fmt):
    s = spread(values)
    if s is None:
        return "n/a"
    med, lo, hi = s
    if len(values) == 1:
        return fmt(med)
    return f"{fmt(med)} ({fmt(lo)}–{fmt(hi)})"


def _ratios(groups_):
    """[(label, speedup text, savings text)] of each group against the first, on medians."""
    ref_label, ref_ms, ref_cpu = groups_[0]
    r_ms, r_cpu = spread(ref_ms), spread(ref_cpu)
    out = []
    for label, ms, cpu in groups_[1:]:
        m, c = spread(ms), spread(cpu)
        speedup = "n/a" if not m or not m[0] or not r_ms else f"{r_ms[0] / m[0]:.2f}"
        savings = "n/a" if not c or not r_cpu or not r_cpu[0] else _saved(c[0], r_cpu[0])
        out.append((label, speedup, savings))
    return out


def group_table(groups_, unit="batch"):
    """Several runs per method: median (min–max) per cell, then Speedup/Savings on medians."""
    header = ("Method", f"Runtime [ms/{unit}] median (min–max)",
              "CPU usage [%] median (min–max)",
              "Runs")
    body = [(label, _cell(ms, _ms), _cell(cpu, _pct), str(max(len(ms), len(cpu))))
            for label, ms, cpu in groups_]
    widths = [max(len(r[c]) for r in [header] + body) for c in range(4)]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
             for r in [header] + body]
    ref_label = groups_[0][0]
    for label, speedup, savings in _ratios(groups_):
        lines.append(f"Speedup × {speedup} ({label} vs {ref_label}, medians)")
        lines.append(f"Savings {savings} ({label} vs {ref_label}, medians)")
    return "\n".join(lines)


def _md_escape(text):
    """For Markdown (a job summary renders HTML): one line, and no markup of its own, links
    included: GitHub turns a bare "https://..." or "www...." into one, which the ':' and '.' as
    character references do not trigger."""
    import html

    text = html.escape(_results.printable(text), quote=False)
    text = re.sub(r"([\\`*_\[\]()!#~|])", r"\\\1", text)
    return re.sub(r"(?i)(www)\.", r"\1&#46;", text).replace(":", "&#58;")


def markdown(groups_, unit="batch"):
    """A GitHub-flavoured Markdown table: one row per method, speedup and CPU savings against the
    first (on medians; the spread is min–max over the runs)."""
    ratios = [(sp, sv) for _, sp, sv in _ratios(groups_)]  # by position: labels may repeat
    lines = [f"| Method | Runtime [ms/{unit}] | CPU usage [%] | Runs | Speedup | CPU savings |",
             "|---|---:|---:|---:|---:|---:|"]
    for i, (label, ms, cpu) in enumerate(groups_):
        sp, sv = ("1.00 (reference)", "—") if i == 0 else ratios[i - 1]
        sp = sp if i == 0 or sp == "n/a" else f"× {sp}"
        lines.append(f"| {_md_escape(label)} | {_cell(ms, _ms)} | {_cell(cpu, _pct)} | "
                     f"{max(len(ms), len(cpu))} | {sp} | {sv} |")
    if any(max(len(ms), len(cpu)) > 1 for _, ms, cpu in groups_):
        lines.append("")
        lines.append("Cells: median over the runs, (min–max) in parentheses.")
    return "\n".join(lines)


def run(args):
    threshold, confidence = _gate_options(args)
    sides, labels = _sides(args)
    if threshold is not None and len(sides) < 2:
        raise UsageError("--fail-above needs a reference and a side to gate against it (two "
                         "files, or --ref and --test)")
    # Everything is read and judged before anything is printed: input the gate cannot use is one
    # line on stderr, never a table followed by an error.
    reader = _Files()
    g = groups(sides, args.name, labels, reader)
    verdicts = [] if threshold is None else [
        _gate_one(sides[0], files, args.name, threshold, confidence, args.seed, reader)
        for files in sides[1:]]
    if args.ref:
        print(markdown(g, args.unit) if args.markdown else group_table(g, args.unit))
    elif args.markdown:
        print(markdown(g, args.unit))
    else:
        print(table([(label, ms[0] if ms else None, cpu[0] if cpu else None)
                     for label, ms, cpu in g], args.unit))
    if threshold is None:
        return 0
    print(_gate_report(g, verdicts, threshold, confidence, args), end="")
    if min(len(files) for files in sides) == 1:
        # A run's recorded iterations know nothing of what differs between runs (a busier
        # machine, another node, another build of the data cache): docs/reports.md, "How often
        # it is wrong".
        print("note: one run on a side: its interval knows the spread between that run's "
              "iterations, not between runs; give 3 or more runs a side where a gate must be "
              "trusted")
    return 1 if any(v.failed for vs, _, _ in verdicts for v in vs) else 0


def _sides(args):
    """([files of the reference], [files of each method]...), and the labels or None."""
    labels = args.labels.split(",") if args.labels else None
    if args.ref or args.test:
        if args.files:
            raise UsageError("give files either positionally or with --ref/--test")
        if not args.ref or not args.test:
            raise UsageError("--ref and --test go together")
        sides = [args.ref] + args.test
        if labels is not None and len(labels) != len(sides):
            raise UsageError(f"{len(labels)} labels for {len(sides)} methods")
        return sides, labels
    if labels is not None and len(labels) != len(args.files):
        raise UsageError(f"{len(labels)} labels for {len(args.files)} files")
    if len(args.files) < 1:
        raise UsageError("give at least one file")
    sides = [[f] for f in args.files]
    # One file a side: labelled by its file name, as the seed's table does.
    return sides, labels or [os.path.splitext(os.path.basename(f))[0] for f in args.files]


def _gate_options(args):
    """(threshold, confidence) as fractions, threshold None without --fail-above."""
    try:
        confidence = gate.parse_fraction(args.confidence, "--confidence", upper=1)
        if confidence == 0:
            raise ValueError(f"--confidence {args.confidence!r}: must be above 0%")
        if args.fail_above is None:
            return None, confidence
        return gate.parse_fraction(args.fail_above, "--fail-above"), confidence
    except ValueError as e:
        raise UsageError(str(e)) from None


# Why a name of one run a side has no per-iteration values although the run recorded intervals.
_THIN = ("has no recorded intervals (measured in worker processes, or ended on a thread that "
         "recorded none)")


def _gate_one(ref_files, test_files, name, threshold, confidence, seed, reader=None):
    """([Verdict], [names not gated], whether any run had per-iteration values)."""
    reader = reader or _results.read
    ref = [gate.run_figures(reader(f)) for f in ref_files]
    test = [gate.run_figures(reader(f)) for f in test_files]
    try:
        gate.check_judgeable(ref, "the reference")
        gate.check_judgeable(test, "the test side")
    except gate.GateError as e:
        raise UsageError(str(e)) from None
    names, skipped = gate.quantities(ref, test, name)
    thin = [q for q in names if gate.without_spread(ref, test, q)]
    names = [q for q in names if q not in thin]
    if not names and thin:
        raise UsageError(f"{thin[0]!r} {_THIN}; give at least 2 runs per side to gate it")
    if not names:
        what = f"no measurement {name!r}" if name else "no measurement"
        files = list(ref_files) + list(test_files)
        # The runs that have none: a run with no measured iteration (it crashed early, say).
        lacking = [f for f, run in zip(files, ref + test) if (name not in run if name else not run)]
        where = "; ".join(_results.printable(f) for f in lacking[:3])
        where += f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
        raise ResultsError(f"{what} in every run of both sides to gate"
                           + (f" (none in {where})" if lacking else ""))
    each = gate.joint_level(confidence, len(names))
    verdicts = [gate.judge([r[q] for r in ref], [t[q] for t in test], q, threshold, each, seed)
                for q in names]
    skipped = [(q, "not measured in every run") for q in skipped]
    skipped += [(q, f"{_THIN}: needs 2 runs per side") for q in thin]
    skipped += [(q, "0 in the reference") for q, v in zip(names, verdicts) if v is None]
    recorded = any(f.per_iteration for run in ref + test for f in run.values())
    return [v for v in verdicts if v is not None], skipped, recorded


def _signed(x):
    return f"{x * 100:+.1f} %"


def _joint(count):
    return f" (the {count} intervals jointly)" if count > 1 else ""


def _gate_report(groups_, verdicts, threshold, confidence, args):
    level = f"{confidence * 100:g} % CI"
    over = "runs and over recorded iterations" if any(r for _, _, r in verdicts) else "runs"
    ref_label = groups_[0][0]
    lines = []
    for (label, _, _), (vs, skipped, _) in zip(groups_[1:], verdicts):
        shown, ref_shown = ((_md_escape(label), _md_escape(ref_label)) if args.markdown else
                            (_results.printable(label), _results.printable(ref_label)))
        lines.append(f"{'**Gate**' if args.markdown else 'Gate'} ({shown} vs {ref_shown}): fail "
                     f"above {_signed(threshold)} slower at {confidence * 100:g} % confidence"
                     f"{_joint(len(vs))}; bootstrap over {over}, {gate.RESAMPLES} resamples, "
                     f"seed {args.seed}")
        if args.markdown:
            lines.append("")
        width = max(len(_results.printable(v.name)) for v in vs) if vs else 0
        for v in vs:
            verdict = "FAIL" if v.failed else "ok"
            figures = f"{_signed(v.difference)} ({level} {_signed(v.low)} to {_signed(v.high)})"
            if args.markdown:
                lines.append(f"- {'**FAIL**' if v.failed else 'ok'} {_md_escape(v.name)}: "
                             f"{figures}")
            else:
                lines.append(f"{verdict:<4}  {_results.printable(v.name).ljust(width)}  {figures}")
        for why in dict.fromkeys(why for _, why in skipped):
            names = ", ".join(repr(n) for n, w in skipped if w == why)  # repr escapes a newline
            if args.markdown:
                names = _md_escape(names)
            lines.append(f"not gated: {names} ({why})")
    return "\n" + "\n".join(lines) + "\n"
