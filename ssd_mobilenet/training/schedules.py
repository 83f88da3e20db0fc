"""Learning-rate schedules of the TF1 Object Detection API, in TF1's float32 arithmetic.

Each schedule is a `keras.optimizers.schedules.LearningRateSchedule` of the optimiser's step
(`optimizer.iterations`, TF1's `global_step`: the number of updates applied before this one)
and computes the rate with the ops and the operation order of its TF1 counterpart, so the
rate of every step is the float32 value TF1 fed its optimiser:

- `constant_learning_rate`: the value as float32.
- `exponential_decay_learning_rate`: `tf.train.exponential_decay` (`rate * factor ^ (step /
  decay_steps)`, the exponent floored when `staircase`), after `burnin_steps` at
  `burnin_learning_rate` and floored at `min_learning_rate`, as the OD API's
  `exponential_decay_with_burnin` composes them (from 2019; earlier releases called
  `tf.train.exponential_decay` directly, which is the case burnin_steps = 0, min_learning_rate = 0).
- `cosine_decay_learning_rate`: the OD API's `cosine_decay_with_warmup`.
- `manual_step_learning_rate`: the OD API's `manual_stepping` (with its linear warm-up).
Where TF1 combined Python floats before they met a tensor, so does this module: the order of
the float64 and float32 roundings decides the last bit.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


class ConstantRate(keras.optimizers.schedules.LearningRateSchedule):
    """The rate `learning_rate` at every step."""

    def __init__(self, learning_rate: float):
        self.learning_rate = float(learning_rate)

    def __call__(self, step):
        return tf.constant(self.learning_rate, tf.float32)

    def get_config(self):
        return {"learning_rate": self.learning_rate}


class ExponentialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`initial * factor ^ ((step - burnin_steps) / decay_steps)` (floored exponent when
    `staircase`), `burnin_learning_rate` (0: `initial`) before `burnin_steps`, never below
    `min_learning_rate`."""

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_factor: float, staircase: bool = True,
                 burnin_learning_rate: float = 0.0, burnin_steps: int = 0, min_learning_rate: float = 0.0):
        if decay_steps <= 0:
            raise ValueError(f"decay_steps must be positive, got {decay_steps}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.decay_factor = float(decay_factor)
        self.staircase = bool(staircase)
        self.burnin_learning_rate = float(burnin_learning_rate) or self.initial_learning_rate
        self.burnin_steps = int(burnin_steps)
        self.min_learning_rate = float(min_learning_rate)

    def __call__(self, step):
        step = tf.convert_to_tensor(step)
        # tf.train.exponential_decay: everything cast to the rate's float32, then divided,
        # floored, raised and multiplied in this order.
        initial = tf.constant(self.initial_learning_rate, tf.float32)
        p = tf.cast(step - self.burnin_steps, tf.float32) / tf.cast(self.decay_steps, tf.float32)
        if self.staircase:
            p = tf.floor(p)
        decayed = initial * tf.pow(tf.constant(self.decay_factor, tf.float32), p)
        if self.burnin_steps:
            decayed = tf.where(tf.cast(step, tf.int32) < self.burnin_steps,
                               tf.constant(self.burnin_learning_rate, tf.float32), decayed)
        if self.min_learning_rate:
            decayed = tf.maximum(decayed, tf.constant(self.min_learning_rate, tf.float32))
        return decayed

    def get_config(self):
        return dict(vars(self))


class CosineDecayWithWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from `warmup_learning_rate` over `warmup_steps`, `hold_base_rate_steps`
    at `learning_rate_base`, then a half cosine to 0 at `total_steps`; 0 after it."""

    def __init__(self, learning_rate_base: float, total_steps: int, warmup_learning_rate: float = 0.0,
                 warmup_steps: int = 0, hold_base_rate_steps: int = 0):
        if learning_rate_base < warmup_learning_rate:
            raise ValueError("learning_rate_base must be at least warmup_learning_rate")
        if total_steps < warmup_steps:
            raise ValueError("total_steps must be at least warmup_steps")
        self.learning_rate_base = float(learning_rate_base)
        self.total_steps = int(total_steps)
        self.warmup_learning_rate = float(warmup_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.hold_base_rate_steps = int(hold_base_rate_steps)

    def __call__(self, step):
        step = tf.convert_to_tensor(step)
        t = tf.cast(step, tf.float32)
        base = self.learning_rate_base
        start = self.warmup_steps + self.hold_base_rate_steps
        # pi * (t - warmup - hold) / float(total - warmup - hold), each Python number meeting
        # the float32 tensor on its own; 0.5 * base is a Python (float64) product first.
        span = float(self.total_steps - start)
        rate = 0.5 * base * (1 + tf.cos(math.pi * (t - self.warmup_steps - self.hold_base_rate_steps) / span))
        if self.hold_base_rate_steps > 0:
            rate = tf.where(step > start, rate, tf.constant(base, tf.float32))
        if self.warmup_steps > 0:
            slope = (base - self.warmup_learning_rate) / self.warmup_steps
            warmup = slope * t + self.warmup_learning_rate
            rate = tf.where(step < self.warmup_steps, warmup, rate)
        return tf.where(step > self.total_steps, tf.constant(0.0, tf.float32), rate)

    def get_config(self):
        return dict(vars(self))


class ManualStepping(keras.optimizers.schedules.LearningRateSchedule):
    """`rates[i]` from `boundaries[i - 1]` on (`rates[0]` before the first boundary); with
    `warmup`, linear from `rates[0]` to `rates[1]` over the steps before the first boundary."""

    def __init__(self, boundaries, rates, warmup: bool = False):
        boundaries, rates = [int(b) for b in boundaries], [float(r) for r in rates]
        if any(b < 0 for b in boundaries) or any(b2 <= b1 for b1, b2 in zip(boundaries, boundaries[1:])):
            raise ValueError(f"boundaries must be increasing positive steps, got {boundaries}")
        if len(rates) != len(boundaries) + 1:
            raise ValueError(f"{len(rates)} rates for {len(boundaries)} boundaries: need one more rate than boundaries")
        if boundaries and boundaries[0] == 0:
            raise ValueError("the first boundary cannot be step 0")
        self.boundaries, self.rates, self.warmup = boundaries, rates, bool(warmup)

    def __call__(self, step):
        boundaries, rates = self.boundaries, self.rates
        if self.warmup and boundaries:
            # Python float64 rates for each warm-up step, as the OD API lists them.
            slope = (rates[1] - rates[0]) * 1.0 / boundaries[0]
            warmup_steps = list(range(boundaries[0]))
            rates = [rates[0] + slope * s for s in warmup_steps] + rates[1:]
            boundaries = warmup_steps + boundaries
        else:
            boundaries = [0] + boundaries
        n = len(boundaries)
        step = tf.convert_to_tensor(step)
        index = tf.reduce_max(tf.where(step >= tf.constant(boundaries, step.dtype), tf.range(n), tf.zeros([n], tf.int32)))
        # One-hot times the rates, summed: the selected rate exactly (the others add zeros).
        return tf.reduce_sum(tf.constant(rates, tf.float32) * tf.one_hot(index, n, dtype=tf.float32))

    def get_config(self):
        return {"boundaries": self.boundaries, "rates": self.rates, "warmup": self.warmup}
