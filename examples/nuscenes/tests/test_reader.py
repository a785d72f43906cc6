"""The reader walks sample -> six key-frame cameras -> file and intrinsics, on the generated
dataset, and the official devkit sees the same samples and files there."""

import os

import numpy as np
import pytest
from PIL import Image

from conftest import SAMPLES
from reader import CAMERAS, NuScenesReader


def test_reader_lists_every_sample_with_six_cameras_and_annotations(nuscenes_root):
    r = NuScenesReader(nuscenes_root)
    assert len(r.samples) == SAMPLES
    for s in r.samples:
        assert [c["channel"] for c in s.cams] == list(CAMERAS)
        for c in s.cams:
            assert os.path.isabs(c["file"]) and os.path.isfile(c["file"])
            assert c["intrinsic"].shape == (3, 3) and c["intrinsic"][2, 2] == 1.0
        assert s.annotations, "every generated sample carries annotations"
        for a in s.annotations:
            assert a["category"] and len(a["translation"]) == 3 and len(a["size"]) == 3


def test_generated_images_look_like_nuscenes_camera_jpegs(nuscenes_root):
    r = NuScenesReader(nuscenes_root)
    sizes = []
    for c in r.samples[0].cams:
        with Image.open(c["file"]) as img:
            assert img.format == "JPEG" and img.size == (1600, 900) and img.mode == "RGB"
        sizes.append(os.path.getsize(c["file"]))
    # NuScenes' camera JPEGs are about 100-250 KB; the generator's noise level is set for that.
    assert 100e3 <= min(sizes) and max(sizes) <= 300e3, sizes


def test_generation_is_deterministic(nuscenes_root, tmp_path):
    import generate

    generate.generate(str(tmp_path), samples=1, seed=3, jobs=1)
    mine = NuScenesReader(str(tmp_path)).samples[0]
    theirs = NuScenesReader(nuscenes_root).samples[0]
    assert mine.token == theirs.token
    for a, b in zip(mine.cams, theirs.cams):
        with open(a["file"], "rb") as fa, open(b["file"], "rb") as fb:
            assert fa.read() == fb.read()


def test_devkit_opens_the_dataset_and_sees_the_same_samples_and_files(nuscenes_root):
    nuscenes = pytest.importorskip("nuscenes.nuscenes")
    nusc = nuscenes.NuScenes(version="v1.0-mini", dataroot=nuscenes_root, verbose=False)
    r = NuScenesReader(nuscenes_root)
    assert [s["token"] for s in nusc.sample] == [s.token for s in r.samples]
    for rec, mine in zip(nusc.sample, r.samples):
        for cam in mine.cams:
            sd = nusc.get("sample_data", rec["data"][cam["channel"]])
            assert os.path.join(nusc.dataroot, sd["filename"]) == cam["file"]
            cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
            np.testing.assert_array_equal(np.asarray(cs["camera_intrinsic"]), cam["intrinsic"])
        theirs = sorted(nusc.get("sample_annotation", t)["category_name"] for t in rec["anns"])
        assert theirs == sorted(a["category"] for a in mine.annotations)
