"""equivalence.py on the CPU: Pillow (the reference loader) against DALI's CPU decoder and
torchvision's CPU decode, then the dali and gpu loaders' batches against the reference loader's,
on the generated data (6 samples, 36 images, augmentation on).

The bounds, per image:

- decode (uint8 RGB, before any resize): max |d| <= 4 grey levels and PSNR >= 40 dB. Measured on
  the build machine (DALI 2.4.0, torchvision 0.29.2, Pillow 13.0.0; 108 images of
  ``generate.py --samples 18 --seed 0``, ``equivalence.py --samples 18``): both decoders give
  Pillow's pixels exactly (all three use libjpeg-turbo with the same IDCT and chroma upsampling).
  The bound leaves room for a decoder built another way (a different IDCT or upsampling differs
  by a few grey levels, PSNR above about 40 dB); nvJPEG on the GPU is measured by the device run.
- final (normalised float32, after resize, crop, flip): max |d| <= 5 grey levels (0.09 in
  normalised units) and PSNR >= 40 dB. Measured there: DALI 2 levels (0.035) at worst, PSNR
  55.6 dB at worst; torchvision 1 level (0.0175), 56.9 dB. The resize filters differ (Pillow
  rounds to uint8 after resizing, torch keeps floats, DALI's antialiased linear filter has its
  own weights), so the bound is wider than the decode's.

A wrong channel order, a missed normalisation, a missed flip or a crop off by a few pixels
breaks these bounds by far (tens of grey levels, PSNR near 20 dB or below); the last test shows it
for a channel swap of a real decoded image.
"""

import contextlib
import io
import json
import math

import numpy as np
import pytest

import equivalence
import loaders
from conftest import SAMPLES

pytest.importorskip("nvidia.dali")

DECODE_MAX, FINAL_MAX, PSNR_MIN, NORM_MAX = 4.0, 5.0, 40.0, 0.09


@pytest.fixture(scope="module")
def measured(nuscenes_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("equivalence") / "equivalence.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = equivalence.main(["--dataroot", nuscenes_root, "--samples", str(SAMPLES),
                               "--device", "cpu", "--json", str(out)])
    assert rc == 0
    return printed.getvalue(), json.loads(out.read_text())


def test_the_cpu_decoders_give_pillows_pixels(measured):
    _, r = measured
    assert sorted(r["decode"]) == ["dali-cpu vs pillow", "torchvision-cpu vs pillow"]
    for pair, s in r["decode"].items():
        assert s["images"] == SAMPLES * 6, pair
        assert s["max_abs_max"] <= DECODE_MAX, (pair, s)
        assert s["psnr_min_db"] is None or s["psnr_min_db"] >= PSNR_MIN, (pair, s)


def test_the_loaders_batches_match_the_reference_loaders(measured):
    _, r = measured
    assert sorted(r["final"]) == ["dali vs reference", "gpu vs reference"]
    for pair, s in r["final"].items():
        assert s["images"] == SAMPLES * 6, pair
        assert s["max_abs_max"] <= FINAL_MAX, (pair, s)
        assert s["max_abs_norm_max"] <= NORM_MAX, (pair, s)
        assert s["psnr_min_db"] >= PSNR_MIN, (pair, s)
        # not identical either: the resize filters differ, so the comparison saw real pixels
        assert s["identical_images"] < s["images"], (pair, s)


def test_the_json_keeps_every_image_and_the_table_its_summary(measured):
    printed, r = measured
    rows = r["per_image"]["final"]["gpu vs reference"]
    assert [(x["sample"], x["camera"]) for x in rows[:7]] == [(0, c) for c in range(6)] + [(1, 0)]
    s = r["final"]["gpu vs reference"]
    assert s["max_abs_max"] == max(x["max_abs"] for x in rows)
    assert r["machine"]["device"] == "cpu" and r["images"] == SAMPLES * 6
    assert (f"| final | gpu vs reference | {SAMPLES * 6} | {s['max_abs_max']:.2f} "
            f"({s['max_abs_norm_max']:.4f} normalised) |") in printed
    # an identical image's PSNR is infinite: "identical" in the table, null in the JSON
    decode = r["decode"]["torchvision-cpu vs pillow"]
    if decode["identical_images"] == decode["images"]:
        assert decode["psnr_min_db"] is None
        assert "| decode | torchvision-cpu vs pillow | 36 | 0.00 | 0.00 | identical |" in printed


def test_the_bounds_reject_a_channel_swap(nuscenes_root):
    from reader import NuScenesReader

    path = NuScenesReader(nuscenes_root).samples[0].cams[0]["file"]
    rgb = np.asarray(loaders.pillow_decode(path))
    m, p = equivalence.image_metrics(rgb[:, :, ::-1], rgb)
    assert m > 10 * DECODE_MAX and p < PSNR_MIN - 10
    assert equivalence.image_metrics(rgb, rgb) == (0.0, math.inf)
