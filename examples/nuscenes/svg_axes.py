"""Pieces of the hand-written SVG drawings of losscurves.py and sweep.py (no plotting library on
the GPU machine)."""


def log_grid(lo, hi, left, width, y):
    """The horizontal lines and labels of a log-scale value axis from `lo` to `hi` (1, 2, 5 in
    each decade), for a plot area starting at x=`left`, `width` wide; `y(v)` maps a value to its
    height."""
    out = []
    decade = lo
    while decade <= hi * 1.001:
        for k in (1, 2, 5):
            v = decade * k
            if lo <= v <= hi * 1.001:
                out.append(f'<line x1="{left}" x2="{left + width}" y1="{y(v):.1f}" '
                           f'y2="{y(v):.1f}" stroke="#ddd"/><text x="{left - 6}" '
                           f'y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        decade *= 10
    return out
