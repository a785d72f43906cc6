"""Reports people look at (docs/reports.md): interval recording from Python, `laptime trace`, `laptime
compare` with several runs, `laptime plot`, `laptime html` and TensorBoard scalars."""

import copy
import html
import json
import shutil
import subprocess
import threading
import time

import pytest

import laptime
import laptime.html
from laptime import cli, compare, plot, samples


def recorded_run(stopwatch, capacity=64, iterations=6, warmup=2, workers=2):
    """A small loop with nested names on the main thread and a name on worker threads."""
    stopwatch.enable_recording(capacity)
    stopwatch.enable(warmup, None, False)
    stopwatch.set_cpu_usage_meas_name("loop")
    tids = []
    # The workers are alive at once: a worker started after another ended would take over its
    # record, and the ended one's intervals would join the exited threads', which keep the most
    # recent `capacity` of them in all (docs/reports.md), not a ring each.
    together = threading.Barrier(workers)

    def worker():
        tids.append(threading.get_native_id())
        together.wait()
        for _ in range(3):
            stopwatch.start_meas("decode")
            time.sleep(0.001)
            stopwatch.end_meas("decode")

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for _ in range(iterations):
        stopwatch.start_meas("loop")
        stopwatch.start_meas("fetch")
        time.sleep(0.0005)
        stopwatch.end_meas("fetch")
        stopwatch.start_meas("step")
        time.sleep(0.001)
        stopwatch.end_meas("step")
        stopwatch.end_meas("loop")
        stopwatch.finish_iter()
    for t in threads:
        t.join()
    return stopwatch.results(), tids


# ---- recording --------------------------------------------------------------------------------

def test_recording_is_off_by_default(stopwatch):
    stopwatch.enable(0, None, False)
    stopwatch.start_meas("a")
    stopwatch.end_meas("a")
    assert "samples" not in stopwatch.results()


def test_recording_keeps_each_threads_last_n_intervals_exactly(stopwatch):
    stopwatch.enable_recording(4)
    stopwatch.enable(0, None, False)
    seen = []
    for i in range(10):
        before = time.monotonic_ns()
        stopwatch.start_meas(f"n{i % 3}")
        stopwatch.end_meas(f"n{i % 3}")
        after = time.monotonic_ns()
        seen.append((f"n{i % 3}", before, after, i))
        stopwatch.finish_iter()
    s = stopwatch.results()["samples"]
    assert s["capacity"] == 4 and s["fields"] == ["name", "start_ns", "dur_ns", "iter"]
    (thread,) = s["threads"]
    assert thread["tid"] == threading.get_native_id()
    got = thread["intervals"]
    assert len(got) == 4  # bounded: the ring wrapped twice
    for (name, start, dur, it), (want, before, after, want_it) in zip(got, seen[-4:]):
        assert s["names"][name] == want
        # time.monotonic_ns is CLOCK_MONOTONIC, laptime's timestamps are in its epoch: exactly
        # with steady_clock, within the calibration error with the TSC clock (about 1 us per
        # second since calibration, docs/reports.md); 100 us covers a long test session
        slack = 100_000
        assert before - slack <= start and start + dur <= after + slack
        assert 0 <= dur <= after - before + slack
        assert it == want_it
    assert [i for i, _ in s["iterations"]] == [6, 7, 8, 9]


def test_recording_keeps_a_ring_per_thread(stopwatch):
    results, tids = recorded_run(stopwatch, capacity=2, workers=3)
    by_tid = {t["tid"]: t for t in results["samples"]["threads"]}
    assert set(tids) <= set(by_tid)
    names = results["samples"]["names"]
    for tid in tids:
        assert [names[iv[0]] for iv in by_tid[tid]["intervals"]] == ["decode", "decode"]
    main = by_tid[threading.get_native_id()]["intervals"]
    assert [names[iv[0]] for iv in main] == ["step", "loop"]  # the last two that ended


def test_enable_recording_rejects_a_negative_size(stopwatch):
    with pytest.raises(ValueError):
        stopwatch.enable_recording(-1)


# ---- trace ------------------------------------------------------------------------------------

def test_trace_is_trace_event_format_and_every_event_is_a_recorded_interval(stopwatch, tmp_path):
    results, _ = recorded_run(stopwatch)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results))
    out = tmp_path / "run.trace.json"
    assert cli.main(["trace", str(path), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "i", "M")
        assert isinstance(e["name"], str) and isinstance(e["pid"], int)
        assert isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
    # every "X" event is exactly one recorded interval, at the time measured
    recorded = samples.intervals(results["samples"])
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(recorded)
    origin = min(min(iv.start_ns for iv in recorded),
                 min(t for _, t in results["samples"]["iterations"]))
    want = sorted((iv.tid, iv.name, iv.start_ns - origin, iv.dur_ns) for iv in recorded)
    got = sorted((e["tid"], e["name"], round(e["ts"] * 1e3), round(e["dur"] * 1e3)) for e in xs)
    assert got == want
    # nesting as measured: on each track, events are disjoint or contained
    by_tid = {}
    for e in sorted(xs, key=lambda e: (e["tid"], e["ts"], -e["dur"])):
        by_tid.setdefault(e["tid"], []).append(e)
    for track in by_tid.values():
        stack = []
        for e in track:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:  # starts inside the top: must end inside it
                assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3
            stack.append(e)
    parents = {e["name"]: None for e in xs}
    main = by_tid[threading.get_native_id()]
    for e in main:
        if e["name"] in ("fetch", "step"):
            outer = [o for o in main if o["name"] == "loop" and o["ts"] <= e["ts"]
                     and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 1e-3]
            assert len(outer) == 1
            parents[e["name"]] = "loop"
    assert parents["fetch"] == parents["step"] == "loop"
    marks = [e for e in events if e["ph"] == "i"]
    assert [e["args"]["iteration"] for e in marks] == list(range(6))
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(names) == len(by_tid)


# ---- compare ----------------------------------------------------------------------------------

def write_run(tmp_path, name, ms, cpu):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"schema": 1, "measurements": [
        {"name": "loop", "mean_per_iter_s": ms / 1e3, "cpu": {"process_percent": cpu}}]}))
    return str(path)


@pytest.fixture
def several_runs(tmp_path):
    ref = [write_run(tmp_path, f"ref-{i}", ms, cpu)
           for i, (ms, cpu) in enumerate([(400, 3.0), (420, 3.4), (416, 3.2)])]
    test = [write_run(tmp_path, f"dali-{i}", ms, cpu)
            for i, (ms, cpu) in enumerate([(190, 1.2), (181, 1.3), (170, 1.5), (185, 1.1)])]
    return ref, test


def test_compare_several_runs_gives_medians_and_min_max(several_runs):
    ref, test = several_runs
    g = compare.groups([ref, test], labels=["ref", "dali"])
    assert compare.spread(g[0][1]) == (416, 400, 420)
    assert compare.spread(g[0][2]) == (3.2, 3.0, 3.4)
    assert compare.spread(g[1][1]) == (183, 170, 190)  # even count: mean of the middle two
    assert compare.spread(g[1][2]) == pytest.approx((1.25, 1.1, 1.5))
    text = compare.group_table(g)
    assert "416 (400–420)" in text and "183 (170–190)" in text
    assert "3.2 (3.0–3.4)" in text
    assert f"Speedup × {416 / 183:.2f} (dali vs ref, medians)" in text
    assert f"Savings {(1 - 1.25 / 3.2) * 100:.0f} % (dali vs ref, medians)" in text


def test_compare_markdown_for_a_pull_request(several_runs, capsys):
    ref, test = several_runs
    assert cli.main(["compare", "--ref", *ref, "--test", *test, "--labels", "ref,dali",
                     "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| Method | Runtime [ms/batch] |")
    assert lines[1] == "|---|---:|---:|---:|---:|---:|"
    assert lines[2] == "| ref | 416 (400–420) | 3.2 (3.0–3.4) | 3 | 1.00 (reference) | — |"
    speedup = f"{416 / 183:.2f}"
    assert lines[3] == f"| dali | 183 (170–190) | 1.2 (1.1–1.5) | 4 | × {speedup} | 61 % |"
    assert "min–max" in lines[-1]


def test_compare_markdown_gives_each_row_its_own_ratios_when_labels_repeat(tmp_path, capsys):
    # Two test groups under one label (or one file name): each row keeps its own figures.
    runs = [write_run(tmp_path, name, ms, 2.0) for name, ms in
            [("ref", 400), ("slow", 800), ("fast", 200)]]
    assert cli.main(["compare", "--ref", runs[0], "--test", runs[1], "--test", runs[2],
                     "--labels", "main,PR,PR", "--markdown"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:5]
    assert rows[0].startswith("| PR | 800 |") and "| × 0.50 |" in rows[0]
    assert rows[1].startswith("| PR | 200 |") and "| × 2.00 |" in rows[1]


def test_compare_positional_form_still_prints_the_seed_table(several_runs, capsys):
    ref, test = several_runs
    assert cli.main(["compare", ref[2], test[1], "--labels", "ref,dali"]) == 0
    out = capsys.readouterr().out
    assert "Speedup × 2.30 (dali vs ref)" in out and "Savings 59 % (dali vs ref)" in out


# ---- plot and html ----------------------------------------------------------------------------

def test_plot_writes_a_png(stopwatch, tmp_path):
    pytest.importorskip("matplotlib")
    results, _ = recorded_run(stopwatch)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results))
    out = tmp_path / "run.png"
    assert cli.main(["plot", str(path), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def results_with_samples(per_iteration, warmup, host="node1"):
    """Results whose samples hold one interval per (name, iteration) of ``per_iteration``
    {name: [seconds in iteration 0, 1, ...]}, back to back."""
    names = list(per_iteration)
    intervals, t = [], 0
    for it in range(max(len(v) for v in per_iteration.values())):
        for k, name in enumerate(names):
            dur = round(per_iteration[name][it] * 1e9)
            intervals.append([k, t, dur, it])
            t += dur
    return {"schema": 1, "host": host, "pid": 1, "rank": 0, "num_warmup_iters": warmup,
            "measurements": [{"name": n} for n in names],
            "samples": {"fields": ["name", "start_ns", "dur_ns", "iter"], "names": names,
                        "threads": [{"tid": 1, "name": "main", "intervals": intervals}]}}


# Names a user may give that matplotlib would read as math: mathtext (between dollars, with a
# command it does not know: a parse error), or TeX markup (with text.usetex).
MATH_NAMES = ["$\\notacommand$", "a_b^c", "cost in $ and %", "$x^2$"]


def test_plot_and_html_draw_names_that_look_like_math_markup_literally(tmp_path):
    pytest.importorskip("matplotlib")
    results = results_with_samples({n: [0.001 * (k + 1)] * 4 for k, n in enumerate(MATH_NAMES)},
                                   warmup=1, host="$\\host$")
    fig = plot.figure(results)
    fig.savefig(tmp_path / "direct.png")  # text is parsed when drawn: a bad name failed here
    from matplotlib.text import Text

    texts = {t.get_text(): t for t in fig.findobj(Text)}
    for text in [f"{n}: per iteration" for n in MATH_NAMES] + [
            f"{n}: 3 intervals" for n in MATH_NAMES] + ["laptime: $\\host$ pid 1 rank 0"]:
        assert not texts[text].get_parse_math() and not texts[text].get_usetex()
    path = tmp_path / "math.json"
    path.write_text(json.dumps(results))
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "math.png")]) == 0
    assert cli.main(["html", str(path), "-o", str(tmp_path / "math.html")]) == 0
    page = (tmp_path / "math.html").read_text()
    assert all(html.escape(n) in page for n in MATH_NAMES)
    assert page.count('src="data:image/png;base64,') == 1


def test_plot_scales_each_series_to_the_measured_iterations_not_a_slow_warm_up(tmp_path):
    pytest.importorskip("matplotlib")
    # Iteration 0 (warm-up: compiling, caches filling) takes 5 s; the measured ones 1-1.4 ms.
    measured = [0.0010, 0.0012, 0.0014, 0.0011, 0.0013, 0.0010]
    results = results_with_samples({"step": [5.0, 0.002] + measured}, warmup=2)
    fig = plot.figure(results)
    ax = fig.axes[0]  # the per-iteration series of "step"
    assert ax.get_ylabel() == "ms"
    bottom, top = ax.get_ylim()
    assert bottom == 0 and max(measured) * 1e3 <= top <= 1.2 * max(measured) * 1e3
    # the warm-up stays shaded, and says it is clipped
    (legend,) = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend.startswith("warm-up") and "clipped" in legend
    path = tmp_path / "slow-warm-up.json"
    path.write_text(json.dumps(results))
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "slow-warm-up.png")]) == 0


def test_plot_draws_no_zeros_where_the_rings_hold_no_iteration(tmp_path):
    pytest.importorskip("matplotlib")
    # A loader thread that exited early keeps its ring (iterations 0-3); the loop's ring and the
    # iteration ends hold 1000-1003: nothing is known of 4-999, which are not 996 zeros.
    results = results_with_samples({"load": [0.001] * 4}, warmup=0)
    s = results["samples"]
    s["threads"].append({"tid": 2, "name": "loop", "intervals": [
        [0, 10**9 + k, 10**6, 1000 + k] for k in range(4)]})
    s["iterations"] = [[1000 + k, 2 * 10**9 + k] for k in range(4)]
    fig = plot.figure(results)
    xs = list(fig.axes[0].get_lines()[0].get_xdata())
    assert xs == [0, 1, 2, 3, 1000, 1001, 1002, 1003]


@pytest.mark.parametrize("option", [["-o", "{tmp}/x.xyz"], ["-o", "{tmp}/x.png", "--dpi", "0"]])
def test_plot_refuses_an_unknown_format_or_dpi_in_one_line(tmp_path, capsys, option):
    pytest.importorskip("matplotlib")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results_with_samples({"step": [0.001] * 4}, warmup=0)))
    code = cli.main(["plot", str(path), *[o.format(tmp=tmp_path) for o in option]])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and out == ""


def test_html_writes_the_page_of_a_recorded_run_with_nothing_to_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    # Recording on, every name measured in DataLoader worker processes (which record nothing):
    # the page is written, its plot replaced by the reason (it exited 2 with no page).
    results = results_with_samples({"step": [0.001] * 3}, warmup=0)
    results["samples"]["threads"] = []
    path = tmp_path / "workers-only.json"
    path.write_text(json.dumps(results))
    out = tmp_path / "page.html"
    assert cli.main(["html", str(path), "-o", str(out)]) == 0
    assert "no plot: no recorded interval" in out.read_text()


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def headless_chromium(tmp_path):
    """The command line of a headless Chromium with a profile of its own (the test is skipped
    without one)."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (scripts/deps.sh installs it for the test command)")
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
            "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--allow-file-access-from-files"]


def test_html_page_is_self_contained_and_renders_in_headless_chromium(stopwatch, tmp_path):
    pytest.importorskip("matplotlib")
    results, _ = recorded_run(stopwatch)
    a = tmp_path / "ref.json"
    a.write_text(json.dumps(results))
    b = tmp_path / "new.json"
    b.write_text(json.dumps(results))
    out = tmp_path / "report.html"
    assert cli.main(["html", str(a), str(b), "-o", str(out)]) == 0
    text = out.read_text()
    assert "http://" not in text and "https://" not in text  # nothing fetched
    assert text.count('src="data:image/png;base64,') == 2
    assert "<h2>Comparison</h2>" in text and "Speedup" in text
    common = headless_chromium(tmp_path)
    shot = tmp_path / "shot.png"
    dom = subprocess.run(common + ["--dump-dom", out.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table>" in dom.stdout and "loop" in dom.stdout
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    # the images decode: their natural width is known once the page has loaded
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", "<script>window.onload = () => {"
                                  "const ok = [...document.images].every(i => i.naturalWidth > 0);"
                                  "document.title = ok ? 'IMAGES-OK' : 'IMAGES-BROKEN'; };"
                                  "</script></body>"))
    dom = subprocess.run(common + ["--dump-dom", probe.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert "<title>IMAGES-OK</title>" in dom.stdout
    done = subprocess.run(common + [f"--screenshot={shot}", "--window-size=1200,900",
                                    out.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.read_bytes()[:4] == b"\x89PNG"


def test_html_shows_any_number_of_runs_side_by_side_the_first_the_reference(stopwatch,
                                                                            tmp_path):
    pytest.importorskip("matplotlib")
    results, _ = recorded_run(stopwatch)
    loop = next(m for m in results["measurements"] if m["name"] == "loop")
    labels, factors = ["base", "faster", "slower", "same"], [1.0, 0.5, 2.0, 1.0]
    paths = []
    for label, factor in zip(labels, factors):
        run = copy.deepcopy(results)
        next(m for m in run["measurements"] if m["name"] == "loop")["mean_per_iter_s"] *= factor
        paths.append(tmp_path / f"{label}.json")
        paths[-1].write_text(json.dumps(run))
    out = tmp_path / "report.html"
    assert cli.main(["html", *map(str, paths), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count('<section class="run">') == 4
    assert text.count('src="data:image/png;base64,') == 4
    # the comparison: every run against the first
    for label, factor in zip(labels[1:], factors[1:]):
        assert f"<td>{label}</td>" in text and f"× {1 / factor:.2f}" in text
    ref = loop["mean_per_iter_s"]
    assert f'<td class="n">{laptime.html.duration(2 * ref)} (2.00×)</td>' in text
    common = headless_chromium(tmp_path)
    # Laid out by the browser: one column per run, left to right in the order given, side by side
    # (same top, no overlap), the first headed as the reference, every plot decoded.
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", """<script>window.onload = () => {
        const cols = [...document.querySelectorAll('section.run')].map(s => {
            const r = s.getBoundingClientRect();
            return {left: r.left, right: r.right, top: r.top,
                    title: s.querySelector('h2').textContent,
                    image: s.querySelector('img').naturalWidth};
        });
        document.title = JSON.stringify(cols); };</script></body>"""))
    dom = subprocess.run(common + ["--window-size=1600,1000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    cols = json.loads(html.unescape(dom.stdout.split("<title>")[1].split("</title>")[0]))
    assert [c["title"] for c in cols] == ["base (reference)", "faster", "slower", "same"]
    assert len({c["top"] for c in cols}) == 1
    assert all(a["right"] <= b["left"] for a, b in zip(cols, cols[1:]))
    assert all(c["image"] > 0 for c in cols)


# ---- TensorBoard ------------------------------------------------------------------------------

def test_tensorboard_scalars_read_back_with_tensorboards_event_reader(stopwatch, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import laptime.tensorboard

    results, _ = recorded_run(stopwatch)
    logdir = tmp_path / "tb"

    class Writer:  # the smallest SummaryWriter: tensorboard's own summary and event writer
        def __init__(self, path):
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            self._event = Event
            self._w = EventFileWriter(str(path))

        def add_scalar(self, tag, value, global_step):
            from tensorboard.compat.proto.summary_pb2 import Summary

            summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
            self._w.add_event(self._event(wall_time=time.time(), step=global_step,
                                          summary=summary))

        def close(self):
            self._w.close()

    writer = Writer(logdir)
    n = laptime.tensorboard.log(writer, 10)  # the live Stopwatch
    laptime.tensorboard.log(writer, 20, results)
    writer.close()
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert len(tags) == n
    loop = next(m for m in results["measurements"] if m["name"] == "loop")
    got = acc.Scalars("laptime/loop/p90_ms")
    assert [e.step for e in got] == [10, 20]
    assert got[1].value == pytest.approx(loop["p90_s"] * 1e3, rel=1e-6)
    mean = acc.Scalars("laptime/loop/mean_per_iter_ms")[1].value
    assert mean == pytest.approx(loop["mean_per_iter_s"] * 1e3, rel=1e-6)
    assert "laptime/loop/cpu_process_percent" in tags
    assert "laptime/step/p90_ms" in tags


def test_laptime_record_in_the_environment_turns_recording_on(stopwatch, monkeypatch):
    monkeypatch.setenv("LAPTIME_RECORD", "3")
    applied = laptime.configure_from_env()
    assert applied["record_intervals"] == 3
    stopwatch.enable(0, None, False)
    stopwatch.enable_recording(100)  # the environment wins
    for _ in range(5):
        stopwatch.start_meas("x")
        stopwatch.end_meas("x")
    (thread,) = stopwatch.results()["samples"]["threads"]
    assert len(thread["intervals"]) == 3


def test_compare_prints_sub_microsecond_loops_with_their_digits_not_as_zero():
    # a per-sample loop of 0.42 us is 0.00042 ms: three significant digits, never "0.00"
    assert compare._ms(0.00042) == "0.00042"
    assert compare._ms(0.0123) == "0.0123"
    assert compare._ms(1.5) == "1.50" and compare._ms(416) == "416"
    assert compare._ms(0.0) == "0"
    assert compare._ms(0.000042) == "0.000042"  # no exponent form


def test_compare_says_0_percent_saved_for_equal_cpu_never_minus_0():
    assert compare._saved(3.2, 3.2) == "0 %"
    assert compare._saved(3.2001, 3.2) == "0 %"
    assert compare._saved(1.25, 3.2) == f"{(1 - 1.25 / 3.2) * 100:.0f} %"
    assert compare._saved(4.0, 2.0) == "-100 %"
