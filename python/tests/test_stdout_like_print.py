"""Where the seed's reports went through print(), laptime's go wherever print() can write: a
sys.stdout replaced by an object with write() alone (a logger's tee), no sys.stdout at all, and a
stream that cannot encode the report's µ or a name (docs/python.md, print_eval_times)."""

import io
import sys
import time

import laptime


class Tee:
    """The usual "Logger" that copies stdout into a log: write() and nothing else."""

    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)


def measure_iterations(stopwatch, n):
    for _ in range(n):
        stopwatch.start_meas("training loop")
        time.sleep(0.0002)  # a few hundred µs: the report writes them "µs"
        stopwatch.end_meas("training loop")
        stopwatch.finish_iter()


def test_a_tee_without_flush_gets_each_report_once(stopwatch, monkeypatch, capfd):
    tee = Tee()
    monkeypatch.setattr(sys, "stdout", tee)
    stopwatch.enable(0, 2, False)  # a periodic report every 2 iterations
    measure_iterations(stopwatch, 4)
    stopwatch.print_eval_times()
    text = "".join(tee.parts)
    assert text.count("training loop") == 3, text  # two periodic reports and the final one
    captured = capfd.readouterr()
    assert "training loop" not in captured.out  # not again on the process's own stdout
    assert "flush" not in captured.err and "Traceback" not in captured.err, captured.err


def test_no_sys_stdout_prints_nothing_as_print_does(stopwatch, monkeypatch):
    stopwatch.enable(0, None, False)
    measure_iterations(stopwatch, 1)
    monkeypatch.setattr(sys, "stdout", None)
    assert stopwatch.print_eval_times() is None


def test_no_sys_stdout_drops_the_periodic_reports_too(stopwatch, monkeypatch, capfd):
    stopwatch.enable(0, 1, False)  # a periodic report every iteration
    monkeypatch.setattr(sys, "stdout", None)
    measure_iterations(stopwatch, 2)
    monkeypatch.undo()
    captured = capfd.readouterr()
    assert "training loop" not in captured.out, captured.out  # not on the process's own stdout
    assert captured.err == "", captured.err


def test_a_closed_sys_stdout_is_told_once_as_an_ignored_exception(stopwatch, monkeypatch, capfd):
    """print() raises into a closed file object; a periodic report cannot raise: the first failure
    is shown as an exception ignored in the stream, with its header, the reports go to the
    process's own stdout."""
    closed = io.StringIO()
    closed.close()
    ignored = []  # what sys.unraisablehook (which prints "Exception ignored in: ...") is given
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    monkeypatch.setattr(sys, "stdout", closed)
    stopwatch.enable(0, 1, False)
    measure_iterations(stopwatch, 3)
    monkeypatch.undo()
    captured = capfd.readouterr()
    assert captured.out.count("training loop") == 3, captured.out
    assert [(type(u.exc_value), u.object) for u in ignored] == [(ValueError, closed)]


def test_an_ascii_stream_gets_us_for_microseconds(stopwatch):
    stopwatch.enable(0, None, False)
    measure_iterations(stopwatch, 3)
    raw = io.BytesIO()
    ascii_stream = io.TextIOWrapper(raw, encoding="ascii")
    stopwatch.print_eval_times(ascii_stream)
    ascii_stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "training loop" in text
    assert " us" in text, text


def test_names_a_stream_cannot_encode_are_written_escaped_not_raised(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("décodage")
    stopwatch.end_meas("décodage")
    stopwatch.finish_iter()
    raw = io.BytesIO()
    ascii_stream = io.TextIOWrapper(raw, encoding="ascii")
    stopwatch.print_eval_times(ascii_stream)  # the report is not lost for a name's letters
    ascii_stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "d\\xe9codage" in text, text
    assert laptime.Stopwatch().is_enabled


def test_periodic_reports_reach_an_ascii_sys_stdout_escaped(stopwatch, monkeypatch, capfd):
    """A log file opened as ASCII behind redirect_stdout: each periodic report goes there, with
    the name escaped, and nothing reaches the process's own stdout or a traceback stderr."""
    raw = io.BytesIO()
    log = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", log)
    stopwatch.enable(0, 1, False)  # a periodic report every iteration
    for _ in range(2):
        stopwatch.start_meas("décodage")
        stopwatch.end_meas("décodage")
        stopwatch.finish_iter()
    log.flush()
    monkeypatch.undo()
    text = raw.getvalue().decode("ascii")
    assert text.count("d\\xe9codage") == 2, text
    captured = capfd.readouterr()
    assert "codage" not in captured.out, captured.out
    assert "Traceback" not in captured.err and "Error" not in captured.err, captured.err
