"""One Stopwatch and one NVTX wrapper per process, shared by laptime's Python module and a separate
C++ extension compiled from laptime's headers (its own copy of the code, loaded RTLD_LOCAL with
hidden visibility, as every extension is)."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import laptime
from test_hostile_programs import LEGACY_SUBINTERPRETERS, skip_without_subinterpreters


def test_python_enable_is_seen_by_cpp(cpp_ext, stopwatch, nvtx):
    assert not cpp_ext.is_enabled()
    stopwatch.enable(0)
    assert cpp_ext.is_enabled()
    nvtx.enable(False, False, True)
    assert cpp_ext.nvtx_is_enabled()


def test_python_finish_iter_drives_warmup_of_cpp_measurements(cpp_ext, stopwatch):
    stopwatch.enable(2)
    for _ in range(5):
        cpp_ext.start("cpp data loader")
        cpp_ext.end("cpp data loader")
        stopwatch.start_meas("python step")
        stopwatch.end_meas("python step")
        stopwatch.finish_iter()  # Python ends the iteration
    by_name = {m["name"]: m for m in stopwatch.results()["measurements"]}
    assert by_name["cpp data loader"]["count"] == 3  # 5 iterations, 2 of warm-up
    assert by_name["python step"]["count"] == 3
    assert stopwatch.get_num_nonwarmup_iters_measured() == 3


def test_cpp_finish_iter_counts_for_python(cpp_ext, stopwatch):
    stopwatch.enable(1)
    for _ in range(3):
        stopwatch.start_meas("python step")
        stopwatch.end_meas("python step")
        cpp_ext.finish_iter()
    assert stopwatch.get_num_nonwarmup_iters_measured() == 2


def test_one_report_shows_both(cpp_ext, stopwatch):
    stopwatch.enable(0)
    cpp_ext.start("from C++")
    cpp_ext.end("from C++")
    stopwatch.start_meas("from Python")
    stopwatch.end_meas("from Python")
    stopwatch.finish_iter()
    for report in (stopwatch.report(), cpp_ext.report()):
        assert re.search(r"^\s+from C\+\+\s", report, re.M)
        assert re.search(r"^\s+from Python\s", report, re.M)
    assert stopwatch.report() == cpp_ext.report()


def test_a_measurement_started_in_cpp_ends_in_python(cpp_ext, stopwatch):
    stopwatch.enable(0)
    cpp_ext.start("handed over")
    stopwatch.end_meas("handed over")  # same thread, same slot
    with pytest.raises(RuntimeError, match="is not running"):
        cpp_ext.end("handed over")


def test_nvtx_stack_is_shared(cpp_ext, nvtx):
    nvtx.enable(False, False, True)
    cpp_ext.range_push("pushed in C++")
    with pytest.raises(laptime.UsageError, match="innermost open range is 'pushed in C\\+\\+'"):
        nvtx.range_pop("something else")
    nvtx.range_pop("pushed in C++")


def _prints_two_reports_then_done(cpp_ext, program):
    """Runs `program` (sys.argv[1]: laptime_cpp_ext's folder): it must end, with both reports."""
    r = subprocess.run([sys.executable, "-c", program, str(Path(cpp_ext.__file__).parent)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("measured iteration") == 2 and r.stdout.endswith("done\n"), r.stdout


def test_a_cpp_thread_prints_while_the_gil_is_held_by_whoever_waits_for_it(cpp_ext):
    """A pybind11 op that joins its C++ thread without releasing the GIL: the report that thread
    prints goes to the C stdout after a short wait for the GIL, instead of waiting forever."""
    _prints_two_reports_then_done(cpp_ext, (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import laptime, laptime_cpp_ext\n"
        "sw = laptime.Stopwatch()\n"
        "sw.enable(0, 1)\n"
        "for _ in range(2): laptime_cpp_ext.finish_on_cpp_thread_holding_gil()\n"
        "print('done', flush=True)\n"
    ))


@pytest.mark.parametrize("before", ["", "a subinterpreter made and destroyed"])
def test_a_python_thread_whose_gil_an_op_released_prints_while_another_op_holds_it(cpp_ext,
                                                                                   before):
    """Two ops of one extension: one releases the GIL on a Python thread and finishes an iteration
    (a report is due), the other holds the GIL until that is done. The report goes to the C stdout
    after a short wait for the GIL, instead of waiting forever; also once a subinterpreter was
    made (CPython then answers PyGILState_Check() with yes on every thread)."""
    made = ""
    if before:
        skip_without_subinterpreters()
        made = textwrap.dedent(LEGACY_SUBINTERPRETERS) + "interpreters.destroy(new_interpreter())\n"
    _prints_two_reports_then_done(cpp_ext, made + (
        "import sys, threading, time; sys.path.insert(0, sys.argv[1])\n"
        "import laptime, laptime_cpp_ext as ext\n"
        "laptime.Stopwatch().enable(0, 1)\n"
        "for _ in range(2):\n"
        "    t = threading.Thread(target=ext.finish_with_gil_released); t.start()\n"
        "    while ext.stage() != 1: time.sleep(0.001)\n"
        "    ext.hold_gil_until_finished(); t.join()\n"
        "print('done', flush=True)\n"
    ))


@pytest.mark.parametrize("order", ["logger, then import", "import, then logger"])
def test_a_print_function_a_cpp_extension_set_keeps_every_report(cpp_ext, tmp_path, order):
    """import laptime neither replaces a print function set in C++ nor removes it at exit."""
    log = tmp_path / "reports.log"
    setup = ["laptime_cpp_ext.log_reports_to(sys.argv[2])", "import laptime"]
    if order == "import, then logger":
        setup.reverse()
    program = "\n".join([
        "import sys; sys.path.insert(0, sys.argv[1])",
        "import laptime_cpp_ext",
        *setup,
        "sw = laptime.Stopwatch()",
        "sw.enable(0, 1)",
        "sw.finish_iter()",
    ])
    here = str(Path(cpp_ext.__file__).parent)
    r = subprocess.run([sys.executable, "-c", program, here, str(log)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LAPTIME_PRINT_AT_EXIT="1"))
    assert r.returncode == 0, r.stderr
    assert "laptime stopwatch" not in r.stdout
    # The periodic report and the at-exit one.
    assert log.read_text().count("laptime stopwatch: 1 measured iteration") == 2


def test_periodic_report_from_a_cpp_thread_reaches_sys_stdout(cpp_ext, stopwatch, capsys):
    stopwatch.enable(0, 1)
    cpp_ext.measure_and_finish_on_cpp_thread("cpp thread work")
    out = capsys.readouterr().out  # written by the print function, GIL taken on the C++ thread
    assert "1 measured iteration " in out and "cpp thread work" in out
