"""SavedModel export: the converted detector as a self-contained TF2 SavedModel.

What the written SavedModel offers its clients:
- `serving_default` signature: `input_tensor` uint8 [N, H, W, 3] (any N >= 0, H, W) -> the TF2
  OD API output dict (`postprocessing.OUTPUT_KEYS`, float32; boxes [ymin, xmin, ymax, xmax]
  normalised to the image), for TF Serving, `saved_model_cli run` and
  `loaded.signatures["serving_default"](input_tensor=...)`;
- the loaded object itself is callable on the image tensor, as the TF2 OD API's exported
  models are (`detect_fn = tf.saved_model.load(path); detect_fn(input_tensor)`).

Variants (`VARIANTS`):
- "fast" (the default `convert` writes): the inference copy (`model.fold_batch_norm`: batch
  norm folded with the TF1 session's rounding, each feature map's heads merged), the early
  layers in slices (`Detector`'s defaults), and every weight a graph constant. oneDNN caches
  the reordered filter of a constant at its first call, as it does for the TF1 frozen
  graph's, and a constant needs no variable restore: the session-based loaders
  (`saved_model_cli run`, TF Serving's C++ loader) run it as they run a frozen graph. With a
  mixed precision the constants' casts to 16 bits are folded when the function is first
  optimised, so no weight is cast per call. Quantization-aware models keep their weights as
  variables: a constant filter lets oneDNN pick another kernel, whose 1e-7 rounding
  differences their FakeQuant steps turn into whole steps (measured on the quantized zoo
  graph: a box coordinate one step off); with variables they compute as `load()` does.
- "exact": the network op for op as the TF1 graph is written (batch norm unfolded, the
  parity reference, within 1e-5 of the graph), its weights plain `tf.Variable`s named after
  the TF1 scopes (Keras 3 variables are not found by the session-based loaders:
  keras-team/keras#19274, tensorflow/serving#2250).
"""

from __future__ import annotations

import tensorflow as tf

from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.model import PRECISIONS

FAST = "fast"
EXACT = "exact"
VARIANTS = (FAST, EXACT)
SIGNATURE_KEY = "serving_default"


def describe(variant: str, config) -> str:
    """What the SavedModel of `variant` holds, for the conversion report."""
    if variant == EXACT:
        return "op for op the TF1 graph as written, weights as variables"
    if weights_as_constants(variant, config):
        return "batch norm folded, heads merged, weights as graph constants"
    return "batch norm folded, heads merged, weights as variables (quantization-aware)"


def weights_as_constants(variant: str, config) -> bool:
    """Whether `variant` traces the weights in as constants (module docstring)."""
    return variant == FAST and detector_lib.constants_keep_rounding(config)


class DetectionModule(tf.Module):
    """The object a SavedModel holds: `__call__(input_tensor)` -> output dict.

    Args:
      model: an `SSDMobileNetV1` with its weights (unfolded batch norm, as converted).
      variant: "fast" or "exact" (module docstring).
      precision: "float32", "mixed_bfloat16" or "mixed_float16" ("fast" only): the network
        computes in 16 bits, every output stays float32.
    """

    def __init__(self, model, variant: str = FAST, precision: str = "float32"):
        super().__init__(name="ssd_mobilenet_v1")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if variant == EXACT and precision != "float32":
            raise ValueError("the exact variant computes in float32 (reduced precision runs on the folded model)")
        # The detector stays in a closure, not an attribute: tf.Module would track its Keras
        # model and save its variables too.
        constants = weights_as_constants(variant, model.config)
        detector = detector_lib.Detector(model, fold_batch_norm=variant == FAST, freeze_weights=constants,
                                         precision=precision)
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

    @tf.function(input_signature=detector_lib.INPUT_SIGNATURE)
    def __call__(self, input_tensor):
        # The convolutions reject an empty batch; no images give empty outputs.
        return tf.cond(tf.shape(input_tensor)[0] > 0, lambda: self._run(input_tensor), self._empty)


def export_saved_model(model, path: str, variant: str = FAST, precision: str = "float32") -> None:
    """Writes `model` as a SavedModel at `path` (module docstring)."""
    module = DetectionModule(model, variant, precision)
    tf.saved_model.save(module, path, signatures={SIGNATURE_KEY: module.__call__})
