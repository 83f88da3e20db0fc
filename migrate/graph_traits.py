"""Reading off a TF1 graph the behaviours `pipeline.config` does not record.

The Object Detection API changed what the same config builds between releases; the graph
(frozen, meta or SavedModel) shows which one a model has, without running anything.
"""

from __future__ import annotations

import numpy as np
from tensorflow.python.framework import tensor_util

from ssd_mobilenet.config import NMS_CLIP_AFTER, NMS_CLIP_BEFORE


def _nodes(graph_def):
    return {n.name: n for n in graph_def.node}


def graph_traits(graph_def) -> dict:
    """SSDConfig fields implied by the graph's ops.

    Returns a dict with any of: `fused_batch_norm` (FusedBatchNorm* ops in the feature
    extractor), `nms_variant` (a `FilterGreaterThan` scope in post-processing means the
    score filter and clipping run before NMS), `pad_extra_layers_to_even` (the extra
    layers' inputs are zero-padded by concatenation), `interpolated_anchor_after_unit_ratio`
    (the layer-1 aspect ratio constant has 1.0 twice at its start), `image_height`/`image_width`
    (the resize op's constant size).
    """
    nodes = _nodes(graph_def)
    traits = {}
    fe_ops = [n.op for n in graph_def.node if n.name.startswith("FeatureExtractor/")]
    if "Relu6" in fe_ops:
        traits["fused_batch_norm"] = any(op.startswith("FusedBatchNorm") for op in fe_ops)
    pp_names = [n.name for n in graph_def.node if n.name.startswith("Postprocessor/")]
    if any("MultiClassNonMaxSuppression" in name for name in pp_names):
        traits["nms_variant"] = (NMS_CLIP_BEFORE if any("/FilterGreaterThan" in name for name in pp_names)
                                 else NMS_CLIP_AFTER)
    traits["pad_extra_layers_to_even"] = any(
        n.op == "ConcatV2" and n.name.startswith("FeatureExtractor/MobilenetV1/concat")
        and any(i.startswith("FeatureExtractor/MobilenetV1/zeros") for i in n.input)
        for n in graph_def.node)
    ratios = _const_input(nodes, "MultipleGridAnchorGenerator/Sqrt_1")
    if ratios is not None and ratios.size >= 2:
        traits["interpolated_anchor_after_unit_ratio"] = bool(ratios[0] == 1.0 and ratios[1] == 1.0)
    size = None
    for n in graph_def.node:
        if n.op.startswith("Resize") and n.name.startswith("Preprocessor/"):
            size = _const_input(nodes, n.name, index=1)
            break
    if size is not None and size.size == 2:
        traits["image_height"], traits["image_width"] = int(size[0]), int(size[1])
    return traits


def _const_input(nodes, name, index=0):
    node = nodes.get(name)
    if node is None or len(node.input) <= index:
        return None
    src = nodes.get(node.input[index].split(":")[0].lstrip("^"))
    while src is not None and src.op == "Identity":
        src = nodes.get(src.input[0].split(":")[0])
    if src is None or src.op != "Const":
        return None
    return np.asarray(tensor_util.MakeNdarray(src.attr["value"].tensor))
