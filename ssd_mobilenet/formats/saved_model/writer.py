"""SavedModel export: the converted detector as a self-contained TF2 SavedModel.

What the written SavedModel offers its clients:
- `serving_default` signature: `input_tensor` uint8 [N, H, W, 3] (any N >= 0, H, W) -> the TF2
  OD API output dict (`detections.ALL_OUTPUTS`, float32; boxes [ymin, xmin, ymax, xmax]
  normalised to the image), for TF Serving, `saved_model_cli run` and
  `loaded.signatures["serving_default"](input_tensor=...)`;
- the loaded object itself is callable on the image tensor, as the TF2 OD API's exported
  models are (`detect_fn = tf.saved_model.load(path); detect_fn(input_tensor)`);
- `detect_resized(resized_images)` (where the weights are variables): float32 [N, h, w, 3]
  images already resized to the model's input size (values 0..255, as
  `ssd_mobilenet.preprocessing.resize` gives them) -> the same dict: what `predict` batches
  photos of mixed sizes through (`migrate.predict.runtimes.tensorflow`).

Variants (`VARIANTS`):
- "fast" (the default `convert` writes): the inference copy (`model.fold_batch_norm`: batch
  norm folded with the TF1 session's rounding, each feature map's heads merged) and the early
  layers in slices (`Detector`'s defaults). In float32 its weights are variables (plain
  `tf.Variable`s named after the Keras weights): a process that loads it holds each weight about
  once, where graph constants were held many times over (the SavedModel's function library, the
  loader's graphs, Grappler's copies, the kernels) and made it start slower and peak higher than
  the TF1 session it replaces (docs/cold_start.md has the figures). The price is oneDNN
  reordering each variable filter on every call instead of once. With a mixed precision the
  weights are graph constants: their casts to 16 bits are folded when the function is first
  optimised, so no weight is cast per call. Quantization-aware models keep variables in any
  case: a constant filter lets oneDNN pick another kernel, whose 1e-7 rounding differences their
  FakeQuant steps turn into whole steps (measured on the quantized zoo graph: a box coordinate
  one step off).
- "exact": the network op for op as the TF1 graph is written (batch norm unfolded, the
  parity reference, within 1e-5 of the graph), its weights plain `tf.Variable`s named after
  the TF1 scopes.
Keras 3 variables are not found by the session-based loaders (`saved_model_cli run`, TF
Serving's C++ loader; keras-team/keras#19274, tensorflow/serving#2250), hence plain `tf.Variable`s.

Beside its own files the SavedModel holds `assets.extra/ssd_mobilenet.json`
(`ssd_mobilenet.converted_dir`): how it computes and, when written into a converted directory, the
fingerprint of the config and checkpoint it was exported from, which `ssd_mobilenet.load` checks
before running it in place of the Keras model.
"""

from __future__ import annotations

import tensorflow as tf

from ssd_mobilenet import converted_dir
from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet import preprocessing
from ssd_mobilenet.model import PRECISIONS

FAST_VARIANT = "fast"
EXACT_VARIANT = "exact"
VARIANTS = (FAST_VARIANT, EXACT_VARIANT)
SIGNATURE_KEY = "serving_default"


def weights_kind(variant: str, config, precision: str = "float32", weights: str | None = None) -> str:
    """"constants" or "variables": how the SavedModel of `variant` holds its weights (`weights`:
    `DetectionModule`'s choice, None: the variant's)."""
    if weights is not None:
        return weights
    return "constants" if weights_as_constants(variant, config, precision) else "variables"


def describe(variant: str, config, precision: str = "float32", weights: str | None = None) -> str:
    """What the SavedModel of `variant` holds, for the conversion report."""
    if variant == EXACT_VARIANT:
        return "op for op the TF1 graph as written, weights as variables"
    if weights_kind(variant, config, precision, weights) == "constants":
        return "batch norm folded, heads merged, weights as graph constants"
    if config.weight_bits:
        return "batch norm folded, heads merged, weights as variables (quantization-aware)"
    return "batch norm folded, heads merged, weights as variables"


def weights_as_constants(variant: str, config, precision: str = "float32") -> bool:
    """Whether `variant` traces the weights in as constants (module docstring): the fast variant
    in a mixed precision, unless the model is quantization-aware."""
    return variant == FAST_VARIANT and precision != "float32" and detector_lib.constants_keep_rounding(config)


class DetectionModule(tf.Module):
    """The object a SavedModel holds: `__call__(input_tensor)` -> output dict, and
    `detect_resized(resized_images)` (module docstring).

    Args:
      model: an `SSDMobileNetV1` with its weights (unfolded batch norm, as converted).
      variant: "fast" or "exact" (module docstring).
      precision: "float32", "mixed_bfloat16" or "mixed_float16" ("fast" only): the network
        computes in 16 bits, every output stays float32.
      weights: "constants" or "variables" ("fast" only), against the variant's default
        (`weights_as_constants`; None): constants make warm calls faster on oneDNN, for a
        process that starts slower and holds the weights many times over (docs/cold_start.md).
    """

    def __init__(self, model, variant: str = FAST_VARIANT, precision: str = "float32",
                 weights: str | None = None):
        super().__init__(name="ssd_mobilenet_v1")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if variant == EXACT_VARIANT and precision != "float32":
            raise ValueError("the exact variant computes in float32 (reduced precision runs on the folded model)")
        if weights not in (None, "constants", "variables") or (weights is not None and variant == EXACT_VARIANT):
            raise ValueError(f"weights must be None, 'constants' or 'variables' (fast variant only), got {weights!r}")
        # The detector stays in a closure, not an attribute: tf.Module would track its Keras
        # model and save its variables too.
        constants = weights_kind(variant, model.config, precision, weights) == "constants"
        detector = detector_lib.Detector(model, fold_batch_norm=variant == FAST_VARIANT,
                                         freeze_weights=constants, precision=precision)
        if constants:
            run = detector.serve
        else:
            import keras
            # Plain TF variables for the session loaders; Keras reads them in place of its own
            # (one read per call, before the network runs).
            net = detector.model
            self.weights = [tf.Variable(v.numpy(), name=v.path.replace(":", "_"), trainable=False)
                            for v in net.weights]
            pairs = list(zip(net.weights, self.weights))

            def run(images):
                with keras.StatelessScope(state_mapping=pairs):
                    return detector.serve(images)
        # Plain functions are not tracked either (a method bound to the detector would be).
        self._run = run
        self._empty = lambda: detector.empty_outputs()
        self.variant = variant
        self.precision = precision
        self.weights_as_constants = constants
        self.slice_size = detector.slice_size
        self.concurrent_slices = detector.concurrent_slices
        self._resize_first = None
        if constants:
            # A second function would hold every constant a second time.
            return
        config = model.config
        resized = tf.TensorSpec([None, config.image_height, config.image_width, 3], tf.float32,
                                name="resized_images")
        # The detector's computation on images `preprocessing.resize` brought to the input size:
        # its resize is then an exact identity (migrate.predict.runtimes.tensorflow), so photos of mixed
        # sizes share a batch and each gets the detections it gets alone.
        self.detect_resized = tf.function(self._guarded, input_signature=[resized], autograph=False)
        if not config.normalize_before_resize:
            # `__call__` resizes, then runs `detect_resized`: the model's own resize of an image at
            # its input size is an exact identity, so this computes what the model computes on the
            # uint8 images, bit for bit, with one copy of the network in the SavedModel instead of
            # two (a shorter load). A model that scales before resizing rounds otherwise (~2.4e-7,
            # `preprocessing`): it keeps its own.
            self._resize_first = config

    def _guarded(self, images):
        # The convolutions reject an empty batch; no images give empty outputs.
        return tf.cond(tf.shape(images)[0] > 0, lambda: self._run(images), self._empty)

    @tf.function(input_signature=detector_lib.INPUT_SIGNATURE, autograph=False)
    def __call__(self, input_tensor):
        if self._resize_first is not None:
            return self.detect_resized(preprocessing.resize(input_tensor, self._resize_first))
        return self._guarded(input_tensor)


def export_saved_model(model, path: str, variant: str = FAST_VARIANT, precision: str = "float32",
                       source: str | None = None, weights: str | None = None) -> None:
    """Writes `model` as a SavedModel at `path` (module docstring), with its metadata file;
    `weights`: `DetectionModule`'s.

    `source`: the converted directory whose `model_config.json` and checkpoint `model` was saved
    to (`detector.save`); their fingerprint goes into the metadata, so that `ssd_mobilenet.load`
    runs this SavedModel for that directory only while both are unchanged. None: no source (the
    SavedModel then never stands in for a checkpoint).
    """
    module = DetectionModule(model, variant, precision, weights)
    tf.saved_model.save(module, path, signatures={SIGNATURE_KEY: module.__call__})
    config = model.config
    converted_dir.write_metadata(path, {
        "variant": variant, "precision": precision,
        "weights": "constants" if module.weights_as_constants else "variables",
        "detect_resized": hasattr(module, "detect_resized"),
        "slice_size": module.slice_size, "concurrent_slices": module.concurrent_slices,
        "input_size": [config.image_height, config.image_width],
        "source": converted_dir.source_fingerprint(source) if source else None,
        "saved_model_fingerprint": tf.saved_model.experimental.read_fingerprint(path).singleprint(),
    })
