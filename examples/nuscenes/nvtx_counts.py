"""Each NVTX range's count and times from an `nsys stats --report nvtx_sum --format csv` file.

Used by examples/nuscenes/profile.sh. Prints one tab-separated line per range: its name, instances,
total ms and average ms. nsys may print other lines before the CSV's header, and it writes the names
of the default domain's ranges with a leading ':', which is dropped here. Rows whose numbers do not
parse are left out.

    python3 examples/nuscenes/nvtx_counts.py REPORT.nvtx_sum.csv
"""

import csv
import sys


def nvtx_counts(lines):
    """(name, instances, total_ns, avg_ns) per range of nvtx_sum's CSV LINES."""
    start = next((i for i, l in enumerate(lines) if "Instances" in l and "Range" in l), None)
    if start is None:
        return
    for r in csv.DictReader(lines[start:]):
        name = (r.get("Range") or "").lstrip(":")
        try:
            n, total, avg = int(r["Instances"]), float(r["Total Time (ns)"]), float(r["Avg (ns)"])
        except (KeyError, ValueError):
            continue
        yield name, n, total, avg


def main(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for name, n, total, avg in nvtx_counts(lines):
        print(f"{name}\t{n}\t{total / 1e6:.2f}\t{avg / 1e6:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
