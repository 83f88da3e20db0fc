"""The TF1 graph's `Preprocessor` in numpy, bit for bit, for files that take an image already at
the model's size (the float32 `normalized_input_image_tensor` files, and uint8 files written with
a fixed size): the legacy resize kernels TensorFlow runs for `ResizeBilinear` and
`ResizeNearestNeighbor` with `align_corners=False, half_pixel_centers=False`, then
`x * float32(2/255) - 1`. The arithmetic is TensorFlow's CPU kernels' (resize_bilinear_op.cc,
resize_nearest_neighbor_op.cc), operation for operation in float32, so the results are
identical (tests/ssd_mobilenet/formats/test_images_and_preprocess.py compares them with the TensorFlow ops on
real photos).

A file takes one input, of one of two types (`INPUT_TYPES`), under its type's name (`INPUT_NAMES`,
the same in the `.tflite` and the `.onnx` file): the photo, uint8 `input_tensor` (`UINT8`), or the
scaled image, float32 `normalized_input_image_tensor` (`FLOAT32`, the input
`export_tflite_ssd_graph.py` graphs took).

How a photo reaches a file's network, for both file runners (`file_runner.FileRunner`) and the
writers' checks (`network.file_input`), by the file's input mode:
- `ANY_SIZE` (uint8 files that resize inside, the default export): the photo goes in as it is;
- `MODEL_SIZE_FLOAT32`: the graph's `Preprocessor` here (`preprocess`), the scaled image goes in;
- `MODEL_SIZE_UINT8` (uint8 files written with a fixed size): resized here as the graph resizes,
  rounded to uint8 for the file. Exact for photos of the model's size; for other sizes the
  rounding moves pixels by up to 0.5.
"""

from __future__ import annotations

import numpy as np

# float32(2.0 / 255.0): the graph's `Preprocessor/mul/x`; dividing by 127.5 differs by an ulp.
SCALE = np.float32(2.0 / 255.0)
RESIZE_METHODS = ("BILINEAR", "NEAREST_NEIGHBOR")
# A file's input types and their tensor names (module docstring).
UINT8 = "uint8"
FLOAT32 = "float32"
INPUT_TYPES = (UINT8, FLOAT32)
INPUT_NAMES = {UINT8: "input_tensor", FLOAT32: "normalized_input_image_tensor"}
# How a file takes a photo (`input_mode`, module docstring).
ANY_SIZE = "any size"
MODEL_SIZE_FLOAT32 = "model size, float32"
MODEL_SIZE_UINT8 = "model size, uint8"


def _legacy_scale(in_size: int, out_size: int) -> np.float32:
    # CalculateResizeScale without align_corners: in / out, divided in float32.
    return np.float32(in_size) / np.float32(out_size)


def _bilinear_weights(in_size: int, out_size: int):
    """(lower int [out], upper int [out], lerp float32 [out]): the legacy scaler's source
    positions `i * scale`, their floor and ceil (clamped) and the fraction."""
    position = np.arange(out_size, dtype=np.float32) * _legacy_scale(in_size, out_size)
    floor = np.floor(position)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(position).astype(np.int64), in_size - 1)
    return lower, upper, (position - floor).astype(np.float32)


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """[H, W, C] (any real dtype) -> float32 [height, width, C]: TensorFlow's legacy
    `ResizeBilinear` (`top + (bottom - top) * y_lerp` of the two rows' `left + (right - left) * x_lerp`)."""
    image = np.asarray(image, np.float32)
    y0, y1, ly = _bilinear_weights(image.shape[0], height)
    x0, x1, lx = _bilinear_weights(image.shape[1], width)
    lx = lx[None, :, None]
    top_rows, bottom_rows = image[y0], image[y1]
    top = top_rows[:, x0] + (top_rows[:, x1] - top_rows[:, x0]) * lx
    bottom = bottom_rows[:, x0] + (bottom_rows[:, x1] - bottom_rows[:, x0]) * lx
    return top + (bottom - top) * ly[:, None, None]


def resize_nearest(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """[H, W, C] -> [height, width, C] of the same dtype: the legacy `ResizeNearestNeighbor`
    (source index `min(floor(i * scale), size - 1)`)."""
    image = np.asarray(image)

    def index(in_size, out_size):
        position = np.arange(out_size, dtype=np.float32) * _legacy_scale(in_size, out_size)
        return np.minimum(np.floor(position).astype(np.int64), in_size - 1)

    return image[index(image.shape[0], height)][:, index(image.shape[1], width)]


def normalize(image: np.ndarray) -> np.ndarray:
    """float32 values in [0, 255] -> `x * float32(2/255) - 1` in float32 (the graph's mul and sub)."""
    return (SCALE * np.asarray(image, np.float32) - np.float32(1.0)).astype(np.float32)


def preprocess(image: np.ndarray, height: int, width: int, method: str = "BILINEAR",
               normalize_before_resize: bool = False) -> np.ndarray:
    """uint8 [H, W, 3] -> float32 [height, width, 3] in [-1, 1], as the graph's `Preprocessor`
    (resize then scale, or scale then resize for `normalize_before_resize` graphs).

    Raises:
      ValueError: a resize method TFLite runtimes have no kernel for here (BICUBIC, AREA).
    """
    if method not in RESIZE_METHODS:
        raise ValueError(f"resize method {method}: only {', '.join(RESIZE_METHODS)} are reproduced without TensorFlow")
    resize = resize_bilinear if method == "BILINEAR" else resize_nearest
    image = np.asarray(image, np.float32)
    if normalize_before_resize:
        return np.asarray(resize(normalize(image), height, width), np.float32)
    return normalize(resize(image, height, width))


def input_mode(any_size: bool, float32_input: bool) -> str:
    """How a file takes a photo (module docstring): at any size (`any_size`), else at the model's
    size, already scaled (`float32_input`) or as uint8."""
    return ANY_SIZE if any_size else MODEL_SIZE_FLOAT32 if float32_input else MODEL_SIZE_UINT8


def feed(image: np.ndarray, input_mode: str, image_size, resize_method: str = "BILINEAR",
         normalize_before_resize: bool = False) -> np.ndarray:
    """uint8 [H, W, 3] RGB -> the input [1, ...] of a file of `input_mode` (module docstring)
    whose model takes `image_size` (h, w) with the graph's `resize_method` and order."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be uint8 [H, W, 3], got {image.dtype} {list(image.shape)}")
    if input_mode == ANY_SIZE:
        return image[None]
    h, w = image_size
    if input_mode == MODEL_SIZE_FLOAT32:
        return preprocess(image, h, w, resize_method, normalize_before_resize)[None]
    if image.shape[:2] == (h, w):
        return image[None]
    resize = resize_bilinear if resize_method == "BILINEAR" else resize_nearest
    return np.clip(np.rint(resize(image, h, w)), 0, 255).astype(np.uint8)[None]
