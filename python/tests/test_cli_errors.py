"""The `laptime` command on input it cannot read: every subcommand answers each bad file with one
line on stderr that names the file and what is wrong, and exit status 2; never a traceback, never
an output file."""

import copy
import json
import subprocess
import sys

import pytest

from laptime import cli

# Valid results with everything the subcommands read: a CPU-tracked loop (compare, html's
# comparison) and recorded intervals (plot, trace, html's plots).
GOOD = {
    "schema": 1, "rank": 0, "world_size": 1, "pid": 4242, "host": "node1",
    "num_warmup_iters": 1, "iterations_measured": 2,
    "measurements": [
        {"name": "loop", "count": 2, "total_s": 0.004, "mean_per_iter_s": 0.002,
         "mean_per_interval_s": 0.002, "min_s": 0.0015, "median_s": 0.002, "p90_s": 0.0025,
         "p99_s": 0.0025, "max_s": 0.0025, "running": False,
         "cpu": {"process_percent": 50.0, "process_cores": 1.0, "system_percent": 60.0},
         "io": {"read_mb_per_s": 0.0, "write_mb_per_s": None}}],
    "one_time": [{"name": "setup", "duration_s": 0.5, "running": False}],
    "samples": {"clock": "steady_clock_ns", "capacity": 16,
                "fields": ["name", "start_ns", "dur_ns", "iter"], "unrecorded": 0,
                "names": ["loop"],
                "iterations": [[0, 1_000_000], [1, 3_000_000], [2, 5_000_000]],
                "threads": [{"tid": 4242, "name": "main", "intervals": [
                    [0, 0, 900_000, 0], [0, 1_000_000, 1_500_000, 1],
                    [0, 3_000_000, 2_500_000, 2]]}]},
}


def good_text():
    return json.dumps(GOOD, indent=1)


def edited(change):
    """GOOD as JSON text after ``change(results)`` edited a copy of it."""
    results = copy.deepcopy(GOOD)
    change(results)
    return json.dumps(results)


def setitem(path, value):
    """A change that sets results[path[0]][path[1]]... to ``value``."""
    def change(results):
        obj = results
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return change


# name -> (the file's content: str, bytes, None for no file, "dir" for a folder; what the message
# must say)
BAD = {
    "missing": (None, "no such file"),
    "directory": ("dir", "is a directory"),
    "empty": ("", "empty"),
    "truncated": (good_text()[:200], "truncated"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not UTF-8"),
    "latin-1 text": (good_text().replace("node1", "M\u00fcller").encode("latin-1"), "not UTF-8"),
    "not JSON": ("schema = 1\n", "not JSON"),
    "NaN": (good_text().replace('"mean_per_iter_s": 0.002', '"mean_per_iter_s": NaN'), "NaN"),
    "overflowing number": (good_text().replace('"total_s": 0.004', '"total_s": 1e999'),
                           "not a finite number"),
    "deeply nested": ('{"schema": 1, "measurements": ' + "[" * 100_000 + "]" * 100_000 + "}",
                      "nested too deeply"),
    "a list": ("[1, 2, 3]", "not laptime results"),
    "another tool's JSON": ('{"name": "left-pad", "version": "1.3.0"}', "not laptime results"),
    "a trace": ('{"traceEvents": [], "displayTimeUnit": "ms"}', "laptime trace"),
    "a merged report": (edited(setitem(["merged"], True)), "laptime merge --json"),
    "another schema": (edited(setitem(["schema"], 2)), "schema 2"),
    "measurements not a list": (edited(setitem(["measurements"], {"loop": 1})),
                                "measurements: {\"loop\": 1}, not a list"),
    "a figure that is a string": (
        edited(lambda r: r["measurements"][0].update(mean_per_iter_s="2 ms")),
        "measurements[0].mean_per_iter_s: \"2 ms\", not a number"),
    "a name that is a number": (edited(lambda r: r["measurements"][0].update(name=7)),
                                "measurements[0].name: 7, not a string"),
    "cpu not an object": (edited(lambda r: r["measurements"][0].update(cpu=[50.0])),
                          "measurements[0].cpu: [50.0], not an object"),
    "a count that is a float": (edited(setitem(["iterations_measured"], 2.5)),
                                "iterations_measured: 2.5, not an integer"),
    "samples: fields longer than the intervals": (
        edited(setitem(["samples", "fields"], ["name", "start_ns", "dur_ns", "iter", "cpu"])),
        "4 values where samples.fields names 5"),
    "samples: fields without iter": (
        edited(setitem(["samples", "fields"], ["name", "start_ns", "dur_ns", "end_ns"])),
        "lacks iter"),
    "samples: a name index past the names": (
        edited(lambda r: r["samples"]["threads"][0]["intervals"][1].__setitem__(0, 3)),
        "indexes none of the 1 names"),
    "samples: a negative duration": (
        edited(lambda r: r["samples"]["threads"][0]["intervals"][1].__setitem__(2, -5)),
        "dur_ns -5, not an integer >= 0"),
    "samples: threads not a list": (edited(setitem(["samples", "threads"], "main")),
                                    "samples.threads"),
    # Found by a review that attacked the command: each of these passed the check and then
    # raised inside a subcommand (OverflowError, TypeError).
    "an integer figure too long for a float": (
        good_text().replace('"total_s": 0.004', '"total_s": 1' + "0" * 400),
        "measurements[0].total_s: 1000"),
    "samples: a duration past int64": (
        edited(lambda r: r["samples"]["threads"][0]["intervals"][1].__setitem__(2, 1 << 64)),
        "not an integer >= 0"),
    "a null rank": (edited(setitem(["rank"], None)), "rank: null, not an integer"),
    "null iterations": (edited(setitem(["iterations_measured"], None)),
                        "iterations_measured: null, not an integer"),
    "samples: capacity a string": (edited(setitem(["samples", "capacity"], "x")),
                                   "samples.capacity: \"x\", not an integer"),
    # Found by a second attack (about 3,500 mutated files per subcommand): these passed the check
    # and then raised inside a subcommand (TypeError, ValueError, OverflowError).
    "null measurements": (edited(setitem(["measurements"], None)),
                          "measurements: null, not a list"),
    "a negative mean": (edited(lambda r: r["measurements"][0].update(mean_per_iter_s=-1)),
                        "measurements[0].mean_per_iter_s: -1, not a figure laptime writes"),
    "a huge negative total": (edited(lambda r: r["measurements"][0].update(total_s=-1e308)),
                              "not a figure laptime writes"),
    "a CPU share of 1e308": (
        edited(lambda r: r["measurements"][0]["cpu"].update(process_percent=1e308)),
        "measurements[0].cpu.process_percent: 1e+308, not a figure laptime writes"),
    "samples: null iterations": (edited(setitem(["samples", "iterations"], None)),
                                 "samples.iterations: null, not a list"),
}

SUBCOMMANDS = {
    "compare": lambda path, out: ["compare", path],
    "merge": lambda path, out: ["merge", path],
    "plot": lambda path, out: ["plot", path, "-o", str(out / "out.png")],
    "trace": lambda path, out: ["trace", path, "-o", str(out / "out.trace.json")],
    "html": lambda path, out: ["html", path, "-o", str(out / "out.html")],
}


def bad_file(tmp_path, case):
    content, _ = BAD[case]
    path = tmp_path / "run.json"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    return str(path)


def outputs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    return out


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_each_subcommand_answers_bad_input_with_one_line_and_status_2(command, case, tmp_path,
                                                                      capsys):
    path = bad_file(tmp_path, case)
    out = outputs(tmp_path)
    assert cli.main(SUBCOMMANDS[command](path, out)) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"laptime {command}: {path}: "), err
    assert BAD[case][1] in err, err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_the_good_file_of_those_cases_is_read_by_every_subcommand(command, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "run.json"
    path.write_text(good_text())
    out = outputs(tmp_path)
    assert cli.main(SUBCOMMANDS[command](str(path), out)) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["plot", "trace"])
def test_plot_and_trace_name_the_file_that_has_no_recorded_intervals(command, tmp_path, capsys):
    path = tmp_path / "plain.json"
    path.write_text(edited(lambda r: r.pop("samples")))
    out = outputs(tmp_path)
    assert cli.main(SUBCOMMANDS[command](str(path), out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"laptime {command}: {path}: no recorded intervals")
    assert "LAPTIME_RECORD" in err and err.count("\n") == 1


@pytest.mark.parametrize("command", ["plot", "trace"])
def test_samples_are_read_by_field_name_so_fields_may_be_added(command, tmp_path):
    pytest.importorskip("matplotlib")

    def reorder(results):
        s = results["samples"]
        s["fields"] = ["iter", "dur_ns", "cpu_ns", "start_ns", "name"]
        for t in s["threads"]:
            t["intervals"] = [[it, dur, 7, start, name] for name, start, dur, it in t["intervals"]]

    path = tmp_path / "run.json"
    path.write_text(edited(reorder))
    out = outputs(tmp_path)
    assert cli.main(SUBCOMMANDS[command](str(path), out)) == 0
    if command == "trace":
        events = json.loads((out / "out.trace.json").read_text())["traceEvents"]
        got = [(e["ts"] * 1e3, e["dur"] * 1e3, e["args"]["iteration"]) for e in events
               if e["ph"] == "X"]
        assert got == [(0, 900_000, 0), (1_000_000, 1_500_000, 1), (3_000_000, 2_500_000, 2)]


def test_compare_names_the_file_without_the_measurement_asked_for(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(good_text())
    assert cli.main(["compare", str(path), "--name", "eval"]) == 2
    err = capsys.readouterr().err
    assert err == f"laptime compare: {path}: no measurement 'eval' (names: 'loop')\n"


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_the_command_itself_exits_2_without_a_traceback(command, tmp_path):
    path = bad_file(tmp_path, "latin-1 text")
    out = outputs(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "laptime", *SUBCOMMANDS[command](path, out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"laptime {command}: {path}: not UTF-8"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["trace", "plot", "html"])
def test_an_output_that_cannot_be_written_is_one_line_and_status_2(command, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(good_text(), encoding="utf-8")
    target = str(tmp_path / "no such folder" / "out")
    assert cli.main([command, str(path), "-o", target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err and "Traceback" not in err, err


def test_a_file_larger_than_results_ever_are_is_refused_after_that_many_bytes(tmp_path,
                                                                                monkeypatch,
                                                                                capsys):
    # `laptime merge /dev/zero` read until memory ran out (a MemoryError traceback): reading stops
    # past results.MAX_BYTES (1 GiB; lowered here so that the test reads little).
    from laptime import results
    monkeypatch.setattr(results, "MAX_BYTES", 1024)
    big = tmp_path / "big.json"
    big.write_text(good_text() + " " * 2048)
    assert cli.main(["merge", str(big)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "big.json: larger than" in err, err


@pytest.mark.parametrize("command", ["plot", "html"])
def test_without_matplotlib_the_plotting_commands_say_what_to_install(command, tmp_path,
                                                                      monkeypatch, capsys):
    # matplotlib is the optional `reports` extra: missing, it is one line and status 2, not a
    # ModuleNotFoundError traceback.
    path = tmp_path / "run.json"
    path.write_text(good_text(), encoding="utf-8")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert cli.main([command, str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matplotlib" in err and "pip install" in err, err
    assert not list(tmp_path.glob("out*"))
