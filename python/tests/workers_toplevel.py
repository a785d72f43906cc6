"""A module that enables the Stopwatch when imported, as scripts often do at their top level:
a spawn or forkserver worker imports it again (test_workers.py), and must stay a worker."""

import laptime

laptime.Stopwatch().enable(0)


def work(name, times):
    sw = laptime.Stopwatch()
    for _ in range(times):
        with sw.measure(name):
            pass
    return sw.is_worker
