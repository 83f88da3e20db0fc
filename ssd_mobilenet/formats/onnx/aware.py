"""A quantization-aware model (FakeQuant ranges from its TF1 checkpoint) in an ONNX file: QDQ
(QuantizeLinear / DequantizeLinear) on the ranges training learned, no calibration set; the
integer `.tflite` file's counterpart (`formats.tflite.integer`).

`network(model, input_type)` is what tf2onnx converts: the folded inference copy with every
quantized kernel already on its int8 grid (constants: tf2onnx has no form for a narrow-range or
per-channel FakeQuant), the input's and each layer's activation FakeQuant kept (tf2onnx turns
them into uint8 QDQ pairs, where the TF1 graph rounds). `with_checkpoint_ranges(onnx_model,
ranges)` then makes the file's QDQ the checkpoint's, exactly:

- Weights: int8, symmetric, per output channel (DequantizeLinear axis 0, zero point 0), scale
  `integer_weights.symmetric_ranges / 127`: the integer TFLite file's weights (TF1's grid where a
  channel fits within 127 steps of zero, re-rounded on `max|w|` otherwise).
- Biases: int32 on scale input scale x weight scale (as TFLite's and ONNX Runtime's quantizers
  store them; without them ONNX Runtime runs a QDQ convolution in float32).
- Activations: uint8 with TensorFlow's nudged zero point (`nudged`): each layer's `act_quant`
  range after its ReLU6 or bias add, and [-1, 1] for the scaled image, as TF1's FakeQuant ops
  have them. uint8 (not symmetric int8) because TF1's ranges are asymmetric (ReLU6 [0, 6]): this
  zero point reproduces its grid step for step, where int8 with zero point 0 would halve the
  steps of every ReLU6 output. TensorRT takes int8 QDQ with zero point 0 only, so it refuses
  this file (docs/guides/deploy.md).

What differs from the TF1 graph: ONNX's QuantizeLinear rounds ties to even where TF's FakeQuant
rounds them up (the scaled uint8 image lands on ties by construction: `x * 2/255 - 1` is halfway
between the [-1, 1] grid's steps, so about half the pixels move one step), the int32 biases, and
the re-rounded weight channels. `verify --onnx` measures it against the TF1 graph.
"""

from __future__ import annotations

import numpy as np
import onnx
import tensorflow as tf
from onnx import helper, numpy_helper

from ssd_mobilenet import layers as layers_lib
from ssd_mobilenet.formats import integer_weights
from ssd_mobilenet.formats.network import prepare
from ssd_mobilenet.model import fold_batch_norm, with_weights_as_constants

# The scaled image's range, the first FakeQuant of a quantization-aware graph (8 bits).
INPUT_RANGE = (-1.0, 1.0)
INPUT_BITS = 8


def nudged(lo, hi, num_bits: int = 8, narrow_range: bool = False) -> tuple:
    """(scale float32, zero point int) of a FakeQuant range [lo, hi] as TensorFlow nudges it
    (`Nudge` in tensorflow/core/kernels/fake_quant_ops_functor.h, float32 arithmetic): the step
    (hi - lo) / (qmax - qmin), the zero point from `lo` rounded half away from zero into
    [qmin, qmax]. `QuantizeLinear(scale, zero point)` then has the FakeQuant's grid."""
    f32 = np.float32
    lo, hi = f32(lo), f32(hi)
    qmin, qmax = f32(1 if narrow_range else 0), f32(2 ** num_bits - 1)
    scale = f32((hi - lo) / (qmax - qmin))
    from_min = f32(qmin - f32(lo / scale))
    zero_point = qmin if from_min < qmin else qmax if from_min > qmax else np.sign(from_min) * np.floor(
        np.abs(from_min) + f32(0.5))  # std::round
    return scale, int(zero_point)


class Ranges:
    """What `with_checkpoint_ranges` writes, per quantized layer of the folded copy (keyed by
    the layer): `weights[layer]` (int8 kernel [k, k, C_in, C_out] or [k, k, C, 1], scale
    float32 [C_out]), `activations[layer]` (scale, zero point) of its `act_quant`, `names[layer]`
    (its variables' scope, which names its constants in the file); `input`: the image's."""

    def __init__(self):
        self.weights, self.activations, self.names = {}, {}, {}
        self.input = nudged(*INPUT_RANGE, INPUT_BITS)


def _channel_shape(layer) -> tuple:
    return (1, 1, -1, 1) if layer.depthwise else (1, 1, 1, -1)


def check_bits(config) -> None:
    """ValueError unless the quantization-aware `config` has 8-bit weights and activations (a
    uint8 / int8 QDQ would not saturate where a narrower FakeQuant does)."""
    bits = (config.weight_bits, config.activation_bits)
    if bits != (8, 8):
        raise ValueError(f"ONNX takes 8-bit ranges, not {bits[0]}-bit weights and {bits[1]}-bit activations")


def grid_copy(model):
    """(folded inference copy of the quantization-aware `model` whose kernels hold their int8
    grid's values (integer x scale, float32) and whose activation ranges are nudged, `Ranges`).

    Raises:
      ValueError: ranges of other than 8 bits (`check_bits`).
    """
    check_bits(model.config)
    folded = fold_batch_norm(model)  # kernels rounded on the TF1 grid once (kernel_quantized)
    ranges = Ranges()
    for layer in folded._flatten_layers(include_self=False):
        if not isinstance(layer, layers_lib.SlimConv) or layer.weights_quant is None:
            continue
        symmetric = integer_weights.symmetric_ranges(layer)
        scale = (symmetric / np.float32(integer_weights.INT8_STEPS)).astype(np.float32)
        # The kernel through the integer TFLite file's FakeQuant, then its integers.
        rounded = integer_weights.SymmetricFakeQuant(symmetric, layer.depthwise,
                                                     layer.weights_quant.num_bits)(layer.kernel).numpy()
        steps = rounded / scale.reshape(_channel_shape(layer))
        integers = np.rint(steps)
        if np.abs(steps - integers).max() > 1e-3 or np.abs(integers).max() > integer_weights.INT8_STEPS:
            raise RuntimeError(f"{layer.name}: the kernel is not on its int8 grid")
        integers = integers.astype(np.int8)
        layer.kernel.assign(integers.astype(np.float32) * scale.reshape(_channel_shape(layer)))
        ranges.weights[layer] = (integers, scale)
        ranges.names[layer] = layer.kernel.path.rsplit("/", 1)[0]
        quant = layer.act_quant
        if quant is not None:
            act_scale, zero_point = nudged(quant.min.numpy(), quant.max.numpy(), quant.num_bits)
            ranges.activations[layer] = (act_scale, zero_point)
            # tf2onnx turns the FakeQuant into QDQ on its own reading of the range (its zero
            # point must fall in [0, 255], which a nudged range's does); `with_checkpoint_ranges`
            # sets the exact values afterwards.
            quant.min.assign(np.float32(-zero_point) * act_scale)
            quant.max.assign(np.float32(2 ** quant.num_bits - 1 - zero_point) * act_scale)
    return folded, ranges


def network(model, input_type: str):
    """(folded grid copy, fn(input [1, ...]) -> (codes [1, A, 4], logits [1, A, slots]) with the
    weights traced in as constants, `Ranges`): `network.network`'s function with the input's
    FakeQuant and the grid copy."""
    folded, ranges = grid_copy(model)

    def run(images):
        images = prepare(images, folded.config, input_type)
        images = tf.quantization.fake_quant_with_min_max_args(images, *INPUT_RANGE, num_bits=INPUT_BITS)
        out = folded(images, training=False)
        return out["box_encodings"], out["class_predictions_with_background"]

    return folded, with_weights_as_constants(run, folded.weights), ranges


def _onnx_layout(kernel: np.ndarray, depthwise: bool) -> np.ndarray:
    """A TF kernel as ONNX Conv's weight [C_out, C_in / group, k, k] (depthwise: group C)."""
    return np.ascontiguousarray(kernel.transpose(2, 3, 0, 1) if depthwise else kernel.transpose(3, 2, 0, 1))


class _Graph:
    """The network's graph being rewritten: initializers by name, producers, new constants."""

    def __init__(self, model: onnx.ModelProto):
        self.graph = model.graph
        self.values = {t.name: t for t in self.graph.initializer}
        self.producer = {out: node for node in self.graph.node for out in node.output}

    def array(self, name: str):
        return numpy_helper.to_array(self.values[name]) if name in self.values else None

    def const(self, value: np.ndarray, name: str) -> str:
        tensor = numpy_helper.from_array(value, name)
        self.graph.initializer.append(tensor)
        self.values[name] = tensor
        return name


def _layers_of_convs(g: _Graph, ranges: Ranges) -> dict:
    """{Conv node name: layer}, each Conv matched to its layer by its weights' values."""
    expected = {}
    for layer, (integers, scale) in ranges.weights.items():
        w = _onnx_layout(integers.astype(np.float32) * scale.reshape(_channel_shape(layer)), layer.depthwise)
        expected[(w.shape, w.tobytes())] = layer
    found = {}
    for node in g.graph.node:
        if node.op_type != "Conv":
            continue
        w = g.array(node.input[1])
        layer = None if w is None else expected.get((w.shape, np.ascontiguousarray(w).tobytes()))
        if layer is None:
            raise RuntimeError(f"ONNX convolution {node.name}: its weights are no quantized layer's")
        found[node.name] = layer
    if len(set(found.values())) != len(ranges.weights) or len(found) != len(ranges.weights):
        raise RuntimeError(f"{len(found)} ONNX convolutions for {len(ranges.weights)} quantized layers")
    return found


# Ops tf2onnx's transpose optimizer moves between a QuantizeLinear and its DequantizeLinear
# (the layout change of a head's output): they move the integers, not change them.
_MOVES = ("Transpose", "Reshape")


def _dequantizers(name: str, readers: dict) -> list:
    """The DequantizeLinear nodes reading the quantized tensor `name`, through `_MOVES`."""
    found = []
    for node in readers.get(name, []):
        if node.op_type == "DequantizeLinear":
            found.append(node)
        elif node.op_type in _MOVES:
            found.extend(_dequantizers(node.output[0], readers))
        else:
            raise RuntimeError(f"{node.name} ({node.op_type}) reads the quantized {name}")
    return found


def _set_activations(g: _Graph, ranges: Ranges, conv_layers: dict) -> None:
    """Each QuantizeLinear (tf2onnx's, one per FakeQuant) and its DequantizeLinear readers on the
    range of the FakeQuant it came from: a layer's `act_quant` after its Conv (and Clip: ReLU6),
    or the input's."""
    readers = {}
    for node in g.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    inputs = 0
    for node in [n for n in g.graph.node if n.op_type == "QuantizeLinear"]:
        source = g.producer.get(node.input[0])
        if source is not None and source.op_type == "Clip":
            source = g.producer.get(source.input[0])
        layer = conv_layers.get(source.name) if source is not None and source.op_type == "Conv" else None
        if layer is None:
            inputs += 1
            (scale, zero_point), prefix = ranges.input, "qat/input"
        else:
            (scale, zero_point), prefix = ranges.activations[layer], f"qat/{ranges.names[layer]}/act"
        given = g.array(node.input[1])
        if given is None or not np.isclose(given, scale, rtol=1e-5):  # a guard on the matching above
            raise RuntimeError(f"{node.name}: tf2onnx's scale {given} is not the FakeQuant's {scale}")
        names = [g.const(np.array(scale, np.float32), f"{prefix}_scale"),
                 g.const(np.array(zero_point, np.uint8), f"{prefix}_zero_point")]
        dequantizers = _dequantizers(node.output[0], readers)
        if not dequantizers:
            raise RuntimeError(f"{node.name}: not a QDQ pair")
        for q in [node, *dequantizers]:
            q.input[1:] = names
    if inputs != 1:
        raise RuntimeError(f"{inputs} QuantizeLinear nodes outside the layers (expected the input's)")


def _set_weights(g: _Graph, ranges: Ranges, conv_layers: dict) -> list:
    """Each Conv's weights as int8 + DequantizeLinear (per output channel), its bias as int32 +
    DequantizeLinear; returns the new nodes."""
    nodes = []
    for conv in [n for n in g.graph.node if n.op_type == "Conv"]:
        layer = conv_layers[conv.name]
        integers, scale = ranges.weights[layer]
        prefix = f"qat/{ranges.names[layer]}"
        weights = g.const(_onnx_layout(integers, layer.depthwise), f"{prefix}/weights_int8")
        w_scale = g.const(scale, f"{prefix}/weights_scale")
        w_zero = g.const(np.zeros(scale.shape, np.int8), f"{prefix}/weights_zero_point")
        nodes.append(helper.make_node("DequantizeLinear", [weights, w_scale, w_zero], [f"{prefix}/weights"],
                                      name=f"{prefix}/weights_dequantize", axis=0))
        conv.input[1] = f"{prefix}/weights"
        source = g.producer.get(conv.input[0])
        while source is not None and source.op_type in _MOVES:  # a 1x1 map's layout change is a Reshape
            source = g.producer.get(source.input[0])
        if len(conv.input) < 3 or source is None or source.op_type != "DequantizeLinear":
            raise RuntimeError(f"ONNX convolution {conv.name}: no bias, or its input is not dequantized")
        bias = g.array(conv.input[2])
        b_scale = (g.array(source.input[1]).astype(np.float32) * scale).astype(np.float32)
        b_int = np.rint(bias.astype(np.float64) / b_scale)
        if np.abs(b_int).max() >= 2 ** 31:
            raise RuntimeError(f"{layer.name}: a bias beyond int32 on its scale")
        b_name = g.const(b_int.astype(np.int32), f"{prefix}/bias_int32")
        b_scale = g.const(b_scale, f"{prefix}/bias_scale")
        b_zero = g.const(np.zeros(scale.shape, np.int32), f"{prefix}/bias_zero_point")
        nodes.append(helper.make_node("DequantizeLinear", [b_name, b_scale, b_zero], [f"{prefix}/bias"],
                                      name=f"{prefix}/bias_dequantize", axis=0))
        conv.input[2] = f"{prefix}/bias"
    return nodes


def with_checkpoint_ranges(model: onnx.ModelProto, ranges: Ranges) -> onnx.ModelProto:
    """`model` (tf2onnx's conversion of `network`) with the QDQ of the module docstring; the
    float weights, biases and tf2onnx's range constants no node reads any more are dropped."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = _Graph(model)
    conv_layers = _layers_of_convs(g, ranges)
    _set_activations(g, ranges, conv_layers)
    new = _set_weights(g, ranges, conv_layers)
    # Each DequantizeLinear just before its Conv, so that the nodes stay in topological order.
    pending = {}
    for node in new:
        pending.setdefault(node.name.rsplit("/", 1)[0], []).append(node)
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Conv":
            nodes.extend(pending.pop(node.input[1].rsplit("/", 1)[0]))
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    read = {name for node in model.graph.node for name in node.input}
    kept = [t for t in model.graph.initializer if t.name in read]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model

