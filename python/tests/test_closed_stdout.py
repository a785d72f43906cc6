"""laptime's own output into a closed or full stdout (`python train.py | head -1`): the reports and
progress lines are dropped with one warning on stderr, never a traceback per report, never the
process, and the LAPTIME_OUTPUT file is written at exit (docs/guarantees.md). Also: write_json
through a symbolic link, live or dangling, writes the link's target and keeps the link."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import signal, sys
    import laptime
    if sys.argv[2] == "sigpipe-default":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sw = laptime.Stopwatch(0, print_every_n_iters=1)
    if sys.argv[1] == "line":
        sw.set_progress("line")
    for _ in range(2000):
        with sw.measure("step"):
            pass
        sw.finish_iter()
    assert signal.getsignal(signal.SIGPIPE) == (
        signal.SIG_DFL if sys.argv[2] == "sigpipe-default" else signal.SIG_IGN)
""")


def run_into_closed_pipe(tmp_path, what, sigpipe):
    """Runs CHILD with stdout a pipe whose read end is closed before it starts."""
    output = tmp_path / "results.json"
    env = dict(os.environ, LAPTIME_OUTPUT=str(output), LAPTIME_PRINT_AT_EXIT="1")
    for name in ("LAPTIME_PROFILE", "LAPTIME_PROGRESS", "LAPTIME_PRINT_EVERY"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone, as after `| head -1`
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, what, sigpipe], env=env,
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    return proc, output


@pytest.mark.parametrize("what", ["report", "line"])
@pytest.mark.parametrize("sigpipe", ["python-default", "sigpipe-default"])
def test_reports_into_a_closed_stdout_cost_one_warning_and_no_traceback(tmp_path, what, sigpipe):
    proc, output = run_into_closed_pipe(tmp_path, what, sigpipe)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "BrokenPipeError" not in proc.stderr
    assert "Exception ignored" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) <= 1, proc.stderr
    assert len(lines) == 1 and "stdout: " + os.strerror(32) in lines[0], proc.stderr
    assert json.loads(output.read_text())["iterations_measured"] == 2000


def test_write_json_through_a_symbolic_link_writes_its_target_and_keeps_the_link(
        stopwatch, tmp_path):
    stopwatch.enable(0)
    stopwatch.start_meas("step")
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    link = tmp_path / "results.json"
    link.symlink_to("target.json")  # dangling
    stopwatch.write_json(link)
    assert link.is_symlink()
    assert json.loads((tmp_path / "target.json").read_text())["iterations_measured"] == 1
    stopwatch.write_json(link)  # now live
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json", "target.json"]
