"""The loss of one batch as the TF1 OD API's `SSDMetaArch.loss` composed it (TF 1.13 era).

Per image, the groundtruth one-hot classes get a background column 0 (with
`add_background_class`) and the target assigner matches them to the anchors; the localization
loss (NaN targets ignored) and the classification loss are computed per anchor; with a hard
example miner the mined sums replace the plain sums; both are divided by the number of matched
anchors (the sum of the regression weights, at least 1) when `normalize_loss_by_num_matches`, the
localization loss also by the code size with `normalize_loc_loss_by_codesize`, and multiplied by
their weights. Random example sampling and expected-loss weights (refused by `train_config`) are
not reproduced.

`sums` and `normalize` are the two halves of `__call__`: the unnormalised sums with the batch's
matched-anchor count, and the division. A batch split across replicas (`distribute`) gets the
whole batch's losses as the sum of its parts' `normalize(sums, total count)`, the count summed
over the parts first: the miner works per image, so only the normaliser couples the images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tensorflow as tf

from ssd_mobilenet.training import losses
from ssd_mobilenet.training.hard_example_miner import HardExampleMiner
from ssd_mobilenet.training.targets import ArgMaxMatcher, FasterRcnnBoxCoder, TargetAssigner

LOCALIZATION_LOSS = "Loss/localization_loss"  # the TF1 op names of the two loss tensors
CLASSIFICATION_LOSS = "Loss/classification_loss"


class LossSums(NamedTuple):
    """A batch's losses before normalisation (float32 scalars)."""

    localization: tf.Tensor  # the (mined) localization losses summed over anchors and images
    classification: tf.Tensor  # the same for classification, summed over classes too
    num_matches: tf.Tensor  # matched anchors of the batch: the sum of the regression weights


@dataclass(frozen=True)
class SSDLoss:
    """The SSD loss. `assigner.coder` also decodes the predictions for the miner."""

    assigner: TargetAssigner
    localization_loss: object = losses.WeightedSmoothL1()
    classification_loss: object = losses.WeightedSigmoid()
    localization_weight: float = 1.0
    classification_weight: float = 1.0
    hard_example_miner: "HardExampleMiner | None" = None
    normalize_loss_by_num_matches: bool = True
    normalize_loc_loss_by_codesize: bool = False
    add_background_class: bool = True
    encode_background_as_zeros: bool = False

    @classmethod
    def from_config(cls, config) -> "SSDLoss":
        """From a `train_config.TrainingConfig`."""
        loss = config.loss
        miner = None
        if loss.hard_example_miner is not None:
            miner = HardExampleMiner.from_config(loss.hard_example_miner, loss.classification_weight,
                                                 loss.localization_weight)
        assigner = TargetAssigner(ArgMaxMatcher.from_config(config.matcher),
                                  FasterRcnnBoxCoder(config.box_coder_scales), config.negative_class_weight)
        return cls(assigner, losses.localization_loss(loss), losses.classification_loss(loss),
                   loss.localization_weight, loss.classification_weight, miner,
                   config.normalize_loss_by_num_matches, config.normalize_loc_loss_by_codesize,
                   config.add_background_class, config.encode_background_as_zeros)

    def unmatched_class_label(self, num_class_slots: int):
        """[1, 0, ..., 0] (the background one-hot), or all zeros with `encode_background_as_zeros`."""
        return tf.constant([0.0 if self.encode_background_as_zeros else 1.0] + [0.0] * (num_class_slots - 1))

    def __call__(self, anchors, box_encodings, class_predictions_with_background, groundtruth_boxes_list,
                 groundtruth_classes_list, groundtruth_weights_list=None) -> dict:
        """The two losses of a batch of B images over A anchors: `normalize(sums(...))`, arguments as `sums`.

        Returns:
          {"Loss/localization_loss": float32 scalar, "Loss/classification_loss": float32 scalar}.
        """
        return self.normalize(self.sums(anchors, box_encodings, class_predictions_with_background,
                                        groundtruth_boxes_list, groundtruth_classes_list, groundtruth_weights_list))

    def sums(self, anchors, box_encodings, class_predictions_with_background, groundtruth_boxes_list,
             groundtruth_classes_list, groundtruth_weights_list=None) -> LossSums:
        """The unnormalised losses of a batch of B images over A anchors, and its matched-anchor count.

        Args:
          anchors: float32 [A, 4] anchors [ymin, xmin, ymax, xmax], normalised.
          box_encodings: float32 [B, A, 4] predicted codes [ty, tx, th, tw].
          class_predictions_with_background: float32 [B, A, C] logits, C = num_classes + 1 with
            the background column 0 (num_classes without `add_background_class`).
          groundtruth_boxes_list: B tensors [M_i, 4], normalised [ymin, xmin, ymax, xmax].
          groundtruth_classes_list: B tensors [M_i, num_classes], one-hot without background.
          groundtruth_weights_list: B tensors [M_i] or None (all 1; 0 marks padding).
        Returns:
          `LossSums`.
        """
        class_predictions_with_background = tf.convert_to_tensor(class_predictions_with_background, tf.float32)
        if self.add_background_class:
            groundtruth_classes_list = [tf.pad(tf.cast(c, tf.float32), [[0, 0], [1, 0]])
                                        for c in groundtruth_classes_list]
        num_class_slots = class_predictions_with_background.shape[-1]
        targets = self.assigner.batch_assign(anchors, groundtruth_boxes_list, groundtruth_classes_list,
                                             self.unmatched_class_label(num_class_slots), groundtruth_weights_list)
        location_losses = self.localization_loss(box_encodings, targets.reg_targets, weights=targets.reg_weights,
                                                 ignore_nan_targets=True)
        cls_losses = self.classification_loss(class_predictions_with_background, targets.cls_targets,
                                              weights=targets.cls_weights)
        if len(cls_losses.shape) > 2:  # ops.reduce_sum_trailing_dimensions(cls_losses, ndims=2)
            cls_losses = tf.reduce_sum(cls_losses, axis=list(range(2, len(cls_losses.shape))))
        if self.hard_example_miner is not None:
            decoded = self.assigner.coder.decode(box_encodings, anchors)
            localization_loss, classification_loss, _ = self.hard_example_miner(
                location_losses, cls_losses, decoded, targets.matches)
        else:
            localization_loss = tf.reduce_sum(location_losses)
            classification_loss = tf.reduce_sum(cls_losses)
        return LossSums(localization_loss, classification_loss, tf.reduce_sum(targets.reg_weights))

    def normalize(self, sums: LossSums, num_matches=None) -> dict:
        """The two weighted losses of `sums`, divided by `num_matches` (default `sums.num_matches`;
        a split batch passes the count of the whole, see the module docstring), at least 1, when
        `normalize_loss_by_num_matches`.

        Returns:
          {"Loss/localization_loss": float32 scalar, "Loss/classification_loss": float32 scalar}.
        """
        normalizer = tf.constant(1.0)
        if self.normalize_loss_by_num_matches:
            normalizer = tf.maximum(sums.num_matches if num_matches is None else num_matches, 1.0)
        localization_normalizer = normalizer
        if self.normalize_loc_loss_by_codesize:
            localization_normalizer = normalizer * self.assigner.coder.code_size
        return {
            LOCALIZATION_LOSS: (self.localization_weight / localization_normalizer) * sums.localization,
            CLASSIFICATION_LOSS: (self.classification_weight / normalizer) * sums.classification,
        }
