"""Forked workers (multiprocessing, PyTorch DataLoader workers): their CPU counts in the process
tree figure of tracked names (the process and all its live descendants, docs/resources.md), and what they measure reaches the parent's report
(test_workers.py has the rest)."""

import multiprocessing
import os
import resource
import time

import pytest

import laptime

fork = multiprocessing.get_context("fork")


def spin_cpu(seconds):
    """Burns `seconds` of this process's CPU time, however loaded the machine is."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def spin_until(stop):
    while not stop.is_set():
        pass


def cpu_seconds(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def tree_cores(stopwatch, name):
    m = next(m for m in stopwatch.results()["measurements"] if m["name"] == name)
    cores = m["cpu"]["process_cores"]
    if cores is None:
        pytest.skip("/proc is not readable here: the process tree CPU is unavailable")
    return cores


@pytest.mark.parametrize("workers", [1, 2])
def test_cpu_of_finished_workers_counts(stopwatch, workers):
    stopwatch.enable(0)
    stopwatch.set_cpu_usage_meas_name("epoch")
    self0, children0, t0 = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(
        resource.RUSAGE_CHILDREN), time.monotonic()
    stopwatch.start_meas("epoch")
    procs = [fork.Process(target=spin_cpu, args=(0.3,)) for _ in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()  # reaped: their CPU is now in our cutime/cstime
    stopwatch.end_meas("epoch")
    wall = time.monotonic() - t0
    cpu = (cpu_seconds(resource.RUSAGE_SELF) - self0
           + cpu_seconds(resource.RUSAGE_CHILDREN) - children0)
    assert all(p.exitcode == 0 for p in procs)
    assert cpu >= 0.3 * workers
    # The workers' own CPU time over the interval, in cores (a loaded 2-core machine gives the
    # busy workers less than a core each: compare with what they got, not with `workers`).
    assert tree_cores(stopwatch, "epoch") == pytest.approx(cpu / wall, rel=0.25, abs=0.1)


def test_cpu_of_live_workers_counts(stopwatch):
    psutil = pytest.importorskip("psutil")
    stopwatch.enable(0)
    stopwatch.track_cpu_usage("loading")
    stop = fork.Event()
    procs = [fork.Process(target=spin_until, args=(stop,)) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        children = [psutil.Process(p.pid) for p in procs]
        time.sleep(0.1)  # let them start spinning
        me = psutil.Process()

        def tree_cpu():
            return sum(sum(p.cpu_times()[:2]) for p in [me, *children])

        before, t0 = tree_cpu(), time.monotonic()
        stopwatch.start_meas("loading")
        time.sleep(0.5)
        stopwatch.end_meas("loading")
        after, wall = tree_cpu(), time.monotonic() - t0
    finally:
        stop.set()
        for p in procs:
            p.join()
    expected = (after - before) / wall
    assert expected > 0.3  # the workers did get CPU
    assert tree_cores(stopwatch, "loading") == pytest.approx(expected, rel=0.25, abs=0.1)


def child_measures(queue):
    sw = laptime.Stopwatch()
    sw.start_meas("in the child")  # inherited enabled; measured for the parent (a worker)
    sw.end_meas("in the child")
    counts = {m["name"]: m["count"] for m in sw.results()["measurements"]}
    queue.put((os.getpid(), sw.is_enabled, sw.is_worker, counts))


def test_a_forked_child_measures_for_its_parent(stopwatch):
    stopwatch.enable(0)
    stopwatch.start_meas("parent")
    stopwatch.end_meas("parent")
    queue = fork.Queue()
    p = fork.Process(target=child_measures, args=(queue,))
    p.start()
    pid, enabled, worker, counts = queue.get(timeout=30)
    p.join()
    assert p.exitcode == 0 and pid == p.pid and enabled and worker
    # The child's own view holds only what it measured (the parent's figures are the parent's).
    assert counts.get("parent", 0) == 0 and counts["in the child"] == 1
    results = stopwatch.results()
    counts = {m["name"]: m["count"] for m in results["measurements"]}
    assert counts == {"parent": 1, "in the child": 1}
    child = next(m for m in results["measurements"] if m["name"] == "in the child")
    assert [w["pid"] for w in child["workers"]] == [p.pid]


def test_a_forked_child_starts_with_no_running_interval_of_its_parent(stopwatch):
    # The child measures for itself (docs/workers.md): an interval its parent started before the
    # fork is the parent's, which the child neither ends nor disturbs.
    stopwatch.enable(0)
    stopwatch.start_meas("epoch")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            stopwatch.end_meas("epoch")
        except laptime.UsageError as e:
            code = 3 if "not running" in str(e) else 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3  # (waitstatus_to_exitcode: 3.9)
    stopwatch.end_meas("epoch")
    stopwatch.finish_iter()
    assert [(m["name"], m["count"]) for m in stopwatch.results()["measurements"]] == [("epoch", 1)]
