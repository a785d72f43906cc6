"""Three loaders for the six-camera NuScenes batch, one contract (the training study imports it)::

    from loaders import make_loader
    loader = make_loader("reference", dataroot, batch_size=8, num_workers=8)
    for epoch in range(2):
        for batch in loader:     # len(loader) batches per epoch
            batch["images"]      # float32 [B, 6, 3, 372, 1024], normalised (ImageNet mean/std)
            batch["intrinsics"]  # float32 [B, 6, 3, 3], adjusted to the augmented images
            batch["index"]       # int64 [B], indices into NuScenesReader(dataroot).samples

- ``reference``: ``torch.utils.data.Dataset`` + ``DataLoader`` with ``num_workers`` processes,
  Pillow decode and augmentation in the workers (what StreamPETR's mmdet pipeline does).
- ``dali``: an NVIDIA DALI pipeline: a parallel external source (``num_workers`` Python workers,
  the seed used 1) reads the files and draws the augmentation; DALI decodes (``mixed`` = nvJPEG on
  the GPU, ``cpu`` without one), resizes, crops, flips and normalises with ``num_threads`` threads.
- ``gpu``: DataLoader workers read the JPEG bytes; the main process decodes them with
  ``torchvision.io.decode_jpeg`` on the GPU (nvJPEG) and augments with torch ops (on the CPU when
  there is no GPU). On CUDA it first waits for the stream's queued work ("decode wait"): without
  that wait nvJPEG can overwrite memory that queued kernels still read.

Each loader's decode and augment steps are module functions (``pillow_decode``/``pillow_augment``,
``torch_decode``/``torch_augment``, ``dali_decode``/``dali_augment``), so that ``equivalence.py``
measures the pixels of the same code.

Batches (all three tensors) are on ``device`` when given, else where the loader produces the
images (CPU for reference, the GPU for dali-mixed and gpu). Augmentation is a function of (seed, epoch, sample), identical
in every loader (``common.augmentation``). ``loader.last_stats`` holds what the worker processes
reported for the last batch (pids, their CPU clocks, seconds per stage), where a loader has such
workers.
"""

import time

import numpy as np
import torch

import common
from common import FINAL_H, FINAL_W, MEAN, STD, Clock
from reader import NuScenesReader

try:
    from laptime import Stopwatch as _Stopwatch

    _stopwatch = _Stopwatch()
except ImportError:  # the loaders work without laptime; they just measure nothing
    _stopwatch = None

KINDS = ("reference", "dali", "gpu")


def _start(name):
    if _stopwatch is not None:
        _stopwatch.start_meas(name)


def _end(name):
    if _stopwatch is not None:
        _stopwatch.end_meas(name)


def _label_worker(worker_id):
    """DataLoader's worker_init_fn: the worker's figures in the main process's report carry
    "worker <id>" instead of its pid (laptime merges them there with no other code)."""
    if _stopwatch is not None:
        _stopwatch.set_worker_label(f"worker {worker_id}")


def make_loader(kind, dataroot, *, version="v1.0-mini", batch_size=8, num_workers=8, augment=True,
                seed=0, device=None, rank=0, world_size=1, replicate_dataset_per_gpu=False,
                drop_last=True, num_threads=4, shuffle=True, decode_wait=True):
    """A loader of ``kind`` (``reference``, ``dali`` or ``gpu``) over the NuScenes samples under
    ``dataroot``; iterable any number of times (one epoch each), ``len()`` = batches per epoch.
    ``num_threads``: DALI's operator threads (the seed's 4). ``shuffle``: a new sample order per
    epoch (seeded), else the reader's order. ``decode_wait`` (``gpu`` on CUDA): wait for the
    stream's queued work before each nvJPEG decode (``TorchLoader._decode_and_augment`` says why);
    False only to reproduce what happens without it."""
    if kind not in KINDS:
        raise ValueError(f"make_loader: kind {kind!r} is not one of {KINDS}")
    reader = NuScenesReader(dataroot, version)
    if len(reader) == 0:
        raise ValueError(f"make_loader: no sample with six cameras under {dataroot}")
    settings = dict(batch_size=batch_size, num_workers=num_workers, augment=augment, seed=seed,
                    device=None if device is None else torch.device(device), rank=rank,
                    world_size=world_size, replicate=replicate_dataset_per_gpu,
                    drop_last=drop_last, shuffle=shuffle)
    if kind == "reference":
        return TorchLoader(reader, decode_in_workers=True, **settings)
    if kind == "gpu":
        return TorchLoader(reader, decode_in_workers=False, decode_wait=decode_wait, **settings)
    return DaliLoader(reader, num_threads=num_threads, **settings)


# ---------------------------------------------------------------------------------------------
# The decode and augment steps of each loader, as functions: the loaders below call them, and so
# does equivalence.py, which compares what they produce.


def pillow_decode(path):
    """The reference loader's decode: one JPEG file to an RGB ``PIL.Image`` (Pillow, libjpeg)."""
    from PIL import Image

    with Image.open(path) as f:
        return f.convert("RGB")  # convert() forces the decode


def pillow_augment(img, aug, mean, inv_std):
    """The reference loader's augmentation of one decoded image: resize (bilinear), crop, flip,
    then ``(x - mean) * inv_std`` in float32 -> float32 [3, FINAL_H, FINAL_W]."""
    from PIL import Image

    new_w, new_h, crop_x, crop_y, flip = aug
    img = img.resize((new_w, new_h), Image.BILINEAR)
    img = img.crop((crop_x, crop_y, crop_x + FINAL_W, crop_y + FINAL_H))
    if flip:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    hwc = np.asarray(img, dtype=np.float32)
    return ((hwc - mean) * inv_std).transpose(2, 0, 1)


def torch_decode(jpegs, device):
    """The gpu loader's decode: a list of encoded JPEGs (uint8 tensors) to a list of uint8
    [3, H, W] tensors on ``device``, in one ``torchvision.io.decode_jpeg`` call (nvJPEG on CUDA)."""
    from torchvision.io import ImageReadMode, decode_jpeg

    return decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device)


def torch_augment(images, augs, mean, inv_std):
    """The gpu loader's augmentation: ``images`` (len(augs) samples x cams, uint8 [3, H, W], in
    sample order) resized (bilinear, antialiased), cropped, flipped and normalised with torch ops
    where they are -> float32 [len(augs), cams, 3, FINAL_H, FINAL_W]."""
    import torch.nn.functional as F

    cams = len(images) // len(augs)
    out = torch.empty((len(augs), cams, 3, FINAL_H, FINAL_W), dtype=torch.float32,
                      device=images[0].device)
    for b, (new_w, new_h, crop_x, crop_y, flip) in enumerate(augs):
        x = torch.stack(images[b * cams:(b + 1) * cams]).float()
        x = F.interpolate(x, size=(new_h, new_w), mode="bilinear", align_corners=False,
                          antialias=True)
        x = x[:, :, crop_y:crop_y + FINAL_H, crop_x:crop_x + FINAL_W]
        if flip:
            x = x.flip(-1)
        out[b] = (x - mean) * inv_std
    return out


def dali_decode(jpeg, decoder):
    """The dali loader's decode, a node of a DALI graph: ``decoder`` "mixed" (nvJPEG, GPU) or
    "cpu" -> HWC uint8 RGB."""
    from nvidia.dali import fn, types

    return fn.decoders.image(jpeg, device=decoder, output_type=types.RGB)


def dali_augment(img, new_w, new_h, crop_yx, flip):
    """The dali loader's augmentation, nodes of a DALI graph (per-sample arguments from the
    external source): resize (linear, antialiased), slice, mirror and normalise -> float CHW."""
    from nvidia.dali import fn, types

    img = fn.resize(img, resize_x=new_w, resize_y=new_h, interp_type=types.INTERP_LINEAR,
                    antialias=True)
    img = fn.slice(img, start=crop_yx, shape=[FINAL_H, FINAL_W], axis_names="HW")
    return fn.crop_mirror_normalize(img, mirror=flip, mean=list(MEAN), std=list(STD),
                                    dtype=types.FLOAT, output_layout="CHW")


# ---------------------------------------------------------------------------------------------
# reference and gpu: a Dataset + DataLoader


class EpochSampler(torch.utils.data.Sampler):
    """Yields (epoch, sample index) for this rank's share of each epoch, so that a worker can
    draw the sample's augmentation without shared state."""

    def __init__(self, n, seed, batch_size, rank, world_size, replicate, drop_last, shuffle):
        self.args = (n, seed, batch_size, rank, world_size, replicate, drop_last, shuffle)
        self.epoch = 0

    def indices(self):
        n, seed, batch_size, rank, world_size, replicate, drop_last, shuffle = self.args
        return common.epoch_indices(n, seed, self.epoch, batch_size, rank, world_size, replicate,
                                    drop_last, shuffle)

    def __iter__(self):
        return iter([(self.epoch, int(i)) for i in self.indices()])

    def __len__(self):
        return len(self.indices())


class CameraDataset(torch.utils.data.Dataset):
    """One item per (epoch, sample): the six images decoded and augmented with Pillow
    (``decode=True``, the reference) or their encoded bytes (``decode=False``, for the gpu loader)."""

    def __init__(self, reader, seed, augment, decode):
        self.samples = reader.samples
        self.seed = seed
        self.augment = augment
        self.decode = decode
        self.mean = np.array(MEAN, np.float32)
        self.inv_std = 1.0 / np.array(STD, np.float32)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, key):
        epoch, index = key
        sample = self.samples[index]
        width, height = sample.cams[0]["width"], sample.cams[0]["height"]
        aug = common.augmentation(self.seed, epoch, index, self.augment, width, height)
        intrinsics = common.adjusted_intrinsics([c["intrinsic"] for c in sample.cams], aug)
        clock = Clock()
        item = {"intrinsics": torch.from_numpy(intrinsics), "index": index, "aug": aug,
                "clock": clock}
        if self.decode:
            item["images"] = torch.from_numpy(self._decode_and_augment(sample, aug, clock))
        else:
            t0 = time.perf_counter()
            _start("read")
            item["jpegs"] = [torch.from_numpy(np.fromfile(c["file"], dtype=np.uint8))
                             for c in sample.cams]
            _end("read")
            clock.add("read_s", time.perf_counter() - t0)
        return item

    def _decode_and_augment(self, sample, aug, clock):
        out = np.empty((len(sample.cams), 3, FINAL_H, FINAL_W), np.float32)
        for k, cam in enumerate(sample.cams):
            t0 = time.perf_counter()
            _start("decode")
            img = pillow_decode(cam["file"])
            _end("decode")
            t1 = time.perf_counter()
            _start("augment")
            out[k] = pillow_augment(img, aug, self.mean, self.inv_std)
            _end("augment")
            clock.add("decode_s", t1 - t0)
            clock.add("augment_s", time.perf_counter() - t1)
        return out


def collate(items):
    """Stacks a batch (in the worker, like the default collate) and attaches the workers' report."""
    t0 = time.perf_counter()
    _start("collate")
    batch = {"intrinsics": torch.stack([it["intrinsics"] for it in items]),
             "index": torch.tensor([it["index"] for it in items], dtype=torch.int64),
             "aug": [it["aug"] for it in items]}
    if "images" in items[0]:
        batch["images"] = torch.stack([it["images"] for it in items])
    else:
        batch["jpegs"] = [j for it in items for j in it["jpegs"]]
    _end("collate")
    stages = {}
    for it in items:
        for k, v in it["clock"].stages.items():
            stages[k] = stages.get(k, 0.0) + v
    clock = Clock()
    clock.stages = stages
    clock.add("collate_s", time.perf_counter() - t0)
    batch["_stats"] = clock.report()
    return batch


class TorchLoader:
    """``reference`` (decode_in_workers) and ``gpu`` (workers read, the main process decodes)."""

    def __init__(self, reader, *, decode_in_workers, batch_size, num_workers, augment, seed, device,
                 rank, world_size, replicate, drop_last, shuffle, decode_wait=True):
        self.kind = "reference" if decode_in_workers else "gpu"
        self.device = device
        self.decode_wait = decode_wait
        if not decode_in_workers:
            self.decode_device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.sampler = EpochSampler(len(reader), seed, batch_size, rank, world_size, replicate,
                                    drop_last, shuffle)
        self.dataset = CameraDataset(reader, seed, augment, decode_in_workers)
        pin = device is not None and device.type == "cuda" and decode_in_workers
        self.loader = torch.utils.data.DataLoader(
            self.dataset, batch_size=batch_size, sampler=self.sampler, num_workers=num_workers,
            collate_fn=collate, drop_last=drop_last, pin_memory=pin,
            persistent_workers=num_workers > 0, worker_init_fn=_label_worker)
        self.last_stats = None
        self._mean = self._inv_std = None

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        try:
            for batch in self.loader:
                self.last_stats = batch.pop("_stats")
                aug = batch.pop("aug")
                if "jpegs" in batch:
                    batch["images"] = self._decode_and_augment(batch.pop("jpegs"), aug)
                # everything where the images are (the GPU for `gpu`), or on `device`
                target = self.device or batch["images"].device
                yield {k: v.to(target, non_blocking=True) for k, v in batch.items()}
        finally:
            self.sampler.epoch += 1

    def _decode_and_augment(self, jpegs, augs):
        dev = self.decode_device
        if self._mean is None:
            self._mean = torch.tensor(MEAN, device=dev).view(1, 3, 1, 1)
            self._inv_std = 1.0 / torch.tensor(STD, device=dev).view(1, 3, 1, 1)
        if dev.type == "cuda" and self.decode_wait:
            # torchvision's CUDA decode takes its output blocks from PyTorch's caching allocator,
            # which hands back at once a block freed on this stream while queued kernels (the
            # previous step's backward) may still read it; nvJPEG's hardware decoder writes them
            # without waiting for this stream. Draining the stream first closes that window.
            _start("decode wait")
            torch.cuda.current_stream(dev).synchronize()
            _end("decode wait")
        _start("decode")
        images = torch_decode(jpegs, dev)
        _end("decode")
        _start("augment")
        out = torch_augment(images, augs, self._mean, self._inv_std)
        _end("augment")
        return out


# ---------------------------------------------------------------------------------------------
# dali


class DaliLoader:
    def __init__(self, reader, *, batch_size, num_workers, augment, seed, device, rank, world_size,
                 replicate, drop_last, shuffle, num_threads):
        from nvidia.dali import fn, pipeline_def
        from nvidia.dali.plugin.pytorch import DALIGenericIterator

        if not drop_last:
            raise ValueError("make_loader('dali'): drop_last=False is not supported (a DALI "
                             "pipeline has one batch size); the last partial batch is dropped")
        on_gpu = torch.cuda.is_available() and (device is None or device.type == "cuda")
        device_id = None
        if on_gpu:
            device_id = device.index if device is not None and device.index is not None \
                else torch.cuda.current_device()
        self.device = device
        self.decoder = "mixed" if on_gpu else "cpu"
        files = [[c["file"] for c in s.cams] for s in reader.samples]
        intrinsics = np.stack([[c["intrinsic"] for c in s.cams] for s in reader.samples])
        sizes = [(s.cams[0]["width"], s.cams[0]["height"]) for s in reader.samples]
        source = common.DaliSource(files, intrinsics, sizes, seed, augment, batch_size, rank,
                                   world_size, replicate, shuffle)
        self.batches = len(source.order(0)) // batch_size
        cams = len(files[0])
        # fork is cheaper, but a forked child of a process with a CUDA context is unusable.
        start_method = "spawn" if torch.cuda.is_initialized() else "fork"

        @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id,
                      py_num_workers=max(1, num_workers), py_start_method=start_method,
                      seed=seed)
        def pipeline():
            *jpegs, new_w, new_h, crop_yx, flip, intr, index = fn.external_source(
                source=source, num_outputs=cams + 6, batch=False, parallel=True)
            out = []
            for jpeg in jpegs:
                out.append(dali_augment(dali_decode(jpeg, self.decoder), new_w, new_h, crop_yx,
                                        flip))
            return fn.stack(*out), intr, index

        self.pipe = pipeline()
        self.pipe.build()
        self.iterator = DALIGenericIterator(self.pipe, ["images", "intrinsics", "index"],
                                            auto_reset=True)
        self.last_stats = None

    def __len__(self):
        return self.batches

    def __iter__(self):
        for out in self.iterator:
            batch = out[0]
            batch["index"] = batch["index"].reshape(-1)
            target = self.device or batch["images"].device
            yield {k: v.to(target, non_blocking=True) for k, v in batch.items()}
