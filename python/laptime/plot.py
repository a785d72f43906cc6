"""``laptime plot run.json -o run.png``: one figure from the recorded intervals (``samples``).

Left, per name, the time it cost in each iteration (its intervals in that iteration summed, on
all threads; an interval counts in the iteration in which it ended), with the warm-up iterations
shaded; right, the histogram of each name's interval lengths (after warm-up). Needs matplotlib;
drawn with the Agg backend, so no display is needed.
"""

from laptime.results import printable


def add_arguments(parser):
    parser.add_argument("file", metavar="RUN.json", help="laptime JSON results with samples")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.png")
    parser.add_argument("--names", help="comma-separated names to plot (default: all)")
    parser.add_argument("--dpi", type=int, default=100)


# Text as given: a name such as "$x$" or "a_b^c" is drawn as written, never as math (mathtext
# or LaTeX), which could also fail to parse it.
LITERAL = {"parse_math": False, "usetex": False}


def _title(text, chars):
    """``text`` on one line, cut to ``chars`` characters: a title fits its axes (matplotlib took
    minutes to lay out a name of 100,000 characters, drawn across the neighbouring plots)."""
    text = printable(text)  # a control character would make the SVG's XML invalid
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _unit(max_s):
    if max_s >= 1:
        return "s", 1.0
    if max_s >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def figure(results, names=None):
    """A matplotlib Figure for ``results`` (a dict of laptime's JSON with ``samples``)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from laptime.results import ResultsError
    from laptime.samples import intervals, per_iteration, samples_of

    s = samples_of(results)
    warmup = results.get("num_warmup_iters", 0)
    series = per_iteration(s)
    first_seen = [m.get("name") for m in results.get("measurements", [])]
    first_seen += [n for n in s["names"] if n not in first_seen]
    order = [n for n in first_seen if n in series and (names is None or n in names)]
    if not order:
        asked = ", ".join(names) if names else "any name"
        raise ResultsError(f"no recorded interval of {asked} (recorded: "
                           f"{', '.join(series) or 'none'})")
    lengths = {n: [] for n in order}
    for iv in intervals(s):
        if iv.name in lengths and iv.iter >= warmup:
            lengths[iv.name].append(iv.dur_ns / 1e9)
    rows = len(order)
    fig = Figure(figsize=(11, 2.2 * rows + 0.6))
    axes = fig.subplots(rows, 2, squeeze=False, gridspec_kw={"width_ratios": [2.2, 1]})
    ended = {k for k, _ in (s.get("iterations") or [])}
    for row, name in enumerate(order):
        _draw_per_iteration(axes[row][0], name, series[name], warmup, ended)
        _draw_histogram(axes[row][1], name, lengths[name])
    axes[-1][0].set_xlabel("iteration", **LITERAL)
    fig.suptitle(f"laptime: {_title(results.get('host', ''), 60)} pid {results.get('pid', '')} "
                 f"rank {results.get('rank', 0)}", fontsize=11, **LITERAL)
    fig.tight_layout()
    return fig


def _draw_per_iteration(ax, name, per, warmup, ended):
    """What ``name`` cost in each iteration, ``per`` {iteration: seconds}, warm-up shaded;
    ``ended``: the iterations whose end the rings still hold."""
    # An iteration without an interval of the name cost it 0 where the rings hold that iteration
    # (between the name's first and last recorded ones: before, the ring may have dropped them).
    # Elsewhere nothing is known: a thread that exited early keeps its ring's old iterations, and
    # the gap up to the others' is no run of zeros.
    low, high = min(per), max(per)
    if not ended and high - low < 1_000_000:  # a file without iteration ends: every iteration
        ended = range(low, high + 1)
    its = sorted(set(per) | {i for i in ended if low <= i <= high})
    per = {i: per.get(i, 0.0) for i in its}
    # The scale is the measured iterations': a slow first iteration (compiling, caches filling)
    # would flatten every measured one. Warm-up above that scale is clipped, and said so.
    measured = [per[i] for i in its if i >= warmup]
    top = max(measured or per.values())
    unit, scale = _unit(top)
    ax.plot(its, [per[i] * scale for i in its], marker=".", linewidth=1, markersize=3)
    if top > 0:
        ax.set_ylim(0, top * scale * 1.08)
    else:
        ax.set_ylim(bottom=0)
    if warmup > 0 and its[0] < warmup:
        peak = max(per[i] for i in its if i < warmup)
        label = "warm-up" if peak <= top else f"warm-up (up to {peak * scale:.3g} {unit}: clipped)"
        ax.axvspan(its[0] - 0.5, warmup - 0.5, color="0.85", label=label)
        ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"{_title(name, 80)}: per iteration", fontsize=10, loc="left", **LITERAL)
    ax.set_ylabel(unit, **LITERAL)
    ax.grid(alpha=0.3)


def _draw_histogram(ax, name, values):
    """The lengths of ``name``'s intervals after warm-up, ``values`` in seconds."""
    if values:
        unit, scale = _unit(max(values))
        ax.hist([v * scale for v in values], bins=min(50, max(5, len(values) // 4)),
                color="tab:orange")
        ax.set_xlabel(f"interval [{unit}]", **LITERAL)
    else:
        ax.text(0.5, 0.5, "warm-up only", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(f"{_title(name, 30)}: {len(values)} intervals", fontsize=10, loc="left",
                 **LITERAL)
    ax.grid(alpha=0.3)


def png_bytes(results, names=None, dpi=100):
    """The figure as PNG bytes (for ``laptime html``)."""
    import io

    buf = io.BytesIO()
    figure(results, names).savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _output(path):
    """``path`` with a format matplotlib writes (none given: ``.png`` appended), or UsageError."""
    import os

    from matplotlib.figure import Figure

    from laptime.cli import UsageError

    ext = os.path.splitext(path)[1][1:].lower()
    if not os.path.basename(path):
        raise UsageError(f"-o {path!r}: not a file name")
    if not ext:
        return path + ".png"
    formats = Figure().canvas.get_supported_filetypes()
    if ext not in formats:
        raise UsageError(f"-o {path!r}: .{ext} is not a format it writes "
                         f"({', '.join(sorted(formats))})")
    return path


def run(args):
    from laptime.cli import UsageError, check_outputs
    from laptime.results import read

    if not 1 <= args.dpi <= 2400:
        raise UsageError(f"--dpi {args.dpi}: must be 1 to 2400")
    output = _output(args.output)
    check_outputs([output], [args.file])
    names = args.names.split(",") if args.names else None
    figure(read(args.file, samples=True), names).savefig(output, dpi=args.dpi)
    print(f"laptime plot: {printable(output)}")
    return 0
