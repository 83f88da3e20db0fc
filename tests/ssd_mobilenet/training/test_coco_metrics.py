"""COCO metrics on the OD API's own evaluator tests (metrics/coco_evaluation_test.py) and on cases
whose value follows from COCO's definitions."""

from __future__ import annotations

import numpy as np
import pytest

from ssd_mobilenet.training.coco_metrics import METRIC_NAMES, CocoDetectionEvaluator, to_absolute

CATEGORIES = [{"id": 0, "name": "person"}, {"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]


def _three_images(classes):
    ev = CocoDetectionEvaluator(CATEGORIES)
    for (image, box, score), cls in zip((("image1", [100., 100., 200., 200.], .8),
                                         ("image2", [50., 50., 100., 100.], .7),
                                         ("image3", [25., 25., 50., 50.], .9)), classes):
        ev.add_groundtruth(image, [box], [cls])
        ev.add_detections(image, [box], [score], [cls])
    return ev.evaluate()


def test_matching_detections_give_one():
    # CocoDetectionEvaluationTest.testGetOneMAPWithMatchingGroundtruthAndDetections.
    assert _three_images([1, 1, 1])["DetectionBoxes_Precision/mAP"] == pytest.approx(1.0)


def test_every_summary_metric_of_the_od_api_test():
    # CocoEvaluationPyFuncTest.testGetOneMAPWithMatchingGroundtruthAndDetections: class 3 is not a
    # category, so image2 (the only medium box) does not count and the medium ranges read -1.
    metrics = _three_images([1, 3, 2])
    expected = {"Precision/mAP": 1.0, "Precision/mAP@.50IOU": 1.0, "Precision/mAP@.75IOU": 1.0,
                "Precision/mAP (large)": 1.0, "Precision/mAP (medium)": -1.0, "Precision/mAP (small)": 1.0,
                "Recall/AR@1": 1.0, "Recall/AR@10": 1.0, "Recall/AR@100": 1.0, "Recall/AR@100 (large)": 1.0,
                "Recall/AR@100 (medium)": -1.0, "Recall/AR@100 (small)": 1.0}
    assert list(metrics) == list(METRIC_NAMES)
    for name, value in expected.items():
        assert metrics["DetectionBoxes_" + name] == pytest.approx(value), name


def test_crowd_groundtruth_is_skipped():
    # testGetOneMAPWithMatchingGroundtruthAndDetectionsSkipCrowd.
    ev = CocoDetectionEvaluator(CATEGORIES)
    ev.add_groundtruth("image1", [[100., 100., 200., 200.], [99., 99., 200., 200.]], [1, 2], is_crowd=[0, 1])
    ev.add_detections("image1", [[100., 100., 200., 200.]], [.8], [1])
    assert ev.evaluate()["DetectionBoxes_Precision/mAP"] == pytest.approx(1.0)


def test_duplicates_are_ignored_and_detections_need_groundtruth():
    # testRejectionOnDuplicateGroundtruth, testRejectionOnDuplicateDetections,
    # testExceptionRaisedWithMissingGroundtruth.
    ev = CocoDetectionEvaluator([{"id": 1, "name": "cat"}])
    with pytest.raises(ValueError, match="no groundtruth"):
        ev.add_detections("img1", [[0, 0, 1, 1]], [.8], [1])
    ev.add_groundtruth("img1", [[0, 0, 10, 10]], [1])
    with pytest.warns(UserWarning, match="already added"):
        ev.add_groundtruth("img1", [[0, 0, 10, 10]], [1])
    ev.add_detections("img1", [[0, 0, 10, 10]], [.8], [1])
    with pytest.warns(UserWarning, match="already added"):
        ev.add_detections("img1", [[0, 0, 5, 5]], [.9], [1])
    assert ev.num_images == 1
    assert ev.evaluate()["DetectionBoxes_Precision/mAP"] == pytest.approx(1.0)


def test_a_missed_object_and_a_false_positive():
    # Two objects, one found: recall 0.5 at every IoU; a higher-scored false positive in front of
    # the hit makes precision 0.5 at that recall, so COCO's interpolated AP is 0.5 * 0.5 = 0.25
    # summed over the 101 recall points up to 0.5 (51 of 101) -> 51/101 * 0.5.
    ev = CocoDetectionEvaluator([{"id": 1, "name": "cat"}])
    ev.add_groundtruth("a", [[0, 0, 100, 100], [200, 200, 300, 300]], [1, 1])
    ev.add_detections("a", [[500, 500, 600, 600], [0, 0, 100, 100]], [.9, .8], [1, 1])
    metrics = ev.evaluate()
    assert metrics["DetectionBoxes_Precision/mAP"] == pytest.approx(51 / 101 * 0.5)
    assert metrics["DetectionBoxes_Recall/AR@100"] == pytest.approx(0.5)
    assert metrics["DetectionBoxes_Recall/AR@1"] == pytest.approx(0.0)


def test_no_detections_score_zero():
    ev = CocoDetectionEvaluator([{"id": 1, "name": "cat"}])
    ev.add_groundtruth("a", [[0, 0, 100, 100]], [1])
    assert ev.evaluate()["DetectionBoxes_Precision/mAP"] == 0.0


def test_to_absolute_multiplies_in_float32():
    boxes = np.array([[0.1, 0.2, 0.7, 0.9]], np.float32)
    out = to_absolute(boxes, 480, 640)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, boxes * np.float32([480, 640, 480, 640]))
