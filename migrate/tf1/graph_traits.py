"""Reading off a TF1 graph the behaviours `pipeline.config` does not record.

The Object Detection API changed what the same config builds between releases; the graph
(frozen, meta or SavedModel) shows which one a model has, without running anything.
"""

from __future__ import annotations

import numpy as np
import re

from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import tensor_util

from ssd_mobilenet.config.ssd_config import (BACKGROUND_SLICE_LOGITS, BACKGROUND_SLICE_SCORES, NMS_CLIP_AFTER,
                                             NMS_CLIP_BEFORE)
from ssd_mobilenet.errors import ConfigError

_SCORE_CONVERTERS = {"Sigmoid": "SIGMOID", "Softmax": "SOFTMAX", "Identity": "IDENTITY"}
_RESIZE_METHODS = {"ResizeBilinear": "BILINEAR", "ResizeBicubic": "BICUBIC", "ResizeArea": "AREA",
                   "ResizeNearestNeighbor": "NEAREST_NEIGHBOR"}
_NMS = re.compile(r"^Postprocessor/.*/MultiClassNonMaxSuppression/")


def _nodes(graph_def):
    return {n.name: n for n in graph_def.node}


def graph_traits(graph_def) -> dict:
    """SSDConfig fields implied by the graph's ops.

    Returns a dict with any of: `fused_batch_norm` (FusedBatchNorm* ops in the feature
    extractor), `use_explicit_padding` (the first conv is VALID after a Pad), `nms_variant`
    (a `FilterGreaterThan` scope in post-processing means the score filter and clipping run
    before NMS), `pad_extra_layers_to_even` (the extra layers' inputs are zero-padded by
    concatenation; the image's own padding before Conv2d_0 is `pad_to_multiple`),
    `interpolated_anchor_after_unit_ratio` (the layer-1 aspect ratio constant has 1.0 twice
    at its start), `image_height`/`image_width` (the resize op's constant size), `resize_method`
    (the resize op), `normalize_before_resize` (`preprocessing_order`),
    `pad_to_multiple` (the smallest multiple that gives the image's zero padding before the
    first conv; 1 without padding), the batch-norm epsilons (`base_batch_norm_epsilon`,
    `batch_norm_epsilon`, `box_predictor_batch_norm_epsilon`), and the post-processing
    constants the graph computes with (`score_converter`, `logit_scale`, `score_threshold`,
    `iou_threshold`, `max_detections_per_class`, `max_total_detections`, `box_coder_scales`,
    `add_background_class`, `background_slice`; see `postprocessing_traits`; for a TFLite export,
    `tflite_export_traits`), and `weight_bits`/`activation_bits` (`quantization_traits`).

    Raises:
      ConfigError: the graph post-processes in a way the TF2 model does not reproduce (soft,
        combined or class-agnostic NMS), or preprocesses in an order `preprocessing_order`
        cannot tell.
    """
    nodes = _nodes(graph_def)
    traits = {}
    fe_ops = [n.op for n in graph_def.node if n.name.startswith("FeatureExtractor/")]
    traits.update(quantization_traits(graph_def))
    if "Relu6" in fe_ops and not traits.get("weight_bits"):
        # (A quantization-aware graph folds batch norm by hand; its FusedBatchNorm ops are dead.)
        traits["fused_batch_norm"] = any(op.startswith("FusedBatchNorm") for op in fe_ops)
    pp_names = [n.name for n in graph_def.node if n.name.startswith("Postprocessor/")]
    if any("MultiClassNonMaxSuppression" in name for name in pp_names):
        traits["nms_variant"] = (NMS_CLIP_BEFORE if any("/FilterGreaterThan" in name for name in pp_names)
                                 else NMS_CLIP_AFTER)
    # `use_explicit_padding` pads every k > 1 conv's input by hand and convolves VALID; the first
    # conv of the backbone (3x3, stride 2) is SAME otherwise.
    conv0 = next((n for n in graph_def.node if n.op == "Conv2D" and n.name.startswith("FeatureExtractor/")
                  and n.name.endswith(("/Conv2d_0/Conv2D", "/Conv2d_0/convolution"))), None)  # TF 1.3: convolution
    input_pads = {}
    if conv0 is not None:
        traits["use_explicit_padding"] = conv0.attr["padding"].s == b"VALID"
        input_pads = _input_zero_padding(nodes, conv0)
    # The same zero concatenation pads the image (`pad_to_multiple`) and, in 2017 exports, the
    # extra layers' inputs; only the latter count here.
    traits["pad_extra_layers_to_even"] = any(
        n.op == "ConcatV2" and n.name.startswith("FeatureExtractor/MobilenetV1/concat") and n.name not in input_pads
        and any(i.startswith("FeatureExtractor/MobilenetV1/zeros") for i in n.input)
        for n in graph_def.node)
    ratios = _const_input(nodes, "MultipleGridAnchorGenerator/Sqrt_1")
    if ratios is not None and ratios.size >= 2:
        traits["interpolated_anchor_after_unit_ratio"] = bool(ratios[0] == 1.0 and ratios[1] == 1.0)
    traits.update(preprocessing_order(graph_def, nodes))
    size = None
    for n in graph_def.node:
        if n.op.startswith("Resize") and n.name.startswith("Preprocessor/"):
            size = _const_input(nodes, n.name, index=1)
            if n.op in _RESIZE_METHODS:
                traits["resize_method"] = _RESIZE_METHODS[n.op]
            break
    if size is not None and size.size == 2:
        traits["image_height"], traits["image_width"] = int(size[0]), int(size[1])
    for key, scope, norm in _BN_SCOPES:
        epsilon = _batch_norm_epsilon(graph_def, nodes, scope, norm)
        if epsilon is not None:
            traits[key] = epsilon
    traits.update(postprocessing_traits(graph_def, nodes))
    traits.update(tflite_export_traits(graph_def, nodes))
    if conv0 is not None and "image_height" in traits:
        multiple = _pad_multiple(traits["image_height"], traits["image_width"], input_pads.values())
        if multiple is not None:
            traits["pad_to_multiple"] = multiple
    return traits


# The nodes that take the image into the OD API's per-image resize loop
# (`shape_utils.static_or_dynamic_map_fn`): a TensorArray scatter for `tf.map_fn` over a batch of
# unknown size, `tf.unstack` (Unpack) when the batch size is static; and those that give its result
# back as a batch: the TensorArray gather, or `tf.stack` (Pack).
_MAP_INPUT_OPS = ("TensorArrayScatterV3", "TensorArrayScatterV2", "TensorArrayScatter", "Unpack")
_MAP_OUTPUT_OPS = ("TensorArrayGatherV3", "TensorArrayGatherV2", "TensorArrayGather", "Pack")
NORMALIZED = "Preprocessor/sub"  # `x * (2/255) - 1`: its last op in every order


def _data_inputs(node) -> list:
    return [i.split(":")[0] for i in node.input if not i.startswith("^")]


def _through_identity(nodes, name):
    node = nodes.get(name)
    while node is not None and node.op == "Identity" and node.input:
        node = nodes.get(_data_inputs(node)[0])
    return node


def preprocessing_order(graph_def, nodes=None) -> dict:
    """{"normalize_before_resize": bool}, or {} for a graph without `Preprocessor/sub` (a TFLite
    export, fed the preprocessed image).

    OD API code up to ~2019 resizes each image in a map loop over the cast image, then scales the
    batch the loop gives back: `Preprocessor/mul` reads the loop's output (the TensorArray gather,
    or Pack for a static batch). Later code (`ssd_meta_arch.preprocess`) scales first: the loop's
    input (the TensorArray scatter, or Unpack) reads `Preprocessor/sub`, and the loop's output is
    the preprocessed image. The two differ in rounding only, so this is read off the structure.

    Raises:
      ConfigError: `Preprocessor/sub` exists but the graph shows neither order (or both).
    """
    nodes = nodes or _nodes(graph_def)
    sub, mul = nodes.get(NORMALIZED), nodes.get("Preprocessor/mul")
    if sub is None:
        return {}
    normalized_first = any(
        n.name.startswith("Preprocessor/") and n.op in _MAP_INPUT_OPS
        and any(_through_identity(nodes, i) is sub for i in _data_inputs(n))
        for n in graph_def.node)
    resized_first = mul is not None and any(
        src is not None and src.name.startswith("Preprocessor/") and src.op in _MAP_OUTPUT_OPS
        for src in (_through_identity(nodes, i) for i in _data_inputs(mul)))
    if normalized_first == resized_first:
        # The TF2 model reproduces the OD API's two orders only.
        raise ConfigError("cannot tell if the Preprocessor scales before or after resizing")
    return {"normalize_before_resize": normalized_first}


def preprocessed_image(graph_def, nodes=None) -> str | None:
    """The name of the tensor the feature extractor is fed, the `Preprocessor` stage: float32
    [N, h, w, 3] in [-1, 1]. `Preprocessor/sub:0` when the graph resizes first; when it scales
    first, the resize loop's image output (`Preprocessor/map/TensorArrayStack/TensorArrayGatherV3:0`
    in `tf.map_fn` loops; `Preprocessor/sub` is then the full-size image). None when the graph has
    no Preprocessor or its order cannot be told (`preprocessing_order`)."""
    nodes = nodes or _nodes(graph_def)
    try:
        order = preprocessing_order(graph_def, nodes)
    except ConfigError:
        return None
    if not order:
        return None
    if not order["normalize_before_resize"]:
        return NORMALIZED + ":0"
    # The loop gives back the images (float32) and, in OD API loops, their true shapes (int32).
    # (Attributes read with `in` first: indexing a missing key would add it to the GraphDef.)
    key = lambda n: "T" if n.op == "Pack" else "dtype"  # noqa: E731
    outputs = [n for n in graph_def.node if n.name.startswith("Preprocessor/") and n.op in _MAP_OUTPUT_OPS
               and key(n) in n.attr and n.attr[key(n)].type == types_pb2.DT_FLOAT]
    return outputs[0].name + ":0" if len(outputs) == 1 else None


_FAKE_QUANT = re.compile(r"/(weights_quant|act_quant)/FakeQuantWithMinMaxVars$")


def quantization_traits(graph_def) -> dict:
    """`weight_bits` and `activation_bits` of a quantization-aware graph (tf.contrib.quantize's
    rewrite: a FakeQuantWithMinMaxVars on every layer's folded weights, scope `weights_quant`,
    narrow range, and one on its output, `act_quant`); both 0 for a graph without FakeQuant ops.

    Raises:
      ConfigError: FakeQuant ops other than that rewrite's, or mixed bit widths.
    """
    bits = {"weights_quant": set(), "act_quant": set()}
    for n in graph_def.node:
        if not n.op.startswith("FakeQuant"):
            continue
        m = _FAKE_QUANT.search(n.name)
        # Attributes are read with `in` first: indexing a missing key would add it to the GraphDef.
        narrow = n.attr["narrow_range"].b if "narrow_range" in n.attr else False
        if n.op != "FakeQuantWithMinMaxVars" or m is None or narrow != (m.group(1) == "weights_quant"):
            raise ConfigError(f"{n.name} ({n.op}, narrow_range {narrow}): not tf.contrib.quantize's")
        bits[m.group(1)].add(n.attr["num_bits"].i if "num_bits" in n.attr else 8)
    if not bits["weights_quant"] and not bits["act_quant"]:
        return {"weight_bits": 0, "activation_bits": 0}
    if len(bits["weights_quant"]) != 1 or len(bits["act_quant"]) != 1:
        raise ConfigError(f"FakeQuant bit widths: weights {sorted(bits['weights_quant'])}, activations "
                          f"{sorted(bits['act_quant'])} (one each is supported)")
    return {"weight_bits": bits["weights_quant"].pop(), "activation_bits": bits["act_quant"].pop()}


def anchor_box_specs(graph_def, nodes=None):
    """Per anchor layer, the graph's (scales, aspect ratios) as float32 arrays, or None.

    `tile_anchors` divides each layer's scale constant by the square root of its aspect-ratio
    constant (heights = scales / sqrt(ratios) * base height): one `Sqrt` per layer under
    `MultipleGridAnchorGenerator`, named `Sqrt`, `Sqrt_1`, ... in layer order, in every OD API
    release seen (2017 to 2020 graphs).
    """
    nodes = nodes or _nodes(graph_def)
    sqrts, divides = {}, {}
    for n in graph_def.node:
        if not n.name.startswith("MultipleGridAnchorGenerator/"):
            continue
        m = re.fullmatch(r"MultipleGridAnchorGenerator/Sqrt(?:_(\d+))?", n.name)
        if m and n.op == "Sqrt":
            sqrts[int(m.group(1) or 0)] = n.name
        elif n.op == "RealDiv" and len(n.input) == 2:
            divides[n.input[1].split(":")[0]] = n.name
    if not sqrts or sorted(sqrts) != list(range(len(sqrts))):
        return None
    layers = []
    for k in range(len(sqrts)):
        ratios = _const_input(nodes, sqrts[k])
        scales = _const_input(nodes, divides[sqrts[k]]) if sqrts[k] in divides else None
        if ratios is None or scales is None or ratios.ndim != 1 or ratios.shape != scales.shape:
            return None
        layers.append((scales.astype(np.float32), ratios.astype(np.float32)))
    return layers


# Where each batch-norm epsilon of SSDConfig is seen: the first MobileNet layer, the first extra
# layer (or FPN layer with batch norm) and the box predictor's first batch norm (depthwise head,
# weight-shared tower); their arg scopes differ between OD API releases.
# (field, layer scope, its batch norm's scope under it: the weight-shared predictor's is per map)
_BN_SCOPES = (
    ("base_batch_norm_epsilon", r"FeatureExtractor/MobilenetV1/(MobilenetV1/)?Conv2d_0", "BatchNorm"),
    ("batch_norm_epsilon", r"FeatureExtractor/MobilenetV1/(Conv2d_13_pointwise_1_Conv2d_2_1x1_\d+|"
                           r"fpn/top_down/smoothing_\d+|fpn/bottom_up_Conv2d_\d+)", "BatchNorm"),
    ("box_predictor_batch_norm_epsilon", r"BoxPredictor_0/BoxEncodingPredictor_depthwise", "BatchNorm"),
    ("box_predictor_batch_norm_epsilon", r"WeightSharedConvolutionalBoxPredictor/(Box)?PredictionTower/conv2d_0",
     "BatchNorm/feature_0"),
)


def _batch_norm_epsilon(graph_def, nodes, scope, norm="BatchNorm"):
    """The epsilon of the batch norm `norm` under `scope`: the FusedBatchNorm attribute, or the
    constant slim's unfused sequence (`BatchNorm/batchnorm/add`) or a quantization-aware graph's
    folding (`BatchNorm_Fold/add`; its FusedBatchNorm is dead and pruned from frozen graphs) adds
    to the variance."""
    pattern = re.compile(f"^{scope}/({norm}/(batchnorm/add|FusedBatchNorm(V\\d)?)|BatchNorm_Fold/add)$")
    for n in graph_def.node:
        if pattern.match(n.name):
            if n.op.startswith("FusedBatchNorm"):
                return float(n.attr["epsilon"].f)
            value = _const_input(nodes, n.name, index=1)
            return float(value) if value is not None and value.size == 1 else None
    return None


TFLITE_POSTPROCESS_OP = "TFLite_Detection_PostProcess"
TFLITE_INPUT = "normalized_input_image_tensor"
TFLITE_CLASS_PREDICTIONS = "raw_outputs/class_predictions"


def is_tflite_export(graph_def) -> bool:
    """Whether the graph is what the OD API's `export_tflite_ssd_graph` writes (`tflite_graph.pb`):
    the network with the checkpoint's weights as constants, fed by `normalized_input_image_tensor`
    (the resized, scaled image: no `Preprocessor`), ending in `raw_outputs/*` and `anchors`, and
    by default the TFLite-only `TFLite_Detection_PostProcess` op (`tflite_postprocess_node`)."""
    return any(n.name in (TFLITE_INPUT, TFLITE_CLASS_PREDICTIONS) or n.op == TFLITE_POSTPROCESS_OP
               for n in graph_def.node)


# The one-line reason verify and bench give for not running a TFLite export.
# A TFLite export graph has no Preprocessor and leaves its post-processing to TFLite.
TFLITE_REFUSAL = "a TFLite export graph: give the model it was exported from"


def tflite_postprocess_node(graph_def):
    """The `TFLite_Detection_PostProcess` node of a TFLite export, or None."""
    return next((n for n in graph_def.node if n.op == TFLITE_POSTPROCESS_OP), None)


def tflite_export_traits(graph_def, nodes=None) -> dict:
    """SSDConfig fields a TFLite export records: the input size (its placeholder's static
    shape), the score converter (the op before `raw_outputs/class_predictions`) and the
    `scale_logits` divisor before it, and the post-processing op's attributes (counts,
    thresholds, box coder scales)."""
    if not is_tflite_export(graph_def):
        return {}
    nodes = nodes or _nodes(graph_def)
    traits = {}
    image = nodes.get(TFLITE_INPUT)
    if image is not None and image.op == "Placeholder" and len(image.attr["shape"].shape.dim) == 4:
        height, width = (d.size for d in image.attr["shape"].shape.dim[1:3])
        if height > 0 and width > 0:
            traits["image_height"], traits["image_width"] = int(height), int(width)
    scores = nodes.get(TFLITE_CLASS_PREDICTIONS)
    converter = nodes.get(scores.input[0].split(":")[0]) if scores is not None and scores.input else None
    if converter is not None and converter.op in _SCORE_CONVERTERS:
        traits["score_converter"] = _SCORE_CONVERTERS[converter.op]
        # The exporter divides by logit_scale first (node `scale_logits`).
        scale = nodes.get(converter.input[0].split(":")[0]) if converter.input else None
        if scale is not None and scale.op in ("RealDiv", "Div"):
            value = _const_input(nodes, scale.name, 1)
            if value is not None and value.size == 1:
                traits["logit_scale"] = float(value)
    node = tflite_postprocess_node(graph_def)
    if node is None:
        return traits
    attr = node.attr
    for key, field, kind in (("max_detections", "max_total_detections", "i"),
                             ("detections_per_class", "max_detections_per_class", "i"),
                             ("nms_score_threshold", "score_threshold", "f"),
                             ("nms_iou_threshold", "iou_threshold", "f")):
        if key in attr:
            traits[field] = int(attr[key].i) if kind == "i" else float(attr[key].f)
    if all(k in attr for k in ("y_scale", "x_scale", "h_scale", "w_scale")):
        traits["box_coder_scales"] = tuple(float(attr[k].f) for k in ("y_scale", "x_scale", "h_scale", "w_scale"))
    return traits


def _box_coder_scales(graph_def, nodes):
    """faster_rcnn_box_coder's scale factors: `Postprocessor/Decode` unstacks the codes into
    ty, tx, th, tw and divides each by its factor (the anchors' unstacked corners are only
    subtracted), so the divisors of an Unpack's outputs 0..3 are the factors in order."""
    found = {}
    for n in graph_def.node:
        if n.name.startswith("Postprocessor/Decode/") and n.op in ("RealDiv", "Div") and len(n.input) == 2:
            src, _, index = n.input[0].partition(":")
            if src in nodes and nodes[src].op == "Unpack":
                value = _const_input(nodes, n.name, index=1)
                if value is not None and value.size == 1:
                    found[int(index or 0)] = float(value)
    return tuple(found[k] for k in range(4)) if sorted(found) == [0, 1, 2, 3] else None


def postprocessing_traits(graph_def, nodes=None) -> dict:
    """The post-processing constants of an OD API graph (scope `Postprocessor`).

    A frozen graph is often all a user has, and its thresholds are what its detections depend
    on: converting it with the proto defaults (score_threshold 0) instead of, say, the zoo's 0.3
    would change the detection count. Read from: the ops between the class logits and NMS
    (`score_path_traits`: score converter, logit_scale, the background slice); per class, `FilterGreaterThan/Greater`
    (score threshold, exports up to TF 1.8) or the NonMaxSuppressionV3+ score_threshold input
    (later exports); the NMS op's iou_threshold (an attribute of the TF 1.3 `NonMaxSuppression`,
    an input since V2); `MultiClassNonMaxSuppression/Minimum` (per class max) and the last
    `Minimum_<k>` with a constant (the total max).
    """
    nodes = nodes or _nodes(graph_def)
    for n in graph_def.node:
        # The OD API's other NMS modes (post_processing's use_combined_nms, use_class_agnostic_nms)
        # select other detections than per-class NMS; the TF2 model runs per-class NMS only.
        if n.name.startswith("Postprocessor/") and (n.op == "CombinedNonMaxSuppression"
                                                    or "/ClassAgnosticNonMaxSuppression/" in n.name):
            mode, scope = (("combined", n.op) if n.op == "CombinedNonMaxSuppression"
                           else ("class-agnostic", "ClassAgnosticNonMaxSuppression"))
            # The TF2 model runs per-class NMS. The node is named by its scope (its name runs to 100 characters).
            raise ConfigError(f"{mode} NMS not supported ({scope})")
    traits = {}
    scales = _box_coder_scales(graph_def, nodes)
    if scales is not None:
        traits["box_coder_scales"] = scales
    traits.update(score_path_traits(graph_def, nodes))
    in_nms = [n for n in graph_def.node if _NMS.match(n.name)]
    nms = next((n for n in in_nms if n.op.startswith("NonMaxSuppression")), None)
    if nms is None:
        return traits
    if nms.op == "NonMaxSuppression":
        traits["iou_threshold"] = float(nms.attr["iou_threshold"].f)
    else:
        iou = _const_input(nodes, nms.name, index=3)
        if iou is not None:
            traits["iou_threshold"] = float(iou)
    if nms.op == "NonMaxSuppressionV5":
        sigma = _const_input(nodes, nms.name, index=5)
        if sigma is None or float(sigma) != 0.0:
            raise ConfigError("soft NMS not supported (soft_nms_sigma "
                              f"{'not constant' if sigma is None else float(sigma)})")
    threshold = next((_const_input(nodes, n.name, index=1) for n in in_nms
                      if n.name.endswith("/FilterGreaterThan/Greater")), None)
    if threshold is None and nms.op in ("NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5"):
        threshold = _const_input(nodes, nms.name, index=4)
    if threshold is not None:
        traits["score_threshold"] = float(threshold)
    minimums = []
    for n in in_nms:
        m = re.search(r"/MultiClassNonMaxSuppression/Minimum(?:_(\d+))?$", n.name)
        if m:
            value = next((v for v in (_const_input(nodes, n.name, i) for i in range(2)) if v is not None), None)
            if value is not None and value.size == 1:
                minimums.append((int(m.group(1) or 0), int(value)))
    if minimums:
        minimums.sort()
        traits["max_detections_per_class"] = minimums[0][1]
        traits["max_total_detections"] = minimums[-1][1]
    return traits


# The scope whose first node ends the path from the class logits to NMS.
_NMS_SCOPE = "Postprocessor/BatchMultiClassNonMaxSuppression/"


def head_concats(graph_def, nodes=None) -> dict:
    """{"box_encodings": node, "class_logits": node}: the root ConcatV2 nodes joining the box
    predictors' outputs. Usually `concat` and `concat_1`, but which is which followed Python's
    dict order in exports made after 2018-09 (classes in `concat` seen in a TF 1.14 export),
    so each is told by the predictor its inputs come from (`BoxPredictor_0/Reshape` of
    `BoxEncodingPredictor`, `Reshape_1` of `ClassPredictor`; the weight-shared predictor's
    heads are `BoxPredictor` and `ClassPredictor`)."""
    nodes = nodes or _nodes(graph_def)
    found = {}
    for name in ("concat", "concat_1"):
        node = nodes.get(name)
        src = nodes.get(node.input[0].split(":")[0]) if node is not None and node.input else None
        while src is not None and src.op in ("Reshape", "Identity", "Squeeze") and src.input:
            src = nodes.get(src.input[0].split(":")[0])
        if src is not None and "/ClassPredictor" in src.name:
            found["class_logits"] = name
        elif src is not None and ("/BoxEncodingPredictor" in src.name or "/BoxPredictor/" in src.name):
            found["box_encodings"] = name
    if len(found) != 2:
        return {"box_encodings": "concat", "class_logits": "concat_1"}
    return found


def score_paths(graph_def, nodes=None) -> list:
    """Every path of ops from the class logits (`concat_1`) forward to NMS, as node lists.

    Followed: nodes under `Postprocessor/` that take a path node as their first (data) input
    (a `Shape` of a path node is not a path); a path ends where a node under
    `Postprocessor/BatchMultiClassNonMaxSuppression/` takes it as any input (not included). The NMS scores
    input is one such path; 2018+ exports have a second into NMS's additional fields
    (`detection_multiclass_scores`, without the background slice).
    """
    nodes = nodes or _nodes(graph_def)
    consumers = {}
    for n in graph_def.node:
        if not n.name.startswith("Postprocessor/"):
            continue
        if n.name.startswith(_NMS_SCOPE):  # NMS takes the scores at any input (a TensorArray scatter's third)
            for i in {i.split(":")[0] for i in n.input if not i.startswith("^")}:
                consumers.setdefault(i, []).append(n)
        elif n.input and n.op != "Shape":
            consumers.setdefault(n.input[0].split(":")[0], []).append(n)
    logits = head_concats(graph_def, nodes)["class_logits"]
    paths, stack = [], [[]] if logits in nodes else []
    while stack:
        path = stack.pop()
        tip = path[-1].name if path else logits
        for c in consumers.get(tip, []):
            if c.name.startswith(_NMS_SCOPE):
                paths.append(path)
            elif len(path) < 16:  # a real path has at most 5 ops; a longer one is no score path
                stack.append(path + [c])
    return paths


def _score_path_fields(path, nodes) -> dict:
    """The fields one path from the class logits to NMS implies (see `score_path_traits`)."""
    fields = {"logit_scale": 1.0}
    converted = False
    for n in path:
        # IDENTITY, the converter, is an Identity op named `convert_scores`; any other Identity
        # passes the tensor on (`raw_box_scores`, the 2018+ exporters' name for the scores).
        if n.op == "Identity" and not (n.name.endswith("/convert_scores") and not converted):
            continue
        if n.op in ("Slice", "StridedSlice") and "add_background_class" not in fields:
            begin = _const_input(nodes, n.name, 1)
            if n.op == "Slice":
                size = _const_input(nodes, n.name, 2)
                whole_rest = size is not None and size.tolist() == [-1, -1, -1]
            else:  # [:, :, 1:]: no end on any axis
                whole_rest = (n.attr["end_mask"].i == 7 if "end_mask" in n.attr else False)
            if begin is None or begin.tolist() != [0, 0, 1] or not whole_rest:
                raise ConfigError(f"{n.name} ({n.op}) slices the scores otherwise than [0, 0, 1:]")
            fields["add_background_class"] = True
            fields["background_slice"] = BACKGROUND_SLICE_SCORES if converted else BACKGROUND_SLICE_LOGITS
        elif n.op in ("RealDiv", "Div", "Mul") and not converted and fields["logit_scale"] == 1.0:
            value = _const_input(nodes, n.name, 1)
            if value is None or value.size != 1 or (n.op == "Mul" and float(value) == 0.0):
                raise ConfigError(f"{n.name} ({n.op}) scales the class logits by a non-constant")
            # Since mid 2020 `scale_logits` multiplies by 1 / logit_scale (exact for 1.0; otherwise
            # within a rounding of the TF2 division, which the conversion check measures).
            fields["logit_scale"] = float(value) if n.op != "Mul" else float(np.float32(1.0 / float(value)))
        elif n.op in _SCORE_CONVERTERS and not converted:
            fields["score_converter"] = _SCORE_CONVERTERS[n.op]
            converted = True
        else:
            # Not an op of the OD API's post-processing as this tool reproduces it.
            raise ConfigError(f"{n.name} ({n.op}) on the scores' way to NMS: not reproduced")
    fields.setdefault("add_background_class", False)
    return fields


def score_path_traits(graph_def, nodes=None) -> dict:
    """`score_converter`, `logit_scale`, `add_background_class` and `background_slice`, read off
    the ops the class logits pass through on their way to NMS.

    The releases differ: TF 1.3 exports slice `concat_1` and apply `Postprocessor/Sigmoid`
    (no logit scale); the 2017_11_17 zoo graph slices, then `scale_logits` and
    `convert_scores`; 2018+ graphs convert first and slice after (`raw_box_scores` between,
    since mid 2018). Each op on the way is accounted for: any other op is refused rather than
    passed over, since an op not reproduced changes the scores silently. Of several paths
    (scores and, in newer exports, the multiclass scores into NMS's additional fields) the
    one that drops the background column decides; they must agree on the rest.

    Returns {} when the graph has no class logits node or no path reaches NMS (e.g. a TFLite
    export, whose `tflite_export_traits` apply).

    Raises:
      ConfigError: an op on the way this tool does not reproduce, or paths that disagree.
    """
    nodes = nodes or _nodes(graph_def)
    found = [_score_path_fields(p, nodes) for p in score_paths(graph_def, nodes)]
    if not found:
        return {}
    sliced = [f for f in found if f["add_background_class"]]
    fields = sliced[0] if sliced else found[0]
    for other in found:
        for key in ("score_converter", "logit_scale"):
            if other.get(key) != fields.get(key):
                raise ConfigError(f"the class logits reach NMS along paths with different "
                                  f"{key}: {fields.get(key)} and {other.get(key)}")
    if "score_converter" not in fields:
        fields["score_converter"] = "IDENTITY"
    return fields


def _input_zero_padding(nodes, conv0) -> dict:
    """{concat node name: (axis, rows or columns added)} for the zero concatenations between the
    preprocessed image and the first conv (`ops.pad_to_multiple`: rows, then columns)."""
    pads = {}
    node = nodes.get(conv0.input[0].split(":")[0])
    while node is not None and node.op in ("Identity", "Pad", "ConcatV2"):
        if node.op == "ConcatV2" and len(node.input) == 3:
            axis = _const_input(nodes, node.name, 2)
            zeros = nodes.get(node.input[1].split(":")[0])
            amount = None
            if axis is not None and zeros is not None and zeros.op == "Fill":
                dims = nodes.get(zeros.input[0].split(":")[0])
                if dims is not None and dims.op == "Pack" and len(dims.input) == 4:
                    value = _const_input(nodes, dims.name, int(axis))
                    amount = None if value is None else int(value)
                elif dims is not None and dims.op == "Const":
                    amount = int(tensor_util.MakeNdarray(dims.attr["value"].tensor)[int(axis)])
            elif axis is not None and zeros is not None and zeros.op == "Const":
                amount = int(tensor_util.MakeNdarray(zeros.attr["value"].tensor).shape[int(axis)])
            if amount is None:
                break
            pads[node.name] = (int(axis), amount)
        node = nodes.get(node.input[0].split(":")[0])
    return pads


def _pad_multiple(height: int, width: int, pads) -> int | None:
    """The smallest `pad_to_multiple` that pads height x width by `pads` [(axis, amount)] (the graph
    shows the padded size, not the multiple; every multiple giving that size computes the same)."""
    pads = list(pads)
    if not pads:
        return 1
    added = {1: 0, 2: 0}
    for axis, amount in pads:
        added[axis] = added.get(axis, 0) + amount
    target = (height + added[1], width + added[2])
    for m in range(2, max(target) + 1):
        if (-(-height // m) * m, -(-width // m) * m) == target:
            return m
    return None


def _const_input(nodes, name, index=0):
    node = nodes.get(name)
    if node is None or len(node.input) <= index:
        return None
    src = _through_identity(nodes, node.input[index].split(":")[0].lstrip("^"))
    if src is None or src.op != "Const":
        return None
    return np.asarray(tensor_util.MakeNdarray(src.attr["value"].tensor))


# ---- the architecture's settings the graph shows -----------------------------------------------

_FPN = "FeatureExtractor/MobilenetV1/fpn/"
# FPN level of each MobileNet layer a projection can read (`ssd_mobilenet_v1_fpn`'s feature_blocks).
_FPN_LEVEL_OF = {"Conv2d_3_pointwise": 2, "Conv2d_5_pointwise": 3, "Conv2d_11_pointwise": 4,
                 "Conv2d_13_pointwise": 5}


def fpn_levels(graph_def) -> dict:
    """`fpn_min_level` and `fpn_max_level` of an FPN graph, or {}: the MobileNet layers the
    projections read (`fpn/top_down/projection_<k>/Conv2D`'s input) are levels 2..5, and each
    `fpn/bottom_up_Conv2d_<j>` adds one level above. Its weights show the same unless layer
    depths coincide (a small multiplier clamped by min_depth)."""
    nodes = _nodes(graph_def)
    levels = []
    for n in graph_def.node:
        m = re.fullmatch(re.escape(_FPN) + r"top_down/projection_\d+/(Conv2D|convolution)", n.name)
        if m and n.input:
            src = _through_identity(nodes, _data_inputs(n)[0])
            layer = src.name.split("/")[-2] if src is not None and "/" in src.name else ""
            if layer in _FPN_LEVEL_OF:
                levels.append(_FPN_LEVEL_OF[layer])
    bottom_up = {m.group(1) for m in (re.match(re.escape(_FPN) + r"bottom_up_Conv2d_(\d+)/", n.name)
                                      for n in graph_def.node) if m}
    if not levels:
        return {}
    return {"fpn_min_level": min(levels), "fpn_max_level": max(levels) + len(bottom_up)}


MULTISCALE_SCOPE = "MultiscaleGridAnchorGenerator/"


def anchor_generator_type(graph_def) -> str | None:
    """The anchor generator whose scope the graph holds (`multiscale_anchor_generator`'s
    `MultiscaleGridAnchorGenerator`, `ssd_anchor_generator`'s `MultipleGridAnchorGenerator`)."""
    if any(n.name.startswith(MULTISCALE_SCOPE) for n in graph_def.node):
        return "multiscale_anchor_generator"
    if any(n.name.startswith("MultipleGridAnchorGenerator/") for n in graph_def.node):
        return "ssd_anchor_generator"
    return None


def multiscale_anchor_fields(graph_def, nodes=None) -> dict | None:
    """The multiscale_anchor_generator fields the graph's constants spell, or None.

    Each level's `GridAnchorGenerator` scope (`.../GridAnchorGenerator`, `_1`, ...) creates its
    base anchor size, stride and offset constants in that order (`Const`, `Const_1`, `Const_2`;
    [y, x] pixels: anchor_scale * 2^l, 2^l and half a stride or 0) and meshes its scales
    (2^(k / scales_per_octave)) with its aspect ratios (`Meshgrid/Reshape`, `Meshgrid/Reshape_1`).
    The caller checks the fields by generating the anchors and comparing them with the graph's.
    """
    nodes = nodes or _nodes(graph_def)
    scopes = sorted({m.group(0) for m in (re.match(re.escape(MULTISCALE_SCOPE) + r"GridAnchorGenerator(_\d+)?/",
                                                     n.name) for n in graph_def.node) if m},
                    key=lambda s: int(s.rstrip("/").rpartition("_")[2]) if s.rstrip("/")[-1].isdigit() else 0)
    levels, base = [], []
    scales = ratios = None
    for scope in scopes:
        size = _const_value(nodes, scope + "Const")
        stride = _const_value(nodes, scope + "Const_1")
        level_scales = _const_input(nodes, scope + "Meshgrid/Reshape")
        level_ratios = _const_input(nodes, scope + "Meshgrid/Reshape_1")
        if any(v is None for v in (size, stride, level_scales, level_ratios)) or size.size != 2 or stride.size != 2:
            return None
        level = float(np.log2(float(stride[0])))
        if not level.is_integer() or float(stride[1]) != float(stride[0]):
            return None
        levels.append(int(level))
        base.append(float(size[0]) / float(stride[0]))
        scales, ratios = level_scales.astype(np.float32), level_ratios.astype(np.float32)
    if not levels or levels != list(range(levels[0], levels[0] + len(levels))) or len(set(base)) != 1:
        return None
    return {"anchor_generator_type": "multiscale_anchor_generator", "anchor_min_level": levels[0],
            "anchor_max_level": levels[-1], "anchor_scale": base[0], "scales_per_octave": int(scales.size),
            "aspect_ratios": tuple(float(r) for r in ratios)}


def _const_value(nodes, name):
    node = nodes.get(name)
    if node is None or node.op != "Const":
        return None
    return np.asarray(tensor_util.MakeNdarray(node.attr["value"].tensor))
