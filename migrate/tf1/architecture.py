"""What a TF1 model's variables show of its architecture, as the OD API's builders made it: the
feature extractor and box predictor their scopes name, and the settings their names and shapes
fix (FPN levels and depth, the weight-shared predictor's towers). Read off a checkpoint's
variables or a frozen graph's constants alike (same names).

Names: `FeatureExtractor/MobilenetV1/...` (every MobileNet v1 feature extractor; FPN's pyramid
under `.../fpn/`), `BoxPredictor_<i>/...` (convolutional_box_predictor, one per feature map),
`WeightSharedConvolutionalBoxPredictor/...` (the weight-shared one).
"""

from __future__ import annotations

import re

from ssd_mobilenet.config.type_names import (CONVOLUTIONAL, SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN,
                                             SSD_MOBILENET_V1_PPN, WEIGHT_SHARED)
from ssd_mobilenet.feature_extractors import fpn
from ssd_mobilenet.feature_extractors.mobilenet_v1 import output_layer

FE = "FeatureExtractor/MobilenetV1/"
WS = "WeightSharedConvolutionalBoxPredictor/"
BOX_CODE_SIZE = 4

# The OD API's other SSD feature extractors, by the variable scope they build under `FeatureExtractor/`
# (first match wins): named when refused (None: not named, only its scope).
OTHER_FEATURE_EXTRACTORS = (
    (r"MobilenetV2/fpn/", "ssd_mobilenet_v2_fpn"),
    (r"MnasFPN/", "ssd_mobilenet_v2_mnasfpn"),
    (r"MobilenetV2/", "ssd_mobilenet_v2"),
    (r"MobilenetV3/", "ssd_mobilenet_v3_large or _small"),
    (r"MobilenetEdgeTPU/", "ssd_mobilenet_edgetpu"),
    (r"MobileDet\w*/", "ssd_mobiledet"),
    (r"InceptionV2/", "ssd_inception_v2"),
    (r"InceptionV3/", "ssd_inception_v3"),
    (r"resnet_v1_(\d+)/", "ssd_resnet{}_v1_fpn"),
    (r"SSD_feature_maps/", "ssd_pnasnet"),
    (r"spaghetti_net/", "ssd_spaghettinet"),
    (r"(?!MobilenetV1/)[^/]+/", None),
)


# A weight's leaf under its layer's scope (slim: conv, separable conv, batch norm variables).
_WEIGHT_LEAF = re.compile(r"/(weights|depthwise_weights|pointwise_weights|biases|gamma|beta|moving_mean|"
                          r"moving_variance)$")


def graph_weight_names(graph_def) -> list:
    """The names of a graph's variables and frozen weights (`VariableV2` or `Const` nodes named as a
    slim weight); its ops' names say nothing of the feature extractor (`FeatureExtractor/strided_slice`
    of a 2017 graph's shape check)."""
    return [n.name for n in graph_def.node
            if n.op in ("Const", "VariableV2", "Variable", "VarHandleOp") and _WEIGHT_LEAF.search(n.name)]


def other_feature_extractor(names) -> str | None:
    """'<feature extractor> (<scope>/)' when `names` (variable names, or `graph_weight_names`) hold a
    feature extractor scope other than MobileNet v1's (`ssd_mobilenet_v2 (MobilenetV2/)`; one
    this table does not name: `FeatureExtractor/<scope>/`), else None."""
    for name in names:
        if not name.startswith("FeatureExtractor/"):
            continue
        rest = name[len("FeatureExtractor/"):]
        for pattern, what in OTHER_FEATURE_EXTRACTORS:
            m = re.match(pattern, rest)
            if m:
                scope = rest[:m.end()].split("/")[0] + "/"
                return f"{what.format(*m.groups())} ({scope})" if what else f"FeatureExtractor/{scope}"
    return None


_EXTRA_LAYER = re.compile(FE + r"Conv2d_13_pointwise_[12]_Conv2d_\d+_")


def feature_extractor_type(weights) -> str | None:
    """The MobileNet v1 feature extractor `weights` ({name: ndarray}) come from: FPN has `fpn/`
    layers, ssd_mobilenet_v1 its extra layers after Conv2d_13, PPN neither (its pyramid is
    max-pools); None when no MobileNet v1 layer is there."""
    if not any(n.startswith(FE) for n in weights):
        return None
    if any(n.startswith(FE + "fpn/") for n in weights):
        return SSD_MOBILENET_V1_FPN
    if any(_EXTRA_LAYER.match(n) for n in weights):
        return SSD_MOBILENET_V1
    return SSD_MOBILENET_V1_PPN


def box_predictor_type(weights) -> str | None:
    if any(n.startswith(WS) for n in weights):
        return WEIGHT_SHARED
    if any(re.match(r"BoxPredictor_\d+/", n) for n in weights):
        return CONVOLUTIONAL
    return None


def _out_channels(weights, scope):
    """Output channels of the conv at `scope` (its `weights`, or a separable conv's `pointwise_weights`)."""
    for leaf in ("weights", "pointwise_weights"):
        w = weights.get(f"{scope}/{leaf}")
        if w is not None:
            return int(w.shape[-1])
    return None


def _in_channels(weights, scope):
    for leaf in ("weights", "depthwise_weights"):
        w = weights.get(f"{scope}/{leaf}")
        if w is not None:
            return int(w.shape[2])
    return None


def additional_layer_depth(channels: int, config) -> int:
    """An `fpn.additional_layer_depth` giving `channels` at the config's multiplier and min_depth:
    the config's own if it does, else channels / multiplier rounded (the value a config spells)."""
    if config.depth(config.fpn_additional_layer_depth) == channels:
        return config.fpn_additional_layer_depth
    guess = int(round(channels / config.depth_multiplier))
    for d in sorted(range(max(guess - 2, 1), guess + 3), key=lambda d: abs(d - guess)):
        if config.depth(d) == channels:
            return d
    return guess


def fpn_facts(weights, config) -> dict:
    """FPN settings the pyramid's weights fix: levels, depth, use_depthwise.

    `projection_<k>` (k = 1..n) project the n tapped MobileNet layers, `bottom_up_Conv2d_<14..>`
    add the levels above 5. The tapped layers are those whose depths the projections read; where
    several sets of layers have those depths (min_depth clamping them alike), the config's levels
    if they are one of them (a graph's `graph_traits.fpn_levels`), else the deepest.
    """
    projections = sorted(int(m.group(1)) for m in (re.match(FE + r"fpn/projection_(\d+)/weights$", n)
                                                   for n in weights) if m)
    bottom_up = sorted({int(m.group(1)) for m in (re.match(FE + r"fpn/bottom_up_Conv2d_(\d+)/", n)
                                                 for n in weights) if m})
    if not projections or projections != list(range(1, len(projections) + 1)):
        return {}
    n = len(projections)
    facts = {}
    separable = any(re.match(FE + r"fpn/(smoothing|bottom_up)_\w+/depthwise_weights$", w) for w in weights)
    if separable or any(re.match(FE + r"fpn/(smoothing|bottom_up)_\w+/weights$", w) for w in weights):
        facts["use_depthwise"] = separable
    blocks = fpn.blocks(config.replace(use_depthwise=facts.get("use_depthwise", config.use_depthwise)))
    depths = {output_layer(b): _out_channels(weights, FE + output_layer(b)) for b in blocks}
    reads = [_in_channels(weights, f"{FE}fpn/projection_{k}") for k in projections]
    tops = [top for top in range(fpn.FPN_BASE_LEVELS[-1], fpn.FPN_BASE_LEVELS[0] + n - 2, -1)
            if all(depths.get(fpn.LEVEL_LAYERS[top - n + k]) == reads[k - 1] for k in projections)]
    if bottom_up:
        tops = [t for t in tops if t == fpn.FPN_BASE_LEVELS[-1]]
    configured = min(config.fpn_max_level, fpn.FPN_BASE_LEVELS[-1])
    if configured in tops and config.fpn_min_level == configured - n + 1:
        tops = [configured]
    if tops:
        top = tops[0]
        facts.update(fpn_min_level=top - n + 1, fpn_max_level=top + len(bottom_up))
    channels = _out_channels(weights, f"{FE}fpn/projection_{n}")
    if channels is not None:
        facts["fpn_additional_layer_depth"] = additional_layer_depth(channels, config)
    return facts


def weight_shared_facts(weights) -> dict:
    """weight_shared_convolutional_box_predictor settings its weights fix: tower depth, layers and
    sharing, batch norm, kernel size, depthwise convs; and `num_feature_maps` where the per-map
    batch norms show it."""
    facts = {}
    head = next((weights[f"{WS}BoxPredictor/{leaf}"] for leaf in ("depthwise_weights", "weights")
                 if f"{WS}BoxPredictor/{leaf}" in weights), None)
    if head is not None:
        facts["box_predictor_kernel_size"] = int(head.shape[0])
        facts["box_predictor_use_depthwise"] = f"{WS}BoxPredictor/depthwise_weights" in weights
    shared = any(n.startswith(WS + "PredictionTower/") for n in weights)
    tower = WS + ("PredictionTower/" if shared else "BoxPredictionTower/")
    layers = sorted({int(m.group(1)) for m in (re.match(re.escape(tower) + r"conv2d_(\d+)/", n) for n in weights) if m})
    facts["box_predictor_num_layers_before_predictor"] = len(layers)
    if layers:
        facts["share_prediction_tower"] = shared
        facts["box_predictor_depth"] = _out_channels(weights, f"{tower}conv2d_0")
        maps = {int(m.group(1)) for m in (re.match(re.escape(tower) + r"conv2d_0/BatchNorm/feature_(\d+)/", n)
                                          for n in weights) if m}
        facts["box_predictor_batch_norm"] = bool(maps)
        if maps:
            facts["num_feature_maps"] = max(maps) + 1
    return facts


def predictor_anchors(weights, num_feature_maps: int) -> list | None:
    """Anchors per location of each feature map, from the box heads' output channels."""
    bias = weights.get(f"{WS}BoxPredictor/biases")
    if bias is not None:
        return [int(bias.shape[0]) // BOX_CODE_SIZE] * num_feature_maps
    counts = []
    for i in range(num_feature_maps):
        bias = weights.get(f"BoxPredictor_{i}/BoxEncodingPredictor/biases")
        if bias is None:
            return None
        counts.append(int(bias.shape[0]) // BOX_CODE_SIZE)
    return counts


def class_bias(weights):
    """The first class head's biases [A * slots]."""
    return weights.get(f"{WS}ClassPredictor/biases", weights.get("BoxPredictor_0/ClassPredictor/biases"))
