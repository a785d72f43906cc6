"""Are the loss curves of the loaders within the run-to-run noise of one loader?

Reads the per-iteration loss files of several ``train.py --loss-file`` runs (same model, seed and
sample order: iteration i sees the same samples with the same augmentation whatever the loader),
smooths each curve by the mean of consecutive windows of ``--window`` iterations, and compares:

- the noise: two runs of one loader (``--noise A,B``, default the first two files): per window
  |A - B|, its largest and its mean value;
- every other run against A: per window |run - A|, its largest and its mean; the run is within
  the noise when both are at most ``--tolerance`` times the noise's (default 2: one pair of runs
  estimates the noise only roughly).

Prints a table, writes it as JSON (``--json``) and draws the curves as SVG (``--svg``: each run's
iterations faint, its window means bold, log scale)::

    python3 examples/nuscenes/losscurves.py dali=dali.csv dali#2=dali-2.csv \\
        reference=reference.csv gpu=gpu.csv --window 20 --svg loss.svg --json loss.json

Only the iterations every file has are compared (a run cut short compares its part).
"""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import step_log  # noqa: E402
import svg_axes  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="LABEL=LOSS.csv")
    p.add_argument("--noise", default=None,
                   help="LABEL_A,LABEL_B: two runs of one loader (default: the first two)")
    p.add_argument("--window", type=int, default=20, help="iterations per window (default 20)")
    p.add_argument("--tolerance", type=float, default=2.0,
                   help="within the noise: at most this many times its differences (default 2)")
    p.add_argument("--svg", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    args.runs = [tuple(spec.split("=", 1)) for spec in args.runs]
    if any(len(r) != 2 for r in args.runs) or len(args.runs) < 2:
        p.error("give at least two runs as LABEL=LOSS.csv")
    labels = [label for label, _ in args.runs]
    args.noise = args.noise.split(",") if args.noise else labels[:2]
    if len(args.noise) != 2 or any(x not in labels for x in args.noise):
        p.error(f"--noise names two of the labels ({', '.join(labels)})")
    return args


def window_means(values, window):
    """Means of consecutive windows of ``window`` values (the last, shorter one dropped unless it
    is the only one); a window with a non-finite value has a NaN mean."""
    n = max(1, len(values) // window)
    size = window if len(values) >= window else len(values)
    out = []
    for k in range(n):
        part = values[k * size:(k + 1) * size]
        out.append(sum(part) / len(part) if all(math.isfinite(v) for v in part) else math.nan)
    return out


def differences(a, b):
    """(largest, mean) of |a - b| per window; NaN when a window of either is not finite."""
    d = [abs(x - y) for x, y in zip(a, b)]
    if not d or any(math.isnan(x) for x in d):
        return math.nan, math.nan
    return max(d), sum(d) / len(d)


def compare(curves, noise, window, tolerance):
    """``curves``: {label: per-iteration losses}; returns the comparison as a dict (see the
    module's docstring): steps and windows compared, the noise, one entry per run."""
    steps = min(len(v) for v in curves.values())
    smooth = {k: window_means(v[:steps], window) for k, v in curves.items()}
    a, b = noise
    noise_max, noise_mean = differences(smooth[a], smooth[b])
    runs = []
    for label, values in curves.items():
        first_bad = next((i for i, v in enumerate(values[:steps]) if not math.isfinite(v)), None)
        final = smooth[label][-1]
        entry = {"label": label, "final_window_mean": final, "first_nonfinite_step": first_bad}
        if label != a:
            dmax, dmean = differences(smooth[label], smooth[a])
            entry.update(max_diff=dmax, mean_diff=dmean)
            if label != b:
                entry["within_noise"] = within(dmax, dmean, noise_max, noise_mean, tolerance)
        runs.append(entry)
    return {"steps": steps, "window": window, "windows": len(smooth[a]), "tolerance": tolerance,
            "noise_pair": [a, b], "noise_max": noise_max, "noise_mean": noise_mean,
            "runs": runs, "smoothed": smooth}


def within(dmax, dmean, noise_max, noise_mean, tolerance):
    """A run's differences against the noise's: True, False, or None when there is no noise to
    compare with (identical or non-finite noise runs)."""
    if math.isnan(noise_mean) or noise_mean == 0:
        return None
    if math.isnan(dmean):
        return False
    return dmean <= tolerance * noise_mean and dmax <= tolerance * noise_max


def _g(x, digits=4):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def table(result):
    a, b = result["noise_pair"]
    lines = [f"loss curves: {result['steps']} iterations, windows of {result['window']} "
             f"({result['windows']}); noise = |{a} - {b}| per window: largest "
             f"{_g(result['noise_max'])}, mean {_g(result['noise_mean'])}",
             f"| run | last window's mean loss | largest difference from {a} | mean difference "
             f"| mean difference / the noise's | within the noise (x{result['tolerance']:g}) "
             "| first non-finite iteration |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for r in result["runs"]:
        bad = r["first_nonfinite_step"]
        ratio = (r["mean_diff"] / result["noise_mean"]
                 if "mean_diff" in r and result["noise_mean"] and not math.isnan(r["mean_diff"])
                 else None)
        verdict = {True: "yes", False: "NO", None: "no noise to compare"}.get(
            r.get("within_noise"), "")
        if r["label"] == a:
            verdict = "(reference of the noise)"
        elif r["label"] == b:
            verdict = "(the noise)"
        lines.append(f"| {r['label']} | {_g(r['final_window_mean'])} | {_g(r.get('max_diff'))} "
                     f"| {_g(r.get('mean_diff'))} | {_g(ratio, 3)} | {verdict} "
                     f"| {'-' if bad is None else bad} |")
    return "\n".join(lines)


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def svg(curves, result, title):
    """Each run's per-iteration loss (faint) and its window means (bold) against the iteration,
    the loss on a log scale: an SVG document as text."""
    steps, window = result["steps"], result["window"]
    finite = [v for vals in curves.values() for v in vals[:steps] if math.isfinite(v) and v > 0]
    if not finite:
        return ""
    lo, hi = svg_axes.decades(finite)
    w, h, left, right, top, bottom = 760, 420, 70, 170, 40, 50
    pw, ph = w - left - right, h - top - bottom
    y = svg_axes.log_scale(lo, hi, top, ph)

    def x(i):
        return left + pw * i / max(1, steps - 1)

    def line(points, color, width, opacity, kind):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in points if math.isfinite(v) and v > 0)
        return (f'<polyline class="{kind}" fill="none" stroke="{color}" stroke-width="{width}" '
                f'stroke-opacity="{opacity}" points="{pts}"/>')

    out = svg_axes.head(w, h, left + pw / 2, title, "loss (log scale)", top, ph)
    out.append(f'<text x="{left + pw / 2:.0f}" y="{h - 12}" text-anchor="middle">iteration</text>')
    out += svg_axes.log_grid(lo, hi, left, pw, y)
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    for j, (label, values) in enumerate(curves.items()):
        color = COLORS[j % len(COLORS)]
        size = min(window, steps)
        out.append(line(list(enumerate(values[:steps])), color, 1, 0.25, "raw"))
        out.append(line([(k * size + (size - 1) / 2, v)
                         for k, v in enumerate(result["smoothed"][label])], color, 2.5, 1,
                        "smoothed"))
        ly = top + 20 + 22 * j
        out.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 40}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2.5"/><text x="{left + pw + 46}" '
                   f'y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def main(argv=None):
    args = parse_args(argv)
    curves = {label: step_log.read(path)["loss"] for label, path in args.runs}
    result = compare(curves, args.noise, args.window, args.tolerance)
    print(table(result), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(_json_safe({**result, "files": dict(args.runs)}), f, indent=1)
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(curves, result, f"Loss per iteration, window means of {args.window}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
