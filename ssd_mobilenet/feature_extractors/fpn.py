"""The OD API's `ssd_mobilenet_v1_fpn` feature extractor: MobileNet v1 and a feature pyramid
(TF1 variables `FeatureExtractor/MobilenetV1/fpn/...`, ops under `.../fpn/top_down/` for the
top-down path).

Levels fpn_min_level .. min(fpn_max_level, 5) tap MobileNet layers (`LEVEL_LAYERS`, level l has
stride 2^l). `fpn_top_down_feature_maps` over them, coarsest first: `projection_<n>` (1x1 conv with
bias, linear) of the coarsest is its level's map; each finer level adds its own projection to
the map above upsampled x2 (nearest neighbour; with explicit padding cropped to the projection's
size) and smooths the sum (`smoothing_<k>`, 3x3 conv -> BN -> ReLU6). Levels above 5 are
`bottom_up_Conv2d_<14..>`, 3x3 stride-2 conv -> BN -> ReLU6 from the coarsest map (the first from
the linear projection). Every pyramid layer has depth(fpn_additional_layer_depth) channels; with
`use_depthwise` its 3x3 convs are separable (depthwise, then 1x1) and MobileNet's last two blocks
are shallower (`DEPTHWISE_BLOCKS`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ssd_mobilenet.config.ssd_config import FPN_BASE_LEVELS
from ssd_mobilenet.feature_extractors.mobilenet_v1 import (MOBILENET_V1_BLOCKS, STEM_END, build_base,
                                                           output_shapes, unused_blocks)
from ssd_mobilenet.layers import SlimConv

LEVEL_LAYERS = {2: "Conv2d_3_pointwise", 3: "Conv2d_5_pointwise", 4: "Conv2d_11_pointwise", 5: "Conv2d_13_pointwise"}
# `_create_modified_mobilenet_config` (OD API since 2018-09): with use_depthwise, Conv2d_12 keeps
# 512 channels and Conv2d_13 has 256.
DEPTHWISE_BLOCKS = MOBILENET_V1_BLOCKS[:12] + ((12, "sep", 2, 512), (13, "sep", 1, 256))
FPN_SCOPE = "fpn"


def blocks(config) -> tuple:
    return DEPTHWISE_BLOCKS if config.use_depthwise else MOBILENET_V1_BLOCKS


def base_levels(config) -> range:
    """The levels that tap MobileNet layers."""
    return range(config.fpn_min_level, min(config.fpn_max_level, FPN_BASE_LEVELS[-1]) + 1)


def stem_end(config) -> str:
    """Where `SSDMobileNetV1.split` may cut: STEM_END, or the finest tapped layer where it comes first."""
    return LEVEL_LAYERS[2] if config.fpn_min_level == 2 else STEM_END


def unused_tf1_weights(config) -> tuple:
    """MobileNet blocks after the coarsest tapped layer (fpn_max_level < 5)."""
    last = LEVEL_LAYERS[base_levels(config)[-1]]
    return tuple((f"^FeatureExtractor/MobilenetV1/{prefix}",
                  f"MobileNet v1 layer after {last}, the last one FPN levels "
                  f"{config.fpn_min_level}..{config.fpn_max_level} use (the frozen graph prunes it)")
                 for prefix in unused_blocks(last, blocks(config)))


def layer_names(config) -> dict:
    """{"projections", "smoothing", "bottom_up"}: the pyramid's layer names, finest level first."""
    levels = list(base_levels(config))
    n = len(levels)
    top = levels[-1]
    return {"projections": [f"projection_{k + 1}" for k in range(n)],
            "smoothing": [f"smoothing_{k + 1}" for k in range(n - 1)],
            "bottom_up": [f"bottom_up_Conv2d_{level - top + 13}" for level in range(top + 1, config.fpn_max_level + 1)]}


def feature_map_shapes(config) -> list:
    """[(H_i, W_i)] per level, finest first: the tapped layers' sizes, then halving (rounding up)."""
    base = output_shapes(config, blocks(config))
    shapes = [base[LEVEL_LAYERS[level]] for level in base_levels(config)]
    for _ in layer_names(config)["bottom_up"]:
        h, w = shapes[-1]
        shapes.append((-(-h // 2), -(-w // 2)))
    return shapes


class NearestNeighborUpsampling(keras.layers.Layer):
    """x2 nearest-neighbour upsampling [N, H, W, C] -> [N, 2H, 2W, C] (`ops.nearest_neighbor_upsampling`:
    `w_stack`/`h_stack` since 2019, a reshape times ones before; both copy values, exactly)."""

    def call(self, x):
        n, h, w, c = (tf.shape(x)[i] for i in range(4))
        x = tf.reshape(tf.stack([x, x], axis=3), [n, h, 2 * w, c])
        return tf.reshape(tf.stack([x, x], axis=2), [n, 2 * h, 2 * w, c])

    def compute_output_shape(self, input_shape):
        n, h, w, c = input_shape
        return (n, None if h is None else 2 * h, None if w is None else 2 * w, c)


class TopDownAdd(keras.layers.Layer):
    """`top_down += residual`: the upsampled coarser map plus this level's projection, the
    upsampled map first cropped to the projection's size (with explicit padding a level can
    be odd-sized; without, the sizes match)."""

    def call(self, inputs):
        top_down, residual = inputs
        shape = tf.shape(residual)
        return top_down[:, :shape[1], :shape[2], :] + residual

    def compute_output_shape(self, input_shapes):
        return input_shapes[1]


def build(x, config, fold_batch_norm: bool = False):
    """Applies the feature extractor to a preprocessed image tensor.

    Args:
      x: float32 [N, H, W, 3] in [-1, 1] (a Keras tensor).
      fold_batch_norm: conv -> bias -> ReLU6 layers for weights with batch norm folded in.
    Returns:
      (feature_maps, endpoints): one map per level, finest first, each [N, H / 2^l, W / 2^l,
      depth(fpn_additional_layer_depth)]; and every layer's output keyed by its TF1 op scope
      under `FeatureExtractor/MobilenetV1/` (`Conv2d_5_pointwise`, `fpn/top_down/projection_3`,
      `fpn/top_down/smoothing_1`, `fpn/bottom_up_Conv2d_14`), in graph order.
    """
    endpoints = {}
    levels = list(base_levels(config))
    build_base(x, config, endpoints, fold_batch_norm, blocks(config), LEVEL_LAYERS[levels[-1]])
    taps = [endpoints[LEVEL_LAYERS[level]] for level in levels]
    depth = config.depth(config.fpn_additional_layer_depth)
    names = layer_names(config)
    common = dict(bn_epsilon=config.batch_norm_epsilon, fused_batch_norm=config.fused_batch_norm,
                  batch_norm=not fold_batch_norm)
    conv3x3 = dict(explicit_padding=config.use_explicit_padding, separable=config.use_depthwise, **common)
    # Variables `fpn/<layer>/...` as slim's variable scope `fpn` names them.
    with keras.name_scope(FPN_SCOPE):
        def projection(k, tap):
            layer = SlimConv(depth, 1, 1, batch_norm=False, relu6=False, name=names["projections"][k])
            out = layer(tap)
            endpoints[f"{FPN_SCOPE}/top_down/{layer.name}"] = out
            return out

        top_down = projection(len(taps) - 1, taps[-1])
        maps = [top_down]
        for k in reversed(range(len(taps) - 1)):
            upsampled = NearestNeighborUpsampling(name=f"{FPN_SCOPE}_top_down_upsampling_{k + 1}")(top_down)
            top_down = TopDownAdd(name=f"{FPN_SCOPE}_top_down_add_{k + 1}")([upsampled, projection(k, taps[k])])
            smoothing = SlimConv(depth, 3, 1, name=names["smoothing"][k], **conv3x3)
            maps.insert(0, smoothing(top_down))
            endpoints[f"{FPN_SCOPE}/top_down/{smoothing.name}"] = maps[0]
        net = maps[-1]
        for name in names["bottom_up"]:
            net = SlimConv(depth, 3, 2, name=name, **conv3x3)(net)
            endpoints[f"{FPN_SCOPE}/{name}"] = net
            maps.append(net)
    return maps, endpoints
