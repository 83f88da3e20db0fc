"""`convolutional_box_predictor` (the OD API's ConvolutionalBoxPredictor): one pair of heads per
feature map (TF1 scopes `BoxPredictor_0` .. `BoxPredictor_<n-1>`), no layers before them."""

from __future__ import annotations

import keras
import tensorflow as tf

from ssd_mobilenet import anchor_generators
from ssd_mobilenet.layers import SlimConv

BOX_CODE_SIZE = 4
# The merged head's output channels are padded to a multiple of this: oneDNN's 1x1 convs ran
# 5-10% faster at 576 than at 570 channels (10x10x1024 input, batch 1 and 8, 2-core AVX-512 CPU).
MERGED_CHANNEL_MULTIPLE = 16
MERGED_HEADS = "BoxEncodingPredictor_ClassPredictor"


class BoxPredictor(keras.layers.Layer):
    """One feature map's box encoding and class heads.

    Each head is a conv with bias, no BN and no activation (`BoxEncodingPredictor`,
    `ClassPredictor`), preceded with `use_depthwise` by a depthwise conv -> BN -> ReLU6
    (`..._depthwise`). Output rows are ordered (y, x, anchor), as the TF1 reshape orders them.

    With `merge_heads` (inference copies, see `model.fold_batch_norm`; not with
    `use_depthwise`) the two heads are one conv, `BoxEncodingPredictor_ClassPredictor`, whose
    output channels are the box channels, then the class channels, then zero padding up to a
    multiple of `MERGED_CHANNEL_MULTIPLE`; `merge_from` fills it from an unmerged predictor.
    One conv reads the feature map once and runs one kernel instead of two: at batch 1 the
    box head's small conv (12-24 channels) costs a large part of the class head's, and the
    merged conv about as much as the class head alone (docs/measurements.md).

    Call args:
      x: float32 [N, H, W, C] feature map.
    Returns:
      box_encodings [N, H*W*A, 4] ([ty, tx, th, tw]) and class logits [N, H*W*A, num_class_slots].
    """

    def __init__(self, num_anchors, num_class_slots, kernel_size=1, use_depthwise=False, bn_epsilon=0.001,
                 fused_batch_norm=False, merge_heads=False, weight_bits=0, activation_bits=0, **kwargs):
        super().__init__(**kwargs)
        self.num_anchors = num_anchors
        self.num_class_slots = num_class_slots
        self.kernel_size = kernel_size
        self.use_depthwise = use_depthwise
        self.bn_epsilon = bn_epsilon
        self.fused_batch_norm = fused_batch_norm
        if merge_heads and (use_depthwise or weight_bits or activation_bits):
            # A quantization-aware graph rounds each head's weights and outputs on its own range.
            raise ValueError("merge_heads needs plain float conv heads (use_depthwise=False, no quantization)")
        self.merge_heads = merge_heads
        self.weight_bits = weight_bits
        self.activation_bits = activation_bits
        quant = dict(weight_bits=weight_bits, activation_bits=activation_bits)
        # Sublayers are attributes (not a dict of tuples) so TF checkpoints track them.
        depths = {"BoxEncodingPredictor": num_anchors * BOX_CODE_SIZE, "ClassPredictor": num_anchors * num_class_slots}
        if merge_heads:
            width = sum(depths.values())
            width = -(-width // MERGED_CHANNEL_MULTIPLE) * MERGED_CHANNEL_MULTIPLE
            self.merged = SlimConv(width, kernel_size, 1, batch_norm=False, relu6=False, name=MERGED_HEADS)
            self.heads = {MERGED_HEADS: [self.merged]}
        elif use_depthwise:
            self.box_encoding_depthwise, self.class_depthwise = (
                SlimConv(None, kernel_size, 1, depthwise=True, bn_epsilon=bn_epsilon, fused_batch_norm=fused_batch_norm,
                         name=f"{head}_depthwise", **quant) for head in depths)
            self.box_encoding = SlimConv(depths["BoxEncodingPredictor"], 1, 1, batch_norm=False, relu6=False,
                                         name="BoxEncodingPredictor", **quant)
            self.class_predictor = SlimConv(depths["ClassPredictor"], 1, 1, batch_norm=False, relu6=False,
                                            name="ClassPredictor", **quant)
            self.heads = {"BoxEncodingPredictor": [self.box_encoding_depthwise, self.box_encoding],
                          "ClassPredictor": [self.class_depthwise, self.class_predictor]}
        else:
            self.box_encoding = SlimConv(depths["BoxEncodingPredictor"], kernel_size, 1, batch_norm=False,
                                         relu6=False, name="BoxEncodingPredictor", **quant)
            self.class_predictor = SlimConv(depths["ClassPredictor"], kernel_size, 1, batch_norm=False,
                                            relu6=False, name="ClassPredictor", **quant)
            self.heads = {"BoxEncodingPredictor": [self.box_encoding], "ClassPredictor": [self.class_predictor]}

    def build(self, input_shape):
        for layers in self.heads.values():
            shape = input_shape
            for layer in layers:
                layer.build(shape)
                shape = layer.compute_output_shape(shape)

    def merge_from(self, source: "BoxPredictor") -> None:
        """Sets the merged conv from `source`'s two heads (same config, unmerged, built)."""
        if not self.merge_heads or source.merge_heads or source.use_depthwise:
            raise ValueError("merge_from copies an unmerged plain-conv predictor into a merged one")
        kernel = tf.concat([source.box_encoding.kernel, source.class_predictor.kernel], axis=-1)
        bias = tf.concat([source.box_encoding.bias, source.class_predictor.bias], axis=0)
        pad = self.merged.filters - int(kernel.shape[-1])
        self.merged.kernel.assign(tf.pad(kernel, [[0, 0], [0, 0], [0, 0], [0, pad]]))
        self.merged.bias.assign(tf.pad(bias, [[0, pad]]))

    def call(self, x):
        if self.merge_heads:
            y = self.merged(x)
            n = tf.shape(y)[0]
            boxes = self.num_anchors * BOX_CODE_SIZE
            classes = self.num_anchors * self.num_class_slots
            return (tf.reshape(y[..., :boxes], [n, -1, BOX_CODE_SIZE]),
                    tf.reshape(y[..., boxes:boxes + classes], [n, -1, self.num_class_slots]))
        outputs = []
        for head, width in (("BoxEncodingPredictor", BOX_CODE_SIZE), ("ClassPredictor", self.num_class_slots)):
            y = x
            for layer in self.heads[head]:
                y = layer(y)
            outputs.append(tf.reshape(y, [tf.shape(y)[0], -1, width]))
        return tuple(outputs)

    def compute_output_shape(self, input_shape):
        n, h, w, _ = input_shape
        rows = None if h is None or w is None else h * w * self.num_anchors
        return (n, rows, BOX_CODE_SIZE), (n, rows, self.num_class_slots)

    def get_config(self):
        return {**super().get_config(), "num_anchors": self.num_anchors, "num_class_slots": self.num_class_slots,
                "kernel_size": self.kernel_size, "use_depthwise": self.use_depthwise,
                "bn_epsilon": self.bn_epsilon, "fused_batch_norm": self.fused_batch_norm,
                "merge_heads": self.merge_heads, "weight_bits": self.weight_bits,
                "activation_bits": self.activation_bits}


def build(feature_maps, config, merge_heads: bool = False):
    """Applies `BoxPredictor_i` to feature map i and concatenates over the maps.

    `merge_heads`: one conv per map for both heads where the heads are plain float convs
    (`BoxPredictor(merge_heads=True)`); ignored with `box_predictor_use_depthwise` or quantization.

    Returns:
      box_encodings [N, num_anchors, 4] and class logits [N, num_anchors, num_class_slots]
      (the TF1 graph's `concat` and `concat_1`; 1917 anchors at 300x300).
    """
    boxes, classes = [], []
    for i, (fmap, anchors) in enumerate(zip(feature_maps, anchor_generators.anchors_per_location(config))):
        predictor = BoxPredictor(anchors, config.num_class_slots, config.box_predictor_kernel_size,
                                 config.box_predictor_use_depthwise, config.box_predictor_batch_norm_epsilon,
                                 config.fused_batch_norm,
                                 merge_heads=merge_heads and not (config.box_predictor_use_depthwise
                                                                  or config.weight_bits or config.activation_bits),
                                 weight_bits=config.weight_bits, activation_bits=config.activation_bits,
                                 name=f"BoxPredictor_{i}")
        b, c = predictor(fmap)
        boxes.append(b)
        classes.append(c)
    concat = keras.layers.Concatenate(axis=1, name="concat")
    concat_1 = keras.layers.Concatenate(axis=1, name="concat_1")
    return concat(boxes), concat_1(classes)
