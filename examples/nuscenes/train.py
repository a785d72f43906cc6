"""Data-parallel training on the synthetic NuScenes data, instrumented as in seeds/001.

One process per GPU under ``torchrun`` (NCCL on GPUs, gloo on CPU), a randomly initialised
ResNet-18 over the six camera views with a light head, trained to predict per-category object
counts of each sample from its annotations (``train_hooks.py``). Mixed precision: on CUDA fp16
autocast with ``torch.amp.GradScaler`` loss scaling (the seed's Fp16OptimizerHook); on CPU plain
fp32 by default (``--amp bf16`` for bf16 autocast; no loss scaling is needed for bf16).

The run type comes from ``LAPTIME_PROFILE`` (``laptime.configure_from_env``), no code edits:
training (all off), evaluation (Stopwatch), profiling (Stopwatch + NVTX, profiler capture from the
end of warm-up), debugging (+ NVTX order checks). Every rank measures (``LAPTIME_RANKS=all`` unless
set), and at the end rank 0 prints one cross-rank report (``laptime.distributed.report``).

    LAPTIME_PROFILE=evaluation torchrun --nproc_per_node 2 examples/nuscenes/train.py \\
        --loader reference --iters 1000 --warmup 50 --dataroot build/nuscenes-synth
    # CPU, 2 processes, a few iterations (what the CI test runs):
    LAPTIME_PROFILE=evaluation python -m torch.distributed.run --nproc_per_node 2 \\
        examples/nuscenes/train.py --device cpu --iters 6 --warmup 2 --batch-size 1 --workers 0

Prints, on rank 0: the loss of the first and last iterations, the first iteration whose loss,
gradient norm or input batch was not finite (``step_log.py``; ``--loss-file`` keeps them all), the
Stopwatch report of rank 0, the cross-rank report, and one line ``RESULT loader=... runtime_ms_per_iter=... cpu_percent=...`` that
``train_table.py`` reads (also written as JSON with ``--summary``).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import step_log  # noqa: E402  (numpy and torch only when used)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loader", choices=("reference", "dali", "gpu"), default="reference")
    p.add_argument("--dataroot", default="build/nuscenes-synth",
                   help="NuScenes-layout data; generated with generate.py if missing")
    p.add_argument("--version", default="v1.0-mini")
    p.add_argument("--generate-samples", type=int, default=32,
                   help="samples to generate when --dataroot is missing (default 32)")
    p.add_argument("--iters", type=int, default=1000, help="iterations in all (seed: 1000)")
    p.add_argument("--warmup", type=int, default=50,
                   help="warm-up iterations, not measured (seed: 50); LAPTIME_WARMUP wins")
    p.add_argument("--batch-size", type=int, default=8, help="per GPU / process (seed: 8)")
    p.add_argument("--workers", type=int, default=8, help="loader workers per process")
    p.add_argument("--replicate-dataset-per-gpu", action="store_true",
                   help="every rank samples the whole dataset (seeds/000: NuScenes mini on 8 GPUs)")
    p.add_argument("--no-augment", dest="augment", action="store_false")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--amp", choices=("auto", "fp16", "bf16", "off"), default="auto",
                   help="auto: fp16 + GradScaler on CUDA, off (fp32) on CPU")
    p.add_argument("--image-scale", type=float, default=0.5,
                   help="the model downscales the 1024x372 views by this first (default 0.5)")
    p.add_argument("--backbone", default="resnet18",
                   help="the torchvision model applied to each view, randomly initialised "
                        "(resnet18, resnet50, resnet101, ...; default resnet18)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop once the measured iterations (after warm-up) took this long, or "
                        "at --iters, whichever comes first (a sweep's cells of equal duration)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--grad-clip", type=float, default=None)
    p.add_argument("--results-dir", default=None,
                   help="each rank's JSON as DIR/rank{rank}.json (LAPTIME_OUTPUT wins) and the "
                        "merged one as DIR/merged.json")
    p.add_argument("--summary", default=None, help="rank 0 writes the RESULT figures as JSON here")
    p.add_argument("--loss-file", default=None,
                   help="rank 0 writes one CSV row per iteration here: loss, gradient norm, the "
                        "inputs' min / max / mean (examples/nuscenes/losscurves.py reads it)")
    p.add_argument("--no-step-stats", dest="step_stats", action="store_false",
                   help="record only the loss per iteration, not the gradient norm and the "
                        "batch's min/max/mean (a few reductions per iteration; the sweep's cells "
                        "leave them out to time the loop as before)")
    p.add_argument("--no-decode-wait", dest="decode_wait", action="store_false",
                   help="gpu loader on CUDA: decode without first waiting for the stream's "
                        "queued work (only to reproduce the memory corruption that wait avoids)")
    p.add_argument("--check-loss-falls", action="store_true",
                   help="exit 3 unless the mean loss of the last 10 iterations is below the "
                        "first 10")
    return p.parse_args(argv)


def barrier(dist):
    """``dist.barrier()``, on this rank's GPU with NCCL (torch warns and guesses otherwise)."""
    import torch

    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def ensure_dataset(args, rank, dist):
    """Generates the data on rank 0 when ``--dataroot`` has none; the others wait for it."""
    if not os.path.isdir(os.path.join(args.dataroot, args.version)) and rank == 0:
        generator = os.path.join(HERE, "generate.py")
        if not os.path.exists(generator):  # a generate module found on sys.path instead
            import importlib.util

            spec = importlib.util.find_spec("generate")
            generator = spec.origin if spec else generator
        cmd = [sys.executable, generator, "--out", args.dataroot,
               "--samples", str(args.generate_samples), "--seed", str(args.seed),
               "--version", args.version]
        print("generating the data set:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    if dist is not None:
        barrier(dist)


def start_processes(args):
    """Processes and devices (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK): a namespace with
    rank, world_size, local_rank, use_cuda, device and dist (None without torchrun)."""
    import torch

    ctx = types.SimpleNamespace(rank=int(os.environ.get("RANK", 0)),
                                world_size=int(os.environ.get("WORLD_SIZE", 1)),
                                local_rank=int(os.environ.get("LOCAL_RANK", 0)), dist=None)
    ctx.use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if ctx.use_cuda:
        torch.cuda.set_device(ctx.local_rank)
        ctx.device = torch.device("cuda", ctx.local_rank)
        torch.backends.cudnn.benchmark = True
    else:
        ctx.device = torch.device("cpu")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        import torch.distributed as dist

        dist.init_process_group("nccl" if ctx.use_cuda else "gloo")
        ctx.dist = dist
    return ctx


def configure_laptime(args, rank):
    """Runtime measurement & profiling configuration (seed: train.py). The run type comes from
    LAPTIME_PROFILE; the command line gives what the seed's config gave, and a LAPTIME_* variable
    the user set wins over it. Returns the Stopwatch."""
    os.environ.setdefault("LAPTIME_WARMUP", str(args.warmup))
    if args.results_dir:
        os.makedirs(args.results_dir, exist_ok=True)
        os.environ.setdefault("LAPTIME_OUTPUT", os.path.join(args.results_dir, "rank{rank}.json"))
    from laptime import distributed as lt_dist
    from laptime import NVTXRangeWrapper, Stopwatch

    settings = lt_dist.configure_from_env()  # every rank measures unless LAPTIME_RANKS=0
    stopwatch, nvtx_wrp = Stopwatch(), NVTXRangeWrapper()
    if rank == 0:
        print(f"laptime: LAPTIME_PROFILE={os.environ.get('LAPTIME_PROFILE', '(unset: all off)')}, "
              f"Stopwatch {'on' if stopwatch.is_enabled else 'off'} "
              f"(ranks: {os.environ.get('LAPTIME_RANKS')}), "
              f"NVTX {'on' if nvtx_wrp.is_enabled else 'off'}", flush=True)
        for w in settings.get("warnings", []):
            print("laptime:", w, flush=True)
    return stopwatch


def build(args, ctx):
    """Data, model, optimizer, mixed precision: (runner, precision name)."""
    import torch

    from loaders import make_loader
    from reader import NuScenesReader
    from train_hooks import (Fp16OptimizerHookWithTime, IterBasedRunnerWithTime, MultiViewNet,
                             make_targets)

    reader = NuScenesReader(args.dataroot, version=args.version)
    targets, categories = make_targets(reader.samples)
    loader = make_loader(args.loader, args.dataroot, version=args.version,
                         batch_size=args.batch_size, num_workers=args.workers,
                         augment=args.augment, seed=args.seed,
                         device=ctx.device if ctx.use_cuda else None, rank=ctx.rank,
                         world_size=ctx.world_size,
                         replicate_dataset_per_gpu=args.replicate_dataset_per_gpu, drop_last=True,
                         decode_wait=args.decode_wait)
    if len(loader) == 0:
        raise SystemExit(f"train.py: the loader has no batch of {args.batch_size} for rank "
                         f"{ctx.rank} ({len(reader.samples)} samples, world size "
                         f"{ctx.world_size}); generate more samples or use "
                         "--replicate-dataset-per-gpu")
    torch.manual_seed(args.seed)
    amp = args.amp if args.amp != "auto" else ("fp16" if ctx.use_cuda else "off")
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "off": None}[amp]
    model = MultiViewNet(len(categories), image_scale=args.image_scale,
                         backbone=args.backbone).to(ctx.device)
    if ctx.use_cuda:
        model = model.to(memory_format=torch.channels_last)
    if ctx.dist is not None:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[ctx.local_rank] if ctx.use_cuda else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(ctx.device.type, enabled=amp == "fp16")
    hook = Fp16OptimizerHookWithTime(scaler, grad_clip=args.grad_clip)
    runner = IterBasedRunnerWithTime(model, optimizer, loader, targets.to(ctx.device), ctx.device,
                                     max_iters=args.iters, warmup=args.warmup, hooks=[hook],
                                     amp_dtype=amp_dtype, rank=ctx.rank,
                                     max_seconds=args.max_seconds, step_stats=args.step_stats)
    if ctx.rank == 0:
        print(f"train.py: loader {args.loader}, backbone {args.backbone} at image scale "
              f"{args.image_scale}, world size {ctx.world_size}, device {ctx.device}, "
              f"precision {amp}{' + GradScaler' if amp == 'fp16' else ''}, batch {args.batch_size} "
              f"per process, {len(loader)} batches per epoch, {len(categories)} categories, "
              f"{args.iters} iterations ({args.warmup} warm-up)", flush=True)
    return runner, amp


def main(argv=None):
    args = parse_args(argv)

    import torch

    ctx = start_processes(args)
    stopwatch = configure_laptime(args, ctx.rank)
    ensure_dataset(args, ctx.rank, ctx.dist)
    runner, amp = build(args, ctx)

    # ===== Train =====
    t0 = time.perf_counter()
    runner.run()
    if ctx.use_cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    steps = step_log.StepLog.of(runner)  # read once, after training: no sync in the loop
    k = min(10, max(1, len(steps.loss) // 2))
    first, last = steps.loss[:k].mean().item(), steps.loss[-k:].mean().item()

    # ===== Stopwatch: print eval times (rank 0's own), then the cross-rank report =====
    if ctx.rank == 0:
        print(f"loss: first iteration {steps.loss[0].item():.4f}, last iteration "
              f"{steps.loss[-1].item():.4f}; mean of the first {k} {first:.4f}, of the last {k} "
              f"{last:.4f} ({'falls' if last < first else 'DOES NOT FALL'})", flush=True)
        print(steps.nonfinite_text(), flush=True)
        if args.loss_file:
            steps.write(args.loss_file, args.warmup)
        if stopwatch.is_enabled:
            stopwatch.print_eval_times()
    from laptime import distributed as lt_dist

    merged = lt_dist.report(
        json_path=os.path.join(args.results_dir, "merged.json") if args.results_dir else None)

    if ctx.rank == 0:
        summary = summarize(merged, args, ctx.world_size, amp, first, last, wall)
        summary["first_nonfinite_step"] = steps.first_nonfinite()
        print("RESULT " + " ".join(f"{key}={value}" for key, value in summary.items()), flush=True)
        if args.summary:
            with open(args.summary, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
    if ctx.dist is not None:
        barrier(ctx.dist)
        ctx.dist.destroy_process_group()
    if args.check_loss_falls and not last < first:
        return 3
    return 0


def summarize(merged, args, world_size, amp, loss_first, loss_last, wall_s):
    """The figures of the study's table, from the merged results: runtime per iteration of the
    slowest rank (DDP makes every rank wait for it) and CPU usage of all ranks' process trees
    (each the % of the machine; summed, the job's share of a one-host machine)."""
    by_name = {m["name"]: m for m in merged["measurements"]} if merged else {}

    def ms(name):
        t = by_name.get(name, {}).get("mean_per_iter_s")
        return round(t["max"] * 1e3, 3) if t else None

    cpu = by_name.get("training loop", {}).get("cpu_process_percent")
    iters = sorted({r["iterations_measured"] for r in merged["ranks"]}) if merged else [0]
    return {
        "loader": args.loader,
        "world_size": world_size,
        "precision": amp,
        "batch_size": args.batch_size,
        "workers": args.workers,
        "backbone": args.backbone,
        "image_scale": args.image_scale,
        "iters_measured": iters[0],
        "runtime_ms_per_iter": ms("training loop"),
        "data_fetch_ms_per_iter": ms("data fetch"),
        "training_step_ms_per_iter": ms("Training step"),
        "optimizer_step_ms_per_iter": ms("Optimizer step"),
        "cpu_percent": round(cpu["sum"], 2) if cpu else None,
        "loss_first": round(loss_first, 5),
        "loss_last": round(loss_last, 5),
        "wall_s": round(wall_s, 2),
    }


if __name__ == "__main__":
    sys.exit(main())
