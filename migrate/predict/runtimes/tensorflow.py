"""The TensorFlow runtime of `predict`: a converted model directory (`ssd_mobilenet.load`) over
image files through a `tf.data` pipeline.

Images of mixed sizes share a batch by being resized in the input pipeline to the model's
input size, with the very kernel the model's `Preprocessor` applies
(`ssd_mobilenet.preprocessing.resize`: legacy `ResizeBilinear`, `align_corners=False`,
`half_pixel_centers=False`, on the uint8 image). The model then resizes an image
already at its input size, which these kernels do as an exact identity (scale 1: every
output pixel reads exactly one input pixel with weight 1), so each result equals the
detector run on that image alone (measured in tests/migrate/predict/test_predict.py: same classes and
counts, boxes and scores within 1e-6; for a model that scales before resizing,
`normalize_before_resize`, the pipeline's resize comes before the scaling, which moves the
preprocessed image by float32 rounding, ~2.4e-7). Grouping by size instead would leave a folder of
photos of many sizes with batches of one, and a batch's memory would depend on the photo
size; here every batch is [N, h, w, 3] float32, so `--max-memory` can size it once.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import tensorflow as tf

import ssd_mobilenet
from migrate.common import images
from migrate.predict.runtimes.base import DEFAULT_BATCH, MAX_BATCH, Result, from_outputs, unreadable
from ssd_mobilenet import image_io, memory, preprocessing
from ssd_mobilenet.errors import InputError

TRACE_BATCHES = 3


def load_detector(directory: str, jit_compile: bool = False, precision: str = "float32",
                  freeze_weights: bool | None = None):
    """`ssd_mobilenet.load` with a one-line `InputError` naming the directory. With the defaults it
    runs the directory's SavedModel as `convert` wrote it, without building the Keras model
    (`ssd_mobilenet.loading`); the levers that the SavedModel does not hold (`jit_compile`, another
    precision) build it."""
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: no such directory (expected the output of `migrate convert`)")
    try:
        return ssd_mobilenet.load(directory, jit_compile=jit_compile, precision=precision,
                                  freeze_weights=freeze_weights)
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:  # IndexError: a truncated checkpoint
        raise InputError(image_io.error_about(directory, e, "cannot load it")) from None


def resized_detect_function(detector):
    """The detector's own serving computation on images already resized to its input size
    (`detector.resized_function`: the SavedModel's `detect_resized`, or the Keras model's traced
    on first use): float32 [N, h, w, 3] (h, w: `detector.config` size, values 0..255 as produced
    by `preprocessing.resize`) -> the detector's output dict."""
    return detector.resized_function


def budget_batch_size(detector, max_memory_mb: float) -> int:
    """The largest batch (<= MAX_BATCH) whose TensorFlow allocator peak, measured on the call
    `iter_predictions` makes (float32 [N, h, w, 3] at the model's input size), stays under
    `max_memory_mb` MiB (`ssd_mobilenet.memory.max_batch_size`; on a CPU it needs the BFC
    allocator, see `memory.configure`).

    Raises:
      InputError: when not even one image fits.
    """
    detect = resized_detect_function(detector)
    size = (detector.config.image_height, detector.config.image_width)
    n = memory.max_batch_size(lambda batch: detect(tf.cast(batch, tf.float32)), int(max_memory_mb * 2**20),
                               image_size=size, limit=MAX_BATCH)
    if n == 0:
        raise InputError(f"--max-memory {max_memory_mb:g}: one image at {size[0]}x{size[1]} already peaks above "
                         f"{max_memory_mb:g} MiB (weights included)")
    return n


PREFETCH = 1


def dataset(paths, config, batch_size: int, prefetch: int = PREFETCH) -> tf.data.Dataset:
    """Paths -> batches of (index int32 [B], original [height, width] int32 [B, 2],
    resized float32 [B, h, w, 3]), `prefetch` batches ahead (the model runs on one while the
    next is decoded), photos decoded on as many threads as cores. Images that fail to decode
    are left out; their index is missing from the batches.

    The first batch holds the first image alone, the others `batch_size` images: the first
    detections come as soon as one model call can give them, not after a whole batch (the first
    call also optimises the function and creates its kernels).

    tf.data's autotuning is off: a folder's run ended with its optimisation thread taking up to
    ~1.6 s to stop (docs/cold_start.md), and decoding is a small part of a batch's time next to
    the model, so fixed settings lose nothing."""

    # No Python control flow on tensors here: autograph's conversion of this function and the ones
    # it calls only cost the start of every run (~0.2 s).
    @tf.autograph.experimental.do_not_convert
    def load(index, path):
        image = image_io.decode(tf.io.read_file(path))
        resized = preprocessing.resize(image[None], config)[0]
        return index, tf.shape(image)[:2], resized

    def batches(start, stop, size):
        # File names as bytes: names that are not valid UTF-8 still reach the file system unchanged.
        names = tf.constant([os.fsencode(p) for p in paths[start:stop]], tf.string, shape=[stop - start])
        ds = tf.data.Dataset.from_tensor_slices((tf.range(start, stop, dtype=tf.int32), names))
        ds = ds.map(load, num_parallel_calls=os.cpu_count() or 1, deterministic=True)
        return ds.ignore_errors().batch(size)

    first = min(1, len(paths))
    options = tf.data.Options()
    options.autotune.enabled = False
    ds = batches(0, first, 1).concatenate(batches(first, len(paths), batch_size))
    return ds.prefetch(prefetch).with_options(options)


def _unreadable(path: str) -> Result:
    # The pipeline only says that an image was dropped; reading it again gives the reason.
    try:
        images.read_image(path)
    except InputError as e:
        return unreadable(path, e)
    return Result(path, error="failed in the input pipeline although it decodes on its own (out of memory?)")


def iter_predictions(detector, paths, batch_size: int = DEFAULT_BATCH, on_batch=None,
                     prefetch: int = PREFETCH):
    """Runs `detector` over image files; yields one `Result` per path, in order.

    Args:
      detector: an `ssd_mobilenet.Detector`.
      paths: image file paths (see `images.list_images`).
      batch_size: images per model call; mixed sizes share a batch (see the module doc).
      on_batch: optional callable(batch_number) called before each model call (tracing).
      prefetch: batches the input pipeline prepares ahead (each N x h x w x 3 float32).
    """
    detect = resized_detect_function(detector)
    expected = 0
    for number, (index, size, resized) in enumerate(dataset(list(paths), detector.config, batch_size, prefetch)):
        if on_batch:
            on_batch(number)
        out = detect(resized)
        boxes, scores = out["detection_boxes"].numpy(), out["detection_scores"].numpy()
        classes, counts = out["detection_classes"].numpy(), out["num_detections"].numpy()
        for row, (i, (height, width)) in enumerate(zip(index.numpy(), size.numpy())):
            for skipped in range(expected, i):
                yield _unreadable(paths[skipped])
            k = int(counts[row])
            yield Result(paths[i], int(height), int(width), boxes[row, :k], scores[row, :k],
                         classes[row, :k].astype(np.int64))
            expected = i + 1
    for skipped in range(expected, len(paths)):
        yield _unreadable(paths[skipped])


class TensorFlowRuntime:
    """`predict`'s runtime for a converted directory (`migrate.predict.runtimes.Runtime`).

    `memory_growth`, `memory_limit_mb` and `weight_cache` set up TensorFlow for the process
    (`ssd_mobilenet.memory.configure`), before its devices start; `max_memory_mb` does too, since
    it measures allocator peaks, which a CPU keeps only with the BFC allocator `configure` switches
    on. Raises InputError when the devices have started already.
    """

    name = "TensorFlow"

    def __init__(self, converted: str, batch_size: int | None = None, max_memory_mb: float | None = None,
                 jit_compile: bool = False, precision: str = "float32", trace_dir: str | None = None,
                 memory_growth: bool = False, memory_limit_mb: int | None = None, weight_cache: bool = False,
                 say=None, warn=None):
        say = say or (lambda msg: None)
        if memory_growth or memory_limit_mb is not None or max_memory_mb is not None or weight_cache:
            memory.configure(memory_growth=memory_growth, memory_limit_mb=memory_limit_mb,
                             onednn_weight_cache=weight_cache)
        with warnings.catch_warnings(record=True) as caught:  # e.g. XLA on a CPU: one line, not a source excerpt
            warnings.simplefilter("always")
            # Under a memory budget the weights stay variables (as the float32 SavedModel holds
            # them): as graph constants they are held several times over in the allocator the
            # budget counts (ssd_mobilenet.load).
            self.detector = load_detector(converted, jit_compile=jit_compile, precision=precision,
                                          freeze_weights=False if max_memory_mb is not None else None)
        for w in caught:
            (warn or say)(f"warning: {w.message}")
        if max_memory_mb is not None:
            # InputError on a CPU without allocator statistics.
            batch_size = budget_batch_size(self.detector, max_memory_mb)
            say(f"batch size {batch_size}: the largest whose measured peak stays under {max_memory_mb:g} MiB")
        self.batch_size = batch_size or DEFAULT_BATCH
        # The pipeline holds one batch besides the one the model runs on (`dataset`), which a
        # memory budget leaves room for.
        self.prefetch = PREFETCH
        self.trace_dir = trace_dir

    def results(self, paths):
        """One `Result` per path, in order (`iter_predictions`)."""
        first = min(1, len(paths))  # the first batch holds one image (`dataset`)
        tracer = _Tracer(self.trace_dir, num_batches=first + -(-(len(paths) - first) // self.batch_size))
        try:
            yield from iter_predictions(self.detector, paths, self.batch_size, on_batch=tracer.on_batch,
                                        prefetch=self.prefetch)
        finally:
            tracer.stop()

    def results_of_encoded(self, items) -> list:
        """Encoded images, already read (by an engine's file systems) -> one `Result` each, in
        order, from one model call: decoded and resized by the ops `dataset` maps, so each result
        equals `results`' for that file.

        Args:
          items: (path, encoded bytes) pairs; at most `MAX_BATCH` of them.
        """
        results, prepared = [None] * len(items), []
        for i, (path, data) in enumerate(items):
            try:
                image = image_io.decode(tf.constant(data, tf.string))
            except (tf.errors.OpError, ValueError) as e:
                results[i] = Result(path, error=f"cannot read image: {image_io.error_message(e)}")
                continue
            prepared.append((i, path, image.shape[0], image.shape[1],
                             preprocessing.resize(image[None], self.detector.config)[0]))
        if prepared:
            out = resized_detect_function(self.detector)(tf.stack([p[4] for p in prepared]))
            out = {k: v.numpy() for k, v in out.items()}
            for row, (i, path, height, width, _) in enumerate(prepared):
                results[i] = from_outputs(path, height, width, out, row)
        return results

    @staticmethod
    def read_image(path) -> np.ndarray:
        """The image as this runtime decodes it (TensorFlow's decoder), uint8 [H, W, 3]."""
        return images.read_image(path)


class _Tracer:
    """Starts `ssd_mobilenet.memory.trace` before one batch and stops it TRACE_BATCHES later."""

    def __init__(self, logdir, num_batches: int):
        self.logdir = logdir
        self.first = 1 if num_batches > 1 else 0  # batch 0 also traces the tf.function
        self.context = None

    def on_batch(self, number: int) -> None:
        if self.logdir is None:
            return
        if number == self.first:
            self.context = memory.trace(self.logdir)  # InputError: a trace already being recorded
            self.context.__enter__()
        elif number == self.first + TRACE_BATCHES:
            self.stop()

    def stop(self) -> None:
        if self.context is not None:
            context, self.context = self.context, None
            context.__exit__(None, None, None)
