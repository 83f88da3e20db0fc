"""The TF1 Object Detection API's SSD MobileNet v1 inference graph (plain, FPN or PPN), rebuilt from an
`SSDConfig`.

A second, independent implementation of what `ssd_mobilenet` computes in Keras: a
`tf.compat.v1` graph built the way the OD API exporter built it (tf-slim convolutions,
`map_fn` over images, per-class NMS unrolled over classes), with the exported node and
variable names, so everything that reads real exports (`migrate.tf1.graph_traits`,
`migrate.tf1.frozen_graph.endpoint_candidates`, `migrate.tf1.sources`) reads it too. It gives tests and
new users a real TF1 model on any machine, and gives `verify` a graph for a checkpoint that
came without one.

Which OD API release a graph imitates follows the config's graph-version fields:
`nms_variant` (`clip_before_nms`: the 2018 zoo post-processing with `FilterGreaterThan` and
NonMaxSuppressionV2; `clip_after_sort`: the TF 1.9+ one with NonMaxSuppressionV3 and clipping
after the sort), `fused_batch_norm`, `pad_extra_layers_to_even` (2017 zero-padding by
concatenation), `interpolated_anchor_after_unit_ratio` (2017 anchor order), `background_slice`
(2017: the background column sliced off the logits before the score conversion) and
`normalize_before_resize` (later OD API code: the image scaled to [-1, 1] before the resize loop).

The feature extractor, box predictor and anchor generator follow the config's types as the OD
API's builders choose them: `ssd_mobilenet_v1` (`_feature_maps`), `_fpn` (`_fpn_feature_maps`,
`feature_map_generators.fpn_top_down_feature_maps`), `_ppn` (`_ppn_feature_maps`,
`pooling_pyramid_feature_maps`); `convolutional_box_predictor` (`_box_predictor`) or
`weight_shared_convolutional_box_predictor` (`_weight_shared_box_predictor`);
`ssd_anchor_generator` (`_anchors`) or `multiscale_anchor_generator` (`_multiscale_anchors`).
FPN's x2 upsampling is `ops.nearest_neighbor_upsampling` in its 2019+ form (`w_stack`, `h_stack`)
or, with `fpn_upsampling="ones"`, its 2018 one (a reshape times ones).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import warnings

from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tf_slim as slim
from tensorflow.python.training import moving_averages

from ssd_mobilenet import anchor_generators
from ssd_mobilenet.config.pipeline_writer import to_pipeline_config
from ssd_mobilenet.config.ssd_config import BACKGROUND_SLICE_LOGITS, NMS_CLIP_BEFORE, SSDConfig
from ssd_mobilenet.config.type_names import (MULTISCALE_ANCHORS, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN,
                                             WEIGHT_SHARED)
from ssd_mobilenet.detections import DETECTION_OUTPUTS

tf1 = tf.compat.v1

# slim's mobilenet_v1 `MOBILENETV1_CONV_DEFS`: (layer index, kind, stride, depth at multiplier 1), kernel 3.
_CONV_DEFS = ((0, "conv", 2, 32), (1, "sep", 1, 64), (2, "sep", 2, 128), (3, "sep", 1, 128),
              (4, "sep", 2, 256), (5, "sep", 1, 256), (6, "sep", 2, 512), (7, "sep", 1, 512),
              (8, "sep", 1, 512), (9, "sep", 1, 512), (10, "sep", 1, 512), (11, "sep", 1, 512),
              (12, "sep", 2, 1024), (13, "sep", 1, 1024))
# ssd_mobilenet_v1_fpn's `_create_modified_mobilenet_config`, with use_depthwise.
_FPN_DEPTHWISE_CONV_DEFS = _CONV_DEFS[:12] + ((12, "sep", 2, 512), (13, "sep", 1, 256))
# ssd_mobilenet_v1_fpn's feature_blocks: the MobileNet layer of each FPN level 2..5.
_FPN_BLOCKS = {2: "Conv2d_3_pointwise", 3: "Conv2d_5_pointwise", 4: "Conv2d_11_pointwise", 5: "Conv2d_13_pointwise"}
FPN_UPSAMPLINGS = ("stack", "ones")
# ssd_mobilenet_v1_feature_extractor's feature_map_layout.
_FROM_LAYER = ("Conv2d_11_pointwise", "Conv2d_13_pointwise", "", "", "", "")
_LAYER_DEPTH = (-1, -1, 512, 256, 256, 128)
_BOX_CODE_SIZE = 4
_GLOBAL_STEP = "global_step"
# Layer groups of `LayerTraining` settings: the 14 MobileNet layers, the extra layers, the box predictor.
BASE, EXTRA, BOX_PREDICTOR = "base", "extra", "box_predictor"


# ---- graph construction -------------------------------------------------------------------

@contextlib.contextmanager
def _v1_control_flow():
    """Builds `map_fn` loops as TF1 while loops (Enter/Exit nodes in the GraphDef).

    With TF2's default control flow v2 the loop bodies would live in the function library,
    where `graph_traits` (which scans `graph_def.node`) would not see the resize op or the
    per-class NMS scopes the real exports have. `tf.function` graphs use v2 regardless.
    """
    was_v2 = tf1.control_flow_v2_enabled()
    tf1.disable_control_flow_v2()
    try:
        yield
    finally:
        if was_v2:
            tf1.enable_control_flow_v2()


def _batch_norm_variables(inputs):
    """gamma, beta, moving_mean, moving_variance [C] of slim's batch norm, in slim's order."""
    channels = int(inputs.shape[-1])
    gamma = tf1.get_variable("gamma", [channels], initializer=tf1.ones_initializer())
    beta = tf1.get_variable("beta", [channels], initializer=tf1.zeros_initializer())
    mean = tf1.get_variable("moving_mean", [channels], initializer=tf1.zeros_initializer(), trainable=False)
    variance = tf1.get_variable("moving_variance", [channels], initializer=tf1.ones_initializer(), trainable=False)
    return gamma, beta, mean, variance


def _batch_norm_fn(epsilon: float, fused: bool):
    """A slim `normalizer_fn` for inference batch norm with slim's variable names.

    Not `slim.batch_norm`: under TF 2.x it builds through `tf.compat.v1.layers`, which needs
    the tf-keras package and fails without it. The zoo graphs hold one of two forms, and
    they round differently (~1e-6 relative), so this computes whichever the config asks for:
    the unfused op sequence of the 2018 zoo graph (`BatchNorm/batchnorm/add`, `Rsqrt`, `mul`,
    ... as `tf.nn.batch_normalization` writes it) or the `FusedBatchNorm` kernel of newer ones.
    """
    def batch_norm(inputs, scope=None):
        with tf1.variable_scope(scope, "BatchNorm", [inputs]):
            gamma, beta, mean, variance = _batch_norm_variables(inputs)
            if fused:
                outputs, _, _ = tf1.nn.fused_batch_norm(inputs, gamma, beta, mean=mean, variance=variance,
                                                        epsilon=epsilon, is_training=False)
                return outputs
            return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, epsilon)
    return batch_norm


def _training_batch_norm_fn(epsilon: float, fused: bool, decay: float, inplace_update: bool = False):
    """A slim `normalizer_fn` for batch norm in training mode, as `slim.batch_norm(is_training=True)`
    built it (its source's op sequence; slim itself needs tf-keras, see `_batch_norm_fn`).

    The output is normalised with the batch's statistics: unfused, `tf.nn.moments` over N, H, W
    (population variance) into `tf.nn.batch_normalization`; fused, the `FusedBatchNorm` kernel in
    training mode, whose returned variance (Bessel-corrected) is what the moving update used. The
    moving statistics move by `assign_moving_average(moving, batch, decay, zero_debias=False)`
    with `decay` a Python float (so `1 - decay` is a float64 difference). Those update ops go to
    the `UPDATE_OPS` collection for the train op to run, as slim's default `updates_collections`
    did; with `inplace_update` (`updates_collections=None`, the OD API's
    `inplace_batchnorm_update`) they run inside the layer instead, before its output (slim's
    `_force_updates`: the unfused statistics, the fused output, passed through an identity that
    depends on the updates).
    """
    def batch_norm(inputs, scope=None):
        with tf1.variable_scope(scope, "BatchNorm", [inputs]):
            gamma, beta, moving_mean, moving_variance = _batch_norm_variables(inputs)
            if fused:
                outputs, mean, variance = tf1.nn.fused_batch_norm(inputs, gamma, beta, epsilon=epsilon,
                                                                  is_training=True)
            else:
                mean, variance = tf.nn.moments(inputs, [0, 1, 2])
            updates = [moving_averages.assign_moving_average(moving, batch, decay, zero_debias=False)
                       for moving, batch in ((moving_mean, mean), (moving_variance, variance))]
            if not inplace_update:
                for update in updates:
                    tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, update)
            elif fused:
                with tf.control_dependencies(updates):
                    outputs = tf.identity(outputs)
            else:
                with tf.control_dependencies(updates):
                    mean, variance = tf.identity(mean), tf.identity(variance)
            if not fused:
                outputs = tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, epsilon)
            return outputs
    return batch_norm


class LayerTraining(NamedTuple):
    """Training settings of one layer group (the MobileNet layers, the extra layers, the box
    predictor): its batch norm's decay, its slim `l2_regularizer` scale (0.0: none), and whether
    batch norm updates its moving statistics in place (`inplace_batchnorm_update`)."""

    batch_norm_decay: float
    l2_weight: float
    inplace_update: bool = False


def _conv_arg_scope(epsilon: float, fused: bool, training: "LayerTraining | None" = None):
    """The OD API conv_hyperparams: conv -> batch norm -> ReLU6, SAME padding. With `training`,
    batch norm in training mode and `slim.l2_regularizer` on every conv and separable conv's
    weights (the depthwise ones included: slim's `separable_conv2d(num_outputs=None)` hands its
    `weights_regularizer` to `depthwise_weights`), which puts each layer's loss in the
    `REGULARIZATION_LOSSES` collection as it creates the variable."""
    if training is None:
        return slim.arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=tf.nn.relu6,
                              normalizer_fn=_batch_norm_fn(epsilon, fused), padding="SAME",
                              weights_initializer=tf1.truncated_normal_initializer(stddev=0.03))
    return slim.arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=tf.nn.relu6,
                          normalizer_fn=_training_batch_norm_fn(epsilon, fused, training.batch_norm_decay,
                                                                training.inplace_update),
                          padding="SAME", weights_initializer=tf1.truncated_normal_initializer(stddev=0.03),
                          weights_regularizer=slim.l2_regularizer(training.l2_weight))


def _fixed_padding(inputs, kernel_size: int):
    """`use_explicit_padding`: symmetric padding by the kernel (extra at the end), then VALID."""
    beg = (kernel_size - 1) // 2
    end = kernel_size - 1 - beg
    return tf.pad(inputs, [[0, 0], [beg, end], [beg, end], [0, 0]])


def _pad_to_even(inputs):
    """2017 OD API `ops.pad_to_multiple(x, 2)`: zero rows, then zero columns, by concatenation."""
    shape = tf.shape(inputs)
    batch, height, width = shape[0], shape[1], shape[2]
    depth = int(inputs.shape[-1])
    padded_height, padded_width = height + height % 2, width + width % 2
    net = tf.concat([inputs, tf.zeros(tf.stack([batch, padded_height - height, width, depth]))], 1)
    return tf.concat([net, tf.zeros(tf.stack([batch, padded_height, padded_width - width, depth]))], 2)


def _pad_to_multiple(inputs, multiple: int):
    """OD API `ops.pad_to_multiple` on a statically shaped input (the resized image): zero rows,
    then zero columns, concatenated; `tf.zeros` of [batch, rows, width, depth], the batch read
    at run time unless static (nodes `zeros`, `concat`, `zeros_1`, `concat_1`)."""
    batch, height, width, depth = inputs.shape.as_list()
    padded_height, padded_width = -(-height // multiple) * multiple, -(-width // multiple) * multiple
    if batch is None:  # a static batch (TFLite exports: 1) makes the zeros a constant shape
        batch = tf.shape(inputs)[0]
    if padded_height != height:
        inputs = tf.concat([inputs, tf.zeros([batch, padded_height - height, width, depth])], 1)
    if padded_width != width:
        inputs = tf.concat([inputs, tf.zeros([batch, padded_height, padded_width - width, depth])], 2)
    return inputs


def _depth_fn(config: SSDConfig):
    return lambda d: max(int(d * config.depth_multiplier), config.min_depth)


def _mobilenet_v1_base(inputs, config: SSDConfig, scope, conv_defs=_CONV_DEFS):
    """slim's `mobilenet_v1_base` up to `Conv2d_13_pointwise`; returns its end points.

    Re-entering `scope` (a VariableScope) opens a second `MobilenetV1` name scope, as in the
    exports: ops under `FeatureExtractor/MobilenetV1/MobilenetV1/`, variables one level up.
    """
    depth = _depth_fn(config)
    padding = "VALID" if config.use_explicit_padding else "SAME"
    end_points = {}
    with tf1.variable_scope(scope, "MobilenetV1", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
            net = inputs
            for i, kind, stride, d in conv_defs:
                if config.use_explicit_padding:
                    net = _fixed_padding(net, 3)
                if kind == "conv":
                    net = slim.conv2d(net, depth(d), [3, 3], stride=stride, scope=f"Conv2d_{i}")
                    end_points[f"Conv2d_{i}"] = net
                    continue
                net = slim.separable_conv2d(net, None, [3, 3], depth_multiplier=1, stride=stride,
                                            scope=f"Conv2d_{i}_depthwise")
                end_points[f"Conv2d_{i}_depthwise"] = net
                net = slim.conv2d(net, depth(d), [1, 1], stride=1, padding="SAME", scope=f"Conv2d_{i}_pointwise")
                end_points[f"Conv2d_{i}_pointwise"] = net
    return end_points


def _feature_maps(preprocessed, config: SSDConfig, training: "dict | None" = None,
                  fpn_upsampling: str = "stack") -> list:
    """The config's feature extractor (scope `FeatureExtractor/MobilenetV1`): its feature maps.

    `ssd_mobilenet_v1`: 6 maps. Base maps are Conv2d_11_pointwise and Conv2d_13_pointwise; each
    extra map is a 1x1 conv to half depth and a 3x3 stride-2 conv
    (`multi_resolution_feature_maps`, insert_1x1_conv). FPN and PPN: `_fpn_feature_maps`,
    `_ppn_feature_maps`.
    `training`: None (inference) or {BASE: LayerTraining, EXTRA: LayerTraining} for the 14
    MobileNet layers and the layers after them.
    """
    if config.feature_extractor_type == SSD_MOBILENET_V1_FPN:
        return _fpn_feature_maps(preprocessed, config, training, fpn_upsampling)
    if config.feature_extractor_type == SSD_MOBILENET_V1_PPN:
        return _ppn_feature_maps(preprocessed, config, training)
    training = training or {}
    depth = _depth_fn(config)
    net = preprocessed
    with tf1.variable_scope("FeatureExtractor", values=[net]):
        with tf1.variable_scope("MobilenetV1") as scope:
            if config.pad_to_multiple > 1:
                net = _pad_to_multiple(net, config.pad_to_multiple)
            with _conv_arg_scope(config.base_batch_norm_epsilon, config.fused_batch_norm, training.get(BASE)):
                end_points = _mobilenet_v1_base(net, config, scope)
            with _conv_arg_scope(config.batch_norm_epsilon, config.fused_batch_norm, training.get(EXTRA)):
                maps, base = [], ""
                for index, (from_layer, layer_depth) in enumerate(zip(_FROM_LAYER, _LAYER_DEPTH)):
                    if from_layer:
                        maps.append(end_points[from_layer])
                        base = from_layer
                        continue
                    net = slim.conv2d(maps[-1], depth(layer_depth / 2), [1, 1], stride=1,
                                      scope=f"{base}_1_Conv2d_{index}_1x1_{depth(layer_depth / 2)}")
                    name = f"{base}_2_Conv2d_{index}_3x3_s2_{depth(layer_depth)}"
                    padding = "SAME"
                    if config.pad_extra_layers_to_even:
                        net = _pad_to_even(net)
                    if config.use_explicit_padding:
                        padding = "VALID"
                        net = _fixed_padding(net, 3)
                    if config.use_depthwise:
                        net = slim.separable_conv2d(net, None, [3, 3], depth_multiplier=1, stride=2,
                                                    padding=padding, scope=name + "_depthwise")
                        net = slim.conv2d(net, depth(layer_depth), [1, 1], stride=1, scope=name)
                    else:
                        net = slim.conv2d(net, depth(layer_depth), [3, 3], stride=2, padding=padding, scope=name)
                    maps.append(net)
    return maps


def _nearest_neighbor_upsampling(x, form: str):
    """`ops.nearest_neighbor_upsampling(x, 2)`: [N, H, W, C] -> [N, 2H, 2W, C], in the 2019+ form
    (`w_stack` and `h_stack`, each then reshaped) or the 2018 one (reshape to [N, H, 1, W, 1, C]
    times ones [1, 1, 2, 1, 2, 1], reshape)."""
    with tf1.name_scope("nearest_neighbor_upsampling"):
        n, h, w, c = _static_or_dynamic_shape(x)
        if form == "ones":
            y = tf.reshape(x, [n, h, 1, w, 1, c]) * tf.ones([1, 1, 2, 1, 2, 1], dtype=x.dtype)
            return tf.reshape(y, [n, h * 2, w * 2, c])
        y = tf.reshape(tf.stack([x] * 2, axis=3, name="w_stack"), [n, h, w * 2, c])
        return tf.reshape(tf.stack([y] * 2, axis=2, name="h_stack"), [n, h * 2, w * 2, c])


def _fpn_feature_maps(preprocessed, config: SSDConfig, training: "dict | None" = None,
                      upsampling: str = "stack") -> list:
    """`ssd_mobilenet_v1_fpn` (scope `FeatureExtractor/MobilenetV1`, the pyramid's variables under
    `fpn/`, its top-down ops under `fpn/top_down/`): one map per level fpn_min_level..max_level.

    MobileNet v1 (to Conv2d_13_pointwise whatever the levels; with use_depthwise its last two blocks
    shallower), then `fpn_top_down_feature_maps` over the tapped layers: `projection_<n>` of the
    coarsest (1x1, bias, linear), each finer level its projection plus the coarser map upsampled
    x2 (cropped to the projection's size with explicit padding), smoothed by `smoothing_<k>`
    (3x3 conv -> BN -> ReLU6); levels above 5 are `bottom_up_Conv2d_<14..>` (3x3 stride 2) from
    the coarsest map. With use_depthwise the 3x3 convs are separable.
    """
    if upsampling not in FPN_UPSAMPLINGS:
        raise ValueError(f"fpn_upsampling must be one of {', '.join(FPN_UPSAMPLINGS)}, got {upsampling!r}")
    training = training or {}
    depth_fn = _depth_fn(config)
    depth = depth_fn(config.fpn_additional_layer_depth)
    conv_defs = _FPN_DEPTHWISE_CONV_DEFS if config.use_depthwise else _CONV_DEFS
    top = min(config.fpn_max_level, 5)
    padding = "VALID" if config.use_explicit_padding else "SAME"
    if config.use_depthwise:
        conv3x3 = lambda *args, **kwargs: slim.separable_conv2d(*args, depth_multiplier=1, **kwargs)  # noqa: E731
    else:
        conv3x3 = slim.conv2d
    net = preprocessed
    with tf1.variable_scope("FeatureExtractor", values=[net]):
        with tf1.variable_scope("MobilenetV1") as scope:
            if config.pad_to_multiple > 1:
                net = _pad_to_multiple(net, config.pad_to_multiple)
            with _conv_arg_scope(config.base_batch_norm_epsilon, config.fused_batch_norm, training.get(BASE)):
                end_points = _mobilenet_v1_base(net, config, scope, conv_defs)
            features = [end_points[_FPN_BLOCKS[level]] for level in range(config.fpn_min_level, top + 1)]
            with _conv_arg_scope(config.batch_norm_epsilon, config.fused_batch_norm, training.get(EXTRA)), \
                    tf1.variable_scope("fpn"):
                n = len(features)
                with tf1.name_scope("top_down"), slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                                                                padding=padding, stride=1):
                    top_down = slim.conv2d(features[-1], depth, [1, 1], activation_fn=None, normalizer_fn=None,
                                           scope=f"projection_{n}")
                    maps = [top_down]
                    for level in reversed(range(n - 1)):
                        top_down = _nearest_neighbor_upsampling(top_down, upsampling)
                        residual = slim.conv2d(features[level], depth, [1, 1], activation_fn=None,
                                               normalizer_fn=None, scope=f"projection_{level + 1}")
                        if config.use_explicit_padding:
                            shape = tf.shape(residual)
                            top_down = top_down[:, :shape[1], :shape[2], :]
                        top_down += residual
                        pre = _fixed_padding(top_down, 3) if config.use_explicit_padding else top_down
                        maps.insert(0, conv3x3(pre, depth, [3, 3], scope=f"smoothing_{level + 1}"))
                last = maps[-1]
                for i in range(top + 1, config.fpn_max_level + 1):
                    if config.use_explicit_padding:
                        last = _fixed_padding(last, 3)
                    last = conv3x3(last, depth, [3, 3], stride=2, padding=padding,
                                   scope=f"bottom_up_Conv2d_{i - top + 13}")
                    maps.append(last)
    return maps


def _ppn_feature_maps(preprocessed, config: SSDConfig, training: "dict | None" = None) -> list:
    """`ssd_mobilenet_v1_ppn` (scope `FeatureExtractor/MobilenetV1`): MobileNet v1 to
    Conv2d_13_pointwise (its last two blocks unused, as the OD API builds them), then
    `pooling_pyramid_feature_maps(base_feature_map_depth=0, num_layers=6)`: Conv2d_11_pointwise and
    five 2x2 stride-2 SAME max-pools of it, `MaxPool2d_<i>_2x2`."""
    training = training or {}
    net = preprocessed
    with tf1.variable_scope("FeatureExtractor", values=[net]):
        with tf1.variable_scope("MobilenetV1") as scope:
            if config.pad_to_multiple > 1:
                net = _pad_to_multiple(net, config.pad_to_multiple)
            with _conv_arg_scope(config.base_batch_norm_epsilon, config.fused_batch_norm, training.get(BASE)):
                end_points = _mobilenet_v1_base(net, config, scope)
            maps = [end_points["Conv2d_11_pointwise"]]
            for i in range(5):
                maps.append(slim.max_pool2d(maps[-1], [2, 2], stride=2, padding="SAME", scope=f"MaxPool2d_{i}_2x2"))
    return maps


def _static_or_dynamic_shape(tensor) -> list:
    """Each dimension as a Python int where the static shape knows it, else a scalar tensor."""
    dynamic = tf.shape(tensor)
    return [d if d is not None else dynamic[i] for i, d in enumerate(tensor.shape.as_list())]


def _box_predictor(feature_maps, anchors_per_location, config: SSDConfig, training: "LayerTraining | None" = None):
    """ConvolutionalBoxPredictor (0 layers before the predictor), scopes `BoxPredictor_i`, or the
    config's weight-shared one (`_weight_shared_box_predictor`); `training`: None (inference) or
    the box predictor's `LayerTraining`.

    Returns per map box encodings [N, H*W*A, 1, 4] and class logits [N, H*W*A, slots],
    rows ordered (y, x, anchor) as the reshape of the NHWC conv output orders them.
    """
    if config.box_predictor_type == WEIGHT_SHARED:
        return _weight_shared_box_predictor(feature_maps, anchors_per_location, config, training)
    k = config.box_predictor_kernel_size
    slots = config.num_class_slots
    boxes, classes = [], []
    for i, (fmap, anchors) in enumerate(zip(feature_maps, anchors_per_location)):
        with tf1.variable_scope(f"BoxPredictor_{i}"):
            with _conv_arg_scope(config.box_predictor_batch_norm_epsilon, config.fused_batch_norm, training):
                # The heads are plain convs with bias; only slim.conv2d is overridden, so a
                # depthwise head's separable conv keeps batch norm and ReLU6.
                with slim.arg_scope([slim.conv2d], activation_fn=None, normalizer_fn=None, normalizer_params=None):
                    heads = []
                    for head, width in (("BoxEncodingPredictor", anchors * _BOX_CODE_SIZE),
                                        ("ClassPredictor", anchors * slots)):
                        net = fmap
                        kernel = k
                        if config.box_predictor_use_depthwise:
                            net = slim.separable_conv2d(net, None, [k, k], depth_multiplier=1, stride=1,
                                                        scope=head + "_depthwise")
                            kernel = 1
                        heads.append(slim.conv2d(net, width, [kernel, kernel], scope=head))
            n, h, w, _ = _static_or_dynamic_shape(fmap)
            boxes.append(tf.reshape(heads[0], tf.stack([n, h * w * anchors, 1, _BOX_CODE_SIZE])))
            classes.append(tf.reshape(heads[1], tf.stack([n, h * w * anchors, slots])))
    return boxes, classes


def _weight_shared_box_predictor(feature_maps, anchors_per_location, config: SSDConfig,
                                 training: "LayerTraining | None" = None):
    """WeightSharedConvolutionalBoxPredictor (scope `WeightSharedConvolutionalBoxPredictor`, reused
    by every map): per map j, each head's tower of num_layers_before_predictor convs (no bias,
    `normalizer_fn=tf.identity`) -> `.../conv2d_<i>/BatchNorm/feature_<j>` -> ReLU6 (without
    batch norm: convs with bias, ReLU6), `PredictionTower` for both heads with
    share_prediction_tower, then the `BoxPredictor` and `ClassPredictor` convs (bias, linear).
    Same contract as `_box_predictor`."""
    k = config.box_predictor_kernel_size
    slots = config.num_class_slots
    batch_norm = config.box_predictor_batch_norm
    if config.box_predictor_use_depthwise:
        conv = lambda *args, **kwargs: slim.separable_conv2d(*args, depth_multiplier=1, **kwargs)  # noqa: E731
    else:
        conv = slim.conv2d
    norm = (_training_batch_norm_fn(config.box_predictor_batch_norm_epsilon, config.fused_batch_norm,
                                    training.batch_norm_decay, training.inplace_update) if training is not None
            else _batch_norm_fn(config.box_predictor_batch_norm_epsilon, config.fused_batch_norm))

    def tower(scope, net, j):
        for i in range(config.box_predictor_num_layers_before_predictor):
            net = conv(net, config.box_predictor_depth, [k, k], stride=1, padding="SAME", activation_fn=None,
                       normalizer_fn=tf.identity if batch_norm else None, scope=f"{scope}/conv2d_{i}")
            if batch_norm:
                net = norm(net, scope=f"{scope}/conv2d_{i}/BatchNorm/feature_{j}")
            net = tf.nn.relu6(net)
        return net

    boxes, classes = [], []
    for j, (fmap, anchors) in enumerate(zip(feature_maps, anchors_per_location)):
        with tf1.variable_scope("WeightSharedConvolutionalBoxPredictor", reuse=tf1.AUTO_REUSE):
            with _conv_arg_scope(config.box_predictor_batch_norm_epsilon, config.fused_batch_norm, training):
                box_net = tower("PredictionTower" if config.share_prediction_tower else "BoxPredictionTower", fmap, j)
                box = conv(box_net, anchors * _BOX_CODE_SIZE, [k, k], activation_fn=None, stride=1, padding="SAME",
                           normalizer_fn=None, scope="BoxPredictor")
                class_net = box_net if config.share_prediction_tower else tower("ClassPredictionTower", fmap, j)
                logits = conv(class_net, anchors * slots, [k, k], activation_fn=None, stride=1, padding="SAME",
                              normalizer_fn=None, biases_initializer=tf1.constant_initializer(
                                  config.class_prediction_bias_init), scope="ClassPredictor")
                n, h, w, _ = _static_or_dynamic_shape(fmap)
                boxes.append(tf.reshape(box, [n, -1, 1, _BOX_CODE_SIZE]))
                # [N, H, W, A, slots], the IDENTITY score converter, then one row per anchor.
                logits = tf.identity(tf.reshape(logits, [n, h, w, anchors, slots]))
                classes.append(tf.reshape(logits, [n, -1, slots]))
    return boxes, classes


def _ssd_box_specs(config: SSDConfig) -> list:
    """`create_ssd_anchors`: per layer, [(scale, aspect_ratio)] in Python doubles; a config's
    explicit `anchor_specs` as they are (a writer whose specs no generator setting gives, e.g.
    interpolated scales rounded to four decimals)."""
    if config.anchor_specs:
        return [list(layer) for layer in config.anchor_specs]
    n = config.num_layers
    if config.scales:
        scales = [float(s) for s in config.scales] + [1.0]
    else:
        scales = [config.min_scale + (config.max_scale - config.min_scale) * i / (n - 1) for i in range(n)] + [1.0]
    specs = []
    for layer in range(n):
        scale, scale_next = scales[layer], scales[layer + 1]
        interpolated = math.sqrt(scale * scale_next)
        if layer == 0 and config.reduce_boxes_in_lowest_layer:
            specs.append([(0.1, 1.0), (scale, 2.0), (scale, 0.5)])
            continue
        layer_specs = []
        for ratio in config.aspect_ratios:
            layer_specs.append((scale, ratio))
            # 2017 releases put the interpolated anchor right after each unit ratio.
            if config.interpolated_anchor_after_unit_ratio and ratio == 1.0:
                layer_specs.append((interpolated, 1.0))
        if not config.interpolated_anchor_after_unit_ratio and config.interpolated_scale_aspect_ratio > 0.0:
            layer_specs.append((interpolated, config.interpolated_scale_aspect_ratio))
        specs.append(layer_specs)
    return specs


def _tile_anchors(grid_height, grid_width, scales, aspect_ratios, base_anchor_size, stride, offset):
    """`grid_anchor_generator.tile_anchors`: [H*W*A, 4] corners, ordered (y, x, anchor)."""
    ratio_sqrts = tf.sqrt(aspect_ratios)
    heights = scales / ratio_sqrts * base_anchor_size[0]
    widths = scales * ratio_sqrts * base_anchor_size[1]
    y_centers = tf.cast(tf.range(grid_height), tf.float32) * stride[0] + offset[0]
    x_centers = tf.cast(tf.range(grid_width), tf.float32) * stride[1] + offset[1]
    count = len(aspect_ratios) if isinstance(aspect_ratios, (list, tuple)) else int(aspect_ratios.shape[0])
    grid = [grid_height, grid_width, count]
    y_grid = tf.broadcast_to(tf.reshape(y_centers, [-1, 1, 1]), grid)
    x_grid = tf.broadcast_to(tf.reshape(x_centers, [1, -1, 1]), grid)
    h_grid = tf.broadcast_to(tf.reshape(heights, [1, 1, -1]), grid)
    w_grid = tf.broadcast_to(tf.reshape(widths, [1, 1, -1]), grid)
    centers = tf.reshape(tf.stack([y_grid, x_grid], axis=3), [-1, 2])
    sizes = tf.reshape(tf.stack([h_grid, w_grid], axis=3), [-1, 2])
    return tf.concat([centers - 0.5 * sizes, centers + 0.5 * sizes], 1)


def _multiscale_anchors(config: SSDConfig, feature_map_shapes, im_height: int, im_width: int):
    """`MultiscaleGridAnchorGenerator`: all anchors [A, 4], [ymin, xmin, ymax, xmax], unclipped.

    Per level l (a `GridAnchorGenerator` scope): base anchor size anchor_scale * 2^l, stride 2^l,
    offset half a stride where the (static) image size divides by 2^l, else 0 (constants `Const`,
    `Const_1`, `Const_2`, as the generator creates them); scales 2^(k/n) meshed with the aspect
    ratios (aspect ratio major); tiled in pixels, then times 1 / image size.
    """
    grids = []
    with tf1.name_scope("MultiscaleGridAnchorGenerator"):
        for level, (gh, gw) in zip(range(config.anchor_min_level, config.anchor_max_level + 1), feature_map_shapes):
            stride = 2 ** level
            offset = [stride / 2.0 if size % 2.0 ** level == 0 else 0 for size in (im_height, im_width)]
            scales = [2 ** (float(k) / config.scales_per_octave) for k in range(config.scales_per_octave)]
            with tf1.name_scope("GridAnchorGenerator"):
                base = tf.cast(tf.convert_to_tensor([stride * config.anchor_scale] * 2), tf.float32)
                strides = tf.cast(tf.convert_to_tensor([stride] * 2), tf.float32)
                offsets = tf.cast(tf.convert_to_tensor(offset), tf.float32)
                with tf1.name_scope("Meshgrid"):  # ops.meshgrid(scales, aspect_ratios)
                    x, y = tf.convert_to_tensor(scales), tf.convert_to_tensor(list(config.aspect_ratios))
                    nx, ny = len(scales), len(config.aspect_ratios)
                    scale_grid = tf.tile(tf.reshape(x, [1, nx]), [ny, 1])
                    ratio_grid = tf.tile(tf.reshape(y, [ny, 1]), [1, nx])
                corners = _tile_anchors(gh, gw, tf.reshape(scale_grid, [-1]), tf.reshape(ratio_grid, [-1]),
                                        base, strides, offsets)
            with tf1.name_scope("ToNormalizedCoordinates"):
                height, width = tf.cast(im_height, tf.float32), tf.cast(im_width, tf.float32)
                y_min, x_min, y_max, x_max = tf.split(corners, 4, axis=1)
                y_scale, x_scale = 1 / height, 1 / width
                grids.append(tf.concat([y_scale * y_min, x_scale * x_min, y_scale * y_max, x_scale * x_max], 1))
    with tf1.name_scope("Concatenate"):  # box_list_ops.concatenate, as the exports name it
        return tf.concat(grids, 0)


def _anchors(config: SSDConfig, feature_map_shapes, im_height, im_width):
    """`MultipleGridAnchorGenerator`: all anchors [A, 4], [ymin, xmin, ymax, xmax], unclipped.

    Strides and offsets default to 1/grid and half of that; the base anchor is scaled by
    min(H, W)/H and min(H, W)/W for non-square inputs. A multiscale_anchor_generator's:
    `_multiscale_anchors` (the image size static, as fixed_shape_resizer makes it).
    """
    if config.anchor_generator_type == MULTISCALE_ANCHORS:
        return _multiscale_anchors(config, feature_map_shapes, int(im_height), int(im_width))
    base_anchor_size = tf.constant([config.base_anchor_height, config.base_anchor_width], tf.float32)
    with tf1.name_scope("MultipleGridAnchorGenerator"):
        im_height = tf.cast(im_height, tf.float32)
        im_width = tf.cast(im_width, tf.float32)
        if config.anchor_strides:
            strides = [(tf.cast(sh, tf.float32) / im_height, tf.cast(sw, tf.float32) / im_width)
                       for sh, sw in config.anchor_strides]
        else:
            strides = [(1.0 / tf.cast(gh, tf.float32), 1.0 / tf.cast(gw, tf.float32)) for gh, gw in feature_map_shapes]
        if config.anchor_offsets:
            offsets = [(tf.cast(oh, tf.float32) / im_height, tf.cast(ow, tf.float32) / im_width)
                       for oh, ow in config.anchor_offsets]
        else:
            offsets = [(0.5 * sy, 0.5 * sx) for sy, sx in strides]
        min_im = tf.minimum(im_height, im_width)
        base = [min_im / im_height * base_anchor_size[0], min_im / im_width * base_anchor_size[1]]
        grids = []
        for (gh, gw), specs, stride, offset in zip(feature_map_shapes, _ssd_box_specs(config), strides, offsets):
            scales, ratios = zip(*specs)
            grids.append(_tile_anchors(gh, gw, list(scales), list(ratios), base, stride, offset))
        return tf.concat(grids, 0)


def _preprocess(images, config: SSDConfig):
    """float32 [N, H, W, 3] (the cast image) -> float32 [N, h, w, 3]: per image (`map_fn`) legacy
    resize to the config size, then `(2/255) * x - 1` (2017-2018 exports); with
    `normalize_before_resize`, `(2/255) * x - 1` on the full-size batch, then the per-image
    resize (`ssd_meta_arch.preprocess` of later OD API code, e.g. TF 1.15 exports), whose loop
    output is then the preprocessed image. Op names as in those exports: `Preprocessor/mul`,
    `Preprocessor/sub`, and the loop's `Preprocessor/map/while/ResizeImage/ResizeBilinear`
    (`.../ResizeImage/resize/ResizeBilinear` under `tf.image.resize_images` of TF 1.14+)."""
    resize = {"BILINEAR": tf.raw_ops.ResizeBilinear, "NEAREST_NEIGHBOR": tf.raw_ops.ResizeNearestNeighbor,
              "BICUBIC": tf.raw_ops.ResizeBicubic}
    method = config.resize_method

    def resize_image(image):
        with tf1.name_scope("ResizeImage"):
            size = tf.constant([config.image_height, config.image_width], tf.int32,
                               name="stack" if config.normalize_before_resize else "size")
            with tf1.name_scope("resize") if config.normalize_before_resize else contextlib.nullcontext():
                batched = tf.expand_dims(image, 0)
                if method == "AREA":
                    resized = tf.raw_ops.ResizeArea(images=batched, size=size, align_corners=False)
                else:
                    # half_pixel_centers=False: TF1's kernels, not TF2's tf.image.resize.
                    resized = resize[method](images=batched, size=size, align_corners=False,
                                             half_pixel_centers=False)
                return tf.squeeze(tf.cast(resized, tf.float32), [0])

    with tf1.name_scope("Preprocessor"):
        if config.normalize_before_resize:
            normalized = (2.0 / 255.0) * images - 1.0
            return tf1.map_fn(resize_image, normalized, fn_output_signature=tf.float32)
        resized = tf1.map_fn(resize_image, images, fn_output_signature=tf.float32)
        return (2.0 / 255.0) * resized - 1.0


def _decode(box_encodings, anchors, scales):
    """FasterRcnnBoxCoder decode of [N, A, 4] codes [ty, tx, th, tw]: [N, A, 4] boxes."""
    shape = _static_or_dynamic_shape(box_encodings)
    tiled = tf.reshape(tf.tile(tf.expand_dims(anchors, 0), [shape[0], 1, 1]), [-1, 4])
    codes = tf.reshape(box_encodings, [-1, _BOX_CODE_SIZE])
    with tf1.name_scope("Decode"):
        ymin_a, xmin_a, ymax_a, xmax_a = tf.unstack(tf.transpose(tiled))
        wa = xmax_a - xmin_a
        ha = ymax_a - ymin_a
        ycenter_a = ymin_a + ha / 2.0
        xcenter_a = xmin_a + wa / 2.0
        ty, tx, th, tw = tf.unstack(tf.transpose(codes))
        ty /= scales[0]
        tx /= scales[1]
        th /= scales[2]
        tw /= scales[3]
        w = tf.exp(tw) * wa
        h = tf.exp(th) * ha
        ycenter = ty * ha + ycenter_a
        xcenter = tx * wa + xcenter_a
        boxes = tf.transpose(tf.stack([ycenter - h / 2.0, xcenter - w / 2.0, ycenter + h / 2.0, xcenter + w / 2.0]))
    return tf.reshape(boxes, tf.stack([shape[0], shape[1], 4]))


def _area(boxes):
    with tf1.name_scope("Area"):
        y_min, x_min, y_max, x_max = tf.split(boxes, 4, axis=1)
        return tf.squeeze((y_max - y_min) * (x_max - x_min), [1])


def _gather(boxes, fields, indices):
    with tf1.name_scope("Gather"):
        return tf.gather(boxes, indices), [tf.gather(f, indices) for f in fields]


def _clip_to_window(boxes, fields, window):
    """Clips [K, 4] boxes to `window` and drops those left with zero area."""
    with tf1.name_scope("ClipToWindow"):
        y_min, x_min, y_max, x_max = tf.split(boxes, 4, axis=1)
        win_y_min, win_x_min, win_y_max, win_x_max = tf.unstack(window)
        clipped = tf.concat([tf.maximum(tf.minimum(y_min, win_y_max), win_y_min),
                             tf.maximum(tf.minimum(x_min, win_x_max), win_x_min),
                             tf.maximum(tf.minimum(y_max, win_y_max), win_y_min),
                             tf.maximum(tf.minimum(x_max, win_x_max), win_x_min)], 1)
        keep = tf.cast(tf.reshape(tf.where(tf.greater(_area(clipped), 0.0)), [-1]), tf.int32)
        return _gather(clipped, fields, keep)


def _sort_by_score(boxes, scores, classes):
    """Descending by score; TopK puts the lower position first among equal scores."""
    with tf1.name_scope("SortByField"):
        _, order = tf.nn.top_k(scores, tf.size(scores), sorted=True)
        boxes, (scores, classes) = _gather(boxes, [scores, classes], order)
        return boxes, scores, classes


def _take_first(boxes, fields, n):
    return _gather(boxes, fields, tf.range(n))


def _nms_clip_before(boxes, scores, config: SSDConfig, window):
    """2018 `multiclass_non_max_suppression`: per class threshold, clip, drop empty, NMS.

    Args:
      boxes: float32 [A, 4] decoded boxes; scores: float32 [A, K] class scores.
    Returns:
      boxes [D, 4], scores [D], classes [D] (0-based, float) sorted by score, and D (int32),
      D <= max_total_detections.
    """
    num_scores = tf.shape(scores)[0]
    selected = []
    for class_idx in range(config.num_classes):
        class_scores = tf.reshape(tf.slice(scores, [0, class_idx], tf.stack([num_scores, 1])), [-1])
        with tf1.name_scope("FilterGreaterThan"):
            keep = tf.cast(tf.reshape(tf.where(tf.greater(class_scores, config.score_threshold)), [-1]), tf.int32)
            class_boxes, (class_scores,) = _gather(boxes, [class_scores], keep)
        class_boxes, (class_scores,) = _clip_to_window(class_boxes, [class_scores], window)
        max_selection = tf.minimum(config.max_detections_per_class, tf.shape(class_boxes)[0])
        with tf1.name_scope("non_max_suppression"):
            indices = tf.raw_ops.NonMaxSuppressionV2(
                boxes=class_boxes, scores=class_scores, max_output_size=max_selection,
                iou_threshold=tf.constant(config.iou_threshold, tf.float32))
        class_boxes, (class_scores,) = _gather(class_boxes, [class_scores], indices)
        selected.append((class_boxes, class_scores, tf.zeros_like(class_scores) + class_idx))
    boxes, scores, classes = _sort_by_score(*(tf.concat(list(t), 0) for t in zip(*selected)))
    num = tf.minimum(config.max_total_detections, tf.shape(scores)[0])
    boxes, (scores, classes) = _take_first(boxes, [scores, classes], num)
    return boxes, scores, classes, num


def _nms_clip_after(boxes, scores, config: SSDConfig, window):
    """TF 1.9+ `multiclass_non_max_suppression`: NMS with the threshold inside it on the
    unclipped boxes, sort, then clip and drop empty boxes; same contract as `_nms_clip_before`."""
    num_scores = tf.shape(scores)[0]
    selected = []
    for class_idx in range(config.num_classes):
        class_scores = tf.reshape(tf.slice(scores, [0, class_idx], tf.stack([num_scores, 1])), [-1])
        max_selection = tf.minimum(config.max_detections_per_class, num_scores)
        with tf1.name_scope("non_max_suppression"):
            indices = tf.raw_ops.NonMaxSuppressionV3(
                boxes=boxes, scores=class_scores, max_output_size=max_selection,
                iou_threshold=tf.constant(config.iou_threshold, tf.float32),
                score_threshold=tf.constant(config.score_threshold, tf.float32))
        num_valid = tf.shape(indices)[0]
        indices = tf.concat([indices, tf.zeros(max_selection - num_valid, tf.int32)], 0)
        class_boxes, (class_scores,) = _gather(boxes, [class_scores], indices)
        # Padding rows carry score -1 so that the sorts put them last and the count skips them.
        valid = tf.less(tf.range(max_selection), num_valid)
        class_scores = tf.where(valid, class_scores, -1.0 * tf.ones(max_selection))
        selected.append((class_boxes, class_scores, tf.zeros_like(class_scores) + class_idx))
    boxes, scores, classes = _sort_by_score(*(tf.concat(list(t), 0) for t in zip(*selected)))
    boxes, (scores, classes) = _clip_to_window(boxes, [scores, classes], window)
    scores = tf.where(tf.cast(_area(boxes), tf.bool), scores, -1.0 * tf.ones(tf.shape(boxes)[0]))
    num_valid = tf.reduce_sum(tf.cast(tf.greater_equal(scores, 0), tf.int32))
    boxes, scores, classes = _sort_by_score(boxes, scores, classes)
    num = tf.minimum(tf.minimum(config.max_total_detections, tf.shape(scores)[0]), num_valid)
    boxes, (scores, classes) = _take_first(boxes, [scores, classes], num)
    return boxes, scores, classes, num


def multiclass_nms(boxes, scores, config: SSDConfig, window):
    """One image's `multiclass_non_max_suppression` as the config's `nms_variant` ran it
    (`_nms_clip_before` or `_nms_clip_after`), in the current graph.

    Args:
      boxes: float32 [A, 4] decoded boxes [ymin, xmin, ymax, xmax]; scores: float32 [A, K] class
        scores (background column already sliced off); window: float32 [4] the clip window.
    Returns:
      boxes [D, 4], scores [D], classes [D] (0-based, float) sorted by score, and D (int32),
      D <= max_total_detections.
    """
    nms = _nms_clip_before if config.nms_variant == NMS_CLIP_BEFORE else _nms_clip_after
    return nms(boxes, scores, config, window)


def _pad_or_clip(tensor, length: int):
    """The first `length` rows of `tensor`, zero-padded to exactly `length`."""
    rows = tf.shape(tensor)[0]
    tensor = tensor[:tf.minimum(rows, length)]
    pad = [[0, tf.maximum(length - rows, 0)]] + [[0, 0]] * (len(tensor.shape) - 1)
    padded = tf.pad(tensor, pad)
    padded.set_shape([length] + tensor.shape.as_list()[1:])
    return padded


def _postprocess(box_encodings, class_logits, anchors, config: SSDConfig) -> dict:
    """Scope `Postprocessor`: decode, score conversion, per-image per-class NMS, padding."""
    with tf1.name_scope("Postprocessor"):
        boxes = _decode(box_encodings, anchors, config.box_coder_scales)
        slice_logits = config.add_background_class and config.background_slice == BACKGROUND_SLICE_LOGITS
        if slice_logits:  # 2017 exports: the background column goes before the score conversion
            class_logits = tf.slice(class_logits, [0, 0, 1], [-1, -1, -1])
        scaled = tf.divide(class_logits, config.logit_scale, name="scale_logits")
        convert = {"SIGMOID": tf.sigmoid, "SOFTMAX": tf.nn.softmax, "IDENTITY": tf.identity}[config.score_converter]
        scores = convert(scaled, name="convert_scores")
        if config.add_background_class and not slice_logits:
            scores = tf.slice(scores, [0, 0, 1], [-1, -1, -1])
        window = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32)
        d = config.max_total_detections

        def single_image(args):
            with tf1.name_scope("MultiClassNonMaxSuppression"):
                image_boxes, image_scores, image_classes, num = multiclass_nms(args[0], args[1], config, window)
            with tf1.name_scope("PadOrClipBoxList"):
                return (_pad_or_clip(image_boxes, d), _pad_or_clip(image_scores, d),
                        _pad_or_clip(image_classes, d), num)

        with tf1.name_scope("BatchMultiClassNonMaxSuppression"):
            nmsed_boxes, nmsed_scores, nmsed_classes, num = tf1.map_fn(
                single_image, (boxes, scores), fn_output_signature=(tf.float32, tf.float32, tf.float32, tf.int32))
        return {"detection_boxes": nmsed_boxes, "detection_scores": nmsed_scores,
                "detection_classes": nmsed_classes, "num_detections": tf.cast(num, tf.float32, name="ToFloat")}


def build_inference_graph(config: SSDConfig, fpn_upsampling: str = "stack"):
    """The TF1 inference graph of `config` in a new `tf.Graph` (`fpn_upsampling`: FPN's x2
    upsampling in the OD API's 2019+ "stack" form or its 2018 "ones" form).

    Returns:
      (graph, image_tensor, outputs): `image_tensor` is the uint8 placeholder `image_tensor:0`
        [None, None, None, 3]; `outputs` maps `detection_boxes` [N, D, 4] ([ymin, xmin, ymax,
        xmax], normalised, clipped), `detection_scores` [N, D], `detection_classes` [N, D]
        (1-based, float) and `num_detections` [N] (float) to the graph's nodes of those names,
        D = max_total_detections. The variables are TF1 ref variables (`VariableV2`) named as
        in the real checkpoints, plus `global_step`; a session must set them (see
        `frozen_graph_def`, `write_model_dir`).
    """
    graph = tf.Graph()
    with graph.as_default(), _v1_control_flow(), warnings.catch_warnings(), \
            tf1.variable_scope(tf1.get_variable_scope(), use_resource=False):
        # tf-slim 1.1 builds its layers with `layer.apply`, which TF 2.x flags as deprecated.
        warnings.filterwarnings("ignore", message="`layer.apply` is deprecated")
        tf1.train.get_or_create_global_step()
        image_tensor = tf1.placeholder(tf.uint8, [None, None, None, 3], name="image_tensor")
        preprocessed = _preprocess(tf.cast(image_tensor, tf.float32, name="ToFloat"), config)
        feature_maps = _feature_maps(preprocessed, config, fpn_upsampling=fpn_upsampling)
        shapes = [tuple(_static_or_dynamic_shape(f)[1:3]) for f in feature_maps]
        image_shape = _static_or_dynamic_shape(preprocessed)
        anchors = _anchors(config, shapes, image_shape[1], image_shape[2])
        boxes, classes = _box_predictor(feature_maps, anchor_generators.anchors_per_location(config), config)
        box_encodings = tf.squeeze(tf.concat(boxes, axis=1, name="concat"), axis=2)
        class_logits = tf.concat(classes, axis=1, name="concat_1")
        detections = _postprocess(box_encodings, class_logits, anchors, config)
        detections["detection_classes"] += 1.0  # label_id_offset: class ids start at 1
        outputs = {k: tf.identity(detections[k], name=k) for k in DETECTION_OUTPUTS}
    return graph, image_tensor, outputs


def _model_variables(graph) -> list:
    return [v for v in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES) if v.op.name != _GLOBAL_STEP]


def _checked_values(graph, weights: dict) -> list:
    """[(variable, value)] for every variable of `graph`; global_step defaults to 0."""
    values, problems = [], []
    for var in graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES):
        name, shape = var.op.name, var.shape.as_list()
        if name == _GLOBAL_STEP:
            values.append((var, np.asarray(weights.get(name, 0), dtype=np.int64).reshape(shape)))
            continue
        if name not in weights:
            problems.append(f"{name}: missing (expected shape {shape})")
            continue
        value = np.asarray(weights[name])
        if list(value.shape) != shape:
            problems.append(f"{name}: shape {list(value.shape)}, the graph's variable is {shape}")
            continue
        values.append((var, value.astype(var.dtype.base_dtype.as_numpy_dtype)))
    if problems:
        raise ValueError(f"{len(problems)} model variables cannot be set: " + "; ".join(problems[:8])
                         + (" ..." if len(problems) > 8 else ""))
    return values


def _session_with(graph, weights: dict):
    values = _checked_values(graph, weights)
    session = tf1.Session(graph=graph)
    # Feeding the initializers' inputs sets the values without adding ops to the graph; one
    # run, because every distinct run signature prunes the whole graph anew.
    session.run([var.initializer for var, _ in values], {var.initializer.inputs[1]: value for var, value in values})
    return session


def _freeze(session, graph):
    return tf1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), list(DETECTION_OUTPUTS))


def frozen_graph_def(config: SSDConfig, weights: dict, fpn_upsampling: str = "stack"):
    """The inference graph of `config` with `weights` frozen in as constants.

    Args:
      weights: {TF1 variable name: ndarray} (as `migrate.tf1.sources` reads them); names that are
        not model variables (global_step, optimizer slots, EMA shadows) are ignored.
    Returns:
      a `GraphDef` with the four detection outputs as its output nodes.
    Raises:
      ValueError: counting the model variables that are missing or mis-shaped and naming
        (up to 8 of) them.
    """
    graph, _, _ = build_inference_graph(config, fpn_upsampling)
    with _session_with(graph, weights) as session:
        return _freeze(session, graph)


TFLITE_OUTPUTS = ("raw_outputs/box_encodings", "raw_outputs/class_predictions", "anchors")


def tflite_graph_def(config: SSDConfig, weights: dict, postprocess_op: bool = True, max_detections: int = 10,
                     max_classes_per_detection: int = 1, use_regular_nms: bool = False):
    """The graph the OD API's `export_tflite_ssd_graph` writes (`tflite_graph.pb`), frozen.

    Input `normalized_input_image_tensor` float32 [1, h, w, 3] (already resized and scaled, no
    `Preprocessor`); outputs `raw_outputs/box_encodings` [1, A, 4], `raw_outputs/class_predictions`
    [1, A, slots] (after the score converter) and `anchors` [A, 4] ([ycenter, xcenter, h, w]).
    With `postprocess_op`, the TFLite-only `TFLite_Detection_PostProcess` node on those three
    with the exporter's attributes (TensorFlow cannot run it; the rest of the graph runs).
    """
    graph = tf.Graph()
    with graph.as_default(), _v1_control_flow(), warnings.catch_warnings(), \
            tf1.variable_scope(tf1.get_variable_scope(), use_resource=False):
        warnings.filterwarnings("ignore", message="`layer.apply` is deprecated")
        tf1.train.get_or_create_global_step()
        image = tf1.placeholder(tf.float32, [1, config.image_height, config.image_width, 3],
                                name="normalized_input_image_tensor")
        feature_maps = _feature_maps(image, config)
        shapes = [tuple(_static_or_dynamic_shape(f)[1:3]) for f in feature_maps]
        anchors = _anchors(config, shapes, config.image_height, config.image_width)
        boxes, classes = _box_predictor(feature_maps, anchor_generators.anchors_per_location(config), config)
        box_encodings = tf.squeeze(tf.concat(boxes, axis=1, name="concat"), axis=2)
        class_logits = tf.concat(classes, axis=1, name="concat_1")
        # post_processing_builder's score conversion, outside any scope as the exporter calls it.
        scaled = tf.divide(class_logits, config.logit_scale, name="scale_logits")
        convert = {"SIGMOID": tf.sigmoid, "SOFTMAX": tf.nn.softmax, "IDENTITY": tf.identity}[config.score_converter]
        scores = convert(scaled, name="convert_scores")
        with tf1.name_scope("raw_outputs"):
            tf.identity(box_encodings, name="box_encodings")
            tf.identity(scores, name="class_predictions")
        ymin, xmin, ymax, xmax = tf.unstack(anchors, axis=1)
        tf.identity(tf.stack([(ymin + ymax) / 2, (xmin + xmax) / 2, ymax - ymin, xmax - xmin], axis=1),
                    name="anchors")
    with _session_with(graph, weights) as session:
        frozen = tf1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), list(TFLITE_OUTPUTS))
    if postprocess_op:
        node = frozen.node.add(name="TFLite_Detection_PostProcess", op="TFLite_Detection_PostProcess",
                               input=list(TFLITE_OUTPUTS))
        ys, xs, hs, ws = config.box_coder_scales
        ints = {"max_detections": max_detections, "max_classes_per_detection": max_classes_per_detection,
                "num_classes": config.num_classes, "detections_per_class": config.max_detections_per_class}
        floats = {"nms_score_threshold": config.score_threshold, "nms_iou_threshold": config.iou_threshold,
                  "y_scale": ys, "x_scale": xs, "h_scale": hs, "w_scale": ws}
        for key, value in ints.items():
            node.attr[key].i = value
        for key, value in floats.items():
            node.attr[key].f = value
        node.attr["use_regular_nms"].b = use_regular_nms
    return frozen


def _synthetic_value(name: str, shape: list, rng) -> np.ndarray:
    """A plausible trained value: BN statistics in range, He-normal kernels, class biases
    around -3 (few anchors score high, as in a trained detector)."""
    leaf = name.rsplit("/", 1)[-1]
    if leaf == "gamma":
        value = rng.uniform(0.5, 1.5, shape)
    elif leaf == "moving_variance":
        value = rng.uniform(0.5, 2.0, shape)
    elif leaf == "biases" and "/ClassPredictor/" in name:
        value = rng.normal(-3.0, 1.0, shape)
    elif leaf in ("beta", "moving_mean", "biases"):
        value = rng.normal(0.0, 0.1, shape)
    else:
        # weights [k, k, in, out]: fan-in k*k*in; depthwise_weights [k, k, C, 1]: fan-in k*k.
        fan_in = shape[0] * shape[1] * (1 if leaf == "depthwise_weights" else shape[2])
        value = rng.normal(0.0, math.sqrt(2.0 / fan_in), shape)
    return value.astype(np.float32)


def _synthetic(graph, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    shapes = {v.op.name: v.shape.as_list() for v in _model_variables(graph)}
    return {name: _synthetic_value(name, shapes[name], rng) for name in sorted(shapes)}


def synthetic_weights(config: SSDConfig, seed: int = 0) -> dict:
    """Seeded synthetic values for every model variable of `config`: {TF1 name: float32 ndarray}."""
    graph, _, _ = build_inference_graph(config)
    return _synthetic(graph, seed)


def _write_saved_model(frozen, path: str) -> None:
    """A TF1 SavedModel of the frozen graph, as the TF1 exporter wrote it: tag `serve`,
    `serving_default` signature `inputs` -> the four detection outputs, no variables."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(frozen, name="")
        with tf1.Session(graph=graph) as session:
            builder = tf1.saved_model.Builder(path)
            signature = tf1.saved_model.predict_signature_def(
                inputs={"inputs": graph.get_tensor_by_name("image_tensor:0")},
                outputs={k: graph.get_tensor_by_name(f"{k}:0") for k in DETECTION_OUTPUTS})
            builder.add_meta_graph_and_variables(session, [tf1.saved_model.SERVING],
                                                 signature_def_map={"serving_default": signature})
            builder.save()
    os.makedirs(os.path.join(path, "variables"), exist_ok=True)


def write_model_dir(config: SSDConfig, out_dir: str, weights: dict = None, seed: int = 0,
                    fpn_upsampling: str = "stack") -> str:
    """Writes a TF1 model directory in the model zoo's layout.

    Files: `model.ckpt.{index,data-00000-of-00001,meta}`, `checkpoint`,
    `frozen_inference_graph.pb`, `saved_model/saved_model.pb` + `saved_model/variables/`,
    `pipeline.config`. Written to a temporary directory beside `out_dir` and renamed into place.

    Args:
      weights: {TF1 variable name: ndarray}; default `synthetic_weights(config, seed)`.
      fpn_upsampling: `build_inference_graph`'s.
    Raises:
      FileExistsError: `out_dir` exists and is not an empty directory.
      ValueError: `weights` misses or mis-shapes a model variable.
    """
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise FileExistsError(f"{out_dir}: exists and is not empty")
    graph, _, _ = build_inference_graph(config, fpn_upsampling)
    if weights is None:
        weights = _synthetic(graph, seed)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tf1-model-", dir=parent)
    try:
        with _session_with(graph, weights) as session, graph.as_default():
            saver = tf1.train.Saver(graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES), save_relative_paths=True)
            saver.save(session, os.path.join(tmp, "model.ckpt"), write_meta_graph=True)
            frozen = _freeze(session, graph)
        with open(os.path.join(tmp, "frozen_inference_graph.pb"), "wb") as f:
            f.write(frozen.SerializeToString())
        _write_saved_model(frozen, os.path.join(tmp, "saved_model"))
        with open(os.path.join(tmp, "pipeline.config"), "w", encoding="utf-8") as f:
            f.write(to_pipeline_config(config))
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)  # empty, checked above
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
