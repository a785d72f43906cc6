"""The runner's JSON: the seed's measurements, and the loop's CPU includes the worker processes.

The check does not go through laptime: the runner reads utime+stime of itself and of every
descendant from /proc/<pid>/stat right before the first measured iteration and right after the
last, and laptime's figure for the loop (process_cores, a time-weighted mean over the loop's
intervals) times the loop's total time must agree with that sum:

- it must exceed the main process's own share by more than half the workers' share: the
  workers do the decoding, so a figure that missed them would sit at the main process's share;
- |laptime - /proc| <= 0.1 cores + 15 %: both read the same kernel counters, which tick in
  1/CLK_TCK (10 ms) steps per process; over the window (>= 2 s here) three processes give at most
  a few ticks of difference (0.03 cores); the intervals leave out the gaps between iterations
  (finish_iter, a few microseconds each) and the /proc reads bracket the window by a few
  milliseconds more. The 15 % covers a loaded machine, where the workers keep running between
  a read and the next timestamp.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLE


def _run(root, out, *extra):
    cmd = [sys.executable, os.path.join(EXAMPLE, "runner.py"), "--dataroot", root,
           "--json", out, "--batch-size", "2", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(out) as f:
        results = json.load(f)
    with open(out[:-5] + ".loader.json") as f:
        side = json.load(f)
    return done.stdout, results, side


def test_runner_reports_like_the_seed_and_counts_worker_cpu(nuscenes_root, tmp_path):
    stdout, results, side = _run(nuscenes_root, str(tmp_path / "ref.json"), "--loader",
                                 "reference", "--workers", "2", "--batches", "8", "--warmup", "2")
    assert "reference: Average runtime: " in stdout and " s/batch " in stdout
    assert results["num_warmup_iters"] == 2 and results["iterations_measured"] == 6
    names = [m["name"] for m in results["measurements"]]
    assert names[:2] == ["data loading loop", "data fetch"]
    assert [o["name"] for o in results["one_time"]] == ["pipeline creation"]
    loop = results["measurements"][0]
    assert loop["count"] == 6 and loop["cpu"] is not None and loop["io"] is not None

    check = side["proc_cpu_check"]
    assert check["workers"] >= 2, check  # the DataLoader's workers were found under the runner
    cores = loop["cpu"]["process_cores"]
    window = loop["total_s"]
    main_share = check["main_cpu_s"] / check["wall_s"]
    workers_share = check["workers_cpu_s"] / check["wall_s"]
    expected = main_share + workers_share
    assert workers_share > 0.2, check  # the workers decoded during the loop
    assert cores > main_share + 0.5 * workers_share, (cores, check)
    assert abs(cores - expected) <= 0.1 + 0.15 * expected, (cores, expected, check, window)
    # the workers' own per-stage clocks came back with the batches
    assert side["worker_stages_s"]["decode_s"] > 0 and side["worker_stages_s"]["augment_s"] > 0

    # laptime's own figures from inside the two worker processes, merged into the main report
    # with no code in the workers but the measurements (and the loader's worker_init_fn label)
    by_name = {m["name"]: m for m in results["measurements"]}
    assert results["worker_processes"] == 2
    for stage in ("decode", "augment", "collate"):
        workers = by_name[stage]["workers"]
        assert sorted(w["label"] for w in workers) == ["worker 0", "worker 1"], workers
        assert sum(w["count"] for w in workers) == by_name[stage]["count"] > 0
        assert all(w["count"] > 0 and w["median_s"] > 0 for w in workers), workers
    assert "reference: decode   worker 0" in stdout


def test_runner_measures_decode_and_augment_where_they_run_in_the_main_process(nuscenes_root,
                                                                               tmp_path):
    # With no worker processes (the study's breakdown run) laptime sees every stage itself.
    _, results, _ = _run(nuscenes_root, str(tmp_path / "inline.json"), "--loader", "reference",
                         "--workers", "0", "--batches", "3", "--warmup", "1")
    by_name = {m["name"]: m for m in results["measurements"]}
    for stage in ("decode", "augment", "collate"):
        assert by_name[stage]["count"] > 0, stage
    assert by_name["decode"]["count"] == 2 * 6 * 2  # batches x cameras x samples per batch
    assert by_name["data fetch"]["total_s"] >= by_name["decode"]["total_s"] + by_name["augment"]["total_s"]


def test_runner_runs_the_dali_pipeline(nuscenes_root, tmp_path):
    pytest.importorskip("nvidia.dali")
    stdout, results, side = _run(nuscenes_root, str(tmp_path / "dali.json"), "--loader", "dali",
                                 "--workers", "1", "--dali-threads", "2", "--batches", "4",
                                 "--warmup", "1", "--device", "cpu")
    assert "decoder cpu" in stdout
    assert results["iterations_measured"] == 3
    assert side["proc_cpu_check"]["workers"] >= 1  # DALI's Python worker process
