"""ONNX export: the converted detector as one `.onnx` file for ONNX Runtime, OpenVINO and TensorRT.

The file (contract: `file_format`) is a static graph, opset `OPSET` (13), with no Loop, If, Scan
or Sequence op:

- input `input_tensor` uint8 [1, H, W, 3] of any H, W (`input_type="uint8"`, the default): the
  file casts the photo to float32, resizes it to the model's size with the TF1 graph's legacy
  kernel (ONNX `Resize`, coordinate_transformation_mode "asymmetric": TF's `in = out * in / out`
  without half-pixel centres; "linear" for BILINEAR, "nearest" with nearest_mode "floor" for
  NEAREST_NEIGHBOR) and scales it by `x * float32(2/255) - 1`, in the graph's order
  (`normalize_before_resize`). A graph whose resize has no such ONNX form (BICUBIC, AREA) gets a
  fixed [1, h, w, 3] instead, as its `.tflite` file does. Or `normalized_input_image_tensor`
  float32 [1, h, w, 3] at the model's size, already scaled (`input_type="float32"`: TensorRT
  refuses uint8 inputs);
- the network: the inference copy of the Keras model (batch norm folded, weights as constants,
  `network.network`), the box decoding (`box_coder.decode`, FasterRcnnBoxCoder with the config's
  scales) and the score conversion (`postprocessing.convert_scores`: sigmoid, or softmax with
  the logit scale, and the background slicing of the graph's release), traced as one
  `tf.function` and converted by tf2onnx: each TF op becomes its ONNX counterpart;
- the post-processing (`onnx_postprocessing`, built with `onnx.helper`): clip, empty boxes
  dropped as the config's `nms_variant` drops them, one NonMaxSuppression over all classes
  (FPN's many anchors: a first one over each class's best boxes), the global top k, the OD
  API's four outputs padded as TF1 pads them.

A quantization-aware model (`config.weight_bits`) gets its integer file instead of a float32
one: QDQ on the checkpoint's ranges around every convolution, the runtime's sigmoid
(`postprocessing.file_sigmoid`), the rest as above
(`onnx_aware`; metadata `int8` true, `quantization` "quantization-aware").

`onnx.checker.check_model(full_check=True)` passes on every file `convert` returns.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import tensorflow as tf

from ssd_mobilenet import box_coder, postprocessing
from ssd_mobilenet.formats import network as network_lib
from ssd_mobilenet.formats.network import any_size
from ssd_mobilenet.formats.onnx import aware as onnx_aware
from ssd_mobilenet.formats.onnx import postprocessing as onnx_postprocessing
from ssd_mobilenet.formats.onnx.file_format import METADATA_NAME, METADATA_VERSION
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, INPUT_TYPES, UINT8

OPSET = onnx_postprocessing.OPSET
# Ops a file of this exporter must not hold: control flow and sequences, which TensorRT's
# parser refuses (Loop) or handles poorly, and which the TF1 graph's tf2onnx export is full of.
FORBIDDEN_OPS = ("Loop", "If", "Scan", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
                 "SequenceInsert", "SequenceLength", "SplitToSequence", "ConcatFromSequence")
_NETWORK_OUTPUTS = ("decoded_boxes", "class_scores")
# The metadata's `quantization` of a quantization-aware model's file (`onnx_integer` writes
# "post-training").
QUANTIZATION_AWARE = "quantization-aware"


def _network_function(model, input_type: str):
    """(folded copy, tf.function: the input [1, ...] -> (boxes [1, A, 4] decoded, unclipped,
    scores [1, A, slots] converted), its input spec, the `onnx_aware.Ranges` of a
    quantization-aware model or None), the part tf2onnx converts."""
    ranges = None
    if model.config.weight_bits:
        folded, network, ranges = onnx_aware.network(model, input_type)
    else:
        folded, network = network_lib.network(model, input_type)
    config = folded.config
    anchors = np.asarray(folded.anchors, np.float32)

    def heads(image):
        codes, logits = network(image)
        # The anchors become a constant of the traced graph (a tensor made outside it would be a
        # captured input, which tf2onnx turns into a second graph input).
        boxes = box_coder.decode(codes, anchors, config.box_coder_scales)
        scores = postprocessing.convert_scores(logits, config,
                                               sigmoid=postprocessing.file_sigmoid(bool(config.weight_bits)))
        return tf.identity(boxes, name=_NETWORK_OUTPUTS[0]), tf.identity(scores, name=_NETWORK_OUTPUTS[1])

    dtype = tf.uint8 if input_type == UINT8 else tf.float32
    size = [None, None] if any_size(config, input_type) else [config.image_height, config.image_width]
    spec = tf.TensorSpec([1, *size, 3], dtype, name=INPUT_NAMES[input_type])
    return folded, tf.function(heads, autograph=False), spec, ranges  # control flow on Python values only


def metadata(config, input_type: str, max_detections: int, carried: dict | None = None) -> dict:
    """The file's `METADATA_NAME` property: what its readers cannot tell from the graph alone, and
    what the model `carried` (`converted_dir.carried`: labels, synthetic)."""
    return {**(carried or {}), "version": METADATA_VERSION, "image_size": [config.image_height, config.image_width],
            "resize_method": config.resize_method, "normalize_before_resize": bool(config.normalize_before_resize),
            "any_size": any_size(config, input_type), "num_classes": int(config.num_classes),
            "nms_variant": config.nms_variant, "input": input_type, "max_detections": int(max_detections),
            "opset": OPSET, "int8": bool(config.weight_bits),
            **({"quantization": QUANTIZATION_AWARE} if config.weight_bits else {})}


def _quiet_tf2onnx(verbose: bool):
    """tf2onnx logs every conversion step at INFO on its own loggers; they are not the user's
    lines unless `verbose`. Returns a function that puts the levels back."""
    loggers = [logging.getLogger(name) for name in ("tf2onnx", "tf2onnx.tfonnx", "tf2onnx.optimizer")]
    saved = [lg.level for lg in loggers]
    if not verbose:
        for lg in loggers:
            lg.setLevel(logging.ERROR)

    def restore():
        for lg, level in zip(loggers, saved):
            lg.setLevel(level)
    return restore


def convert(model, input_type: str = UINT8, max_detections: int | None = None, verbose: bool = False,
            carried: dict | None = None):
    """The ONNX model (`onnx.ModelProto`) of `model` (an `SSDMobileNetV1` with its weights, batch
    norm unfolded, as `detector.load_model` returns it), per the module docstring; `carried`:
    `metadata`'s.

    Raises:
      ValueError: an unknown input type or max_detections < 1.
    """
    if input_type not in INPUT_TYPES:
        raise ValueError(f"input_type must be one of {', '.join(INPUT_TYPES)}, got {input_type!r}")
    max_detections = int(max_detections or model.config.max_total_detections)
    if max_detections < 1:
        raise ValueError(f"max_detections must be >= 1, got {max_detections}")
    import tf2onnx

    folded, function, spec, ranges = _network_function(model, input_type)
    restore = _quiet_tf2onnx(verbose)
    try:
        network, _ = tf2onnx.convert.from_function(function, input_signature=[spec],
                                                   opset=OPSET)
    finally:
        restore()
    if ranges is not None:
        network = onnx_aware.with_checkpoint_ranges(network, ranges)
    # tf2onnx names the outputs after the tensors (`decoded_boxes:0`), in the function's order.
    boxes_name, scores_name = [o.name for o in network.graph.output]
    post = onnx_postprocessing.graph(folded.config, int(folded.anchors.shape[0]), max_detections)
    post.ir_version = network.ir_version
    merged = onnx.compose.merge_models(network, post, io_map=[(boxes_name, onnx_postprocessing.INPUT_BOXES),
                                                              (scores_name, onnx_postprocessing.INPUT_SCORES)])
    # tf2onnx names the input after the spec without the ":0" it gives tensors; make sure of it.
    (graph_input,) = merged.graph.input
    wanted = INPUT_NAMES[input_type]
    if graph_input.name != wanted:
        for node in merged.graph.node:
            node.input[:] = [wanted if name == graph_input.name else name for name in node.input]
        graph_input.name = wanted
    _transpose_before_cast(merged.graph)
    # merge_models lists the default domain's opset once per model it merged; once is enough.
    opsets = {(o.domain, o.version) for o in merged.opset_import}
    del merged.opset_import[:]
    merged.opset_import.extend(onnx.helper.make_opsetid(domain, version) for domain, version in sorted(opsets))
    merged.graph.name = "ssd_mobilenet_v1"
    merged.producer_name, merged.producer_version = "ssd-mobilenet-migrate", "0.1.0"
    del merged.metadata_props[:]
    onnx.helper.set_model_props(merged, {METADATA_NAME: json.dumps(metadata(folded.config, input_type,
                                                                             max_detections, carried),
                                                                    sort_keys=True)})
    onnx.checker.check_model(merged, full_check=True)
    forbidden = sorted({n.op_type for n in merged.graph.node} & set(FORBIDDEN_OPS))
    if forbidden:  # a guard on tf2onnx's output: the file's promise is a static graph
        raise RuntimeError(f"the ONNX graph holds {', '.join(forbidden)}")
    return merged


def _transpose_before_cast(graph) -> None:
    """Puts the photo's NHWC -> NCHW Transpose before its Cast to float32, where tf2onnx put it
    after: the same values (a transpose moves elements, a cast maps each one), but the
    full-size copy the transpose makes is then uint8, a quarter of the float32 one's bytes, which
    lowers the peak on large photos (docs/benchmarks_onnx.md). Leaves any other graph (float32
    input, no such pair) as it is."""
    nodes = list(graph.node)
    (graph_input,) = graph.input
    casts = [n for n in nodes if n.op_type == "Cast" and list(n.input) == [graph_input.name]]
    if len(casts) != 1:
        return
    (cast,) = casts
    users = [n for n in nodes if cast.output[0] in n.input]
    if len(users) != 1 or users[0].op_type != "Transpose" or cast.output[0] in [o.name for o in graph.output]:
        return
    (transpose,) = users
    uint8_copy, float_copy = f"{graph_input.name}_nchw", transpose.output[0]
    stale = [v for v in graph.value_info if v.name in (cast.output[0], float_copy)]  # inference re-derives them
    transpose.input[0], transpose.output[0] = graph_input.name, uint8_copy
    cast.input[0], cast.output[0] = uint8_copy, float_copy
    # Nodes stay topologically sorted: the transpose now goes first.
    del graph.node[:]
    graph.node.extend([transpose] + [n for n in nodes if n is not transpose])
    for info in stale:
        graph.value_info.remove(info)


def operator_names(model) -> list:
    """The sorted op types of an ONNX model (`onnx.ModelProto`)."""
    return sorted({node.op_type for node in model.graph.node})


def export_onnx(model, path: str, input_type: str = UINT8, max_detections: int | None = None,
                verbose: bool = False) -> onnx.ModelProto:
    """Writes `convert(model, ...)` to `path`, atomically (nothing is left at `path` on an error);
    returns the ONNX model."""
    from ssd_mobilenet.atomic_write import write_bytes
    proto = convert(model, input_type, max_detections, verbose)
    write_bytes(path, proto.SerializeToString())
    return proto
