"""laptime in a Jupyter kernel (ipykernel, started by jupyter_client as a notebook server starts
it): what laptime writes at exit (the LAPTIME_PRINT_AT_EXIT report, the warning of a LAPTIME_OUTPUT
path that cannot be written) reaches the kernel's terminal, not a pipe nobody reads any more
(docs/python.md, Printing)."""

import os
import sys
import textwrap

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

CELL = textwrap.dedent("""
    import laptime
    sw = laptime.Stopwatch()
    sw.enable(0)
    with sw.measure("cell step"):
        pass
    sw.finish_iter()
    print(sw.results()["measurements"][0]["count"], "measured in the cell")
""")


def run_cell_in_kernel(tmp_path, env):
    """Starts a kernel with the test's Python and `env`, runs CELL, shuts the kernel down; returns
    (the cell's stdout, the kernel process's stdout, its stderr)."""
    out, err = tmp_path / "kernel.out", tmp_path / "kernel.err"
    km = jupyter_client.KernelManager(kernel_name="python3")  # ipykernel's: sys.executable
    with open(out, "w") as o, open(err, "w") as e:
        km.start_kernel(env=env, stdout=o, stderr=e)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            cell_out = []
            kc.execute_interactive(CELL, timeout=60, output_hook=lambda m: cell_out.append(
                m["content"].get("text", "") if m["msg_type"] == "stream" else ""))
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)  # as a notebook server, nbconvert
    return "".join(cell_out), out.read_text(), err.read_text()


def test_at_exit_report_and_output_warning_reach_the_kernel_terminal(tmp_path):
    env = dict(os.environ, LAPTIME_PRINT_AT_EXIT="1",
               LAPTIME_OUTPUT=str(tmp_path / "missing" / "results.json"),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # ipykernel captures its process's file descriptors 1 and 2 (what makes the exit output go
    # astray) except under pytest, which it tells by this variable.
    for name in ("LAPTIME_PROFILE", "LAPTIME_PROGRESS", "LAPTIME_PRINT_EVERY",
                 "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    cell, out, err = run_cell_in_kernel(tmp_path, env)
    assert "1 measured in the cell" in cell
    assert "laptime stopwatch: 1 measured iteration" in out and "cell step" in out, (out, err)
    assert "could not write results to LAPTIME_OUTPUT" in err, (out, err)
