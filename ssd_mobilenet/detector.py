"""Inference wrapper: a concrete `tf.function` over the Keras model's whole pipeline.

A converted model directory (written by `python -m migrate convert`, `ssd_mobilenet.converted_dir`)
holds `model_config.json` (the `SSDConfig`) and `checkpoint/` (a TF2 object-based checkpoint of
the Keras model): `load_model` builds the Keras model from those two, and `Detector` traces it.
`ssd_mobilenet.load` (`ssd_mobilenet.loading`) runs the directory's SavedModel instead when it
computes what was asked for, and builds a `Detector` otherwise.
"""

from __future__ import annotations

import json
import os
import warnings

import tensorflow as tf

from ssd_mobilenet import image_io, postprocessing
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.converted_dir import CHECKPOINT_DIR, CHECKPOINT_PREFIX, CONFIG_FILE, read_config
from ssd_mobilenet.image_io import INPUT_SIGNATURE
from ssd_mobilenet.model import PRECISIONS, SSDMobileNetV1
from ssd_mobilenet.model import fold_batch_norm as fold_batch_norm_copy

# Slices of one image, two in flight: the allocator's peak stays near two images' early
# activations, at a latency no worse than larger slices (docs/measurements.md).
DEFAULT_SLICE_SIZE = 1
# Two slices in flight kept two cores busier than one (see `Detector`, docs/measurements.md).
DEFAULT_CONCURRENT_SLICES = 2


class Detector:
    """Runs `SSDMobileNetV1` end to end through one concrete `tf.function`.

    Args:
      model: an `SSDMobileNetV1` with its weights (unfolded batch norm, as loaded).
      jit_compile: compile the network and box decoding with XLA. Preprocessing (XLA's
        legacy resize differs from TF's) and post-processing (per-class NMS) stay outside.
        On CPUs XLA has been measured slower for this network (see docs/benchmarks.md);
        it pays on GPUs.
      precision: "float32", "mixed_bfloat16" or "mixed_float16": the network computes in
        that precision (weights and every output stay float32). Detections then agree
        with the float32 model by IoU and class, not to 1e-5 (see `migrate verify`).
      fold_batch_norm: run a copy of `model` with batch norm folded into the convolutions
        (`model.fold_batch_norm`): faster, and it rounds like the TF1 session's own folding
        (detections within 1e-5 of the TF1 session, same classes and counts, tested). False
        (the default here; `load` folds) runs `model` itself, op for op the TF1 graph as
        written, which is what the exported SavedModel holds. Mixed precision needs True.
      freeze_weights: a latency lever paid for in process memory. The function is traced
        with every weight a graph constant (`model.with_weights_as_constants`): oneDNN
        reorders a constant filter into its kernel layout once and caches it, where a
        variable's filter is reordered on every call (the TF1 frozen graph has constant
        filters too), so every call saves those reorders; outputs agree with the variables'
        to float32 rounding. But the constants are held several times over (graph, function
        library, kernels, oneDNN's cache) and Grappler's transient copies stay in the C heap,
        so the process holds more memory (docs/benchmarks.md has both costs). Ignored with
        `jit_compile` (XLA folds weights itself).
      slice_size: run preprocessing and the high-resolution early layers on slices of this
        many images (`SSDMobileNetV1.predict_raw`), so the allocator's peak holds one
        slice's large activations instead of the whole batch's; None: the batch at once
        (always with `jit_compile`).
      concurrent_slices: how many slices run at once (the slice loop's parallel
        iterations; their early-layer activations are alive together). With one, the two
        cores share every op of one slice; with two, each works on its own slice more of the
        time, for a higher allocator peak (docs/measurements.md). Batches of up to
        `slice_size` images have no loop and are unaffected.
    Call:
      images: uint8 [N, H, W, 3] or [H, W, 3] (numpy or tensor), any N (0 gives empty
        outputs), H, W.
    Returns:
      dict of float32 tensors (`detections.ALL_OUTPUTS`); boxes are
      [ymin, xmin, ymax, xmax] normalised to the input image.
    """

    def __init__(self, model: SSDMobileNetV1, jit_compile: bool = False, precision: str = "float32",
                 fold_batch_norm: bool = False, slice_size: int | None = DEFAULT_SLICE_SIZE,
                 freeze_weights: bool = False, concurrent_slices: int = DEFAULT_CONCURRENT_SLICES):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision != "float32" and not fold_batch_norm:
            raise ValueError(f"precision={precision!r} runs on the folded model; use fold_batch_norm=True")
        self.model = fold_batch_norm_copy(model, precision) if fold_batch_norm else model
        self.config = model.config
        self.jit_compile = jit_compile
        self.precision = precision
        if slice_size is not None and slice_size < 1:
            raise ValueError(f"slice_size must be >= 1 or None, got {slice_size}")
        # XLA cannot compile the slice loop over a dynamic batch (its dynamic-dimension
        # inference fails); it schedules the buffers of a compiled batch itself.
        self.slice_size = None if jit_compile else slice_size
        self.weights_frozen = freeze_weights and not jit_compile
        if concurrent_slices < 1:
            raise ValueError(f"concurrent_slices must be >= 1, got {concurrent_slices}")
        self.concurrent_slices = concurrent_slices
        if self.slice_size is not None:
            self.model.split()  # built eagerly, outside the traced function
        if (jit_compile or precision != "float32") and model.config.weight_bits:
            # XLA's convolutions and FakeQuant and 16-bit arithmetic round differently from the
            # TF1 graph's kernels, and a FakeQuant turns a 1e-7 difference at a step of its grid
            # into a whole step (measured: one step at Conv2d_0, 0.7 by Conv2d_13 under XLA).
            # Its FakeQuant steps turn rounding differences into whole quantization steps; float32
            # without XLA reproduces the TF1 graph's detections.
            warnings.warn("quantization-aware model under XLA or mixed precision: detections can differ from "
                          "TF1's", stacklevel=2)
        if jit_compile:
            # Preprocessing stays outside the cluster: XLA's legacy ResizeBilinear differs from
            # TensorFlow's kernel (by up to 1.9 on the [-1, 1] scale for 480x640 -> 300x300).
            compiled = tf.function(self.model.predict_preprocessed, jit_compile=True, autograph=False)
            network = lambda images: compiled(self.model.preprocess(images))  # noqa: E731
        else:
            network = self._network

        def serve(input_tensor):
            boxes, logits = network(input_tensor)
            return postprocessing.postprocess(boxes, logits, self.config)

        # The Python function too: `ssd_mobilenet.export` traces it into a SavedModel's own function.
        # No autograph, here or in the export: the pipeline's control flow is written as tf.cond and
        # tf.while_loop, so autograph would only rewrite every Python function the trace calls
        # (~1 s of each process's first trace; docs/measurements.md).
        self.serve = serve
        self.function = tf.function(serve, input_signature=INPUT_SIGNATURE, autograph=False)
        self._concrete_function = None
        self._resized_function = None

    def _network(self, images):
        return self.model.predict_raw(images, self.slice_size, constant_weights=self.weights_frozen,
                                      concurrent_slices=self.concurrent_slices)

    @property
    def concrete_function(self):
        """`function` traced for uint8 [N, H, W, 3], on first use: a SavedModel export traces
        `serve` into its own function and never calls this one (a trace of the whole pipeline
        saved)."""
        if self._concrete_function is None:
            self._concrete_function = self.function.get_concrete_function()
        return self._concrete_function

    def __call__(self, images) -> dict:
        images = image_io.image_batch(images)
        if images.shape[0] == 0:
            # The convolutions reject an empty batch (so does the TF1 graph): no images, no
            # detections, in the outputs' shapes.
            return self.empty_outputs()
        return self.concrete_function(images)

    @property
    def resized_function(self):
        """The detector's own serving computation on images already resized to its input size:
        a `tf.function`, float32 [N, h, w, 3] (h, w: `config`'s size, values 0..255 as
        `preprocessing.resize` gives them) -> the output dict; traced on first use."""
        if self._resized_function is None:
            config = self.config
            spec = tf.TensorSpec([None, config.image_height, config.image_width, 3], tf.float32,
                                 name="resized_images")
            self._resized_function = tf.function(self.serve, input_signature=[spec], autograph=False)
        return self._resized_function

    def empty_outputs(self) -> dict:
        """The outputs of a batch of 0 images: zeros [0, ...] in every output's dtype and shape;
        unknown inner sizes (the per-anchor outputs' row count) are the anchor count."""
        return postprocessing.empty_outputs(self.config, len(self.model.anchors))


def constants_keep_rounding(config: SSDConfig) -> bool:
    """Whether the weights may be graph constants without changing results: not for
    quantization-aware models, whose FakeQuant steps turn the other kernel rounding a constant
    filter gets into whole quantization steps (`load`, `ssd_mobilenet.export`)."""
    return not config.weight_bits


def save(model: SSDMobileNetV1, directory: str) -> None:
    """Writes `model_config.json` and `checkpoint/` of `model` into an existing `directory`."""
    with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as f:
        json.dump(model.config.to_dict(), f, indent=2, sort_keys=True)
    tf.train.Checkpoint(model=model).write(os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX))


def load_model(directory: str) -> SSDMobileNetV1:
    """The Keras model of a converted directory, with every weight restored (strict)."""
    config = read_config(directory)
    model = SSDMobileNetV1(config)
    prefix = os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX)
    try:
        stored = [name for name, _ in tf.train.list_variables(prefix) if name.endswith("VARIABLE_VALUE")]
    except (tf.errors.OpError, IndexError) as e:  # a missing or truncated file (IndexError: short read)
        raise ValueError(f"{directory}: unreadable {CHECKPOINT_DIR}/ ({image_io.error_message(e)})") from None
    # No silent partial restore: the checkpoint holds exactly the model's variables and
    # every one of them is matched (a variable the object graph does not reach would
    # otherwise keep its initial value without any error).
    if len(stored) != len(model.weights):
        raise ValueError(f"{directory}: {CHECKPOINT_DIR}/ holds {len(stored)} variables, the model "
                         f"{len(model.weights)}")
    try:
        tf.train.Checkpoint(model=model).read(prefix).assert_consumed()
    except (tf.errors.OpError, IndexError) as e:  # tensor data cut short: "Read less bytes than requested"
        raise ValueError(f"{directory}: unreadable {CHECKPOINT_DIR}/ ({image_io.error_message(e)})") from None
    except (ValueError, AssertionError) as e:
        if config.pad_to_multiple > 1:
            # Until 2026-11 the padding was part of preprocessing; the feature extractor's
            # PadToMultiple layer now shifts the checkpoint's layer indices.
            raise ValueError(f"{directory}: from an older release; convert the TF1 model again") from None
        # The first unmatched variable is in TensorFlow's message (`e`, chained for the library's callers).
        raise ValueError(f"{directory}: {CHECKPOINT_DIR}/ does not match {CONFIG_FILE}; convert again") from e
    return model


# `ssd_mobilenet.load`, where it was before it moved to `loading`.
from ssd_mobilenet.loading import load  # noqa: E402,F401
