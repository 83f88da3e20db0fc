"""The built-in default model: a TF1 SSD MobileNet v1 built on this machine, for users without one.

`python -m migrate convert` and `python -m migrate verify` without a source use it. It is the
COCO zoo architecture (90 classes, 300x300, depth multiplier 1) as a TF 1.12+ exporter writes it
(FusedBatchNorm, NMS before clipping), built by `migrate.tf1.builder` with seeded synthetic
weights: a real TF1 checkpoint, frozen graph and SavedModel, not a download.
"""

from __future__ import annotations

import os

import numpy as np

import migrate
from ssd_mobilenet.config.ssd_config import NMS_CLIP_AFTER, SSDConfig
from ssd_mobilenet.converted_dir import mark_synthetic, synthetic_weights

NAME = "ssd_mobilenet_v1_coco_synthetic"
# score_threshold 0.3 as the zoo pipeline.config has it (stored as its float32 value).
CONFIG = SSDConfig(num_classes=90, score_threshold=float(np.float32(0.3)), fused_batch_norm=True,
                   nms_variant=NMS_CLIP_AFTER)
SEED = 0
# The zoo architecture's label map (`convert` without SRC keeps it): the commands show its labels
# as they would for the zoo model, and say that synthetic weights' detections mean nothing.
LABELS = "coco"


def checkpoints_dir() -> str:
    """`checkpoints/` of the project checkout when there is one, else of the working directory."""
    project = os.path.dirname(os.path.dirname(os.path.abspath(migrate.__file__)))
    if os.path.isfile(os.path.join(project, "pyproject.toml")):
        return os.path.join(project, "checkpoints")
    return os.path.abspath("checkpoints")


def tf1_dir() -> str:
    return os.path.join(checkpoints_dir(), NAME)


def converted_dir() -> str:
    return tf1_dir() + "_tf2"


def ensure_tf1_model(progress=None) -> str:
    """The default TF1 model directory, built (once) if it is not there yet."""
    path = tf1_dir()
    if not os.path.isfile(os.path.join(path, "frozen_inference_graph.pb")):
        from migrate.tf1 import builder
        from ssd_mobilenet.errors import InputError
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise InputError(f"{path}: incomplete; remove it to rebuild the default model")
        if progress:
            progress(f"no TF1 model given: building the default one in {path}")
        builder.write_model_dir(CONFIG, path, seed=SEED)
    if not synthetic_weights(path):
        # Also into a default model built before the marker was written: convert carries it over.
        mark_synthetic(path)
    return path
