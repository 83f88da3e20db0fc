"""`predict`: a model over image files and folders -> JSON lines (and pictures).

The model is a converted directory, run by TensorFlow (`migrate.predict.runtimes.tensorflow`: a `tf.data`
pipeline, batches of mixed sizes), a `.tflite` file of `migrate export`, run by LiteRT
(`migrate.predict.runtimes.litert`), or an `.onnx` file of `migrate export --onnx`, run by ONNX Runtime
(`migrate.predict.runtimes.onnx`); a file runs one image per call, with no TensorFlow in the process. This module
writes what either yields: one JSON line per image, the pictures, the progress; it does not
import TensorFlow.

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

import numpy as np

from migrate.common import images
from migrate.predict.runtimes import model_classes, model_metadata, open_runtime
from migrate.predict.runtimes.base import Result
from ssd_mobilenet import atomic_write, converted_dir
from ssd_mobilenet import label_map
from ssd_mobilenet.errors import OutputExistsError

PROGRESS_EVERY_S = 2.0
# What a class id without a name in --labels costs a detection (`label_map.coverage_warning`).
UNNAMED = '"label": null'


def model_labels(model: str, labels: str | None, warn) -> dict | None:
    """{class id: name} of `labels` (a label map file or `coco`) when given, else of the label map
    `model` carries: a converted directory's (`converted_dir.label_map_file`), a `.tflite` or
    `.onnx` file's metadata `labels`; None without either. One warning through `warn` when the
    map misses the model's upper class ids (`label_map.coverage_warning`).

    Raises:
      InputError: the map does not read, or names ids beyond the model's classes,
        which it never gives (`label_map.fits`): the map of another model.
    """
    if labels is None and os.path.isdir(model):
        labels = converted_dir.label_map_file(model)
    if labels is None:
        carried = model_metadata(model).get("labels") if os.path.isfile(model) else None
        return {int(k): v for k, v in carried.items()} if isinstance(carried, dict) and carried else None
    names = label_map.read(labels)
    num_classes = model_classes(model)
    if num_classes:
        label_map.fits(labels, names, num_classes)
    missed = label_map.coverage_warning(labels, names, num_classes, UNNAMED)
    if missed:
        warn(missed)
    return names


def synthetic_note(model: str) -> str | None:
    """The line that says `model`'s detections mean nothing, when it is marked as holding seeded
    synthetic weights: a converted directory (`converted_dir.synthetic_weights`), a `.tflite` or
    `.onnx` file exported from one (its metadata's `synthetic`); else None."""
    if converted_dir.synthetic_weights(model) if os.path.isdir(model) else model_metadata(model).get("synthetic"):
        return "note: synthetic weights (seeded, not trained): these detections and labels mean nothing"
    return None


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


# A terminal's line per image (`summary_line`) is at most this wide; the JSON lines go to files and pipes.
TERMINAL_COLUMNS = 100
# The detections a terminal's line names score at least this (predict's --png-min-score default).
TERMINAL_MIN_SCORE = 0.5


def _named(detection: dict) -> str:
    name = detection.get("label") or f"id {detection['class_id']}"
    return f"{name} {detection['score']:.2f}"


def summary_line(line: dict, width: int = TERMINAL_COLUMNS) -> str | None:
    """One image's `record` as a terminal shows it: the path, the size, the detection count, and
    the best detections scoring >= TERMINAL_MIN_SCORE (label or `id N`, score), as many as fit
    in `width` columns:

        photos/a.jpg  480x640  12 detections: dog 0.91, person 0.88, id 3 0.52, +2 more

    None for an unreadable image (its warning is on stderr)."""
    if "error" in line:
        return None
    count = line["num_detections"]
    head = f"{line['image']}  {line['height']}x{line['width']}  {count} detection{'s' if count != 1 else ''}"
    best = [_named(d) for d in line["detections"] if d["score"] >= TERMINAL_MIN_SCORE]
    for shown in range(len(best), 0, -1):
        rest = len(best) - shown
        text = f"{head}: {', '.join(best[:shown])}" + (f", +{rest} more" if rest else "")
        if len(text) <= width:
            return text
    return head


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
                # --force would replace the folder or file whole, the input with it.
                raise OutputExistsError(f"{path}: holds an input; choose another {what}")


def run(model: str, inputs, out: str | None = None, png_dir: str | None = None, force: bool = False,
        labels: str | None = None, min_score: float = 0.0, png_min_score: float = 0.5, stdout=None,
        terminal: bool = False, progress=None, warn=None, **runtime_options) -> dict:
    """Runs a model over images; writes JSON lines (and PNGs); returns a summary.

    Args:
      model: a directory written by `migrate convert` (TensorFlow), or a `.tflite` or `.onnx` file
        written by `migrate export` (LiteRT or ONNX Runtime, no TensorFlow): `open_runtime` opens it.
      inputs: image files and folders (`images.list_images`).
      out: JSON lines file, written to a temporary file and renamed into place at the end;
        None writes the lines to `stdout` as they come.
      terminal: with `out` None, `stdout` is a person's terminal: one `summary_line` per image
        there instead of its JSON line, as wide as the terminal up to TERMINAL_COLUMNS.
      png_dir: folder for the images with their detections drawn (score >= png_min_score; class
        name or id and score, a colour per class), named by `png_names`; written to a temporary
        folder and renamed into place.
      force: replace an existing `out` / non-empty `png_dir`.
      labels: label map file (`label_map`; or a shipped one's name, `coco`) for a `label` per
        detection (default: the label map a converted directory carries; `model_labels`).
      min_score: detections below it are left out of the JSON lines.
      progress: callable(str) for progress; warn: callable(str) for unreadable images
        (default: stderr).
      runtime_options: the runtime's own (`migrate.predict.runtimes.KINDS[...].options`). TensorFlow's:
        batch_size, images per model call (default 8), or max_memory_mb, which measures the
        largest batch whose allocator peak stays under that budget
        (`runtimes.tensorflow.budget_batch_size`; the input pipeline then prepares one batch
        ahead, besides the budget); jit_compile; precision; trace_dir, a TensorBoard profiler
        trace of up to 3 batches (after a first, warm-up batch when there is more than one);
        memory_growth, memory_limit_mb, weight_cache (`memory.configure`). LiteRT's and ONNX
        Runtime's: threads (default: the CPU count).
    Returns:
      dict: images, failed, detections, seconds, images_per_s, batch_size, runtime, out, png_dir,
      note (`synthetic_note`, or None).
    Raises:
      InputError (OutputExistsError): bad input, with a one-line message; nothing is written.
    """
    say = progress or (lambda msg: None)
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    atomic_write.check_output(out, force, is_dir=False, flag="--out")
    atomic_write.check_output(png_dir, force, is_dir=True, flag="--png")
    paths = images.list_images(inputs)
    _check_not_an_input(out, png_dir, [model, *paths])
    names = model_labels(model, labels, warn)
    runtime = open_runtime(model, say=say, warn=warn, **runtime_options)
    # A terminal narrower than the lines' 100 columns gets lines as wide as it is.
    width = min(shutil.get_terminal_size((TERMINAL_COLUMNS, 24)).columns, TERMINAL_COLUMNS)

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

        summary = {"images": len(paths), "failed": 0, "detections": 0, "batch_size": runtime.batch_size,
                   "runtime": runtime.name, "note": synthetic_note(model)}
        start = last_report = time.perf_counter()
        results = runtime.results(paths)
        cleanup.callback(results.close)  # the TensorFlow runtime's trace stops with its generator
        for done, result in enumerate(results, 1):
            line = record(result, names, min_score)
            if not (terminal and out is None):
                sink.write(json.dumps(line) + "\n")
            elif "error" not in line:
                sink.write(summary_line(line, width) + "\n")
            if result.error is not None:
                summary["failed"] += 1
                warn(f"warning: {result.path}: {result.error}")
            else:
                summary["detections"] += line["num_detections"]
                if png_dir is not None:
                    from migrate.common import draw  # Pillow's drawing modules, only for --png
                    drawn = draw.draw_labelled(runtime.read_image(result.path), result.boxes, result.classes,
                                               result.scores, names, png_min_score)
                    draw.write_png(drawn, os.path.join(tmp_png, png_paths[result.path]))
            now = time.perf_counter()
            if now - last_report >= PROGRESS_EVERY_S:
                sink.flush()
                say(f"{done}/{len(paths)} images, {done / (now - start):.1f} images/s")
                last_report = now
        results.close()
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
