"""COCO detection metrics with pycocotools, as the TF1 OD API's `CocoDetectionEvaluator` computed them.

Per image the evaluator takes the groundtruth and the detections in *absolute* pixel
coordinates [ymin, xmin, ymax, xmax] (the OD API scaled the normalised boxes by the original
image size in float32 before exporting them) and exports them as COCO does them:
`bbox` [x, y, width, height] with the width and height float32 differences, groundtruth `area`
the float32 product of its sides, `iscrowd` 0 unless given, 1-based category ids from the label
map. `evaluate` runs pycocotools' `COCOeval` (iouType "bbox", its defaults: IoU 0.50:0.95,
100 detections per image) and returns its twelve summary numbers under the OD API's names
(`DetectionBoxes_Precision/mAP`, `.../mAP@.50IOU`, ... `DetectionBoxes_Recall/AR@100 (large)`);
-1 marks a size range without groundtruth, as pycocotools reports it.

Groundtruth or detections added twice for an image are ignored with a warning, and detections
for an image without groundtruth are refused (the OD API did both).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections import OrderedDict

import numpy as np

PREFIX = "DetectionBoxes_"
# COCOeval.stats in order (pycocotools' summarize()).
SUMMARY_NAMES = ("Precision/mAP", "Precision/mAP@.50IOU", "Precision/mAP@.75IOU", "Precision/mAP (small)",
                 "Precision/mAP (medium)", "Precision/mAP (large)", "Recall/AR@1", "Recall/AR@10", "Recall/AR@100",
                 "Recall/AR@100 (small)", "Recall/AR@100 (medium)", "Recall/AR@100 (large)")
METRIC_NAMES = tuple(PREFIX + n for n in SUMMARY_NAMES)


def to_absolute(boxes, height: int, width: int) -> np.ndarray:
    """Normalised [M, 4] [ymin, xmin, ymax, xmax] -> pixels, multiplied in float32 as the OD API's
    `box_list_ops.to_absolute_coordinates`."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    return boxes * np.array([height, width, height, width], np.float32)


def _coco_box(box) -> list:
    # [ymin, xmin, ymax, xmax] -> [x, y, w, h]; the differences in the boxes' float32.
    return [float(box[1]), float(box[0]), float(box[3] - box[1]), float(box[2] - box[0])]


class CocoDetectionEvaluator:
    """Accumulates images' groundtruth and detections; `evaluate()` -> {metric name: float}.

    Args:
      categories: [{"id": int (1-based), "name": str}, ...]: the classes evaluated (a detection or
        groundtruth of another id does not count, as in pycocotools); None: the classes of the
        groundtruth added (a class without groundtruth has no precision and enters no mean).
    """

    def __init__(self, categories=None):
        self.categories = None if categories is None else [{"id": int(c["id"]), "name": str(c["name"])}
                                                           for c in categories]
        self._images = []
        self._groundtruth = []
        self._detections = []
        self._with_groundtruth = set()
        self._with_detections = set()

    @property
    def num_images(self) -> int:
        return len(self._images)

    def add_groundtruth(self, image_id, boxes, classes, is_crowd=None) -> None:
        """boxes float [M, 4] absolute [ymin, xmin, ymax, xmax]; classes int [M] (1-based)."""
        if image_id in self._with_groundtruth:
            warnings.warn(f"groundtruth for image {image_id!r} already added; ignored", stacklevel=2)
            return
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        classes = np.asarray(classes).reshape(-1)
        crowd = np.zeros(len(boxes), int) if is_crowd is None or len(is_crowd) == 0 else np.asarray(is_crowd)
        self._with_groundtruth.add(image_id)
        self._images.append({"id": image_id})
        for box, cls, c in zip(boxes, classes, crowd):
            self._groundtruth.append({
                "id": len(self._groundtruth) + 1, "image_id": image_id, "category_id": int(cls),
                "bbox": _coco_box(box), "area": float((box[2] - box[0]) * (box[3] - box[1])), "iscrowd": int(c)})

    def add_detections(self, image_id, boxes, scores, classes) -> None:
        """boxes float [D, 4] absolute [ymin, xmin, ymax, xmax]; scores [D]; classes int [D] (1-based)."""
        if image_id not in self._with_groundtruth:
            raise ValueError(f"detections for image {image_id!r}, which has no groundtruth")
        if image_id in self._with_detections:
            warnings.warn(f"detections for image {image_id!r} already added; ignored", stacklevel=2)
            return
        self._with_detections.add(image_id)
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        for box, score, cls in zip(boxes, np.asarray(scores).reshape(-1), np.asarray(classes).reshape(-1)):
            self._detections.append({"image_id": image_id, "category_id": int(cls), "bbox": _coco_box(box),
                                     "score": float(score)})

    def evaluate(self) -> "OrderedDict[str, float]":
        """The twelve COCO summary metrics under the OD API's names (module docstring)."""
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

        if not self._images:
            raise ValueError("no images to evaluate")
        categories = self.categories
        if categories is None:
            categories = [{"id": c, "name": str(c)} for c in sorted({g["category_id"] for g in self._groundtruth})]
        groundtruth = COCO()
        groundtruth.dataset = {"images": list(self._images), "categories": categories,
                               "annotations": list(self._groundtruth)}
        # pycocotools prints as it indexes, evaluates and summarises; the caller reports.
        with contextlib.redirect_stdout(io.StringIO()):
            groundtruth.createIndex()
            detections = self._detection_set(groundtruth, categories)
            coco_eval = COCOeval(groundtruth, detections, iouType="bbox")
            coco_eval.params.imgIds = [image["id"] for image in self._images]
            coco_eval.evaluate()
            coco_eval.accumulate()
            coco_eval.summarize()
        return OrderedDict((name, float(v)) for name, v in zip(METRIC_NAMES, coco_eval.stats))

    def _detection_set(self, groundtruth, categories):
        from pycocotools.coco import COCO
        if self._detections:
            return groundtruth.loadRes([dict(d) for d in self._detections])
        # loadRes cannot take an empty list: an empty result set scores 0 where there is groundtruth.
        empty = COCO()
        empty.dataset = {"images": list(self._images), "categories": categories, "annotations": []}
        empty.createIndex()
        return empty


def format_table(metrics) -> str:
    """The metrics as two aligned columns, in COCO's order."""
    width = max(len(k) for k in metrics)
    return "\n".join(f"{k:<{width}}  {v:8.4f}" for k, v in metrics.items())
