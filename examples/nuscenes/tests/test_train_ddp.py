"""examples/nuscenes/train.py on the CPU: 2 processes under the real launcher
(``python -m torch.distributed.run``, gloo), the reference loader, a few iterations of tiny batches.

Asserts what a user of the study relies on: every rank measured the seed's names, each rank's
JSON is written, rank 0 prints one cross-rank report (min <= median <= max, the slowest rank
named), the in-process report is the one ``laptime merge rank*.json`` prints, and the run type is
switched by LAPTIME_PROFILE alone.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

from laptime import merge  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1]
TRAIN = EXAMPLE / "train.py"
NAMES = ["training loop", "IterBasedRunnerWithTime.train", "data fetch", "Training step",
         "Optimizer step"]
ITERS, WARMUP = 4, 1


def _have_loaders():
    if (EXAMPLE / "loaders.py").exists() and (EXAMPLE / "reader.py").exists():
        return True
    try:  # a stand-in on PYTHONPATH while the loader study's modules are not in this tree
        import loaders  # noqa: F401
        import reader  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _have_loaders(),
                                reason="examples/nuscenes/loaders.py and reader.py not here")


def run_train(tmp, *, profile="evaluation", nproc=2, extra_env=None, args=()):
    """Runs train.py (under the launcher when nproc > 0); returns (process, results dir)."""
    results = tmp / f"results-{profile}-{nproc}"
    # Only what the test sets: a LAPTIME_* variable of the calling shell would win over train.py.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAPTIME_")}
    env["OMP_NUM_THREADS"] = "1"
    if profile is None:
        env.pop("LAPTIME_PROFILE", None)
    else:
        env["LAPTIME_PROFILE"] = profile
    env.update(extra_env or {})
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 f"--nproc_per_node={nproc}"] if nproc else [sys.executable])
    cmd = launcher + [str(TRAIN), "--loader", "reference", "--device", "cpu",
                      "--dataroot", str(tmp / "data"), "--generate-samples", "4",
                      "--iters", str(ITERS), "--warmup", str(WARMUP), "--batch-size", "1",
                      "--workers", "0", "--image-scale", "0.125", "--results-dir", str(results),
                      "--summary", str(results / "summary.json"), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, results


@pytest.fixture(scope="module")
def evaluation_run(tmp_path_factory):
    return run_train(tmp_path_factory.mktemp("train"))


def test_each_rank_measures_the_seed_names_and_writes_its_json(evaluation_run):
    _, results = evaluation_run
    for rank in (0, 1):
        r = json.loads((results / f"rank{rank}.json").read_text())
        assert (r["rank"], r["world_size"]) == (rank, 2)
        assert r["iterations_measured"] == ITERS - WARMUP
        counts = {m["name"]: m["count"] for m in r["measurements"]}
        assert [n for n in counts if n in NAMES] == NAMES
        assert all(counts[n] == ITERS - WARMUP for n in NAMES)
        loop = next(m for m in r["measurements"] if m["name"] == "training loop")
        assert "cpu" in loop  # set_cpu_usage_meas_name("training loop")


def test_rank0_prints_one_cross_rank_report(evaluation_run):
    proc, results = evaluation_run
    out = proc.stdout
    assert out.count("laptime: cross-rank report, 2 rank(s) of world size 2") == 1
    merged = json.loads((results / "merged.json").read_text())
    assert [r["rank"] for r in merged["ranks"]] == [0, 1]
    by_name = {m["name"]: m for m in merged["measurements"]}
    for name in NAMES:
        m = by_name[name]
        assert [p["count"] for p in m["per_rank"]] == [ITERS - WARMUP] * 2
        t = m["mean_per_iter_s"]
        assert 0 < t["min"] <= t["median"] <= t["max"]
        slowest = max(m["per_rank"], key=lambda p: p["mean_per_iter_s"])
        assert t["slowest_rank"] == slowest["rank"]
        report = out[out.index("laptime: cross-rank report"):]
        line = next(l for l in report.splitlines() if l.strip().startswith(name + "  "))
        assert line.rstrip().endswith(f"rank {t['slowest_rank']}")
    assert merged["warnings"] == []


def test_the_in_process_report_is_what_laptime_merge_prints_from_the_files(evaluation_run):
    proc, results = evaluation_run
    cli = subprocess.run([sys.executable, "-m", "laptime", "merge",
                          str(results / "rank0.json"), str(results / "rank1.json")],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines()[0] in proc.stdout
    files = merge.merge(merge.load([results / "rank0.json", results / "rank1.json"]))
    in_process = json.loads((results / "merged.json").read_text())
    # Same ranks, names and counts; the files are written at exit, after the gather, so the
    # figures are the same measurements.
    assert files["ranks"] == in_process["ranks"]
    assert [(m["name"], m["count"]) for m in files["measurements"]] == \
           [(m["name"], m["count"]) for m in in_process["measurements"]]
    assert merge.format_report(files) == merge.format_report(in_process)


def test_summary_line_and_loss(evaluation_run):
    proc, results = evaluation_run
    s = json.loads((results / "summary.json").read_text())
    assert s["loader"] == "reference" and s["world_size"] == 2 and s["precision"] == "off"
    assert s["iters_measured"] == ITERS - WARMUP
    assert s["runtime_ms_per_iter"] > 0 and s["cpu_percent"] is not None
    assert s["loss_first"] > 0 and s["loss_last"] > 0
    assert "RESULT loader=reference world_size=2" in proc.stdout
    assert "loss: first iteration" in proc.stdout


def test_laptime_ranks_0_measures_rank0_only_and_the_report_says_so(tmp_path):
    proc, results = run_train(tmp_path, extra_env={"LAPTIME_RANKS": "0"})
    merged = json.loads((results / "merged.json").read_text())
    assert [r["measured_anything"] for r in merged["ranks"]] == [True, False]
    assert "rank(s) [1] measured nothing" in proc.stdout


def test_debugging_profile_without_a_launcher_checks_nvtx_order(tmp_path):
    # One process, no torch.distributed: NVTX on with order checks (a wrong pop would raise);
    # without CUDA the profiler calls only warn.
    proc, results = run_train(tmp_path, profile="debugging", nproc=0)
    assert "NVTX on" in proc.stdout
    merged = json.loads((results / "merged.json").read_text())
    assert merged["world_size"] == 1 and len(merged["ranks"]) == 1
    assert "Starting profiling" in proc.stdout and "Stopping profiling" in proc.stdout


def test_training_profile_measures_nothing_and_still_trains(tmp_path):
    proc, results = run_train(tmp_path, profile="training", nproc=0)
    assert "Stopwatch off" in proc.stdout and "loss: first iteration" in proc.stdout
    assert not (results / "rank0.json").exists()  # nothing enabled, nothing written


@pytest.mark.parametrize("nproc", [0, 2])
def test_max_seconds_stops_every_rank_at_the_same_iteration(tmp_path, nproc):
    # --iters far beyond what a second holds: the time limit stops the run, on every rank after
    # the same iteration (under the launcher the ranks agree every 10 iterations, so none waits in
    # an all-reduce for one that stopped, and the job ends instead of hanging).
    _, results = run_train(tmp_path, nproc=nproc, args=("--iters", "1000", "--max-seconds", "1"))
    runs = [json.loads((results / f"rank{r}.json").read_text()) for r in range(max(nproc, 1))]
    counts = {r["iterations_measured"] for r in runs}
    assert len(counts) == 1
    measured = counts.pop()
    assert 1 <= measured < 1000 - WARMUP
    if nproc:
        assert measured % 10 == 0
    loops = [next(m for m in r["measurements"] if m["name"] == "training loop") for r in runs]
    assert max(m["total_s"] for m in loops) >= 0.9  # it ran until the limit, not before
