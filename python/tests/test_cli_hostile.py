"""The `laptime` command on files from other machines and hostile names: a file name that is not
UTF-8, a string no encoding can write, names and file names that carry terminal escapes or
Markdown, an output path that is one of the inputs, inputs that are pipes. Never a traceback, never
a forged line or markup, never a destroyed input."""

import copy
import json
import os
import subprocess
import sys
import xml.dom.minidom

import pytest

from test_cli_errors import GOOD


def write(path, change=None):
    results = copy.deepcopy(GOOD)
    if change:
        change(results)
    path.write_text(json.dumps(results))
    return path


def laptime(*args, cwd=None, env=None):
    """`python -m laptime ARGS` (bytes allowed: file names that are not UTF-8)."""
    return subprocess.run([sys.executable, "-m", "laptime", *args], capture_output=True,
                          cwd=cwd, env=dict(os.environ, **(env or {})), timeout=120)


def test_a_file_name_that_is_not_utf8_is_shown_escaped_never_a_traceback(tmp_path):
    base = write(tmp_path / "base.json")
    odd = os.fsencode(tmp_path) + b"/lat\xff1.json"
    with open(odd, "wb") as f:
        f.write(base.read_bytes())
    r = laptime("compare", "--fail-above", "50%", str(base), str(base), odd,
                env={"LC_ALL": "C.UTF-8"})
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"Traceback" not in r.stderr and b"lat\\udcff1" in r.stdout
    pytest.importorskip("matplotlib")
    r = laptime("html", str(base), odd, "-o", str(tmp_path / "page.html"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert (tmp_path / "page.html").stat().st_size > 1000


def test_a_lone_surrogate_in_a_file_is_drawn_and_written_escaped(tmp_path):
    pytest.importorskip("matplotlib")
    run = tmp_path / "run.json"
    run.write_text(json.dumps(GOOD).replace('"node1"', '"\\ud800"'))
    for args in (["plot", str(run), "-o", str(tmp_path / "p.png")],
                 ["html", str(run), "-o", str(tmp_path / "p.html")]):
        r = laptime(*args)
        assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr.decode()
    assert "\\ud800" in (tmp_path / "p.html").read_text()


def test_file_names_and_names_drive_no_terminal_and_forge_no_markup(tmp_path):
    base = write(tmp_path / "base.json")
    evil = write(tmp_path / "e\x1b]0;PWNED\x07vil\nSpeedup × 9.99.json")
    r = laptime("compare", str(base), str(evil))
    assert r.returncode == 0, r.stderr.decode()
    assert b"\x1b" not in r.stdout and b"\x07" not in r.stdout
    assert b"\nSpeedup \xc3\x97 9.99" not in r.stdout  # no forged line
    # Markdown: a name and a file name that are markup stay text in the gate's lines.
    markup = "![pixel](https://attacker.example/p.png)"
    runs = []
    for i in range(2):
        runs.append(write(tmp_path / f"<img src=x>{i}.json",
                          lambda r: r["measurements"][0].update(name=markup)))
    r = laptime("compare", "--markdown", "--fail-above", "50%", "--ref", str(runs[0]),
                str(runs[0]), "--test", str(runs[1]), str(runs[1]))
    out = r.stdout.decode()
    assert "<img" not in out and "](https" not in out, out


def test_a_markdown_table_renders_names_and_labels_as_text_on_github(tmp_path):
    """Rendered by cmark-gfm, GitHub's renderer: a bare URL in a label or a name is no link."""
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="the test command installs it (PY_REQS)")
    runs = [write(tmp_path / f"www.attacker.example{i}.json",
                  lambda r: r["measurements"][0].update(name="https://attacker.example/x"))
            for i in range(2)]
    r = laptime("compare", "--markdown", "--fail-above", "50%", "--ref", str(runs[0]),
                "--test", str(runs[1]))
    assert r.returncode == 0, r.stderr.decode()
    page = cmarkgfm.github_flavored_markdown_to_html(r.stdout.decode())
    assert "www.attacker.example0" in page  # the label is there, as text
    assert "<a " not in page, page


@pytest.mark.parametrize("command", ["html", "trace", "merge"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(command, tmp_path):
    run = write(tmp_path / "run.json")
    before = run.read_bytes()
    args = {"html": ["html", str(run), "-o", str(run)],
            "trace": ["trace", str(run), "-o", str(run)],
            "merge": ["merge", str(run), "--json", str(run)]}[command]
    r = laptime(*args)
    assert r.returncode == 2 and b"is the input" in r.stderr, r.stderr.decode()
    assert run.read_bytes() == before


def test_a_gate_without_the_name_in_every_run_names_the_run_that_lacks_it(tmp_path):
    runs = [str(write(tmp_path / f"run{i}.json")) for i in range(3)]
    def no_iteration(r):  # a test run that crashed before its first measured iteration
        r.update(iterations_measured=0)
        r["measurements"][0].update(mean_per_iter_s=None)
        r.pop("samples", None)

    crashed = write(tmp_path / "crashed.json", no_iteration)
    r = laptime("compare", "--fail-above", "5%", "--ref", runs[0], runs[1], "--test", runs[2],
                str(crashed))
    assert r.returncode == 2
    assert b"crashed.json" in r.stderr and b"run0" not in r.stderr, r.stderr


def test_an_html_page_holds_no_control_character_of_a_name(tmp_path):
    pytest.importorskip("matplotlib")
    run = write(tmp_path / "run.json",
                lambda r: r["measurements"][0].update(name="lo\x00o\x1b[31mp\x7f"))
    page = tmp_path / "page.html"
    r = laptime("html", str(run), "-o", str(page))
    assert r.returncode == 0, r.stderr.decode()
    data = page.read_bytes()
    assert not any(b in data for b in (b"\x00", b"\x1b", b"\x7f")), "a raw control byte"
    assert b"lo\\x00o\\x1b[31mp\\x7f" in data  # the name, escaped as in the terminal's report


def test_html_reads_each_input_once_so_pipes_compare(tmp_path):
    pytest.importorskip("matplotlib")
    run = write(tmp_path / "run.json")
    page = tmp_path / "page.html"
    cmd = f'"{sys.executable}" -m laptime html <(cat "{run}") <(cat "{run}") -o "{page}"'
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "<h2>Comparison</h2>" in page.read_text() and "No comparison" not in page.read_text()


def test_a_trace_written_to_stdout_stays_json(tmp_path):
    run = write(tmp_path / "run.json")
    r = laptime("trace", str(run), "-o", "/dev/stdout")
    assert r.returncode == 0
    assert json.loads(r.stdout)["traceEvents"]


def test_an_svg_plot_of_a_name_with_a_control_character_is_well_formed(tmp_path):
    pytest.importorskip("matplotlib")
    run = write(tmp_path / "run.json", lambda r: r["samples"].update(names=["lo\x01op"]))
    svg = tmp_path / "p.svg"
    r = laptime("plot", str(run), "-o", str(svg))
    assert r.returncode == 0, r.stderr.decode()
    xml.dom.minidom.parse(str(svg))


def test_a_plot_of_a_name_of_100000_characters_is_drawn_with_the_name_cut(tmp_path):
    # It took matplotlib minutes (html 103 s; a 1 MB name never ended), its title drawn across the
    # neighbouring plots.
    pytest.importorskip("matplotlib")
    from laptime.plot import figure
    long = "layer." * 20000
    results = copy.deepcopy(GOOD)
    results["samples"]["names"] = [long]
    for m in results["measurements"]:
        m["name"] = long
    fig = figure(results)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles and all(len(t) < 100 and t.startswith("layer.layer.") for t in titles)
    assert all("…" in t for t in titles)
    r = laptime("html", str(write(tmp_path / "run.json", lambda x: x.update(results))), "-o",
                str(tmp_path / "run.html"))
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("command", ["html", "trace"])
def test_an_output_that_cannot_be_written_is_named(command, tmp_path):
    if command == "html":
        pytest.importorskip("matplotlib")
    run = write(tmp_path / "run.json")
    r = laptime(command, str(run), "-o", "/dev/full")
    assert r.returncode == 2 and b"/dev/full: No space left on device" in r.stderr, r.stderr
