"""What the two file runners share, without TensorFlow: `FileRunner`, the base of a `.tflite`
file on LiteRT (`tflite.runner.ModelFile`) and an `.onnx` file on ONNX Runtime
(`onnx.runner.OnnxFile`). Each runner loads its file and says how it runs one input (`run`); the
file's input (its name and type, the model's size, the graph's resize and order from the file's
metadata), how a photo is fed to it (`preprocess.feed`) and `detect` are this module's.
"""

from __future__ import annotations

import os

import numpy as np

from ssd_mobilenet.formats import preprocess
from ssd_mobilenet.formats.preprocess import ANY_SIZE, FLOAT32, INPUT_NAMES, MODEL_SIZE_UINT8


def first_line(error: Exception) -> str:
    """The first non-blank line of a runtime's error message (at most 200 characters), or the
    error's class name when it says nothing: the runtimes' messages run to many lines."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return (lines[0] if lines else type(error).__name__)[:200]


def input_type(input_name: str) -> str:
    """The type (`UINT8`, `FLOAT32`) of a file's input named `input_name` (one of `INPUT_NAMES`' values)."""
    return {name: kind for kind, name in INPUT_NAMES.items()}[input_name]


def thread_count(threads: int | None) -> int:
    """`threads`, or the CPU count when it is None or 0."""
    return int(threads or os.cpu_count() or 1)


class FileRunner:
    """A file of `migrate export` on its runtime: `detect(image uint8 [H, W, 3] RGB)` -> the
    four outputs (numpy, [1, D, ...]: `detection_boxes` [ymin, xmin, ymax, xmax] normalised to
    the image, `detection_scores`, `detection_classes` 1-based, `num_detections`), the photo fed
    as the file takes it (`feed`).

    Attributes (set by the runner's loading, through `_take_input`):
      input_name, input_type: the file's input (`preprocess.INPUT_NAMES`: `input_tensor` uint8
        or `normalized_input_image_tensor` float32).
      input_mode: ANY_SIZE, MODEL_SIZE_FLOAT32 or MODEL_SIZE_UINT8 (`preprocess`).
      image_size: [h, w], the model's input size (the network's).
      resize_method, normalize_before_resize: the graph's preprocessing the file (or `feed`)
        applies, from the file's metadata (BILINEAR and resize first when it says nothing).
    """

    def _take_input(self, input_name: str, image_size, any_size: bool, metadata: dict) -> None:
        """Sets the class docstring's attributes for a file whose one input is `input_name` (one of
        `INPUT_NAMES`' values), of a model of `image_size` (h, w), that takes photos of any size
        when `any_size`, with its `metadata` dict."""
        self.input_name = input_name
        self.input_type = input_type(input_name)
        self.image_size = [int(s) for s in image_size]
        self.resize_method = metadata.get("resize_method", "BILINEAR")
        self.normalize_before_resize = bool(metadata.get("normalize_before_resize", False))
        self.input_mode = preprocess.input_mode(any_size, self.input_type == FLOAT32)

    @property
    def any_size(self) -> bool:
        """Whether the file takes photos of any size and resizes them itself."""
        return self.input_mode == ANY_SIZE

    @property
    def exact_for_any_size(self) -> bool:
        """Whether a photo of any size gets the TF1 graph's preprocessing exactly, so its detections
        (not so for a fixed-size uint8 file: `preprocess`)."""
        return self.input_mode != MODEL_SIZE_UINT8

    @property
    def input_kind(self) -> str:
        """The input part of the runner's `kind` line: "uint8 input of any size, resized to
        300x300 inside", "float32 input of 300x300"."""
        h, w = self.image_size
        size = f"any size, resized to {h}x{w} inside" if self.any_size else f"{h}x{w}"
        return f"{self.input_type} input of {size}"

    def feed(self, image: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] RGB -> the file's input [1, ...] (`preprocess.feed`)."""
        return preprocess.feed(image, self.input_mode, self.image_size, self.resize_method,
                               self.normalize_before_resize)

    def run(self, feed: np.ndarray) -> dict:
        """The file's input [1, ...] as `feed` gives it -> the four outputs (numpy, [1, D, ...])."""
        raise NotImplementedError

    def detect(self, image: np.ndarray) -> dict:
        """uint8 [H, W, 3] RGB photo of any size -> the four outputs (numpy, [1, D, ...])."""
        return self.run(self.feed(image))
