"""Shared fixtures for the NuScenes study tests: examples/nuscenes on sys.path and a small
generated dataset (``nuscenes_root``), written once per test session."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.dirname(HERE)
if EXAMPLE not in sys.path:
    sys.path.insert(0, EXAMPLE)

SAMPLES = 6  # small: this runs on a 2-core machine shared with other jobs


@pytest.fixture(scope="session")
def nuscenes_root(tmp_path_factory):
    import generate

    root = tmp_path_factory.mktemp("nuscenes")
    generate.generate(str(root), samples=SAMPLES, seed=3, jobs=1)
    return str(root)
