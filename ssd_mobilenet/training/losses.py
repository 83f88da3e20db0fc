"""The OD API's per-anchor losses (core/losses.py), in TF2 with the TF1 op order.

Shapes as in the OD API: predictions and targets [B, A, code_size] (localization) or
[B, A, num_classes] (classification, background column included); localization weights
[B, A]; classification weights [B, A, num_classes] or [B, A, 1] (broadcast over the classes).
Localization losses return [B, A] (summed over the code), the sigmoid losses [B, A, num_classes],
softmax [B, A]. Every call takes `ignore_nan_targets` (a NaN target is replaced by the
prediction, so it costs nothing) and `losses_mask` ([B] bool; images where it is False give 0).

Behaviour of tensorflow/models commit 9bf1fd02 (2019-02-21, TF 1.13 era). Earlier releases
(the 2018-01 code the 2018 zoo models were trained with) differ: smooth L1 had no `delta`
(fixed at 1, `|x| < 1` quadratic) and applied the weight after summing over the code, and the
sigmoid losses took per-anchor weights [B, A]; values agree up to float32 rounding.
"""

from __future__ import annotations

import tensorflow as tf


class _Loss:
    """`core.losses.Loss.__call__`: NaN targets and the per-image mask, then the loss itself."""

    def __call__(self, prediction, target, weights, ignore_nan_targets=False, losses_mask=None, **kwargs):
        prediction = tf.convert_to_tensor(prediction, tf.float32)
        target = tf.convert_to_tensor(target, tf.float32)
        weights = tf.convert_to_tensor(weights, tf.float32)
        if ignore_nan_targets:
            target = tf.where(tf.math.is_nan(target), prediction, target)
        if losses_mask is not None:
            prediction, target, weights = (x * _image_mask(losses_mask, x) for x in (prediction, target, weights))
        return self._compute(prediction, target, weights, **kwargs)


def _image_mask(losses_mask, tensor):
    """[B] bool as float32 [B, 1, ...] broadcasting against `tensor`."""
    return tf.reshape(tf.cast(losses_mask, tf.float32), [-1] + [1] * (len(tensor.shape) - 1))


def _class_weights(weights, class_indices, num_classes):
    """Zeroes the weights of classes outside `class_indices` (all classes count when None)."""
    if class_indices is None:
        return weights
    return weights * tf.reshape(tf.reduce_max(tf.one_hot(class_indices, num_classes), 0), [1, 1, -1])


class WeightedL2(_Loss):
    """0.5 * ||weight * (prediction - target)||^2 per anchor -> [B, A]."""

    def _compute(self, prediction, target, weights):
        weighted_diff = (prediction - target) * tf.expand_dims(weights, 2)
        return tf.reduce_sum(0.5 * tf.square(weighted_diff), 2)


class WeightedSmoothL1(_Loss):
    """Huber loss summed over the code -> [B, A]: 0.5 x^2 for |x| <= delta, delta (|x| - 0.5 delta) above.

    As `tf.losses.huber_loss(target, prediction, delta, weights[..., None], reduction=NONE)`
    (TF 1.13): the weight multiplies each code element before the sum.
    """

    def __init__(self, delta=1.0):
        self.delta = delta

    def _compute(self, prediction, target, weights):
        abs_error = tf.abs(prediction - target)
        quadratic = tf.minimum(abs_error, self.delta)
        # abs_error - quadratic rather than max(abs_error - delta, 0): huber_loss's gradient at |x| == delta.
        linear = abs_error - quadratic
        per_element = 0.5 * (quadratic * quadratic) + self.delta * linear
        return tf.reduce_sum(per_element * tf.expand_dims(weights, 2), 2)


class WeightedSigmoid(_Loss):
    """Sigmoid cross entropy per class -> [B, A, num_classes]; `class_indices` restricts the classes."""

    def _compute(self, prediction, target, weights, class_indices=None):
        weights = _class_weights(weights, class_indices, tf.shape(prediction)[2])
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=prediction) * weights


class SigmoidFocal(_Loss):
    """Focal loss (Lin et al. 2017) -> [B, A, num_classes]: sigmoid cross entropy times
    (1 - p_t)^gamma and, when `alpha` is not None, alpha for positives / (1 - alpha) for negatives."""

    def __init__(self, gamma=2.0, alpha=0.25):
        self.gamma = gamma
        self.alpha = alpha

    def _compute(self, prediction, target, weights, class_indices=None):
        weights = _class_weights(weights, class_indices, tf.shape(prediction)[2])
        cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=prediction)
        probabilities = tf.sigmoid(prediction)
        p_t = target * probabilities + (1 - target) * (1 - probabilities)
        modulating = tf.pow(1.0 - p_t, self.gamma) if self.gamma else 1.0
        alpha_weight = target * self.alpha + (1 - target) * (1 - self.alpha) if self.alpha is not None else 1.0
        return modulating * alpha_weight * cross_entropy * weights


class WeightedSoftmax(_Loss):
    """Softmax cross entropy over the classes of logits / `logit_scale` -> [B, A], weighted by
    the mean of each anchor's class weights."""

    def __init__(self, logit_scale=1.0):
        self.logit_scale = logit_scale

    def _compute(self, prediction, target, weights):
        weights = tf.reduce_mean(weights, axis=2)
        num_classes = prediction.shape[-1]
        logits = tf.divide(prediction, self.logit_scale)
        # TF1's softmax_cross_entropy_with_logits passed no gradient to the labels.
        labels = tf.stop_gradient(tf.reshape(target, [-1, num_classes]))
        per_row = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=tf.reshape(logits, [-1, num_classes]))
        return tf.reshape(per_row, tf.shape(weights)) * weights


def localization_loss(loss_config):
    """The localization loss a `train_config.LossConfig` names."""
    if loss_config.localization == "weighted_smooth_l1":
        return WeightedSmoothL1(loss_config.smooth_l1_delta)
    return WeightedL2()


def classification_loss(loss_config):
    """The classification loss a `train_config.LossConfig` names."""
    if loss_config.classification == "weighted_softmax":
        return WeightedSoftmax(loss_config.softmax_logit_scale)
    if loss_config.classification == "weighted_sigmoid_focal":
        return SigmoidFocal(loss_config.focal_gamma, loss_config.focal_alpha)
    return WeightedSigmoid()
