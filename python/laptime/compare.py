"""``laptime compare REF.json OTHER.json [...]``: the seed's comparison table from laptime's JSON.

For each file: the average runtime per iteration of the loop measurement and the process tree's
CPU usage during it (% of the machine); then, for every file after the first, the speedup
(reference runtime / its runtime) and the CPU saved (1 - its CPU / the reference's)::

    Method | Average runtime [ms/batch] | Average CPU usage [%]
    ref    | 416                        | 3.2
    dali   | 181                        | 1.3
    Speedup × 2.30 (dali vs ref)
    Savings 59 % (dali vs ref)

The loop measurement is ``--name``, or else the first measurement whose CPU usage was tracked
(``set_cpu_usage_meas_name``).
"""

import json
import os


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="FILE.json",
                        help="laptime JSON results; the first is the reference")
    parser.add_argument("--name", help="the measurement to compare (default: the CPU-tracked one)")
    parser.add_argument("--labels", help="comma-separated method names (default: file names)")
    parser.add_argument("--unit", default="batch", help="what one iteration is (default: batch)")


def _loop(results, name, path):
    measurements = results.get("measurements", [])
    if name is not None:
        found = [m for m in measurements if m.get("name") == name]
    else:
        found = [m for m in measurements if m.get("cpu") is not None]
    if not found:
        what = f"no measurement {name!r}" if name else "no CPU-tracked measurement"
        raise ValueError(f"laptime compare: {path}: {what} (names: "
                         f"{', '.join(repr(m.get('name')) for m in measurements) or 'none'})")
    return found[0]


def rows(files, name=None, labels=None):
    """[(label, ms per iteration or None, CPU % or None)] for ``files``."""
    out = []
    for i, path in enumerate(files):
        with open(path) as f:
            results = json.load(f)
        m = _loop(results, name, path)
        per_iter = m.get("mean_per_iter_s")
        cpu = (m.get("cpu") or {}).get("process_percent")
        label = labels[i] if labels else os.path.splitext(os.path.basename(path))[0]
        out.append((label, None if per_iter is None else per_iter * 1e3, cpu))
    return out


def _ms(x):
    if x is None:
        return "n/a"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


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
        savings = ("n/a" if cpu is None or not ref_cpu else f"{(1 - cpu / ref_cpu) * 100:.0f} %")
        lines.append(f"Speedup × {speedup} ({label} vs {ref_label})")
        lines.append(f"Savings {savings} ({label} vs {ref_label})")
    return "\n".join(lines)


def run(args):
    labels = args.labels.split(",") if args.labels else None
    if labels is not None and len(labels) != len(args.files):
        raise SystemExit(f"laptime compare: {len(labels)} labels for {len(args.files)} files")
    if len(args.files) < 1:
        raise SystemExit("laptime compare: give at least one file")
    print(table(rows(args.files, args.name, labels), args.unit))
    return 0
