"""A small pipeline.config for training tests: the SSDConfig's model part plus the zoo config's
matcher and losses (hard example mining included) and a `train_config` whose optimizer block
the test chooses."""

from __future__ import annotations

from migrate.shapes import ZOO_LOSS_FIELDS
from ssd_mobilenet.config import SSDConfig

SMALL = dict(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128)
_TRAINING_FIELDS = ZOO_LOSS_FIELDS + "{ssd_extra}    post_processing {"
RMSPROP = """rms_prop_optimizer {
      learning_rate { constant_learning_rate { learning_rate: 0.004 } }
      momentum_optimizer_value: 0.9 decay: 0.9 epsilon: 1.0 }"""


def pipeline(optimizer: str = RMSPROP, train_extra: str = "", ssd_extra: str = "", **config) -> str:
    """pipeline.config text of `SSDConfig(**{**SMALL, **config})` with training fields; `train_extra`
    and `ssd_extra` are added to `train_config` and `model.ssd`."""
    text = SSDConfig(**{**SMALL, **config}).to_pipeline_config()
    text = text.replace("    post_processing {", _TRAINING_FIELDS.replace("{ssd_extra}", ssd_extra), 1)
    return text + f"train_config {{\n  batch_size: 4\n  optimizer {{\n    {optimizer}\n  }}\n{train_extra}}}\n"
