"""Mixed precision training: the model computes in 16 bits, its variables and the losses stay float32.

`with_policy(model, precision)` is a copy of an `SSDMobileNetV1` built under a Keras dtype
policy ("mixed_float16" or "mixed_bfloat16": float32 variables, layers compute in 16 bits, batch
norm in float32, see `layers.BatchNorm`) holding the same weights. The trainer casts the network's
outputs (box codes, class logits) to float32 before the loss, so matching, hard example mining and
the losses are the float32 computation on 16-bit predictions, and the regularisation loss and the
gradients (taken with respect to the float32 variables through the autocasts) are float32.

float16 has 5 exponent bits: small gradients underflow to zero in the backward pass. For
"mixed_float16" the optimiser is wrapped in `keras.optimizers.LossScaleOptimizer` (dynamic loss
scaling): the loss is multiplied by the scale (initially 2^15) before the gradients are taken,
the gradients are divided by it before the update, a step whose gradients are not all finite is
skipped (no update, `iterations` does not advance) and halves the scale, and 2000 finite steps in
a row double it. The scale is a power of two, so scaling and unscaling are exact. The scale and
its step counter are optimiser variables, checkpointed with it. bfloat16 has float32's exponent
range and needs no scaling. On a CPU without 16-bit units the same code runs, slower; where a GPU
is visible the policy's float16 kernels run on it.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from ssd_mobilenet.model import PRECISIONS, SSDMobileNetV1


def check(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def of_model(model) -> str:
    """The Keras dtype policy the model was built under: "float32", "mixed_bfloat16" or "mixed_float16"."""
    return model.dtype_policy.name


def with_policy(model: SSDMobileNetV1, precision: str) -> SSDMobileNetV1:
    """`model` itself when it computes in `precision` already, else a copy built under that policy
    with `model`'s weights assigned (variables are float32 under every policy, so the values are
    exactly `model`'s). The copy has the same variable paths: its checkpoint is `model`'s layout."""
    if of_model(model) == check(precision):
        return model
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        copy = SSDMobileNetV1(model.config, fold_batch_norm=model.batch_norm_folded, name=model.name)
    finally:
        keras.config.set_dtype_policy(previous)
    for target, source in zip(copy.weights, model.weights, strict=True):
        if target.path != source.path:
            raise RuntimeError(f"{target.path} built under {precision}, {source.path} in the model")
        target.assign(source)
    return copy


def loss_scaled(optimizer, precision: str):
    """`optimizer` wrapped in a `LossScaleOptimizer` for "mixed_float16", else `optimizer`."""
    if check(precision) == "mixed_float16":
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def is_loss_scaled(optimizer) -> bool:
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def scale_loss(optimizer, loss):
    """The loss to differentiate: `loss` times the current loss scale (`loss` itself unscaled)."""
    return optimizer.scale_loss(loss) if is_loss_scaled(optimizer) else loss


def gradient_scale(optimizer):
    """What the gradients of `scale_loss` are multiplied by: the loss scale (a float32 scalar), or 1.0."""
    return tf.convert_to_tensor(optimizer.dynamic_scale) if is_loss_scaled(optimizer) else 1.0
