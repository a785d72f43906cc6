"""The data-loading-only evaluation (the seed's ``DataPipelineRuntimeEvalRunner``): build a
loader once (a one-time measurement, "pipeline creation"), fetch ``--batches`` batches of which
the first ``--warmup`` are warm-up, time each fetch ("data fetch") and each iteration ("data
loading loop", CPU-tracked: the whole process tree, loader workers included, and read MB/s) with
laptime's Stopwatch, print the seed's "Average runtime" line and laptime's report, and write
laptime's JSON::

    python examples/nuscenes/runner.py --loader reference --dataroot DIR --json ref.json

A second file, ``<json>.loader.json``, keeps the run's settings, the worker processes' own
reports (seconds per stage, summed over the measured batches) and the CPU seconds that
/proc/<pid>/stat shows for the main process and the workers over the measured iterations (a
check on laptime's figure that does not go through laptime).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LOOP = "data loading loop"
FETCH = "data fetch"
CREATE = "pipeline creation"


def proc_cpu_seconds(pid):
    """utime + stime of ``pid`` from /proc/<pid>/stat (None if it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _child_pids():
    """Every live descendant of this process (loader workers, DALI's Python workers)."""
    children, pids = {}, []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo = [os.getpid()]
    while todo:
        for c in children.get(todo.pop(), []):
            pids.append(c)
            todo.append(c)
    return pids


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loader", choices=("reference", "dali", "gpu"), required=True)
    p.add_argument("--dataroot", required=True)
    p.add_argument("--version", default="v1.0-mini")
    p.add_argument("--batches", type=int, default=20, help="batches fetched (the seed: 1000)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up batches among them (the seed: 300)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2,
                   help="DataLoader workers (reference, gpu) or DALI Python workers (the seed: 8 / 1)")
    p.add_argument("--dali-threads", type=int, default=4, help="DALI operator threads (the seed: 4)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where batches end up (default: where the loader produces them)")
    p.add_argument("--no-augment", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpu-timing", action="store_true",
                   help="also record GPU time per name with CUDA events (laptime's enable_gpu_timing)")
    p.add_argument("--json", required=True, help="laptime's JSON results go here")
    return p.parse_args(argv)


def run(args):
    import torch

    import laptime
    from laptime import Stopwatch
    from loaders import make_loader

    cuda = args.device == "cuda" or (args.device is None and args.loader != "reference"
                                     and torch.cuda.is_available())
    if cuda:
        torch.cuda.init()
    # LAPTIME_* variables the user set (LAPTIME_RECORD for `laptime plot/trace/html`, a warm-up)
    # win over the arguments below (docs/configuration.md); with none set this does nothing.
    laptime.configure_from_env()
    stopwatch = Stopwatch()
    # do_cuda_sync on a GPU: a batch produced on the GPU is only there once its kernels ran; the
    # seed's runner synchronised the same way (torch.cuda.synchronize() around each timestamp).
    stopwatch.enable(args.warmup, None, cuda)
    if cuda and args.gpu_timing:
        stopwatch.enable_gpu_timing(torch.cuda.current_stream())
    stopwatch.set_cpu_usage_meas_name(LOOP)

    stopwatch.start_one_time_measurement(CREATE)
    loader = make_loader(args.loader, args.dataroot, version=args.version,
                         batch_size=args.batch_size, num_workers=args.workers,
                         augment=not args.no_augment, seed=args.seed, device=args.device,
                         num_threads=args.dali_threads)
    stopwatch.end_one_time_measurement(CREATE)

    stages, epochs, cpu_check = _fetch_batches(args, loader, stopwatch)
    results = stopwatch.results()
    _print_summary(args, loader, results, stages, epochs)
    stopwatch.print_eval_times()
    _print_worker_parts(args.loader, results)
    _write_results(args, stopwatch, loader, epochs, stages, cpu_check)
    return 0


def _fetch_batches(args, loader, stopwatch):
    """Fetches ``args.batches`` batches (a new epoch whenever the loader runs out), timing each
    fetch and each iteration. Returns the workers' reported seconds per stage summed over the
    measured batches, the number of epochs started, and the /proc CPU check over the measured
    iterations (None when there were none)."""
    stages, cpu_start, wall_start, epochs = {}, None, None, 1
    it = iter(loader)
    for i in range(args.batches):
        if i == args.warmup:  # first measured iteration: the /proc cross-check starts here
            cpu_start = _proc_cpu_now([os.getpid()] + _child_pids())
            wall_start = time.perf_counter()
        stopwatch.start_meas(LOOP)
        stopwatch.start_meas(FETCH)
        try:
            batch = next(it)
        except StopIteration:  # a new epoch, as the seed's runner iterated its loader
            it = iter(loader)
            epochs += 1
            batch = next(it)
        stopwatch.end_meas(FETCH)
        stopwatch.end_meas(LOOP)
        stopwatch.finish_iter()
        if i >= args.warmup and getattr(loader, "last_stats", None):
            for k, v in loader.last_stats.items():
                if k.endswith("_s"):
                    stages[k] = stages.get(k, 0.0) + v
        del batch
    cpu_check = _proc_cpu_check(cpu_start, wall_start) if cpu_start is not None else None
    return stages, epochs, cpu_check


def _proc_cpu_now(pids):
    """CPU seconds so far of each of ``pids`` (None for one gone or unreadable)."""
    return {pid: proc_cpu_seconds(pid) for pid in pids}


def _proc_cpu_check(cpu_start, wall_start):
    """Wall seconds since ``wall_start`` and the CPU seconds the main process and the workers
    (the pids in ``cpu_start`` that are still readable) used since ``cpu_start``."""
    wall = time.perf_counter() - wall_start
    cpu_end = _proc_cpu_now(cpu_start)
    per_pid = {pid: cpu_end[pid] - cpu_start[pid] for pid in cpu_start
               if cpu_start[pid] is not None and cpu_end[pid] is not None}
    return {"wall_s": wall, "main_cpu_s": per_pid.pop(os.getpid(), None),
            "workers_cpu_s": sum(per_pid.values()), "workers": len(per_pid)}


def _print_summary(args, loader, results, stages, epochs):
    """The seed's "Average runtime" line, the epochs, and the workers' stages per batch."""
    loop = next(m for m in results["measurements"] if m["name"] == LOOP)
    measured = results["iterations_measured"]
    print(f"{args.loader}: Average runtime: {loop['mean_per_iter_s']:.4f} s/batch "
          f"({loop['mean_per_iter_s'] * 1e3:.1f} ms/batch) over {measured} batches after "
          f"{args.warmup} warm-up, batch {args.batch_size}, {args.workers} workers"
          + (f", {args.dali_threads} DALI threads, decoder {loader.decoder}" if args.loader == "dali" else ""))
    print(f"{args.loader}: {len(loader)} batches per epoch, {epochs} epochs started in the run")
    if stages and measured:
        per_batch = ", ".join(f"{k[:-2]} {v / measured * 1e3:.1f} ms" for k, v in stages.items())
        print(f"{args.loader}: worker processes report per batch (wall time in the workers, summed "
              f"over a batch's samples): {per_batch}")


def _print_worker_parts(kind, results):
    """laptime merges what the loader's worker processes measured (decode, augment, collate) into
    its report; the JSON keeps each worker's part: printed here per worker."""
    for m in results["measurements"]:
        for w in sorted(m.get("workers", []), key=lambda w: w["label"]):
            median = w["median_s"] * 1e3 if w["median_s"] is not None else float("nan")
            print(f"{kind}: {m['name']:<8} {w['label']:<10} {w['count']:>6} intervals, "
                  f"median {median:.2f} ms, total {w['total_s']:.3f} s"
                  + ("" if w["alive"] else " (ended)"))


def _write_results(args, stopwatch, loader, epochs, stages, cpu_check):
    """laptime's JSON at ``args.json`` and the run's settings and checks beside it, in
    ``<json>.loader.json``."""
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    _write(args.json, stopwatch.to_json())
    side = {"loader": args.loader, "settings": vars(args), "epochs": epochs,
            "batches_per_epoch": len(loader), "cpu_count": os.cpu_count(),
            "worker_stages_s": stages, "proc_cpu_check": cpu_check,
            "decoder": getattr(loader, "decoder", None)}
    _write(args.json[:-5] + ".loader.json" if args.json.endswith(".json") else args.json + ".loader.json",
           json.dumps(side, indent=1))


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(run(parse_args()))
