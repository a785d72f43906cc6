"""``laptime html run.json [other.json ...] -o report.html``: one self-contained page.

Per run, in one column each (side by side, the first run the reference): the report table (per
name: per iteration, per call, total, count and the interval percentiles), the CPU and I/O figures
of the tracked names, the slow tail (the slowest iterations and the names that made them slow),
the one-time measurements, and the plots of ``laptime plot`` when the run recorded intervals. With
several runs, above the columns: the comparison of ``laptime compare`` (each run against the
first) and each name's time per iteration in every run. Nothing is fetched:
CSS is inline and the images are base64 PNG ``data:`` URIs, so the file can be mailed, attached to
a CI job, or opened offline.
"""

import base64
import html as _html
import os

from laptime.results import ResultsError, read

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f2f2f2; text-align: left; }
.meta { color: #666; } img { max-width: 100%; border: 1px solid #eee; }
.runs { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(36em, 1fr); gap: 24px;
        overflow-x: auto; }
.run { min-width: 0; overflow-x: auto; }
"""


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="RUN.json",
                        help="laptime JSON results, one column each; the first is the reference")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.html")
    parser.add_argument("--name", help="the measurement compared (default: the CPU-tracked one)")
    parser.add_argument("--unit", default="batch", help="what one iteration is (default: batch)")


def _esc(x):
    """Text for the page: control characters (NUL, ESC, DEL in a name) shown escaped, as in the
    terminal's reports (a NUL is a parse error in HTML), then the markup characters."""
    from laptime.results import printable

    return _html.escape(printable(x), quote=True)


def duration(seconds):
    """'1.23 ms', '1.00 ms': seconds with three digits in the largest unit whose rounded value
    is at least 1 (999.96 µs reads "1.00 ms", never "1e+03 µs"); 'n/a' for None."""
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        value = seconds / scale
        if unit == "s" and abs(value) >= 1000:
            return f"{value:.0f} s"
        text = f"{value:#.3g}"
        if abs(float(text)) >= 1 or unit == "ns":
            return f"{text.rstrip('.')} {unit}"


def _num(x, suffix=""):
    return "n/a" if x is None else f"{x:.1f}{suffix}"


def _table(header, rows, numeric_from=1):
    out = ["<table><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        cells = "".join(f'<td class="n">{_esc(c)}</td>' if i >= numeric_from
                        else f"<td>{_esc(c)}</td>" for i, c in enumerate(r))
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def report_section(results, title):
    """The report of one run as HTML: its header line, the table, CPU/IO, one-time measurements."""
    parts = [f"<h2>{_esc(title)}</h2>",
             f'<p class="meta">{_esc(results.get("iterations_measured", 0))} measured iterations '
             f'({_esc(results.get("num_warmup_iters", 0))} warm-up); rank '
             f'{_esc(results.get("rank", 0))}/{_esc(results.get("world_size", 1))}, pid '
             f'{_esc(results.get("pid", ""))}, host {_esc(results.get("host", ""))}</p>']
    keys = ("mean_per_iter_s", "mean_per_interval_s", "total_s", "count", "min_s", "median_s",
            "p90_s", "p99_s", "max_s")
    rows = []
    for m in results.get("measurements", []):
        rows.append([m.get("name", "")] + [m.get(k) if k == "count" else duration(m.get(k))
                                            for k in keys])
    parts.append(_table(["name", "per iter", "per call", "total", "count", "min", "median", "p90",
                         "p99", "max"], rows))
    tracked = [m for m in results.get("measurements", []) if m.get("cpu") is not None]
    if tracked:
        parts.append("<h3>CPU and I/O (tracked names)</h3>")
        rows = []
        for m in tracked:
            c, io = m.get("cpu") or {}, m.get("io") or {}
            rows.append([m["name"], _num(c.get("process_percent"), " %"),
                         _num(c.get("process_cores")), _num(c.get("system_percent"), " %"),
                         _num(io.get("read_mb_per_s")), _num(io.get("write_mb_per_s")),
                         _num(io.get("rchar_mb_per_s")), _num(io.get("wchar_mb_per_s"))])
        parts.append(_table(["name", "process tree CPU", "cores", "system CPU", "read MB/s",
                             "write MB/s", "rchar MB/s", "wchar MB/s"], rows))
    if results.get("slow_tail"):
        parts.append(tail_section(results["slow_tail"]))
    if results.get("one_time"):
        parts.append("<h3>One-time measurements</h3>")
        parts.append(_table(["name", "duration"],
                            [[o["name"], "running" if o.get("running") else
                              duration(o.get("duration_s"))] for o in results["one_time"]]))
    return "\n".join(parts)


# Causes named per slow iteration, as in the text report (the JSON has them all): the largest, at
# most TAIL_CAUSES_SHOWN, each over TAIL_CAUSE_SHARE of the iteration's excess over the median.
TAIL_CAUSES_SHOWN = 3
TAIL_CAUSE_SHARE = 0.1


def _causes_shown(slow, median):
    excess = (slow.get("time_s") or 0) - (median or 0)
    n = 0
    for c in (slow.get("causes") or [])[:TAIL_CAUSES_SHOWN]:
        if (c.get("over_median_s") or 0) < TAIL_CAUSE_SHARE * excess:
            break
        n += 1
    return n


def _cause(c):
    """"'load' +59.8 ms (61.0 ms, median 1.2 ms, on loader-1)": the thread where the name ran on
    several threads (it tells which worker was slow)."""
    text = (f"'{c['name']}' +{duration(c.get('over_median_s'))} ({duration(c.get('time_s'))}, "
            f"median {duration(c.get('median_s'))}")
    if (c.get("threads") or 1) > 1:
        text += f", on {c.get('thread') or 'tid ' + str(c.get('tid'))}"
    return text + ")"


def tail_section(tail):
    """The slow tail (``slow_tail``, recorded runs): the iterations' median and p99, how many took
    over 3× the median, whether the tail is the problem, and each slow iteration with the names
    that took longer than their own median."""
    median = tail.get("median_s")
    summary = (f"{_esc(tail.get('iterations'))} measured iterations recorded: median "
               f"{_esc(duration(median))}, p99 {_esc(duration(tail.get('p99_s')))}; "
               f"{_esc(tail.get('over_3x_median'))} over 3× the median.")
    if tail.get("tail_bound"):
        summary += (" <strong>The tail, not the median, is the problem</strong> (p99 over 2× "
                    "the median).")
    out = ['<h3>Slow tail</h3>', f'<p class="meta">{summary}</p>',
           '<table class="tail"><tr><th>iteration</th><th>time</th><th>× median</th>'
           "<th>names over their own median</th></tr>"]
    for s in tail.get("slowest") or []:
        causes = s.get("causes") or []
        shown = _causes_shown(s, median)
        named = ", ".join(_cause(c) for c in causes[:shown])
        named = named or "no name over its median explains it"
        more = len(causes) - shown
        if more:
            named += (f" (and {more} more " if shown else f" ({more} ") + (
                "name, a little over its median)" if more == 1
                else "names, a little over their medians)")
        t = s.get("time_s")
        ratio = f"{t / median:.1f}×" if t is not None and median else "n/a"
        out.append(f'<tr><td class="n">{_esc(s.get("iteration"))}</td>'
                   f'<td class="n">{_esc(duration(t))}</td><td class="n">{_esc(ratio)}</td>'
                   f"<td>{_esc(named)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _plots(results, title):
    if not results.get("samples"):
        return (f'<p class="meta">{_esc(title)}: no recorded intervals (run with LAPTIME_RECORD=N '
                "for per-iteration plots).</p>")
    from laptime.plot import png_bytes

    try:
        data = base64.b64encode(png_bytes(results)).decode("ascii")
    except ResultsError as e:  # recorded, but none of its names (all measured in workers)
        return f'<p class="meta">{_esc(title)}: no plot: {_esc(str(e))}.</p>'
    return (f"<h3>Per iteration and histograms: {_esc(title)}</h3>"
            f'<img alt="laptime plot of {_esc(title)}" src="data:image/png;base64,{data}">')


def _comparison(paths, runs, labels, name, unit):
    from laptime import compare

    loaded = dict(zip(paths, runs))  # each file read once: a pipe has no second read
    g = compare.groups([[p] for p in paths], name, labels, reader=loaded.__getitem__)
    ratios = compare._ratios(g)
    rows = []
    for i, (label, ms, cpu) in enumerate(g):
        sp, sv = ("reference", "") if i == 0 else ratios[i - 1][1:]
        rows.append([label, compare._cell(ms, compare._ms), compare._cell(cpu, compare._pct),
                     sp if i == 0 or sp == "n/a" else f"× {sp}", sv])
    return ("<h2>Comparison</h2>" +
            _table(["Method", f"Average runtime [ms/{unit}]", "Average CPU usage [%]", "Speedup",
                    "CPU savings"], rows))


def _side_by_side(runs, labels):
    """Each name's time per iteration in every run (one column each), relative to the first."""
    names = {}  # first-seen order, a lookup per name (100k names: not a scan of a list each)
    for results in runs:
        names.update((m["name"], None) for m in results.get("measurements", []))
    per_iter = [{m["name"]: m.get("mean_per_iter_s") for m in r.get("measurements", [])}
                for r in runs]
    rows = []
    for name in names:
        ref = per_iter[0].get(name)
        row = [name, duration(ref)]
        for run in per_iter[1:]:
            t = run.get(name)
            row.append(duration(t) if not ref or t is None else f"{duration(t)} ({t / ref:.2f}×)")
        rows.append(row)
    return ("<h2>Time per iteration, side by side</h2>" +
            _table(["name", f"{labels[0]} (reference)"] + labels[1:], rows) +
            '<p class="meta">(×): the time relative to the reference run\'s.</p>')


def page(paths, name=None, unit="batch"):
    """The page (a str) for the JSON files ``paths``, the first the reference."""
    runs = [read(p) for p in paths]
    labels = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    body = ["<h1>laptime report</h1>"]
    if len(paths) > 1:
        try:
            body.append(_comparison(paths, runs, labels, name, unit))
        except ResultsError as e:  # no loop measurement to compare
            body.append(f'<p class="meta">No comparison: {_esc(e)}</p>')
        body.append(_side_by_side(runs, labels))
    body.append('<div class="runs">')
    for i, (results, label) in enumerate(zip(runs, labels)):
        title = f"{label} (reference)" if i == 0 and len(runs) > 1 else label
        body.append(f'<section class="run">\n{report_section(results, title)}\n'
                    f"{_plots(results, label)}\n</section>")
    body.append("</div>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>laptime report: {_esc(', '.join(labels))}</title><style>{CSS}</style>"
            "</head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def run(args):
    from laptime.cli import check_outputs

    check_outputs([args.output], args.files)
    text = page(args.files, args.name, args.unit)
    # A name that is not UTF-8 (a lone surrogate in the file) is written escaped.
    try:
        with open(args.output, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as e:  # a full disk fails the write or the close: name the file
        raise OSError(e.errno, e.strerror, args.output) from None
    print(f"laptime html: {args.output}")
    return 0
