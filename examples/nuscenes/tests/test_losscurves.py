"""train.py's per-iteration loss file and losscurves.py, on the CPU: a tiny backbone trained a few
iterations from each loader (the reference twice), then the comparison of the curves; and the
report of the first non-finite iteration of a run that diverges.

On the CPU two runs of one loader are bitwise identical (same samples, same augmentation,
deterministic kernels), so the noise is 0 and losscurves says there is none to compare with; the
loaders' pixels differ by a grey level or two (test_equivalence.py), and that is enough for their
curves to differ after a few iterations. The GPU run (gpu-sweep.sh losscurves) has the noise of
its non-deterministic kernels.
"""

import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import losscurves
import step_log

pytest.importorskip("torchvision")

EXAMPLE = Path(__file__).resolve().parents[1]
ITERS, WARMUP = 8, 2
# The normalised range: (0 - mean) / std .. (255 - mean) / std over the three channels.
LOW, HIGH = -123.675 / 58.395, (255 - 103.53) / 57.375


def train(root, out, loader, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, str(EXAMPLE / "train.py"), "--loader", loader, "--device", "cpu",
           "--dataroot", root, "--iters", str(ITERS), "--warmup", str(WARMUP),
           "--batch-size", "1", "--workers", "1", "--image-scale", "0.125",
           "--loss-file", str(out) + ".csv", "--summary", str(out) + ".json", *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def runs(nuscenes_root, tmp_path_factory):
    pytest.importorskip("nvidia.dali")
    d = tmp_path_factory.mktemp("losscurves")
    logs = {}
    for label, loader in (("reference", "reference"), ("reference#2", "reference"),
                          ("dali", "dali"), ("gpu", "gpu")):
        logs[label] = train(nuscenes_root, d / label, loader)
    return d, logs


def test_the_loss_file_has_every_iteration_as_the_log_says(runs):
    d, logs = runs
    rows = step_log.read(d / "reference.csv")
    assert rows["step"] == list(range(ITERS))
    assert rows["warmup"] == [1] * WARMUP + [0] * (ITERS - WARMUP)
    first = re.search(r"loss: first iteration ([0-9.]+), last iteration ([0-9.]+)",
                      logs["reference"])
    assert f"{rows['loss'][0]:.4f}" == first.group(1)
    assert f"{rows['loss'][-1]:.4f}" == first.group(2)
    assert all(math.isfinite(g) and g > 0 for g in rows["grad_norm"])
    for lo, hi, mean in zip(rows["input_min"], rows["input_max"], rows["input_mean"]):
        assert LOW - 1e-3 <= lo <= mean <= hi <= HIGH + 1e-3
    assert "non-finite: none (loss, gradient norm and inputs finite in all 8 iterations)" in \
        logs["reference"]
    assert json.loads((d / "reference.json").read_text())["first_nonfinite_step"] is None


def test_losscurves_compares_each_loader_with_the_noise_of_one(runs, capsys):
    d, _ = runs
    svg, out = d / "loss.svg", d / "loss.json"
    assert losscurves.main([f"{k}={d / k}.csv" for k in ("reference", "reference#2", "dali", "gpu")]
                           + ["--window", "4", "--svg", str(svg), "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["steps"] == ITERS and r["windows"] == 2 and r["noise_pair"] == ["reference",
                                                                             "reference#2"]
    assert r["noise_max"] == 0 and r["noise_mean"] == 0  # the CPU run repeats itself exactly
    by = {x["label"]: x for x in r["runs"]}
    for loader in ("dali", "gpu"):
        assert by[loader]["mean_diff"] > 0 and by[loader]["within_noise"] is None
    printed = capsys.readouterr().out
    assert "| dali |" in printed and "no noise to compare" in printed
    ns = "{http://www.w3.org/2000/svg}"
    lines = ET.fromstring(svg.read_text()).findall(f"{ns}polyline")
    assert sorted(p.get("class") for p in lines) == ["raw"] * 4 + ["smoothed"] * 4


def test_within_the_noise_is_decided_on_window_means():
    a = [1.0] * 10 + [0.5] * 10
    b = [1.1] * 10 + [0.4] * 10  # the noise: 0.1 in each window
    near = [0.9] * 10 + [0.65] * 10  # 0.1 and 0.15: within twice the noise
    far = [1.0] * 10 + [0.9] * 10  # 0.4 in the second window
    broken = [1.0] * 5 + [math.nan] * 15
    r = losscurves.compare({"a": a, "b": b, "near": near, "far": far, "broken": broken},
                           ["a", "b"], window=10, tolerance=2.0)
    assert r["windows"] == 2
    assert r["noise_max"] == pytest.approx(0.1) and r["noise_mean"] == pytest.approx(0.1)
    by = {x["label"]: x for x in r["runs"]}
    assert by["near"]["within_noise"] is True
    assert by["near"]["max_diff"] == pytest.approx(0.15)
    assert by["far"]["within_noise"] is False
    assert by["broken"]["within_noise"] is False and by["broken"]["first_nonfinite_step"] == 5
    assert "within_noise" not in by["a"] and "within_noise" not in by["b"]


def test_a_diverging_run_reports_its_first_non_finite_iteration(nuscenes_root, tmp_path):
    log = train(nuscenes_root, tmp_path / "diverges", "reference", "--lr", "1e30")
    line = next(x for x in log.splitlines() if x.startswith("non-finite: "))
    # one step of lr 1e30 makes every later loss NaN; the batch itself stayed finite
    assert line.startswith("non-finite: first at iteration 1 of 8 (loss, gradient norm): loss nan")
    assert "(finite); iterations 0..0: loss " in line
    rows = step_log.read(tmp_path / "diverges.csv")
    assert math.isfinite(rows["loss"][0]) and math.isnan(rows["loss"][1])
    assert all(math.isfinite(x) for x in rows["input_mean"])
    assert json.loads((tmp_path / "diverges.json").read_text())["first_nonfinite_step"] == 1
