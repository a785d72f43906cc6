"""Python threads are OS threads: each has its own running slots and range stack
(docs/stopwatch.md, docs/nvtx.md)."""

import concurrent.futures
import threading
import time

import pytest

import laptime


def test_loader_threads_measure_the_same_name_at_once(stopwatch):
    stopwatch.enable(0)
    stopwatch.set_cpu_usage_meas_name("training loop")
    barrier = threading.Barrier(3)

    def load(i):
        stopwatch.start_meas("load sample")
        if i < 3:
            barrier.wait()  # three loads of the same name are running at the same time
        time.sleep(0.001)
        stopwatch.end_meas("load sample")
        return i

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        for _ in range(4):
            stopwatch.start_meas("training loop")
            batch = list(pool.map(load, range(6)))
            stopwatch.end_meas("training loop")
            stopwatch.finish_iter()
            assert len(batch) == 6
            barrier.reset()

    by_name = {m["name"]: m for m in stopwatch.results()["measurements"]}
    assert by_name["load sample"]["count"] == 4 * 6
    assert by_name["load sample"]["min_s"] >= 0.001
    assert by_name["training loop"]["count"] == 4


def test_measurements_running_on_worker_threads_do_not_block_finish_iter(stopwatch):
    stopwatch.enable(1)
    started = threading.Event()
    release = threading.Event()

    def worker():
        stopwatch.start_meas("prefetch")
        started.set()
        release.wait()
        stopwatch.end_meas("prefetch")

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    stopwatch.finish_iter()  # iteration 1 (warm-up) ends while the worker still measures
    assert "[running]" in stopwatch.report()
    release.set()
    t.join()
    stopwatch.finish_iter()
    # The interval ended after warm-up: it counts.
    prefetch = stopwatch.results()["measurements"][0]
    assert prefetch["name"] == "prefetch" and prefetch["count"] == 1 and not prefetch["running"]


def test_end_meas_on_another_thread_ends_the_interval_started_here(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("step")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(stopwatch.end_meas, "step").result()  # as the seed allowed
    with pytest.raises(laptime.UsageError, match="is not running"):
        stopwatch.end_meas("step")  # already ended
    assert stopwatch.results()["measurements"][0]["count"] == 1


def test_each_thread_has_its_own_range_stack(nvtx):
    nvtx.enable(False, False, True)
    nvtx.range_push("main thread range")

    def worker():
        nvtx.name_current_thread("loader-0")
        nvtx.range_push("worker range")
        nvtx.range_pop("worker range")
        with pytest.raises(laptime.UsageError) as info:
            nvtx.range_pop("main thread range")  # not on this thread's stack
        return str(info.value)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        message = pool.submit(worker).result()
    assert "no open range" in message and "'loader-0'" in message
    nvtx.range_pop("main thread range")


def test_many_threads_hammering_the_stopwatch(stopwatch):
    stopwatch.enable(0)
    per_thread = 2000

    def work(i):
        name = f"worker {i % 2}"
        for _ in range(per_thread):
            stopwatch.start_meas(name)
            stopwatch.end_meas(name)
            with stopwatch.measure("scoped"):
                pass

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(work, range(8)))
    by_name = {m["name"]: m["count"] for m in stopwatch.results()["measurements"]}
    assert by_name == {"worker 0": 4 * per_thread, "worker 1": 4 * per_thread,
                       "scoped": 8 * per_thread}


def test_one_measure_object_shared_by_threads(stopwatch):
    stopwatch.enable(0)
    timer = stopwatch.measure("load")  # made once, entered on every loader thread
    barrier = threading.Barrier(4)

    def load(_):
        with timer:
            barrier.wait()  # four blocks of the one object are open at the same time

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(load, range(8)))
    m = stopwatch.results()["measurements"][0]
    assert m["count"] == 8 and not m["running"]


def test_a_controller_thread_switching_the_stopwatch_off_and_on_never_fails_a_correct_pair(stopwatch):
    # A correctly paired thread gets no error from another thread's disable()/enable()/reset():
    # an interval that spans the switch is dropped (docs/stopwatch.md).
    stopwatch.enable(0)
    stop = threading.Event()
    errors = []
    pairs = [0]

    def worker():
        while not stop.is_set():
            try:
                stopwatch.start_meas("step")
                with stopwatch.measure("inner"):
                    pass
                stopwatch.end_meas("step")
                pairs[0] += 1
            except laptime.UsageError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for toggle in range(200):
        stopwatch.disable()
        time.sleep(0.0002)  # lets the workers run (and start intervals) while off
        stopwatch.enable(0)
        if toggle % 10 == 0:
            stopwatch.reset()
        time.sleep(0.0002)
    stop.set()
    for t in threads:
        t.join()
    assert pairs[0] > 50
    assert errors == []
