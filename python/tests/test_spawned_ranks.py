"""Ranks started by `torch.multiprocessing.spawn` (here multiprocessing's spawn itself, which it
wraps) from a launcher that enabled laptime: each rank that calls `set_rank()` or `enable()` in its
training function is a program of its own, not a worker merged into the launcher, and writes its
own `LAPTIME_OUTPUT` file; a DataLoader worker's re-import of the main module stays a worker
(test_workers.py). The launcher, which measured nothing, writes no file over rank 0's
(docs/workers.md)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import multiprocessing, sys
import laptime

{top}
sw = laptime.Stopwatch()


def rank_main(rank, world):
    {in_rank}
    for _ in range(7):
        with sw.measure("step"):
            pass
        sw.finish_iter()
    print(f"rank {{rank}}: is_worker={{sw.is_worker}}", flush=True)


if __name__ == "__main__":
    {launcher}
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=rank_main, args=(r, 2)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
"""

CASES = {
    # configure_from_env() at the top (re-run in each rank's import), set_rank() in the rank.
    "configure at import, set_rank in the rank": (
        "laptime.configure_from_env()", "sw.set_rank(rank, world)", "pass",
        {"LAPTIME_STOPWATCH": "1", "LAPTIME_WARMUP": "2", "LAPTIME_RANKS": "all"}),
    # The launcher times its own set-up; each rank enables its own Stopwatch.
    "the launcher enables, and each rank": (
        "", "sw.enable(2)\n    sw.set_rank(rank, world)", "sw.enable(0)", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_spawned_ranks_are_programs_of_their_own(tmp_path, case):
    top, in_rank, launcher, env_vars = CASES[case]
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).format(top=top, in_rank=in_rank, launcher=launcher))
    env = dict(os.environ, LAPTIME_OUTPUT=str(tmp_path / "rank{rank}.json"), **env_vars)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LAPTIME_PROFILE"):
        env.pop(name, None)
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "is_worker=True" not in run.stdout, run.stdout
    for rank in (0, 1):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert (results["rank"], results["world_size"]) == (rank, 2)
        assert results["iterations_measured"] == 5, results
        step = next(m for m in results["measurements"] if m["name"] == "step")
        assert step["count"] == 5 and not step.get("workers")


def test_a_launcher_that_measured_writes_beside_rank_0s_file_not_over_it(tmp_path):
    # The launcher times the spawn itself: it is rank 0 of 1 and has results, so it writes; rank
    # 0's file, written by another process during the launcher's run, stays, and the launcher's
    # results go beside it with one warning (docs/configuration.md, LAPTIME_OUTPUT).
    script = tmp_path / "train.py"
    launcher = "sw.enable(0)\n    sw.start_one_time_measurement('spawn')"
    script.write_text(textwrap.dedent(SCRIPT).format(
        top="", in_rank="sw.enable(2)\n    sw.set_rank(rank, world)", launcher=launcher))
    env = dict(os.environ, LAPTIME_OUTPUT=str(tmp_path / "rank{rank}.json"))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LAPTIME_PROFILE"):
        env.pop(name, None)
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    assert (rank0["rank"], rank0["world_size"], rank0["iterations_measured"]) == (0, 2, 5)
    (beside,) = tmp_path.glob("rank0.*.json")
    launcher_results = json.loads(beside.read_text())
    assert [o["name"] for o in launcher_results["one_time"]] == ["spawn"]
    assert beside.name == f"rank0.{launcher_results['pid']}.json"
    assert run.stderr.count("was written by pid") == 1, run.stderr
