"""What a `TrainingConfig` builds for training: the optimiser with its learning-rate schedule,
the moving average, the L2 regularisation loss and the batch-norm decay of every layer, as the
TF1 Object Detection API (tensorflow/models at 9bf1fd02, TF 1.13 era, slim model code) set them.

Optimiser (`builders/optimizer_builder.py`): RMSProp with the config's `decay`,
`momentum_optimizer_value` and `epsilon`; Momentum with `momentum_optimizer_value`; Adam with
TF1's defaults (beta1 0.9, beta2 0.999, epsilon 1e-8: the proto sets none of them). The rate is
the `learning_rate` oneof's schedule (`schedules`); `manual_step_learning_rate` runs
`initial_learning_rate` before its first step (an empty schedule is refused as the config is read,
as the OD API refused it).
`use_moving_average` wrapped the optimiser in `MovingAverageOptimizer(moving_average_decay)`,
which averaged the variables it updated, without `num_updates`.

Which layers are regularised, and with which weight and batch-norm decay
(`models/ssd_mobilenet_v1_feature_extractor.py`, slim `nets/mobilenet_v1.py`,
`builders/hyperparams_builder.py`):
- The 14 MobileNet layers (`Conv2d_0` .. `Conv2d_13_pointwise`) were built inside
  `mobilenet_v1_arg_scope(is_training=None, regularize_depthwise=True)`: slim's defaults,
  `l2_regularizer(0.00004)` on every `weights` and, because of `regularize_depthwise=True`,
  every `depthwise_weights` too; batch norm decay 0.9997 (epsilon 0.001, center and scale).
  With `override_base_feature_extractor_hyperparams` the feature extractor's
  `conv_hyperparams` scope is entered inside that one and replaces all of it: its regularizer
  (none when it has none) and its batch norm.
- The extra layers take the feature extractor's `conv_hyperparams`: `ssd_mobilenet_v1`'s four
  extra feature-map layers, FPN's pyramid (`fpn_top_down_feature_maps` and the bottom-up layers
  are built inside that scope: the `projection_<n>` kernels are regularised, their biases not;
  `smoothing_<k>` and `bottom_up_Conv2d_<n>` like any conv), PPN none (its pyramid is max-pools).
- The box predictor's `conv_hyperparams` govern its layers: the convolutional predictor's heads
  (`BoxEncodingPredictor`, `ClassPredictor`, and their `_depthwise` convs with `use_depthwise`);
  the weight-shared predictor's tower convs (`.../conv2d_<i>`), `BoxPredictor` and
  `ClassPredictor`, and its per-feature-map batch norms (`.../BatchNorm/feature_<j>`: their
  decay). The weight-shared kernels are created once and reused for every feature map
  (`tf.AUTO_REUSE`), and a reused variable adds no second regulariser term: one term each.
- The hyperparams builder puts its regularizer on `slim.conv2d` and `slim.separable_conv2d`
  alike, and slim's `separable_conv2d(num_outputs=None)` passes it to `depthwise_weights`: every
  depthwise kernel under a hyperparams scope is regularised whatever `regularize_depthwise`
  says. A separable conv with outputs (FPN's and the weight-shared predictor's 3x3 convs with
  `use_depthwise`) regularises both its `depthwise_weights` and `pointwise_weights`. Neither the slim nor the Keras hyperparams builder of that era reads
  `regularize_depthwise`; it is accepted and changes nothing, as in TF1.
- Biases (`biases_regularizer` stays None) and batch-norm variables are never regularised.
slim's `l2_regularizer(scale)(w)` is `scale * tf.nn.l2_loss(w)` (`l2_loss(w) = sum(w ** 2) / 2`)
with `scale` as float32, and returns nothing for scale 0; model_lib summed the per-variable
terms in creation order with `tf.add_n` as `Loss/regularization_loss`, only with
`add_regularization_loss`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import keras
import tensorflow as tf

from ssd_mobilenet.box_predictors.convolutional import BoxPredictor
from ssd_mobilenet.box_predictors.weight_shared import WeightSharedConvolutionalBoxPredictor
from ssd_mobilenet.layers import DEFAULT_BATCH_NORM_DECAY, BatchNorm, SlimConv
from ssd_mobilenet.training import optimizers, schedules
from ssd_mobilenet.training.moving_average import MovingAverage

# slim mobilenet_v1_arg_scope's defaults, which the OD API's feature extractor kept.
MOBILENET_WEIGHT_DECAY = 0.00004
MOBILENET_BATCH_NORM_DECAY = 0.9997
# tf.train.AdamOptimizer's defaults (the OD API's AdamOptimizer proto has only a learning rate).
ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-8

BASE, EXTRA, BOX_PREDICTOR = "base", "extra", "box_predictor"
_BASE_LAYER = re.compile(r"Conv2d_\d+(_depthwise|_pointwise)?")


def learning_rate(config) -> keras.optimizers.schedules.LearningRateSchedule:
    """The schedule of a `train_config.LearningRateConfig`."""
    kind = config.kind
    if kind == "constant_learning_rate":
        return schedules.ConstantRate(config["learning_rate"])
    if kind == "exponential_decay_learning_rate":
        return schedules.ExponentialDecay(
            config["initial_learning_rate"], config["decay_steps"], config["decay_factor"], config["staircase"],
            config["burnin_learning_rate"], config["burnin_steps"], config["min_learning_rate"])
    if kind == "cosine_decay_learning_rate":
        return schedules.CosineDecayWithWarmup(
            config["learning_rate_base"], config["total_steps"], config["warmup_learning_rate"],
            config["warmup_steps"], config["hold_base_rate_steps"])
    if kind == "manual_step_learning_rate":
        schedule = config["schedule"]  # not empty: train_config refuses an empty one, as the OD API did
        return schedules.ManualStepping([step for step, _ in schedule],
                                        [config["initial_learning_rate"]] + [rate for _, rate in schedule],
                                        config["warmup"])
    raise ValueError(f"unknown learning rate {kind!r}")


def optimizer(config):
    """The Keras optimiser of a `train_config.OptimizerConfig` (TF1's update arithmetic)."""
    rate = learning_rate(config.learning_rate)
    if config.kind == "rms_prop_optimizer":
        return optimizers.RMSProp(rate, decay=config.decay, momentum=config.momentum, epsilon=config.epsilon)
    if config.kind == "momentum_optimizer":
        return optimizers.Momentum(rate, momentum=config.momentum)
    if config.kind == "adam_optimizer":
        return optimizers.Adam(rate, ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON)
    raise ValueError(f"unknown optimizer {config.kind!r}")


def moving_average(config, variables) -> "MovingAverage | None":
    """The average of `variables` when the `OptimizerConfig` asks for one, else None."""
    if not config.use_moving_average:
        return None
    return MovingAverage(variables, config.moving_average_decay)


_BOX_PREDICTORS = (BoxPredictor, WeightSharedConvolutionalBoxPredictor)


def _sublayers(model, kind) -> dict:
    """{BASE | EXTRA | BOX_PREDICTOR: [layer of `kind`, ...]}: the model's layers (and the layers
    inside them) of type `kind`, by the group of the model's layer they belong to, in model order."""
    groups = {BASE: [], EXTRA: [], BOX_PREDICTOR: []}
    for layer in model.layers:
        if isinstance(layer, _BOX_PREDICTORS):
            group = BOX_PREDICTOR
        elif isinstance(layer, SlimConv):
            group = BASE if _BASE_LAYER.fullmatch(layer.name) else EXTRA
        else:
            continue  # pooling, upsampling, concatenation: no weights
        groups[group].extend(sub for sub in layer._flatten_layers(include_self=True) if isinstance(sub, kind))
    return groups


def layer_groups(model) -> dict:
    """{BASE | EXTRA | BOX_PREDICTOR: [SlimConv, ...]} of an `SSDMobileNetV1`, in model order:
    the MobileNet layers, the layers after them (extra layers, FPN's pyramid), the box
    predictor's convs (heads; the weight-shared predictor's towers and heads)."""
    return _sublayers(model, SlimConv)


def batch_norm_layers(model) -> dict:
    """{BASE | EXTRA | BOX_PREDICTOR: [BatchNorm, ...]}: every batch norm of an `SSDMobileNetV1` by
    group (the convs' own, and the weight-shared predictor's per-feature-map ones)."""
    return _sublayers(model, BatchNorm)


def kernels(layer: SlimConv) -> list:
    """The kernels slim's regulariser covers: `weights` or `depthwise_weights`, and a separable
    conv's `pointwise_weights`."""
    return [layer.kernel] + ([layer.pointwise_kernel] if layer.separable else [])


@dataclass(frozen=True)
class GroupSettings:
    """A layer group's L2 weight (0: not regularised) and batch-norm decay."""

    l2_weight: float
    batch_norm_decay: float


def group_settings(config) -> dict:
    """{group: GroupSettings} from a `TrainingConfig` (see the module docstring)."""
    def of(hp):
        decay = hp.batch_norm.decay if hp.batch_norm is not None else DEFAULT_BATCH_NORM_DECAY
        return GroupSettings(hp.l2_weight, decay)

    extra = of(config.feature_extractor_hyperparams)
    base = extra if config.override_base_feature_extractor_hyperparams else \
        GroupSettings(MOBILENET_WEIGHT_DECAY, MOBILENET_BATCH_NORM_DECAY)
    return {BASE: base, EXTRA: extra, BOX_PREDICTOR: of(config.box_predictor_hyperparams)}


def set_batch_norm_decay(model, config) -> None:
    """Sets `BatchNorm.decay` of every batch norm from its group's config (before the first trained call)."""
    settings = group_settings(config)
    for group, norms in batch_norm_layers(model).items():
        for norm in norms:
            norm.decay = float(settings[group].batch_norm_decay)


def regularized_weights(model, config) -> list:
    """[(kernel variable, l2 weight)] of every regularised kernel (conv `weights`,
    `depthwise_weights`, `pointwise_weights`), in model order; empty without
    `add_regularization_loss`."""
    if not config.train.add_regularization_loss:
        return []
    settings = group_settings(config)
    pairs = []
    for group, layers in layer_groups(model).items():
        weight = settings[group].l2_weight
        if weight:  # slim.l2_regularizer(0.0) adds no loss at all
            pairs.extend((kernel, weight) for layer in layers for kernel in kernels(layer))
    return pairs


def regularization_loss(pairs):
    """slim's `l2_regularizer` summed: add_n of `float32(weight) * tf.nn.l2_loss(w)`; float32 0 for no pairs."""
    if not pairs:
        return tf.constant(0.0, tf.float32)
    return tf.add_n([tf.constant(weight, tf.float32) * tf.nn.l2_loss(tf.convert_to_tensor(w)) for w, weight in pairs])
