"""Reads the camera part of a NuScenes dataset: sample -> six key-frame images -> intrinsics.

Works on the real NuScenes (``v1.0-mini``, ``v1.0-trainval``) and on the output of
``generate.py``; needs only the JSON tables, not the devkit::

    r = NuScenesReader("/data/sets/nuscenes")
    s = r.samples[0]
    s.token, s.cams[0]["file"], s.cams[0]["intrinsic"], s.annotations[0]["category"]

Samples come in the order of ``sample.json`` (the devkit's ``nusc.sample`` order), cameras in
``CAMERAS`` order.
"""

import json
import os
from dataclasses import dataclass, field

import numpy as np

CAMERAS = ("CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_FRONT_LEFT", "CAM_BACK", "CAM_BACK_LEFT",
           "CAM_BACK_RIGHT")


@dataclass
class Sample:
    token: str
    timestamp: int
    cams: list  # six dicts: channel, file (absolute path), intrinsic (3x3 float64), width, height
    annotations: list = field(default_factory=list)  # dicts: category, translation, size, rotation


class NuScenesReader:
    def __init__(self, dataroot, version="v1.0-mini"):
        self.dataroot = os.path.abspath(dataroot)
        self.version = version
        tables = os.path.join(self.dataroot, version)
        if not os.path.isdir(tables):
            raise FileNotFoundError(f"no NuScenes tables at {tables}")

        def load(name):
            with open(os.path.join(tables, name + ".json")) as f:
                return json.load(f)

        sensor = {r["token"]: r for r in load("sensor")}
        calib = {r["token"]: r for r in load("calibrated_sensor")}
        category = {r["token"]: r["name"] for r in load("category")}
        instance_category = {r["token"]: category[r["category_token"]] for r in load("instance")}

        key_frames = {}  # sample token -> channel -> sample_data row
        for sd in load("sample_data"):
            if not sd["is_key_frame"]:
                continue
            cs = calib[sd["calibrated_sensor_token"]]
            channel = sensor[cs["sensor_token"]]["channel"]
            if channel in CAMERAS:
                key_frames.setdefault(sd["sample_token"], {})[channel] = (sd, cs)

        annotations = {}
        for a in load("sample_annotation"):
            annotations.setdefault(a["sample_token"], []).append({
                "category": instance_category[a["instance_token"]],
                "translation": a["translation"], "size": a["size"], "rotation": a["rotation"]})

        self.samples = []
        for s in load("sample"):
            frames = key_frames.get(s["token"], {})
            if any(cam not in frames for cam in CAMERAS):
                continue  # a sample without all six cameras cannot feed the loaders
            cams = []
            for cam in CAMERAS:
                sd, cs = frames[cam]
                cams.append({"channel": cam, "file": os.path.join(self.dataroot, sd["filename"]),
                             "intrinsic": np.asarray(cs["camera_intrinsic"], dtype=np.float64),
                             "width": sd.get("width", 1600), "height": sd.get("height", 900)})
            self.samples.append(Sample(s["token"], s["timestamp"], cams,
                                       annotations.get(s["token"], [])))

    def __len__(self):
        return len(self.samples)
