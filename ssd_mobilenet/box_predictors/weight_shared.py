"""`weight_shared_convolutional_box_predictor` (the OD API's WeightSharedConvolutionalBoxPredictor,
RetinaNet's heads): one set of conv weights for every feature map (TF1 scope
`WeightSharedConvolutionalBoxPredictor/`, no `BoxPredictor_<i>` prefix).

Per feature map j, each head's tower is `num_layers_before_predictor` convs `conv2d_<i>` (kernel k,
`depth` channels; no bias when batch norm follows) -> batch norm `conv2d_<i>/BatchNorm/feature_<j>`
(per feature map: the statistics differ between levels) -> ReLU6; without batch norm the convs
have biases. The box tower is `BoxPredictionTower`, the class tower `ClassPredictionTower`; with
`share_prediction_tower` one `PredictionTower` feeds both heads. The heads `BoxPredictor` (A * 4
channels) and `ClassPredictor` (A * slots; its bias initialised to class_prediction_bias_init) are
convs of kernel k with bias; with `use_depthwise` every conv here is separable (depthwise, then
1x1). Outputs are concatenated level by level, rows (y, x, anchor) within a level.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ssd_mobilenet import anchor_generators
from ssd_mobilenet.box_predictors.convolutional import BOX_CODE_SIZE
from ssd_mobilenet.layers import BatchNorm, SlimConv

SCOPE = "WeightSharedConvolutionalBoxPredictor"
BOX_TOWER, CLASS_TOWER, SHARED_TOWER = "BoxPredictionTower", "ClassPredictionTower", "PredictionTower"


class WeightSharedConvolutionalBoxPredictor(keras.layers.Layer):
    """The heads of every feature map, weights shared.

    Args:
      num_feature_maps: how many maps the call gets (one batch norm per map and tower layer).
      num_anchors: anchors per location, the same at every map.
      num_class_slots: class logits per anchor (classes plus background).
      depth, num_layers_before_predictor, kernel_size, batch_norm, share_prediction_tower,
        use_depthwise: the config's `box_predictor_*` fields (module docstring).
      bn_epsilon, fused_batch_norm: the towers' batch norm arithmetic.
    Call args:
      feature_maps: list of float32 [N, H_j, W_j, C], C the same for every map.
    Returns:
      (box_encodings, class_logits): lists per map of [N, H_j * W_j * A, 4] ([ty, tx, th, tw])
      and [N, H_j * W_j * A, num_class_slots].
    """

    def __init__(self, num_feature_maps, num_anchors, num_class_slots, depth, num_layers_before_predictor,
                 kernel_size=3, batch_norm=True, share_prediction_tower=False, use_depthwise=False,
                 bn_epsilon=0.001, fused_batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        self.num_feature_maps = num_feature_maps
        self.num_anchors = num_anchors
        self.num_class_slots = num_class_slots
        self.depth = depth
        self.num_layers_before_predictor = num_layers_before_predictor
        self.kernel_size = kernel_size
        self.batch_norm = batch_norm
        self.share_prediction_tower = share_prediction_tower
        self.use_depthwise = use_depthwise
        self.bn_epsilon = bn_epsilon
        self.fused_batch_norm = fused_batch_norm
        self.towers = (SHARED_TOWER,) if share_prediction_tower else (BOX_TOWER, CLASS_TOWER)
        conv = dict(batch_norm=False, bias=not batch_norm, relu6=False, separable=use_depthwise)
        # Each sublayer an attribute of its own (`_conv`, `_norm` find them): TF checkpoints
        # track attributes, not the layers in a list or dict.
        for t, tower in enumerate(self.towers):
            for i in range(num_layers_before_predictor):
                setattr(self, self._conv_attribute(t, i), SlimConv(depth, kernel_size, 1, name=f"conv2d_{i}", **conv))
                for j in range(num_feature_maps if batch_norm else 0):
                    setattr(self, self._norm_attribute(t, i, j),
                            BatchNorm(bn_epsilon, fused_batch_norm, name=f"feature_{j}"))
        head = dict(batch_norm=False, relu6=False, separable=use_depthwise)
        self.box_head = SlimConv(num_anchors * BOX_CODE_SIZE, kernel_size, 1, name="BoxPredictor", **head)
        self.class_head = SlimConv(num_anchors * num_class_slots, kernel_size, 1, name="ClassPredictor", **head)

    def _conv_attribute(self, tower: int, i: int) -> str:
        return f"{self.towers[tower]}_conv2d_{i}"

    def _norm_attribute(self, tower: int, i: int, j: int) -> str:
        return f"{self.towers[tower]}_conv2d_{i}_feature_{j}"

    def _conv(self, tower: int, i: int) -> SlimConv:
        return getattr(self, self._conv_attribute(tower, i))

    def _norm(self, tower: int, i: int, j: int) -> BatchNorm:
        return getattr(self, self._norm_attribute(tower, i, j))

    def build(self, input_shapes):
        # Variable paths as the TF1 variables: <tower>/conv2d_<i>/weights,
        # <tower>/conv2d_<i>/BatchNorm/feature_<j>/gamma, BoxPredictor/weights, ...
        shape = tuple(input_shapes[0])
        tower_shape = shape
        for t, tower in enumerate(self.towers):
            with keras.name_scope(tower):
                tower_shape = shape
                for i in range(self.num_layers_before_predictor):
                    conv = self._conv(t, i)
                    conv.build(tower_shape)
                    tower_shape = conv.compute_output_shape(tower_shape)
                    if self.batch_norm:
                        with keras.name_scope(conv.name), keras.name_scope("BatchNorm"):
                            for j in range(self.num_feature_maps):
                                self._norm(t, i, j).build(tower_shape)
        for head in (self.box_head, self.class_head):
            head.build(tower_shape)

    def _tower(self, t: int, x, j: int, training=False):
        for i in range(self.num_layers_before_predictor):
            x = self._conv(t, i)(x)
            if self.batch_norm:
                x = self._norm(t, i, j)(x, training=training)
            x = tf.nn.relu6(x)
        return x

    def call(self, feature_maps, training=False):
        boxes, classes = [], []
        for j, fmap in enumerate(feature_maps):
            box_net = self._tower(0, fmap, j, training)
            class_net = box_net if self.share_prediction_tower else self._tower(1, fmap, j, training)
            b, c = self.box_head(box_net), self.class_head(class_net)
            n = tf.shape(fmap)[0]
            boxes.append(tf.reshape(b, [n, -1, BOX_CODE_SIZE]))
            classes.append(tf.reshape(c, [n, -1, self.num_class_slots]))
        return boxes, classes

    def compute_output_shape(self, input_shapes):
        def rows(shape):
            return None if shape[1] is None or shape[2] is None else shape[1] * shape[2] * self.num_anchors
        return ([(s[0], rows(s), BOX_CODE_SIZE) for s in input_shapes],
                [(s[0], rows(s), self.num_class_slots) for s in input_shapes])

    def get_config(self):
        return {**super().get_config(), "num_feature_maps": self.num_feature_maps, "num_anchors": self.num_anchors,
                "num_class_slots": self.num_class_slots, "depth": self.depth,
                "num_layers_before_predictor": self.num_layers_before_predictor, "kernel_size": self.kernel_size,
                "batch_norm": self.batch_norm, "share_prediction_tower": self.share_prediction_tower,
                "use_depthwise": self.use_depthwise, "bn_epsilon": self.bn_epsilon,
                "fused_batch_norm": self.fused_batch_norm}


def build(feature_maps, config, merge_heads: bool = False):
    """Applies the predictor to every map and concatenates its outputs map by map.

    `merge_heads` is ignored: the towers' batch norm is per feature map, so it stays unfolded in
    inference copies, and the heads stay two convs.

    Returns:
      box_encodings [N, num_anchors, 4] and class logits [N, num_anchors, num_class_slots] (the
      TF1 graph's `concat` and `concat_1`).
    """
    anchors = anchor_generators.anchors_per_location(config)
    predictor = WeightSharedConvolutionalBoxPredictor(
        len(feature_maps), anchors[0], config.num_class_slots, config.box_predictor_depth,
        config.box_predictor_num_layers_before_predictor, config.box_predictor_kernel_size,
        config.box_predictor_batch_norm, config.share_prediction_tower, config.box_predictor_use_depthwise,
        config.box_predictor_batch_norm_epsilon, config.fused_batch_norm, name=SCOPE)
    boxes, classes = predictor(feature_maps)
    return (keras.layers.Concatenate(axis=1, name="concat")(boxes),
            keras.layers.Concatenate(axis=1, name="concat_1")(classes))
