"""The slow tail explained (docs/reports.md, "The slow tail"): with recording on, the results list
the slowest iterations and the names that made each slow; `laptime html` shows them, and
`laptime.results.read` checks the section as it checks the rest."""

import ctypes
import html
import json
import re
import threading
import time

import pytest

from laptime import cli
from laptime.results import ResultsError, check


def injected_run(stopwatch, iterations=30, warmup=2):
    """A loop of about 2 ms an iteration in which "data" takes 40 ms in iteration 10, "step" in
    iteration 20, and a loader thread ("loader-1", one of two that measure "load") in 25."""
    stopwatch.enable_recording(4096)
    stopwatch.enable(warmup, None, False)
    go = [threading.Event(), threading.Event()]
    done = [threading.Event(), threading.Event()]
    current = [0]
    stop = threading.Event()

    def loader(i):
        # the OS thread's name, which the recorded intervals carry (Python's own is not the OS's)
        ctypes.CDLL(None).prctl(15, f"loader-{i}".encode(), 0, 0, 0)  # PR_SET_NAME
        while True:
            go[i].wait()
            go[i].clear()
            if stop.is_set():
                return
            stopwatch.start_meas("load")
            time.sleep(0.04 if i == 1 and current[0] == 25 else 0.0005)
            stopwatch.end_meas("load")
            done[i].set()

    threads = [threading.Thread(target=loader, args=(i,), name=f"loader-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for i in range(iterations):
        current[0] = i
        stopwatch.start_meas("data")
        for e in go:
            e.set()
        for e in done:
            e.wait()
            e.clear()
        if i == 10:
            time.sleep(0.04)
        stopwatch.end_meas("data")
        stopwatch.start_meas("step")
        time.sleep(0.04 if i == 20 else 0.001)
        stopwatch.end_meas("step")
        stopwatch.finish_iter()
    stop.set()
    for e in go:
        e.set()
    for t in threads:
        t.join()
    return stopwatch.results()


def test_the_results_name_what_made_each_injected_slow_iteration_slow(stopwatch):
    results = injected_run(stopwatch)
    tail = results["slow_tail"]
    assert tail["iterations"] == 28  # 30 iterations, 2 of them warm-up
    assert tail["tail_bound"] is True
    assert tail["over_3x_median"] >= 3
    slowest = {s["iteration"]: s for s in tail["slowest"][:3]}
    assert set(slowest) == {10, 20, 25}
    assert slowest[10]["causes"][0]["name"] == "data"
    assert slowest[20]["causes"][0]["name"] == "step"
    load = [c for c in slowest[25]["causes"][:2] if c["name"] == "load"]
    assert load and load[0]["thread"] == "loader-1" and load[0]["threads"] == 2
    for s in slowest.values():
        assert s["causes"][0]["over_median_s"] >= 0.03
    assert "the tail, not the median, is the problem" in results["verdict"]["text"]


def test_html_shows_the_slow_tail_with_the_causes_of_each_slow_iteration(stopwatch, tmp_path):
    pytest.importorskip("matplotlib")  # the page draws the recorded run's plots
    path = tmp_path / "run.json"
    path.write_text(json.dumps(injected_run(stopwatch)))
    out = tmp_path / "report.html"
    assert cli.main(["html", str(path), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<h3>Slow tail</h3>" in page
    assert "<strong>The tail, not the median, is the problem</strong>" in page
    rows = dict(re.findall(r'<tr><td class="n">(\d+)</td>.*?<td>([^<]*)</td></tr>', page))
    assert html.unescape(rows["10"]).startswith("'data' +")
    assert html.unescape(rows["20"]).startswith("'step' +")
    assert "'load' +" in html.unescape(rows["25"]) and "on loader-1)" in html.unescape(rows["25"])


def test_a_run_without_recording_has_no_tail_and_its_page_no_tail_section(stopwatch, tmp_path):
    stopwatch.enable(0, None, False)
    for _ in range(3):
        stopwatch.start_meas("step")
        stopwatch.end_meas("step")
        stopwatch.finish_iter()
    results = stopwatch.results()
    assert "slow_tail" not in results
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results))
    out = tmp_path / "report.html"
    assert cli.main(["html", str(path), "-o", str(out)]) == 0
    assert "Slow tail" not in out.read_text()


@pytest.mark.parametrize("change, where", [
    (lambda t: t.update(iterations=2.5), "slow_tail.iterations"),
    (lambda t: t.update(p99_s="1 ms"), "slow_tail.p99_s"),
    (lambda t: t.update(slowest=[1]), "slow_tail.slowest[0]"),
    (lambda t: t["slowest"][0]["causes"][0].update(name=3), "slow_tail.slowest[0].causes[0].name"),
    (lambda t: t["slowest"][0]["causes"][0].update(thread=None, threads="2"),
     "slow_tail.slowest[0].causes[0].threads"),
])
def test_a_malformed_slow_tail_is_refused_naming_the_field(change, where):
    tail = {"iterations": 3, "median_s": 0.002, "p99_s": 0.03, "over_3x_median": 1,
            "tail_bound": True,
            "slowest": [{"iteration": 4, "time_s": 0.03,
                         "causes": [{"name": "data", "time_s": 0.03, "median_s": 0.001,
                                     "over_median_s": 0.029, "tid": 7, "thread": "main",
                                     "threads": 1}]}]}
    results = {"schema": 1, "host": "h", "measurements": [], "one_time": [], "slow_tail": tail}
    assert check(results) is results
    change(tail)
    with pytest.raises(ResultsError, match=re.escape(f"results: {where}: ")):
        check(results)
