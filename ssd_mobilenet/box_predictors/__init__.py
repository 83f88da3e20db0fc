"""The box predictors, chosen by the pipeline.config's `box_predictor` oneof as the OD API's
`box_predictor_builder` chooses them (`SSDConfig.box_predictor_type`).

Each module gives `build(feature_maps, config, merge_heads) -> (box_encodings [N, A, 4],
class_logits [N, A, num_class_slots])`, Keras tensors of layers named `concat` and `concat_1`
(the TF1 graph's nodes), anchors in feature map order, then (y, x, anchor).
"""

from __future__ import annotations

from ssd_mobilenet.box_predictors import convolutional, weight_shared
from ssd_mobilenet.config.type_names import CONVOLUTIONAL, WEIGHT_SHARED

BOX_PREDICTORS = {CONVOLUTIONAL: convolutional, WEIGHT_SHARED: weight_shared}


def for_config(config):
    """The module of `config.box_predictor_type`."""
    return BOX_PREDICTORS[config.box_predictor_type]


def build_box_predictors(feature_maps, config, merge_heads: bool = False):
    """`config`'s box predictor on `feature_maps`: (box_encodings, class_logits)."""
    return for_config(config).build(feature_maps, config, merge_heads)
