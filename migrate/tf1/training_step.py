"""One SSD MobileNet v1 (plain, FPN or PPN) training step as a TF1 graph, built the way the OD API's
TF1 code built it.

A second, independent implementation of what `ssd_mobilenet.training.trainer.Trainer` computes
(nothing here comes from `ssd_mobilenet.training`), so that a TF2 training step can be checked
against TF1 rather than against itself. It follows tensorflow/models research/object_detection at
commit 9bf1fd02 (2019-02-21, TF 1.13 era) and the slim code it called, in a `tf.compat.v1` graph:

- the network of `builder` (slim convolutions, the exported variable names
  `FeatureExtractor/MobilenetV1/...`, `BoxPredictor_N/...` or
  `WeightSharedConvolutionalBoxPredictor/...`) with batch norm in training mode (the weight-shared
  predictor's per feature map), its moving statistics updated by the train op or, with
  `inplace_batchnorm_update`, inside each layer: box encodings [B, A, 4] and class logits [B, A,
  num_classes + 1] on preprocessed images, over the config's anchors (FPN's multiscale grid);
- `SSDMetaArch.loss`: per image, IoU (`box_list_ops.iou`), `ArgMaxMatcher`, `FasterRcnnBoxCoder`
  encoding with the config's scales and `TargetAssigner`'s targets and weights; the per-anchor
  localization loss (weighted smooth L1 through `tf.losses.huber_loss`, or weighted L2) and
  classification loss (weighted sigmoid, sigmoid focal or weighted softmax); the hard example
  miner over the decoded predictions (`tf.image.non_max_suppression`, then the
  negative:positive subsampling); normalisation by the matched anchors;
- the regularisation loss the slim way: `slim.l2_regularizer` in the layers' arg scopes puts one
  term per regularised kernel in the `REGULARIZATION_LOSSES` collection as the kernel is created
  (a weight-shared kernel once, however many feature maps reuse it; MobileNet's Conv2d_12 and
  Conv2d_13 too where the feature extractor builds them without using them, PPN's), and
  `tf.losses.get_regularization_losses()` sums them with `tf.add_n` (model_lib did this only
  with `add_regularization_loss`);
- the train op as model_lib's `tf.contrib.layers.optimize_loss` made it (the order of
  `slim.learning.create_train_op` too): the batch-norm update ops run before the total loss is
  computed, the gradients of all trainable variables, clipped together by their global norm
  (`tf.clip_by_global_norm`) when `gradient_clipping_by_norm` > 0, as `optimize_loss` did with
  the float model_lib passed it (the legacy `train.py` clipped each gradient on its own), then
  `tf.train.RMSPropOptimizer` / `MomentumOptimizer` / `AdamOptimizer` with the schedule's rate
  (constant, exponential decay with burn-in, cosine decay with warm-up: `learning_schedules`),
  advancing `global_step`, and with `use_moving_average` a `tf.train.ExponentialMovingAverage`
  of the updated variables applied after the update (`MovingAverageOptimizer`,
  `sequential_update=True`, no `num_updates`).

Layer groups (`builder.LayerTraining`): the 14 MobileNet layers take slim's
`mobilenet_v1_arg_scope(regularize_depthwise=True)` defaults (L2 4e-5 on every kernel, batch
norm decay 0.9997) unless `override_base_feature_extractor_hyperparams`; the extra layers (FPN's
pyramid) the feature extractor's `conv_hyperparams`; the box predictor's layers its own
`conv_hyperparams`.

Boxes are [ymin, xmin, ymax, xmax], normalised. The training settings come from a
`train_config.TrainingConfig`, read by attribute only (its fields, not its code). Frozen batch
norm (`freeze_batchnorm`, `batch_norm { train: false }`) is not built here.

The variables are TF1 ref variables (`use_resource=False`), updated in place. Gradients are
computed with `GATE_GRAPH`, and the updates wait for the total loss as well, so no update can
start before every gradient and every loss (and so every read of the weights by the forward and
backward passes and by the regularizer) is done: a step's values are those of a sequential
forward, backward and update, without the read/update races a ref-variable graph otherwise
allows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from migrate.tf1 import builder
from migrate.tf1.builder import BASE, BOX_PREDICTOR, EXTRA, LayerTraining
from ssd_mobilenet import anchor_generators
from ssd_mobilenet.config.ssd_config import SSDConfig

tf1 = tf.compat.v1

# slim nets/mobilenet_v1.py mobilenet_v1_arg_scope's defaults (Python floats), which the OD API's
# ssd_mobilenet_v1 feature extractor kept for the 14 MobileNet layers.
MOBILENET_WEIGHT_DECAY = 0.00004
MOBILENET_BATCH_NORM_DECAY = 0.9997
SLIM_BATCH_NORM_DECAY = 0.999  # slim.batch_norm's default decay (a hyperparams block without batch_norm)
# Loss names as model_lib wrote them.
LOCALIZATION_LOSS = "Loss/localization_loss"
CLASSIFICATION_LOSS = "Loss/classification_loss"
REGULARIZATION_LOSS = "Loss/regularization_loss"
TOTAL_LOSS = "Loss/total_loss"
# faster_rcnn_box_coder.EPSILON
_BOX_CODER_EPSILON = 1e-8
_UNMATCHED, _IGNORED = -1, -2


def layer_training(training) -> dict:
    """{BASE | EXTRA | BOX_PREDICTOR: LayerTraining} of a `TrainingConfig` (see the module docstring)."""
    inplace = training.inplace_batchnorm_update

    def of(hp):
        decay = hp.batch_norm.decay if hp.batch_norm is not None else SLIM_BATCH_NORM_DECAY
        return LayerTraining(decay, hp.l2_weight, inplace)

    extra = of(training.feature_extractor_hyperparams)
    base = extra if training.override_base_feature_extractor_hyperparams else \
        LayerTraining(MOBILENET_BATCH_NORM_DECAY, MOBILENET_WEIGHT_DECAY, inplace)
    return {BASE: base, EXTRA: extra, BOX_PREDICTOR: of(training.box_predictor_hyperparams)}


# ---- target assignment (core/box_list_ops.py, matchers/argmax_matcher.py, core/target_assigner.py) ----

def _iou(boxes1, boxes2):
    """`box_list_ops.iou`: [N, 4] x [M, 4] -> [N, M]."""
    y_min1, x_min1, y_max1, x_max1 = tf.split(boxes1, 4, axis=1)
    y_min2, x_min2, y_max2, x_max2 = tf.split(boxes2, 4, axis=1)
    heights = tf.maximum(0.0, tf.minimum(y_max1, tf.transpose(y_max2)) - tf.maximum(y_min1, tf.transpose(y_min2)))
    widths = tf.maximum(0.0, tf.minimum(x_max1, tf.transpose(x_max2)) - tf.maximum(x_min1, tf.transpose(x_min2)))
    intersections = heights * widths
    areas1 = tf.squeeze((y_max1 - y_min1) * (x_max1 - x_min1), [1])
    areas2 = tf.squeeze((y_max2 - y_min2) * (x_max2 - x_min2), [1])
    unions = tf.expand_dims(areas1, 1) + tf.expand_dims(areas2, 0) - intersections
    return tf1.where(tf.equal(intersections, 0.0), tf.zeros_like(intersections), tf.truediv(intersections, unions))


def _set_values_using_indicator(x, indicator, value):
    indicator = tf.cast(indicator, x.dtype)
    return tf.add(tf.multiply(x, 1 - indicator), value * indicator)


def _match(similarity, valid_rows, matcher):
    """`ArgMaxMatcher._match` of a [N, M] similarity (rows groundtruth) -> int32 [M]."""
    def non_empty():
        matches = tf.argmax(similarity, 0, output_type=tf.int32)
        if matcher.matched_threshold is not None:
            unmatched = matcher.unmatched_threshold
            matched_vals = tf.reduce_max(similarity, 0)
            below = tf.greater(unmatched, matched_vals)
            between = tf.logical_and(tf.greater_equal(matched_vals, unmatched),
                                     tf.greater(matcher.matched_threshold, matched_vals))
            low, mid = (-1, -2) if matcher.negatives_lower_than_unmatched else (-2, -1)
            matches = _set_values_using_indicator(matches, below, low)
            matches = _set_values_using_indicator(matches, between, mid)
        if not matcher.force_match_for_each_row:
            return matches
        force_columns = tf.argmax(similarity, 1, output_type=tf.int32)
        indicators = tf.one_hot(force_columns, depth=tf.shape(similarity)[1]) * tf.cast(
            tf.expand_dims(valid_rows, -1), tf.float32)
        force_rows = tf.argmax(indicators, 0, output_type=tf.int32)
        return tf1.where(tf.cast(tf.reduce_max(indicators, 0), tf.bool), force_rows, matches)

    def empty():
        return -1 * tf.ones([tf.shape(similarity)[1]], tf.int32)

    return tf.cond(tf.greater(tf.shape(similarity)[0], 0), non_empty, empty)


def _gather_based_on_match(matches, values, unmatched_value, ignored_value):
    """`Match.gather_based_on_match`."""
    table = tf.concat([tf.stack([ignored_value, unmatched_value]), values], axis=0)
    return tf.gather(table, tf.maximum(matches + 2, 0))


def _center_size(boxes):
    """`BoxList.get_center_coordinates_and_sizes`."""
    ymin, xmin, ymax, xmax = tf.unstack(tf.transpose(boxes))
    width = xmax - xmin
    height = ymax - ymin
    return ymin + height / 2.0, xmin + width / 2.0, height, width


def _encode(boxes, anchors, scales):
    """`FasterRcnnBoxCoder._encode`: [A, 4] boxes relative to [A, 4] anchors -> [A, 4] [ty, tx, th, tw]."""
    ycenter_a, xcenter_a, ha, wa = _center_size(anchors)
    ycenter, xcenter, h, w = _center_size(boxes)
    ha += _BOX_CODER_EPSILON
    wa += _BOX_CODER_EPSILON
    h += _BOX_CODER_EPSILON
    w += _BOX_CODER_EPSILON
    tx = (xcenter - xcenter_a) / wa
    ty = (ycenter - ycenter_a) / ha
    tw = tf.math.log(w / wa)
    th = tf.math.log(h / ha)
    if scales:
        ty *= scales[0]
        tx *= scales[1]
        th *= scales[2]
        tw *= scales[3]
    return tf.transpose(tf.stack([ty, tx, th, tw]))


def _assign(anchors, boxes, labels, weights, unmatched_class_label, training):
    """`TargetAssigner.assign` of one image: (cls_targets [A, slots], cls_weights [A, slots],
    reg_targets [A, 4], reg_weights [A], matches [A])."""
    matches = _match(_iou(boxes, anchors), tf.greater(weights, 0), training.matcher)
    matched_boxes = _gather_based_on_match(matches, boxes, tf.zeros(4), tf.zeros(4))
    encoded = _encode(matched_boxes, anchors, training.box_coder_scales)
    unmatched_targets = tf.tile(tf.constant([4 * [0]], tf.float32), [tf.shape(matches)[0], 1])
    reg_targets = tf1.where(tf.greater_equal(matches, 0), encoded, unmatched_targets)
    cls_targets = _gather_based_on_match(matches, labels, unmatched_class_label, unmatched_class_label)
    reg_weights = _gather_based_on_match(matches, weights, 0.0, 0.0)
    cls_weights = _gather_based_on_match(matches, weights, training.negative_class_weight, 0.0)
    # TF 1.13: the per-anchor weights tiled over the class slots.
    multiple = tf.concat([tf.ones_like(tf.shape(cls_weights)), tf.shape(cls_targets)[1:]], axis=0)
    cls_weights = tf.tile(tf.expand_dims(cls_weights, -1), multiple)
    return cls_targets, cls_weights, reg_targets, reg_weights, matches


# ---- losses (core/losses.py) ----

def _localization_losses(prediction, target, weights, loss):
    """[B, A, 4] -> [B, A]; NaN targets replaced by the prediction (`ignore_nan_targets`)."""
    target = tf1.where(tf.math.is_nan(target), prediction, target)
    if loss.localization == "weighted_smooth_l1":
        return tf.reduce_sum(tf1.losses.huber_loss(target, prediction, delta=loss.smooth_l1_delta,
                                                   weights=tf.expand_dims(weights, axis=2), loss_collection=None,
                                                   reduction=tf1.losses.Reduction.NONE), axis=2)
    weighted_diff = (prediction - target) * tf.expand_dims(weights, axis=2)
    return tf.reduce_sum(0.5 * tf.square(weighted_diff), axis=2)


def _classification_losses(prediction, target, weights, loss):
    """[B, A, slots] -> [B, A, slots] (sigmoid, focal) or [B, A] (softmax)."""
    if loss.classification == "weighted_softmax":
        weights = tf.reduce_mean(weights, axis=2)
        slots = prediction.shape.as_list()[-1]
        prediction = tf.divide(prediction, loss.softmax_logit_scale, name="scale_logit")
        per_row = tf1.nn.softmax_cross_entropy_with_logits(labels=tf.reshape(target, [-1, slots]),
                                                           logits=tf.reshape(prediction, [-1, slots]))
        return tf.reshape(per_row, tf.shape(weights)) * weights
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=prediction)
    if loss.classification == "weighted_sigmoid":
        return cross_entropy * weights
    probabilities = tf.sigmoid(prediction)
    p_t = (target * probabilities) + ((1 - target) * (1 - probabilities))
    modulating = 1.0
    if loss.focal_gamma:
        modulating = tf.pow(1.0 - p_t, loss.focal_gamma)
    alpha_weight = 1.0
    if loss.focal_alpha is not None:
        alpha_weight = target * loss.focal_alpha + (1 - target) * (1 - loss.focal_alpha)
    return modulating * alpha_weight * cross_entropy * weights


def _hard_example_miner(location_losses, cls_losses, decoded_boxes, matches, loss):
    """`HardExampleMiner.__call__`: the localization and classification losses summed over each
    image's mined anchors. `location_losses`, `cls_losses` [B, A]; `decoded_boxes` [B, A, 4];
    `matches` [B, A]."""
    miner = loss.hard_example_miner
    num_hard_examples = miner.num_hard_examples if miner.num_hard_examples > 0 else None
    max_negatives_per_positive = miner.max_negatives_per_positive if miner.max_negatives_per_positive > 0 else None
    location_losses = tf.unstack(location_losses)
    cls_losses = tf.unstack(cls_losses)
    mined_location, mined_cls = [], []
    for i, boxes in enumerate(tf.unstack(decoded_boxes)):
        image_losses = cls_losses[i]
        if miner.loss_type == "LOCALIZATION":
            image_losses = location_losses[i]
        elif miner.loss_type == "BOTH":
            image_losses *= loss.classification_weight
            image_losses += location_losses[i] * loss.localization_weight
        count = num_hard_examples if num_hard_examples is not None else tf.shape(boxes)[0]
        selected = tf.image.non_max_suppression(boxes, image_losses, count, miner.iou_threshold)
        if max_negatives_per_positive is not None:
            selected = _subsample(selected, matches[i], float(max_negatives_per_positive),
                                  miner.min_negatives_per_image)
        mined_location.append(tf.reduce_sum(tf.gather(location_losses[i], selected)))
        mined_cls.append(tf.reduce_sum(tf.gather(cls_losses[i], selected)))
    return tf.reduce_sum(tf.stack(mined_location)), tf.reduce_sum(tf.stack(mined_cls))


def _subsample(indices, matches, max_negatives_per_positive, min_negatives_per_image):
    """`HardExampleMiner._subsample_selection_to_desired_neg_pos_ratio` (the selected indices only)."""
    positives = tf.gather(tf.greater_equal(matches, 0), indices)
    negatives = tf.gather(tf.equal(matches, _UNMATCHED), indices)
    num_positives = tf.reduce_sum(tf.cast(positives, tf.int32))
    max_negatives = tf.maximum(min_negatives_per_image,
                               tf.cast(max_negatives_per_positive * tf.cast(num_positives, tf.float32), tf.int32))
    top_negatives = tf.less_equal(tf.cumsum(tf.cast(negatives, tf.int32)), max_negatives)
    kept = tf1.where(tf.logical_or(positives, top_negatives))
    return tf.reshape(tf.gather(indices, kept), [-1])


def _ssd_loss(box_encodings, class_logits, anchors, boxes_list, classes_list, training):
    """`SSDMetaArch.loss`: {LOCALIZATION_LOSS, CLASSIFICATION_LOSS} scalars."""
    loss = training.loss
    slots = class_logits.shape.as_list()[-1]
    if training.encode_background_as_zeros:
        unmatched_class_label = tf.constant(slots * [0], tf.float32)
    else:
        unmatched_class_label = tf.constant([1] + (slots - 1) * [0], tf.float32)
    if training.add_background_class:
        classes_list = [tf.pad(c, [[0, 0], [1, 0]], mode="CONSTANT") for c in classes_list]
    per_image = [_assign(anchors, boxes, classes, tf.ones([tf.shape(boxes)[0]]), unmatched_class_label, training)
                 for boxes, classes in zip(boxes_list, classes_list)]
    cls_targets, cls_weights, reg_targets, reg_weights, matches = (tf.stack(t) for t in zip(*per_image))
    location_losses = _localization_losses(box_encodings, reg_targets, reg_weights, loss)
    cls_losses = _classification_losses(class_logits, cls_targets, cls_weights, loss)
    if len(cls_losses.shape) > 2:  # ops.reduce_sum_trailing_dimensions(cls_losses, ndims=2)
        cls_losses = tf.reduce_sum(cls_losses, axis=2)
    if loss.hard_example_miner is not None:
        decoded = builder._decode(box_encodings, anchors, training.box_coder_scales)  # SSDMetaArch._batch_decode
        localization_loss, classification_loss = _hard_example_miner(location_losses, cls_losses, decoded,
                                                                     tf.unstack(matches), loss)
    else:
        localization_loss = tf.reduce_sum(location_losses)
        classification_loss = tf.reduce_sum(cls_losses)
    normalizer = tf.constant(1.0, dtype=tf.float32)
    if training.normalize_loss_by_num_matches:
        normalizer = tf.maximum(tf.cast(tf.reduce_sum(reg_weights), tf.float32), 1.0)
    localization_normalizer = normalizer
    if training.normalize_loc_loss_by_codesize:
        localization_normalizer *= 4
    return {
        LOCALIZATION_LOSS: tf.multiply(loss.localization_weight / localization_normalizer, localization_loss,
                                       name="localization_loss"),
        CLASSIFICATION_LOSS: tf.multiply(loss.classification_weight / normalizer, classification_loss,
                                         name="classification_loss"),
    }


# ---- optimiser (builders/optimizer_builder.py, utils/learning_schedules.py) ----

def _learning_rate(config, global_step):
    """The rate of a `LearningRateConfig` at `global_step`: constant, exponential decay with burn-in,
    or cosine decay with warm-up."""
    if config.kind == "cosine_decay_learning_rate":
        return _cosine_decay_with_warmup(global_step, config["learning_rate_base"], config["total_steps"],
                                         config["warmup_learning_rate"], config["warmup_steps"],
                                         config["hold_base_rate_steps"])
    if config.kind == "constant_learning_rate":
        return tf.constant(config["learning_rate"], dtype=tf.float32, name="learning_rate")
    if config.kind == "exponential_decay_learning_rate":
        base, burnin_rate, burnin_steps = (config["initial_learning_rate"], config["burnin_learning_rate"],
                                           config["burnin_steps"])
        if burnin_rate == 0:
            burnin_rate = base
        post_burnin = tf1.train.exponential_decay(base, global_step - burnin_steps, config["decay_steps"],
                                                  config["decay_factor"], staircase=config["staircase"])
        return tf.maximum(tf1.where(tf.less(tf.cast(global_step, tf.int32), tf.constant(burnin_steps)),
                                   tf.constant(burnin_rate), post_burnin),
                          config["min_learning_rate"], name="learning_rate")
    raise NotImplementedError(f"learning rate {config.kind}: only constant, exponential and cosine decay are built")


def _cosine_decay_with_warmup(global_step, learning_rate_base, total_steps, warmup_learning_rate, warmup_steps,
                              hold_base_rate_steps):
    """`learning_schedules.cosine_decay_with_warmup` (graph mode): its ops, Python numbers where it has them."""
    learning_rate = 0.5 * learning_rate_base * (1 + tf.cos(
        np.pi * (tf.cast(global_step, tf.float32) - warmup_steps - hold_base_rate_steps)
        / float(total_steps - warmup_steps - hold_base_rate_steps)))
    if hold_base_rate_steps > 0:
        learning_rate = tf1.where(global_step > warmup_steps + hold_base_rate_steps, learning_rate,
                                  learning_rate_base)
    if warmup_steps > 0:
        slope = (learning_rate_base - warmup_learning_rate) / warmup_steps
        warmup_rate = slope * tf.cast(global_step, tf.float32) + warmup_learning_rate
        learning_rate = tf1.where(global_step < warmup_steps, warmup_rate, learning_rate)
    return tf1.where(global_step > total_steps, 0.0, learning_rate, name="learning_rate")


def _optimizer(config, learning_rate):
    if config.kind == "rms_prop_optimizer":
        return tf1.train.RMSPropOptimizer(learning_rate, decay=config.decay, momentum=config.momentum,
                                          epsilon=config.epsilon)
    if config.kind == "momentum_optimizer":
        return tf1.train.MomentumOptimizer(learning_rate, momentum=config.momentum)
    if config.kind == "adam_optimizer":
        return tf1.train.AdamOptimizer(learning_rate)
    raise ValueError(f"unknown optimizer {config.kind!r}")


# ---- the step ----

@dataclass
class TrainingStep:
    """A built TF1 training-step graph.

    Attributes:
      graph: the `tf.Graph`.
      inputs: placeholders {"image": float32 [B, h, w, 3] preprocessed images, "boxes": float32
        [B, M, 4] groundtruth boxes (rows past `num_boxes` are ignored), "classes": int32 [B, M]
        1-based classes, "num_boxes": int32 [B]}.
      losses: {LOCALIZATION_LOSS, CLASSIFICATION_LOSS, REGULARIZATION_LOSS (when regularised), TOTAL_LOSS}.
      regularization_terms: {TF1 kernel name: its term of REGULARIZATION_LOSS}, every regularised kernel
        (empty without `add_regularization_loss`).
      gradients: {TF1 variable name: the unclipped gradient of the total loss}, every trainable
        variable the loss depends on (PPN's unused Conv2d_12/13 kernels through the regulariser
        only; their batch norm's gamma and beta not at all).
      train_op: runs the batch-norm updates, the optimiser update and the moving average.
      variables: {TF1 name: variable}, the model's (trainable and moving statistics).
      averages: {TF1 name: its `ExponentialMovingAverage` shadow}, empty without a moving average.
      global_step, learning_rate: tensors.
    """

    graph: tf.Graph
    inputs: dict
    losses: dict
    regularization_terms: dict
    gradients: dict
    train_op: object
    variables: dict
    averages: dict
    global_step: object
    learning_rate: object


def build_training_step(config: SSDConfig, training, batch_size: int, max_boxes: int) -> TrainingStep:
    """The TF1 graph of one training step (see the module docstring).

    Args:
      config: the model's `SSDConfig`.
      training: a `train_config.TrainingConfig` (its fields are read).
      batch_size: images per step (B); max_boxes: groundtruth rows per image (M).
    Raises:
      NotImplementedError: frozen batch norm, or a learning-rate schedule not built here.
    """
    blocks = (training.feature_extractor_hyperparams, training.box_predictor_hyperparams)
    if training.freeze_batchnorm or any(b.batch_norm is not None and not b.batch_norm.train for b in blocks):
        raise NotImplementedError("frozen batch norm is not built by the TF1 training step")
    groups = layer_training(training)
    graph = tf.Graph()
    with graph.as_default(), builder._v1_control_flow(), warnings.catch_warnings(), \
            tf1.variable_scope(tf1.get_variable_scope(), use_resource=False):
        warnings.filterwarnings("ignore", message="`layer.apply` is deprecated")
        global_step = tf1.train.get_or_create_global_step()
        h, w = config.image_height, config.image_width
        inputs = {"image": tf1.placeholder(tf.float32, [batch_size, h, w, 3], name="image"),
                  "boxes": tf1.placeholder(tf.float32, [batch_size, max_boxes, 4], name="groundtruth_boxes"),
                  "classes": tf1.placeholder(tf.int32, [batch_size, max_boxes], name="groundtruth_classes"),
                  "num_boxes": tf1.placeholder(tf.int32, [batch_size], name="num_groundtruth_boxes")}
        feature_maps = builder._feature_maps(inputs["image"], config, {BASE: groups[BASE], EXTRA: groups[EXTRA]})
        shapes = [tuple(f.shape.as_list()[1:3]) for f in feature_maps]
        anchors = builder._anchors(config, shapes, h, w)
        boxes, classes = builder._box_predictor(feature_maps, anchor_generators.anchors_per_location(config), config,
                                                groups[BOX_PREDICTOR])
        box_encodings = tf.squeeze(tf.concat(boxes, axis=1), axis=2)
        class_logits = tf.concat(classes, axis=1)
        # model_lib's unstack_batch: each image's groundtruth without its padding rows; the input
        # pipeline's one-hot classes (label_id_offset 1).
        boxes_list, classes_list = [], []
        for i in range(batch_size):
            n = inputs["num_boxes"][i]
            boxes_list.append(inputs["boxes"][i, :n])
            classes_list.append(tf.one_hot(inputs["classes"][i, :n] - 1, training.num_classes))
        with tf1.name_scope("Loss"):
            losses = _ssd_loss(box_encodings, class_logits, anchors, boxes_list, classes_list, training)
        terms = [losses[LOCALIZATION_LOSS], losses[CLASSIFICATION_LOSS]]
        # Each term made a tensor once: slim's depthwise kernels' terms come as `_LazyEvalTensor`s,
        # which build a new `l2_loss` op every time they are used, so a term fetched on its own
        # would be another op than the one summed here, read outside the step's order.
        regularization = [tf.convert_to_tensor(t) for t in tf1.losses.get_regularization_losses()]
        regularization_terms = {}
        if training.train.add_regularization_loss and regularization:
            losses[REGULARIZATION_LOSS] = tf.add_n(regularization, name="regularization_loss")
            terms.append(losses[REGULARIZATION_LOSS])
            regularization_terms = {_regularized_variable(t): t for t in regularization}
        losses[TOTAL_LOSS] = tf.add_n(terms, name="total_loss")
        train_op, gradients, averages, learning_rate = _train_op(losses[TOTAL_LOSS], training, global_step)
        model = [v for v in tf1.global_variables()
                 if v.op.name.startswith(("FeatureExtractor/", "BoxPredictor_", "WeightSharedConvolutionalBoxPredictor/"))
                 and "/ExponentialMovingAverage" not in v.op.name and not _is_slot(v)]
    return TrainingStep(graph, inputs, losses, regularization_terms, gradients, train_op, {v.op.name: v for v in model},
                        averages, global_step, learning_rate)


def _regularized_variable(term) -> str:
    """The name of the variable whose regulariser made `term` (slim's `scale * l2_loss(read)`; the
    term's own name follows the op scope, which is not the variable's)."""
    pending, seen = [term.op], set()
    while pending:
        op = pending.pop()
        if op.type in ("VariableV2", "VarHandleOp"):
            return op.name
        if op.name not in seen:
            seen.add(op.name)
            pending.extend(t.op for t in op.inputs)
    raise ValueError(f"{term.name} reads no variable")


def _is_slot(variable) -> bool:
    return variable.op.name.rsplit("/", 1)[-1] in ("RMSProp", "RMSProp_1", "Momentum", "Adam", "Adam_1")


def _clip_by_global_norm(grads_and_vars, max_norm):
    """`optimize_loss`'s clipping for a float `clip_gradients`: every gradient scaled by
    max_norm / max(global norm, max_norm), the global norm over all of them."""
    grads, variables = zip(*grads_and_vars)
    clipped, _ = tf.clip_by_global_norm(list(grads), max_norm)
    return list(zip(clipped, variables))


def _train_op(total_loss, training, global_step):
    """`slim.learning.create_train_op`'s order: update ops, gradients, clipping, update, average."""
    optimizer_config = training.train.optimizer
    learning_rate = _learning_rate(optimizer_config.learning_rate, global_step)
    optimizer = _optimizer(optimizer_config, learning_rate)
    update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        barrier = tf.no_op(name="update_barrier")
    with tf.control_dependencies([barrier]):
        total_loss = tf.identity(total_loss)
    trainable = tf1.trainable_variables()
    grads_and_vars = optimizer.compute_gradients(total_loss, trainable, gate_gradients=tf1.train.Optimizer.GATE_GRAPH)
    gradients = {v.op.name: g for g, v in grads_and_vars if g is not None}
    if training.train.gradient_clipping_by_norm > 0:
        with tf1.name_scope("clip_grads"):
            grads_and_vars = _clip_by_global_norm(grads_and_vars, training.train.gradient_clipping_by_norm)
    # The losses read the weights too (the regularizer's `l2_loss(weights)` is no ancestor of any
    # gradient: the gradient of a sum needs no forward value), so without this the session may
    # run a loss's read of a ref variable after its in-place update (or, on several inter-op
    # threads, during it) and report a regularization loss of weights partly updated (the likely
    # cause of a second step's 1.6e-5 relative from the TF2 trainer's, seen once on a 2-core Xeon).
    with tf.control_dependencies([total_loss]):
        update = optimizer.apply_gradients(grads_and_vars, global_step=global_step)
    averages = {}
    if optimizer_config.use_moving_average:
        average = tf1.train.ExponentialMovingAverage(optimizer_config.moving_average_decay)
        with tf.control_dependencies([update]):
            average_op = average.apply([v for g, v in grads_and_vars if g is not None])
        averages = {v.op.name: average.average(v) for g, v in grads_and_vars if g is not None}
        update = tf.group(update, average_op, name="train_with_avg")
    # create_train_op's train tensor: the loss that waits for the update ops, after the update.
    with tf.control_dependencies([update]):
        train_op = tf.identity(total_loss, name="train_op")
    return train_op, gradients, averages, learning_rate


class TrainingSession:
    """A session over a `TrainingStep` with given starting weights.

    Args:
      step: a `TrainingStep`.
      weights: {TF1 variable name: ndarray} for every model variable (e.g.
        `builder.synthetic_weights`); the moving-average shadows start at the same values, the
        optimiser slots at their TF1 initial values (RMSProp's `rms` at 1), `global_step` at 0.
    """

    def __init__(self, step: TrainingStep, weights: dict):
        self.step = step
        missing = sorted(set(step.variables) - set(weights))
        if missing:
            raise ValueError(f"{len(missing)} model variables have no value: {', '.join(missing[:8])}")
        config = tf1.ConfigProto()
        # Grappler off: the graph computes what its ops say (no rewrite that changes rounding),
        # and the large training graph is not optimised anew for every run signature.
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        self.session = tf1.Session(graph=step.graph, config=config)
        # One run of every initializer, the model variables' and shadows' initial values fed:
        # each distinct run signature prunes and optimises the whole graph anew.
        feed = {}
        for name, var in step.variables.items():
            for target in (var, step.averages.get(name)):
                if target is not None:
                    feed[target.initializer.inputs[1]] = np.asarray(weights[name], np.float32)
        with step.graph.as_default():
            self.session.run(tf1.global_variables_initializer(), feed)

    def run_step(self, batch: dict) -> dict:
        """One step on `batch` ({"image", "boxes", "classes", "num_boxes"} arrays).

        Returns {"losses": {name: float32}, "regularization_terms": {TF1 kernel name: float32},
        "gradients": {TF1 name: ndarray}} of the weights before the update.
        """
        feed = {self.step.inputs[k]: np.asarray(batch[k]) for k in self.step.inputs}
        out = self.session.run({"losses": self.step.losses, "regularization_terms": self.step.regularization_terms,
                                "gradients": self.step.gradients, "train": self.step.train_op}, feed)
        return {k: out[k] for k in ("losses", "regularization_terms", "gradients")}

    def values(self) -> dict:
        """{TF1 name: ndarray} of the model variables now."""
        return self.session.run(self.step.variables)

    def averages(self) -> dict:
        """{TF1 name: ndarray} of the moving-average shadows now."""
        return self.session.run(self.step.averages)

    def close(self) -> None:
        self.session.close()
