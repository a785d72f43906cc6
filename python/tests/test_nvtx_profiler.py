"""What a profiler receives from Python: the NVTX injection library of the C++ tests
(tests/nvtx_recorder, the mechanism Nsight uses) records every event of a Python process."""

import os
import re
import subprocess
import sys

SCRIPT = r"""
import ctypes, sys, threading
import laptime
sw, nvtx = laptime.Stopwatch(), laptime.NVTXRangeWrapper()
nvtx.name_current_thread("trainer")
nvtx.enable(False, False, True)
sw.enable(0)
for i in range(2):
    nvtx.range_push("step")
    with nvtx.range("forward"):
        pass
    nvtx.range_pop("step")
    sw.finish_iter()

@nvtx.range("decorated")
def f():
    nvtx.mark("inside")
f()
nvtx.range_push("unchecked")
nvtx.range_pop()
recorder = ctypes.CDLL(sys.argv[1])
recorder.nvtx_recorder_events.restype = ctypes.c_char_p
recorder.nvtx_recorder_stats.restype = ctypes.c_char_p
sys.stdout.write(recorder.nvtx_recorder_events().decode())
sys.stdout.write("stats " + recorder.nvtx_recorder_stats().decode() + "\n")
"""


def test_a_profiler_sees_every_push_pop_mark_and_thread_name(nvtx_recorder):
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(nvtx_recorder))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(nvtx_recorder)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    stats = lines.pop()
    events = [re.sub(r" tid=\d+$", "", line) for line in lines]
    events = [e for e in events if not e.startswith(("domain-create", "note"))]
    assert events[0].startswith("name-thread ") and events[0].endswith(" trainer")
    assert events[1:] == [
        "register global step", "push global step",
        "register global forward", "push global forward", "pop global", "pop global",
        "mark global iteration 1",
        "push global step", "push global forward", "pop global", "pop global",
        "mark global iteration 2",
        "register global decorated", "push global decorated", "mark global inside",
        "pop global",
        "register global unchecked", "push global unchecked", "pop global",
    ]
    # Six pushes with registered handles, never text; the three marks are text.
    assert "attached=1" in stats and "registered=6" in stats and "ascii=3" in stats
