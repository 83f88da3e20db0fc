"""Recomputation (gradient checkpointing) of the MobileNet backbone in training steps.

Backpropagation needs the activations of the forward pass; a plain step keeps every layer's
(convolution output, batch norm output, ReLU6 output) until the backward pass reaches it. With
`Recomputed`, each MobileNet block the model builds (`Conv2d_0`, then each `Conv2d_i_depthwise` +
`Conv2d_i_pointwise` pair, up to the last one its feature extractor taps: Conv2d_13 for plain SSD
and FPN to level 5, Conv2d_11 for PPN) runs under `tf.recompute_grad`: the forward pass keeps
only the block's output, and the backward pass runs the block again from its input to get the
activations its gradient needs, one block at a time. Memory for the backbone's activations then
falls to about one tensor per block plus one block's intermediates, for about one more forward
pass of the backbone. The layers after the backbone (extra layers, FPN's pyramid, PPN's pools)
and the box predictor run as usual, from the tapped blocks' outputs (`BASE_TAPS`).

The recomputation runs the same ops on the same input, so losses and gradients are the plain
step's (tests/ssd_mobilenet/training/test_training_levers.py compares them).

Batch norm in training mode moves its moving statistics on every call, and the recomputation
calls each block twice. Each block therefore runs inside a `keras.StatelessScope`, which records
the layers' variable assignments instead of applying them: the block returns the moving
statistics' new values as extra outputs (outside the gradient), and they are assigned once, from
the forward pass. The recomputation's are discarded. Arithmetic is the plain call's
(`BatchNorm._train`'s `assign_sub` is `assign(moving - delta)` in Keras either way).

Segments are Keras functional models over the model's own layers (no weights of their own): the
model's checkpoint, weights and config are unchanged, only the trainer calls it differently.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ssd_mobilenet.config.type_names import SSD_MOBILENET_V1, SSD_MOBILENET_V1_FPN, SSD_MOBILENET_V1_PPN
from ssd_mobilenet.feature_extractors.mobilenet_v1 import MOBILENET_V1_BLOCKS
from ssd_mobilenet.feature_extractors.ssd_mobilenet_v1 import BASE_FEATURE_LAYERS
from ssd_mobilenet.feature_extractors import fpn, ppn
from ssd_mobilenet.layers import BatchNorm

# {feature extractor type: config -> the MobileNet layers whose outputs the layers after the
# backbone read}, in block order.
BASE_TAPS = {
    SSD_MOBILENET_V1: lambda config: list(BASE_FEATURE_LAYERS),
    SSD_MOBILENET_V1_FPN: lambda config: [fpn.LEVEL_LAYERS[level] for level in fpn.base_levels(config)],
    SSD_MOBILENET_V1_PPN: lambda config: [ppn.BASE_LAYER],
}


def block_outputs(last: str = "Conv2d_13_pointwise") -> list:
    """The layer names whose outputs end the recomputed segments: each MobileNet block's last
    layer, up to `last`."""
    names = [f"Conv2d_{i}" if kind == "conv" else f"Conv2d_{i}_pointwise" for i, kind, _, _ in MOBILENET_V1_BLOCKS]
    return names[:names.index(last) + 1]


class Recomputed:
    """Calls an `SSDMobileNetV1` (not batch-norm folded) like `model(images, training)`, with every
    MobileNet block under `tf.recompute_grad`.

    Call:
      images float32 [N, h, w, 3] preprocessed, training: bool -> the model's outputs dict
      (`box_encodings` [N, A, 4], `class_predictions_with_background` [N, A, slots]).
    """

    def __init__(self, model):
        if model.batch_norm_folded:
            raise ValueError("recompute trains the unfolded model")
        self.model = model
        taps = BASE_TAPS[model.config.feature_extractor_type](model.config)
        names = block_outputs(taps[-1])
        tensors = [model.inputs[0]] + [model.get_layer(name).output for name in names]
        self.segments = [keras.Model(a, b, name=f"recompute_{name}") for a, b, name in zip(tensors, tensors[1:], names)]
        self.feature_index = [names.index(name) for name in taps]
        features = [tensors[1 + i] for i in self.feature_index]
        self.head = keras.Model(features, model.outputs_dict(), name="recompute_head")
        self.moving = [[v for layer in segment._flatten_layers() if isinstance(layer, BatchNorm)
                        for v in (layer.moving_mean, layer.moving_variance)] for segment in self.segments]

    def __call__(self, images, training=False):
        net, outputs = images, []
        for segment, moving in zip(self.segments, self.moving):
            net = self._run(segment, moving, net, bool(training))
            outputs.append(net)
        return self.head([outputs[i] for i in self.feature_index], training=training)

    @staticmethod
    def _run(segment, moving, x, training):
        if not training:
            # Inference-mode batch norm (frozen) updates nothing: a plain recomputed call.
            return tf.recompute_grad(lambda t: segment(t, training=False))(x)

        def block(t):
            with keras.StatelessScope() as scope:
                y = segment(t, training=True)
            return (y, *[tf.stop_gradient(scope.get_current_value(v)) for v in moving])

        y, *updates = tf.recompute_grad(block)(x)
        for variable, value in zip(moving, updates):
            variable.assign(value)
        return y
