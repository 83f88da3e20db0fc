"""`export`: a converted model directory -> a deployable file (`--tflite OUT.tflite`).

`export(converted, tflite=OUT, ...)` is the command as a library function; what the file holds
and how each post-processing mode differs from the TF graph is `ssd_mobilenet.export.tflite`'s
docstring. Bad input (no converted model, an unreadable checkpoint, an existing OUT without
`force`, a bad option) raises `ExportInputError` with one line naming the path, before
anything is written; the file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import os
import time

import numpy as np
import tensorflow as tf

from ssd_mobilenet import atomic_write
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.export import tflite as tflite_lib
from ssd_mobilenet.image_io import error_message


# Detections a user would show: the floor of the agreement the command reports.
REPORT_MIN_SCORE = 0.5
MATCH_IOU = 0.5


class ExportInputError(ValueError):
    """A converted directory that cannot be read, an output that may not be written, a bad option."""


def load_converted(converted: str):
    """The Keras model of a converted directory, or `ExportInputError` naming the directory."""
    if not os.path.isdir(converted):
        raise ExportInputError(f"{converted}: no such directory (expected the output of `migrate convert`)")
    if not os.path.isfile(os.path.join(converted, detector_lib.CONFIG_FILE)):
        raise ExportInputError(f"{converted}: not a converted model directory (no {detector_lib.CONFIG_FILE})")
    try:
        return detector_lib.load_model(converted)
    # A truncated tensor data file: the checkpoint reader raises IndexError ("Read less bytes
    # than requested").
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
        raise ExportInputError(f"{converted}: cannot load the converted model: {error_message(e)}") from None


def export(converted: str, tflite: str, nms: str = tflite_lib.PER_CLASS, input_type: str = tflite_lib.UINT8,
           max_detections: int | None = None, force: bool = False, progress=None) -> dict:
    """Writes the TFLite file of `converted` to `tflite`.

    Args:
      converted: a directory written by `migrate convert`.
      tflite: the `.tflite` file to write.
      nms, input_type, max_detections: `ssd_mobilenet.export.tflite.convert`'s.
      force: replace an existing `tflite`.
    Returns:
      dict: notes (what the file differs in from the converted model), out, bytes, nms, input, max_detections, operators (the file's op names), seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(tflite, force, is_dir=False, flag="--tflite", error=ExportInputError)
    if nms not in tflite_lib.NMS_MODES:
        raise ExportInputError(f"--nms {nms}: one of {', '.join(tflite_lib.NMS_MODES)}")
    if input_type not in tflite_lib.INPUT_TYPES:
        raise ExportInputError(f"--input {input_type}: one of {', '.join(tflite_lib.INPUT_TYPES)}")
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    model = load_converted(converted)
    if model.config.weight_bits:
        raise ExportInputError(f"{converted}: a quantization-aware model (FakeQuant ranges); its TFLite export "
                               "is not supported")
    max_detections = max_detections or model.config.max_total_detections
    say(f"converting to TFLite ({nms} NMS, {input_type} input, {max_detections} detections)")
    data = tflite_lib.convert(model, nms=nms, input_type=input_type, max_detections=max_detections)
    atomic_write.write_bytes(tflite, data)
    notes = [tflite_lib.DIFFERENCES[nms]] if nms in tflite_lib.DIFFERENCES else []
    return {"notes": notes, "out": os.path.abspath(tflite), "bytes": len(data), "nms": nms, "input": input_type,
            "max_detections": max_detections, "operators": tflite_lib.operator_names(data),
            "seconds": time.perf_counter() - start}


def _iou(a, b):
    """[n, 4] x [m, 4] [ymin, xmin, ymax, xmax] -> [n, m] IoU."""
    ymin, xmin = np.maximum(a[:, None, 0], b[None, :, 0]), np.maximum(a[:, None, 1], b[None, :, 1])
    ymax, xmax = np.minimum(a[:, None, 2], b[None, :, 2]), np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(ymax - ymin, 0, None) * np.clip(xmax - xmin, 0, None)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def agreement(ref: dict, ours: dict, min_score: float = REPORT_MIN_SCORE, iou: float = MATCH_IOU) -> dict:
    """How many of `ref`'s detections scoring >= `min_score` `ours` also has: one to one, same
    class, IoU >= `iou`, pairs of highest IoU first (a counterpart may score anything).

    Args:
      ref, ours: detection dicts (numpy, [N, D, ...], the signature's four keys), same images.
    Returns:
      dict: reference (detections counted), matched, rate (matched / reference, 1.0 when there
      are none), mean_iou of the matched pairs (1.0 when none), max_score_diff of the pairs.
    """
    total = matched = 0
    ious, score_diffs = [], []
    for i in range(len(ref["num_detections"])):
        n1, n2 = int(ref["num_detections"][i]), int(ours["num_detections"][i])
        keep = np.flatnonzero(ref["detection_scores"][i, :n1] >= min_score)
        total += len(keep)
        if not len(keep) or not n2:
            continue
        b1, c1, s1 = ref["detection_boxes"][i, keep], ref["detection_classes"][i, keep], ref["detection_scores"][i, keep]
        b2, c2, s2 = (ours["detection_boxes"][i, :n2], ours["detection_classes"][i, :n2],
                      ours["detection_scores"][i, :n2])
        overlap = _iou(b1, b2)
        pairs = sorted(((overlap[a, b], a, b) for a in range(len(keep)) for b in range(n2)
                        if c1[a] == c2[b] and overlap[a, b] >= iou), reverse=True)
        used1, used2 = set(), set()
        for value, a, b in pairs:
            if a not in used1 and b not in used2:
                used1.add(a)
                used2.add(b)
                ious.append(value)
                score_diffs.append(abs(float(s1[a]) - float(s2[b])))
        matched += len(used1)
    return {"reference": total, "matched": matched, "rate": matched / total if total else 1.0,
            "mean_iou": float(np.mean(ious)) if ious else 1.0,
            "max_score_diff": float(max(score_diffs, default=0.0))}
