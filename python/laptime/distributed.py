"""Every rank's results on rank 0, in-process: one cross-rank report for a ``torchrun`` job.

In data-parallel training each rank has its own Stopwatch (one per process). This module gathers
``Stopwatch().to_json()`` of every rank over ``torch.distributed`` (no files) and rank 0 prints one
report: per name min / median / max across ranks and the slowest rank (``laptime.merge``, the same
code as ``laptime merge rank*.json``)::

    from laptime import distributed

    distributed.configure_from_env()        # LAPTIME_PROFILE=...; every rank measures (below)
    ...  # training loop, as usual
    merged = distributed.report()           # collective: call it on every rank

**Which ranks measure.** ``laptime.configure_from_env()`` enables the Stopwatch on rank 0 only, as
the seed did (``LAPTIME_RANKS=0``, the default). A cross-rank report needs every rank measuring, so
``distributed.configure_from_env()`` sets ``LAPTIME_RANKS=all`` first unless the user set
``LAPTIME_RANKS`` themselves (a variable the user set wins, as everywhere in laptime). With
``LAPTIME_RANKS=0`` the report still comes, and names the ranks that measured nothing. Reports of
each rank's own Stopwatch stay on rank 0 (``LAPTIME_PRINT_RANK0_ONLY``, default on); each rank's
JSON is still written where ``LAPTIME_OUTPUT=results/rank{rank}.json`` asks for it.

torch is imported only inside the functions: ``import laptime`` never needs it.
"""

import os
import sys
from typing import Any, Dict, List, Optional, TextIO

from . import merge as _merge
from ._laptime import Stopwatch
from ._laptime import configure_from_env as _configure_from_env


def configure_from_env(all_ranks: bool = True) -> Dict[str, Any]:
    """``laptime.configure_from_env()`` with every rank measuring (``LAPTIME_RANKS=all``) unless
    the environment already says ``LAPTIME_RANKS``. Returns the settings applied (a dict).

    Where ``torch.distributed`` is initialised already, the process group's rank and world size
    are this process's (``Stopwatch().set_rank``): ``torch.multiprocessing.spawn`` sets no
    ``RANK`` variable, and without it every rank would call itself rank 0 and write the same
    ``LAPTIME_OUTPUT`` file. Called before ``init_process_group`` there, call
    ``Stopwatch().set_rank(rank, world_size)`` once it is known."""
    if all_ranks and not os.environ.get("LAPTIME_RANKS"):
        os.environ["LAPTIME_RANKS"] = "all"
    dist = _dist()
    if dist is not None:
        Stopwatch().set_rank(dist.get_rank(), dist.get_world_size())
    return _configure_from_env()


def _dist():
    """``torch.distributed`` when it is initialised, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def gather(group: Any = None) -> List[Dict[str, Any]]:
    """The results of every rank, as parsed JSON, in rank order; a one-element list when
    ``torch.distributed`` is not initialised. Collective: every rank of ``group`` must call it.
    Every rank receives the list (``all_gather_object`` works with both gloo and NCCL; with NCCL,
    objects travel through the current CUDA device, so call ``torch.cuda.set_device`` first, as
    DDP needs anyway)."""
    import json

    dist = _dist()
    if dist is not None:
        # The process group knows the rank and world size for sure; the launcher's variables may
        # be incomplete (Lightning's own launcher sets no WORLD_SIZE for rank 0).
        Stopwatch().set_rank(dist.get_rank(), dist.get_world_size())
    mine = Stopwatch().to_json()
    if dist is None:
        return [json.loads(mine)]
    everyone = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, mine, group=group)
    return [json.loads(s) for s in everyone]


def report(file: Optional[TextIO] = None, json_path: Optional[str] = None,
           group: Any = None) -> Optional[Dict[str, Any]]:
    """Gathers every rank's results and, on rank 0 (with ``group``, the group's first rank),
    prints the cross-rank report to ``file`` (default ``sys.stdout``) and writes the merged JSON to
    ``json_path`` if given. Returns the merged dict there and None elsewhere. Collective: call it
    on every rank. Each rank is named by its own rank (``gather`` sets it from the process group);
    without a process group a process reports only itself, as the rank the environment says."""
    results = gather(group)
    dist = _dist()
    first = dist.get_rank(group) == 0 if dist is not None else results[0].get("rank", 0) == 0
    if not first:
        return None
    merged = _merge.merge(results)
    (file or sys.stdout).write(_merge.format_report(merged))
    if json_path:
        _merge.write_json(merged, json_path)
    return merged
