"""The OD API's `ssd_mobilenet_v1` feature extractor (TF1 scope `FeatureExtractor/MobilenetV1/`).

Feature maps 0 and 1 are the base's Conv2d_11 and Conv2d_13 pointwise layers; the four extra
feature maps are `multi_resolution_feature_maps` with `layer_depth = [-1, -1, 512, 256, 256, 128]`
and a 1x1 conv inserted before every 3x3 stride-2 conv. Every layer is conv -> BN -> ReLU6.
"""

from __future__ import annotations

from ssd_mobilenet.feature_extractors.mobilenet_v1 import MOBILENET_V1_BLOCKS, STEM_END, build_base, output_shapes
from ssd_mobilenet.layers import PadToEven, SlimConv

# Feature maps 0 and 1 are these base layers; maps 2..5 are extra layers of these depths.
BASE_FEATURE_LAYERS = ("Conv2d_11_pointwise", "Conv2d_13_pointwise")
EXTRA_LAYER_DEPTHS = (512, 256, 256, 128)
FEATURE_SCOPE = "FeatureExtractor/MobilenetV1/"


def extra_layer_names(config) -> list:
    """[(1x1 layer name, 3x3 stride-2 layer name, 1x1 depth, 3x3 depth)] for maps 2..5."""
    names = []
    for index, layer_depth in enumerate(EXTRA_LAYER_DEPTHS, start=2):
        d1, d3 = config.depth(layer_depth / 2), config.depth(layer_depth)
        names.append((f"Conv2d_13_pointwise_1_Conv2d_{index}_1x1_{d1}",
                      f"Conv2d_13_pointwise_2_Conv2d_{index}_3x3_s2_{d3}", d1, d3))
    return names


def stem_end(config) -> str:
    return STEM_END


def unused_tf1_weights(config) -> tuple:
    """Every layer the OD API builds is used."""
    return ()


def feature_map_shapes(config) -> list:
    """[(H_i, W_i)] of the 6 feature maps at the config's image size, without building layers.

    Every stride-2 conv halves a size rounding up; padding to a multiple (the image) or to even
    (2017 extra layers) rounds up first. `SSDMobileNetV1` checks its built maps against this.
    """
    base = output_shapes(config)
    shapes = [base[name] for name in BASE_FEATURE_LAYERS]
    h, w = shapes[-1]
    for _ in EXTRA_LAYER_DEPTHS:
        if config.pad_extra_layers_to_even:
            h, w = h + h % 2, w + w % 2
        h, w = -(-h // 2), -(-w // 2)
        shapes.append((h, w))
    return shapes


def build(x, config, fold_batch_norm: bool = False):
    """Applies the feature extractor to a preprocessed image tensor.

    Args:
      x: float32 [N, H, W, 3] in [-1, 1] (a Keras tensor); zero-padded at the bottom/right
        to a multiple of `config.pad_to_multiple` first.
      fold_batch_norm: build every layer as conv -> bias -> ReLU6 (variables `weights` or
        `depthwise_weights` and `biases`) for batch norm folded into the weights
        (`layers.fold_batch_norm`); Grappler then fuses each layer into one kernel.
    Returns:
      (feature_maps, endpoints): the 6 feature maps in predictor order (at 300x300 and
      multiplier 1: 19x19x512, 10x10x1024, 5x5x512, 3x3x256, 2x2x256, 1x1x128), and an
      ordered dict of every layer's output keyed by its TF1 op scope under `FEATURE_SCOPE`
      (its layer name).
    """
    common = dict(explicit_padding=config.use_explicit_padding, bn_epsilon=config.batch_norm_epsilon,
                  fused_batch_norm=config.fused_batch_norm, batch_norm=not fold_batch_norm,
                  weight_bits=config.weight_bits, activation_bits=config.activation_bits)
    endpoints = {}

    def apply(layer, net):
        net = layer(net)
        endpoints[layer.name] = net
        return net

    net = build_base(x, config, endpoints, fold_batch_norm, MOBILENET_V1_BLOCKS, BASE_FEATURE_LAYERS[-1])
    feature_maps = [endpoints[name] for name in BASE_FEATURE_LAYERS]
    for name_1x1, name_3x3, d1, d3 in extra_layer_names(config):
        net = apply(SlimConv(d1, 1, 1, name=name_1x1, **common), net)
        if config.pad_extra_layers_to_even:
            net = PadToEven(name=name_3x3 + "_pad_to_even")(net)
        if config.use_depthwise:
            net = apply(SlimConv(None, 3, 2, depthwise=True, name=name_3x3 + "_depthwise", **common), net)
            net = apply(SlimConv(d3, 1, 1, name=name_3x3, **common), net)
        else:
            net = apply(SlimConv(d3, 3, 2, name=name_3x3, **common), net)
        feature_maps.append(net)
    return feature_maps, endpoints
