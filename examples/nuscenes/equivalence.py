"""Do the three loaders feed the same pixels? Per image, the largest absolute difference and the
PSNR against Pillow (the reference loader), at two points of the path:

- ``decode``: the decoded RGB image, before any resize (uint8, 1600x900): Pillow against DALI's
  decoder (``mixed`` = nvJPEG on the GPU, ``cpu``) and torchvision's ``decode_jpeg`` (nvJPEG on
  CUDA, libjpeg on the CPU);
- ``final``: what training sees, the loaders' batches (resized, cropped, flipped, normalised,
  float32 [3, 372, 1024]): ``make_loader("dali"/"gpu")`` against ``make_loader("reference")`` for
  the same samples with the same augmentation.

Both use the loaders' own functions (``loaders.pillow_decode``, ``torch_decode``, ``dali_decode``;
the final stage the loaders themselves), so the figures are those of the training path. The
difference of the final stage is given in normalised units (what the model reads) and in grey
levels (times the channel's std); PSNR is on the 0..255 scale (peak 255), per image, infinite
for identical images. Prints a table and writes JSON::

    python3 examples/nuscenes/equivalence.py --dataroot /tmp/nuscenes-synth --samples 18 \\
        --device cuda --json equivalence.json

``--samples N`` takes the first N samples of the reader's order (6 images each).
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import loaders  # noqa: E402
from common import MEAN, STD  # noqa: E402
from reader import NuScenesReader  # noqa: E402

# Decoders of the decode stage: name -> (library, device)
DECODERS = {"dali-cpu": ("dali", "cpu"), "dali-mixed": ("dali", "mixed"),
            "torchvision-cpu": ("torchvision", "cpu"), "nvjpeg": ("torchvision", "cuda")}
DEFAULT_DECODERS = {"cpu": "dali-cpu,torchvision-cpu",
                    "cuda": "dali-mixed,nvjpeg,dali-cpu,torchvision-cpu"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataroot", required=True)
    p.add_argument("--version", default="v1.0-mini")
    p.add_argument("--samples", type=int, default=18,
                   help="the first N samples, 6 images each (default 18: 108 images)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the GPU decoders (DALI mixed, nvJPEG) and the loaders on the GPU")
    p.add_argument("--decoders", default=None,
                   help="decode stage, of " + ", ".join(DECODERS) + " (default: cpu: "
                        + DEFAULT_DECODERS["cpu"] + "; cuda: " + DEFAULT_DECODERS["cuda"] + ")")
    p.add_argument("--loaders", default="dali,gpu", help="final stage, against the reference")
    p.add_argument("--batch-size", type=int, default=2,
                   help="final stage; --samples must be a multiple of it")
    p.add_argument("--workers", type=int, default=1, help="final stage: the loaders' workers")
    p.add_argument("--no-augment", dest="augment", action="store_false")
    p.add_argument("--json", default=None, help="write the figures, per image, here")
    args = p.parse_args(argv)
    args.decoders = (args.decoders or DEFAULT_DECODERS[args.device]).split(",")
    args.loaders = [x for x in args.loaders.split(",") if x]
    return args


# ===== Metrics ===================================================================================


def image_metrics(a, b):
    """(max |a - b|, PSNR in dB with peak 255) of two arrays of one shape on the 0..255 scale;
    the PSNR is inf for identical images."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} against {b.shape}")
    d = a.astype(np.float64) - b.astype(np.float64)
    mse = float(np.mean(d * d))
    return float(np.abs(d).max()), (math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse))


def summary(rows):
    """Over the images of one pair: the worst and the median of max |d| and of the PSNR."""
    maxes = [r["max_abs"] for r in rows]
    psnrs = [r["psnr_db"] for r in rows]
    out = {"images": len(rows), "max_abs_max": max(maxes),
           "max_abs_median": statistics.median(maxes), "psnr_min_db": min(psnrs),
           "psnr_median_db": statistics.median(psnrs),
           "identical_images": sum(1 for p in psnrs if p == math.inf)}
    if "max_abs_norm" in rows[0]:
        out["max_abs_norm_max"] = max(r["max_abs_norm"] for r in rows)
        out["mean_abs_norm_max"] = max(r["mean_abs_norm"] for r in rows)
    return out


# ===== Decode stage ==============================================================================


def decode_torchvision(files, device, chunk=48):
    """torchvision's decode as the gpu loader calls it (a batch of 48 per call) -> HWC uint8."""
    import torch

    out = []
    for i in range(0, len(files), chunk):
        jpegs = [torch.from_numpy(np.fromfile(f, dtype=np.uint8)) for f in files[i:i + chunk]]
        out += [x.permute(1, 2, 0).cpu().numpy() for x in loaders.torch_decode(jpegs, device)]
    return out


def decode_dali(files, decoder, batch=6):
    """DALI's decode node as the dali loader builds it, fed the files' bytes -> HWC uint8."""
    import torch
    from nvidia.dali import fn, pipeline_def

    def source(info):  # the pipeline prefetches past the end: those batches are never read
        return np.fromfile(files[info.idx_in_epoch % len(files)], dtype=np.uint8)

    device_id = torch.cuda.current_device() if decoder == "mixed" else None

    @pipeline_def(batch_size=batch, num_threads=4, device_id=device_id)
    def pipeline():
        return loaders.dali_decode(fn.external_source(source=source, batch=False), decoder)

    pipe = pipeline()
    pipe.build()
    out = []
    for _ in range(len(files) // batch):
        (images,) = pipe.run()
        if decoder == "mixed":
            images = images.as_cpu()
        out += [np.array(images.at(i)) for i in range(batch)]
    return out


def decode_stage(files, names):
    """One row per (decoder, image) against Pillow's decode of the same file."""
    reference = [np.asarray(loaders.pillow_decode(f)) for f in files]
    pairs = {}
    for name in names:
        library, device = DECODERS[name]
        images = (decode_dali(files, device) if library == "dali"
                  else decode_torchvision(files, device))
        rows = []
        for k, (ref, img) in enumerate(zip(reference, images)):
            m, p = image_metrics(img, ref)
            rows.append({"sample": k // 6, "camera": k % 6, "max_abs": m, "psnr_db": p})
        pairs[f"{name} vs pillow"] = rows
    return pairs


# ===== Final stage ===============================================================================


def loader_images(kind, args):
    """The first --samples samples' images as ``make_loader(kind)`` hands them to training,
    as float32 numpy [samples, 6, 3, H, W] on the host."""
    import torch

    loader = loaders.make_loader(kind, args.dataroot, version=args.version,
                                 batch_size=args.batch_size, num_workers=args.workers,
                                 augment=args.augment, shuffle=False,
                                 device="cuda" if args.device == "cuda" else "cpu")
    out = []
    for batch in loader:
        out.append(batch["images"].float().cpu())
        if sum(len(x) for x in out) >= args.samples:
            break
    return torch.cat(out)[:args.samples].numpy()


def final_stage(args):
    """One row per (loader, image): its normalised image against the reference loader's, in
    normalised units and, times the channel's std, in grey levels."""
    std = np.array(STD, np.float64).reshape(3, 1, 1)
    mean = np.array(MEAN, np.float64).reshape(3, 1, 1)
    reference = loader_images("reference", args)
    pairs = {}
    for kind in args.loaders:
        images = loader_images(kind, args)
        rows = []
        for s in range(args.samples):
            for c in range(reference.shape[1]):
                ref, img = reference[s, c], images[s, c]
                m, p = image_metrics(img * std + mean, ref * std + mean)
                d = np.abs(img.astype(np.float64) - ref)
                rows.append({"sample": s, "camera": c, "max_abs": m, "psnr_db": p,
                             "max_abs_norm": float(d.max()), "mean_abs_norm": float(d.mean())})
        pairs[f"{kind} vs reference"] = rows
    return pairs


# ===== Report ====================================================================================


def _db(x):
    return "identical" if x == math.inf else f"{x:.1f}"


def table(results):
    lines = ["| stage | pair | images | max abs diff, worst [grey levels] | median "
             "| PSNR, worst [dB] | median | identical images |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for stage in ("decode", "final"):
        for pair, s in results[stage].items():
            norm = (f" ({s['max_abs_norm_max']:.4f} normalised)" if "max_abs_norm_max" in s
                    else "")
            lines.append(f"| {stage} | {pair} | {s['images']} | {s['max_abs_max']:.2f}{norm} "
                         f"| {s['max_abs_median']:.2f} | {_db(s['psnr_min_db'])} "
                         f"| {_db(s['psnr_median_db'])} | {s['identical_images']} |")
    return "\n".join(lines)


def _finite(x):
    """JSON has no infinity: an identical image's PSNR is written as null."""
    if isinstance(x, float) and math.isinf(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def machine(args):
    import PIL
    import torch
    import torchvision

    info = {"python": platform.python_version(), "pillow": PIL.__version__,
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "device": args.device,
            "cpus": os.cpu_count()}
    try:
        import nvidia.dali

        info["dali"] = nvidia.dali.__version__
    except ImportError:
        info["dali"] = None
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def run(args):
    reader = NuScenesReader(args.dataroot, args.version)
    if args.samples > len(reader) or args.samples % args.batch_size:
        raise SystemExit(f"equivalence.py: --samples {args.samples} must be at most "
                         f"{len(reader)} and a multiple of --batch-size {args.batch_size}")
    files = [c["file"] for s in reader.samples[:args.samples] for c in s.cams]
    per_image = {"decode": decode_stage(files, args.decoders), "final": final_stage(args)}
    results = {"machine": machine(args), "dataroot": os.path.abspath(args.dataroot),
               "samples": args.samples, "images": len(files), "augment": args.augment,
               "decode": {k: summary(v) for k, v in per_image["decode"].items()},
               "final": {k: summary(v) for k, v in per_image["final"].items()}}
    return results, per_image


def main(argv=None):
    args = parse_args(argv)
    results, per_image = run(args)
    print(f"equivalence: {results['images']} images ({args.samples} samples x 6 cameras), "
          f"augmentation {'on' if args.augment else 'off'}, device {args.device}; "
          + ", ".join(f"{k} {v}" for k, v in results["machine"].items() if k != "device"))
    print(table(results), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(_finite({**results, "per_image": per_image}), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
