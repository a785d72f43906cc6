"""GPU timing with PyTorch streams and do_cuda_sync (needs torch with a CUDA device; laptime
itself never imports torch)."""

import pytest

torch = pytest.importorskip("torch", reason="GPU tests need PyTorch")
if not torch.cuda.is_available():
    pytest.skip("GPU tests need a CUDA device", allow_module_level=True)

import laptime  # noqa: E402


def matmuls(a, n=8):
    for _ in range(n):
        a = (a @ a).clamp_(-1, 1)
    return a


def test_cuda_driver_is_found():
    assert laptime.cuda_status().startswith("CUDA driver"), laptime.cuda_status()


@pytest.mark.parametrize("current", [False, True])
def test_gpu_timing_on_a_torch_stream(stopwatch, current):
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream() if current else torch.cuda.Stream()
    stopwatch.enable(1)
    stopwatch.enable_gpu_timing(stream)  # a torch.cuda.Stream: its .cuda_stream handle is used
    with torch.cuda.stream(stream):
        for _ in range(4):
            stopwatch.start_meas("matmuls")
            matmuls(a)
            stopwatch.end_meas("matmuls")  # no sync: the launch is asynchronous
            stopwatch.finish_iter()
    stopwatch.wait_for_gpu_timings()
    m = stopwatch.results()["measurements"][0]
    gpu = m["gpu"]
    assert gpu["count"] == 3 and gpu["pending"] == 0
    # Timed with torch's own events on the same stream, the GPU time agrees.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        matmuls(a)
        end.record()
    end.synchronize()
    reference_s = start.elapsed_time(end) / 1e3
    assert gpu["median_s"] == pytest.approx(reference_s, rel=0.5)
    assert "gpu:" in stopwatch.report()


def test_do_cuda_sync_makes_host_intervals_include_gpu_work(stopwatch):
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    matmuls(a)
    end.record()
    end.synchronize()
    gpu_s = start.elapsed_time(end) / 1e3

    stopwatch.enable(0, None, True)  # the seed's do_cuda_sync (torch.cuda.synchronize())
    stopwatch.start_meas("synced")
    matmuls(a)
    stopwatch.end_meas("synced")
    host_s = stopwatch.results()["measurements"][0]["total_s"]
    assert host_s >= 0.8 * gpu_s


def test_nvtx_sync_and_profiler_calls_with_torch(nvtx):
    nvtx.enable(True, True, True)
    a = torch.randn(1024, 1024, device="cuda")
    nvtx.range_push("synced range")
    matmuls(a)
    nvtx.range_pop("synced range")
    assert nvtx.profiler_start() in (True, False)  # False when no profiler session is active
    nvtx.profiler_stop()
