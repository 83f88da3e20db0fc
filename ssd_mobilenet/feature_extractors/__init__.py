"""The feature extractors, chosen by `feature_extractor.type` as the OD API's `model_builder` chooses
them (`SSDConfig.feature_extractor_type`).

Each module gives:
  build(x, config, fold_batch_norm) -> (feature_maps, endpoints): the maps in predictor order and
    every layer's output keyed by its TF1 op scope under `FeatureExtractor/MobilenetV1/`;
  feature_map_shapes(config) -> [(H_i, W_i)], without building layers;
  stem_end(config): the last layer of the high-resolution part every later layer depends on only
    through it (`SSDMobileNetV1.split`);
  unused_tf1_weights(config): ((TF1 name pattern, reason), ...) for weights the OD API builds and
    this feature extractor does not use.
"""

from __future__ import annotations

from ssd_mobilenet.config.type_names import SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN
from ssd_mobilenet.feature_extractors import fpn, ppn, ssd_mobilenet_v1

FEATURE_EXTRACTORS = {SSD_MOBILENET_V1: ssd_mobilenet_v1, SSD_MOBILENET_V1_FPN: fpn, SSD_MOBILENET_V1_PPN: ppn}
FEATURE_SCOPE = "FeatureExtractor/MobilenetV1/"


def for_config(config):
    """The module of `config.feature_extractor_type`."""
    return FEATURE_EXTRACTORS[config.feature_extractor_type]


def build_feature_extractor(x, config, fold_batch_norm: bool = False):
    """(feature_maps, endpoints) of `config`'s feature extractor on the preprocessed image `x`."""
    return for_config(config).build(x, config, fold_batch_norm)


def feature_map_shapes(config) -> list:
    """[(H_i, W_i)] of `config`'s feature maps at its image size."""
    return for_config(config).feature_map_shapes(config)
