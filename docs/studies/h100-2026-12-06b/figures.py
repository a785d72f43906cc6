"""The figures the study pages derive from this folder's raw files (training.md's per-host table
and speedups, gpu-sweep.md's NaN-check batches, performance.md's GPU rows before and after).
From the repository root: python3 docs/studies/h100-2026-12-06b/figures.py"""
import csv
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "examples" / "nuscenes"))
from sweep import figures  # noqa: E402  (a cell's figures, as sweep.py's table reads them)

HOSTS = {"A": ROOT / "docs/studies/h100-2026-12-05/cells", "B": HERE / "sweep/cells"}


def cell(host, backbone, loader):
    runs = sorted(HOSTS[host].glob(f"{backbone}-{loader}-run*"))
    return [figures(r / "rank0.json") for r in runs]


def sweep_per_host():
    print("backbone | host | dl8 ms/iter | data wait ms | verdict | DALI ms/iter | nvJPEG ms/iter"
          " | DALI speedup | nvJPEG speedup | model: max(P, C) / max(P_dali, C), P: resnet18's")
    for host in HOSTS:
        period = cell(host, "resnet18-x0.5", "dl8")[0]["ms_mean"]
        period_dali = cell(host, "resnet18-x0.5", "dali")[0]["ms_mean"]
        for backbone in ("resnet18-x0.5", "resnet50-x1", "resnet101-x1"):
            dl8, dali = cell(host, backbone, "dl8")[0], cell(host, backbone, "dali")[0]
            gpu = [g["ms_mean"] for g in cell(host, backbone, "gpu")] if host == "B" else []
            busy = dali["gpu_busy_pct"] * dali["ms_mean"] / 100  # C: GPU work per iteration
            gpu_speedup = f"x{dl8['ms_mean'] / statistics.mean(gpu):.2f}" if gpu else "-"
            print(f"{backbone} | {host} | {dl8['ms_mean']:.1f} | {dl8['data_wait_ms']:.1f} | "
                  f"{dl8['verdict']} | {dali['ms_mean']:.1f} | {', '.join(f'{g:.1f}' for g in gpu)}"
                  f" | x{dl8['ms_mean'] / dali['ms_mean']:.2f} | "
                  f"{gpu_speedup} | "
                  f"x{max(period, busy) / max(period_dali, busy):.2f}")


def nancheck_batches():
    def means(name):
        with open(HERE / "nan" / f"{name}.csv", encoding="utf-8") as f:
            return [row["input_mean"] for row in csv.DictReader(f)]
    wait, no_wait = means("wait"), means("no-wait")
    differ = [i for i, (a, b) in enumerate(zip(wait, no_wait)) if a != b]
    print(f"nancheck: input mean differs in {len(differ)} of {len(wait)} iterations, first {differ[:3]}")


def gpu_rows_before_after():
    for build in ("old", "new"):
        r7a, r7c = [], []
        for i in (1, 2, 3):
            data = json.loads((HERE / "gpu-before-after" / f"{build}-{i}.json").read_text())
            m = {b["run_name"]: b["cpu_time"] for b in data["benchmarks"]
                 if b.get("aggregate_name") == "median"}
            r7a.append(m["BM_GpuTimerInterval"] / m["BM_RawEventRecordPair"])
            r7c.append(m["BM_StopwatchPair_GpuTiming"] / m["BM_StopwatchPair_RawEvents"])
        print(f"GPU rows, {build}: 7a {statistics.median(r7a):.2f}x "
              f"({min(r7a):.2f}-{max(r7a):.2f}), 7c {statistics.median(r7c):.2f}x "
              f"({min(r7c):.2f}-{max(r7c):.2f})")


if __name__ == "__main__":
    sweep_per_host()
    nancheck_batches()
    gpu_rows_before_after()
