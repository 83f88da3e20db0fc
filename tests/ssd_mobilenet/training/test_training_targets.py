"""Target assignment against the OD API's own unit tests (tensorflow/models 9bf1fd02, research/object_detection).

Inputs and expected numbers are carried over from core/region_similarity_calculator_test.py,
matchers/argmax_matcher_test.py, box_coders/faster_rcnn_box_coder_test.py and
core/target_assigner_test.py; the tolerance is theirs, `assertAllClose`'s rtol = atol = 1e-6.
"""

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet.training.targets import IGNORED, UNMATCHED, ArgMaxMatcher, FasterRcnnBoxCoder, TargetAssigner, iou


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, np.float64), rtol=1e-6, atol=1e-6)


# region_similarity_calculator_test.py: test_get_correct_pairwise_similarity_based_on_iou
def test_iou():
    corners1 = [[4.0, 3.0, 7.0, 5.0], [5.0, 6.0, 10.0, 7.0]]
    corners2 = [[3.0, 4.0, 6.0, 8.0], [14.0, 14.0, 15.0, 15.0], [0.0, 0.0, 20.0, 20.0]]
    close(iou(corners1, corners2), [[2.0 / 16.0, 0, 6.0 / 400.0], [1.0 / 16.0, 0.0, 5.0 / 400.0]])


# ---- matchers/argmax_matcher_test.py ------------------------------------------------------------
SIMILARITY = np.array([[1., 1, 1, 3, 1], [2, -1, 2, 0, 4], [3, 0, -1, 0, 0]], np.float32)
UNMATCHED_ROW = np.array([[1, 1, 1, 3, 1], [-1, 0, -2, -2, -1], [3, 0, -1, 2, 0]], np.float32)


def check_matches(matches, matched_cols, matched_rows, unmatched_cols):
    matches = matches.numpy()
    np.testing.assert_array_equal(np.nonzero(matches >= 0)[0], matched_cols)
    np.testing.assert_array_equal(matches[matches >= 0], matched_rows)
    np.testing.assert_array_equal(np.nonzero(matches == UNMATCHED)[0], unmatched_cols)


@pytest.mark.parametrize("case", [
    # test_return_correct_matches_with_default_thresholds
    (dict(matched_threshold=None), SIMILARITY, None, [0, 1, 2, 3, 4], [2, 0, 1, 0, 1], []),
    # test_return_correct_matches_with_matched_threshold
    (dict(matched_threshold=3.), SIMILARITY, None, [0, 3, 4], [2, 0, 1], [1, 2]),
    # test_return_correct_matches_with_matched_and_unmatched_threshold (col 2 has too high a maximum)
    (dict(matched_threshold=3., unmatched_threshold=2.), SIMILARITY, None, [0, 3, 4], [2, 0, 1], [1]),
    # test_return_correct_matches_negatives_lower_than_unmatched_false (col 1 has too low a maximum)
    (dict(matched_threshold=3., unmatched_threshold=2., negatives_lower_than_unmatched=False), SIMILARITY, None,
     [0, 3, 4], [2, 0, 1], [2]),
    # test_return_correct_matches_unmatched_row_not_using_force_match
    (dict(matched_threshold=3., unmatched_threshold=2.), UNMATCHED_ROW, None, [0, 3], [2, 0], [1, 2, 4]),
    # test_return_correct_matches_unmatched_row_while_using_force_match
    (dict(matched_threshold=3., unmatched_threshold=2., force_match_for_each_row=True), UNMATCHED_ROW, None,
     [0, 1, 3], [2, 1, 0], [2, 4]),
    # test_return_correct_matches_using_force_match_padded_groundtruth
    (dict(matched_threshold=3., unmatched_threshold=2., force_match_for_each_row=True),
     np.array([[1, 1, 1, 3, 1], [-1, 0, -2, -2, -1], [0, 0, 0, 0, 0], [3, 0, -1, 2, 0], [0, 0, 0, 0, 0]], np.float32),
     np.array([True, True, False, True, False]), [0, 1, 3], [3, 1, 0], [2, 4]),
], ids=["default_thresholds", "matched_threshold", "matched_and_unmatched", "negatives_not_lower",
        "unmatched_row", "force_match", "force_match_padded"])
def test_argmax_matcher(case):
    kwargs, similarity, valid_rows, matched_cols, matched_rows, unmatched_cols = case
    matches = ArgMaxMatcher(**kwargs).match(similarity, valid_rows)
    check_matches(matches, matched_cols, matched_rows, unmatched_cols)


def test_argmax_matcher_ignored_columns_are_minus_two():
    # The column the unmatched test above leaves out (col 2 of matched_and_unmatched) is ignored.
    matches = ArgMaxMatcher(matched_threshold=3., unmatched_threshold=2.).match(SIMILARITY).numpy()
    assert matches[2] == IGNORED


# test_return_correct_matches_with_empty_rows
def test_argmax_matcher_empty_rows():
    matches = ArgMaxMatcher(matched_threshold=None).match(0.2 * np.ones([0, 5], np.float32))
    np.testing.assert_array_equal(np.nonzero(matches.numpy() == UNMATCHED)[0], np.arange(5))


def test_argmax_matcher_arguments():
    ArgMaxMatcher(matched_threshold=1, unmatched_threshold=1)  # test_valid_arguments_corner_case
    with pytest.raises(ValueError):  # test_invalid_arguments_corner_case_negatives_lower_than_thres_false
        ArgMaxMatcher(matched_threshold=1, unmatched_threshold=1, negatives_lower_than_unmatched=False)
    with pytest.raises(ValueError):  # test_invalid_arguments_no_matched_threshold
        ArgMaxMatcher(matched_threshold=None, unmatched_threshold=4)
    with pytest.raises(ValueError):  # test_invalid_arguments_unmatched_thres_larger_than_matched_thres
        ArgMaxMatcher(matched_threshold=1, unmatched_threshold=2)


# ---- box_coders/faster_rcnn_box_coder_test.py ---------------------------------------------------
BOXES = [[10.0, 10.0, 20.0, 15.0], [0.2, 0.1, 0.5, 0.4]]
ANCHORS = [[15.0, 12.0, 30.0, 18.0], [0.1, 0.0, 0.7, 0.9]]
CODES = [[-0.5, -0.416666, -0.405465, -0.182321], [-0.083333, -0.222222, -0.693147, -1.098612]]
SCALED_CODES = [[-1., -1.25, -1.62186, -0.911608], [-0.166667, -0.666667, -2.772588, -5.493062]]


def test_encode():  # test_get_correct_relative_codes_after_encoding
    close(FasterRcnnBoxCoder(None).encode(BOXES, ANCHORS), CODES)


def test_encode_with_scaling():  # test_get_correct_relative_codes_after_encoding_with_scaling
    close(FasterRcnnBoxCoder((2, 3, 4, 5)).encode(BOXES, ANCHORS), SCALED_CODES)


def test_encode_very_small_width_is_not_nan():  # test_very_small_Width_nan_after_encoding
    close(FasterRcnnBoxCoder(None).encode([[10.0, 10.0, 10.0000001, 20.0]], [[15.0, 12.0, 30.0, 18.0]]),
          [[-0.833333, 0., -21.128731, 0.510826]])


def test_decode_inverts_encode():  # test_get_correct_boxes_after_decoding(_with_scaling)
    close(FasterRcnnBoxCoder(None).decode(tf.constant(CODES), ANCHORS), BOXES)
    close(FasterRcnnBoxCoder((2, 3, 4, 5)).decode(tf.constant(SCALED_CODES), ANCHORS), BOXES)


# ---- core/target_assigner_test.py ----------------------------------------------------------------
class MeanStddevBoxCoder:
    """The coder of the OD API's target assigner tests (box_coders/mean_stddev_box_coder, stddev 0.1):
    codes are (box - anchor) / stddev. Their expected regression targets are in its codes."""

    code_size = 4

    def encode(self, boxes, anchors):
        return (tf.convert_to_tensor(boxes, tf.float32) - tf.convert_to_tensor(anchors, tf.float32)) / 0.1


def assigner(matched=0.5, unmatched=0.5):
    return TargetAssigner(ArgMaxMatcher(matched, unmatched), MeanStddevBoxCoder())


def check_targets(targets, cls_targets, cls_weights, reg_targets, reg_weights):
    for got, want in zip(targets[:4], (cls_targets, cls_weights, reg_targets, reg_weights)):
        assert got.dtype == tf.float32
        close(got, want)


ANCHORS3 = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 0.8], [0, 0.5, .5, 1.0]], np.float32)
GT2 = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 0.9, 0.9]], np.float32)


def test_assign_agnostic():  # test_assign_agnostic
    check_targets(assigner().assign(ANCHORS3, GT2), [[1], [1], [0]], [[1], [1], [1]],
                  [[0, 0, 0, 0], [0, 0, -1, 1], [0, 0, 0, 0]], [1, 1, 0])


def test_assign_class_agnostic_with_ignored_matches():  # test_assign_class_agnostic_with_ignored_matches
    anchors = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 0.8], [0.0, 0.5, .9, 1.0]], np.float32)
    check_targets(assigner(0.5, 0.3).assign(anchors, GT2), [[1], [1], [0]], [[1], [1], [0]],
                  [[0, 0, 0, 0], [0, 0, -1, 1], [0, 0, 0, 0]], [1, 1, 0])


ANCHORS4 = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 0.8], [0, 0.5, .5, 1.0], [.75, 0, 1.0, .25]], np.float32)
GT3 = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 0.9, 0.9], [.75, 0, .95, .27]], np.float32)
LABELS3 = np.array([[0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0, 0, 0]], np.float32)
BACKGROUND7 = [1, 0, 0, 0, 0, 0, 0]


def test_assign_multiclass():  # test_assign_multiclass
    targets = assigner().assign(ANCHORS4, GT3, LABELS3, BACKGROUND7)
    check_targets(targets,
                  [[0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0]],
                  np.ones([4, 7]), [[0, 0, 0, 0], [0, 0, -1, 1], [0, 0, 0, 0], [0, 0, -.5, .2]], [1, 1, 0, 1])


def test_assign_multiclass_with_groundtruth_weights():  # test_assign_multiclass_with_groundtruth_weights
    targets = assigner().assign(ANCHORS4, GT3, LABELS3, BACKGROUND7, np.array([0.3, 0., 0.5], np.float32))
    close(targets.cls_weights, [[0.3] * 7, [0] * 7, [1] * 7, [0.5] * 7])  # background gets weight 1
    close(targets.reg_weights, [0.3, 0., 0., 0.5])


def test_assign_empty_groundtruth():  # test_assign_empty_groundtruth
    targets = assigner().assign(ANCHORS4, np.zeros((0, 4), np.float32), np.zeros((0, 3), np.float32), [0, 0, 0])
    check_targets(targets, np.zeros([4, 3]), np.ones([4, 3]), np.zeros([4, 4]), [0, 0, 0, 0])


# BatchTargetAssignerTest
BATCH_ANCHORS = np.array([[0, 0, .25, .25], [0, .25, 1, 1], [0, .1, .5, .5], [.75, .75, 1, 1]], np.float32)
BATCH_GT1 = np.array([[0., 0., 0.2, 0.2]], np.float32)
BATCH_GT2 = np.array([[0, 0.25123152, 1, 1], [0.015789, 0.0985, 0.55789, 0.3842]], np.float32)
BATCH_REG_TARGETS = [[[0, 0, -0.5, -0.5], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
                     [[0, 0, 0, 0], [0, 0.01231521, 0, 0], [0.15789001, -0.01500003, 0.57889998, -1.15799987],
                      [0, 0, 0, 0]]]
BATCH_REG_WEIGHTS = [[1, 0, 0, 0], [0, 1, 1, 0]]
BATCH_CLS_TARGETS = [[[0, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]],
                     [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]]]


def test_batch_assign_targets():  # test_batch_assign_targets
    targets = assigner().batch_assign(BATCH_ANCHORS, [BATCH_GT1, BATCH_GT2], [None, None])
    check_targets(targets, [[[1], [0], [0], [0]], [[0], [1], [1], [0]]], np.ones([2, 4, 1]),
                  BATCH_REG_TARGETS, BATCH_REG_WEIGHTS)


def test_batch_assign_multiclass_targets():  # test_batch_assign_multiclass_targets
    labels = [np.array([[0, 1, 0, 0]], np.float32), np.array([[0, 0, 0, 1], [0, 0, 1, 0]], np.float32)]
    targets = assigner().batch_assign(BATCH_ANCHORS, [BATCH_GT1, BATCH_GT2], labels, [1, 0, 0, 0])
    check_targets(targets, BATCH_CLS_TARGETS, np.ones([2, 4, 4]), BATCH_REG_TARGETS, BATCH_REG_WEIGHTS)


def test_batch_assign_multiclass_targets_with_padded_groundtruth():
    # test_batch_assign_multiclass_targets_with_padded_groundtruth: zero-weight rows are padding.
    gt1 = np.array([[0., 0., 0.2, 0.2], [0., 0., 0., 0.]], np.float32)
    gt2 = np.concatenate([BATCH_GT2, np.zeros([1, 4], np.float32)])
    labels = [np.array([[0, 1, 0, 0], [0, 0, 0, 0]], np.float32),
              np.array([[0, 0, 0, 1], [0, 0, 1, 0], [0, 0, 0, 0]], np.float32)]
    weights = [np.array([1, 0], np.float32), np.array([1, 1, 0], np.float32)]
    targets = assigner().batch_assign(BATCH_ANCHORS, [gt1, gt2], labels, [1, 0, 0, 0], weights)
    check_targets(targets, BATCH_CLS_TARGETS, np.ones([2, 4, 4]), BATCH_REG_TARGETS, BATCH_REG_WEIGHTS)


def test_batch_assign_multidimensional_targets():  # test_batch_assign_multidimensional_targets
    labels = [np.array([[[0, 1, 1], [1, 1, 0]]], np.float32),
              np.array([[[0, 1, 1], [1, 1, 0]], [[0, 0, 1], [0, 0, 1]]], np.float32)]
    targets = assigner().batch_assign(BATCH_ANCHORS, [BATCH_GT1, BATCH_GT2], labels, np.zeros((2, 3), np.float32))
    zero = [[0., 0., 0.], [0., 0., 0.]]
    check_targets(targets, [[[[0., 1., 1.], [1., 1., 0.]], zero, zero, zero],
                            [zero, [[0., 1., 1.], [1., 1., 0.]], [[0., 0., 1.], [0., 0., 1.]], zero]],
                  np.ones([2, 4, 2, 3]), BATCH_REG_TARGETS, BATCH_REG_WEIGHTS)


def test_batch_assign_empty_groundtruth():  # test_batch_assign_empty_groundtruth
    targets = assigner().batch_assign(BATCH_ANCHORS[:2], [np.zeros((0, 4), np.float32)],
                                      [np.zeros((0, 4), np.float32)], [1, 0, 0, 0])
    check_targets(targets, [[[1, 0, 0, 0], [1, 0, 0, 0]]], np.ones([1, 2, 4]), np.zeros([1, 2, 4]), [[0, 0]])
