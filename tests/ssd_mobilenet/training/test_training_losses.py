"""The per-anchor losses against the OD API's core/losses_test.py (tensorflow/models 9bf1fd02).

Inputs and expected values are theirs (test names in the comments); tolerance theirs too:
`assertAllClose`, rtol = atol = 1e-6.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet.training.losses import SigmoidFocal, WeightedL2, WeightedSigmoid, WeightedSmoothL1, WeightedSoftmax


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected, np.float64), rtol=1e-6, atol=1e-6)


FIVE_OF_TEN = [[1, 1, 1, 1, 1, 0, 0, 0, 0, 0]]


# ---- WeightedL2LocalizationLossTest ---------------------------------------------------------------
def test_l2_weighted():  # testReturnsCorrectWeightedLoss
    loss = WeightedL2()(tf.ones([3, 10, 4]), tf.zeros([3, 10, 4]), weights=tf.constant(FIVE_OF_TEN * 3, tf.float32))
    close(tf.reduce_sum(loss), (3 * 5 * 4) / 2.0)


def test_l2_anchorwise():  # testReturnsCorrectAnchorwiseLoss
    close(WeightedL2()(tf.ones([3, 16, 4]), tf.zeros([3, 16, 4]), weights=tf.ones([3, 16])), np.ones((3, 16)) * 2)


def test_l2_nan_targets_are_ignored():  # testReturnsCorrectNanLoss
    target = tf.concat([tf.zeros([3, 10, 2]), tf.ones([3, 10, 2]) * np.nan], axis=2)
    loss = WeightedL2()(tf.ones([3, 10, 4]), target, weights=tf.ones([3, 10]), ignore_nan_targets=True)
    close(tf.reduce_sum(loss), (3 * 5 * 4) / 2.0)


def test_l2_losses_mask():  # testReturnsCorrectWeightedLossWithLossesMask
    weights = tf.constant(FIVE_OF_TEN + [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]] + FIVE_OF_TEN * 2, tf.float32)
    loss = WeightedL2()(tf.ones([4, 10, 4]), tf.zeros([4, 10, 4]), weights=weights,
                        losses_mask=tf.constant([True, False, True, True]))
    close(tf.reduce_sum(loss), (3 * 5 * 4) / 2.0)


# ---- WeightedSmoothL1LocalizationLossTest ----------------------------------------------------------
SMOOTH_L1_PREDICTIONS = [[[2.5, 0, .4, 0], [0, 0, 0, 0], [0, 2.5, 0, .4]],
                         [[3.5, 0, 0, 0], [0, .4, 0, .9], [0, 0, 1.5, 0]]]


def test_smooth_l1():  # testReturnsCorrectLoss
    loss = WeightedSmoothL1()(tf.constant(SMOOTH_L1_PREDICTIONS), tf.zeros([2, 3, 4]),
                              weights=tf.constant([[2, 1, 1], [0, 3, 0]], tf.float32))
    close(tf.reduce_sum(loss), 7.695)


def test_smooth_l1_losses_mask():  # testReturnsCorrectLossWithLossesMask
    predictions = SMOOTH_L1_PREDICTIONS + [[[3.5, 7., 0, 0], [0, .4, 0, .9], [2.2, 2.2, 1.5, 0]]]
    loss = WeightedSmoothL1()(tf.constant(predictions), tf.zeros([3, 3, 4]),
                              weights=tf.constant([[2, 1, 1], [0, 3, 0], [4, 3, 0]], tf.float32),
                              losses_mask=tf.constant([True, True, False]))
    close(tf.reduce_sum(loss), 7.695)


def test_smooth_l1_is_tf1_huber_loss_bit_for_bit():
    # Not an OD API number: the loss must equal TF's own huber_loss (what TF 1.13's OD API called).
    rng = np.random.default_rng(0)
    prediction, target = (rng.normal(0, 2, (2, 50, 4)).astype(np.float32) for _ in range(2))
    weights = rng.uniform(0, 2, (2, 50)).astype(np.float32)
    for delta in (1.0, 0.5):
        ours = WeightedSmoothL1(delta)(prediction, target, weights=weights)
        huber = tf.compat.v1.losses.huber_loss(target, prediction, weights=weights[..., None], delta=delta,
                                               loss_collection=None, reduction=tf.compat.v1.losses.Reduction.NONE)
        theirs = tf.reduce_sum(huber, axis=2)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# ---- WeightedSigmoidClassificationLossTest ----------------------------------------------------------
SIGMOID_LOGITS = [[[-100, 100, -100], [100, -100, -100], [100, 0, -100], [-100, -100, 100]],
                  [[-100, 0, 100], [-100, 100, -100], [100, 100, 100], [0, 0, -1]]]
SIGMOID_TARGETS = [[[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 1]], [[0, 0, 1], [0, 1, 0], [1, 1, 1], [1, 0, 0]]]
SIGMOID_WEIGHTS = [[[1, 1, 1]] * 4, [[1, 1, 1]] * 3 + [[0, 0, 0]]]


def sigmoid_inputs():
    return [tf.constant(x, tf.float32) for x in (SIGMOID_LOGITS, SIGMOID_TARGETS, SIGMOID_WEIGHTS)]


def test_sigmoid():  # testReturnsCorrectLoss
    logits, targets, weights = sigmoid_inputs()
    close(tf.reduce_sum(WeightedSigmoid()(logits, targets, weights=weights)), -2 * math.log(.5))


def test_sigmoid_anchorwise():  # testReturnsCorrectAnchorWiseLoss
    logits, targets, weights = sigmoid_inputs()
    close(tf.reduce_sum(WeightedSigmoid()(logits, targets, weights=weights), axis=2),
          [[0, 0, -math.log(.5), 0], [-math.log(.5), 0, 0, 0]])


def test_sigmoid_class_indices():  # testReturnsCorrectLossWithClassIndices
    logits = [[[-100, 100, -100, 100], [100, -100, -100, -100], [100, 0, -100, 100], [-100, -100, 100, -100]],
              [[-100, 0, 100, 100], [-100, 100, -100, 100], [100, 100, 100, 100], [0, 0, -1, 100]]]
    targets = [[[0, 1, 0, 0], [1, 0, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1]],
               [[0, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]]]
    weights = [[[1, 1, 1, 1]] * 4, [[1, 1, 1, 1]] * 3 + [[0, 0, 0, 0]]]
    loss = WeightedSigmoid()(logits, targets, weights=weights, class_indices=tf.constant([0, 1, 2]))
    close(tf.reduce_sum(loss, axis=2), [[0, 0, -math.log(.5), 0], [-math.log(.5), 0, 0, 0]])


def test_sigmoid_losses_mask():  # testReturnsCorrectLossWithLossesMask
    logits = SIGMOID_LOGITS + [[[-100, 0, 100], [-100, 100, -100], [100, 100, 100], [0, 0, -100]]]
    targets = SIGMOID_TARGETS + [[[0, 0, 0]] * 4]
    weights = SIGMOID_WEIGHTS + [[[1, 1, 1]] * 4]
    loss = WeightedSigmoid()(logits, targets, weights=weights, losses_mask=tf.constant([True, True, False]))
    assert loss.shape == (3, 4, 3)
    close(tf.reduce_sum(loss), -2 * math.log(.5))


# ---- SigmoidFocalClassificationLossTest -------------------------------------------------------------
def _logit(p):
    return math.log(p / (1. - p))


def order_of_ratio(sigmoid_loss, focal_loss):
    return np.power(10, np.floor(np.log10(np.asarray(sigmoid_loss) / np.asarray(focal_loss))))


def focal_and_sigmoid(probabilities, targets, **focal):
    logits = tf.constant([[[_logit(p)] for p in probabilities]], tf.float32)
    targets = tf.constant([[[t] for t in targets]], tf.float32)
    weights = tf.ones_like(targets)
    return (tf.reduce_sum(SigmoidFocal(**focal)(logits, targets, weights=weights), axis=2).numpy(),
            tf.reduce_sum(WeightedSigmoid()(logits, targets, weights=weights), axis=2).numpy())


HARD = ([0.55, 0.52, 0.50, 0.48, 0.45], [1, 1, 1, 0, 0])


def test_focal_easy_examples_small():  # testEasyExamplesProduceSmallLossComparedToSigmoidXEntropy
    focal, sigmoid = focal_and_sigmoid([0.97, 0.91, 0.73, 0.27, 0.09, 0.03], [1, 1, 1, 0, 0, 0], gamma=2.0, alpha=None)
    close(order_of_ratio(sigmoid, focal), [[1000, 100, 10, 10, 100, 1000]])


def test_focal_hard_examples_comparable():  # testHardExamplesProduceLossComparableToSigmoidXEntropy
    focal, sigmoid = focal_and_sigmoid(*HARD, gamma=2.0, alpha=None)
    close(order_of_ratio(sigmoid, focal), [[1., 1., 1., 1., 1.]])
    # testNonAnchorWiseOutputComparableToSigmoidXEntropy
    close(order_of_ratio(sigmoid.sum(), focal.sum()), 1.)


def test_focal_alpha_one_ignores_negatives():  # testIgnoreNegativeExampleLossViaAlphaMultiplier
    focal, sigmoid = focal_and_sigmoid(*HARD, gamma=2.0, alpha=1.0)
    close(focal[0][3:], [0., 0.])
    close(order_of_ratio(sigmoid[0][:3], focal[0][:3]), [1., 1., 1.])


def test_focal_alpha_zero_ignores_positives():  # testIgnorePositiveExampleLossViaAlphaMultiplier
    focal, sigmoid = focal_and_sigmoid(*HARD, gamma=2.0, alpha=0.0)
    close(focal[0][:3], [0., 0., 0.])
    close(order_of_ratio(sigmoid[0][3:], focal[0][3:]), [1., 1.])


# testSimilarToSigmoidXEntropyWithHalfAlphaAndZeroGammaUpToAScale
def test_focal_half_alpha_zero_gamma_is_half_sigmoid():
    logits, targets, weights = sigmoid_inputs()
    close(WeightedSigmoid()(logits, targets, weights=weights),
          SigmoidFocal(alpha=0.5, gamma=0.0)(logits, targets, weights=weights) * 2)


def test_focal_no_alpha_zero_gamma_is_sigmoid():  # testSameAsSigmoidXEntropyWithNoAlphaAndZeroGamma
    logits, targets, weights = sigmoid_inputs()
    close(WeightedSigmoid()(logits, targets, weights=weights),
          SigmoidFocal(alpha=None, gamma=0.0)(logits, targets, weights=weights))


FOCAL_TARGETS = [[[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 1]], [[0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 0]]]


def test_focal_expected_loss_alpha_one():  # testExpectedLossWithAlphaOneAndZeroGamma
    loss = SigmoidFocal(alpha=1.0, gamma=0.0)(tf.zeros([2, 4, 3]), FOCAL_TARGETS, weights=tf.ones([2, 4, 3]))
    close(tf.reduce_sum(loss), -math.log(.5) * 1.0 * 8)


@pytest.mark.parametrize("mask", [False, True])
def test_focal_expected_loss_alpha_75(mask):
    # testExpectedLossWithAlpha75AndZeroGamma; with mask: testExpectedLossWithLossesMask
    targets, kwargs = FOCAL_TARGETS, {}
    if mask:
        targets = FOCAL_TARGETS + [[[1, 0, 0]] * 4]
        kwargs = {"losses_mask": tf.constant([True, True, False])}
    batch = len(targets)
    loss = SigmoidFocal(alpha=0.75, gamma=0.0)(tf.zeros([batch, 4, 3]), targets, weights=tf.ones([batch, 4, 3]),
                                               **kwargs)
    close(tf.reduce_sum(loss), -math.log(.5) * ((0.75 * 8) + (0.25 * 8 * 2)))


# ---- WeightedSoftmaxClassificationLossTest -----------------------------------------------------------
SOFTMAX_LOGITS = [[[-100, 100, -100], [100, -100, -100], [0, 0, -100], [-100, -100, 100]],
                  [[-100, 0, 0], [-100, 100, -100], [-100, 100, -100], [100, -100, -100]]]
SOFTMAX_TARGETS = [[[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 1]], [[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0]]]
SOFTMAX_WEIGHTS = [[[1, 1, 1], [1, 1, 1], [0.5, 0.5, 0.5], [1, 1, 1]], [[1, 1, 1]] * 3 + [[0, 0, 0]]]


def test_softmax():  # testReturnsCorrectLoss
    loss = WeightedSoftmax()(SOFTMAX_LOGITS, SOFTMAX_TARGETS, weights=SOFTMAX_WEIGHTS)
    close(tf.reduce_sum(loss), -1.5 * math.log(.5))


def test_softmax_anchorwise():  # testReturnsCorrectAnchorWiseLoss
    close(WeightedSoftmax()(SOFTMAX_LOGITS, SOFTMAX_TARGETS, weights=SOFTMAX_WEIGHTS),
          [[0, 0, -0.5 * math.log(.5), 0], [-math.log(.5), 0, 0, 0]])


def test_softmax_high_logit_scale():  # testReturnsCorrectAnchorWiseLossWithHighLogitScaleSetting
    loss = WeightedSoftmax(logit_scale=10e16)(SOFTMAX_LOGITS, SOFTMAX_TARGETS, weights=tf.ones([2, 4, 3]))
    close(loss, [[-math.log(.33333333333)] * 4] * 2)


def test_softmax_losses_mask():  # testReturnsCorrectLossWithLossesMask
    logits = SOFTMAX_LOGITS + [[[-100, 0, 0], [-100, 100, -100], [-100, 100, -100], [100, -100, -100]]]
    loss = WeightedSoftmax()(logits, SOFTMAX_TARGETS + [[[1, 0, 0]] * 4], weights=SOFTMAX_WEIGHTS + [[[1, 1, 1]] * 4],
                             losses_mask=tf.constant([True, True, False]))
    close(tf.reduce_sum(loss), -1.5 * math.log(.5))
