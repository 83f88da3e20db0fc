"""Generated images of solid shapes with their exact boxes: circles, squares and triangles in
varied colours and sizes on noisy gradient backgrounds, everything following from a seeded
`numpy.random.Generator`. No TensorFlow.

Two users, one generator (the same pixels for the same seed): the training demo's dataset
(`ssd_mobilenet.training.shapes_dataset` writes them as the Object Detection API's records) and
the int8 exports' calibration images when the user gives none
(`ssd_mobilenet.formats.network.generated_images`).

The shapes are made easy to learn: three distinct outlines, each object at least a sixth of the
image's shorter side, 1 to 4 objects per image, overlapping little, and every object's colour
far from the background behind it. Each box is the exact extent of its shape's pixels:
[ymin, xmin, ymax, xmax] = [top row, left column, bottom row + 1, right column + 1] divided by
the image's height and width.
"""

from __future__ import annotations

import numpy as np

CLASS_NAMES = ("circle", "square", "triangle")  # class ids 1, 2, 3
MAX_OBJECTS = 4
# Object sizes as fractions of the image's shorter side.
MIN_SIZE, MAX_SIZE = 1 / 6, 1 / 2
# Largest share of an object's box another object's box may cover.
MAX_OVERLAP = 0.25
# Least distance (RGB, 0-255) between an object's colour and the mean colour of what it covers.
MIN_CONTRAST = 120.0


def _background(rng, height, width):
    """A linear gradient between two random colours in a random direction, plus pixel noise."""
    c0, c1 = rng.uniform(0, 255, (2, 3))
    angle = rng.uniform(0, 2 * np.pi)
    # Per column plus per row, broadcast: each pixel's sum as the [height, width] grids computed it.
    xs, ys = np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32)
    t = (np.cos(angle) * xs / width)[None, :] + (np.sin(angle) * ys / height)[:, None]
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    image = c0 + (c1 - c0) * t[..., None] + rng.normal(0, 12, (height, width, 3))
    return image


def _mask(shape: int, size: int):
    """bool [size, size]: the pixels of one shape within its size x size square. (No pixel outside
    the square belongs to a shape, so only the square is computed.)"""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    y, x = yy + 0.5, xx + 0.5  # pixel centres, relative to the square
    if CLASS_NAMES[shape] == "circle":
        r = size / 2
        return (y - r) ** 2 + (x - r) ** 2 <= r * r
    if CLASS_NAMES[shape] == "square":
        return np.ones((size, size), bool)
    # An upward triangle: apex at the top centre, base along the bottom.
    half_width = (size / 2) * (y / size)
    return np.abs(x - size / 2) <= half_width


def _box(mask, top: int, left: int, height, width):
    """The normalised box of `mask` (a shape's square whose top left pixel is (top, left))."""
    rows, cols = np.flatnonzero(mask.any(axis=1)) + top, np.flatnonzero(mask.any(axis=0)) + left
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
        mask = _mask(shape, size)
        box = _box(mask, top, left, height, width)
        if any(_overlap(box, other) > MAX_OVERLAP for other in boxes):
            continue
        square = image[top:top + size, left:left + size]  # a view: painting it paints the image
        behind = square[mask].mean(axis=0)
        colour = rng.uniform(0, 255, 3)
        if np.linalg.norm(colour - behind) < MIN_CONTRAST:
            # The far corner of the RGB cube is at least 255 * sqrt(3) / 2 away from any colour.
            colour = np.where(behind > 127.5, 0.0, 255.0)
        square[mask] = colour
        boxes.append(box)
        classes.append(shape + 1)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8), np.stack(boxes), np.array(classes, np.int32)
