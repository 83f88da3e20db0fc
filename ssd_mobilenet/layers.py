"""Keras layers whose variables carry the TF1 slim names.

A slim layer `scope/weights` (+ `scope/BatchNorm/{gamma,beta,moving_mean,moving_variance}`
or `scope/biases`) becomes one Keras layer named `scope` with variables of the same leaf
names, so a Keras variable path is the TF1 name without its outer scope
(`FeatureExtractor/MobilenetV1/`). That makes the weight map a rename, not a lookup table.

Tensors are NHWC float32. Convolutions use TensorFlow's SAME padding (for stride 2 with an
odd total pad, the extra row/column goes at the bottom/right), which is what the TF1 graph
does and what `keras.applications.MobileNet` does not.
"""

from __future__ import annotations

import keras
import tensorflow as tf


# slim.batch_norm's default decay, which the OD API's hyperparams.proto keeps (configs set 0.9997).
DEFAULT_BATCH_NORM_DECAY = 0.999


class BatchNorm(keras.layers.Layer):
    """Batch norm with slim's variable names and either TF1 arithmetic.

    Unfused (`fused=False`) is the op sequence slim builds when the fused kernel is off:
    `inv = rsqrt(var + eps) * gamma; y = x * inv + (beta - mean * inv)`. `fused=True` runs
    the FusedBatchNorm kernel that newer exports contain. The two round differently, so the
    model reproduces whichever the source graph used.

    With `training=True` it normalises with the batch's statistics and moves the moving ones
    towards them, as `slim.batch_norm(is_training=True)` did with its update ops run in the
    same step: unfused, `tf.nn.moments` (population variance) for both; fused, the kernel's
    batch mean and its Bessel-corrected variance for the update; the update
    `moving -= (moving - batch) * (1 - decay)` (`assign_moving_average`, no zero debiasing).
    `decay` is a training setting, not a weight: the trainer sets it from the pipeline.config.

    Under a mixed precision policy (16-bit compute) the input is cast to float32 and back:
    statistics, normalisation and updates are float32 arithmetic on the float32 variables,
    which are not autocast to 16 bits (as Keras' own BatchNormalization does it; in float16 the
    moving averages' small steps would round away and a variance can overflow).
    """

    def __init__(self, epsilon=0.001, fused=False, decay=DEFAULT_BATCH_NORM_DECAY, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.fused = fused
        self.decay = decay

    def build(self, input_shape):
        c = int(input_shape[-1])
        self.gamma = self.add_weight(name="gamma", shape=(c,), initializer="ones", autocast=False)
        self.beta = self.add_weight(name="beta", shape=(c,), initializer="zeros", autocast=False)
        # Under a tf.distribute strategy the first replica's update moves every copy, as TF1's
        # multi-clone training ran the first clone's update ops only; no effect on one device.
        self.moving_mean = self.add_weight(name="moving_mean", shape=(c,), initializer="zeros", trainable=False,
                                           aggregation="only_first_replica", autocast=False)
        self.moving_variance = self.add_weight(name="moving_variance", shape=(c,), initializer="ones",
                                               trainable=False, aggregation="only_first_replica", autocast=False)

    def call(self, x, training=False):
        dtype = x.dtype  # float32, or 16 bits under a mixed policy (class docstring)
        x = tf.cast(x, tf.float32)  # a no-op in float32
        return tf.cast(self._train(x) if training else self._infer(x), dtype)

    def _infer(self, x):
        if self.fused:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x, self.gamma, self.beta, self.moving_mean, self.moving_variance,
                epsilon=self.epsilon, is_training=False)
            return y
        inv = tf.math.rsqrt(self.moving_variance + self.epsilon) * self.gamma
        return x * inv + (self.beta - self.moving_mean * inv)

    def _train(self, x):
        if self.fused:
            y, mean, variance = tf.compat.v1.nn.fused_batch_norm(x, self.gamma, self.beta, epsilon=self.epsilon,
                                                                 is_training=True)
        else:
            mean, variance = tf.nn.moments(x, [0, 1, 2])
            y = tf.nn.batch_normalization(x, mean, variance, self.beta, self.gamma, self.epsilon)
        # assign_moving_average's arithmetic: slim passed decay as a Python float, so 1 - decay
        # is a float64 difference rounded to float32 (not a float32 subtraction), then one
        # assign_sub per statistic.
        one_minus = tf.constant(1.0 - self.decay, tf.float32)
        for moving, batch in ((self.moving_mean, mean), (self.moving_variance, variance)):
            moving.assign_sub((moving - tf.stop_gradient(batch)) * one_minus)
        return y

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon, "fused": self.fused, "decay": self.decay}


class FakeQuant(keras.layers.Layer):
    """`tf.quantization.fake_quant_with_min_max_vars` with its range as variables `min`, `max`.

    A quantization-aware TF1 graph (`graph_rewriter.quantization`, tf.contrib.quantize)
    rounds every layer's folded weights (scope `weights_quant`, narrow range: 2^bits - 1
    levels) and its output after ReLU6 or the bias add (`act_quant`, 2^bits levels) to
    the grid its trained range gives. The op exists in float32 only: the layer computes in
    float32 under any policy (Keras casts its input), and `SlimConv` casts the result back.
    """

    def __init__(self, num_bits=8, narrow_range=False, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.num_bits = int(num_bits)
        self.narrow_range = bool(narrow_range)

    def build(self, input_shape=None):
        if not self.built:
            # contrib.quantize initialises the ranges to [-6, 6]; a checkpoint holds the trained ones.
            self.min = self.add_weight(name="min", shape=(), initializer=keras.initializers.Constant(-6.0),
                                       trainable=False, dtype="float32")
            self.max = self.add_weight(name="max", shape=(), initializer=keras.initializers.Constant(6.0),
                                       trainable=False, dtype="float32")
            self.built = True

    def call(self, x):
        return tf.quantization.fake_quant_with_min_max_vars(x, self.min, self.max, num_bits=self.num_bits,
                                                            narrow_range=self.narrow_range)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "num_bits": self.num_bits, "narrow_range": self.narrow_range}


class SlimConv(keras.layers.Layer):
    """`slim.conv2d` / `slim.separable_conv2d` with optional BN and ReLU6.

    Args:
      filters: output channels of a regular or separable conv; ignored for `depthwise=True`
        (channel multiplier 1, as every depthwise layer of this model has).
      kernel_size, stride: square kernel and stride.
      depthwise: a depthwise conv with variable `depthwise_weights` [k, k, C, 1]
        instead of a conv with `weights` [k, k, C_in, filters]
        (`slim.separable_conv2d(num_outputs=None)`).
      separable: a depthwise conv then a 1x1 conv in one layer, variables `depthwise_weights`
        [k, k, C, 1] and `pointwise_weights` [1, 1, C, filters] (`slim.separable_conv2d` with
        `num_outputs`, as FPN and the weight-shared box predictor build it with `use_depthwise`):
        `tf.nn.separable_conv2d`, the op slim runs.
      batch_norm: add a `BatchNorm` sublayer (slim: `normalizer_fn`); otherwise a `biases` variable.
      bias: with `batch_norm=False`, whether the layer has `biases` (default). False is slim's
        `normalizer_fn=tf.identity`: no bias, no normalisation (the weight-shared box predictor's
        tower convs, whose batch norm is a separate layer per feature map).
      relu6: apply ReLU6 at the end (slim: `activation_fn=tf.nn.relu6`).
      explicit_padding: pad symmetrically by (k-1)/2 and convolve VALID
        (`use_explicit_padding` in the OD API) instead of SAME.
      weight_bits, activation_bits: > 0 for a layer of a quantization-aware graph: the
        kernel (batch norm folded in first, as that graph does) goes through a `FakeQuant`
        sublayer `weights_quant` (narrow range) and the output through `act_quant`.
    """

    def __init__(self, filters=None, kernel_size=1, stride=1, depthwise=False, batch_norm=True, relu6=True,
                 explicit_padding=False, bn_epsilon=0.001, fused_batch_norm=False, weight_bits=0, activation_bits=0,
                 separable=False, bias=True, **kwargs):
        super().__init__(**kwargs)
        if depthwise and separable:
            raise ValueError("depthwise (no pointwise conv) and separable exclude each other")
        if (weight_bits or activation_bits) and separable:
            raise ValueError("quantization-aware separable convs are not supported")
        self.filters = filters
        self.kernel_size = kernel_size
        self.stride = stride
        self.depthwise = depthwise
        self.separable = separable
        self.bias_without_norm = bool(bias)
        self.use_bias = self.bias_without_norm and not batch_norm
        self.batch_norm = batch_norm
        self.relu6 = relu6
        self.explicit_padding = explicit_padding
        self.bn_epsilon = bn_epsilon
        self.fused_batch_norm = fused_batch_norm
        self.norm = BatchNorm(bn_epsilon, fused_batch_norm, name="BatchNorm") if batch_norm else None
        self.weight_bits = int(weight_bits)
        self.activation_bits = int(activation_bits)
        self.weights_quant = FakeQuant(weight_bits, narrow_range=True, name="weights_quant") if weight_bits else None
        self.act_quant = FakeQuant(activation_bits, name="act_quant") if activation_bits else None
        # Set by `model.fold_batch_norm` on its inference copy: `kernel` already holds the
        # rounded folded weights, so calls skip `weights_quant` (the TF1 session folds that
        # constant subgraph once too).
        self.kernel_quantized = False

    def build(self, input_shape):
        c_in = int(input_shape[-1])
        k = self.kernel_size
        self.pointwise_kernel = None
        if self.depthwise or self.separable:
            self.kernel = self.add_weight(name="depthwise_weights", shape=(k, k, c_in, 1))
            c_out = c_in
        else:
            self.kernel = self.add_weight(name="weights", shape=(k, k, c_in, self.filters))
            c_out = self.filters
        if self.separable:
            self.pointwise_kernel = self.add_weight(name="pointwise_weights", shape=(1, 1, c_in, self.filters))
            c_out = self.filters
        self.bias = None
        if self.norm is not None:
            self.norm.build(tuple(input_shape[:-1]) + (c_out,))
        elif self.use_bias:
            self.bias = self.add_weight(name="biases", shape=(c_out,), initializer="zeros")
        for quant in (self.weights_quant, self.act_quant):
            if quant is not None:
                quant.build()

    def call(self, x, training=False):
        padding = "SAME"
        if self.explicit_padding and self.kernel_size > 1:
            beg = (self.kernel_size - 1) // 2
            end = self.kernel_size - 1 - beg
            x = tf.pad(x, [[0, 0], [beg, end], [beg, end], [0, 0]])
            padding = "VALID"
        strides = [1, self.stride, self.stride, 1]
        kernel, bias = self.kernel, self.bias
        if self.weights_quant is not None and not self.kernel_quantized:
            if self.norm is not None:
                # The quantization-aware graph folds batch norm into the weights before rounding
                # them (`mul_fold`, `BatchNorm_Fold/bias`), in the order `fold_batch_norm` uses.
                kernel, bias = fold_batch_norm(self)
            kernel = tf.cast(self.weights_quant(kernel), x.dtype)
        if self.separable:
            y = tf.nn.separable_conv2d(x, kernel, self.pointwise_kernel, strides, padding)
        elif self.depthwise:
            y = tf.nn.depthwise_conv2d(x, kernel, strides, padding)
        else:
            y = tf.nn.conv2d(x, kernel, strides, padding)
        if self.norm is not None and self.weights_quant is None:
            y = self.norm(y, training=training)
        elif bias is not None:
            y = tf.nn.bias_add(y, bias)
        if self.relu6:
            y = tf.nn.relu6(y)
        return tf.cast(self.act_quant(y), y.dtype) if self.act_quant is not None else y

    def compute_output_shape(self, input_shape):
        n, h, w, c = input_shape
        c_out = c if self.depthwise else self.filters

        def out(size):
            if size is None:
                return None
            if self.explicit_padding:
                return (size + self.kernel_size - 1 - self.kernel_size) // self.stride + 1
            return -(-size // self.stride)
        return (n, out(h), out(w), c_out)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "kernel_size": self.kernel_size,
                "stride": self.stride, "depthwise": self.depthwise, "batch_norm": self.batch_norm,
                "relu6": self.relu6, "explicit_padding": self.explicit_padding,
                "bn_epsilon": self.bn_epsilon, "fused_batch_norm": self.fused_batch_norm,
                "weight_bits": self.weight_bits, "activation_bits": self.activation_bits,
                "separable": self.separable, "bias": self.bias_without_norm}


def fold_batch_norm(layer: SlimConv):
    """(kernel, bias) of `layer` with its batch norm folded in: float32 tensors such that
    `conv(x, kernel) + bias == norm(conv(x, weights))` up to rounding.

    The arithmetic is float32 in the order Grappler uses when it folds a frozen TF1 graph's
    batch norm constants into the convolution (`inv = rsqrt(var + eps) * gamma`,
    `kernel = weights * inv`, `bias = beta - mean * inv`), so the folded model rounds like
    the TF1 session with its default optimisations, not like the graph as written
    (~1e-6 relative apart). A depthwise kernel [k, k, C, 1] scales along C, a regular
    kernel [k, k, C_in, C_out] along C_out; of a separable layer the pointwise kernel
    [1, 1, C, C_out] is the one returned, scaled along C_out (its depthwise kernel stays).
    """
    norm = layer.norm
    inv = tf.math.rsqrt(tf.convert_to_tensor(norm.moving_variance) + norm.epsilon) * tf.convert_to_tensor(norm.gamma)
    kernel = tf.convert_to_tensor(layer.pointwise_kernel if layer.separable else layer.kernel)
    kernel = kernel * (inv[:, None] if layer.depthwise else inv)
    return kernel, tf.convert_to_tensor(norm.beta) - tf.convert_to_tensor(norm.moving_mean) * inv


class PadToMultiple(keras.layers.Layer):
    """Zero-pads [N, H, W, C] at the bottom/right to H and W that are multiples of `multiple`
    (TF1 `ops.pad_to_multiple`, which concatenates zero rows, then zero columns)."""

    def __init__(self, multiple: int, **kwargs):
        super().__init__(**kwargs)
        self.multiple = int(multiple)

    def call(self, x):
        shape = tf.shape(x)
        m = self.multiple
        return tf.pad(x, [[0, 0], [0, -shape[1] % m], [0, -shape[2] % m], [0, 0]])

    def compute_output_shape(self, input_shape):
        n, h, w, c = input_shape
        up = lambda s: None if s is None else -(-s // self.multiple) * self.multiple  # noqa: E731
        return (n, up(h), up(w), c)

    def get_config(self):
        return {**super().get_config(), "multiple": self.multiple}


class PadToEven(PadToMultiple):
    """`PadToMultiple(2)`: the 2017 exports' padding of the extra layers' inputs."""

    def __init__(self, **kwargs):
        kwargs.pop("multiple", None)
        super().__init__(2, **kwargs)
