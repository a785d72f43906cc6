"""CPU and I/O as NVTX counters from Python (laptime.enable_nvtx_counters, docs/resources.md): what a
profiler receives, through the NVTX injection library of the C++ tests (tests/nvtx_recorder)."""

import os
import re
import subprocess
import sys

import pytest

import laptime

SCRIPT = r"""
import ctypes, sys, time
import laptime
sw = laptime.Stopwatch()
sw.track_cpu_usage("load")
sw.enable(0)
laptime.enable_nvtx_counters()
for _ in range(2):
    sw.start_meas("load")
    time.sleep(0.02)
    sw.end_meas("load")
    sw.finish_iter()
laptime.disable_nvtx_counters()
sw.start_meas("load")
sw.end_meas("load")
recorder = ctypes.CDLL(sys.argv[1])
recorder.nvtx_recorder_events.restype = ctypes.c_char_p
sys.stdout.write(recorder.nvtx_recorder_events().decode())
"""


def test_tracked_intervals_publish_their_counters_to_a_profiler(nvtx_recorder):
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(nvtx_recorder))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(nvtx_recorder)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    events = [re.sub(r" tid=\d+$", "", line) for line in r.stdout.splitlines()]
    registered = [e for e in events if e.startswith("counter-register")]
    assert [re.sub(r" schema=.*", "", e) for e in registered] == [
        'counter-register laptime "load: process tree CPU" unit=%',
        'counter-register laptime "load: system CPU" unit=%',
        'counter-register laptime "load: read" unit=MB/s',
        'counter-register laptime "load: write" unit=MB/s',
    ]
    # One sample per figure and interval while on; none after disable_nvtx_counters().
    for figure in ("process tree CPU", "system CPU", "read", "write"):
        pattern = re.compile(r'counter(-novalue)? laptime "load: ' + figure + '" ')
        assert sum(1 for e in events if pattern.match(e)) == 2, figure


@pytest.mark.skipif(laptime.build_info()["disabled"], reason="compiled out")
def test_a_rate_outside_0_to_1000_is_a_usage_error():
    with pytest.raises(laptime.UsageError, match="the sample rate must be between 0"):
        laptime.enable_nvtx_counters(-1.0)
    with pytest.raises(laptime.UsageError):
        laptime.enable_nvtx_counters(sample_hz=5000)
