"""`ssd_mobilenet.model.count_multiply_adds`: a frame's multiply-adds, against the figures the
MobileNet and SSD papers give for the same networks."""

from __future__ import annotations

import keras
import pytest

from ssd_mobilenet import SSDConfig
from ssd_mobilenet.config.type_names import MULTISCALE_ANCHORS, SSD_MOBILENET_V1_FPN, WEIGHT_SHARED
from ssd_mobilenet.feature_extractors.mobilenet_v1 import build_base
from ssd_mobilenet.model import SSDMobileNetV1, count_multiply_adds


@pytest.mark.parametrize("depth_multiplier, size, paper", [
    (1.0, 224, 569), (0.75, 224, 325), (0.5, 224, 149), (0.25, 224, 41),  # Table 6: width
    (1.0, 192, 418), (1.0, 160, 290), (1.0, 128, 186),  # Table 7: resolution
])
def test_mobilenet_v1_counts_the_papers_multiply_adds(depth_multiplier, size, paper):
    # Howard et al. 2017, which count the 1024*depth x 1000 classifier too; the base here ends at
    # Conv2d_13_pointwise, as the OD API's does. min_depth 1: the paper's 0.25 network has 8
    # channels where the OD API's SSD default (16) would widen them. The paper gives millions,
    # rounded one way or the other (its 224 row: 568.7 with the classifier; its 160 row: 290.7,
    # printed 290): within one million.
    config = SSDConfig(num_classes=90, image_height=size, image_width=size, depth_multiplier=depth_multiplier,
                       min_depth=1)
    image = keras.Input((size, size, 3))
    base = keras.Model(image, build_base(image, config, {}))
    classifier = config.depth(1024) * 1000
    assert abs(count_multiply_adds(base) + classifier - paper * 1e6) < 1e6


def test_a_weight_shared_tower_counts_each_level_it_runs_on():
    # The FPN's box tower runs the same layers on every level: its cost grows with the levels, its
    # weights do not.
    fields = dict(num_classes=3, image_height=128, image_width=128, feature_extractor_type=SSD_MOBILENET_V1_FPN,
                  box_predictor_type=WEIGHT_SHARED, anchor_generator_type=MULTISCALE_ANCHORS, fpn_min_level=3,
                  depth_multiplier=0.25)
    three, four = (SSDMobileNetV1(SSDConfig(**fields, fpn_max_level=top, anchor_max_level=top)) for top in (5, 6))
    assert count_multiply_adds(four) > count_multiply_adds(three)
