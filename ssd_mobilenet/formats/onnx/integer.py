"""Post-training int8 quantization of an ONNX file of `ssd_mobilenet.formats.onnx.writer`: QDQ
(QuantizeLinear / DequantizeLinear pairs) around the network's convolutions, calibrated on images
as the TFLite int8 export is (`onnxruntime.quantization.quantize_static`).

Only `Conv` is quantized (`QUANTIZED_OPS`): int8 weights per output channel and int8
activations, both symmetric (zero points 0, which TensorRT's parser requires of QDQ). The resize,
the scaling, the box decoding, the score conversion and the post-processing stay float32: scores,
class ids and NMS inputs through int8 would lose what the detections are (the TFLite export
found the same: `tflite._quantize_network_only`). Detections then agree with the float file's by
class and IoU, not exactly (`migrate export` reports by how much).
"""

from __future__ import annotations

import json
import os
import tempfile

import onnx

from ssd_mobilenet.formats.onnx.file_format import METADATA_NAME
from ssd_mobilenet.formats.preprocess import INPUT_NAMES

QUANTIZED_OPS = ("Conv",)


def quantize(model: onnx.ModelProto, feeds) -> onnx.ModelProto:
    """The QDQ int8 model of the float `model` calibrated on `feeds` (the file's inputs [1, ...],
    one per image; min/max of every activation over them).

    Raises:
      ValueError: no calibration input.
    """
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    feeds = list(feeds)
    if not feeds:
        raise ValueError("no calibration images for the int8 quantization")
    (graph_input,) = model.graph.input
    name = graph_input.name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(feeds)

        def get_next(self):
            item = next(self.items, None)
            return None if item is None else {name: item}

    with tempfile.TemporaryDirectory() as folder:
        source, target = os.path.join(folder, "float.onnx"), os.path.join(folder, "int8.onnx")
        onnx.save(model, source)
        quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=list(QUANTIZED_OPS), per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
        quantized = onnx.load(target)
    props = {p.key: p.value for p in model.metadata_props}
    entry = json.loads(props[METADATA_NAME])
    entry.update(int8=True, quantization="post-training")
    props[METADATA_NAME] = json.dumps(entry, sort_keys=True)
    del quantized.metadata_props[:]
    onnx.helper.set_model_props(quantized, props)
    assert [i.name for i in quantized.graph.input] == [name] and name in INPUT_NAMES.values()
    onnx.checker.check_model(quantized, full_check=True)
    return quantized
