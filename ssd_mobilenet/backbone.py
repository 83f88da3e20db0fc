"""The names this module has always had: the `ssd_mobilenet_v1` feature extractor and the MobileNet v1
base now live in `ssd_mobilenet.feature_extractors` beside FPN and PPN.

`build_feature_extractor` and `feature_map_shapes` follow the config's `feature_extractor_type`.
"""

from ssd_mobilenet.feature_extractors import FEATURE_SCOPE, build_feature_extractor, feature_map_shapes
from ssd_mobilenet.feature_extractors.mobilenet_v1 import MOBILENET_V1_BLOCKS
from ssd_mobilenet.feature_extractors.ssd_mobilenet_v1 import (BASE_FEATURE_LAYERS, EXTRA_LAYER_DEPTHS,
                                                               extra_layer_names)

__all__ = ["BASE_FEATURE_LAYERS", "EXTRA_LAYER_DEPTHS", "FEATURE_SCOPE", "MOBILENET_V1_BLOCKS",
           "build_feature_extractor", "extra_layer_names", "feature_map_shapes"]
