"""laptime.merge: the cross-rank report, on fixtures with known figures (fixtures/merge/).

The fixtures are three ranks of one job: rank 1 is slowest in "data fetch", rank 2 in
"Training step", rank 2 never measured "eval", and "training loop" carries CPU figures.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from laptime import cli, merge

FIXTURES = Path(__file__).parent / "fixtures" / "merge"
FILES = [FIXTURES / f"rank{r}.json" for r in range(3)]


def by_name(merged):
    return {m["name"]: m for m in merged["measurements"]}


def test_merge_gives_min_median_max_across_ranks_and_the_slowest_rank():
    merged = merge.merge(merge.load(FILES))
    assert merged["world_size"] == 3
    assert [r["rank"] for r in merged["ranks"]] == [0, 1, 2]
    m = by_name(merged)
    assert list(m) == ["training loop", "data fetch", "Training step", "eval"]
    fetch = m["data fetch"]["mean_per_iter_s"]
    assert (fetch["min"], fetch["median"], fetch["max"]) == (0.020, 0.025, 0.040)
    assert fetch["slowest_rank"] == 1 and fetch["fastest_rank"] == 0
    assert m["Training step"]["mean_per_iter_s"]["slowest_rank"] == 2
    assert [p["count"] for p in m["training loop"]["per_rank"]] == [10, 10, 10]
    for entry in merged["measurements"]:
        t = entry["mean_per_iter_s"]
        assert t["min"] <= t["median"] <= t["max"]


def test_a_name_missing_on_a_rank_is_reported_not_invented():
    m = by_name(merge.merge(merge.load(FILES)))
    assert m["eval"]["missing_ranks"] == [2]
    assert [p["rank"] for p in m["eval"]["per_rank"]] == [0, 1]
    # the median of two ranks is their mean
    assert m["eval"]["mean_per_iter_s"]["median"] == pytest.approx(0.0015)


def test_a_name_measured_only_in_warm_up_on_a_rank_is_missing_there_not_zero():
    # Rank 2 timed "data fetch" in its warm-up only: its file lists the name with count 0 and
    # zero means, which are no figures of that rank.
    results = merge.load(FILES)
    fetch = next(m for m in results[2]["measurements"] if m["name"] == "data fetch")
    fetch.update(count=0, mean_per_iter_s=0.0, mean_per_interval_s=0.0, total_s=0.0)
    m = by_name(merge.merge(results))["data fetch"]
    assert m["missing_ranks"] == [2] and [p["rank"] for p in m["per_rank"]] == [0, 1]
    assert m["mean_per_iter_s"]["min"] == 0.020


def test_one_time_measurements_are_merged_across_ranks():
    results = merge.load(FILES)
    results[0]["one_time"] = [{"name": "setup", "duration_s": 0.010, "running": False}]
    results[1]["one_time"] = [{"name": "setup", "duration_s": 0.020, "running": False},
                              {"name": "save", "duration_s": None, "running": True}]
    merged = merge.merge(results)
    setup, save = merged["one_time"]
    assert (setup["name"], setup["missing_ranks"], save["missing_ranks"]) == ("setup", [2], [0, 2])
    assert (setup["duration_s"]["min"], setup["duration_s"]["max"]) == (0.010, 0.020)
    assert setup["duration_s"]["slowest_rank"] == 1 and save["running_ranks"] == [1]
    text = merge.format_report(merged)
    assert "setup: 10.000 ms / 15.000 ms / 20.000 ms, slowest rank 1" in text, text
    assert "save: still running on rank(s) [1]" in text, text


def test_cpu_of_tracked_names_per_rank_and_summed():
    m = by_name(merge.merge(merge.load(FILES)))
    cpu = m["training loop"]["cpu_process_percent"]
    assert (cpu["min"], cpu["median"], cpu["max"], cpu["sum"]) == (3.0, 4.0, 5.0, 12.0)
    assert "cpu_process_percent" not in m["data fetch"]


def test_rank_order_does_not_depend_on_input_order():
    merged = merge.merge(merge.load(list(reversed(FILES))))
    assert [r["rank"] for r in merged["ranks"]] == [0, 1, 2]
    assert by_name(merged)["data fetch"]["mean_per_iter_s"]["slowest_rank"] == 1


def test_duplicate_ranks_are_numbered_by_input_order_with_a_warning():
    results = merge.load(FILES)
    for r in results:
        r["rank"] = 0  # files from runs outside a launcher
    merged = merge.merge(results)
    assert [r["rank"] for r in merged["ranks"]] == [0, 1, 2]
    assert any("not unique" in w for w in merged["warnings"])


def test_a_rank_that_measured_nothing_is_named():
    results = merge.load(FILES)
    results[2]["measurements"] = []
    results[2]["iterations_measured"] = 0
    merged = merge.merge(results)
    assert any("rank(s) [2] measured nothing" in w and "LAPTIME_RANKS=all" in w
               for w in merged["warnings"])
    assert "measured nothing" in merge.format_report(merged)


def test_a_rank_that_measured_only_one_time_measurements_measured_something():
    results = merge.load(FILES)
    results[2]["measurements"] = []
    results[2]["iterations_measured"] = 0
    results[2]["one_time"] = [{"name": "setup", "duration_s": 1.5, "running": False}]
    assert not any("measured nothing" in w for w in merge.merge(results)["warnings"])


def test_a_spawn_launchers_own_file_beside_the_ranks_is_left_out_not_renumbered():
    """`laptime merge results/rank*.json` after torch.multiprocessing.spawn, whose launcher
    measured something: its file `rank0.<pid>.json` (rank 0 of a world of 1) sorts first. The
    ranks keep their numbers; the launcher's run is left out, with one warning naming it."""
    launcher = merge.load(FILES[:1])[0]
    launcher.update(rank=0, world_size=1, pid=4242)
    ranks = merge.load(FILES)
    for r in ranks:
        r["world_size"] = 3
    merged = merge.merge([launcher] + ranks)
    assert [(r["rank"], r["pid"]) for r in merged["ranks"]] == [
        (i, r["pid"]) for i, r in enumerate(ranks)]
    assert by_name(merged)["data fetch"]["mean_per_iter_s"]["slowest_rank"] == 1
    warnings = " | ".join(merged["warnings"])
    assert "pid 4242" in warnings and "left out" in warnings, warnings
    assert "not unique" not in warnings and "inputs for a world size" not in warnings, warnings


def test_the_same_run_given_twice_is_named_not_counted_as_two_ranks():
    results = merge.load([FILES[0], FILES[0]])
    merged = merge.merge(results)
    warnings = " | ".join(merged["warnings"])
    assert "inputs 0 and 1 are the same run" in warnings
    assert "1 of 3 ranks merged" in warnings  # one run, given twice
    # merged once: one rank, its own figures (not a second rank, nor summed twice)
    assert len(merged["ranks"]) == 1
    assert by_name(merged)["training loop"]["cpu_process_percent"]["sum"] == 3.0


def test_more_inputs_than_the_world_size_is_said_as_such():
    results = merge.load(FILES)
    for r in results:
        r["world_size"] = 2
    warnings = merge.merge(results)["warnings"]
    assert any("3 inputs for a world size of 2" in w for w in warnings)
    assert not any("3 of 2 ranks" in w for w in warnings)


def test_a_name_still_running_on_a_rank_is_flagged():
    # a crashed job: rank 1's results were written with "data fetch" open
    results = merge.load(FILES)
    fetch = next(m for m in results[1]["measurements"] if m["name"] == "data fetch")
    fetch["running"] = True
    merged = merge.merge(results)
    assert by_name(merged)["data fetch"]["running_ranks"] == [1]
    assert by_name(merged)["eval"]["running_ranks"] == []
    text = merge.format_report(merged)
    assert "still running on rank(s) [1]" in text


def test_the_report_escapes_control_characters_and_a_long_name_pads_only_its_own_row():
    results = merge.load(FILES)
    for r in results:
        r["host"] = "evil\x1b]0;title\x07"
        for m in r["measurements"]:
            if m["name"] == "data fetch":
                m["name"] = "fetch\x1b[2J\nFAKE line\x00"
            if m["name"] == "eval":
                m["name"] = "e" * 300
    text = merge.format_report(merge.merge(results))
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert "FAKE line" in text and not any(l.startswith("FAKE") for l in text.splitlines())
    row = next(l for l in text.splitlines() if l.strip().startswith("training loop"))
    assert len(row) < 140  # the 300-character name does not widen every row


def test_sub_microsecond_times_are_printed_in_nanoseconds():
    assert merge._t(4.2e-8) == "42 ns"
    assert merge._t(3.5e-7) == "350 ns"
    assert merge._t(2.5e-6) == "2.5 us"
    assert merge._t(0.0) == "0 ns"
    # at a unit's edge, the larger unit: never "1000 ns" or "1000.0 us"
    assert merge._t(9.9996e-7) == "1.0 us"
    assert merge._t(9.9996e-4) == "1.000 ms"


def test_wrong_schema_and_empty_input_are_errors():
    with pytest.raises(merge.MergeError, match="schema"):
        merge.merge([{"schema": 2}])
    with pytest.raises(merge.MergeError, match="nothing to merge"):
        merge.merge([])


def test_report_text_names_each_measurement_and_the_slowest_rank():
    text = merge.format_report(merge.merge(merge.load(FILES)))
    assert "3 rank(s) of world size 3" in text
    line = next(l for l in text.splitlines() if l.strip().startswith("data fetch"))
    assert "10 on each" in line and "20.000 ms" in line and "25.000 ms" in line
    assert "40.000 ms" in line and line.rstrip().endswith("rank 1")
    assert "not measured on rank(s) [2]" in text
    assert "sum 12.0 %" in text
    # A name two of the three ranks measured says so in its count, not "on each".
    line = next(l for l in text.splitlines() if l.strip().startswith("eval"))
    assert "on each" not in line and "on 2 of 3" in line, line


def test_the_command_prints_the_same_report_and_writes_merged_json(tmp_path, capsys):
    out = tmp_path / "merged.json"
    assert cli.main(["merge", *map(str, FILES), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == merge.format_report(merge.merge(merge.load(FILES)))
    assert json.loads(out.read_text()) == merge.merge(merge.load(FILES))


def test_merge_json_writes_through_a_link_keeps_the_mode_and_refuses_a_folder(tmp_path, capsys):
    import os
    expected = merge.merge(merge.load(FILES))
    target = tmp_path / "target.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert cli.main(["merge", *map(str, FILES), "--json", str(link)]) == 0
    assert link.is_symlink()  # the link stays; its target holds the merged results
    assert json.loads(target.read_text()) == expected
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    capsys.readouterr()
    # A folder: one line naming it, no report, no temporary file left.
    folder = tmp_path / "folder"
    folder.mkdir()
    assert cli.main(["merge", *map(str, FILES), "--json", str(folder)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and str(folder) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "link.json", "target.json"]


def test_merge_json_to_a_pipe_writes_into_it(tmp_path):
    import os
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # The reader is open first (non-blocking, so that a command that replaced the pipe instead
    # fails this test rather than hanging it); the merged JSON fits the pipe's buffer.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    proc = subprocess.run([sys.executable, "-m", "laptime", "merge", *map(str, FILES),
                           "--json", str(fifo)], stdout=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 0
    with os.fdopen(fd, "rb") as f:
        got = json.loads(f.read() or b"null")
    assert got == merge.merge(merge.load(FILES))
    assert fifo.is_fifo()  # written into, not replaced by a regular file


def test_merge_json_to_dev_stdout_when_stdout_is_a_pipe_writes_into_it():
    # `laptime merge ... --json /dev/stdout | jq`: /dev/stdout is /proc/self/fd/1, whose link
    # text "pipe:[N]" names no file
    proc = subprocess.run([sys.executable, "-m", "laptime", "merge", *map(str, FILES),
                           "--json", "/dev/stdout"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # stdout holds the JSON alone (| jq reads it); the report goes to stderr
    assert json.loads(proc.stdout) == merge.merge(merge.load(FILES))
    assert proc.stderr.startswith("laptime: cross-rank report")


def test_the_command_fails_cleanly_on_a_file_that_is_not_json(tmp_path):
    bad = tmp_path / "rank0.json"
    bad.write_text("{ torn")
    proc = subprocess.run([sys.executable, "-m", "laptime", "merge", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "not JSON" in proc.stderr


def test_in_process_gather_without_torch_distributed_is_this_process_alone(stopwatch):
    from laptime import distributed

    stopwatch.enable(0, None, False)
    stopwatch.start_meas("step")
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    results = distributed.gather()
    assert len(results) == 1 and results[0]["measurements"][0]["name"] == "step"
