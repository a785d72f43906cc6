"""examples/nuscenes/sweep.py on the CPU (``--tiny``): a tiny backbone, DataLoader cells of 1 and 2
workers, the 1-worker cell run twice, a few iterations each.

Asserts what a reader of the sweep relies on: every cell keeps its laptime JSON and log, the
table's figures are laptime's own (ms/iter, median, p90, data wait, CPU core-ms = cores x ms/iter,
CPU % of the machine, the verdict's kind), a repeated cell gives its runs' spread, ``laptime
compare`` prints the loaders against the reference, the CSV and the SVG hold one row / one line per
cell / backbone, and a second call runs nothing already done.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

EXAMPLE = Path(__file__).resolve().parents[1]
SWEEP = EXAMPLE / "sweep.py"
CELLS = ["resnet18-x0.125-dl1-run1", "resnet18-x0.125-dl2-run1", "resnet18-x0.125-dl1-run2"]


def run_sweep(out, data, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, str(SWEEP), "--tiny", "--out", str(out), "--dataroot", data, *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, nuscenes_root):
    out = tmp_path_factory.mktemp("sweep")
    return run_sweep(out, nuscenes_root), out


def test_every_cell_keeps_its_laptime_json_and_report(sweep):
    proc, out = sweep
    for cell in CELLS:
        d = out / "cells" / cell
        r = json.loads((d / "rank0.json").read_text())
        assert r["iterations_measured"] == 3  # --tiny: 4 iterations, 1 warm-up
        assert r["verdict"]["kind"] in ("data-bound", "compute-bound")
        log = (d / "train.log").read_text()
        assert "laptime stopwatch: 3 measured iterations" in log and "verdict: " in log
        assert f"sweep.py: resnet18 x0.125 {cell.split('-')[2]} run {cell[-1]}: exit 0" in \
            proc.stdout


def test_the_table_is_laptimes_figures(sweep):
    _, out = sweep
    with open(out / "sweep.csv", encoding="utf-8") as f:
        rows = {r["loader"]: r for r in csv.DictReader(f)}
    assert sorted(rows) == ["dl1", "dl2"]
    one = json.loads((out / "cells" / "resnet18-x0.125-dl2-run1" / "rank0.json").read_text())
    by_name = {m["name"]: m for m in one["measurements"]}
    loop = by_name["training loop"]
    row = rows["dl2"]
    ms = loop["mean_per_iter_s"] * 1e3
    assert float(row["ms_mean"]) == pytest.approx(ms, abs=1e-3)
    assert float(row["ms_median"]) == pytest.approx(loop["median_s"] * 1e3, abs=1e-3)
    assert float(row["ms_p90"]) == pytest.approx(loop["p90_s"] * 1e3, abs=1e-3)
    assert float(row["data_wait_ms"]) == pytest.approx(
        by_name["data fetch"]["mean_per_iter_s"] * 1e3, abs=1e-3)
    assert float(row["cpu_core_ms"]) == pytest.approx(loop["cpu"]["process_cores"] * ms, rel=1e-3)
    assert float(row["cpu_pct"]) == pytest.approx(loop["cpu"]["process_percent"], abs=1e-3)
    assert row["verdict"] == one["verdict"]["kind"]
    assert row["gpu_busy_pct"] == ""  # no GPU: no CUDA events, no figure (never a made-up 0)


def test_a_repeated_cell_gives_its_spread(sweep):
    proc, out = sweep
    with open(out / "sweep.csv", encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["loader"] == "dl1")
    means = []
    for c in (CELLS[0], CELLS[2]):
        r = json.loads((out / "cells" / c / "rank0.json").read_text())
        loop = next(m for m in r["measurements"] if m["name"] == "training loop")
        means.append(loop["mean_per_iter_s"] * 1e3)
    assert row["runs"] == "2"
    assert float(row["ms_mean_min"]) == pytest.approx(min(means), abs=1e-3)
    assert float(row["ms_mean_max"]) == pytest.approx(max(means), abs=1e-3)
    assert float(row["ms_mean"]) == pytest.approx(sum(means) / 2, abs=1e-3)  # median of two
    # laptime compare: the reference (1 worker, two runs) against 2 workers
    assert "=== laptime compare, resnet18 ×0.125" in proc.stdout
    assert "Speedup × " in proc.stdout and "(DataLoader 2 workers vs DataLoader 1 worker" in \
        proc.stdout


def test_the_table_is_printed_last_and_written_as_markdown_and_svg(sweep):
    proc, out = sweep
    last = proc.stdout.strip().splitlines()[-4:]
    del last[1]  # the separator line
    assert last[0].startswith("| backbone | loader | runs | ms/iter mean")
    assert last[1].startswith("| resnet18 ×0.125 | DataLoader 1 worker | 2 |")
    assert last[2].startswith("| resnet18 ×0.125 | DataLoader 2 workers | 1 |")
    md = (out / "sweep.md").read_text()
    assert "## laptime compare, resnet18 ×0.125" in md and "## All cells" in md
    svg = ET.fromstring((out / "sweep.svg").read_text())
    ns = "{http://www.w3.org/2000/svg}"
    assert len(svg.findall(f"{ns}polyline")) == 1  # one line per backbone
    assert len(svg.findall(f"{ns}circle")) == 2  # one point per loader


def test_a_second_call_runs_nothing_already_done(sweep, nuscenes_root):
    _, out = sweep
    before = (out / "cells" / CELLS[0] / "rank0.json").stat().st_mtime_ns
    proc = run_sweep(out, nuscenes_root)
    assert "exit 0" not in proc.stdout  # no cell ran
    assert (out / "cells" / CELLS[0] / "rank0.json").stat().st_mtime_ns == before
    assert proc.stdout.strip().splitlines()[-1].startswith("| resnet18 ×0.125 | DataLoader 2")


def test_a_copied_cells_folder_counts_as_done(tmp_path):
    """The H100 sweep's committed cells (first runs only), copied into a fresh --out as
    gpu-sweep.sh --seed-cells does: a run would start only the repeats."""
    committed = EXAMPLE.parents[1] / "docs" / "studies" / "h100-2026-12-05" / "cells"
    if not committed.is_dir():
        pytest.skip(f"{committed} is not in this tree")
    shutil.copytree(committed, tmp_path / "cells")
    proc = subprocess.run([sys.executable, str(SWEEP), "--out", str(tmp_path), "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"{b}-{loader}-run2" for b in ("resnet18-x0.5", "resnet50-x1",
                                                                  "resnet101-x1")
                                   for loader in ("dl8", "dali")]
