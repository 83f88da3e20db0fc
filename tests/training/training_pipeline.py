"""A small pipeline.config for training tests: the SSDConfig's model part plus the zoo config's
matcher and losses (hard example mining included) and a `train_config` whose optimizer block
the test chooses."""

from __future__ import annotations

from ssd_mobilenet.config import SSDConfig

SMALL = dict(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128)
_TRAINING_FIELDS = """    matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5
      force_match_for_each_row: true } }
    similarity_calculator { iou_similarity { } }
    normalize_loss_by_num_matches: true
    loss {
      localization_loss { weighted_smooth_l1 { } }
      classification_loss { weighted_sigmoid { } }
      hard_example_miner { num_hard_examples: 3000 iou_threshold: 0.99 loss_type: CLASSIFICATION
        max_negatives_per_positive: 3 min_negatives_per_image: 3 }
      classification_weight: 1.0
      localization_weight: 1.0
    }
{ssd_extra}    post_processing {"""
RMSPROP = """rms_prop_optimizer {
      learning_rate { constant_learning_rate { learning_rate: 0.004 } }
      momentum_optimizer_value: 0.9 decay: 0.9 epsilon: 1.0 }"""


def pipeline(optimizer: str = RMSPROP, train_extra: str = "", ssd_extra: str = "", **config) -> str:
    """pipeline.config text of `SSDConfig(**{**SMALL, **config})` with training fields; `train_extra`
    and `ssd_extra` are added to `train_config` and `model.ssd`."""
    text = SSDConfig(**{**SMALL, **config}).to_pipeline_config()
    text = text.replace("    post_processing {", _TRAINING_FIELDS.replace("{ssd_extra}", ssd_extra), 1)
    return text + f"train_config {{\n  batch_size: 4\n  optimizer {{\n    {optimizer}\n  }}\n{train_extra}}}\n"
