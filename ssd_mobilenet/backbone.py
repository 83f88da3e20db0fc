"""MobileNet v1 feature extractor of the OD API's `ssd_mobilenet_v1` (TF1 scope
`FeatureExtractor/MobilenetV1/`).

Conv2d_0 .. Conv2d_13 are slim's `mobilenet_v1_base`; the four extra feature maps are
`multi_resolution_feature_maps` with `layer_depth = [-1, -1, 512, 256, 256, 128]` and a
1x1 conv inserted before every 3x3 stride-2 conv. Every layer is conv -> BN -> ReLU6.
"""

from __future__ import annotations

from ssd_mobilenet.config import SSDConfig
from ssd_mobilenet.layers import PadToEven, PadToMultiple, SlimConv

# (layer index, kind, stride, depth at multiplier 1); kernel 3 throughout.
MOBILENET_V1_BLOCKS = (
    (0, "conv", 2, 32),
    (1, "sep", 1, 64),
    (2, "sep", 2, 128),
    (3, "sep", 1, 128),
    (4, "sep", 2, 256),
    (5, "sep", 1, 256),
    (6, "sep", 2, 512),
    (7, "sep", 1, 512),
    (8, "sep", 1, 512),
    (9, "sep", 1, 512),
    (10, "sep", 1, 512),
    (11, "sep", 1, 512),
    (12, "sep", 2, 1024),
    (13, "sep", 1, 1024),
)
# Feature maps 0 and 1 are these base layers; maps 2..5 are extra layers of these depths.
BASE_FEATURE_LAYERS = ("Conv2d_11_pointwise", "Conv2d_13_pointwise")
EXTRA_LAYER_DEPTHS = (512, 256, 256, 128)
FEATURE_SCOPE = "FeatureExtractor/MobilenetV1/"


def extra_layer_names(config: SSDConfig) -> list:
    """[(1x1 layer name, 3x3 stride-2 layer name, 1x1 depth, 3x3 depth)] for maps 2..5."""
    names = []
    for index, layer_depth in enumerate(EXTRA_LAYER_DEPTHS, start=2):
        d1, d3 = config.depth(layer_depth / 2), config.depth(layer_depth)
        names.append((f"Conv2d_13_pointwise_1_Conv2d_{index}_1x1_{d1}",
                      f"Conv2d_13_pointwise_2_Conv2d_{index}_3x3_s2_{d3}", d1, d3))
    return names


def feature_map_shapes(config: SSDConfig) -> list:
    """[(H_i, W_i)] of the 6 feature maps at the config's image size, without building layers.

    Every stride-2 conv halves a size rounding up (SAME, or explicit padding then VALID, give
    the same for kernel 3); padding to a multiple (the image) or to even (2017 extra layers)
    rounds up first. `SSDMobileNetV1` checks its built maps against this.
    """
    def up(size, multiple):
        return -(-size // multiple) * multiple

    h, w = up(config.image_height, config.pad_to_multiple), up(config.image_width, config.pad_to_multiple)
    shapes = []
    for i, _, stride, _ in MOBILENET_V1_BLOCKS:
        h, w = up(h, stride) // stride, up(w, stride) // stride
        if f"Conv2d_{i}_pointwise" in BASE_FEATURE_LAYERS:
            shapes.append((h, w))
    for _ in EXTRA_LAYER_DEPTHS:
        if config.pad_extra_layers_to_even:
            h, w = up(h, 2), up(w, 2)
        h, w = up(h, 2) // 2, up(w, 2) // 2
        shapes.append((h, w))
    return shapes


def build_feature_extractor(x, config: SSDConfig, fold_batch_norm: bool = False):
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
      ordered dict of every layer's output keyed by TF1 scope (without `FEATURE_SCOPE`).
    """
    common = dict(explicit_padding=config.use_explicit_padding, bn_epsilon=config.batch_norm_epsilon,
                  fused_batch_norm=config.fused_batch_norm, batch_norm=not fold_batch_norm,
                  weight_bits=config.weight_bits, activation_bits=config.activation_bits)
    endpoints = {}

    def apply(layer, net):
        net = layer(net)
        endpoints[layer.name] = net
        return net

    net = x
    if config.pad_to_multiple > 1:
        # Inside the feature extractor, as in TF1: the Preprocessor output stays unpadded.
        net = PadToMultiple(config.pad_to_multiple, name="pad_to_multiple")(net)
    base = {**common, "bn_epsilon": config.base_batch_norm_epsilon}
    for i, kind, stride, depth in MOBILENET_V1_BLOCKS:
        if kind == "conv":
            net = apply(SlimConv(config.depth(depth), 3, stride, name=f"Conv2d_{i}", **base), net)
        else:
            net = apply(SlimConv(None, 3, stride, depthwise=True, name=f"Conv2d_{i}_depthwise", **base), net)
            net = apply(SlimConv(config.depth(depth), 1, 1, name=f"Conv2d_{i}_pointwise", **base), net)
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
