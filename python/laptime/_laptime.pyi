"""Type stubs of laptime's extension module; import everything from ``laptime``."""

import os
from typing import Any, Callable, Final, Literal, Optional, Protocol, Sequence, TextIO, TypeVar, final

__version__: Final[str]
HAVE_NVTX: Final[int]

_F = TypeVar("_F", bound=Callable[..., Any])

class _CudaStreamLike(Protocol):
    @property
    def cuda_stream(self) -> int: ...

_Stream = Optional[int | _CudaStreamLike]

class UsageError(AssertionError):
    """Misuse of the API: the message names the call, the measurement or range, and the thread."""

@final
class _Scope:
    """``with stopwatch.measure(name):`` / ``with nvtx.range(name):``, or as a decorator."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> Literal["measure", "range"]: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *exc_info: object) -> Literal[False]: ...
    def __call__(self, func: _F, /) -> _F: ...

@final
class Stopwatch:
    """The process-wide stopwatch. ``Stopwatch()`` is the singleton; ``Stopwatch(*args)`` also
    calls ``enable(*args)``."""

    def __new__(
        cls,
        num_warmup_iters: int = ...,
        print_every_n_iters: Optional[int] = None,
        do_cuda_sync: bool = False,
    ) -> "Stopwatch": ...
    def __init__(
        self,
        num_warmup_iters: int = ...,
        print_every_n_iters: Optional[int] = None,
        do_cuda_sync: bool = False,
    ) -> None: ...
    @property
    def is_enabled(self) -> bool:
        """Whether enable() was called."""
    def enable(
        self, num_warmup_iters: int, print_every_n_iters: Optional[int] = None,
        do_cuda_sync: bool = False
    ) -> None:
        """Turns measuring on. Iterations before ``num_warmup_iters`` are warm-up; the report is
        printed every ``print_every_n_iters`` measured iterations; ``do_cuda_sync`` synchronises
        the current CUDA context before each timestamp after warm-up (a full GPU sync per call).
        Again with the same arguments: nothing; with others: UsageError."""
    def disable(self) -> None:
        """Turns measuring off; results stay, and enable() may be called with other arguments."""
    def start_meas(self, name: str, /) -> None:
        """Starts the interval ``name`` on the calling thread."""
    def end_meas(self, name: str, /) -> None:
        """Ends the interval ``name`` running on the calling thread."""
    def finish_iter(self) -> None:
        """Ends an iteration: warm-up, NVTX mark "iteration N", periodic report."""
    def measure(self, name: str, /) -> _Scope:
        """``with stopwatch.measure("x"):`` or ``@stopwatch.measure("x")``."""
    def set_cpu_usage_meas_name(self, name: str, /) -> None:
        """Samples process-tree CPU, system CPU and I/O during the intervals of ``name``."""
    def track_cpu_usage(self, name: str, /) -> None:
        """The same, for one more name (several names may be tracked)."""
    def start_one_time_measurement(self, name: str, /) -> None:
        """A single interval outside the iterations (pipeline creation); no warm-up."""
    def end_one_time_measurement(self, name: str, /) -> None: ...
    def get_num_nonwarmup_iters_measured(self) -> int: ...
    def print_eval_times(self, file: Optional[TextIO] = None) -> None:
        """Prints the report to ``file`` (default: sys.stdout)."""
    def report(self) -> str:
        """The report print_eval_times prints."""
    def to_json(self) -> str:
        """The results as JSON (schema 1)."""
    def write_json(self, path: str | os.PathLike[str], /) -> None:
        """Writes to_json() to ``path`` atomically (a temporary file in the same folder, then a
        rename): a reader sees the old file or the new one, never a torn one. Raises OSError
        (FileNotFoundError, PermissionError, ...) with the path when it cannot."""
    def results(self) -> dict[str, Any]:
        """The results as a dict mirroring to_json()."""
    def reset(self) -> None:
        """Drops all results and warm-up progress; the configuration stays."""
    def set_print_rank0_only(self, on: bool, /) -> None:
        """Periodic and at-exit reports only on rank 0."""
    def enable_gpu_timing(self, stream: _Stream = None) -> None:
        """Also times every interval on the GPU with CUDA events recorded on ``stream`` (a
        torch.cuda.Stream, an int cudaStream_t, or None: the legacy default stream); no sync."""
    def set_gpu_stream(self, stream: _Stream, /) -> None:
        """Changes the stream GPU timing records on."""
    def disable_gpu_timing(self) -> None: ...
    def wait_for_gpu_timings(self) -> None:
        """Waits for every pending GPU timing (at report time, never in the loop)."""

@final
class NVTXRangeWrapper:
    """The process-wide NVTX range wrapper. ``NVTXRangeWrapper()`` is the singleton; with
    arguments it also calls ``enable``."""

    def __new__(
        cls,
        sync_on_push: bool = ...,
        sync_on_pop: bool = ...,
        keep_track_of_range_order: bool = ...,
        *,
        domain: Optional[str] = None,
        colors: Optional[Sequence[int]] = None,
    ) -> "NVTXRangeWrapper": ...
    def __init__(
        self,
        sync_on_push: bool = ...,
        sync_on_pop: bool = ...,
        keep_track_of_range_order: bool = ...,
        *,
        domain: Optional[str] = None,
        colors: Optional[Sequence[int]] = None,
    ) -> None: ...
    @property
    def is_enabled(self) -> bool:
        """Whether enable() was called."""
    def enable(
        self,
        sync_on_push: bool,
        sync_on_pop: bool,
        keep_track_of_range_order: bool,
        *,
        domain: Optional[str] = None,
        colors: Optional[Sequence[int]] = None,
    ) -> None:
        """Turns the wrapper on. ``sync_on_push``/``sync_on_pop`` synchronise the current CUDA
        context before each push/pop; ``keep_track_of_range_order`` checks range_pop(expected).
        ``domain``: an NVTX domain (default: the global one); ``colors``: an ARGB palette."""
    def range_push(self, name: str, /) -> None:
        """Opens an NVTX range on the calling thread."""
    def range_pop(self, expected: Optional[str] = None) -> None:
        """Closes the calling thread's innermost range. With order tracking and ``expected``,
        checks it first: on a mismatch UsageError names both, the thread and its open ranges,
        and nothing is popped."""
    def range(self, name: str, /) -> _Scope:
        """``with nvtx.range("x"):`` or ``@nvtx.range("x")``."""
    def mark(self, message: str, /) -> None:
        """An instantaneous NVTX marker."""
    def name_current_thread(self, name: str, /) -> None:
        """Names the calling OS thread in Nsight Systems."""
    def profiler_start(self) -> bool:
        """cuProfilerStart (for nsys --capture-range=cudaProfilerApi); False when not enabled or
        without CUDA."""
    def profiler_stop(self) -> bool: ...

def set_error_policy(policy: Literal["throw", "warn", "abort"], /) -> None:
    """What a usage error does, process-wide (also LAPTIME_ON_ERROR)."""

def error_policy() -> Literal["throw", "warn", "abort"]: ...
def configure_from_env() -> dict[str, Any]:
    """Enables what the LAPTIME_* variables ask for; returns the settings applied."""

def cuda_status() -> str:
    """The CUDA driver laptime loaded, or why CUDA is unavailable."""
