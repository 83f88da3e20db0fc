"""A quantization-aware model's kernels on a symmetric int8 grid per output channel: the integer
weights of its `.tflite` file (`tflite.integer`) and of its ONNX file (`onnx.aware`).

Integer convolution kernels take symmetric weights only (a filter zero point other than 0 is
refused by LiteRT's and XNNPACK's kernels, and TensorRT's QDQ takes zero point 0), while the TF1
ranges are asymmetric (their grid is `n * step`, n in [1 - zero point, 255 - zero point]). Each
output channel gets a symmetric range: `+-127 * step` where the channel's values lie within 127
steps of zero (exact: the same grid), else `+-max|w_c|` (re-rounded; about one channel per layer
on trained-looking ranges).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

# A symmetric int8 grid's largest step count (narrow range: -127..127).
INT8_STEPS = 127


def nudged_step(quant) -> float:
    """The grid step of a narrow-range FakeQuant's range after TensorFlow's nudging."""
    lo, hi = np.float32(quant.min.numpy()), np.float32(quant.max.numpy())
    levels = np.float32(2 ** quant.num_bits - 2)  # narrow range: qmin 1, qmax 2^bits - 1
    return float((hi - lo) / levels)


def symmetric_ranges(layer) -> np.ndarray:
    """float32 [C_out]: the half-width of each output channel's symmetric int8 range for a
    folded, rounded quantization-aware `SlimConv` (module docstring)."""
    kernel = layer.kernel.numpy()
    channel_axis = 2 if layer.depthwise else 3  # [k, k, C, 1] / [k, k, C_in, C_out]
    others = tuple(i for i in range(4) if i != channel_axis)
    largest = np.abs(kernel).max(axis=others)
    step = nudged_step(layer.weights_quant)
    exact = np.abs(np.rint(kernel / step)).max(axis=others) <= INT8_STEPS
    return np.where(exact, np.float32(INT8_STEPS * step), largest).astype(np.float32)


class SymmetricFakeQuant:
    """A kernel's per-output-channel symmetric FakeQuant, in place of the layer's `weights_quant`
    (a plain callable, not a Keras layer: the inference copy's tracked weights stay as they are)."""

    def __init__(self, ranges: np.ndarray, depthwise: bool, num_bits: int):
        self.ranges, self.depthwise, self.num_bits = ranges, depthwise, num_bits

    def __call__(self, kernel):
        m = tf.constant(self.ranges)
        shape = kernel.shape
        if self.depthwise:  # the per-channel op wants the channel axis last: [k, k, C, 1] -> [k, k, C]
            kernel = tf.reshape(kernel, shape[:3])
        kernel = tf.quantization.fake_quant_with_min_max_vars_per_channel(kernel, -m, m, num_bits=self.num_bits,
                                                                         narrow_range=True)
        return tf.reshape(kernel, shape)
