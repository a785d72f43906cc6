"""Whether the CUDA driver library loads, and which variant of a function it hands out.

Part of scripts/gpu-check.sh's environment log. Prints whether libcuda.so.1 loads, what cuInit and
cuDriverGetVersion return, and for the functions laptime looks up which variant cuGetProcAddress_v2
gives per requested version: laptime asks per symbol for the variant it declares
(cuCtxSynchronize at 2000, cuEventElapsedTime at 12080).

    python3 scripts/gpu-check/driver_probe.py
"""

import ctypes

SYNC = ("cuCtxSynchronize", "cuCtxSynchronize_v2")
ELAPSED = ("cuEventElapsedTime", "cuEventElapsedTime_v2")


def variant(lib, symbol, version, names):
    """cuGetProcAddress_v2's return code, status and the name among NAMES of what it returned."""
    fn, status = ctypes.c_void_p(), ctypes.c_int(-1)
    rc = lib.cuGetProcAddress_v2(symbol.encode(), ctypes.byref(fn), version, 1,
                                 ctypes.byref(status))
    which = [n for n in names if hasattr(lib, n)
             and ctypes.cast(getattr(lib, n), ctypes.c_void_p).value == fn.value]
    return rc, status.value, which or fn.value


def main():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print("libcuda.so.1 does not load:", e)
        return
    version = ctypes.c_int(0)
    print("libcuda.so.1 loads; cuInit:", lib.cuInit(0), "cuDriverGetVersion:",
          lib.cuDriverGetVersion(ctypes.byref(version)), version.value)
    for symbol, asked, names in (("cuCtxSynchronize", 2000, SYNC),
                                 ("cuCtxSynchronize", version.value, SYNC),
                                 ("cuEventElapsedTime", 12080, ELAPSED)):
        rc, status, which = variant(lib, symbol, asked, names)
        print(f"cuGetProcAddress_v2({symbol}, {asked}): rc {rc} status {status} ->", which)


if __name__ == "__main__":
    main()
