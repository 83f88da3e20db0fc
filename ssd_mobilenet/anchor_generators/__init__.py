"""The anchor generators, chosen by the pipeline.config's `anchor_generator` oneof as the OD API's
`anchor_generator_builder` chooses them (`SSDConfig.anchor_generator_type`).

Each module gives `anchors_per_location(config)` and `generate_anchors(config, feature_map_shapes,
image_height=None, image_width=None)`: float32 [A, 4] [ymin, xmin, ymax, xmax] normalised to the
resized image, bit for bit the TF1 graph's. Pure numpy: no TensorFlow.
"""

from __future__ import annotations

from ssd_mobilenet.anchor_generators import multiscale_grid, ssd
from ssd_mobilenet.config.type_names import MULTISCALE_ANCHORS, SSD_ANCHORS

ANCHOR_GENERATORS = {SSD_ANCHORS: ssd, MULTISCALE_ANCHORS: multiscale_grid}


def for_config(config):
    """The module of `config.anchor_generator_type`."""
    return ANCHOR_GENERATORS[config.anchor_generator_type]


def anchors_per_location(config) -> list:
    """Anchors per cell of each feature map."""
    return for_config(config).anchors_per_location(config)


def generate_anchors(config, feature_map_shapes, image_height=None, image_width=None):
    """All anchors of `config` for feature maps of `feature_map_shapes` [(H_i, W_i)]: float32 [A, 4]
    [ymin, xmin, ymax, xmax], normalised, unclipped; in feature map order, then y, x, anchor."""
    return for_config(config).generate_anchors(config, feature_map_shapes, image_height, image_width)
