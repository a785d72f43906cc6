"""``import laptime`` from a checkout's python/ folder (no extension built there) or with an
extension built for another Python says what is missing, not "a circular import"."""

import os
import pathlib
import subprocess
import sys

import pytest


def test_a_source_tree_without_the_extension_names_what_is_missing():
    source = pathlib.Path(__file__).resolve().parents[1]  # python/, laptime's sources
    if list((source / "laptime").glob("_laptime*.so")):
        pytest.skip("an extension is built in the source tree")
    r = subprocess.run([sys.executable, "-c", "import laptime"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(source)}, timeout=60)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: laptime's C++ extension laptime._laptime is not built "
                           "for this Python"), r.stderr
    assert "pip install" in last
