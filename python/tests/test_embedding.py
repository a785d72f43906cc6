"""laptime in a program that embeds Python (docs/python.md, "Embedding"): the interpreter may be
finalised and started again in one process, and the module then works as on its first import."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import compiler

# Runs the Python file argv[1] in two interpreter lifetimes (Py_Initialize .. Py_FinalizeEx); exit
# status 1 if a round raised.
EMBED = r"""
#include <Python.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int failed = 0;
  for (int round = 0; round < 2; ++round) {
    Py_Initialize();
    FILE* f = fopen(argv[1], "r");
    if (f == NULL || PyRun_SimpleFile(f, argv[1]) != 0) failed = 1;
    if (f != NULL) fclose(f);
    if (Py_FinalizeEx() != 0) failed = 1;
  }
  return failed;
}
"""

SCRIPT = """
import laptime
sw = laptime.Stopwatch()
sw.enable(0)
# Names CPython allocates statically ("data", one-letter names) sit at the same address in every
# interpreter, as the thread state may: the scope cache of the first must not serve the second.
for name in ("data", "a", "x", "forward"):
    with sw.measure(name):
        pass
print("round ok", flush=True)
"""


def _embedding_program(tmp_path):
    """EMBED, built against this Python's libpython."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed (built without --enable-shared)")
    libdir = sysconfig.get_config_var("LIBDIR")
    source = tmp_path / "embed.c"
    source.write_text(EMBED)
    program = tmp_path / "embed"
    cmd = [compiler(), "-x", "c", str(source), "-o", str(program),
           f"-I{sysconfig.get_paths()['include']}", f"-L{libdir}", f"-Wl,-rpath,{libdir}",
           f"-lpython{sysconfig.get_config_var('LDVERSION')}"]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, " ".join(cmd) + "\n" + built.stderr[-3000:]
    return program


def test_a_second_interpreter_lifetime_measures_with_blocks(tmp_path):
    program = _embedding_program(tmp_path)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    # The embedded interpreter finds laptime where this one does (a venv's site-packages).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([str(program), str(script)], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("round ok") == 2, r.stdout + r.stderr


INTERRUPTED = """
import os, sys
import laptime
sw = laptime.Stopwatch()
sw.enable(0)
for _ in range(3):
    with sw.measure("step"):
        pass
    sw.finish_iter()
marker = os.environ["ROUND_MARKER"]
if not os.path.exists(marker):
    open(marker, "w").close()
    raise KeyboardInterrupt  # sys.last_value: the interpreter's own exit, not the process's
"""


@pytest.mark.skipif(sys.version_info < (3, 10),
                    reason="sys.orig_argv, which tells the python command from an embedding "
                           "program, is 3.10's (before it, the output is written at the interrupt)")
def test_a_keyboard_interrupt_in_embedded_code_leaves_the_exit_output_to_the_process(tmp_path):
    """An embedding program goes on after Py_FinalizeEx: the results file is written at its exit,
    with every round's iterations (before, at the first Py_FinalizeEx, with the first round's)."""
    program = _embedding_program(tmp_path)
    script = tmp_path / "script.py"
    script.write_text(INTERRUPTED)
    out = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               LAPTIME_OUTPUT=str(out), ROUND_MARKER=str(tmp_path / "marker"))
    r = subprocess.run([str(program), str(script)], capture_output=True, text=True, env=env,
                       timeout=60)
    assert "KeyboardInterrupt" in r.stderr
    assert json.loads(out.read_text())["iterations_measured"] == 6, r.stdout + r.stderr
