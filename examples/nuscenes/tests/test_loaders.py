"""The three loaders keep one contract, and give the same batch for the same samples.

Equality bound (images after normalisation, all loaders on the CPU): max |a - b| <= 0.09 and
mean |a - b| <= 0.01. In grey levels (divide by the smallest std, 57.12) that is 5 levels at worst
and 0.6 on average. Measured on the generated data, 16 samples: torchvision vs Pillow max 0.0175
(1 level: Pillow rounds to 8 bits after resizing, torch keeps floats), mean 0.005; DALI vs Pillow
max 0.051 (3 levels: DALI's resampling filter and its own JPEG decoder), mean 0.003 -- with
augmentation off and on alike. The bound leaves room for other decoder builds (libjpeg-turbo
versions differ in IDCT and chroma upsampling by a level or two) while still catching any
geometric error: a crop off by one pixel, a missed flip or a wrong resize gives differences of
tens of levels along every edge, and means well above 0.05.
"""

import numpy as np
import pytest
import torch

import common
from conftest import SAMPLES
from loaders import make_loader
from reader import NuScenesReader

MAX_ABS, MEAN_ABS = 0.09, 0.01


def _have_dali():
    try:
        import nvidia.dali  # noqa: F401
        return True
    except ImportError:
        return False


KINDS = ["reference", "gpu"] + (["dali"] if _have_dali() else [])
needs_dali = pytest.mark.skipif(not _have_dali(), reason="nvidia-dali is not installed")


def _batches(kind, root, **kw):
    kw = {"batch_size": 2, "num_workers": 1, "device": "cpu", **kw}
    return list(make_loader(kind, root, **kw))


@pytest.mark.parametrize("kind", KINDS)
def test_batch_contract_and_epochs(kind, nuscenes_root):
    loader = make_loader(kind, nuscenes_root, batch_size=2, num_workers=2, device="cpu")
    assert len(loader) == SAMPLES // 2
    seen = []
    for epoch in range(2):
        batches = list(loader)
        assert len(batches) == len(loader)
        for b in batches:
            assert set(b) == {"images", "intrinsics", "index"}
            assert b["images"].dtype == torch.float32 and b["images"].shape == (2, 6, 3, 372, 1024)
            assert b["intrinsics"].dtype == torch.float32 and b["intrinsics"].shape == (2, 6, 3, 3)
            assert b["index"].dtype == torch.int64 and b["index"].shape == (2,)
            # normalised: roughly zero-mean, unit-scale values, not 0..255
            assert -3.0 < float(b["images"].mean()) < 3.0 and float(b["images"].abs().max()) < 3.0
        seen.append(sorted(int(i) for b in batches for i in b["index"]))
    assert seen[0] == seen[1] == list(range(SAMPLES))


@needs_dali
@pytest.mark.parametrize("augment", [False, True])
def test_loaders_give_the_same_batch_for_the_same_samples(augment, nuscenes_root):
    ref = _batches("reference", nuscenes_root, augment=augment, shuffle=False)
    for kind in ("gpu", "dali"):
        other = _batches(kind, nuscenes_root, augment=augment, shuffle=False)
        assert len(other) == len(ref)
        for r, o in zip(ref, other):
            assert torch.equal(r["index"], o["index"])
            torch.testing.assert_close(o["intrinsics"], r["intrinsics"], rtol=0, atol=1e-4)
            diff = (o["images"] - r["images"]).abs()
            assert float(diff.max()) <= MAX_ABS, (kind, float(diff.max()))
            assert float(diff.mean()) <= MEAN_ABS, (kind, float(diff.mean()))


def test_augmentation_moves_the_intrinsics_with_the_pixels():
    k = np.array([[1260.0, 0.0, 800.0], [0.0, 1260.0, 450.0], [0.0, 0.0, 1.0]])
    plain = common.augmentation(0, 0, 0, augment=False)
    assert plain == (1024, 576, 0, 204, False)  # scale 0.64, bottom crop of 576 - 372 rows
    a = common.adjusted_intrinsics([k], plain)[0]
    np.testing.assert_allclose(a, [[806.4, 0, 512.0], [0, 806.4, 288.0 - 204.0], [0, 0, 1]], rtol=1e-6)
    # A flipped sample: x -> 1024 - x, so fx changes sign and cx mirrors (StreamPETR's ida_mat).
    flipped = next(aug for i in range(50) if (aug := common.augmentation(0, 0, i, True))[4])
    new_w, new_h, crop_x, crop_y, _ = flipped
    a = common.adjusted_intrinsics([k], flipped)[0]
    sx, sy = new_w / 1600, new_h / 900
    np.testing.assert_allclose(a[0], [-1260 * sx, 0, 1024 - (800 * sx - crop_x)], rtol=1e-5)
    np.testing.assert_allclose(a[1], [0, 1260 * sy, 450 * sy - crop_y], rtol=1e-5)
    # A 3-D point projects where the augmentation moved its pixel.
    p = np.array([2.0, -1.0, 10.0])
    u, v, w = k @ p
    moved = common.augmentation_matrix(flipped) @ np.array([u / w, v / w, 1.0])
    uu, vv, ww = a.astype(np.float64) @ p
    np.testing.assert_allclose([uu / ww, vv / ww], moved[:2], atol=1e-3)


def test_augmentation_depends_on_seed_epoch_and_sample_only():
    draws = {common.augmentation(0, e, i, True) for e in range(3) for i in range(10)}
    assert len(draws) > 20  # varies across samples and epochs
    assert common.augmentation(5, 2, 7, True) == common.augmentation(5, 2, 7, True)
    for i in range(100):
        new_w, new_h, crop_x, crop_y, _ = common.augmentation(1, 0, i, True)
        assert 0 <= crop_x <= new_w - 1024 and 0 <= crop_y == new_h - 372


def test_ranks_see_disjoint_shards_unless_replicated(nuscenes_root):
    n = len(NuScenesReader(nuscenes_root).samples)
    shards = [common.epoch_indices(n, 0, 0, 1, rank, 2) for rank in range(2)]
    assert not set(shards[0]) & set(shards[1]) and len(shards[0]) == len(shards[1]) == n // 2
    replicated = [common.epoch_indices(n, 0, 0, 1, rank, 2, replicate=True) for rank in range(2)]
    assert list(replicated[0]) == list(replicated[1]) and sorted(replicated[0]) == list(range(n))
    loaders = [make_loader("reference", nuscenes_root, batch_size=1, num_workers=0, rank=r,
                           world_size=2) for r in range(2)]
    seen = [{int(b["index"]) for b in loader} for loader in loaders]
    assert not seen[0] & seen[1] and len(seen[0]) == len(loaders[0]) == n // 2
