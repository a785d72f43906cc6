"""Shared fixtures: test isolation, and C++ code compiled against laptime's headers."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import laptime
from laptime import _laptime

REPO = Path(__file__).resolve().parents[2]
INCLUDE = REPO / "include"
CUDA_INCLUDE = Path("/usr/local/cuda/include")


@pytest.fixture(autouse=True)
def fresh_laptime():
    """Each test starts with the Stopwatch and the NVTX wrapper as before their first enable."""
    _laptime._testing_reset()
    yield
    _laptime._testing_reset()


@pytest.fixture
def stopwatch():
    return laptime.Stopwatch()


@pytest.fixture
def nvtx():
    return laptime.NVTXRangeWrapper()


def compiler():
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None or not INCLUDE.is_dir():
        pytest.skip("needs a C++ compiler and laptime's headers (a source checkout)")
    return cxx


def cuda_flags():
    """The NVTX headers as the extension was built with them, so that both copies of the header
    agree on what they compile."""
    if _laptime.HAVE_NVTX and (CUDA_INCLUDE / "nvtx3" / "nvToolsExt.h").exists():
        return ["-isystem", str(CUDA_INCLUDE), "-DLAPTIME_HAVE_CUDA_HEADERS=1"]
    return []


def compile_shared(source, output: Path, extra=()):
    """Compiles `source` (a path, or a list of the library's source files) into `output`."""
    sources = [source] if isinstance(source, Path) else list(source)
    cmd = [compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
           "-fvisibility-inlines-hidden", "-DFMT_HEADER_ONLY", f"-I{INCLUDE}", *extra,
           *map(str, sources), "-o", str(output), "-pthread", "-ldl",
           # Where the toolchain links libstdc++ statically, keep its symbols (STB_GNU_UNIQUE ones
           # bind process-wide) out of the exports, as laptime's own extension does.
           "-Wl,--exclude-libs,ALL"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"compiling {sources[0].name} failed:\n{' '.join(cmd)}\n{result.stderr[-4000:]}")
    return output


@pytest.fixture(scope="session")
def cpp_ext(tmp_path_factory):
    """laptime_cpp_ext: a separate C++ extension that includes laptime's headers (its own copy of
    the code, loaded RTLD_LOCAL with hidden visibility like any extension)."""
    # Both copies must be compiled from the same headers: process-wide objects are shared by name,
    # version and size, so a layout changed since the extension was built would be misread.
    built = Path(_laptime.__file__).stat().st_mtime
    newer = [h.name for h in INCLUDE.rglob("*.hpp") if h.stat().st_mtime > built]
    if newer:
        pytest.skip(f"laptime's extension is older than {', '.join(newer)}: rebuild it first")
    out_dir = tmp_path_factory.mktemp("cpp_ext")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    compile_shared(Path(__file__).parent / "cpp" / "laptime_cpp_ext.cpp",
                   out_dir / f"laptime_cpp_ext{suffix}",
                   [f"-I{sysconfig.get_paths()['include']}", *cuda_flags()])
    sys.path.insert(0, str(out_dir))
    try:
        import laptime_cpp_ext
    finally:
        sys.path.remove(str(out_dir))
    return laptime_cpp_ext


@pytest.fixture(scope="session")
def nvtx_recorder(tmp_path_factory):
    """The NVTX injection library of the C++ tests (tests/nvtx_recorder), built here."""
    source = REPO / "tests" / "nvtx_recorder" / "nvtx_recorder.cpp"
    if not (CUDA_INCLUDE / "nvtx3" / "nvToolsExt.h").exists() or not source.exists():
        pytest.skip("needs the NVTX3 headers (/usr/local/cuda/include) and tests/nvtx_recorder")
    if not _laptime.HAVE_NVTX:
        pytest.skip("laptime's extension was built without the NVTX headers")
    out = tmp_path_factory.mktemp("nvtx_recorder") / "libnvtx_recorder.so"
    # Every source of the folder, as its CMakeLists.txt builds it (ranges, and counters apart).
    sources = sorted(source.parent.glob("*.cpp"))
    return compile_shared(sources, out, ["-isystem", str(CUDA_INCLUDE)])
