"""What every runtime of `predict` shares: its result per image and its errors (no TensorFlow)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_BATCH = 8
MAX_BATCH = 64


@dataclass
class Result:
    """The detections of one image, or why it could not be read.

    boxes: float32 [K, 4] [ymin, xmin, ymax, xmax] normalised to the image;
    scores: float32 [K]; classes: int64 [K] 1-based class ids; K = num_detections.
    """

    path: str
    height: int = 0
    width: int = 0
    boxes: np.ndarray = field(default_factory=lambda: np.zeros([0, 4], np.float32))
    scores: np.ndarray = field(default_factory=lambda: np.zeros([0], np.float32))
    classes: np.ndarray = field(default_factory=lambda: np.zeros([0], np.int64))
    error: str | None = None


def from_outputs(path: str, height: int, width: int, outputs: dict, row: int = 0) -> Result:
    """A `Result` from row `row` of a model's four outputs (numpy, [N, D, ...])."""
    k = int(outputs["num_detections"][row])
    return Result(path, int(height), int(width), outputs["detection_boxes"][row, :k],
                  outputs["detection_scores"][row, :k], outputs["detection_classes"][row, :k].astype(np.int64))


def unreadable(path: str, error: Exception) -> Result:
    """The `Result` of an image that cannot be read: the error's reason, without the path it names."""
    reason = str(error)
    return Result(path, error=reason[len(path) + 2:] if reason.startswith(path + ": ") else reason)
