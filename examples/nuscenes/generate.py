"""Writes a small dataset in the NuScenes layout: ``v1.0-mini/*.json`` and ``samples/CAM_*/*.jpg``.

The tables are the thirteen the official devkit loads at start-up (``NuScenes.table_names``), with
the fields it and ``reader.py`` read, so that ``NuScenes(version="v1.0-mini", dataroot=...)`` opens
the result; the ``map`` table points at a small PNG mask under ``maps/`` (the devkit checks that the
file exists). No ``lidarseg.json`` / ``panoptic.json`` is written, so the devkit runs without them.

The images are 1600x900 JPEGs (quality 90) with photo-like statistics: a sky/road gradient, a
low-frequency texture, random shapes and sensor-like noise, about the size of NuScenes' camera
JPEGs. Everything is a function of ``--seed``.

    python examples/nuscenes/generate.py --out build/nuscenes-synth --samples 16
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

CAMERAS = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT",
           "CAM_BACK_RIGHT")
WIDTH, HEIGHT = 1600, 900
# A subset of NuScenes' detection classes (category names as in the real category.json).
CATEGORIES = ("vehicle.car", "vehicle.truck", "vehicle.bus.rigid", "human.pedestrian.adult",
              "vehicle.bicycle", "movable_object.barrier", "movable_object.trafficcone")
SIZES = {  # typical width, length, height in metres
    "vehicle.car": (1.9, 4.6, 1.7), "vehicle.truck": (2.5, 7.0, 3.0),
    "vehicle.bus.rigid": (2.9, 11.0, 3.5), "human.pedestrian.adult": (0.7, 0.7, 1.8),
    "vehicle.bicycle": (0.6, 1.7, 1.3), "movable_object.barrier": (2.5, 0.5, 1.0),
    "movable_object.trafficcone": (0.4, 0.4, 0.8),
}
SAMPLES_PER_SCENE = 8
NOISE_SIGMA = 2.5  # grey levels; sets the JPEG size (~NuScenes' 100-250 KB at quality 90)
# The thirteen tables the devkit loads (NuScenes.table_names), one <name>.json each.
TABLES = ("category", "attribute", "visibility", "instance", "sensor", "calibrated_sensor",
          "ego_pose", "log", "scene", "sample", "sample_data", "sample_annotation", "map")


def token(*parts):
    """A 32-hex-digit token like NuScenes', stable for the same parts."""
    return hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()


def _texture(rng, h, w, cells):
    """A smooth random field in [0, 1]: bilinear upsampling of a coarse grid."""
    coarse = (rng.random((cells[0], cells[1])) * 255).astype(np.uint8)
    img = Image.fromarray(coarse).resize((w, h), Image.BICUBIC)
    return np.asarray(img, dtype=np.float32) / 255.0


def make_image(rng, noise):
    """One 1600x900 RGB image (uint8) with the statistics of a street photo, roughly.

    The scene is drawn at half resolution and upsampled (the smooth edges of a real lens), then
    ``noise`` (a full-resolution int16 field shared by all images, rolled by a random offset: fine
    detail like a sensor's without generating it per image) is added."""
    h, w = HEIGHT // 2, WIDTH // 2
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
    sky = np.array([150, 180, 220], np.float32) * (1.0 - 0.4 * y)
    road = np.array([90, 90, 95], np.float32) * (0.6 + 0.6 * y)
    horizon = 0.35 + 0.2 * rng.random()
    img = np.where(y < horizon, sky, road) * (0.75 + 0.5 * _texture(rng, h, w, (12, 20)))[:, :, None]
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(int(rng.integers(15, 30))):  # buildings, cars, signs
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(10, 200)), y0 + int(rng.integers(10, 150))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.rectangle if rng.random() < 0.6 else draw.ellipse)([x0, y0, x1, y1], fill=colour)
    img = np.asarray(pil.resize((WIDTH, HEIGHT), Image.BILINEAR), dtype=np.int16)
    shift = (int(rng.integers(0, HEIGHT)), int(rng.integers(0, WIDTH)))
    img = img + np.roll(noise, shift, axis=(0, 1))
    return np.clip(img, 0, 255).astype(np.uint8)


def make_noise(rng, sigma=NOISE_SIGMA):
    return rng.normal(0.0, sigma, (HEIGHT, WIDTH, 1)).astype(np.int16)


def intrinsic(rng):
    """A NuScenes-like pinhole camera matrix for 1600x900 (f ~ 1260 px, centre near the middle)."""
    f = 1260.0 + 15.0 * rng.standard_normal()
    return [[f, 0.0, 800.0 + 10.0 * rng.standard_normal()],
            [0.0, f, 450.0 + 10.0 * rng.standard_normal()],
            [0.0, 0.0, 1.0]]


def quaternion(yaw):
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def generate(out, samples=16, seed=0, version="v1.0-mini", annotations_per_sample=6, quality=90,
             jobs=1):
    """Writes the dataset under ``out`` and returns the number of JPEG files written.

    The random draws come in a fixed order (camera intrinsics, then per scene its objects'
    categories and per sample their annotations), so the tables depend on the arguments only."""
    rng = np.random.default_rng(seed)
    table_dir = os.path.join(out, version)
    _make_dirs(out, table_dir)
    t = {name: [] for name in TABLES}
    _add_fixed_tables(t)
    log_token = _add_log_and_map(t, out, seed)
    calib = _add_calibrated_sensors(t, rng, seed)
    sample_tokens = [token("sample", seed, i) for i in range(samples)]
    scenes = [list(range(s, min(s + SAMPLES_PER_SCENE, samples)))
              for s in range(0, samples, SAMPLES_PER_SCENE)]
    images = []  # (path, seed, sample, camera, quality), written at the end, in parallel
    for scene_idx, members in enumerate(scenes):
        _add_scene(t, rng, out, seed, quality, scene_idx, members, sample_tokens, log_token,
                   calib, annotations_per_sample, images)
    _write_tables(table_dir, t)
    _write_images(images, jobs)
    return len(images)


def _make_dirs(out, table_dir):
    """The table folder, one folder per camera under ``samples/`` and ``maps/``."""
    os.makedirs(table_dir, exist_ok=True)
    for cam in CAMERAS:
        os.makedirs(os.path.join(out, "samples", cam), exist_ok=True)
    os.makedirs(os.path.join(out, "maps"), exist_ok=True)


def _add_fixed_tables(t):
    """The tables that do not depend on the seed: categories, attributes, visibility, sensors."""
    for i, name in enumerate(CATEGORIES):
        t["category"].append({"token": token("category", name), "name": name,
                              "description": name.replace(".", " "), "index": i})
    for name in ("vehicle.moving", "vehicle.parked", "pedestrian.moving", "cycle.without_rider"):
        t["attribute"].append({"token": token("attribute", name), "name": name, "description": ""})
    for level, token_id in (("v0-40", "1"), ("v40-60", "2"), ("v60-80", "3"), ("v80-100", "4")):
        t["visibility"].append({"token": token_id, "level": level, "description": level})
    for cam in CAMERAS:
        t["sensor"].append({"token": token("sensor", cam), "channel": cam, "modality": "camera"})


def _add_log_and_map(t, out, seed):
    """The one log and its map, whose PNG mask is written under ``maps/``; returns the log's token."""
    log_token = token("log", seed)
    t["log"].append({"token": log_token, "logfile": f"synthetic-seed{seed}", "vehicle": "synth",
                     "date_captured": "2026-12-03", "location": "singapore-onenorth"})
    mask_file = os.path.join("maps", f"synthetic-{seed}.png")
    Image.fromarray(np.full((64, 64), 255, np.uint8)).save(os.path.join(out, mask_file))
    t["map"].append({"token": token("map", seed), "log_tokens": [log_token],
                     "category": "semantic_prior", "filename": mask_file})
    return log_token


def _add_calibrated_sensors(t, rng, seed):
    """One calibration per camera (yaw k * 60 degrees); returns them by camera name."""
    calib = {}
    for k, cam in enumerate(CAMERAS):
        c = {"token": token("calibrated_sensor", seed, cam), "sensor_token": token("sensor", cam),
             "translation": [1.5, 0.0, 1.5], "rotation": quaternion(k * np.pi / 3),
             "camera_intrinsic": intrinsic(rng)}
        t["calibrated_sensor"].append(c)
        calib[cam] = c
    return calib


def _add_scene(t, rng, out, seed, quality, scene_idx, members, sample_tokens, log_token, calib,
               annotations_per_sample, images):
    """One scene: its row, its objects, and for each of its samples (indices ``members``) the
    sample, ego pose, camera images (appended to ``images``) and annotations."""
    scene_token = token("scene", seed, scene_idx)
    t["scene"].append({"token": scene_token, "log_token": log_token,
                       "nbr_samples": len(members), "first_sample_token": sample_tokens[members[0]],
                       "last_sample_token": sample_tokens[members[-1]],
                       "name": f"scene-{scene_idx:04d}", "description": "synthetic"})
    instances = _scene_instances(rng, seed, scene_idx, annotations_per_sample)
    for pos, i in enumerate(members):
        first, last = pos == 0, pos + 1 == len(members)
        ego = _add_sample(t, seed, i, first, last, sample_tokens, scene_token)
        _add_sample_data(t, out, seed, quality, i, first, last, sample_tokens[i], ego, calib, images)
        _add_annotations(t, rng, seed, i, sample_tokens[i], instances)
    _add_instances(t, instances)


def _scene_instances(rng, seed, scene_idx, count):
    """The objects of a scene (the same throughout it), each with a random category."""
    instances = []
    for j in range(count):
        category = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
        instances.append({"token": token("instance", seed, scene_idx, j),
                          "category_token": token("category", category), "category": category,
                          "ann_tokens": []})
    return instances


def _sample_time(i):
    """Sample ``i``'s timestamp: microseconds like NuScenes', two samples a second."""
    return 1_533_000_000_000_000 + i * 500_000


def _add_sample(t, seed, i, first, last, sample_tokens, scene_token):
    """Sample ``i`` (linked to its neighbours within the scene) and its ego pose; returns the
    ego pose's token."""
    ts = _sample_time(i)
    t["sample"].append({"token": sample_tokens[i], "timestamp": ts,
                        "prev": sample_tokens[i - 1] if not first else "",
                        "next": sample_tokens[i + 1] if not last else "",
                        "scene_token": scene_token})
    ego = token("ego_pose", seed, i)
    t["ego_pose"].append({"token": ego, "timestamp": ts, "rotation": quaternion(0.01 * i),
                          "translation": [400.0 + 5.0 * i, 1100.0, 0.0]})
    return ego


def _add_sample_data(t, out, seed, quality, i, first, last, sample_token, ego, calib, images):
    """One key-frame camera image per camera for sample ``i``: its row, and its JPEG's job
    appended to ``images``."""
    ts = _sample_time(i)
    for k, cam in enumerate(CAMERAS):
        filename = f"samples/{cam}/synth-seed{seed}__{cam}__{ts}.jpg"
        images.append((os.path.join(out, filename), seed, i, k, quality))
        t["sample_data"].append({
            "token": token("sample_data", seed, i, cam), "sample_token": sample_token,
            "ego_pose_token": ego, "calibrated_sensor_token": calib[cam]["token"],
            "timestamp": ts, "fileformat": "jpg", "is_key_frame": True, "height": HEIGHT,
            "width": WIDTH, "filename": filename,
            "prev": token("sample_data", seed, i - 1, cam) if not first else "",
            "next": token("sample_data", seed, i + 1, cam) if not last else ""})


def _add_annotations(t, rng, seed, i, sample_token, instances):
    """One box per object in sample ``i``, near the ego pose, at a random heading; its token is
    kept on the object for linking."""
    for j, inst in enumerate(instances):
        w, l, h = SIZES[inst["category"]]
        ann_token = token("sample_annotation", seed, i, j)
        inst["ann_tokens"].append(ann_token)
        t["sample_annotation"].append({
            "token": ann_token, "sample_token": sample_token,
            "instance_token": inst["token"], "attribute_tokens": [],
            "visibility_token": "4",
            "translation": [float(x) for x in (400.0 + 5.0 * i + rng.uniform(-40, 40),
                                                1100.0 + rng.uniform(-40, 40), h / 2)],
            "size": [w, l, h], "rotation": quaternion(rng.uniform(-np.pi, np.pi)),
            "prev": "", "next": "", "num_lidar_pts": int(rng.integers(1, 500)),
            "num_radar_pts": int(rng.integers(0, 10))})


def _add_instances(t, instances):
    """The scene's instance rows, with each instance's annotations linked like the real tables."""
    for inst in instances:
        anns = inst.pop("ann_tokens")
        by_token = {a["token"]: a for a in t["sample_annotation"] if a["token"] in anns}
        for a, b in zip(anns, anns[1:]):
            by_token[a]["next"], by_token[b]["prev"] = b, a
        inst.pop("category")
        t["instance"].append({**inst, "nbr_annotations": len(anns),
                              "first_annotation_token": anns[0],
                              "last_annotation_token": anns[-1]})


def _write_tables(table_dir, t):
    for name, rows in t.items():
        with open(os.path.join(table_dir, name + ".json"), "w") as f:
            json.dump(rows, f, indent=0)


def _write_images(images, jobs):
    """The JPEGs, in ``jobs`` forked processes when more than one (the bytes do not depend on it)."""
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            pool.map(_write_image, images, chunksize=6)
    else:
        for image in images:
            _write_image(image)


_NOISE = {}


def _write_image(job):
    """One JPEG; its pixels depend on (seed, sample, camera) only, whichever process writes it."""
    path, seed, sample, camera, quality = job
    if seed not in _NOISE:
        _NOISE[seed] = make_noise(np.random.default_rng([seed, 1 << 30]))
    rng = np.random.default_rng([seed, sample, camera])
    Image.fromarray(make_image(rng, _NOISE[seed])).save(path, quality=quality)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the dataroot to write")
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--version", default="v1.0-mini")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes writing JPEGs (the output does not depend on it)")
    args = p.parse_args(argv)
    start = time.perf_counter()
    files = generate(args.out, args.samples, args.seed, args.version, jobs=args.jobs)
    print(f"generate: {args.samples} samples, {files} JPEGs under {args.out} "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
