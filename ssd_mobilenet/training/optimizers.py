"""The TF1 optimisers the Object Detection API trained with, as Keras 3 optimisers.

Keras' own RMSprop, SGD-with-momentum and Adam are not TF1's: Keras' RMSprop starts its
mean square at 0 and adds epsilon outside the square root (TF1 starts it at 1 and adds epsilon
inside), its momentum folds the learning rate into the velocity, and its Adam computes the
bias corrections with `pow`. Continuing a TF1 training run with them changes its updates
from the first step. These optimisers run the fused kernels TF1's `tf.train.*Optimizer`
ran (`ResourceApplyRMSProp`, `ResourceApplyMomentum`, `ResourceApplyAdam`) on TF1's slots,
so each update is the one TF1 computed; they are still Keras optimisers (schedules,
`iterations`, checkpointing, `LossScaleOptimizer`).

Slots (one per trainable variable, named after TF1's): RMSProp `rms` (starts at 1) and
`momentum`; Momentum `momentum`; Adam `m`, `v` and the step's `beta1_power`/`beta2_power`
(start at beta1/beta2 and are multiplied by them after every step, as TF1's non-slot
variables were, rather than recomputed with `pow`).
"""

from __future__ import annotations

import keras
import tensorflow as tf


def _handle(variable):
    # The fused kernels update a resource in place: a tf.Variable's own, or the one a Keras 3
    # variable wraps (Keras hands `update_step` either, depending on the distribution path).
    if isinstance(variable, tf.Variable):
        return variable.handle
    return variable.value.handle


class _Optimizer(keras.optimizers.Optimizer):
    """A Keras optimiser that, without a distribution strategy, does not all-reduce its gradients.

    Keras sums them over the replicas with `ReplicaContext.all_reduce` even under the default
    strategy (one replica: the sum is the gradient itself), and traced, that call wraps them in a
    `tf.custom_gradient`, which in a graph registers a gradient function in TensorFlow's global
    registry for good. The function holds the trace's tensors, so a step function traced and
    dropped (`memory_budget` traces each batch size apart; a `Trainer` no longer used) kept its
    graph and, through the graph's captures, every variable it updated: weights, slots and
    averages (7 MiB for a depth-0.25 model, per trace). Under a strategy Keras' sum stays."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if not tf.distribute.has_strategy():
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


class RMSProp(_Optimizer):
    """`tf.compat.v1.train.RMSPropOptimizer` (not centered):
    rms = decay * rms + (1 - decay) * g^2; mom = momentum * mom + lr * g / sqrt(rms + epsilon);
    var -= mom."""

    def __init__(self, learning_rate=0.001, decay: float = 0.9, momentum: float = 0.0, epsilon: float = 1e-10,
                 name: str = "RMSProp", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.decay, self.momentum, self.epsilon = float(decay), float(momentum), float(epsilon)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._rms = [self.add_variable_from_reference(v, "rms", initializer="ones") for v in var_list]
        self._mom = [self.add_variable_from_reference(v, "momentum", initializer="zeros") for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyRMSProp(
            var=_handle(variable), ms=_handle(self._rms[i]), mom=_handle(self._mom[i]),
            lr=tf.cast(learning_rate, dtype), rho=tf.constant(self.decay, dtype),
            momentum=tf.constant(self.momentum, dtype), epsilon=tf.constant(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype))

    def get_config(self):
        return {**super().get_config(), "decay": self.decay, "momentum": self.momentum, "epsilon": self.epsilon}


class Momentum(_Optimizer):
    """`tf.compat.v1.train.MomentumOptimizer` (not Nesterov): accum = momentum * accum + g;
    var -= lr * accum."""

    def __init__(self, learning_rate=0.001, momentum: float = 0.9, name: str = "Momentum", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.momentum = float(momentum)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._accum = [self.add_variable_from_reference(v, "momentum", initializer="zeros") for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyMomentum(
            var=_handle(variable), accum=_handle(self._accum[i]), lr=tf.cast(learning_rate, dtype),
            grad=tf.cast(gradient, dtype), momentum=tf.constant(self.momentum, dtype), use_nesterov=False)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum}


class Adam(_Optimizer):
    """`tf.compat.v1.train.AdamOptimizer`: m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2);
    var -= lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon), the powers kept as
    running products."""

    def __init__(self, learning_rate=0.001, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                 name: str = "Adam", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "m", initializer="zeros") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "v", initializer="zeros") for v in var_list]
        self._beta1_power = self.add_variable((), initializer=keras.initializers.Constant(self.beta1),
                                              name="beta1_power")
        self._beta2_power = self.add_variable((), initializer=keras.initializers.Constant(self.beta2),
                                              name="beta2_power")

    def update_step(self, gradient, variable, learning_rate):
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(self._m[i]), v=_handle(self._v[i]),
            beta1_power=tf.cast(self._beta1_power, dtype), beta2_power=tf.cast(self._beta2_power, dtype),
            lr=tf.cast(learning_rate, dtype), beta1=tf.constant(self.beta1, dtype),
            beta2=tf.constant(self.beta2, dtype), epsilon=tf.constant(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype), use_nesterov=False)

    # Not converted by AutoGraph (nothing here depends on a tensor's value): converted, this method
    # kept every step function that traced it alive after the function was dropped (see `_Optimizer`).
    @tf.autograph.experimental.do_not_convert
    def apply(self, grads, trainable_variables=None):
        result = super().apply(grads, trainable_variables)
        # After every variable's update, as TF1's `_finish` advanced the powers.
        self._beta1_power.assign(self._beta1_power * self.beta1)
        self._beta2_power.assign(self._beta2_power * self.beta2)
        return result

    def get_config(self):
        return {**super().get_config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}


def clip_gradients_by_global_norm(grads, max_norm: float) -> list:
    """All gradients rescaled together so that their global L2 norm is at most `max_norm`
    (`tf.clip_by_global_norm`): what model_lib's `tf.contrib.layers.optimize_loss` did with a
    float `clip_gradients`, which model_lib passed `gradient_clipping_by_norm` as. None
    gradients stay None."""
    return tf.clip_by_global_norm(grads, max_norm)[0]
