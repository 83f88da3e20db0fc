"""Moving averages of the trained weights, as TF1's `tf.train.ExponentialMovingAverage`.

The OD API wrapped its optimiser in `MovingAverageOptimizer` when the config's
`use_moving_average` asked for it: after every step each trained variable's shadow moved
towards it, `shadow -= (shadow - var) * (1 - decay)` in float32, with `decay` fixed (the OD
API passed no `num_updates`) or, given `num_updates`, `min(decay, (1 + n) / (10 + n))`; the
checkpoint it saved held the averages in place of the weights. Keras' own EMA computes
`decay * shadow + (1 - decay) * var`, which rounds differently.
"""

from __future__ import annotations

import tensorflow as tf


class MovingAverage(tf.Module):
    """Shadows of `variables`, starting at their current values.

    Args:
      variables: the trained variables (Keras or tf.Variables).
      decay: the average's decay (the OD API's `moving_average_decay`).
      num_updates: None (fixed decay, as the OD API used it) or a callable returning the
        int step, which caps the decay early in training as TF1 did.
    """

    def __init__(self, variables, decay: float, num_updates=None, name: str = "moving_average"):
        super().__init__(name=name)
        self._variables = list(variables)
        self.decay = float(decay)
        self._num_updates = num_updates
        # A copy of each value: a variable made from another's value tensor shares its buffer until
        # the first update of either copies it, so a training process would gain a copy of the
        # weights at its first step and measure its memory low before (`memory_budget`).
        self.shadows = [tf.Variable(tf.raw_ops.DeepCopy(x=tf.convert_to_tensor(v)), trainable=False,
                                    name=_name(v) + "_ExponentialMovingAverage")
                        for v in self._variables]

    def _decay(self):
        decay = tf.constant(self.decay, tf.float32)
        if self._num_updates is not None:
            n = tf.cast(self._num_updates(), tf.float32)
            decay = tf.minimum(decay, (1.0 + n) / (10.0 + n))
        return decay

    def update(self) -> None:
        """Moves every shadow one step towards its variable (call after each optimiser step)."""
        one_minus = 1.0 - self._decay()
        for shadow, v in zip(self.shadows, self._variables):
            shadow.assign_sub((shadow - tf.convert_to_tensor(v)) * tf.cast(one_minus, shadow.dtype))

    def copy_to(self, variables=None) -> None:
        """Writes the averages into `variables` (default: the averaged ones), as the OD API's
        saved checkpoint held them."""
        for target, shadow in zip(variables or self._variables, self.shadows):
            target.assign(shadow)


def _name(v) -> str:
    name = getattr(v, "path", None) or v.name
    return name.split(":")[0].replace("/", "_")
