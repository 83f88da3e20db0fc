"""`grid_anchor_generator.tile_anchors` of the OD API: one feature map's anchors in float32.

Both anchor generators place their boxes with it; each step is the float32 operation the TF1
graph runs, in its order, so the result is bit for bit the graph's.
"""

from __future__ import annotations

import numpy as np

f32 = np.float32


def tile_anchors(gh, gw, specs, base_h, base_w, stride_y, stride_x, offset_y, offset_x):
    """`grid_anchor_generator.tile_anchors` of one layer: corners [gh * gw * len(specs), 4] float32,
    ordered (y, x, spec); `specs` [(scale, aspect_ratio)], the rest float32 scalars."""
    scales = np.array([s for s, _ in specs], dtype=f32)
    ratios = np.array([r for _, r in specs], dtype=f32)
    ratio_sqrts = np.sqrt(ratios)
    heights = scales / ratio_sqrts * base_h
    widths = scales * ratio_sqrts * base_w
    y_centers = np.arange(gh, dtype=f32) * stride_y + offset_y
    x_centers = np.arange(gw, dtype=f32) * stride_x + offset_x
    # Grid order (y, x, spec), as the graph's meshgrids and reshapes lay it out.
    yc = np.broadcast_to(y_centers[:, None, None], (gh, gw, len(specs))).reshape(-1)
    xc = np.broadcast_to(x_centers[None, :, None], (gh, gw, len(specs))).reshape(-1)
    h = np.broadcast_to(heights[None, None, :], (gh, gw, len(specs))).reshape(-1)
    w = np.broadcast_to(widths[None, None, :], (gh, gw, len(specs))).reshape(-1)
    half = f32(0.5)
    return np.stack([yc - half * h, xc - half * w, yc + half * h, xc + half * w], axis=1).astype(f32)
