"""Target assignment of the TF1 Object Detection API's SSD: IoU, ArgMaxMatcher, box encoding, targets.

Boxes are [ymin, xmin, ymax, xmax], normalised to the image. Every function reproduces the op
order of tensorflow/models research/object_detection at commit 9bf1fd02 (2019-02-21, TF 1.13 era):
core/box_list_ops.iou, matchers/argmax_matcher.py, core/matcher.py (gather_based_on_match),
box_coders/faster_rcnn_box_coder.py and core/target_assigner.py.

Where releases differ: before 2018-07 the matcher's forced matches ignored `valid_rows` (padded
groundtruth rows could claim anchors) and the target assigner returned per-anchor `cls_weights`
[A]; here, as in TF 1.13, padded rows (weight 0) never force a match and `cls_weights` is tiled to
the shape of `cls_targets` (the same loss either way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tensorflow as tf

from ssd_mobilenet import box_coder

UNMATCHED = -1  # match result of a negative anchor (column)
IGNORED = -2    # match result of an anchor between the thresholds: no loss at all
# faster_rcnn_box_coder.EPSILON: added to every height and width before the division and log.
EPSILON = 1e-8


def intersection(boxes1, boxes2):
    """Pairwise intersection areas, as `box_list_ops.intersection`: float32 [N, 4] x [M, 4] boxes
    [ymin, xmin, ymax, xmax] -> float32 [N, M] (0 where two boxes do not overlap)."""
    ymin1, xmin1, ymax1, xmax1 = tf.split(tf.convert_to_tensor(boxes1, tf.float32), 4, axis=1)
    ymin2, xmin2, ymax2, xmax2 = tf.split(tf.convert_to_tensor(boxes2, tf.float32), 4, axis=1)
    heights = tf.maximum(0.0, tf.minimum(ymax1, tf.transpose(ymax2)) - tf.maximum(ymin1, tf.transpose(ymin2)))
    widths = tf.maximum(0.0, tf.minimum(xmax1, tf.transpose(xmax2)) - tf.maximum(xmin1, tf.transpose(xmin2)))
    return heights * widths


def iou(boxes1, boxes2):
    """Pairwise intersection over union, as `box_list_ops.iou`.

    Args:
      boxes1: float32 [N, 4] boxes [ymin, xmin, ymax, xmax].
      boxes2: float32 [M, 4] boxes.
    Returns:
      float32 [N, M]; exactly 0 where two boxes do not intersect (also for empty boxes).
    """
    intersections = intersection(boxes1, boxes2)
    ymin1, xmin1, ymax1, xmax1 = tf.split(tf.convert_to_tensor(boxes1, tf.float32), 4, axis=1)
    ymin2, xmin2, ymax2, xmax2 = tf.split(tf.convert_to_tensor(boxes2, tf.float32), 4, axis=1)
    areas1 = tf.squeeze((ymax1 - ymin1) * (xmax1 - xmin1), [1])
    areas2 = tf.squeeze((ymax2 - ymin2) * (xmax2 - xmin2), [1])
    unions = tf.expand_dims(areas1, 1) + tf.expand_dims(areas2, 0) - intersections
    return tf.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections), intersections / unions)


@dataclass(frozen=True)
class ArgMaxMatcher:
    """Matches each column (anchor) of a similarity matrix to its most similar row (groundtruth).

    Columns whose best similarity is >= `matched_threshold` keep the argmax row; below
    `unmatched_threshold` they are UNMATCHED (negatives); in between IGNORED. With
    `negatives_lower_than_unmatched=False` the two labels swap. `matched_threshold=None` matches
    every column. `force_match_for_each_row` then gives each valid row its best column (the
    first row wins a column two rows pick), overriding the thresholds.
    """

    matched_threshold: "float | None" = 0.5
    unmatched_threshold: "float | None" = None
    negatives_lower_than_unmatched: bool = True
    force_match_for_each_row: bool = False

    def __post_init__(self):
        # The constructor checks of argmax_matcher.ArgMaxMatcher.
        if self.matched_threshold is None and self.unmatched_threshold is not None:
            raise ValueError("unmatched_threshold needs matched_threshold")
        if self.unmatched_threshold is None:
            object.__setattr__(self, "unmatched_threshold", self.matched_threshold)
        elif self.unmatched_threshold > self.matched_threshold:
            raise ValueError("unmatched_threshold must not exceed matched_threshold")
        if not self.negatives_lower_than_unmatched and self.unmatched_threshold == self.matched_threshold:
            raise ValueError("negatives between the thresholds need unmatched_threshold < matched_threshold")

    @classmethod
    def from_config(cls, config) -> "ArgMaxMatcher":
        """From a `train_config.ArgMaxMatcherConfig` (`use_matmul_gather` changes no value)."""
        return cls(config.matched_threshold, config.unmatched_threshold, config.negatives_lower_than_unmatched,
                   config.force_match_for_each_row)

    def match(self, similarity, valid_rows=None):
        """Match results for a similarity matrix.

        Args:
          similarity: float32 [N, M], rows groundtruth, columns anchors.
          valid_rows: bool [N]; rows that may force a match (default: all).
        Returns:
          int32 [M]: the matched row, UNMATCHED (-1) or IGNORED (-2) per column.
        """
        similarity = tf.convert_to_tensor(similarity, tf.float32)
        if valid_rows is None:
            valid_rows = tf.ones(tf.shape(similarity)[:1], tf.bool)
        rows = similarity.shape[0]
        if rows == 0:
            return -tf.ones(tf.shape(similarity)[1:], tf.int32)
        if rows is None:  # padded groundtruth inside a tf.function: decide at run time
            return tf.cond(tf.shape(similarity)[0] > 0, lambda: self._match(similarity, valid_rows),
                           lambda: -tf.ones(tf.shape(similarity)[1:], tf.int32))
        return self._match(similarity, valid_rows)

    def _match(self, similarity, valid_rows):
        matches = tf.argmax(similarity, 0, output_type=tf.int32)
        if self.matched_threshold is not None:
            best = tf.reduce_max(similarity, 0)
            below = best < self.unmatched_threshold
            between = tf.logical_and(best >= self.unmatched_threshold, best < self.matched_threshold)
            low, mid = (UNMATCHED, IGNORED) if self.negatives_lower_than_unmatched else (IGNORED, UNMATCHED)
            matches = tf.where(below, low, matches)
            matches = tf.where(between, mid, matches)
        if not self.force_match_for_each_row:
            return matches
        best_columns = tf.argmax(similarity, 1, output_type=tf.int32)
        forced = tf.one_hot(best_columns, tf.shape(similarity)[1]) * tf.cast(valid_rows, tf.float32)[:, None]
        # argmax over rows of the one-hot picks: a column picked by two rows goes to the first.
        forced_rows = tf.argmax(forced, 0, output_type=tf.int32)
        return tf.where(tf.cast(tf.reduce_max(forced, 0), tf.bool), forced_rows, matches)


def gather_by_match(matches, values, unmatched_value, ignored_value):
    """`values[row]` for matched columns, else `unmatched_value` / `ignored_value` (`Match.gather_based_on_match`).

    Args:
      matches: int32 [M] match results.
      values: [N, ...] per-row values (cast to float32).
      unmatched_value, ignored_value: [...] values for UNMATCHED and IGNORED columns.
    Returns:
      float32 [M, ...].
    """
    table = tf.concat([tf.stack([tf.cast(ignored_value, tf.float32), tf.cast(unmatched_value, tf.float32)]),
                       tf.cast(values, tf.float32)], axis=0)
    return tf.gather(table, tf.maximum(matches + 2, 0))


@dataclass(frozen=True)
class FasterRcnnBoxCoder:
    """[ty, tx, th, tw] codes of boxes relative to anchors; `scales` None means unscaled codes."""

    scales: "tuple | None" = (10.0, 10.0, 5.0, 5.0)
    code_size = 4

    def encode(self, boxes, anchors):
        """Codes of `boxes` [A, 4] relative to `anchors` [A, 4] (both [ymin, xmin, ymax, xmax]) -> [A, 4].

        As `FasterRcnnBoxCoder._encode`: EPSILON is added to every height and width, so a
        degenerate box gives a large negative log, not NaN; the scales multiply.
        """
        yc_a, xc_a, ha, wa = _center_size(anchors)
        yc, xc, h, w = _center_size(boxes)
        ha, wa, h, w = ha + EPSILON, wa + EPSILON, h + EPSILON, w + EPSILON
        tx = (xc - xc_a) / wa
        ty = (yc - yc_a) / ha
        tw = tf.math.log(w / wa)
        th = tf.math.log(h / ha)
        if self.scales:
            ty, tx, th, tw = ty * self.scales[0], tx * self.scales[1], th * self.scales[2], tw * self.scales[3]
        return tf.stack([ty, tx, th, tw], axis=-1)

    def decode(self, codes, anchors):
        """Boxes [..., A, 4] of codes [..., A, 4] relative to `anchors` [A, 4] (the inference decode)."""
        if not self.scales:
            return box_coder.decode(codes, anchors, (1.0, 1.0, 1.0, 1.0))
        return box_coder.decode(codes, anchors, self.scales)


def _center_size(boxes):
    """(ycenter, xcenter, height, width) in `BoxList.get_center_coordinates_and_sizes` op order."""
    ymin, xmin, ymax, xmax = tf.unstack(tf.convert_to_tensor(boxes, tf.float32), axis=-1)
    width = xmax - xmin
    height = ymax - ymin
    return ymin + height / 2.0, xmin + width / 2.0, height, width


class Targets(NamedTuple):
    """Targets of one image (A anchors) or, from `batch_assign`, of a batch (leading [B])."""

    cls_targets: tf.Tensor  # float32 [A, ...labels]: the matched row's label, else unmatched_class_label
    cls_weights: tf.Tensor  # float32 [A, ...labels]: gt weight, negative_class_weight (unmatched), 0 (ignored)
    reg_targets: tf.Tensor  # float32 [A, 4]: codes of the matched gt box, 0 elsewhere
    reg_weights: tf.Tensor  # float32 [A]: gt weight of matched anchors, 0 elsewhere
    matches: tf.Tensor      # int32 [A]: matched gt row, UNMATCHED or IGNORED


@dataclass(frozen=True)
class TargetAssigner:
    """`core.target_assigner.TargetAssigner` with IoU similarity.

    `matcher` has `match(similarity [N, M], valid_rows [N]) -> int32 [M]`; `coder` has
    `encode(boxes, anchors)` and `code_size`.
    """

    matcher: ArgMaxMatcher
    coder: FasterRcnnBoxCoder = FasterRcnnBoxCoder()
    negative_class_weight: float = 1.0

    def assign(self, anchors, gt_boxes, gt_labels=None, unmatched_class_label=None, gt_weights=None) -> Targets:
        """Targets of one image.

        Args:
          anchors: float32 [A, 4] anchors [ymin, xmin, ymax, xmax].
          gt_boxes: float32 [M, 4] groundtruth boxes (M may be 0).
          gt_labels: float32 [M, ...] labels, e.g. one-hot [M, num_classes + 1] with background
            column 0; None: a single class, labels [M, 1] of ones.
          unmatched_class_label: float32 [...] label of unmatched and ignored anchors, e.g.
            [1, 0, ..., 0]; None: [0].
          gt_weights: float32 [M]; 0 marks padding (never matched by force). None: ones.
        Returns:
          `Targets`.
        """
        gt_boxes = tf.convert_to_tensor(gt_boxes, tf.float32)
        num_gt = tf.shape(gt_boxes)[0]
        if gt_labels is None:
            gt_labels = tf.ones([num_gt, 1], tf.float32)
        if unmatched_class_label is None:
            unmatched_class_label = tf.constant([0.0])
        gt_weights = tf.ones([num_gt], tf.float32) if gt_weights is None else tf.cast(gt_weights, tf.float32)
        unmatched_class_label = tf.cast(unmatched_class_label, tf.float32)
        matches = self.matcher.match(iou(gt_boxes, anchors), valid_rows=gt_weights > 0)
        zeros = tf.zeros([self.coder.code_size], tf.float32)
        matched_boxes = gather_by_match(matches, gt_boxes, zeros, zeros)
        reg_targets = tf.where((matches >= 0)[:, None], self.coder.encode(matched_boxes, anchors),
                               tf.zeros_like(matched_boxes))
        cls_targets = gather_by_match(matches, gt_labels, unmatched_class_label, unmatched_class_label)
        reg_weights = gather_by_match(matches, gt_weights, 0.0, 0.0)
        cls_weights = gather_by_match(matches, gt_weights, self.negative_class_weight, 0.0)
        # Per-anchor weights tiled over the label dimensions (TF 1.13; earlier releases kept [A]).
        label_rank = len(cls_targets.shape) - 1
        cls_weights = tf.reshape(cls_weights, [-1] + [1] * label_rank) * tf.ones_like(cls_targets)
        return Targets(cls_targets, cls_weights, reg_targets, reg_weights, matches)

    def batch_assign(self, anchors, gt_boxes_list, gt_labels_list=None, unmatched_class_label=None,
                     gt_weights_list=None) -> Targets:
        """`assign` per image (lists of per-image [M_i, ...] tensors), stacked to [B, A, ...]."""
        batch = len(gt_boxes_list)
        gt_labels_list = gt_labels_list or [None] * batch
        gt_weights_list = gt_weights_list or [None] * batch
        per_image = [self.assign(anchors, boxes, labels, unmatched_class_label, weights)
                     for boxes, labels, weights in zip(gt_boxes_list, gt_labels_list, gt_weights_list)]
        return Targets(*(tf.stack(parts) for parts in zip(*per_image)))
