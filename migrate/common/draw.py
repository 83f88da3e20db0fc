"""Drawing detection boxes on an image and writing it as PNG, with TensorFlow's own image ops."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ssd_mobilenet import atomic_write


def _outline_rings(boxes: np.ndarray, height: int, width: int, thickness: int) -> np.ndarray:
    """[K, 4] normalised boxes -> [R, 4]: each box shrunk by 0..thickness-1 pixels.

    `tf.image.draw_bounding_boxes` draws 1-pixel outlines at `coordinate * (size - 1)`;
    nested boxes one pixel apart make a thicker line that stays inside the box. Rings
    that would turn inside out on a small box are left out.
    """
    step = np.array([1.0 / max(height - 1, 1), 1.0 / max(width - 1, 1)] * 2, np.float64)
    rings = []
    for k in range(thickness):
        ring = boxes.astype(np.float64) + k * step * np.array([1, 1, -1, -1])
        rings.append(ring[(ring[:, 2] >= ring[:, 0]) & (ring[:, 3] >= ring[:, 1])])
    return np.concatenate(rings).astype(np.float32)


def draw_detections(image, groups, out_png_path, thickness: int = 2) -> None:
    """Draws box outlines on a copy of `image` and writes it as a PNG (atomically).

    Args:
      image: uint8 [H, W, 3] RGB.
      groups: sequence of `(boxes, (r, g, b))`: boxes float [K, 4] normalised
        [ymin, xmin, ymax, xmax] (K may be 0), colour components 0..255. Later
        groups are drawn over earlier ones.
      out_png_path: the PNG to write; missing parent folders are created.
      thickness: outline width in pixels, drawn inside each box.
    Raises:
      ValueError: on a wrong image dtype/shape, box shape or colour.
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image must be uint8 [H, W, 3], got {image.dtype} {list(image.shape)}")
    height, width = image.shape[:2]
    canvas = tf.cast(image[None], tf.float32)
    for boxes, colour in groups:
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4) if np.size(boxes) else np.zeros([0, 4], np.float32)
        colour = np.asarray(colour, np.float32)
        if colour.shape != (3,) or colour.min() < 0 or colour.max() > 255:
            raise ValueError(f"colour must be (r, g, b) in 0..255, got {tuple(colour.tolist())}")
        if not len(boxes):
            continue
        rings = _outline_rings(boxes, height, width, max(int(thickness), 1))
        canvas = tf.image.draw_bounding_boxes(canvas, rings[None], np.append(colour, 255.0)[None])
    png = tf.io.encode_png(tf.cast(canvas[0], tf.uint8)).numpy()
    atomic_write.write_bytes(out_png_path, png)
