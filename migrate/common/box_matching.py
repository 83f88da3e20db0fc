"""Matching two lists of detections one to one, as `verify` and `export` compare two models' detections."""

from __future__ import annotations

import numpy as np


def pairwise_iou(boxes_a, boxes_b) -> np.ndarray:
    """IoU of every box in [K, 4] with every box in [M, 4] ([ymin, xmin, ymax, xmax]) -> float64 [K, M];
    0 where the union is empty."""
    a, b = np.asarray(boxes_a, np.float64)[:, None], np.asarray(boxes_b, np.float64)[None]
    h = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    w = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    area = lambda x: np.clip(x[..., 2] - x[..., 0], 0, None) * np.clip(x[..., 3] - x[..., 1], 0, None)  # noqa: E731
    union = area(a) + area(b) - h * w
    return np.where(union > 0, h * w / np.where(union > 0, union, 1), 0.0)


def pair_by_class(boxes_a, classes_a, boxes_b, classes_b, min_iou: float) -> list:
    """One-to-one pairs (i, j, iou) of detections of the same class with IoU >= `min_iou`, pairs of
    highest IoU first: with dense detections a box overlaps its neighbours by up to the NMS
    threshold, and its own counterpart (IoU ~0.99) must win."""
    if not len(boxes_a) or not len(boxes_b):
        return []
    ious = pairwise_iou(boxes_a, boxes_b)
    candidates = sorted(((ious[i, j], i, j) for i in range(len(boxes_a)) for j in range(len(boxes_b))
                         if classes_a[i] == classes_b[j] and ious[i, j] >= min_iou), reverse=True)
    used_a, used_b, pairs = set(), set(), []
    for value, i, j in candidates:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((i, j, float(value)))
    return pairs
