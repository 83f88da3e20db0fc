"""`SSDMobileNetV1`: the Keras 3 network of the TF1 SSD MobileNet v1 graph (plain, FPN or PPN)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ssd_mobilenet import anchor_generators, box_coder, box_predictors, feature_extractors, postprocessing, preprocessing
from ssd_mobilenet import layers as layers_lib
from ssd_mobilenet.box_predictors.convolutional import BoxPredictor
from ssd_mobilenet.config.ssd_config import SSDConfig


def run_in_slices(fn, images, size: int, element_shape, dtype=tf.float32, concurrent: int = 1):
    """`fn(images)` computed on consecutive slices of `size` images (the last one may be
    shorter), concatenated along the batch. `element_shape`: fn's output shape, batch None.
    `concurrent`: the loop's parallel_iterations, how many slices are in flight at once (their
    intermediate tensors alive together); 1 runs one slice after the other."""
    n = tf.shape(images)[0]

    def loop():
        steps = (n + size - 1) // size
        array = tf.TensorArray(dtype, size=steps, infer_shape=False, element_shape=element_shape)

        def body(i, array):
            return i + 1, array.write(i, fn(images[i * size:(i + 1) * size]))

        _, array = tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), array),
                                 parallel_iterations=concurrent)
        return array.concat()

    # One slice's worth runs without the loop's slicing, TensorArray and concatenation.
    return tf.cond(n <= size, lambda: fn(images), loop)


def with_weights_as_constants(fn, variables):
    """`fn` reading `variables` (Keras variables) as constants of whatever graph it is traced into.

    Keras reads a variable inside a `StatelessScope` as the value mapped to it, and a value
    made by `tf.constant` while tracing is a Const node holding the weights. oneDNN reorders
    a constant filter into its kernel layout once and caches it (a variable's filter is
    reordered on every call). Traced inside a `tf.cond` branch or a `tf.while_loop` body, the
    constants are made there: a constant passed in from outside reaches the conv through a
    Switch or Enter node and is not cached. Outside a `tf.function` it just runs `fn`.
    """
    variables = list(variables)

    def traced(*args, **kwargs):
        if tf.executing_eagerly():
            return fn(*args, **kwargs)
        with tf.init_scope():  # eager, also while tracing: the values to embed
            values = [v.numpy() for v in variables]
        mapping = [(v, tf.constant(a)) for v, a in zip(variables, values)]
        del values
        with keras.StatelessScope(state_mapping=mapping):
            return fn(*args, **kwargs)
    return traced


class SSDMobileNetV1(keras.Model):
    """SSD MobileNet v1 with layers named after the TF1 scopes.

    The network maps a preprocessed image to raw predictions; `detect` adds the stages
    around it (preprocessing, anchors, box decoding, post-processing). Its parts are the
    config's, chosen as the OD API's builders choose them: the feature extractor
    (`ssd_mobilenet.feature_extractors`: ssd_mobilenet_v1, _fpn, _ppn), the box predictor
    (`ssd_mobilenet.box_predictors`) and the anchor generator (`ssd_mobilenet.anchor_generators`).

    Args:
      config: an `SSDConfig`.
      fold_batch_norm: build the feature extractor without batch norm layers, for weights
        with batch norm folded in, and plain conv heads merged (see `fold_batch_norm`; not
        the checkpoint's layout).
    Call:
      float32 [N, h, w, 3] preprocessed images (h, w: the config size; the feature
      extractor pads them to `pad_to_multiple`) -> dict with
        `box_encodings` [N, A, 4] ([ty, tx, th, tw], TF1 node `concat`),
        `class_predictions_with_background` [N, A, num_class_slots] (logits, `concat_1`).
      A = 1917 for the zoo config at 300x300, 51150 for the FPN zoo config at 640x640.
    Example:
      >>> model = SSDMobileNetV1(SSDConfig(num_classes=2))
      >>> out = model.detect(np.zeros([1, 480, 640, 3], np.uint8))
      >>> out["detection_boxes"].shape   # [1, 100, 4], [ymin, xmin, ymax, xmax]
    """

    def __init__(self, config: SSDConfig, fold_batch_norm: bool = False, **kwargs):
        if isinstance(config, dict):
            config = SSDConfig.from_dict(config)
        # === Layers and functional graph ===
        image = keras.Input((config.image_height, config.image_width, 3), dtype="float32", name="preprocessed_image")
        extractor = feature_extractors.for_config(config)
        feature_maps, endpoints = extractor.build(image, config, fold_batch_norm)
        # The inference copy (batch norm folded) also runs each map's two heads as one conv.
        box_encodings, class_logits = box_predictors.build_box_predictors(feature_maps, config,
                                                                          merge_heads=fold_batch_norm)
        super().__init__(inputs=image,
                         outputs={"box_encodings": box_encodings,
                                  "class_predictions_with_background": class_logits},
                         name=kwargs.pop("name", "ssd_mobilenet_v1"), **kwargs)
        # === Config and derived constants ===
        self.config = config
        self.batch_norm_folded = fold_batch_norm
        self.feature_map_names = [t._keras_history.operation.name for t in feature_maps]
        self.feature_map_shapes = [(int(t.shape[1]), int(t.shape[2])) for t in feature_maps]
        if self.feature_map_shapes != extractor.feature_map_shapes(config):
            # The converter reads anchors off TF1 graphs with the shapes computed without a model.
            raise RuntimeError(f"feature maps {self.feature_map_shapes} built, "
                               f"{extractor.feature_map_shapes(config)} computed")
        self.anchors = anchor_generators.generate_anchors(config, self.feature_map_shapes)
        # {layer name: its TF1 op scope under FeatureExtractor/MobilenetV1/}, in graph order.
        self.endpoint_scopes = {t._keras_history.operation.name: scope for scope, t in endpoints.items()}
        self._endpoint_names = list(self.endpoint_scopes)
        self.stem_end = extractor.stem_end(config)
        # TF1 weights the OD API builds that this network does not use: ((name pattern, reason), ...).
        self.unused_tf1_weights = extractor.unused_tf1_weights(config)
        object.__setattr__(self, "_split", None)

    @property
    def endpoint_names(self) -> list:
        """Every feature extractor layer's name in graph order (`Conv2d_0` ... extra layers; FPN's
        `projection_3`, `smoothing_2`, ...); `endpoint_scopes` has their TF1 op scopes."""
        return list(self._endpoint_names)

    def endpoint_model(self, names=None) -> keras.Model:
        """A model returning the named layers' outputs (default: all feature extractor layers)
        plus `box_encodings` and `class_predictions_with_background`, for stage-by-stage checks."""
        names = self._endpoint_names if names is None else names
        outputs = {n: self.get_layer(n).output for n in names}
        outputs.update(self.outputs_dict())
        return keras.Model(self.inputs, outputs)

    def outputs_dict(self) -> dict:
        return {"box_encodings": self.get_layer("concat").output,
                "class_predictions_with_background": self.get_layer("concat_1").output}

    def preprocess(self, images):
        """uint8 [N, H, W, 3], any H, W -> float32 [N, h, w, 3] (see `preprocessing`)."""
        return preprocessing.preprocess(images, self.config)

    def decode(self, box_encodings):
        """[N, A, 4] codes -> [N, A, 4] boxes [ymin, xmin, ymax, xmax] (unclipped)."""
        return box_coder.decode(box_encodings, self.anchors, self.config.box_coder_scales)

    def split(self, layer_name: str | None = None):
        """(stem, head): two Keras models sharing this model's layers, preprocessed image ->
        `layer_name`'s output (default `stem_end`) -> the outputs dict."""
        layer_name = layer_name or self.stem_end
        if self._split is None or self._split[0] != layer_name:
            features = self.get_layer(layer_name).output
            # One input tensor, not the list `self.inputs`: called on a tensor, the stem then matches
            # its structure (Keras warns otherwise).
            split = (layer_name, keras.Model(self.inputs[0], features), keras.Model(features, self.outputs_dict()))
            # Untracked: the views own no weights, and checkpoints must see the model's layers once.
            object.__setattr__(self, "_split", split)
        return self._split[1:]

    def predict_raw(self, images, slice_size: int | None = None, constant_weights: bool = False,
                    concurrent_slices: int = 1):
        """uint8 images -> (decoded boxes [N, A, 4], class logits [N, A, slots]).

        `slice_size`: run preprocessing and the stem (the high-resolution layers up to
        `stem_end`) on slices of this many images, one slice after the other, then the rest
        of the network on the whole batch. The allocator then holds one slice's large early
        activations instead of the batch's, while the late layers, whose cost is mostly
        their weights, still run batched. None runs everything on the whole batch.
        `constant_weights`: traced into a `tf.function`, every weight is a graph constant
        (`with_weights_as_constants`), the stem's made inside the slice loop.
        `concurrent_slices`: how many slices the loop runs at once (`run_in_slices`).
        """
        if slice_size is None:
            run = lambda x: self.predict_preprocessed(self.preprocess(x))  # noqa: E731
            return with_weights_as_constants(run, self.weights)(images) if constant_weights else run(images)
        stem, head = self.split()
        run_stem = lambda x: stem(self.preprocess(x), training=False)  # noqa: E731
        run_head = lambda f: self._decoded(head(f, training=False))  # noqa: E731
        if constant_weights:
            run_stem = with_weights_as_constants(run_stem, stem.weights)
            stem_ids = {id(v) for v in stem.weights}
            run_head = with_weights_as_constants(run_head, [v for v in self.weights if id(v) not in stem_ids])
        features = run_in_slices(run_stem, images, slice_size, stem.outputs[0].shape,
                                 tf.as_dtype(stem.outputs[0].dtype), concurrent=concurrent_slices)
        return run_head(features)

    def predict_preprocessed(self, preprocessed):
        """float32 [N, h, w, 3] preprocessed images -> (decoded boxes [N, A, 4], logits [N, A, slots])."""
        return self._decoded(self(preprocessed, training=False))

    def _decoded(self, out):
        # Under a mixed precision policy the heads compute in 16 bits; decoding and scores stay float32.
        codes = tf.cast(out["box_encodings"], tf.float32)
        return self.decode(codes), tf.cast(out["class_predictions_with_background"], tf.float32)

    def detect(self, images) -> dict:
        """uint8 [N, H, W, 3] images -> the output dict of `postprocessing.postprocess`."""
        boxes, logits = self.predict_raw(images)
        return postprocessing.postprocess(boxes, logits, self.config)

    def get_config(self):
        return {"config": self.config.to_dict(), "fold_batch_norm": self.batch_norm_folded, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(SSDConfig.from_dict(config["config"]), fold_batch_norm=config.get("fold_batch_norm", False),
                   name=config.get("name", "ssd_mobilenet_v1"))


PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def fold_batch_norm(model: SSDMobileNetV1, precision: str = "float32") -> SSDMobileNetV1:
    """An inference copy of `model` with every feature extractor batch norm folded into its
    convolution (`layers.fold_batch_norm`), computing in `precision`.

    Folding removes two full passes over every activation (the BN multiply and add) and
    lets Grappler fuse conv + bias + ReLU6 into one kernel. It rounds like a TF1 session
    with default optimisations (which folds the same way), ~1e-6 relative from the graph
    as written; `model` stays the exact reference. Heads with their own batch norm
    (`box_predictor_use_depthwise`, the weight-shared predictor's per-map batch norm after shared
    convs) keep it unfolded; plain conv heads are merged, one conv per feature map for box codes
    and class logits (`BoxPredictor(merge_heads=True)`).

    Args:
      model: an `SSDMobileNetV1` with unfolded batch norm and its weights.
      precision: "float32", or a Keras mixed policy ("mixed_bfloat16", "mixed_float16"):
        weights stay float32, layers compute in 16 bits; `predict_raw` returns float32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if model.batch_norm_folded:
        raise ValueError("model already has its batch norm folded")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        folded = SSDMobileNetV1(model.config, fold_batch_norm=True, name=model.name)
    finally:
        keras.config.set_dtype_policy(previous)
    for source in model.layers:
        if not source.weights:
            continue
        target = folded.get_layer(source.name)
        if isinstance(target, BoxPredictor) and target.merge_heads:
            target.merge_from(source)
        elif isinstance(source, layers_lib.SlimConv) and source.norm is not None and target.norm is None:
            kernel, bias = layers_lib.fold_batch_norm(source)
            if source.separable:  # the depthwise kernel as it is, batch norm into the pointwise one
                target.kernel.assign(source.kernel)
                target.pointwise_kernel.assign(kernel)
            else:
                target.kernel.assign(kernel)
            target.bias.assign(bias)
            for quant in ("weights_quant", "act_quant"):
                if getattr(source, quant) is not None:
                    getattr(target, quant).min.assign(getattr(source, quant).min)
                    getattr(target, quant).max.assign(getattr(source, quant).max)
        else:
            for a, b in zip(target.weights, source.weights, strict=True):
                a.assign(b)
    for layer in folded._flatten_layers(include_self=False):
        if isinstance(layer, layers_lib.SlimConv) and layer.weights_quant is not None:
            # A quantization-aware layer's (folded) kernel is rounded once, here, by the same op
            # its calls would run (the TF1 session constant-folds that subgraph too), instead
            # of on every call.
            layer.kernel.assign(layer.weights_quant(layer.kernel))
            layer.kernel_quantized = True
    return folded


def count_parameters(model: keras.Model) -> int:
    return int(sum(np.prod(v.shape) for v in model.weights))


# Ops whose multiply-adds a frame costs: the convolutions and matrix products (the rest of the
# network, batch norm, biases, ReLU6 and the box decoding, is a few multiplies per output, <1%).
_MULTIPLY_ADD_OPS = ("Conv2D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2")


def count_multiply_adds(model: keras.Model, size=None) -> int:
    """The multiply-adds of one frame through `model` (a Keras model of float32 [N, H, W, 3]
    images): every convolution and matrix product of its graph traced at batch 1 and `size`
    ((H, W); default: the model's input size), weight-shared layers counted each time they run.

    A Conv2D's output [1, h, w, c_out] with a [kh, kw, c_in, c_out] filter costs h*w*c_out*kh*kw*c_in;
    a depthwise conv's [1, h, w, c] output costs h*w*c*kh*kw; a MatMul [m, k] x [k, n] costs m*n*k.
    MobileNet v1 at 224x224 (the base up to Conv2d_13_pointwise) counts the 569 M of its paper's
    Table 8 less its 1 M classifier.
    """
    import tensorflow as tf
    height, width = size or model.input_shape[1:3]
    spec = tf.TensorSpec([1, height, width, model.input_shape[3]], tf.float32)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    total = 0
    for op in graph.get_operations():
        if op.type not in _MULTIPLY_ADD_OPS:
            continue
        out, weights = op.outputs[0].shape, op.inputs[1].shape
        if op.type == "Conv2D":
            total += int(np.prod(out)) * int(np.prod(weights[:3]))
        elif op.type == "DepthwiseConv2dNative":
            total += int(np.prod(out)) * int(np.prod(weights[:2]))
        else:
            total += int(np.prod(out)) * int(op.inputs[0].shape[-1])
    return total
