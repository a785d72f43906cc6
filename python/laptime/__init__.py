"""laptime: where the time of a training iteration goes, and what Nsight sees.

A drop-in for the seed's ``Stopwatch`` and ``NVTXRangeWrapper`` singletons, backed by laptime's
C++ implementation: one singleton per process, shared with C++ code that includes laptime's
headers. Only the import changes::

    from laptime import Stopwatch, NVTXRangeWrapper

    stopwatch = Stopwatch()
    nvtx_wrp = NVTXRangeWrapper()
    stopwatch.enable(50, 100, False)        # num_warmup_iters, print_every_n_iters, do_cuda_sync
    nvtx_wrp.enable(False, False, True)     # sync_on_push, sync_on_pop, keep_track_of_range_order

    stopwatch.set_cpu_usage_meas_name("training loop")
    for batch in loader:
        stopwatch.start_meas("training loop")
        nvtx_wrp.range_push("optimizer step")
        step(batch)
        nvtx_wrp.range_pop("optimizer step")
        stopwatch.end_meas("training loop")
        stopwatch.finish_iter()
    stopwatch.print_eval_times()

docs/python.md describes the whole API and what each call costs.
"""

import atexit as _atexit
import functools as _functools
import sys as _sys

try:
    from . import _laptime
except ImportError as _error:
    if "does not support loading in subinterpreters" in str(_error):  # Python 3.12+
        raise ImportError(
            "laptime's C++ extension laptime._laptime loads only in the main interpreter or in a "
            "legacy subinterpreter, which shares its GIL, not in an isolated subinterpreter "
            f"(docs/python.md, Subinterpreters) [{_error}]") from _error
    # A source tree on sys.path, or a build for another Python.
    raise ImportError(
        f"laptime's C++ extension laptime._laptime is not built for this Python "
        f"({_sys.version.split()[0]} at {_sys.executable}): install laptime with "
        f"`pip install <laptime checkout>` for it (docs/python.md) [{_error}]") from _error
from ._laptime import (
    NVTXRangeWrapper,
    Stopwatch,
    UsageError,
    build_info,
    configure_from_env,
    cuda_status,
    error_policy,
    max_names,
    set_error_policy,
    set_max_names,
)

from ._laptime import disable_nvtx_counters, enable_nvtx_counters  # noqa: E402 (docs/resources.md)

__version__ = _laptime.__version__

__all__ = [
    "NVTXRangeWrapper",
    "Stopwatch",
    "UsageError",
    "build_info",
    "configure_from_env",
    "cuda_status",
    "error_policy",
    "max_names",
    "set_error_policy",
    "set_max_names",
]
__all__ += ["disable_nvtx_counters", "enable_nvtx_counters"]


def _decorate(scope, func):
    """``@stopwatch.measure(name)`` / ``@nvtx.range(name)`` on ``func``: every call is timed (or
    annotated) through ``measure(name)`` / ``range(name)`` at the call, which is the calling
    thread's scope for the name, so that threads may call ``func`` at once."""
    name = scope.name
    open_scope = Stopwatch().measure if scope.kind == "measure" else NVTXRangeWrapper().range

    @_functools.wraps(func)
    def wrapper(*args, **kwargs):
        with open_scope(name):
            return func(*args, **kwargs)

    return wrapper


_laptime._decorate = _decorate


def _scope_from(kind, name):
    """A pickled or copied scope (``measure(name)``, ``range(name)``): the same call where it is
    loaded, as a dataset that keeps its timer is sent to a spawned DataLoader worker."""
    return Stopwatch().measure(name) if kind == "measure" else NVTXRangeWrapper().range(name)


_laptime._scope_from = _scope_from
# Each interpreter that imports laptime sets its own helpers on its own copy of the extension
# module, and the extension calls the calling interpreter's; json.loads too, kept for results().
_laptime._prepare_interpreter()

# Periodic reports go to sys.stdout while the interpreter runs; at exit laptime goes back to the
# C stdout, so that nothing calls into a finalised interpreter.
_laptime._install_print_function()


def _at_exit():
    last = getattr(_sys, "last_exc", None) or getattr(_sys, "last_value", None)
    if "ipykernel" in _sys.modules:
        # A Jupyter kernel's stdout and stderr are pipes that nothing reads by the time C atexit
        # handlers run (laptime's at-exit file and report): the report and any warning about the
        # file would be lost. They run now, to the C stdout and stderr, which still reach the
        # kernel's terminal here.
        _laptime._uninstall_print_function()
        _laptime._run_exit_output()
        return
    # After an unhandled KeyboardInterrupt Python runs its exit handlers and then ends the process
    # by SIGINT, so C atexit handlers never run: they run here. Only the python command does that
    # (Py_RunMain): a program that embeds Python (its argv unknown to Python: sys.orig_argv empty)
    # goes on after Py_FinalizeEx, and its at-exit output comes at its own exit.
    if isinstance(last, KeyboardInterrupt) and getattr(_sys, "orig_argv", [None]):
        _laptime._run_exit_output()
    _laptime._uninstall_print_function()


_atexit.register(_at_exit)
