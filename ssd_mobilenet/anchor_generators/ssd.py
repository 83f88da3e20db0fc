"""`ssd_anchor_generator` (the OD API's `MultipleGridAnchorGenerator`), bit-exact in float32.

The TF1 graph computes anchors with float32 TensorFlow ops from Python doubles; every
step below is the same IEEE operation in the same order, so numpy float32 reproduces it
exactly (`anchors_300x300.npy` of the 2018 zoo graph is matched bit for bit in the tests).
"""

from __future__ import annotations

import math

import numpy as np

from ssd_mobilenet.anchor_generators.grid import tile_anchors

f32 = np.float32


def anchors_per_location(config) -> list:
    """Anchors per cell of each feature map: [3, 6, 6, 6, 6, 6] for the zoo config (layer 0
    with `reduce_boxes_in_lowest_layer` has three), or the lengths of explicit `anchor_specs`."""
    if config.anchor_specs:
        return [len(layer) for layer in config.anchor_specs]
    if config.interpolated_anchor_after_unit_ratio:
        extra = sum(1 for r in config.aspect_ratios if r == 1.0)
    else:
        extra = 1 if config.interpolated_scale_aspect_ratio > 0.0 else 0
    return [3 if (i == 0 and config.reduce_boxes_in_lowest_layer) else len(config.aspect_ratios) + extra
            for i in range(config.num_layers)]


def box_specs(config) -> list:
    """Per layer, the (scale, aspect_ratio) pairs of its anchors, as Python doubles.

    Scales are `min + (max - min) * i / (num_layers - 1)` (or the configured list), plus a
    final 1.0 used only for the interpolated anchor of the last layer. Layer 0 with
    `reduce_boxes_in_lowest_layer` ignores the configured ratios: (0.1, 1), (s0, 2), (s0, 0.5).
    A config with explicit `anchor_specs` (a graph's own) gives those.
    """
    if config.anchor_specs:
        return [[(float(s), float(r)) for s, r in layer] for layer in config.anchor_specs]
    n = config.num_layers
    if config.scales:
        scales = list(config.scales) + [1.0]
    else:
        scales = [config.min_scale + (config.max_scale - config.min_scale) * i / (n - 1) for i in range(n)] + [1.0]
    specs = []
    for layer, (scale, scale_next) in enumerate(zip(scales[:-1], scales[1:])):
        if layer == 0 and config.reduce_boxes_in_lowest_layer:
            specs.append([(0.1, 1.0), (scale, 2.0), (scale, 0.5)])
            continue
        interpolated = (math.sqrt(scale * scale_next), config.interpolated_scale_aspect_ratio)
        layer_specs = []
        for r in config.aspect_ratios:
            layer_specs.append((scale, r))
            if config.interpolated_anchor_after_unit_ratio and r == 1.0:
                layer_specs.append((math.sqrt(scale * scale_next), 1.0))
        if not config.interpolated_anchor_after_unit_ratio and config.interpolated_scale_aspect_ratio > 0.0:
            layer_specs.append(interpolated)
        specs.append(layer_specs)
    return specs


def generate_anchors(config, feature_map_shapes, image_height=None, image_width=None) -> np.ndarray:
    """All anchors, normalised to the (resized) image, not clipped.

    Args:
      config: an `SSDConfig` with `anchor_generator_type` ssd_anchor_generator.
      feature_map_shapes: [(H_i, W_i)] of the feature maps.
      image_height, image_width: the preprocessed image size (default: the config's).
        For a non-square image the base anchor is scaled by min(H, W) / H and / W.
    Returns:
      float32 [sum(H_i * W_i * A_i), 4] as [ymin, xmin, ymax, xmax], ordered by layer,
      then y, then x, then anchor spec.
    """
    im_h = image_height or config.image_height
    im_w = image_width or config.image_width
    min_im = min(im_h, im_w)
    # Python doubles (static shapes) times float32 constants, as in the TF1 graph.
    base_h = f32(min_im / im_h) * f32(config.base_anchor_height)
    base_w = f32(min_im / im_w) * f32(config.base_anchor_width)
    out = []
    for layer, ((gh, gw), specs) in enumerate(zip(feature_map_shapes, box_specs(config))):
        if config.anchor_strides:
            sh, sw = config.anchor_strides[layer]
            stride_y, stride_x = f32(sh) / f32(im_h), f32(sw) / f32(im_w)
        else:
            stride_y, stride_x = f32(1.0) / f32(gh), f32(1.0) / f32(gw)
        if config.anchor_offsets:
            oh, ow = config.anchor_offsets[layer]
            offset_y, offset_x = f32(oh) / f32(im_h), f32(ow) / f32(im_w)
        else:
            offset_y, offset_x = f32(0.5) * stride_y, f32(0.5) * stride_x
        out.append(tile_anchors(gh, gw, specs, base_h, base_w, stride_y, stride_x, offset_y, offset_x))
    return np.concatenate(out, axis=0)
