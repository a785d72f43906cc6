"""Type stubs of laptime's extension module; import everything from ``laptime``."""

import os
from typing import (Any, Callable, Final, Hashable, Literal, Optional, Protocol, Sequence, TextIO,
                    TypedDict, TypeVar, final)

__version__: Final[str]
HAVE_NVTX: Final[int]

_F = TypeVar("_F", bound=Callable[..., Any])

class _CudaStreamLike(Protocol):
    @property
    def cuda_stream(self) -> int: ...

_Stream = Optional[int | _CudaStreamLike]

# A name: a str (the fast path), or any hashable object, recorded under its str(). Not enabled,
# the calls accept anything, as the seed's empty methods did.
_Name = Hashable
# A number of iterations: an int, or a float with an integral value (5.0).
_Count = int | float

class _BuildInfo(TypedDict):
    version: str
    nvtx: bool
    nvtx_include_dir: Optional[str]
    nvtx_source: Optional[str]
    cuda_headers: bool
    compiler: str
    cplusplus: int
    disabled: bool
    max_names_capacity: int
    python: str

class UsageError(AssertionError):
    """Misuse of the API: the message names the call, the measurement or range, and the thread."""

@final
class _Scope:
    """``with stopwatch.measure(name):`` / ``with nvtx.range(name):``, or as a decorator."""

    @property
    def name(self) -> _Name: ...
    @property
    def kind(self) -> Literal["measure", "range"]: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *exc_info: object) -> Literal[False]: ...
    def __call__(self, func: _F, /) -> _F: ...

class Stopwatch:
    """The process-wide stopwatch. ``Stopwatch()`` is the singleton; ``Stopwatch(*args)`` also
    calls ``enable(*args)``. A subclass gets one instance of its own, on the same state."""

    def __new__(
        cls,
        num_warmup_iters: _Count = ...,
        print_every_n_iters: Optional[_Count] = None,
        do_cuda_sync: bool = False,
    ) -> "Stopwatch": ...
    def __init__(
        self,
        num_warmup_iters: _Count = ...,
        print_every_n_iters: Optional[_Count] = None,
        do_cuda_sync: bool = False,
    ) -> None: ...
    @property
    def is_enabled(self) -> bool:
        """Whether enable() was called."""
    @property
    def is_worker(self) -> bool:
        """Whether this process measures for a parent (a worker: its figures go to the parent's
        report, docs/workers.md)."""
    def set_worker_label(self, label: str, /) -> None:
        """In a worker process, the label its figures carry in the parent's report (default
        "pid N"); e.g. from a DataLoader worker_init_fn."""
    def enable(
        self, num_warmup_iters: _Count, print_every_n_iters: Optional[_Count] = None,
        do_cuda_sync: bool = False, *, nvtx: Optional[bool] = None
    ) -> None:
        """Turns measuring on. Iterations before ``num_warmup_iters`` are warm-up; the report is
        printed every ``print_every_n_iters`` measured iterations; ``do_cuda_sync`` synchronises
        the current CUDA context before each timestamp after warm-up (a full GPU sync per call).
        Again with the same arguments: nothing; with others: UsageError. ``nvtx=True`` also calls
        ``set_nvtx_ranges(True)`` (``None``: the setting stays)."""
    def set_nvtx_ranges(self, on: bool, /) -> None:
        """Every interval also an NVTX range of the same name, through the NVTX wrapper while it
        is enabled: no ``range_push`` next to ``start_meas``. ``LAPTIME_NVTX_RANGES``, when set,
        wins."""
    def disable(self) -> None:
        """Turns measuring off; results stay, and enable() may be called with other arguments."""
    def start_meas(self, name: _Name) -> None:
        """Starts the interval ``name`` on the calling thread."""
    def end_meas(self, name: _Name) -> None:
        """Ends the interval ``name`` running on the calling thread."""
    def discard_meas(self, name: _Name) -> None:
        """Ends the interval ``name`` running on the calling thread without counting it."""
    def finish_iter(self) -> None:
        """Ends an iteration: warm-up, NVTX mark "iteration N", periodic report."""
    def measure(self, name: _Name, /) -> _Scope:
        """``with stopwatch.measure("x"):`` or ``@stopwatch.measure("x")``."""
    def set_cpu_usage_meas_name(self, name: _Name) -> None:
        """Samples process-tree CPU, system CPU and I/O during the intervals of ``name``."""
    def track_cpu_usage(self, name: _Name) -> None:
        """The same, for one more name (several names may be tracked)."""
    def start_one_time_measurement(self, name: _Name) -> None:
        """A single interval outside the iterations (pipeline creation); no warm-up."""
    def end_one_time_measurement(self, name: _Name) -> None: ...
    def get_num_nonwarmup_iters_measured(self) -> int: ...
    def print_eval_times(self, file: Optional[TextIO] = None) -> None:
        """Prints the report to ``file`` (default: sys.stdout); nothing when not enabled and
        nothing was measured."""
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
    def enable_gpu_timing_for(self, name: Hashable) -> None:
        """Times only the intervals of ``name`` on the GPU (once per name), on the stream given
        to set_gpu_stream (LAPTIME_GPU_TIMING=a,b does the same)."""
    def set_rank(self, rank: int, world_size: int = 0) -> None:
        """This process's rank and world size (0 keeps the detected one), for programs that
        learn their rank from MPI or NCCL rather than the launcher's variables."""
    def set_data_name(self, name: Optional[str], /) -> None:
        """The name whose intervals are the loop's wait for data, for the report's bottleneck
        verdict (None or "": the default rule: "data", "data fetch", ...). ``LAPTIME_DATA_NAME``,
        when set, wins."""
    def set_total_iters(self, n: Optional[int], /) -> None:
        """The iterations the run will finish (warm-up included), for the progress line's ETA."""
    def set_progress(self, mode: str, /) -> None:
        """What periodic printing prints: ``"report"`` (the default), ``"line"`` (one compact
        line, rewritten in place on a terminal) or ``"off"``. ``LAPTIME_PROGRESS`` wins."""
    def set_report_format(self, layout: str, /) -> None:
        """The printed report's layout: ``"table"`` (the default) or ``"seed"`` (the seed tool's
        sections, in seconds, for scripts that read them). ``LAPTIME_REPORT_FORMAT`` wins."""
    def enable_recording(self, max_intervals: int, /) -> None:
        """Keeps each thread's last ``max_intervals`` intervals (name, start, duration, iteration)
        for ``laptime plot`` and ``laptime trace``: the JSON's ``samples``. 0: off.
        ``LAPTIME_RECORD=N``, when set, wins."""
    def set_gpu_stream(self, stream: _Stream, /) -> None:
        """Changes the stream GPU timing records on."""
    def disable_gpu_timing(self) -> None: ...
    def wait_for_gpu_timings(self) -> None:
        """Waits for every pending GPU timing (at report time, never in the loop)."""

class NVTXRangeWrapper:
    """The process-wide NVTX range wrapper. ``NVTXRangeWrapper()`` is the singleton; with
    arguments it also calls ``enable``. A subclass gets one instance of its own."""

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
    def range_push(self, range_name: _Name) -> None:
        """Opens an NVTX range on the calling thread."""
    def range_pop(self, range_name: Optional[_Name] = None) -> None:
        """Closes the calling thread's innermost range. With order tracking and ``range_name``,
        checks it first: on a mismatch UsageError names both, the thread and its open ranges,
        and nothing is popped. (``expected=`` is laptime 0.1's spelling, still accepted.)"""
    def range(self, name: _Name, /) -> _Scope:
        """``with nvtx.range("x"):`` or ``@nvtx.range("x")``."""
    def mark(self, message: _Name, /) -> None:
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

def build_info() -> _BuildInfo:
    """How this extension was built: version, whether NVTX is compiled in and where its headers
    were found, cuda.h, compiler, C++ standard (__cplusplus), LAPTIME_DISABLE, name capacity."""

def set_max_names(n: int, /) -> int:
    """Limits the distinct measurement names to ``n`` (at most
    ``build_info()["max_names_capacity"]``: more is clamped with one warning). LAPTIME_MAX_NAMES
    in the environment wins over this call. Returns the limit in force."""

def max_names() -> int:
    """The limit on distinct measurement names in force."""

def enable_nvtx_counters(sample_hz: float = 0.0) -> None:
    """Publishes the CPU % and storage MB/s of tracked names as NVTX counters at the end of each
    tracked interval; with ``sample_hz`` > 0 also the process tree's, that many times a second."""

def disable_nvtx_counters() -> None:
    """Stops publishing NVTX counters."""
