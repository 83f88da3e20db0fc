"""A generated object detection dataset in the Object Detection API's format, with no download:
the images of `ssd_mobilenet.shape_images` (circles, squares and triangles in varied colours and
sizes on noisy gradient backgrounds, each box the exact extent of its shape's pixels) as
`train.record` and `eval.record`, with their `label_map.pbtxt`.

It is for a training demo on a CPU (a few hundred steps and the mAP rises) and for tests, so the
shapes are made easy to learn (`shape_images`' docstring). Everything follows from the seed.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from ssd_mobilenet.atomic_write import atomic_directory
from ssd_mobilenet.shape_images import CLASS_NAMES, make_image
from ssd_mobilenet.training.tf_example import make_example


def label_map_text() -> str:
    """The `label_map.pbtxt` of `CLASS_NAMES`."""
    return "".join(f"item {{\n  id: {i}\n  name: '{name}'\n}}\n" for i, name in enumerate(CLASS_NAMES, start=1))


def _sizes(rng, image_size):
    if isinstance(image_size, int):
        return image_size, image_size
    low, high = image_size
    return int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1))


def _write_records(path, rng, count, image_size, split):
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            height, width = _sizes(rng, image_size)
            image, boxes, classes = make_image(rng, height, width)
            encoded = tf.io.encode_jpeg(image, quality=95).numpy()
            name = f"{split}_{i:05d}.jpg"
            writer.write(make_example(encoded, height, width, boxes, classes, [CLASS_NAMES[c - 1] for c in classes],
                                      filename=name, source_id=name).SerializeToString())


def write_shapes_dataset(out_dir, num_train: int = 200, num_eval: int = 50, image_size=(128, 320), seed: int = 0,
                         force: bool = False) -> str:
    """Writes `train.record`, `eval.record` and `label_map.pbtxt` into `out_dir`.

    Args:
      out_dir: the folder to create; written in a temporary folder beside it and renamed into place.
      num_train, num_eval: images in each record file.
      image_size: an int (square images of that side) or (low, high): each image's height and width
        drawn from low..high pixels.
      seed: everything (sizes, shapes, colours, positions) follows from it.
      force: replace an existing non-empty `out_dir`.

    Returns:
      out_dir.

    Raises:
      FileExistsError: `out_dir` exists, is not empty, and `force` is not set.
    """
    out_dir = os.path.abspath(os.fspath(out_dir))
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)) and not force:
        raise FileExistsError(f"{out_dir}: exists and is not empty (force=True replaces it)")
    with atomic_directory(out_dir) as tmp:
        rng = np.random.default_rng(seed)
        _write_records(os.path.join(tmp, "train.record"), rng, num_train, image_size, "train")
        _write_records(os.path.join(tmp, "eval.record"), rng, num_eval, image_size, "eval")
        with open(os.path.join(tmp, "label_map.pbtxt"), "w", encoding="utf-8") as f:
            f.write(label_map_text())
    return out_dir
