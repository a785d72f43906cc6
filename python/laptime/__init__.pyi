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
]
