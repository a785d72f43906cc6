"""The training side of the NuScenes study: the seed's instrumented runner and optimizer hook
(seeds/001: ``IterBasedRunnerWithTime``, ``Fp16OptimizerHookWithTime``), a small multi-view model
and the targets the synthetic annotations give. ``train.py`` puts them together.

The measurement names are the seed's, and the C++ counterpart (``examples/ddp_train``) uses the
same ones, so that ``laptime merge`` reports of both read alike:

- "training loop"   one whole iteration (CPU usage tracked: ``set_cpu_usage_meas_name``)
- "IterBasedRunnerWithTime.train"   the runner's train step, as the seed measured it
- "data fetch"      ``next(data_loader)`` and the copy to the device
- "Training step"   forward pass and loss (``model.train_step`` in mmcv)
- "Optimizer step"  the hook: zero_grad, scaled backward (DDP's all-reduce), unscale, gradient
                    norm (recorded), step

NVTX ranges (seen in Nsight Systems when the NVTX wrapper is on): "data fetch", "Training step"
and the seed's "optimizer.after_train_iter".
"""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from laptime import NVTXRangeWrapper, Stopwatch
from step_log import input_stats

stopwatch = Stopwatch()
nvtx_wrp = NVTXRangeWrapper()

NUM_CAMS = 6


# ===== Model =====================================================================================


class MultiViewNet(nn.Module):
    """A randomly initialised torchvision ResNet-18 over each of the six views (downscaled first by
    ``image_scale``), the views' features and camera intrinsics concatenated, and a two-layer head
    that predicts one number per category."""

    def __init__(self, num_outputs, image_scale=0.5, backbone="resnet18"):
        super().__init__()
        import torchvision

        self.image_scale = image_scale
        net = getattr(torchvision.models, backbone)(weights=None)
        feat = net.fc.in_features
        net.fc = nn.Identity()
        self.backbone = net
        self.head = nn.Sequential(
            nn.Linear(NUM_CAMS * (feat + 4), 256),
            nn.ReLU(inplace=True),
            nn.Linear(256, num_outputs),
        )

    def forward(self, images, intrinsics):
        b = images.shape[0]
        x = images.flatten(0, 1)  # [B*6, 3, H, W]
        if self.image_scale != 1.0:
            x = F.interpolate(x, scale_factor=self.image_scale, mode="bilinear",
                              align_corners=False)
        if x.is_cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        f = self.backbone(x).view(b, NUM_CAMS, -1)
        # fx, fy, cx, cy of each camera, in thousands of pixels
        k = intrinsics[:, :, [0, 1, 0, 1], [0, 1, 2, 2]].to(f.dtype) / 1000.0
        return self.head(torch.cat([f, k], dim=2).flatten(1))


def make_targets(samples):
    """Per sample, log(1 + number of objects of each category) from the annotations: a target the
    images and annotations of the synthetic data make learnable (at least its per-category prior;
    accuracy is not the point). Returns (tensor [num_samples, num_categories], category names)."""
    categories = sorted({a["category"] for s in samples for a in s.annotations})
    if not categories:
        categories = ["none"]
    col = {c: i for i, c in enumerate(categories)}
    counts = torch.zeros(len(samples), len(categories))
    for i, s in enumerate(samples):
        for a in s.annotations:
            counts[i, col[a["category"]]] += 1
    return torch.log1p(counts), categories


# ===== Data loader wrapper (mmcv's IterLoader) ===================================================


class IterLoader:
    """Endless ``next()`` over an epoch-iterable loader; a new epoch starts where one ends (that
    restart, worker start-up included, is paid inside "data fetch", as in mmcv)."""

    def __init__(self, loader):
        self.loader = loader
        self.epoch = 0
        self._it = iter(loader)

    def __next__(self):
        try:
            return next(self._it)
        except StopIteration:
            self.epoch += 1
            self._it = iter(self.loader)
            return next(self._it)


# ===== Runner (seed: IterBasedRunnerWithTime) ====================================================


class IterBasedRunnerWithTime:
    """mmcv's IterBasedRunner, cut down to what the study needs, with the seed's Stopwatch calls.

    ``run()`` times each iteration as "training loop" (with CPU usage) and ends it with
    ``finish_iter()``; ``train()`` times "data fetch" and "Training step" and calls the hooks'
    ``after_train_iter`` (the optimizer hook does backward and step). Profiling (``nsys
    --capture-range=cudaProfilerApi``) starts when warm-up ends and stops after the last
    iteration, on rank 0, when the NVTX wrapper is on (``LAPTIME_PROFILE=profiling|debugging``).
    """

    def __init__(self, model, optimizer, data_loader, targets, device, *, max_iters, warmup,
                 hooks=(), amp_dtype=None, rank=0, max_seconds=None, step_stats=True):
        self.model = model
        self.optimizer = optimizer
        self.data_loader = IterLoader(data_loader)
        self.targets = targets
        self.device = device
        self._max_iters = max_iters
        self.warmup = warmup
        self.hooks = list(hooks)
        self.amp_dtype = amp_dtype
        self.rank = rank
        self.max_seconds = max_seconds
        self._measuring_since = None
        self.iter = 0
        # Per iteration, device tensors read once after training (no sync in the loop): the
        # loss, the gradient norm (the optimizer hook adds it) and the images' min, max, mean.
        self.step_stats = step_stats  # False: the loss only
        self.losses = []
        self.grad_norms = []
        self.input_stats = []
        self.outputs = None
        self.meta = {}
        self.profiling = False

    def call_hook(self, name):
        for hook in self.hooks:
            getattr(hook, name)(self)

    def _to_device(self, batch):
        nb = self.device.type == "cuda"
        return {k: v.to(self.device, non_blocking=nb) if torch.is_tensor(v) else v
                for k, v in batch.items()}

    def train(self):
        stopwatch.start_meas("IterBasedRunnerWithTime.train")
        self.model.train()
        nvtx_wrp.range_push("data fetch")
        stopwatch.start_meas("data fetch")
        batch = self._to_device(next(self.data_loader))
        stopwatch.end_meas("data fetch")
        nvtx_wrp.range_pop("data fetch")
        if self.step_stats:
            self.input_stats.append(input_stats(batch["images"]))  # three reductions, queued

        nvtx_wrp.range_push("Training step")
        stopwatch.start_meas("Training step")
        self.outputs = self.train_step(batch)
        stopwatch.end_meas("Training step")
        nvtx_wrp.range_pop("Training step")

        self.call_hook("after_train_iter")  # Fp16OptimizerHookWithTime: backward, step
        self.losses.append(self.outputs["loss"].detach())
        self.iter += 1
        stopwatch.end_meas("IterBasedRunnerWithTime.train")

    def train_step(self, batch):
        """Forward and loss (mmcv: ``model.train_step``), under autocast when mixed precision."""
        target = self.targets[batch["index"].to(self.targets.device)]
        with torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32,
                            enabled=self.amp_dtype is not None):
            pred = self.model(batch["images"], batch["intrinsics"])
        loss = F.mse_loss(pred.float(), target)
        return {"loss": loss, "num_samples": batch["images"].shape[0]}

    def _profiler(self, start):
        # Seed: cudaProfilerStart/Stop on rank 0 if the NVTX range wrapper is enabled.
        if not nvtx_wrp.is_enabled or self.rank != 0:
            return
        if start:
            print("Starting profiling", flush=True)
            nvtx_wrp.profiler_start()
        else:
            nvtx_wrp.profiler_stop()
            print("Stopping profiling", flush=True)
        self.profiling = start

    # Under several processes the ranks agree on the stop every this many iterations (a
    # collective), so that no rank waits in DDP's all-reduce for one that stopped.
    AGREE_EVERY = 10

    def _time_is_up(self):
        """``max_seconds`` after warm-up: whether the measured iterations took that long. With
        torch.distributed initialised, every AGREE_EVERY iterations, the ranks stop together as
        soon as one of them is past the limit."""
        if self.max_seconds is None or self._measuring_since is None:
            return False
        up = time.perf_counter() - self._measuring_since >= self.max_seconds
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return up
        if (self.iter - self.warmup) % self.AGREE_EVERY != 0:
            return False
        flag = torch.tensor([1.0 if up else 0.0],
                            device=self.device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() > 0

    def run(self):
        stopwatch.set_cpu_usage_meas_name("training loop")
        while self.iter < self._max_iters and not self._time_is_up():
            if self.iter == self.warmup:
                self._measuring_since = time.perf_counter()
                self._profiler(True)
            stopwatch.start_meas("training loop")
            self.train()
            stopwatch.end_meas("training loop")
            stopwatch.finish_iter()
        if self.profiling:
            if self.device.type == "cuda":
                torch.cuda.synchronize()  # the last iteration's kernels inside the capture
            self._profiler(False)


def grad_norm(parameters):
    """The total L2 norm of the parameters' gradients, a device tensor (not read: no sync)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if hasattr(torch.nn.utils, "get_total_norm"):
        return torch.nn.utils.get_total_norm(grads)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))


# ===== Optimizer hook (seed: Fp16OptimizerHookWithTime) ==========================================


class Fp16OptimizerHookWithTime:
    """mmcv's Fp16OptimizerHook with the seed's NVTX range and "Optimizer step" measurement:
    loss scaling with ``torch.amp.GradScaler`` (a pass-through where ``enabled`` is False)."""

    def __init__(self, scaler, grad_clip=None):
        self.loss_scaler = scaler
        self.grad_clip = grad_clip

    def after_train_iter(self, runner):
        nvtx_wrp.range_push("optimizer.after_train_iter")
        stopwatch.start_meas("Optimizer step")

        runner.model.zero_grad(set_to_none=True)
        runner.optimizer.zero_grad(set_to_none=True)
        self.loss_scaler.scale(runner.outputs["loss"]).backward()  # DDP all-reduces here
        self.loss_scaler.unscale_(runner.optimizer)
        norm = None
        if self.grad_clip is not None:
            norm = torch.nn.utils.clip_grad_norm_(runner.model.parameters(), self.grad_clip)
        elif runner.step_stats:
            norm = grad_norm(runner.model.parameters())
        if runner.step_stats:
            runner.grad_norms.append(norm.detach())
        self.loss_scaler.step(runner.optimizer)
        self.loss_scaler.update()
        runner.meta.setdefault("fp16", {})["loss_scaler"] = self.loss_scaler.state_dict()

        nvtx_wrp.range_pop("optimizer.after_train_iter")  # checked in LAPTIME_PROFILE=debugging
        stopwatch.end_meas("Optimizer step")
