"""laptime ships its types (py.typed, the extension's .pyi): a user's code checked with
``mypy --strict`` calls the documented API, the integrations' constructors and the distributed
and TensorBoard helpers included, without "untyped call" errors (docs/python.md)."""

import os
import subprocess
import sys
import textwrap

import pytest

import laptime

USER_CODE = textwrap.dedent('''
    import io
    import laptime
    import laptime.distributed
    import laptime.tensorboard
    from laptime.integrations import configure


    def train() -> None:
        sw = laptime.Stopwatch()
        sw.enable(2, None, False)
        with sw.measure("step"):
            pass
        sw.start_meas("fetch")
        sw.discard_meas("fetch")
        sw.finish_iter()
        nvtx = laptime.NVTXRangeWrapper()
        nvtx.range_push("x")
        nvtx.range_pop()
        merged = laptime.distributed.report(file=io.StringIO())
        settings = laptime.distributed.configure_from_env()
        written: int = laptime.tensorboard.log(None, 0, sw.results())
        print(merged, settings, written, configure(num_warmup_iters=3))
''')


def test_user_code_type_checks_under_mypy_strict(tmp_path):
    pytest.importorskip("mypy")
    script = tmp_path / "user.py"
    script.write_text(USER_CODE)
    (tmp_path / "mypy.ini").write_text("[mypy]\nignore_missing_imports = True\n")
    where = os.path.dirname(os.path.dirname(laptime.__file__))
    env = dict(os.environ)
    args = [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini",
            "--follow-imports=silent", "--no-incremental", "user.py"]
    if "site-packages" in where:  # installed: mypy finds it for this interpreter
        args[3:3] = ["--python-executable", sys.executable]
    else:  # a build tree on PYTHONPATH, which mypy does not read
        env["MYPYPATH"] = where
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
