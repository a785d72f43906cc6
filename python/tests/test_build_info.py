"""laptime.build_info(), and how a build finds the NVTX headers without a CUDA toolkit
(docs/python.md): pip users have them in NVIDIA's nvidia-nvtx wheels."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import laptime

REPO = Path(__file__).resolve().parents[2]
FINDER = REPO / "python" / "cmake" / "LaptimeNvtxHeaders.cmake"


def test_build_info_says_how_the_extension_was_built():
    info = laptime.build_info()
    assert info["version"] == laptime.__version__
    assert info["max_names_capacity"] >= laptime.max_names() >= 1
    assert info["cplusplus"] >= 201703 and info["compiler"]
    if info["disabled"]:  # a LAPTIME_DISABLE build: nothing is compiled in
        assert info["nvtx"] is False
        return
    # The test builds find NVTX (a toolkit here; the nvidia-nvtx build requirement under pip).
    assert info["nvtx"] is True
    assert info["nvtx_source"] and Path(info["nvtx_include_dir"]).name == "include"
    assert info["nvtx"] == bool(laptime._laptime.HAVE_NVTX)


def fake_wheel(root: Path, layout: str) -> Path:
    """The part of an nvidia-nvtx wheel that matters: nvidia/<layout>/include/nvtx3/nvToolsExt.h
    in a site directory (nvidia is a namespace package: no __init__.py)."""
    include = root / "nvidia" / layout / "include"
    (include / "nvtx3").mkdir(parents=True)
    (include / "nvtx3" / "nvToolsExt.h").write_text("/* NVTX */\n")
    return include


def environment(pythonpath=None):
    """This environment without a CUDA toolkit's variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    return env


def cmake():
    exe = shutil.which("cmake")
    if exe is None or not (REPO / "CMakeLists.txt").exists():
        pytest.skip("needs cmake and a source checkout")
    return exe


def find_headers(env, *defines):
    r = subprocess.run([cmake(), f"-DPython_EXECUTABLE={sys.executable}", *defines, "-P",
                        str(FINDER)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    found = dict(line.split("=", 1) for line in r.stderr.splitlines() if "=" in line)
    return found["nvtx_include_dir"], found["nvtx_source"]


@pytest.mark.parametrize("layout", ["nvtx", "cu13"])  # nvidia-nvtx-cu12, nvidia-nvtx (CUDA 13)
def test_the_headers_of_an_nvidia_nvtx_wheel_are_found(tmp_path, layout):
    include = fake_wheel(tmp_path / "site", layout)
    assert find_headers(environment([tmp_path / "site"])) == (str(include), "nvidia wheel")


def test_the_search_order_and_nothing_found(tmp_path):
    wheel = fake_wheel(tmp_path / "site", "nvtx")
    own = subprocess.run([sys.executable, "-c", "import nvidia"], env=environment(),
                         capture_output=True)
    if own.returncode != 0:  # this Python has no nvidia wheel of its own (PyTorch brings one)
        assert find_headers(environment()) == ("", "")  # no toolkit, no wheel, no variable
    home = tmp_path / "cuda"
    (home / "include" / "nvtx3").mkdir(parents=True)
    (home / "include" / "nvtx3" / "nvToolsExt.h").write_text("")
    env = environment([tmp_path / "site"])
    env["CUDA_HOME"] = str(home)
    assert find_headers(env) == (str(home / "include"), "CUDA_HOME")
    assert find_headers(env, f"-DLAPTIME_NVTX_INCLUDE_DIR={wheel}") == (
        str(wheel), "LAPTIME_NVTX_INCLUDE_DIR")


def test_a_configure_without_the_toolkit_compiles_nvtx_in_from_the_wheel(tmp_path):
    """The whole project configured as pip does, with the CUDA toolkit hidden from CMake."""
    include = fake_wheel(tmp_path / "site", "nvtx")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    r = subprocess.run(
        [cmake(), "-S", str(REPO), "-B", str(tmp_path / "build"), *generator,
         "-DLAPTIME_BUILD_PYTHON=ON", "-DLAPTIME_BUILD_TESTS=OFF", "-DLAPTIME_BUILD_BENCH=OFF",
         "-DLAPTIME_BUILD_EXAMPLES=OFF", "-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON",
         f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, env=environment([tmp_path / "site"]), timeout=300)
    if r.returncode != 0 and "fmt" in r.stderr:
        pytest.skip("fmt's CMake package is not installed")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"NVTX compiled in (nvidia wheel: {include}/nvtx3)" in r.stdout, r.stdout[-3000:]
