from ._laptime import (
    NVTXRangeWrapper as NVTXRangeWrapper,
    Stopwatch as Stopwatch,
    UsageError as UsageError,
    configure_from_env as configure_from_env,
    cuda_status as cuda_status,
    error_policy as error_policy,
    set_error_policy as set_error_policy,
)

__version__: str
__all__ = [
    "NVTXRangeWrapper",
    "Stopwatch",
    "UsageError",
    "configure_from_env",
    "cuda_status",
    "error_policy",
    "set_error_policy",
]
