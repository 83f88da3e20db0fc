"""Post-training int8 quantization of an ONNX file of `ssd_mobilenet.formats.onnx.writer`: QDQ
(QuantizeLinear / DequantizeLinear pairs) around the network's convolutions, calibrated on images
as the TFLite int8 export is (`onnxruntime.quantization.quantize_static`).

Weights are int8, symmetric, per output channel. The activations take one of two forms
(`ACTIVATIONS`), chosen by the file's input (`activations_for`):

- "uint8" (the uint8 input, the default file: for CPUs): asymmetric uint8 activations, and each
  ReLU6 (`Clip` 0..6) quantized with its convolution: the quantizer removes the Clip and gives
  the convolution's output the Clip's calibrated range (zero point 0 for [0, max]), which clamps
  as the Clip did. ONNX Runtime then fuses every convolution with its QDQ into one
  `QLinearConv` (uint8 x int8, the form its x86 kernels run fastest), with no float ReLU6 and
  no layout transposes between them (docs/benchmarks_onnx.md counts them).
- "int8" (the float32 input, TensorRT's form: TensorRT refuses uint8 inputs, and its parser takes
  QDQ with zero point 0 only): symmetric int8 activations; each ReLU6 stays a float `Clip`
  between a DequantizeLinear and a QuantizeLinear (a zero point 0 grid cannot clamp at 0), which
  TensorRT fuses and ONNX Runtime's CPU kernels do not.

The resize, the scaling, the box decoding, the score conversion and the post-processing stay
float32: scores, class ids and NMS inputs through int8 would lose what the detections are (the
TFLite export found the same: `tflite._quantize_network_only`). Detections then agree with the
float file's by class and IoU, not exactly (`migrate export` reports by how much).

One thing of the float file goes: its sigmoid, TensorFlow's step by step
(`postprocessing.tensorflow_sigmoid`, 29 elementwise ops over every anchor's every class), becomes
the runtime's one `Sigmoid` (`runtime_sigmoid`; `postprocessing.file_sigmoid` says why an int8 file
may, and a quantization-aware model's file traces it so): the same agreement with the float file on
the shared photos (681 of 700 detections, mean IoU 0.964, either way) in 12.3 against 14.2 ms a
300x300 photo on ONNX Runtime (the plain model, Xeon Ice Lake, 2 threads; OpenVINO, which fuses the
ops into one kernel, 10.2 either way).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

import onnx

from ssd_mobilenet.formats.onnx.file_format import METADATA_NAME
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, UINT8
from ssd_mobilenet.postprocessing import SIGMOID_SCOPE

# The activations' form (module docstring) -> (ONNX Runtime QuantType name, symmetric, op types quantized).
ACTIVATIONS = {"uint8": ("QUInt8", False, ("Conv", "Clip")), "int8": ("QInt8", True, ("Conv",))}


def activations_for(input_type: str) -> str:
    """The activations' form of a file whose input is `input_type`: "uint8" for the uint8 input
    (CPUs), "int8" (symmetric, TensorRT's) for the float32 input TensorRT takes."""
    return "uint8" if input_type == UINT8 else "int8"


def quantize(model: onnx.ModelProto, feeds, verbose: bool = False) -> onnx.ModelProto:
    """The QDQ int8 model of the float `model` calibrated on `feeds` (the file's inputs [1, ...],
    one per image; min/max of every activation over them), its activations as `activations_for`
    the file's input (metadata `input`) gives them; metadata `activations` says which.
    `verbose`: onnxruntime.quantization's own log lines too (on Python's root logger: its advice
    to pre-process the model, which would fold ONNX Runtime's optimizations into the file).

    Raises:
      ValueError: no calibration input.
    """
    from ssd_mobilenet.formats.onnx.runner import import_onnxruntime
    import_onnxruntime()  # first: its telemetry off (`runner.TELEMETRY_ENV`)
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    feeds = list(feeds)
    if not feeds:
        raise ValueError("no calibration images for the int8 quantization")
    (graph_input,) = model.graph.input
    name = graph_input.name
    props = {p.key: p.value for p in model.metadata_props}
    entry = json.loads(props[METADATA_NAME])
    activations = activations_for(entry["input"])
    activation_type, symmetric, op_types = ACTIVATIONS[activations]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(feeds)

        def get_next(self):
            item = next(self.items, None)
            return None if item is None else {name: item}

    with tempfile.TemporaryDirectory() as folder:
        source, target = os.path.join(folder, "float.onnx"), os.path.join(folder, "int8.onnx")
        onnx.save(runtime_sigmoid(model), source)
        root = logging.getLogger()
        level = root.level
        if not verbose:
            root.setLevel(logging.ERROR)
        try:
            quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ,
                            op_types_to_quantize=list(op_types), per_channel=True,
                            activation_type=QuantType[activation_type], weight_type=QuantType.QInt8,
                            extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": True})
        finally:
            root.setLevel(level)
        quantized = onnx.load(target)
    entry.update(int8=True, quantization="post-training", activations=activations)
    props[METADATA_NAME] = json.dumps(entry, sort_keys=True)
    del quantized.metadata_props[:]
    onnx.helper.set_model_props(quantized, props)
    assert [i.name for i in quantized.graph.input] == [name] and name in INPUT_NAMES.values()
    onnx.checker.check_model(quantized, full_check=True)
    return quantized


def runtime_sigmoid(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose sigmoid, if it holds one, is the runtime's `Sigmoid`: the nodes of
    `postprocessing.tensorflow_sigmoid` (named under `SIGMOID_SCOPE` by tf2onnx, which keeps
    TensorFlow's op names) replaced by one node from their one input to their one output, and
    the constants only they read dropped (module docstring: why an int8 file may).

    Raises:
      ValueError: the scope's nodes read or give more than one tensor of the rest of the graph.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    prefix = SIGMOID_SCOPE + "/"
    inside = [n for n in graph.node if n.name.startswith(prefix)]
    if not inside:
        return model  # a softmax, or no score conversion
    rest = [n for n in graph.node if not n.name.startswith(prefix)]
    produced = {name for n in inside for name in n.output}
    constants = {i.name for i in graph.initializer} | {name for n in rest if n.op_type == "Constant"
                                                       for name in n.output}
    read = {name for n in inside for name in n.input if name and name not in produced}
    inputs = read - constants
    outputs = produced & ({name for n in rest for name in n.input} | {o.name for o in graph.output})
    if len(inputs) != 1 or len(outputs) != 1:
        raise ValueError(f"{SIGMOID_SCOPE}: {len(inputs)} inputs and {len(outputs)} outputs, not one of each")
    first = list(graph.node).index(inside[0])
    sigmoid = onnx.helper.make_node("Sigmoid", [*inputs], [*outputs], name=f"{SIGMOID_SCOPE}_runtime")
    nodes = rest[:first] + [sigmoid] + rest[first:]  # the input comes before the first, the readers after
    del graph.node[:]
    graph.node.extend(nodes)
    still_read = {name for n in nodes for name in n.input}
    unread = [i for i in graph.initializer if i.name in read and i.name not in still_read]
    for initializer in unread:
        graph.initializer.remove(initializer)
    for info in [v for v in graph.value_info if v.name in produced - outputs]:
        graph.value_info.remove(info)
    return model
