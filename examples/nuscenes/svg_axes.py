"""Pieces of the hand-written SVG drawings of losscurves.py and sweep.py (no plotting library on
the GPU machine): the document's head and a log-scale value axis."""

import math


def decades(values):
    """The powers of ten just below the smallest and just above the largest of `values` (> 0)."""
    return (10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values))))


def log_scale(lo, hi, top, height):
    """The function from a value in [lo, hi] to its height in a plot area `height` tall from
    y=`top`, on a log scale (`hi` at the top)."""
    def y(v):
        return top + height * (1 - (math.log10(v) - math.log10(lo)) / math.log10(hi / lo))
    return y


def head(width, height, title_x, title, y_label, top, plot_height):
    """The opening tag, a white background, the title at x=`title_x` and the value axis's label
    turned along it."""
    middle = top + plot_height / 2
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif" font-size="12">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{title_x:.0f}" y="22" text-anchor="middle" font-size="14">{title}</text>',
            f'<text x="16" y="{middle:.0f}" transform="rotate(-90 16 {middle:.0f})" '
            f'text-anchor="middle">{y_label}</text>']


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
