"""Small pipeline.configs for training tests: the SSDConfig's model part plus the zoo config's
training fields (plain SSD: matcher, losses with hard example mining; FPN and PPN: focal loss) and a
`train_config` whose optimizer block the test chooses."""

from __future__ import annotations

from migrate.shapes import ZOO_LOSS_FIELDS, model_training_text
from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.config.ssd_config import SSDConfig, f32
from ssd_mobilenet.config.type_names import (MULTISCALE_ANCHORS, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN,
                                             WEIGHT_SHARED)

SMALL = dict(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128)
# A small FPN and PPN of the zoo configs' form (weight-shared heads, the class bias -4.6, sigmoid
# scores; FPN's multiscale anchors, PPN's SSD anchors of every size at every map), at 128x128.
# FPN: levels 3..6 (one bottom-up layer) and anchor scale 2 (the zoo's 4 at 640x640), so that
# boxes of 16 to 128 pixels match every level; separate towers of 4 3x3 layers, depth 32.
FPN_SMALL = dict(SMALL, feature_extractor_type=SSD_MOBILENET_V1_FPN, box_predictor_type=WEIGHT_SHARED,
                 anchor_generator_type=MULTISCALE_ANCHORS, fpn_min_level=3, fpn_max_level=6, anchor_min_level=3,
                 anchor_max_level=6, anchor_scale=2.0, aspect_ratios=(1.0, 2.0, 0.5), fpn_additional_layer_depth=64,
                 box_predictor_depth=32, box_predictor_num_layers_before_predictor=4, box_predictor_kernel_size=3,
                 class_prediction_bias_init=f32(-4.6), score_converter="SIGMOID", score_threshold=f32(1e-8))
# PPN: one shared 1x1 tower layer of depth 32.
PPN_SMALL = dict(SMALL, feature_extractor_type=SSD_MOBILENET_V1_PPN, box_predictor_type=WEIGHT_SHARED,
                 box_predictor_depth=32, box_predictor_num_layers_before_predictor=1, box_predictor_kernel_size=1,
                 share_prediction_tower=True, class_prediction_bias_init=f32(-4.6), min_scale=f32(0.15),
                 reduce_boxes_in_lowest_layer=False, score_converter="SIGMOID", score_threshold=f32(1e-8))
_TRAINING_FIELDS = ZOO_LOSS_FIELDS + "{ssd_extra}    post_processing {"
RMSPROP = """rms_prop_optimizer {
      learning_rate { constant_learning_rate { learning_rate: 0.004 } }
      momentum_optimizer_value: 0.9 decay: 0.9 epsilon: 1.0 }"""
# The zoo FPN and PPN configs' optimizer (momentum, cosine decay after a linear warm-up) with rates
# for a step or two from synthetic weights, whose gradients' global norm is in the thousands.
MOMENTUM_COSINE = """momentum_optimizer {
      learning_rate { cosine_decay_learning_rate { learning_rate_base: 0.0004 total_steps: 100
        warmup_learning_rate: 0.0001 warmup_steps: 1 } }
      momentum_optimizer_value: 0.9 }
    use_moving_average: false"""


def _train_config(optimizer: str, train_extra: str) -> str:
    return f"train_config {{\n  batch_size: 4\n  optimizer {{\n    {optimizer}\n  }}\n{train_extra}}}\n"


def pipeline(optimizer: str = RMSPROP, train_extra: str = "", ssd_extra: str = "", **config) -> str:
    """pipeline.config text of `SSDConfig(**{**SMALL, **config})` with training fields; `train_extra`
    and `ssd_extra` are added to `train_config` and `model.ssd`."""
    text = to_pipeline_config(SSDConfig(**{**SMALL, **config}))
    text = text.replace("    post_processing {", _TRAINING_FIELDS.replace("{ssd_extra}", ssd_extra), 1)
    return text + _train_config(optimizer, train_extra)


def focal_pipeline(fields: dict, optimizer: str = MOMENTUM_COSINE, train_extra: str = "") -> str:
    """pipeline.config text of `SSDConfig(**fields)` (an FPN or PPN) with its zoo config's training
    fields (`shapes.model_training_text`: focal loss, no miner, background as zeros, the zoo's batch
    norm decay, in-place batch norm updates) and a `train_config` with `optimizer`."""
    return model_training_text(SSDConfig(**fields)) + _train_config(optimizer, train_extra)
