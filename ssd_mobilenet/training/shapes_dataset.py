"""A generated object detection dataset in the Object Detection API's format, with no download:
circles, squares and triangles in varied colours and sizes on noisy gradient backgrounds.

It is for a training demo on a CPU (a few hundred steps and the mAP rises) and for tests, so the
shapes are made easy to learn: three distinct outlines, each object at least a sixth of the
image's shorter side, 1 to 4 objects per image, overlapping little, and every object's colour
far from the background behind it. Each box is the exact extent of its shape's pixels:
[ymin, xmin, ymax, xmax] = [top row, left column, bottom row + 1, right column + 1] divided by
the image's height and width. Everything follows from the seed.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from ssd_mobilenet.atomic_write import atomic_directory
from ssd_mobilenet.training.tf_example import make_example

CLASS_NAMES = ("circle", "square", "triangle")  # class ids 1, 2, 3
MAX_OBJECTS = 4
# Object sizes as fractions of the image's shorter side.
MIN_SIZE, MAX_SIZE = 1 / 6, 1 / 2
# Largest share of an object's box another object's box may cover.
MAX_OVERLAP = 0.25
# Least distance (RGB, 0-255) between an object's colour and the mean colour of what it covers.
MIN_CONTRAST = 120.0


def label_map_text() -> str:
    """The `label_map.pbtxt` of `CLASS_NAMES`."""
    return "".join(f"item {{\n  id: {i}\n  name: '{name}'\n}}\n" for i, name in enumerate(CLASS_NAMES, start=1))


def _background(rng, height, width):
    """A linear gradient between two random colours in a random direction, plus pixel noise."""
    c0, c1 = rng.uniform(0, 255, (2, 3))
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    t = (np.cos(angle) * xx / width + np.sin(angle) * yy / height)
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    image = c0 + (c1 - c0) * t[..., None] + rng.normal(0, 12, (height, width, 3))
    return image


def _mask(shape: int, height, width, top, left, size):
    """bool [height, width]: the pixels of one shape in the size x size square at (top, left)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    y, x = yy - top + 0.5, xx - left + 0.5  # pixel centres, relative to the square
    if CLASS_NAMES[shape] == "circle":
        r = size / 2
        return (y - r) ** 2 + (x - r) ** 2 <= r * r
    if CLASS_NAMES[shape] == "square":
        return (y >= 0) & (y < size) & (x >= 0) & (x < size)
    # An upward triangle: apex at the top centre, base along the bottom.
    half_width = (size / 2) * (y / size)
    return (y >= 0) & (y < size) & (np.abs(x - size / 2) <= half_width)


def _box(mask, height, width):
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    return np.array([rows[0] / height, cols[0] / width, (rows[-1] + 1) / height, (cols[-1] + 1) / width], np.float32)


def _overlap(a, b):
    """Intersection of boxes a and b over the smaller one's area."""
    h = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    w = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return h * w / smaller


def make_image(rng: np.random.Generator, height: int, width: int):
    """One image and its objects.

    Returns:
      image uint8 [height, width, 3]; boxes float32 [M, 4] ([ymin, xmin, ymax, xmax], normalised,
      the exact pixel extent of each shape); classes int32 [M] (1-based), 1 <= M <= MAX_OBJECTS.
    """
    image = _background(rng, height, width)
    wanted = int(rng.integers(1, MAX_OBJECTS + 1))
    boxes, classes = [], []
    short = min(height, width)
    for _ in range(50 * wanted):  # placement attempts; a crowded image keeps the objects placed so far
        if len(boxes) == wanted:
            break
        shape = int(rng.integers(len(CLASS_NAMES)))
        size = int(rng.uniform(MIN_SIZE, MAX_SIZE) * short)
        top, left = int(rng.integers(0, height - size + 1)), int(rng.integers(0, width - size + 1))
        mask = _mask(shape, height, width, top, left, size)
        box = _box(mask, height, width)
        if any(_overlap(box, other) > MAX_OVERLAP for other in boxes):
            continue
        behind = image[mask].mean(axis=0)
        colour = rng.uniform(0, 255, 3)
        if np.linalg.norm(colour - behind) < MIN_CONTRAST:
            # The far corner of the RGB cube is at least 255 * sqrt(3) / 2 away from any colour.
            colour = np.where(behind > 127.5, 0.0, 255.0)
        image[mask] = colour
        boxes.append(box)
        classes.append(shape + 1)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8), np.stack(boxes), np.array(classes, np.int32)


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
