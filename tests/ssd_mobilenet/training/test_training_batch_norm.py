"""Batch norm in training mode against the TF1 ops `slim.batch_norm(is_training=True)` built.

slim itself does not build under TF 2.x (it needs tf-keras), so the reference graph is the op
sequence slim's source builds, in a `tf.compat.v1` graph and session: `conv2d`, then unfused
`tf.nn.moments` + `tf.nn.batch_normalization` or fused `fused_batch_norm(is_training=True)`,
ReLU6, and the update ops `assign_moving_average(moving, batch, decay)` with decay a Python
float, as slim passed it. Compared: outputs, the gradients of a loss with respect to the
weights, gamma and beta, and the moving statistics after one update.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import moving_averages

from ssd_mobilenet.layers import SlimConv

DECAY = 0.9997
EPS = 0.001


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 9, 9, 4)).astype(np.float32)
    kernel = (rng.normal(size=(3, 3, 4, 6)) * 0.3).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    beta = rng.normal(size=6).astype(np.float32)
    mean = rng.normal(size=6).astype(np.float32)
    variance = rng.uniform(0.5, 2.0, 6).astype(np.float32)
    target = rng.normal(size=(3, 5, 5, 6)).astype(np.float32)
    return x, kernel, gamma, beta, mean, variance, target


def _tf1(fused, x, kernel, gamma, beta, mean, variance, target):
    g = tf.Graph()
    with g.as_default():
        tf1 = tf.compat.v1
        k = tf1.get_variable("weights", initializer=kernel, use_resource=True)
        gm = tf1.get_variable("gamma", initializer=gamma, use_resource=True)
        bt = tf1.get_variable("beta", initializer=beta, use_resource=True)
        mm = tf1.get_variable("moving_mean", initializer=mean, trainable=False, use_resource=True)
        mv = tf1.get_variable("moving_variance", initializer=variance, trainable=False, use_resource=True)
        y = tf.nn.conv2d(tf.constant(x), k, [1, 2, 2, 1], "SAME")
        if fused:
            y, batch_mean, batch_var = tf1.nn.fused_batch_norm(y, gm, bt, epsilon=EPS, is_training=True)
        else:
            batch_mean, batch_var = tf.nn.moments(y, [0, 1, 2])
            y = tf.nn.batch_normalization(y, batch_mean, batch_var, bt, gm, EPS)
        y = tf.nn.relu6(y)
        loss = tf.reduce_sum(tf.square(y - target))
        grads = tf.gradients(loss, [k, gm, bt])
        updates = [moving_averages.assign_moving_average(mm, batch_mean, DECAY, zero_debias=False),
                   moving_averages.assign_moving_average(mv, batch_var, DECAY, zero_debias=False)]
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            out, g_out = sess.run([y, grads])
            sess.run(updates)
            return out, g_out, sess.run([mm, mv])


@pytest.mark.parametrize("fused", [False, True])
def test_training_batch_norm_equals_slims_ops(fused):
    x, kernel, gamma, beta, mean, variance, target = _inputs()
    ref_y, ref_grads, ref_moving = _tf1(fused, x, kernel, gamma, beta, mean, variance, target)

    layer = SlimConv(6, kernel_size=3, stride=2, fused_batch_norm=fused, bn_epsilon=EPS, name="Conv")
    layer.build((None, 9, 9, 4))
    layer.norm.decay = DECAY
    for var, value in ((layer.kernel, kernel), (layer.norm.gamma, gamma), (layer.norm.beta, beta),
                       (layer.norm.moving_mean, mean), (layer.norm.moving_variance, variance)):
        var.assign(value)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            y = layer(tf.constant(x), training=True)
            loss = tf.reduce_sum(tf.square(y - target))
        return y, tape.gradient(loss, [layer.kernel, layer.norm.gamma, layer.norm.beta])

    y, grads = step()
    # The same ops on the same values, and the same gradient functions: equal to the bit.
    np.testing.assert_array_equal(y.numpy(), ref_y)
    np.testing.assert_array_equal(layer.norm.moving_mean.numpy(), ref_moving[0])
    np.testing.assert_array_equal(layer.norm.moving_variance.numpy(), ref_moving[1])
    for ours, ref, name in zip(grads, ref_grads, ("weights", "gamma", "beta")):
        np.testing.assert_array_equal(ours.numpy(), ref, err_msg=name)
    # The statistics moved (a float32 1 - decay would have moved them by another amount).
    assert not np.array_equal(ref_moving[0], mean)


def test_inference_mode_leaves_the_moving_statistics_alone():
    x = _inputs()[0]
    layer = SlimConv(6, kernel_size=3, stride=2, name="Conv")
    layer.build((None, 9, 9, 4))
    before = layer.norm.moving_mean.numpy().copy()
    layer(tf.constant(x), training=False)
    layer(tf.constant(x))
    np.testing.assert_array_equal(layer.norm.moving_mean.numpy(), before)
