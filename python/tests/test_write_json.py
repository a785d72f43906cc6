"""Stopwatch.write_json (the atomic writer of LAPTIME_OUTPUT), and Ctrl-C in a Python process
whose results go to LAPTIME_OUTPUT: KeyboardInterrupt as usual, and the file written
(docs/guarantees.md)."""

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import laptime


def measure(stopwatch, iters):
    for _ in range(iters):
        with stopwatch.measure("step"):
            pass
        stopwatch.finish_iter()


def test_write_json_writes_the_results(stopwatch, tmp_path):
    stopwatch.enable(0)
    measure(stopwatch, 5)
    path = tmp_path / "results.json"
    stopwatch.write_json(path)  # os.PathLike
    written, now = json.loads(path.read_text()), stopwatch.results()
    # The clock line is the one field that may change between the two: in a process's first
    # 10 ms the cycle counter is still being calibrated (this test run alone is that early).
    written_clock, now_clock = written.pop("clock"), now.pop("clock")
    assert written_clock.split()[0] == now_clock.split()[0]  # the same clock
    assert written == now
    path.write_text("old")
    stopwatch.write_json(str(path))  # over an existing file
    assert json.loads(path.read_text())["iterations_measured"] == 5
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


@pytest.mark.parametrize("where, error, code", [
    ("no-such-dir/results.json", FileNotFoundError, errno.ENOENT),
    ("", IsADirectoryError, errno.EISDIR),
])
def test_write_json_raises_oserror_with_the_path(stopwatch, tmp_path, where, error, code):
    stopwatch.enable(0)
    path = str(tmp_path / where) if where else str(tmp_path)
    with pytest.raises(error) as info:
        stopwatch.write_json(path)
    assert info.value.errno == code
    assert info.value.filename == path


# The child starts as a program started from a terminal does: Python's own SIGINT handler in
# place. Started from a shell without job control (a CI script run in the background), the test
# runner and every child it starts inherit SIGINT ignored, and then neither Python nor laptime
# (which leaves ignored signals ignored) would see the Ctrl-C this test sends.
CHILD = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import laptime
    sw = laptime.Stopwatch(0)
    for _ in range(20):
        with sw.measure("step"):
            pass
        sw.finish_iter()
    print("ready", flush=True)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("KeyboardInterrupt caught", flush=True)
        if sys.argv[1] == "reraise":
            raise
""")


def interrupt_child(tmp_path, mode):
    """Runs CHILD with LAPTIME_OUTPUT, sends it SIGINT (Ctrl-C) once it sleeps; returns the
    finished process, its stdout and stderr, seconds from SIGINT to its end, and the file."""
    output = tmp_path / "results.json"
    env = dict(os.environ, LAPTIME_OUTPUT=str(output))
    env.pop("LAPTIME_SIGNAL_HANDLERS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)  # inside time.sleep
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return proc, out, err, time.monotonic() - start, output


def test_ctrl_c_caught_by_the_program_then_a_normal_exit_writes_the_file(tmp_path):
    proc, out, err, seconds, output = interrupt_child(tmp_path, "catch")
    assert proc.returncode == 0, err
    assert "KeyboardInterrupt caught" in out
    assert seconds < 10  # interrupted the sleep, not after it
    assert json.loads(output.read_text())["iterations_measured"] == 20


def test_ctrl_c_not_caught_ends_python_as_usual_and_the_file_is_written(tmp_path):
    proc, out, err, seconds, output = interrupt_child(tmp_path, "reraise")
    # Python ends an uncaught KeyboardInterrupt by SIGINT (status 130 in a shell); C atexit
    # handlers do not run then: the file is the one written when the signal came.
    assert proc.returncode == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err
    assert seconds < 10
    assert json.loads(output.read_text())["iterations_measured"] == 20


def test_an_uncaught_keyboardinterrupt_no_signal_brought_still_writes_and_prints(tmp_path):
    # `raise KeyboardInterrupt` (or a Ctrl-C through a handler the program installed after
    # laptime's): Python runs its atexit handlers, then ends by SIGINT, so C atexit handlers never
    # run. The package's own atexit handler gives the at-exit output then.
    output = tmp_path / "results.json"
    env = dict(os.environ, LAPTIME_OUTPUT=str(output), LAPTIME_PRINT_AT_EXIT="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = ("import laptime\nsw = laptime.Stopwatch()\nsw.enable(0)\nfor _ in range(3):\n"
            "    sw.start_meas('step'); sw.end_meas('step'); sw.finish_iter()\n"
            "raise KeyboardInterrupt\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGINT, proc.stderr
    assert "laptime stopwatch: 3 measured iterations" in proc.stdout
    assert json.loads(output.read_text())["iterations_measured"] == 3
