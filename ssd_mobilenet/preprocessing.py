"""Image preprocessing of the TF1 SSD graph (scope `Preprocessor`).

uint8 [N, H, W, 3] -> float32 cast -> resize to the config size with TF1's *legacy* resize
kernels (`half_pixel_centers=False`, `align_corners=False`) -> `x * float32(2/255) - 1`,
or, for graphs of newer OD API code (`config.normalize_before_resize`), the scaling first
and the resize of the scaled image: the same values up to rounding (~2.4e-7 for BILINEAR),
so each order is reproduced as the graph has it to stay bit-exact.
TF2's `tf.image.resize` uses half-pixel centres and differs from the TF1 graph by up to
1.25 after scaling, so the raw ops are called directly. The TF1 graph resizes image by
image in a `map_fn`; the kernels work per image, so resizing the batch at once is the same.
When resizing first, uint8 images go into the resize kernels as they are: the kernels convert
every pixel to float before interpolating, so the result is bit-identical to casting first,
without a float32 copy of the full-size batch (4x the input's memory)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ssd_mobilenet.config.ssd_config import SSDConfig

# float32(2.0 / 255.0): the graph's `Preprocessor/mul/x`; dividing by 127.5 differs by an ulp.
SCALE = np.float32(2.0 / 255.0)

_RESIZE_OPS = {
    "BILINEAR": tf.raw_ops.ResizeBilinear,
    "NEAREST_NEIGHBOR": tf.raw_ops.ResizeNearestNeighbor,
    "BICUBIC": tf.raw_ops.ResizeBicubic,
    "AREA": tf.raw_ops.ResizeArea,
}


def resize(images, config: SSDConfig):
    """uint8 or float32 [N, H, W, 3] -> float32 [N, image_height, image_width, 3] (legacy TF1 kernels)."""
    size = tf.constant([config.image_height, config.image_width], tf.int32)
    op = _RESIZE_OPS[config.resize_method]
    if config.resize_method == "AREA":
        return op(images=images, size=size, align_corners=False)
    out = op(images=images, size=size, align_corners=False, half_pixel_centers=False)
    return tf.cast(out, tf.float32)


def normalize(images):
    """float32 [N, H, W, 3] in [0, 255] -> float32 [N, H, W, 3] in [-1, 1]: `x * float32(2/255) - 1`,
    the graph's `Preprocessor/mul` and `Preprocessor/sub` (a multiply and a subtract, each
    rounded to float32, as there)."""
    return SCALE * images - 1.0


def preprocess(images, config: SSDConfig):
    """uint8 (or float) [N, H, W, 3] images -> float32 [N, h, w, 3] in [-1, 1] (TF1 scope
    `Preprocessor`; `pad_to_multiple` is applied later, by the feature extractor)."""
    images = tf.convert_to_tensor(images)
    if config.normalize_before_resize:
        # The graph scales the full-size float32 image and resizes the scaled values, so the
        # uint8 shortcut below does not apply: the kernels must see the same float32 inputs as
        # the graph's. All four legacy kernels take float32 and return float32 (ResizeArea,
        # ResizeBicubic and ResizeBilinear always return float32; ResizeNearestNeighbor returns
        # its input type), computing exactly as in the graph's map loop.
        return resize(normalize(tf.cast(images, tf.float32)), config)
    x = resize(images if images.dtype == tf.uint8 else tf.cast(images, tf.float32), config)
    return normalize(x)
