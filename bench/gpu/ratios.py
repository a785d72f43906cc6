#!/usr/bin/env python3
"""Prints laptime_gpu_bench's ratios with their goals (GPU timing and do_cuda_sync against raw
CUDA calls: docs/performance.md, goals 7a-7d) from its JSON output
(--benchmark_format=json with repetitions: the medians are used). Exits 1 when a goal is missed.

    laptime_gpu_bench --benchmark_repetitions=5 --benchmark_out=gpu.json --benchmark_out_format=json
    bench/gpu/ratios.py gpu.json
    bench/gpu/ratios.py --not-run "no GPU visible"    each goal's row, saying why it did not run
"""
import json
import sys

# (key, what, measured row, baseline row, goal ratio)
GOALS = [
    ("timer", "GPU event-timed interval (GpuEventTimer start+stop+poll) / two cudaEventRecord",
     "BM_GpuTimerInterval", "BM_RawEventRecordPair", 1.2),
    ("timer_vs_timed", "the same / two cudaEventRecord + cudaEventElapsedTime by hand",
     "BM_GpuTimerInterval", "BM_RawEventTimedPair", 1.2),
    ("gpu_timing", "Stopwatch pair, enable_gpu_timing / the pair + two cudaEventRecord by hand",
     "BM_StopwatchPair_GpuTiming", "BM_StopwatchPair_RawEvents", 1.2),
    ("do_cuda_sync", "Stopwatch pair, do_cuda_sync / the pair + two cudaDeviceSynchronize by hand",
     "BM_StopwatchPair_CudaSync", "BM_StopwatchPair_TwoSyncs", 1.05),
]


def medians(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"]] = b["real_time"]  # ns (the default time unit)
        elif "aggregate_name" not in b and b["name"] not in out:
            out.setdefault(b["name"], b["real_time"])
    return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--not-run":
        for _, what, _, _, goal in GOALS:
            print(f"{what:<78} goal <={goal}: not run ({sys.argv[2]})")
        return 0
    med = medians(sys.argv[1])
    missed = 0
    summary = []
    print(f"{'ratio':<78} {'ns':>9} {'base ns':>9} {'ratio':>6} {'goal':>6}")
    for key, what, row, base, goal in GOALS:
        if row not in med or base not in med:
            print(f"{what:<78} missing rows")
            missed += 1
            continue
        r = med[row] / med[base]
        ok = r <= goal
        missed += not ok
        summary.append(f"{key} x{r:.2f} (goal {goal})")
        print(f"{what:<78} {med[row]:9.0f} {med[base]:9.0f} {r:6.2f} {'<=' + str(goal):>6} "
              f"{'PASS' if ok else 'MISS'}")
    print("SUMMARY " + ", ".join(summary))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
