"""A quantization-aware model (FakeQuant ranges from its TF1 checkpoint) as an integer `.tflite`
file: int8 convolutions on the ranges training learned, no calibration set, float32 detections.

What TF1 users got from `export_tflite_ssd_graph.py` and TOCO's `inference_type=QUANTIZED_UINT8`,
made with TF 2.21's converter from the folded inference copy (`model.fold_batch_norm`, whose
kernels are already rounded on the TF1 grid):

- Weights: TFLite's int8 CONV_2D and DEPTHWISE_CONV_2D take symmetric weights only (a filter
  zero point other than 0 is refused by LiteRT's and XNNPACK's kernels), while the TF1 ranges
  are asymmetric (their grid is `n * step`, n in [1 - zero point, 255 - zero point]). Each
  output channel gets a symmetric per-channel FakeQuant (`integer_weights`): `+-127 * step`
  where the channel's values lie within 127 steps of zero (exact: the same grid), else
  `+-max|w_c|` (re-rounded; about one channel per layer on trained-looking ranges).
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
  does (`network.prepare`); outputs the signature's four, float32.

How far this is from the TF1 graph is measured, not assumed: `verify --tflite` matches the file's
detections with the graph's by class and IoU (docs/measurements.md has the figures).
"""

from __future__ import annotations

import tensorflow as tf

from ssd_mobilenet import layers as layers_lib
from ssd_mobilenet.formats.integer_weights import SymmetricFakeQuant, symmetric_ranges
from ssd_mobilenet.formats.network import prepare
from ssd_mobilenet.formats.preprocess import UINT8
from ssd_mobilenet.model import fold_batch_norm, with_weights_as_constants

def integer_copy(model):
    """The folded inference copy of a quantization-aware `model` with every kernel's FakeQuant
    made symmetric per channel (`integer_weights.symmetric_ranges`); its calls round the kernels again, which the
    converter turns into int8 weights."""
    folded = fold_batch_norm(model)
    for layer in folded._flatten_layers(include_self=False):
        if isinstance(layer, layers_lib.SlimConv) and layer.weights_quant is not None:
            quant = SymmetricFakeQuant(symmetric_ranges(layer), layer.depthwise, layer.weights_quant.num_bits)
            object.__setattr__(layer, "weights_quant", quant)  # untracked by Keras
            layer.kernel_quantized = False
    return folded


def heads_function(model):
    """(folded integer copy, fn(uint8 [1, H, W, 3]) -> [(codes [1, A_i, 4], logits [1, A_i, slots])]
    per feature map), the weights traced in as constants (`network.network` says why)."""
    import keras
    folded = integer_copy(model)
    heads = keras.Model(folded.inputs, [folded.get_layer(f"BoxPredictor_{i}").output
                                        for i in range(len(folded.feature_map_shapes))])

    def run(images):
        x = prepare(images, folded.config, UINT8)  # a photo of any size: the export refuses others
        x = tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.0, num_bits=8)  # the input's int8 grid
        return heads(x, training=False)

    folded.heads_model = heads  # kept alive with the copy (see tflite._Export)
    return folded, with_weights_as_constants(run, folded.weights)


def configure(converter) -> None:
    """The converter settings of an integer file from FakeQuant ranges (module docstring)."""
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative dataset: the ranges
    converter._experimental_qdq_conversion_mode = "STATIC"
