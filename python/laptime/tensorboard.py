"""TensorBoard scalars from the Stopwatch: ``laptime.tensorboard.log(writer, step)``.

Writes, for each measured name, its mean time per iteration and per call and its p90 interval
(milliseconds, of the results so far: the Stopwatch's statistics since ``enable``/``reset``), and
for CPU-tracked names the process tree's CPU (% of the machine, cores) and the system CPU::

    from torch.utils.tensorboard import SummaryWriter   # or: from tensorboardX import SummaryWriter
    import laptime, laptime.tensorboard

    writer = SummaryWriter("runs/exp1")
    for it, batch in enumerate(loader):
        ...
        laptime.Stopwatch().finish_iter()
        if it % 100 == 0:                                # every N iterations: a report takes
            laptime.tensorboard.log(writer, it)          # ~0.2 ms (ms with recording on)

``writer`` is anything with ``add_scalar(tag, value, global_step)``. Tags are
``laptime/<name>/mean_per_iter_ms``, ``.../mean_per_call_ms``, ``.../p90_ms``,
``laptime/<name>/cpu_process_percent``, ``.../cpu_process_cores``, ``.../cpu_system_percent``.
Figures that are not available yet (no interval after warm-up, CPU unreadable) are skipped.
"""

from typing import Any, Dict, List, Optional, Tuple


def _tag(name):
    return "laptime/" + name.replace(" ", "_")


def scalars(results: Dict[str, Any]) -> List[Tuple[str, float]]:
    """[(tag, value)] that ``log`` writes for ``results`` (a dict of laptime's JSON)."""
    out = []
    for m in results.get("measurements", []):
        base = _tag(m["name"])
        for key, suffix in (("mean_per_iter_s", "mean_per_iter_ms"),
                            ("mean_per_interval_s", "mean_per_call_ms"), ("p90_s", "p90_ms")):
            if m.get(key) is not None:
                out.append((f"{base}/{suffix}", m[key] * 1e3))
        cpu = m.get("cpu") or {}
        for key in ("process_percent", "process_cores", "system_percent"):
            if cpu.get(key) is not None:
                out.append((f"{base}/cpu_{key}", cpu[key]))
    return out


def log(writer: Any, step: int, results: Optional[Dict[str, Any]] = None) -> int:
    """Writes the Stopwatch's current figures (or ``results``, a dict) to ``writer`` at
    ``step``; returns how many scalars were written."""
    if results is None:
        from laptime import Stopwatch

        results = Stopwatch().results()
    items = scalars(results)
    for tag, value in items:
        writer.add_scalar(tag, value, step)
    return len(items)
