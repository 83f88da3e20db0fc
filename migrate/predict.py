"""`predict`: a converted model over image files and folders, through a `tf.data` pipeline.

Images of mixed sizes share a batch by being resized in the input pipeline to the model's
input size, with the very kernel the model's `Preprocessor` applies
(`ssd_mobilenet.preprocessing.resize`: legacy `ResizeBilinear`, `align_corners=False`,
`half_pixel_centers=False`, on the uint8 image). The model then resizes an image
already at its input size, which these kernels do as an exact identity (scale 1: every
output pixel reads exactly one input pixel with weight 1), so each result equals the
detector run on that image alone (measured in tests/test_predict.py: same classes and
counts, boxes and scores within 1e-6; for a model that scales before resizing,
`normalize_before_resize`, the pipeline's resize comes before the scaling, which moves the
preprocessed image by float32 rounding, ~2.4e-7). Grouping by size instead would leave a folder of
photos of many sizes with batches of one, and a batch's memory would depend on the photo
size; here every batch is [N, h, w, 3] float32, so `--max-memory` can size it once.

Boxes come out normalised to the image ([ymin, xmin, ymax, xmax] in [0, 1]) and in pixels
of the original image (normalised * height or width), since the resize maps the whole
image onto the whole model input.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

import ssd_mobilenet
from migrate.common import draw, images
from ssd_mobilenet import atomic_write
from ssd_mobilenet import label_map
from ssd_mobilenet import preprocessing

DEFAULT_BATCH = 8
MAX_BATCH = 64
TRACE_BATCHES = 3
PNG_COLOUR = (255, 64, 0)
PROGRESS_EVERY_S = 2.0


class ModelDirError(ValueError):
    """A converted model directory that is missing or cannot be loaded."""


class BudgetError(ValueError):
    """A memory budget too small for a single image."""


class OutputExistsError(FileExistsError):
    """An output that exists and would be replaced without --force."""


@dataclass
class Result:
    """The detections of one image, or why it could not be read.

    boxes: float32 [K, 4] [ymin, xmin, ymax, xmax] normalised to the image;
    scores: float32 [K]; classes: int64 [K] 1-based class ids; K = num_detections.
    """

    path: str
    height: int = 0
    width: int = 0
    boxes: np.ndarray = field(default_factory=lambda: np.zeros([0, 4], np.float32))
    scores: np.ndarray = field(default_factory=lambda: np.zeros([0], np.float32))
    classes: np.ndarray = field(default_factory=lambda: np.zeros([0], np.int64))
    error: str | None = None


def load_detector(directory: str, jit_compile: bool = False, precision: str = "float32",
                  freeze_weights: bool | None = None):
    """`ssd_mobilenet.load` with a one-line `ModelDirError` naming the directory."""
    if not os.path.isdir(directory):
        raise ModelDirError(f"{directory}: no such directory (expected the output of `migrate convert`)")
    try:
        return ssd_mobilenet.load(directory, jit_compile=jit_compile, precision=precision,
                                  freeze_weights=freeze_weights)
    except (OSError, ValueError, tf.errors.OpError) as e:
        raise ModelDirError(f"{directory}: cannot load the converted model: {images.error_message(e)}") from None


def resized_detect_function(detector):
    """The detector's own serving computation on images already resized to its input size.

    Returns a `tf.function`: float32 [N, h, w, 3] (h, w: `detector.config` size, values
    0..255 as produced by `preprocessing.resize`) -> the detector's output dict.
    """
    if detector not in _RESIZED_FUNCTIONS:  # traced once per detector, not per call
        config = detector.config
        serve = detector.function.python_function  # the same computation, past the uint8 signature
        spec = tf.TensorSpec([None, config.image_height, config.image_width, 3], tf.float32, name="resized_images")
        _RESIZED_FUNCTIONS[detector] = tf.function(serve, input_signature=[spec])
    return _RESIZED_FUNCTIONS[detector]


_RESIZED_FUNCTIONS = weakref.WeakKeyDictionary()


def budget_batch_size(detector, max_memory_mb: float) -> int:
    """The largest batch (<= MAX_BATCH) whose TensorFlow allocator peak, measured on the call
    `iter_predictions` makes (float32 [N, h, w, 3] at the model's input size), stays under
    `max_memory_mb` MiB (`ssd_mobilenet.runtime.max_batch_size`; on a CPU it needs the BFC
    allocator, see `runtime.configure`).

    Raises:
      BudgetError: when not even one image fits.
    """
    from ssd_mobilenet import runtime
    detect = resized_detect_function(detector)
    size = (detector.config.image_height, detector.config.image_width)
    n = runtime.max_batch_size(lambda batch: detect(tf.cast(batch, tf.float32)), int(max_memory_mb * 2**20),
                               image_size=size, limit=MAX_BATCH)
    if n == 0:
        raise BudgetError(f"--max-memory {max_memory_mb:g}: one image at {size[0]}x{size[1]} already peaks above "
                          f"{max_memory_mb:g} MiB (weights included)")
    return n


def dataset(paths, config, batch_size: int, prefetch: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
    """Paths -> batches of (index int32 [B], original [height, width] int32 [B, 2],
    resized float32 [B, h, w, 3]), `prefetch` batches ahead. Images that fail to decode
    are left out; their index is missing from the batches."""

    def load(index, path):
        image = images.decode(tf.io.read_file(path))
        resized = preprocessing.resize(image[None], config)[0]
        return index, tf.shape(image)[:2], resized

    # File names as bytes: names that are not valid UTF-8 still reach the file system unchanged.
    names = tf.constant([os.fsencode(p) for p in paths], tf.string)
    ds = tf.data.Dataset.from_tensor_slices((tf.range(len(paths), dtype=tf.int32), names))
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.ignore_errors().batch(batch_size).prefetch(prefetch)


def _unreadable(path: str) -> Result:
    # The pipeline only says that an image was dropped; reading it again gives the reason.
    try:
        images.read_image(path)
        reason = "failed in the input pipeline although it decodes on its own (out of memory?)"
    except images.ImageError as e:
        reason = str(e).split(": ", 1)[1] if str(e).startswith(path + ": ") else str(e)
    return Result(path, error=reason)


def iter_predictions(detector, paths, batch_size: int = DEFAULT_BATCH, on_batch=None,
                     prefetch: int = tf.data.AUTOTUNE):
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


def _short(value) -> float:
    # The shortest decimal that reads back as the same float32.
    return float(str(np.float32(value)))


def record(result: Result, labels: dict | None = None, min_score: float = 0.0) -> dict:
    """A `Result` as one JSON-able dict (one line of the output)."""
    if result.error is not None:
        return {"image": result.path, "error": result.error}
    detections = []
    scale = np.array([result.height, result.width] * 2, np.float64)
    for box, score, class_id in zip(result.boxes, result.scores, result.classes):
        if score < min_score:
            continue
        d = {"class_id": int(class_id)}
        if labels is not None:
            d["label"] = labels.get(int(class_id))
        d["score"] = _short(score)
        d["box"] = [_short(v) for v in box]
        d["box_pixels"] = [round(v, 3) for v in (box.astype(np.float64) * scale).tolist()]
        detections.append(d)
    return {"image": result.path, "height": result.height, "width": result.width,
            "num_detections": len(detections), "detections": detections}


def png_names(paths) -> dict:
    """{image path: PNG path relative to the --png folder}: the path below the images'
    common folder with the extension replaced by `.png` (kept, then `.png` added, when two
    images would otherwise share a name)."""
    absolute = [os.path.abspath(p) for p in paths]
    root = os.path.commonpath([os.path.dirname(p) for p in absolute])
    relative = [os.path.relpath(p, root) for p in absolute]
    stems = [os.path.splitext(r)[0] + ".png" for r in relative]
    clash = {s for s in stems if stems.count(s) > 1}
    return {p: (r + ".png" if s in clash else s) for p, r, s in zip(paths, relative, stems)}


def _check_not_an_input(out: str | None, png_dir: str | None, inputs) -> None:
    """--force replaces `out` and the `png_dir` folder whole: never an image read or the model."""
    for path, what in ((out, "--out"), (png_dir, "--png")):
        if path is None:
            continue
        for item in inputs:
            if atomic_write.covers(path, item):
                raise OutputExistsError(f"{path}: {what} would replace {item}, an input; choose another {what}")


def run(converted: str, inputs, out: str | None = None, png_dir: str | None = None, force: bool = False,
        batch_size: int | None = None, max_memory_mb: float | None = None, labels: str | None = None,
        min_score: float = 0.0, png_min_score: float = 0.5, jit_compile: bool = False,
        precision: str = "float32", trace_dir: str | None = None, stdout=None, progress=None,
        warn=None) -> dict:
    """Runs a converted model over images; writes JSON lines (and PNGs); returns a summary.

    Args:
      converted: a directory written by `migrate convert`.
      inputs: image files and folders (`images.list_images`).
      out: JSON lines file, written to a temporary file and renamed into place at the end;
        None writes the lines to `stdout` as they come.
      png_dir: folder for the images with their boxes drawn (score >= png_min_score),
        named by `png_names`; written to a temporary folder and renamed into place.
      force: replace an existing `out` / non-empty `png_dir`.
      batch_size: images per model call (default 8); `max_memory_mb` instead measures the
        largest batch whose allocator peak stays under that budget (`budget_batch_size`);
        the input pipeline then prepares one batch ahead, besides the budget.
      labels: label map file (`label_map`) for a `label` per detection.
      min_score: detections below it are left out of the JSON lines.
      trace_dir: writes a TensorBoard profiler trace of up to 3 batches (after a first,
        warm-up batch when there is more than one).
      progress: callable(str) for progress; warn: callable(str) for unreadable images
        (default: stderr).
    Returns:
      dict: images, failed, detections, seconds, images_per_s, batch_size, out, png_dir.
    Raises:
      images.ImageError, label_map.LabelMapError, ModelDirError, OutputExistsError,
      BudgetError: bad input, with a one-line message naming the path; nothing is written.
      runtime.RuntimeConfigError: `max_memory_mb` on a CPU without allocator statistics.
    """
    say = progress or (lambda msg: None)
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    atomic_write.check_output(out, force, is_dir=False, flag="--out", error=OutputExistsError)
    atomic_write.check_output(png_dir, force, is_dir=True, flag="--png", error=OutputExistsError)
    paths = images.list_images(inputs)
    _check_not_an_input(out, png_dir, [converted, *paths])
    names = label_map.read(labels) if labels else None
    with warnings.catch_warnings(record=True) as caught:  # e.g. XLA on a CPU: one line, not a source excerpt
        warnings.simplefilter("always")
        # Under a memory budget the weights stay variables: as graph constants they are held
        # several times over in the allocator the budget counts (ssd_mobilenet.load).
        detector = load_detector(converted, jit_compile=jit_compile, precision=precision,
                                 freeze_weights=False if max_memory_mb is not None else None)
    for w in caught:
        warn(f"warning: {w.message}")
    if max_memory_mb is not None:
        batch_size = budget_batch_size(detector, max_memory_mb)
        say(f"batch size {batch_size}: the largest whose measured peak stays under {max_memory_mb:g} MiB")
    batch_size = batch_size or DEFAULT_BATCH

    with contextlib.ExitStack() as cleanup:
        tmp_out = tmp_png = None
        if out is not None:
            folder = os.path.dirname(os.path.abspath(out))
            os.makedirs(folder, exist_ok=True)
            fd, tmp_out = tempfile.mkstemp(prefix=".predict-", suffix=".jsonl", dir=folder)
            os.fchmod(fd, 0o666 & ~atomic_write.umask())  # mkstemp's 0600 is for the temporary name only
            cleanup.callback(lambda: os.path.exists(tmp_out) and os.unlink(tmp_out))
            sink = cleanup.enter_context(os.fdopen(fd, "w", encoding="utf-8"))
        else:
            sink = stdout or sys.stdout
        if png_dir is not None:
            tmp_png = atomic_write.temp_dir_beside(png_dir, prefix=".predict-png-")
            cleanup.callback(shutil.rmtree, tmp_png, ignore_errors=True)
            png_paths = png_names(paths)
        tracer = _Tracer(trace_dir, num_batches=-(-len(paths) // batch_size))
        cleanup.callback(tracer.stop)

        summary = {"images": len(paths), "failed": 0, "detections": 0, "batch_size": batch_size}
        start = last_report = time.perf_counter()
        # Under a memory budget the pipeline holds one batch besides the one the model runs on.
        prefetch = 1 if max_memory_mb is not None else tf.data.AUTOTUNE
        results = iter_predictions(detector, paths, batch_size, on_batch=tracer.on_batch, prefetch=prefetch)
        for done, result in enumerate(results, 1):
            line = record(result, names, min_score)
            sink.write(json.dumps(line) + "\n")
            if result.error is not None:
                summary["failed"] += 1
                warn(f"warning: {result.path}: {result.error} (skipped)")
            else:
                summary["detections"] += line["num_detections"]
                if png_dir is not None:
                    keep = result.scores >= png_min_score
                    draw.draw_detections(images.read_image(result.path), [(result.boxes[keep], PNG_COLOUR)],
                                         os.path.join(tmp_png, png_paths[result.path]))
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_S:
                sink.flush()
                say(f"{done}/{len(paths)} images, {done / (now - start):.1f} images/s")
                last_report = now
        tracer.stop()
        seconds = time.perf_counter() - start
        if out is not None:
            sink.close()
            os.replace(tmp_out, out)
        else:
            sink.flush()
        if png_dir is not None:
            atomic_write.replace_path(tmp_png, png_dir)
    summary.update(seconds=round(seconds, 3), images_per_s=round(len(paths) / seconds, 2),
                   out=out, png_dir=png_dir)
    return summary


class _Tracer:
    """Starts `ssd_mobilenet.runtime.trace` before one batch and stops it TRACE_BATCHES later."""

    def __init__(self, logdir, num_batches: int):
        self.logdir = logdir
        self.first = 1 if num_batches > 1 else 0  # batch 0 also traces the tf.function
        self.context = None

    def on_batch(self, number: int) -> None:
        if self.logdir is None:
            return
        if number == self.first:
            from ssd_mobilenet import runtime
            self.context = runtime.trace(self.logdir)
            self.context.__enter__()
        elif number == self.first + TRACE_BATCHES:
            self.stop()

    def stop(self) -> None:
        if self.context is not None:
            context, self.context = self.context, None
            context.__exit__(None, None, None)
