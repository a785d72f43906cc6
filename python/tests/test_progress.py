"""The bottleneck verdict and the live progress line from Python (docs/stopwatch.md): the verdict of
real loops, and what a real pseudo-terminal and a pipe receive from the progress line."""

import os
import pty
import subprocess
import sys
import time
import tty

import pytest


def loop(sw, iters, data_s, step_s):
    for _ in range(iters):
        sw.start_meas("data")
        time.sleep(data_s)
        sw.end_meas("data")
        sw.start_meas("step")
        time.sleep(step_s)
        sw.end_meas("step")
        sw.finish_iter()


def test_a_loop_waiting_for_data_is_data_bound_and_says_so(stopwatch):
    stopwatch.enable(1)
    loop(stopwatch, 10, 0.008, 0.001)
    r = stopwatch.results()
    assert r["loop"]["count"] == 9
    assert r["verdict"]["kind"] == "data-bound"
    assert r["verdict"]["data_name"] == "data"
    assert r["verdict"]["data_share"] > 0.5
    assert "\n  verdict: data-bound: " in stopwatch.report()


def test_a_loop_whose_step_dominates_is_compute_bound(stopwatch):
    stopwatch.enable(1)
    loop(stopwatch, 10, 0.001, 0.008)
    v = stopwatch.results()["verdict"]
    assert v["kind"] == "compute-bound"
    assert v["data_share"] < 0.5


def test_set_data_name_chooses_the_wait(stopwatch):
    stopwatch.set_data_name("step")
    stopwatch.enable(1)
    loop(stopwatch, 6, 0.001, 0.006)
    v = stopwatch.results()["verdict"]
    assert v["data_name"] == "step"
    assert v["kind"] == "data-bound"
    stopwatch.set_data_name(None)  # the default rule again: "data"
    assert stopwatch.results()["verdict"]["data_name"] == "data"


def test_set_progress_and_set_total_iters_check_their_arguments(stopwatch):
    with pytest.raises(ValueError, match="'bar' is not one of"):
        stopwatch.set_progress("bar")
    # The whole str: not its part before a NUL; one with no UTF-8 form is no choice either.
    for mode in ("line\x00garbage", "\ud800"):
        with pytest.raises(ValueError, match="is not one of 'report', 'line', 'off'"):
            stopwatch.set_progress(mode)
    with pytest.raises(ValueError, match="is not one of 'table', 'seed'"):
        stopwatch.set_report_format("seed\x00garbage")
    with pytest.raises(TypeError):
        stopwatch.set_progress(1)
    with pytest.raises(ValueError, match="must be >= 0"):
        stopwatch.set_total_iters(-1)
    stopwatch.set_total_iters(None)


SCRIPT = """
import time, laptime
sw = laptime.Stopwatch()
sw.enable(1, 2)
sw.set_progress("line")
sw.set_total_iters(13)
for i in range(13):
    if i == 9:
        sw.set_progress("report")
    if i == 11:
        sw.set_progress("line")
    sw.start_meas("step")
    time.sleep(0.002)
    sw.end_meas("step")
    sw.finish_iter()
sw.print_eval_times()
"""


def run_script(stdout_fd, term="xterm", ci=None):
    env = dict(os.environ)
    env.pop("CI", None)
    env["TERM"] = term
    if ci is not None:
        env["CI"] = ci
    for key in [k for k in env if k.startswith("LAPTIME_")]:
        del env[key]
    return subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=stdout_fd, env=env)


def read_pty(term="xterm", ci=None):
    master, slave = pty.openpty()
    tty.setraw(slave)  # no "\n" -> "\r\n" on the way: the bytes as written
    proc = run_script(slave, term, ci)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return out.decode()


def test_on_a_pseudo_terminal_the_progress_line_rewrites_itself():
    out = read_pty()
    assert out.startswith("\rlaptime: iter 3/13 | "), out
    for it in ("\rlaptime: iter 5/13 | ", "\rlaptime: iter 9/13 | ", "\rlaptime: iter 13/13 | "):
        assert it in out
    assert out.count("\x1b[K") == 5
    assert "| ETA 0s | loop p50 " in out
    report = out.index("laptime stopwatch: 10 measured iterations")
    assert out[report - 4:report] == "\x1b[K\n"  # the report starts below the line
    assert "\n" not in out[:report - 1]
    last = out.index("laptime stopwatch: 12 measured iterations")  # print_eval_times()
    assert out[last - 4:last] == "\x1b[K\n"


@pytest.mark.parametrize("where", ["pipe", "TERM=dumb", "CI=true"])
def test_elsewhere_the_progress_line_is_plain_lines(where):
    if where == "pipe":
        proc = run_script(subprocess.PIPE)
        out = proc.communicate(timeout=60)[0].decode()
        assert proc.returncode == 0
    else:
        out = read_pty(term="dumb") if where == "TERM=dumb" else read_pty(ci="true")
    assert "\r" not in out and "\x1b[K" not in out, out
    assert out.startswith("laptime: iter 3/13 | ")
    assert "\nlaptime: iter 5/13 | " in out
    assert "\nlaptime stopwatch: 10 measured iterations" in out
    assert "\nlaptime stopwatch: 12 measured iterations" in out
    assert "\n\n" not in out
