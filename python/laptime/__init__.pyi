from ._laptime import (
    NVTXRangeWrapper as NVTXRangeWrapper,
    Stopwatch as Stopwatch,
    UsageError as UsageError,
    build_info as build_info,
    configure_from_env as configure_from_env,
    cuda_status as cuda_status,
    error_policy as error_policy,
    max_names as max_names,
    set_error_policy as set_error_policy,
    set_max_names as set_max_names,
)

from ._laptime import disable_nvtx_counters as disable_nvtx_counters
from ._laptime import enable_nvtx_counters as enable_nvtx_counters

__version__: str
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
    "disable_nvtx_counters",
    "enable_nvtx_counters",
]
