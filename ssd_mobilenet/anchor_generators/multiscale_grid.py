"""`multiscale_anchor_generator` (the OD API's `MultiscaleGridAnchorGenerator`), bit-exact in float32.

Feature map i is pyramid level l = anchor_min_level + i, of stride 2^l pixels. Its anchors are a
`GridAnchorGenerator` grid in pixels: every 2^l pixels, from an offset of half a stride where
the image size divides by 2^l and 0 where it does not (the graph's static image size decides), of
base size anchor_scale * 2^l, scaled by 2^(k / scales_per_octave) for each aspect ratio; then
divided by the image size (`to_normalized_coordinates`: times 1 / size, in float32).

Anchor order at a cell: aspect ratio major, scale minor (the generator's `meshgrid(scales,
aspect_ratios)` flattened): (r0, s0), (r0, s1), (r1, s0), ...
"""

from __future__ import annotations

import numpy as np

from ssd_mobilenet.anchor_generators.grid import tile_anchors

f32 = np.float32


def anchors_per_location(config) -> list:
    """Anchors per cell: len(aspect_ratios) * scales_per_octave at every level."""
    levels = config.anchor_max_level - config.anchor_min_level + 1
    return [len(config.aspect_ratios) * config.scales_per_octave] * levels


def level_grid(config, level: int, image_height: int, image_width: int) -> dict:
    """The `GridAnchorGenerator` settings of one level, as the generator computes them in Python:
    {"scales": [2^(k/n)], "aspect_ratios", "base_anchor_size", "anchor_stride", "anchor_offset"}
    (the last three [y, x] in pixels)."""
    stride = 2 ** level
    offset = [0.0, 0.0]
    # `im % 2.0**level == 0`: the anchors are centred in their cells only where the image tiles
    # exactly into them (an image size of 1 means absolute coordinates and counts as tiling).
    if image_height % 2.0 ** level == 0 or image_height == 1:
        offset[0] = stride / 2.0
    if image_width % 2.0 ** level == 0 or image_width == 1:
        offset[1] = stride / 2.0
    n = config.scales_per_octave
    return {"scales": [2 ** (float(k) / n) for k in range(n)], "aspect_ratios": list(config.aspect_ratios),
            "base_anchor_size": [stride * config.anchor_scale] * 2, "anchor_stride": [stride] * 2,
            "anchor_offset": offset}


def generate_anchors(config, feature_map_shapes, image_height=None, image_width=None,
                     normalize: bool = True) -> np.ndarray:
    """All anchors, normalised to the (resized) image, not clipped.

    Args:
      config: an `SSDConfig` with `anchor_generator_type` multiscale_anchor_generator.
      feature_map_shapes: [(H_i, W_i)] of the feature maps, level anchor_min_level first.
      image_height, image_width: the preprocessed image size (default: the config's).
      normalize: False gives pixels (the generator's `normalize_coordinates: false`; the OD API's
        unit tests state their anchors so).
    Returns:
      float32 [sum(H_i * W_i * A), 4] as [ymin, xmin, ymax, xmax], ordered by level, then y,
      then x, then (aspect ratio, scale).
    """
    im_h = image_height or config.image_height
    im_w = image_width or config.image_width
    out = []
    for level, (gh, gw) in zip(range(config.anchor_min_level, config.anchor_max_level + 1), feature_map_shapes):
        g = level_grid(config, level, im_h, im_w)
        specs = [(s, r) for r in g["aspect_ratios"] for s in g["scales"]]
        (base_h, base_w), (stride_y, stride_x), (offset_y, offset_x) = (
            [f32(v) for v in g[k]] for k in ("base_anchor_size", "anchor_stride", "anchor_offset"))
        corners = tile_anchors(gh, gw, specs, base_h, base_w, stride_y, stride_x, offset_y, offset_x)
        if normalize:
            # box_list_ops.scale(boxes, 1 / height, 1 / width): a float32 reciprocal, then products.
            corners = corners * np.array([f32(1) / f32(im_h), f32(1) / f32(im_w)] * 2, dtype=f32)
        out.append(corners.astype(f32))
    return np.concatenate(out, axis=0)
