"""Online hard example mining of the OD API's SSD (`core.losses.HardExampleMiner`, TF 1.13 era).

Per image: score each anchor by its loss (`loss_type`), keep the hardest by greedy NMS over the
decoded predicted boxes (`num_hard_examples`, suppressing IoU > `iou_threshold`), then, given the
match results, keep every positive and the first negatives in that order up to
max(`min_negatives_per_image`, int(`max_negatives_per_positive` * positives)). The losses summed
over the kept anchors of every image are the mined losses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tensorflow as tf

LOSS_TYPES = {"BOTH": "both", "CLASSIFICATION": "cls", "LOCALIZATION": "loc"}


class MiningSummary(NamedTuple):
    """Per image, the positives and negatives kept (what TF1 wrote as HardExampleMiner/Num*)."""

    num_positives: tf.Tensor  # int32 [B]
    num_negatives: tf.Tensor  # int32 [B]


@dataclass(frozen=True)
class HardExampleMiner:
    """Hard example miner. `loss_type` is `cls`, `loc` or `both` (`cls_loss_weight` * cls +
    `loc_loss_weight` * loc); None for `num_hard_examples` keeps all NMS survivors and for
    `max_negatives_per_positive` skips the negative:positive subsampling. The defaults are the
    OD API class's own (a pipeline.config goes through `from_config`)."""

    num_hard_examples: "int | None" = 64
    iou_threshold: float = 0.7
    loss_type: str = "both"
    cls_loss_weight: float = 0.05
    loc_loss_weight: float = 0.06
    max_negatives_per_positive: "float | None" = None
    min_negatives_per_image: int = 0

    @classmethod
    def from_config(cls, miner_config, classification_weight, localization_weight) -> "HardExampleMiner":
        """As losses_builder.build_hard_example_miner: 0 means None for the two counts, and the
        loss weights of `model.ssd.loss` weigh the `both` score."""
        return cls(num_hard_examples=miner_config.num_hard_examples or None,
                   iou_threshold=miner_config.iou_threshold,
                   loss_type=LOSS_TYPES[miner_config.loss_type],
                   cls_loss_weight=classification_weight, loc_loss_weight=localization_weight,
                   max_negatives_per_positive=float(miner_config.max_negatives_per_positive) or None,
                   min_negatives_per_image=miner_config.min_negatives_per_image)

    def __call__(self, location_losses, cls_losses, decoded_boxes, matches=None):
        """Mined losses of a batch.

        Args:
          location_losses: float32 [B, A] per-anchor localization losses.
          cls_losses: float32 [B, A] per-anchor classification losses (summed over classes).
          decoded_boxes: float32 [B, A, 4] predicted boxes [ymin, xmin, ymax, xmax].
          matches: int32 [B, A] match results (row >= 0 positive, -1 negative, -2 ignored), or
            None: no negative:positive subsampling.
        Returns:
          (location loss, classification loss, summary): float32 scalars summed over the selected
          anchors of all images; a `MiningSummary` when subsampling ran, else None.
        """
        location_losses = tf.unstack(tf.convert_to_tensor(location_losses, tf.float32))
        cls_losses = tf.unstack(tf.convert_to_tensor(cls_losses, tf.float32))
        decoded_boxes = tf.unstack(tf.convert_to_tensor(decoded_boxes, tf.float32))
        subsample = self.max_negatives_per_positive is not None and matches is not None
        mined_loc, mined_cls, positives, negatives = [], [], [], []
        for i, boxes in enumerate(decoded_boxes):
            scores = self._scores(location_losses[i], cls_losses[i])
            max_output = self.num_hard_examples if self.num_hard_examples is not None else tf.shape(boxes)[0]
            selected = tf.image.non_max_suppression(boxes, scores, max_output, self.iou_threshold)
            if subsample:
                selected, num_positives, num_negatives = self._subsample(selected, matches[i])
                positives.append(num_positives)
                negatives.append(num_negatives)
            mined_loc.append(tf.reduce_sum(tf.gather(location_losses[i], selected)))
            mined_cls.append(tf.reduce_sum(tf.gather(cls_losses[i], selected)))
        summary = MiningSummary(tf.stack(positives), tf.stack(negatives)) if subsample else None
        return tf.reduce_sum(tf.stack(mined_loc)), tf.reduce_sum(tf.stack(mined_cls)), summary

    def _scores(self, location_losses, cls_losses):
        if self.loss_type == "loc":
            return location_losses
        if self.loss_type == "both":
            return cls_losses * self.cls_loss_weight + location_losses * self.loc_loss_weight
        return cls_losses

    def _subsample(self, selected, matches):
        """All positives among `selected` (in NMS order) and the negatives up to the cap.

        As the OD API: the cap counts negatives by a running sum, and the kept set is "positive
        or running count <= cap", so an ignored anchor (-2) before the cap is reached is kept too.
        """
        matches = tf.gather(matches, selected)
        is_positive = matches >= 0
        num_positives = tf.reduce_sum(tf.cast(is_positive, tf.int32))
        cap = tf.maximum(self.min_negatives_per_image,
                         tf.cast(self.max_negatives_per_positive * tf.cast(num_positives, tf.float32), tf.int32))
        within_cap = tf.cumsum(tf.cast(tf.equal(matches, -1), tf.int32)) <= cap
        kept = tf.reshape(tf.where(tf.logical_or(is_positive, within_cap)), [-1])
        return tf.gather(selected, kept), num_positives, tf.size(kept) - num_positives
