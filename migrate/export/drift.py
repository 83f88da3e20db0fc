"""How far an int8 file's detections drift from a float reference's: the agreement by class and
IoU that `export --int8` (`--tflite` and `--onnx`) and a quantization-aware model's export report,
and the notes and warnings they print from it."""

from __future__ import annotations

import numpy as np

from migrate.common import box_matching
from ssd_mobilenet.detections import DETECTION_OUTPUTS

# Detections a user would show: the floor of the agreement the command reports.
REPORT_MIN_SCORE = 0.5
MATCH_IOU = 0.5
# How many of the calibration images the int8 file is compared on with the float model.
DRIFT_IMAGES = 16
# The four detection outputs both sides of a comparison hold (the SavedModel signature's).


def drift_of(names, pairs) -> dict:
    """`agreement` over all images of the (float reference, int8 file) output pairs (numpy, the
    four outputs [1, D, ...] each), one pair per name, plus per_image [(name, agreement)]."""
    refs, ours, per_image = [], [], []
    for name, (ref, out) in zip(names, pairs):
        per_image.append((name, agreement(ref, out)))
        refs.append(ref)
        ours.append(out)
    joined = [{k: np.concatenate([d[k] for d in side]) for k in DETECTION_OUTPUTS} for side in (refs, ours)]
    return dict(agreement(*joined), per_image=per_image)


def drift_notes(drift: dict, compared_on: str, reference: str, warn=None, precision: str = "int8") -> list:
    """The export's notes on `drift` (`drift_of`'s) measured on `compared_on` ("generated
    images") against `reference` ("the float model"); `warn` (None: no warnings) is called for
    each image whose detections scoring >= `REPORT_MIN_SCORE` the `precision` file ("int8",
    "float16": the lines start with it) does not all keep."""
    if not drift["reference"]:
        return [f"{precision}: {reference} has no detections scoring >= {REPORT_MIN_SCORE} on the "
                f"{len(drift['per_image'])} {compared_on} to compare the quantized file's with"]
    for name, a in drift["per_image"] if warn else []:
        if a["matched"] < a["reference"]:
            # Kept: the same class at IoU >= MATCH_IOU (the result line says so).
            warn(f"warning: {name}: {precision} kept {a['matched']} of {a['reference']} detections scoring >= "
                 f"{REPORT_MIN_SCORE}")
    return [f"{precision}: {drift['matched']} of {drift['reference']} detections scoring >= {REPORT_MIN_SCORE} "
            f"on {len(drift['per_image'])} {compared_on} kept (same class, IoU >= {MATCH_IOU}), "
            f"mean IoU {drift['mean_iou']:.3f}, scores within {drift['max_score_diff']:.3f}"]


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
        b1, c1, s1 = (ref["detection_boxes"][i, keep], ref["detection_classes"][i, keep],
                      ref["detection_scores"][i, keep])
        b2, c2, s2 = (ours["detection_boxes"][i, :n2], ours["detection_classes"][i, :n2],
                      ours["detection_scores"][i, :n2])
        pairs = box_matching.pair_by_class(b1, c1, b2, c2, iou)
        ious.extend(value for _, _, value in pairs)
        score_diffs.extend(abs(float(s1[a]) - float(s2[b])) for a, b, _ in pairs)
        matched += len(pairs)
    return {"reference": total, "matched": matched, "rate": matched / total if total else 1.0,
            "mean_iou": float(np.mean(ious)) if ious else 1.0,
            "max_score_diff": float(max(score_diffs, default=0.0))}
