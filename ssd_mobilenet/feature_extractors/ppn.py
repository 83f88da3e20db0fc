"""The OD API's `ssd_mobilenet_v1_ppn` feature extractor: a pooling pyramid on MobileNet v1's
Conv2d_11_pointwise (TF1 scope `FeatureExtractor/MobilenetV1/`).

`pooling_pyramid_feature_maps(base_feature_map_depth=0, num_layers=6)`: the first map is
Conv2d_11_pointwise itself, each next one a 2x2 stride-2 SAME max-pool of the previous
(`MaxPool2d_<i>_2x2`); no weights beyond the base. slim builds the base up to Conv2d_13_pointwise,
so a checkpoint holds Conv2d_12 and Conv2d_13, which a frozen graph prunes and this model does not
build (`unused_tf1_weights`). `use_depthwise` changes nothing here, as in the OD API.
"""

from __future__ import annotations

import keras

from ssd_mobilenet.feature_extractors.mobilenet_v1 import (MOBILENET_V1_BLOCKS, STEM_END, build_base, output_shapes,
                                                           unused_blocks)

BASE_LAYER = "Conv2d_11_pointwise"
NUM_LAYERS = 6


def pool_names() -> list:
    return [f"MaxPool2d_{i}_2x2" for i in range(NUM_LAYERS - 1)]


def stem_end(config) -> str:
    return STEM_END


def unused_tf1_weights(config) -> tuple:
    return tuple((f"^FeatureExtractor/MobilenetV1/{prefix}",
                  f"MobileNet v1 layer after {BASE_LAYER}, the last one ssd_mobilenet_v1_ppn uses "
                  "(the frozen graph prunes it)")
                 for prefix in unused_blocks(BASE_LAYER, MOBILENET_V1_BLOCKS))


def feature_map_shapes(config) -> list:
    """[(H_i, W_i)]: Conv2d_11_pointwise's size, then halving (rounding up) five times."""
    shapes = [output_shapes(config)[BASE_LAYER]]
    for _ in pool_names():
        h, w = shapes[-1]
        shapes.append((-(-h // 2), -(-w // 2)))
    return shapes


def build(x, config, fold_batch_norm: bool = False):
    """Applies the feature extractor to a preprocessed image tensor.

    Returns:
      (feature_maps, endpoints): 6 maps of Conv2d_11_pointwise's depth (at 300x300: 19x19, 10x10,
      5x5, 3x3, 2x2, 1x1), and every layer's output keyed by its TF1 op scope under
      `FeatureExtractor/MobilenetV1/` (its layer name), in graph order.
    """
    endpoints = {}
    net = build_base(x, config, endpoints, fold_batch_norm, MOBILENET_V1_BLOCKS, BASE_LAYER)
    maps = [net]
    for name in pool_names():
        net = keras.layers.MaxPooling2D(pool_size=2, strides=2, padding="same", name=name)(net)
        endpoints[name] = net
        maps.append(net)
    return maps, endpoints
