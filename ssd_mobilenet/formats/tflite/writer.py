"""TFLite export: the converted detector as one `.tflite` file with a serving signature.

The file holds a batch of one image and one signature, `serving_default`:

- input `input_tensor` uint8 [1, H, W, 3] of any size (`input_type="uint8"`, the default): the
  file resizes the photo to the model's size and scales it to [-1, 1] itself, with the graph's
  kernel and order (`network.any_size`, `network.prepare`); a graph whose resize TFLite has no
  builtin for (BICUBIC, AREA) gets a fixed [1, h, w, 3] instead. Or
  `normalized_input_image_tensor` float32 [1, h, w, 3] at the model's size, already scaled by
  `x * 2/255 - 1` (`input_type="float32"`, the input `export_tflite_ssd_graph.py` gave TF1's
  TFLite graphs);
- outputs named as the SavedModel's: `detection_boxes` [1, D, 4] ([ymin, xmin, ymax, xmax],
  normalised), `detection_scores` [1, D], `detection_classes` [1, D] (1-based, float32),
  `num_detections` [1], so `Interpreter.get_signature_runner()(input_tensor=...)` returns the
  dict the SavedModel's signature returns (D = `max_detections`, the config's
  `max_total_detections` by default);
- a metadata entry (`metadata`, read by `file_format.read_metadata`): the model's input size,
  resize kernel and order, NMS mode, class count.

Post-processing modes (`nms`):

- "per-class" (the default): the TF graph's own post-processing (`postprocessing`: per-class
  NMS, the global sort with its tie order, clipping, empty boxes dropped), in TFLite builtin
  ops only (NON_MAX_SUPPRESSION_V4 and TOPK_V2 per class, GATHER, SELECT, an IF), each class's
  candidates sorted before its NMS so that equal scores are decided as TF1 decides them
  (`per_class_outputs`). Its detections are the converted model's (`ssd_mobilenet.load`) to
  float32 rounding: the kernels are TFLite's, not oneDNN's, so scores and boxes differ in the
  last bits, and counts, classes and order are the same unless two candidates tie within that
  rounding.
- "regular" / "fast": the `TFLite_Detection_PostProcess` custom op (in the builtin op resolver
  of the TFLite interpreter and of TFLite's mobile runtimes) on the raw box codes, the class
  scores and the anchors, with the attributes `export_tflite_ssd_graph.py` set. What differs
  from the TF graph, in both: boxes are not clipped to the image (the graph clips them, and its
  `clip_before_nms` exports run NMS on the clipped boxes and drop those that are empty once
  clipped); a score must be at least the threshold (the graph: above it); the op decodes the
  boxes itself. "regular": NMS per class, each class capped at `detections_per_class`
  (the config's `max_detections_per_class`), then the best `max_detections` over all classes,
  which is the graph's scheme apart from the above. "fast" (the TF1 script's default): each
  anchor keeps only its best class, and one class-agnostic NMS runs over those, capped at
  `max_detections` in all: a box of one class suppresses an overlapping box of another, and an
  anchor never yields two classes. In the file, the op's four outputs then go through a
  class offset (its classes are 0-based) and are renamed to the signature's names.

`int8` (`representative_images`): post-training quantization of the network's convolutions
(int8 weights and activations, calibrated on those images), with the input and outputs in their
types (the uint8 image or float32 in, float32 out). Everything after the heads (box decoding,
the score converter, NMS, the sort) stays float32: the converter's default would also round
scores and class ids through int8 (`_quantize_network_only`). Detections then agree with the
float model's by class and IoU, not exactly (`migrate export` measures and reports by how much).

What the TFLite op does differently is read off its kernel (tensorflow/lite/kernels/
detection_postprocess.cc: `values[i] >= threshold`, no clipping, decoding in double precision).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ssd_mobilenet import box_coder, postprocessing
from ssd_mobilenet.formats import network as network_lib
from ssd_mobilenet.formats.iou_limit import inclusive_limit
from ssd_mobilenet.formats.network import any_size, file_input
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, INPUT_TYPES, UINT8
from ssd_mobilenet.formats.tflite import integer as tflite_integer
# The file's contract (names, metadata) is its readers' as well.
from ssd_mobilenet.formats.tflite.file_format import (CUSTOM_OP, METADATA_NAME, METADATA_VERSION, NMS_FAST,
                                                      NMS_MODES, NMS_PER_CLASS, NMS_REGULAR)

# What the custom-op modes differ in from the TF graph, one line each (the module docstring has more).
DIFFERENCES = {
    NMS_REGULAR: "TFLite_Detection_PostProcess, regular NMS: boxes not clipped to the image, scores at the threshold "
             "kept, per-class caps as the graph's; detections agree with the converted model's by class and IoU, "
             "not exactly",
    NMS_FAST: "TFLite_Detection_PostProcess, fast NMS: one class per anchor (its best) and one class-agnostic NMS, "
          "boxes not clipped; detections of overlapping objects of different classes suppress each other",
}


def _per_class(folded, heads, max_detections: int, sigmoid) -> dict:
    """The graph's post-processing of `heads`, [(codes [1, A_i, 4], logits [1, A_i, slots])] in
    anchor order (one pair for all anchors, or one per feature map): each pair decoded against
    its anchors and its logits converted to scores by `sigmoid` (`_Export`'s), then concatenated
    (elementwise, so the same values either way; an integer file dequantizes each map's heads on
    their own grid)."""
    config = folded.config.replace(max_total_detections=max_detections)
    boxes, scores, start = [], [], 0

    def drop_batch(x):
        # A reshape, not `x[0]`: TFLite's STRIDED_SLICE copies [1, A, slots] element by element,
        # a RESHAPE the buffer whole; the same values (docs/measurements.md, "LiteRT's post-processing").
        return tf.reshape(x, x.shape[1:])

    for codes, logits in heads:
        count = int(codes.shape[1])
        boxes.append(drop_batch(box_coder.decode(codes, folded.anchors[start:start + count], config.box_coder_scales)))
        scores.append(drop_batch(postprocessing.convert_scores(logits, config, sigmoid=sigmoid)))
        start += count
    boxes, scores = (boxes[0], scores[0]) if len(heads) == 1 else (tf.concat(boxes, 0), tf.concat(scores, 0))
    return per_class_outputs(boxes, scores, config)


def per_class_outputs(boxes, scores, config) -> dict:
    """The "per-class" file's post-processing of one image: decoded boxes float32 [A, 4]
    ([ymin, xmin, ymax, xmax], unclipped) and scores [A, slots] (`postprocessing.convert_scores`)
    -> the signature's four outputs [1, D, 4], [1, D], [1, D], [1], D = the config's
    `max_total_detections`. Each class's candidates are sorted before its NMS
    (`postprocessing.postprocess_image`'s `sort_first`): LiteRT's NON_MAX_SUPPRESSION_V4 breaks
    score ties otherwise than TensorFlow's kernel, and would then keep other boxes. It also
    suppresses a box whose IoU equals the limit, where TF1's suppresses above it only: its limit
    is `iou_limit.inclusive_limit` of the config's, but not above 1 (ai-edge-litert 2.3 then
    returns one box several times): at a limit of 1, which in TF1 suppresses nothing, LiteRT still
    suppresses a box identical to a kept one."""
    limit = min(inclusive_limit(config.iou_threshold), np.float32(1.0))
    config = config.replace(iou_threshold=float(limit))
    boxes, scores, classes, num = postprocessing.postprocess_image(boxes, scores, config, sort_first=True)[:4]
    return {"detection_boxes": boxes[None], "detection_scores": scores[None],
            "detection_classes": classes[None] + 1.0,  # label_id_offset, as `postprocess`
            "num_detections": num[None]}


def center_size_anchors(anchors: np.ndarray) -> np.ndarray:
    """[A, 4] [ymin, xmin, ymax, xmax] -> [A, 4] [ycenter, xcenter, h, w], float32: the anchors
    constant `export_tflite_ssd_graph.py` feeds the op (box_list's center coordinates)."""
    ymin, xmin, ymax, xmax = np.asarray(anchors, np.float32).T
    h, w = ymax - ymin, xmax - xmin
    return np.stack([ymin + h / 2, xmin + w / 2, h, w], axis=1).astype(np.float32)


def custom_op_attributes(config, nms: str, max_detections: int) -> dict:
    """The op's attributes as `export_tflite_ssd_graph.py` set them: one class per detection,
    the config's per-class cap, thresholds and box coder scales; `use_regular_nms` for "regular"."""
    ys, xs, hs, ws = config.box_coder_scales
    return {"max_detections": int(max_detections), "max_classes_per_detection": 1,
            "detections_per_class": int(config.max_detections_per_class), "use_regular_nms": nms == NMS_REGULAR,
            "nms_score_threshold": float(config.score_threshold), "nms_iou_threshold": float(config.iou_threshold),
            "num_classes": int(config.num_classes), "y_scale": float(ys), "x_scale": float(xs),
            "h_scale": float(hs), "w_scale": float(ws)}


def _implements_signature(attributes: dict) -> str:
    """The `experimental_implements` text the converter legalizes into the custom op: a NameAttrList
    in text format. Floats are written with `repr`, all their digits (a "%f" would write a 1e-8
    score threshold as 0.000000)."""
    def value(v):
        if isinstance(v, bool):
            return f"b: {str(v).lower()}"
        return f"i: {v}" if isinstance(v, int) else f"f: {v!r}"
    return " ".join([f'name: "{CUSTOM_OP}"'] + [f'attr {{ key: "{k}" value {{ {value(v)} }} }}'
                                                 for k, v in attributes.items()])


def _with_options(tflite_bytes: bytes, attributes: dict) -> bytes:
    """The file with every `TFLite_Detection_PostProcess` op's custom options set to `attributes`.

    The converter writes the options from the `experimental_implements` text but leaves
    `detections_per_class` out (TF 2.21's nms_utils.cc writes a fixed list without it), and the
    kernel then takes its default, 100; the TF1 script set it to the config's
    `max_detections_per_class`, so the options are written again here, complete. Booleans as
    integers, as the converter and the TF1 toco path write them.
    """
    from flatbuffers import flexbuffers
    from tensorflow.lite.tools import flatbuffer_utils
    model = flatbuffer_utils.read_model_from_bytearray(tflite_bytes)
    options = list(flexbuffers.Dumps({k: int(v) if isinstance(v, bool) else v for k, v in attributes.items()}))
    custom = {i for i, code in enumerate(model.operatorCodes)
              if code.customCode is not None and code.customCode.decode() == CUSTOM_OP}
    for graph in model.subgraphs:
        for op in graph.operators:
            if op.opcodeIndex in custom:
                op.customOptions = options
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _custom_op(folded, codes, logits, nms: str, max_detections: int, sigmoid) -> dict:
    config = folded.config
    attributes = custom_op_attributes(config, nms, max_detections)
    num_anchors = int(codes.shape[1])
    d = max_detections * attributes["max_classes_per_detection"]

    # TensorFlow has no kernel for the op: the converter replaces this function, by its
    # `experimental_implements`, with the custom op, whose four results take the places of
    # the function's four results in order. The placeholders only give them their shapes.
    @tf.function(experimental_implements=_implements_signature(attributes))
    def detection_postprocess(box_encodings, class_predictions, anchors):
        del box_encodings, class_predictions, anchors
        return (tf.zeros([1, d, 4], tf.float32, name="detection_boxes"),
                tf.zeros([1, d], tf.float32, name="detection_classes"),
                tf.zeros([1, d], tf.float32, name="detection_scores"),
                tf.zeros([1], tf.float32, name="num_detections"))

    # The op converts no scores itself: it takes them after the score converter, background
    # column included (its label offset is the column count minus num_classes).
    scores = postprocessing.convert_scores(logits, config, sigmoid=sigmoid)
    anchors = tf.constant(center_size_anchors(folded.anchors), name="anchors")
    assert anchors.shape[0] == num_anchors
    boxes, classes, scores, num = detection_postprocess(codes, scores, anchors)
    return {"detection_boxes": boxes, "detection_scores": scores,
            "detection_classes": classes + 1.0,  # the op's classes are 0-based
            "num_detections": num}


class _Export(tf.Module):
    """The traced signature function and what the converter needs beside it."""

    def __init__(self, model, nms: str, input_type: str, max_detections: int, int8: bool = False):
        super().__init__(name="ssd_mobilenet_v1_tflite")
        if nms not in NMS_MODES:
            raise ValueError(f"nms must be one of {', '.join(NMS_MODES)}, got {nms!r}")
        if input_type not in INPUT_TYPES:
            raise ValueError(f"input_type must be one of {', '.join(INPUT_TYPES)}, got {input_type!r}")
        if max_detections < 1:
            raise ValueError(f"max_detections must be >= 1, got {max_detections}")
        config = model.config
        if config.weight_bits:
            # Quantization-aware: the integer file (`tflite_integer`), per-class NMS on the photo.
            if nms != NMS_PER_CLASS or not any_size(config, input_type):
                raise ValueError(f"quantization-aware: uint8 photos and per-class NMS only (not nms={nms!r}, "
                                 f"input_type={input_type!r})")
            folded, network = tflite_integer.heads_function(model)
        else:
            folded, network = network_lib.network(model, input_type)

        sigmoid = postprocessing.file_sigmoid(int8 or bool(config.weight_bits))

        def serve(image):
            if config.weight_bits:
                return _per_class(folded, network(image), max_detections, sigmoid)
            codes, logits = network(image)
            if nms == NMS_PER_CLASS:
                return _per_class(folded, [(codes, logits)], max_detections, sigmoid)
            return _custom_op(folded, codes, logits, nms, max_detections, sigmoid)

        dtype = tf.uint8 if input_type == UINT8 else tf.float32
        size = [None, None] if any_size(config, input_type) else [config.image_height, config.image_width]
        spec = tf.TensorSpec([1, *size, 3], dtype, name=INPUT_NAMES[input_type])
        # The keyword names the signature's input.
        # No autograph (as in `detector`): the branches above are on Python values, the graph's control
        # flow is written as tf ops, so autograph would only rewrite every function the trace calls.
        function = tf.function(lambda **kw: serve(kw[INPUT_NAMES[input_type]]), autograph=False)
        self.max_detections = max_detections
        self.concrete_function = function.get_concrete_function(**{INPUT_NAMES[input_type]: spec})
        # The folded copy lives as long as the module (the function was traced from it), but
        # untracked: the converter saves what it is given to a temporary SavedModel, and the copy's
        # variables (not in the file: the weights are constants) would be saved there for nothing.
        self._keep = _Untracked(folded)


class _Untracked:
    """Holds an object without a tf.Module's dependency tracking seeing it."""

    def __init__(self, value):
        self.value = value


def metadata(config, nms: str, input_type: str, max_detections: int, int8: bool, carried: dict | None = None) -> dict:
    """The file's `METADATA_NAME` entry (`file_format`): what its readers cannot tell from the
    signature, and what the model `carried` (`converted_dir.carried`: labels, synthetic)."""
    return {**(carried or {}), "version": METADATA_VERSION, "image_size": [config.image_height, config.image_width],
            "resize_method": config.resize_method, "normalize_before_resize": bool(config.normalize_before_resize),
            "any_size": any_size(config, input_type), "num_classes": int(config.num_classes), "nms": nms,
            "input": input_type, "max_detections": int(max_detections), "int8": bool(int8),
            "quantization": ("aware" if config.weight_bits else "post-training") if int8 else None}


def _finished(tflite_bytes: bytes, entry: dict) -> bytes:
    """The file with `entry` (JSON) as its `METADATA_NAME` metadata, beside the converter's own,
    and its tensors unnamed but for each subgraph's inputs and outputs. The converter names a
    tensor after every op fused into it (90 classes' `unstack_6;unstack_61;...;unstack_650`):
    27% of a PPN 300 file's bytes and 1.5% of it gzip-compressed, as a web page downloads it
    (docs/measurements.md); no reader uses them (the signature names the outputs)."""
    import json

    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils
    model = flatbuffer_utils.read_model_from_bytearray(tflite_bytes)
    buffer = schema.BufferT()
    buffer.data = list(json.dumps(entry, sort_keys=True).encode("utf-8"))
    model.buffers.append(buffer)
    item = schema.MetadataT()
    item.name, item.buffer = METADATA_NAME, len(model.buffers) - 1
    model.metadata = [m for m in (model.metadata or []) if m.name != METADATA_NAME.encode()] + [item]
    for graph in model.subgraphs:
        ends = set(graph.inputs) | set(graph.outputs)
        for i, tensor in enumerate(graph.tensors):
            if i not in ends:
                tensor.name = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def flex_ops_needed(error: Exception) -> str | None:
    """The TF ops a converter error says need Flex ("ResizeBilinear, ..."), or None for other errors."""
    for line in str(error).splitlines():
        if line.strip().startswith("TF Select ops:"):
            return line.split(":", 1)[1].strip()
    return None


class NeedsFlexOps(RuntimeError):
    """The converter of this TensorFlow release cannot express the per-class post-processing in
    builtin ops (it would need Flex ops); the message is the converter's list of them."""


def convert(model, nms: str = NMS_PER_CLASS, input_type: str = UINT8, max_detections: int | None = None,
            representative_images=None, carried: dict | None = None, float16_weights: bool = False) -> bytes:
    """The `.tflite` file of `model` (an `SSDMobileNetV1` with its weights, batch norm unfolded,
    as `detector.load_model` returns it), per the module docstring.

    `representative_images`: None for a float32 file; uint8 [H, W, 3] images (any sizes; a
    list or an [N, H, W, 3] array) for int8 post-training quantization calibrated on them.
    A quantization-aware model (`config.weight_bits`) gives its integer file
    (`tflite_integer`: int8 on the checkpoint's ranges, no calibration). `carried`: `metadata`'s.

    Raises:
      ValueError: an unknown mode; a quantization-aware model with calibration images, another
        NMS than per-class or the float32 input.
      NeedsFlexOps: the converter needs Flex ops for this file (`migrate export` then falls back
        to "regular" with a notice). TF 2.21's expresses every mode in builtin ops.
    """
    if model.config.weight_bits and representative_images is not None:
        raise ValueError("a quantization-aware model is quantized on the ranges its checkpoint holds: no calibration")
    module = _Export(model, nms, input_type, max_detections or model.config.max_total_detections,
                     int8=representative_images is not None)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.concrete_function], module)
    # Builtin ops only: a Flex op would need the TF select runtime, which mobile apps rarely link.
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    # The one custom op allowed is the detection post-processing the modes other than per-class ask for.
    converter.allow_custom_ops = nms != NMS_PER_CLASS
    if representative_images is not None:
        images = [file_input(image, model.config, input_type) for image in representative_images]
        if not images:
            raise ValueError("no representative images for the int8 calibration")
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([image] for image in images)
    if model.config.weight_bits:
        tflite_integer.configure(converter)
    if float16_weights and representative_images is None and not model.config.weight_bits:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    try:
        data = _quantize_network_only(converter) if representative_images is not None else converter.convert()
    except Exception as e:  # the converter's ConverterError is not exported under a stable name
        flex = flex_ops_needed(e)
        if flex:
            raise NeedsFlexOps(f"TF Select ops: {flex}") from None
        raise
    if nms != NMS_PER_CLASS:
        data = _with_options(data, custom_op_attributes(model.config, nms, module.max_detections))
    return _finished(data, metadata(model.config, nms, input_type, module.max_detections,
                                    representative_images is not None or bool(model.config.weight_bits),
                                    carried))


# The ops int8 quantization may take: the network's convolutions (batch norm and ReLU6 fused in)
# and the padding between them. Everything after the heads stays float32.
QUANTIZED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "PAD")


def _quantize_network_only(converter) -> bytes:
    """int8 weights and activations for the `QUANTIZED_OPS`, float32 for every other op.

    Left to itself the converter quantizes every op that has an int8 kernel, post-processing
    included: class ids, anchor indices and the NMS inputs then pass through int8 tensors
    whose calibrated ranges cannot hold them (measured on the 90-class model: class ids came
    out as 0.95, no detection survived). Selective quantization (the converter's debugger
    options) keeps those ops float32; the head outputs are dequantized once, right after the
    last convolutions.
    """
    from tensorflow.lite.python import schema_py_generated as schema
    denied = [name for name in vars(schema.BuiltinOperator) if not name.startswith("_")
              and name not in QUANTIZED_OPS]
    options = tf.lite.experimental.QuantizationDebugOptions(denylisted_ops=denied)
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_options=options,
                                                         debug_dataset=converter.representative_dataset)
    return _without_requantization(debugger.get_nondebug_quantized_model())


def _without_requantization(tflite_bytes: bytes) -> bytes:
    """The file without QUANTIZE -> DEQUANTIZE pairs on float32 tensors.

    Selective quantization keeps a denied op float32 but still rounds its calibrated output
    through int8 and back (a QUANTIZE and a DEQUANTIZE), which for the post-processing means
    scores in steps of 1/256 and class ids through a range that cannot hold them. Every reader of
    such a pair's output reads the float32 tensor before it instead; the pair is removed.
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils
    model = flatbuffer_utils.read_model_from_bytearray(tflite_bytes)
    names = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    quantize, dequantize = schema.BuiltinOperator.QUANTIZE, schema.BuiltinOperator.DEQUANTIZE
    for g, graph in enumerate(model.subgraphs):
        producer = {t: op for op in graph.operators for t in op.outputs}
        replace = {}
        for op in graph.operators:
            if names[op.opcodeIndex] != dequantize:
                continue
            # Back through the QUANTIZE chain (a float32 -> int8 step, then int8 -> int8 requantizations).
            source, q = None, producer.get(op.inputs[0])
            while q is not None and names[q.opcodeIndex] == quantize:
                source = q.inputs[0]
                if graph.tensors[source].type == schema.TensorType.FLOAT32:
                    replace[op.outputs[0]] = source
                    break
                q = producer.get(source)
        for op in graph.operators:
            op.inputs = [replace.get(t, t) for t in op.inputs]
        graph.outputs = [replace.get(t, t) for t in graph.outputs]
        for signature in model.signatureDefs or ():
            if signature.subgraphIndex == g:
                for output in signature.outputs:
                    output.tensorIndex = replace.get(output.tensorIndex, output.tensorIndex)
        graph.operators = [op for op in graph.operators
                           if not (names[op.opcodeIndex] == dequantize and op.outputs[0] in replace)]
        while True:  # QUANTIZE ops nothing reads any more, last ones of a chain first
            read = {t for op in graph.operators for t in op.inputs} | set(graph.outputs)
            kept = [op for op in graph.operators if names[op.opcodeIndex] != quantize or set(op.outputs) & read]
            if len(kept) == len(graph.operators):
                break
            graph.operators = kept
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def export_tflite(model, path: str, nms: str = NMS_PER_CLASS, input_type: str = UINT8,
                  max_detections: int | None = None) -> None:
    """Writes `convert(model, ...)` to `path`, atomically (nothing is left at `path` on an error)."""
    from ssd_mobilenet.atomic_write import write_bytes
    write_bytes(path, convert(model, nms, input_type, max_detections))
