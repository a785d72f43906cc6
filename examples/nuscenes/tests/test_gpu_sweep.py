"""examples/nuscenes/gpu-sweep.sh, the study's GPU driver, run whole on the CPU (``--device cpu
--tiny``): every stage ends ok, the table of stages comes last, and $OUT holds the files the
device tool brings back (at most 8), with each stage's results in them.
"""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("torchvision")
pytest.importorskip("nvidia.dali")

SCRIPT = Path(__file__).resolve().parents[1] / "gpu-sweep.sh"


def test_every_stage_runs_and_the_results_come_back_in_eight_files(tmp_path):
    # Seeded cells count as done, but those of a --seed-skip loader run again.
    seed = tmp_path / "seed"
    for cell in ("resnet18-x0.125-dl1-run1", "resnet18-x0.125-dl2-run1"):
        (seed / "cells" / cell).mkdir(parents=True)
        (seed / "cells" / cell / "rank0.json").write_text("{}")
    (seed / "machine.txt").write_text("a CPU\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    env.update(OMP_NUM_THREADS="1", PYTHON=sys.executable, OUT=str(tmp_path / "out"),
               STUDY_WORK=str(tmp_path / "work"), CALL_S="500")
    # sweep with --dry-run: the stage lists its cells and runs none (test_sweep.py runs them)
    proc = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--tiny", "--seed-cells",
                           str(seed), "--seed-skip", "dl1", "equivalence", "losscurves",
                           "nancheck", "sweep", "--dry-run"],
                          env=env, capture_output=True, text=True, timeout=550)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-6:]
    assert last[0] == "| stage | result | time | figures |"
    assert [row.split("|")[1:3] for row in last[2:]] == [
        [f" {s} ", " ok "] for s in ("equivalence", "losscurves", "nancheck", "sweep")]
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == sorted([
        "equivalence.json", "losscurves.json", "losscurves.svg", "machine.txt", "results.tar.gz",
        "stages.md"])
    eq = json.loads((out / "equivalence.json").read_text())
    assert eq["images"] == 12 and set(eq["final"]) == {"dali vs reference", "gpu vs reference"}
    loss = json.loads((out / "losscurves.json").read_text())
    assert loss["noise_pair"] == ["dali", "dali-seed1"] and loss["steps"] == 6
    labels = [r["label"] for r in loss["runs"]]
    assert labels == ["dali", "dali-seed1", "dali#2", "reference", "gpu"]
    with tarfile.open(out / "results.tar.gz") as tar:
        names = tar.getnames()
    for wait in ("no-wait", "wait"):
        assert any(n.endswith(f"nan/{wait}.csv") for n in names), wait
    assert any(n.endswith("loss/reference.log") for n in names)
    to_run = next(line for line in proc.stdout.splitlines() if line.startswith("cells to run:"))
    assert "resnet18-x0.125-dl1-run1" in to_run and "resnet18-x0.125-dl2-run1" not in to_run
