"""Helpers and fixtures of the integration tests: the examples on sys.path, laptime reset around
each test and the NVTX injection recorder (both fixtures reused from python/tests/conftest.py),
and training in a subprocess with the recorder attached.

No conftest.py here: scripts/test.sh runs these tests in one pytest call with
examples/nuscenes/tests, whose modules import their own conftest by name. Each test module imports
the fixtures from this module instead (``from integ_helpers import fresh_laptime, ...``)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1]
REPO = EXAMPLES.parents[1]
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

# python/tests/conftest.py, loaded under another name: its fixtures (fresh_laptime is autouse)
# become a test module's by being imported into it.
_spec = importlib.util.spec_from_file_location("laptime_python_conftest",
                                               REPO / "python" / "tests" / "conftest.py")
_python_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_python_conftest)
fresh_laptime = _python_conftest.fresh_laptime
nvtx_recorder = _python_conftest.nvtx_recorder


TRACE_SCRIPT = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import importlib
import laptime
example = importlib.import_module(sys.argv[2])
for kwargs in json.loads(sys.argv[3]):
    example.main(**kwargs)
print("RESULTS " + json.dumps(laptime.Stopwatch().results()))
if sys.argv[4]:
    recorder = ctypes.CDLL(sys.argv[4])
    recorder.nvtx_recorder_events.restype = ctypes.c_char_p
    for line in recorder.nvtx_recorder_events().decode().splitlines():
        print("EVENT " + line)
"""


def counts(results):
    """{name: count} of a Stopwatch().results() dict."""
    return {m["name"]: m["count"] for m in results["measurements"]}


def measurement(results, name):
    """The entry of ``name`` in a Stopwatch().results() dict (None when absent)."""
    return next((m for m in results["measurements"] if m["name"] == name), None)


def train_in_process(example, env=None, runs=None, **kwargs):
    """Runs ``example.main(**kwargs)`` (or ``main(**r)`` for each dict of ``runs``, one after the
    other) in a fresh process with ``env`` added to the environment; returns (Stopwatch results,
    stdout). Where laptime must start as a program starts: loader workers, several fits."""
    results, _, out = train_traced(None, example, env, runs, **kwargs)
    return results, out


def train_traced(recorder, example, env=None, runs=None, **kwargs):
    """Runs ``example.main(**kwargs)`` in a fresh process with the NVTX recorder injected and
    ``env`` added to the environment; returns (Stopwatch results, NVTX events, stdout)."""
    full_env = dict(os.environ, **(env or {}))
    if recorder is not None:
        full_env["NVTX_INJECTION64_PATH"] = str(recorder)
    r = subprocess.run([sys.executable, "-c", TRACE_SCRIPT, str(EXAMPLES), example,
                        json.dumps(runs or [kwargs]), str(recorder or "")],
                       capture_output=True, text=True, env=full_env, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    results = None
    events = []
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            results = json.loads(line[len("RESULTS "):])
        elif line.startswith("EVENT "):
            events.append(line[len("EVENT "):])
    return results, events, r.stdout


def nvtx_pushes(events):
    """{range name: number of pushes} of the recorder's events ("push global NAME tid=N")."""
    pushed = {}
    for e in events:
        parts = e.split(" tid=")[0].split(" ", 2)
        if parts[0] == "push":
            pushed[parts[2]] = pushed.get(parts[2], 0) + 1
    return pushed
