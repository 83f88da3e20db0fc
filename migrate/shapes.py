"""`python -m migrate shapes DIR`: what the training demo needs, generated on this machine.

DIR gets:
  train.record, eval.record, label_map.pbtxt  the generated shapes set in the OD API's format
                                              (`ssd_mobilenet.training.shapes_dataset`)
  images/                                     the evaluation images as JPEG files, for `predict --png`
  tf1_model/                                  a small TF1 SSD MobileNet v1 for the shapes' three classes
                                              (depth multiplier 0.25, 128x128), built by `migrate.tf1.builder`
                                              with seeded synthetic weights, in the zoo's layout, marked
                                              so (`converted_dir.SYNTHETIC_FILE`); with `--model ppn` the
                                              PPN (`PPN_MODEL_CONFIG`)
  train.config                                the pipeline.config to train it with (`--config`)

The model starts from synthetic weights, not from a trained one, so its detections mean nothing
before training. `train.config` is the zoo config's matcher, losses and hard example miner with
settings for a short run from such weights: Adam, batch norm moving statistics that follow
within a hundred steps (decay 0.99 in every layer, so the moving statistics are the trained
network's when the run ends; the zoo's 0.9997 needs thousands), no moving average of the weights
(the zoo's 0.9999 would write out nearly the starting weights) and the horizontal flip only
(the random crop makes the few images harder to learn in a short run). For the PPN, the zoo PPN
config's training fields in place of the plain SSD's (sigmoid focal loss, alpha 0.75, gamma 2,
localization weight 1.5, no hard example miner, background encoded as zeros, batch norm updated
in place), with the same short-run settings.
"""

from __future__ import annotations

import os

from dataclasses import dataclass

import numpy as np

from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.config.type_names import SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN, WEIGHT_SHARED

MODEL_CONFIG = SSDConfig(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128)
# The PPN of the zoo's ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync at the demo's
# size and depth: Conv2d_11 then five 2x2 max-pools (maps of 8, 4, 2, 1, 1, 1 cells), the
# weight-shared heads behind one shared 1x1 tower layer (depth 64 here, the zoo's 512), the class
# bias -4.6, anchors of every size at every map from scale 0.15; fused batch norm, as the OD API's
# own exports of it.
PPN_MODEL_CONFIG = SSDConfig(
    num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128,
    feature_extractor_type=SSD_MOBILENET_V1_PPN, box_predictor_type=WEIGHT_SHARED, box_predictor_depth=64,
    box_predictor_num_layers_before_predictor=1, box_predictor_kernel_size=1, share_prediction_tower=True,
    class_prediction_bias_init=float(np.float32(-4.6)), min_scale=float(np.float32(0.15)),
    reduce_boxes_in_lowest_layer=False, fused_batch_norm=True)
# {--model choice: the demo's model}
MODELS = {"plain": MODEL_CONFIG, "ppn": PPN_MODEL_CONFIG}
TRAIN_IMAGES, EVAL_IMAGES = 2000, 50
IMAGE_SIZE = 128
STEPS, BATCH_SIZE, LEARNING_RATE = 1500, 16, 0.003
BATCH_NORM_DECAY = 0.99
MODEL_SEED = 3

# The zoo SSD MobileNet v1 config's matcher, similarity, losses and hard example miner, as `model.ssd` fields.
ZOO_LOSS_FIELDS = """    matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5
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
"""


@dataclass(frozen=True)
class FocalTraining:
    """What the zoo's FPN and PPN configs set apart: the focal loss's alpha, the localization
    loss's weight and the batch norm decay of both conv_hyperparams blocks."""

    alpha: float
    localization_weight: float
    batch_norm_decay: float


# ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync and ..._ppn_..._300x300_coco14_sync.
ZOO_FOCAL_TRAINING = {SSD_MOBILENET_V1_FPN: FocalTraining(0.25, 1.0, 0.997),
                      SSD_MOBILENET_V1_PPN: FocalTraining(0.75, 1.5, 0.97)}


def focal_loss_fields(alpha: float, localization_weight: float) -> str:
    """The zoo FPN and PPN configs' training fields of `model.ssd` (RetinaNet's): the matcher, sigmoid
    focal loss (gamma 2) without a hard example miner, background encoded as zeros, losses normalised
    by the matched anchors and the code size, batch norm updated in place."""
    return f"""    matcher {{ argmax_matcher {{ matched_threshold: 0.5 unmatched_threshold: 0.5 ignore_thresholds: false
      negatives_lower_than_unmatched: true force_match_for_each_row: true use_matmul_gather: true }} }}
    similarity_calculator {{ iou_similarity {{ }} }}
    encode_background_as_zeros: true
    normalize_loss_by_num_matches: true
    normalize_loc_loss_by_codesize: true
    inplace_batchnorm_update: true
    freeze_batchnorm: false
    loss {{
      classification_loss {{ weighted_sigmoid_focal {{ alpha: {alpha} gamma: 2.0 }} }}
      localization_loss {{ weighted_smooth_l1 {{ }} }}
      classification_weight: 1.0
      localization_weight: {localization_weight}
    }}
"""


def model_training_text(config: SSDConfig, batch_norm_decay: "float | None" = None) -> str:
    """`config`'s `model` block with the training fields of the zoo config of its family: the plain
    SSD's matcher, losses and hard example miner (`ZOO_LOSS_FIELDS`), or FPN's and PPN's focal loss
    (`focal_loss_fields`); `batch_norm_decay` (default: the zoo config's) in every layer, the base
    network's through `override_base_feature_extractor_hyperparams`."""
    focal = ZOO_FOCAL_TRAINING.get(config.feature_extractor_type)
    if batch_norm_decay is None:
        batch_norm_decay = focal.batch_norm_decay if focal is not None else 0.9997
    text = to_pipeline_config(config)
    text = text.replace("decay: 0.9997", f"decay: {batch_norm_decay}")
    override = "      override_base_feature_extractor_hyperparams: true\n"
    text = text.replace("      min_depth: 16\n", "      min_depth: 16\n" + override, 1)
    fields = ZOO_LOSS_FIELDS if focal is None else focal_loss_fields(focal.alpha, focal.localization_weight)
    return text.replace("    post_processing {", fields + "    post_processing {", 1)


_TRAIN_CONFIG = """train_config {{
  batch_size: {batch}
  num_steps: {steps}
  optimizer {{
    adam_optimizer {{ learning_rate {{ constant_learning_rate {{ learning_rate: {rate} }} }} }}
    use_moving_average: false
  }}
{augmentation}}}
"""


def train_config_text(config: SSDConfig = MODEL_CONFIG, batch_norm_decay: float = BATCH_NORM_DECAY,
                      flip: bool = True) -> str:
    """The demo's pipeline.config: `config`'s model with its family's zoo training fields (plain
    SSD: the matcher, losses and hard example miner; PPN and FPN: focal loss without a miner,
    background encoded as zeros), `batch_norm_decay` in every layer (the base network's through
    `override_base_feature_extractor_hyperparams`) and the demo's `train_config`, with the
    horizontal flip unless `flip` is False."""
    text = model_training_text(config, batch_norm_decay)
    augmentation = "  data_augmentation_options { random_horizontal_flip { } }\n" if flip else ""
    return text + _TRAIN_CONFIG.format(batch=BATCH_SIZE, steps=STEPS, rate=LEARNING_RATE, augmentation=augmentation)


def write(out_dir: str, force: bool = False, progress=None, num_train: int = TRAIN_IMAGES,
          num_eval: int = EVAL_IMAGES, seed: int = 0, model: str = "plain") -> str:
    """Writes DIR (module docstring) in a temporary folder beside it, renamed into place, with
    the model `MODELS[model]` (plain SSD MobileNet v1, or PPN) and its `train_config_text`.

    Raises:
      OutputExistsError: DIR exists and is not an empty folder, without `force`.
    """
    import tensorflow as tf

    from migrate.tf1 import builder
    from ssd_mobilenet import atomic_write, converted_dir
    from ssd_mobilenet.training import data, shapes_dataset

    say = progress or (lambda msg: None)
    out_dir = os.path.abspath(os.fspath(out_dir))
    atomic_write.check_output(out_dir, force, is_dir=True, flag="DIR")
    with atomic_write.atomic_directory(out_dir) as tmp:
        say(f"writing {num_train} + {num_eval} shape images as TFRecords")
        shapes_dataset.write_shapes_dataset(os.path.join(tmp, "records"), num_train=num_train, num_eval=num_eval,
                                            image_size=IMAGE_SIZE, seed=seed)
        for name in os.listdir(os.path.join(tmp, "records")):
            os.replace(os.path.join(tmp, "records", name), os.path.join(tmp, name))
        os.rmdir(os.path.join(tmp, "records"))
        images = os.path.join(tmp, "images")
        os.makedirs(images)
        for serialized in tf.data.TFRecordDataset(os.path.join(tmp, "eval.record")):
            features = tf.io.parse_single_example(serialized, {k: data.FEATURES[k] for k in
                                                               ("image/encoded", "image/filename")})
            name = os.path.basename(features["image/filename"].numpy().decode())
            with open(os.path.join(images, name), "wb") as f:
                f.write(features["image/encoded"].numpy())
        config = MODELS[model]
        # Within 100 columns for the longest type's name (ssd_mobilenet_v1_ppn): 98.
        say(f"building the TF1 {config.feature_extractor_type}: 3 classes, depth 0.25, 128x128, synthetic weights")
        builder.write_model_dir(config, os.path.join(tmp, "tf1_model"), seed=MODEL_SEED)
        converted_dir.mark_synthetic(os.path.join(tmp, "tf1_model"))  # convert carries it; train drops it
        with open(os.path.join(tmp, "train.config"), "w", encoding="utf-8") as f:
            f.write(train_config_text(config))
    return out_dir
