"""Anchors of an `SSDConfig`, whichever generator it names (`ssd_mobilenet.anchor_generators`).

`generate_anchors` and `box_specs` (ssd_anchor_generator's per-layer (scale, aspect_ratio)
pairs) keep the names this module has always had.
"""

from ssd_mobilenet.anchor_generators import generate_anchors
from ssd_mobilenet.anchor_generators.ssd import box_specs

__all__ = ["box_specs", "generate_anchors"]
