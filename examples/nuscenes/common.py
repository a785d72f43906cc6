"""What every loader shares: the output size, the augmentation draw and its effect on the camera
intrinsics, the sample order of an epoch, and the DALI external source. numpy only, so that
DALI's Python workers and DataLoader workers import it cheaply.

Augmentation follows StreamPETR's ``_sample_augmentation`` / ``img_transform``: one draw per
sample, applied to all six cameras: resize by ``s`` (``resize_lim``), crop ``FINAL_W x FINAL_H``
(from the bottom, at a random column), horizontal flip with probability 0.5. The draw is a
function of ``(seed, epoch, sample index)`` only, so every loader (and every worker, and DALI)
augments a sample the same way in the same epoch; that is also what keeps the intrinsics matched
to the pixels whoever did the resizing.
"""

import time

import numpy as np

FINAL_H, FINAL_W = 372, 1024
RESIZE_LIM = (0.64, 0.80)  # >= max(372/900, 1024/1600) so the crop always fits
# ImageNet mean/std on the 0..255 scale (mmdet's img_norm_cfg, as StreamPETR uses it).
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def augmentation(seed, epoch, index, augment, width=1600, height=900):
    """(new_w, new_h, crop_x, crop_y, flip) for one sample: resize the full image to
    new_w x new_h, take the FINAL_W x FINAL_H window at (crop_x, crop_y), mirror if flip."""
    if augment:
        rng = np.random.default_rng([seed, epoch, index])
        s = rng.uniform(*RESIZE_LIM)
    else:
        s = max(FINAL_H / height, FINAL_W / width)
    new_w, new_h = int(width * s), int(height * s)
    crop_y = new_h - FINAL_H  # bottom crop (StreamPETR's bot_pct_lim = (0, 0))
    if augment:
        crop_x = int(rng.uniform(0, max(0, new_w - FINAL_W)))
        flip = bool(rng.uniform() < 0.5)
    else:
        crop_x = (new_w - FINAL_W) // 2
        flip = False
    return new_w, new_h, crop_x, crop_y, flip


def augmentation_matrix(aug, width=1600, height=900):
    """The 3x3 map from original pixel coordinates to augmented ones (StreamPETR's ida_mat);
    ``A @ K`` is the intrinsic matrix of the augmented image (fx < 0 after a flip, as there)."""
    new_w, new_h, crop_x, crop_y, flip = aug
    a = np.array([[new_w / width, 0.0, -crop_x], [0.0, new_h / height, -crop_y], [0.0, 0.0, 1.0]])
    if flip:
        a = np.array([[-1.0, 0.0, FINAL_W], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) @ a
    return a


def adjusted_intrinsics(intrinsics, aug):
    """``intrinsics`` [6, 3, 3] of one sample -> float32 [6, 3, 3] for the augmented images."""
    return (augmentation_matrix(aug) @ np.asarray(intrinsics, np.float64)).astype(np.float32)


def epoch_indices(n, seed, epoch, batch_size, rank=0, world_size=1, replicate=False,
                  drop_last=True, shuffle=True):
    """Sample indices this rank reads in ``epoch``: one permutation per epoch (the same on every
    rank), then a disjoint shard per rank (like DistributedSampler: equal shard lengths), or the
    whole permutation on every rank with ``replicate`` (the seed's replicate_dataset_per_gpu)."""
    order = (np.random.default_rng([seed, epoch, 7]).permutation(n) if shuffle
             else np.arange(n))
    if world_size > 1 and not replicate:
        per_rank = n // world_size
        order = order[rank::world_size][:per_rank]
    if drop_last:
        order = order[: len(order) // batch_size * batch_size]
    return order


class DaliSource:
    """The external-source callback (``batch=False``, ``parallel=True``): sample ``idx_in_epoch``
    of epoch ``epoch_idx`` -> six encoded JPEGs (read here, decoded by DALI), the augmentation
    parameters as per-sample arguments for DALI's operators, the adjusted intrinsics and the sample
    index. Runs in DALI's Python worker processes, so it must pickle (plain data only)."""

    def __init__(self, files, intrinsics, sizes, seed, augment, batch_size, rank, world_size,
                 replicate, shuffle):
        self.files = files              # [n][6] paths
        self.intrinsics = intrinsics    # [n, 6, 3, 3] float64
        self.sizes = sizes              # [n] (width, height) of the images
        self.args = (seed, batch_size, rank, world_size, replicate)
        self.augment = augment
        self.shuffle = shuffle
        self._order = (None, None)

    def order(self, epoch):
        if self._order[0] != epoch:
            seed, batch_size, rank, world_size, replicate = self.args
            self._order = (epoch, epoch_indices(len(self.files), seed, epoch, batch_size, rank,
                                                world_size, replicate, True, self.shuffle))
        return self._order[1]

    def __call__(self, info):
        order = self.order(info.epoch_idx)
        if info.idx_in_epoch >= len(order):
            raise StopIteration
        index = int(order[info.idx_in_epoch])
        seed = self.args[0]
        width, height = self.sizes[index]
        aug = augmentation(seed, info.epoch_idx, index, self.augment, width, height)
        new_w, new_h, crop_x, crop_y, flip = aug
        jpegs = [np.fromfile(f, dtype=np.uint8) for f in self.files[index]]
        return (*jpegs,
                np.array(new_w, np.float32), np.array(new_h, np.float32),
                np.array([crop_y, crop_x], np.int32), np.array(int(flip), np.int32),
                (augmentation_matrix(aug, width, height) @ self.intrinsics[index]).astype(np.float32),
                np.array([index], np.int64))


class Clock:
    """Per-batch figures a worker process reports with its batch (its pid, its own CPU clock and
    the time it spent per stage): a measurement made in a worker process stays in that process
    today, so these travel back in the batch. ``laptime``'s Stopwatch measures the same stages
    where they run in the main process."""

    def __init__(self):
        self.stages = {}

    def add(self, stage, seconds):
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def report(self):
        import os
        return {"pid": os.getpid(), "process_time": time.process_time(), **self.stages}
