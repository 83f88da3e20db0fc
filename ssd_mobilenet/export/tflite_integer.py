"""A quantization-aware model (FakeQuant ranges from its TF1 checkpoint) as an integer `.tflite`
file: int8 convolutions on the ranges training learned, no calibration set, float32 detections.

What TF1 users got from `export_tflite_ssd_graph.py` and TOCO's `inference_type=QUANTIZED_UINT8`,
made with TF 2.21's converter from the folded inference copy (`model.fold_batch_norm`, whose
kernels are already rounded on the TF1 grid):

- Weights: TFLite's int8 CONV_2D and DEPTHWISE_CONV_2D take symmetric weights only (a filter
  zero point other than 0 is refused by LiteRT's and XNNPACK's kernels), while the TF1 ranges
  are asymmetric (their grid is `n * step`, n in [1 - zero point, 255 - zero point]). Each
  output channel gets a symmetric per-channel FakeQuant: `+-127 * step` where the channel's
  values lie within 127 steps of zero (exact: the same grid), else `+-max|w_c|` (re-rounded;
  about one channel per layer on trained-looking ranges).
- Activations: each layer's `act_quant` range, as it is; the scaled input image gets the range
  [-1, 1] (8 bits), the first QUANTIZE's. The graph's `x * 2/255 - 1` falls halfway between that
  grid's steps: every input value moves by half a step (TOCO's mean 128 / std 128 moved it by up
  to 1/128 instead).
- The converter's `_experimental_qdq_conversion_mode = "STATIC"`: without it the converter
  quantizes into the post-processing (int8 LOGISTIC: scores in steps of 1/256; class ids and
  NMS inputs through int8). Each feature map's box codes are decoded and its logits converted
  to scores before the concatenation, so no int8 CONCATENATION requantizes every head onto one
  scale.
- Input: the uint8 photo of any size, resized and scaled in float32 in the file as the graph
  does (`tflite._network`); outputs the signature's four, float32.

How far this is from the TF1 graph is measured, not assumed: `verify --tflite` matches the file's
detections with the graph's by class and IoU (docs/measurements.md has the figures).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ssd_mobilenet import layers as layers_lib
from ssd_mobilenet import preprocessing
from ssd_mobilenet.model import fold_batch_norm, with_weights_as_constants

# A symmetric int8 grid's largest step count (narrow range: -127..127).
INT8_STEPS = 127


def _nudged_step(quant) -> float:
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
    step = _nudged_step(layer.weights_quant)
    exact = np.abs(np.rint(kernel / step)).max(axis=others) <= INT8_STEPS
    return np.where(exact, np.float32(INT8_STEPS * step), largest).astype(np.float32)


class _SymmetricFakeQuant:
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


def integer_copy(model):
    """The folded inference copy of a quantization-aware `model` with every kernel's FakeQuant
    made symmetric per channel (`symmetric_ranges`); its calls round the kernels again, which the
    converter turns into int8 weights."""
    folded = fold_batch_norm(model)
    for layer in folded._flatten_layers(include_self=False):
        if isinstance(layer, layers_lib.SlimConv) and layer.weights_quant is not None:
            quant = _SymmetricFakeQuant(symmetric_ranges(layer), layer.depthwise, layer.weights_quant.num_bits)
            object.__setattr__(layer, "weights_quant", quant)  # untracked by Keras
            layer.kernel_quantized = False
    return folded


def heads_function(model):
    """(folded integer copy, fn(uint8 [1, H, W, 3]) -> [(codes [1, A_i, 4], logits [1, A_i, slots])]
    per feature map), the weights traced in as constants (`tflite._network` says why)."""
    import keras
    folded = integer_copy(model)
    heads = keras.Model(folded.inputs, [folded.get_layer(f"BoxPredictor_{i}").output
                                        for i in range(len(folded.feature_map_shapes))])

    def run(images):
        x = preprocessing.preprocess(tf.cast(images, tf.float32), folded.config)
        x = tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.0, num_bits=8)  # the input's int8 grid
        return heads(x, training=False)

    folded.heads_model = heads  # kept alive with the copy (see tflite._Export)
    return folded, with_weights_as_constants(run, folded.weights)


def configure(converter) -> None:
    """The converter settings of an integer file from FakeQuant ranges (module docstring)."""
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative dataset: the ranges
    converter._experimental_qdq_conversion_mode = "STATIC"
