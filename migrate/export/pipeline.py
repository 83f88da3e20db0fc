"""The steps every export format shares; a format (a `Format` in its own module: `tflite.TFLite`,
`onnx.Onnx`, `web.Web`) says only what differs: its options, its conversion, its writer, the
runner of its file for the drift.

`export(form, converted, out, ...)` runs them in this order:

1. Refused before anything is read, each in one line (`InputError`): an output that may not
   be written (`atomic_write.check_output`), a bad --max-detections, --calibration without
   --int8, then the format's option values and the packages it needs (`Format.check`). The
   options a format does not take at all are the command's to refuse (`refusal`, from
   `Format.refused`), as its library function has no argument for them.
2. The converted directory's config, read without its weights: a quantization-aware model's file
   is int8 without --int8, and the format refuses what it does not take of the model
   (`Format.check_model`).
3. What the file carries (`inputs.carried`), the model (`inputs.load_converted`), and with
   --int8 the calibration images (`inputs.calibration_images`); `Format.prepare` (the web page's
   example photo).
4. The conversion (`Format.convert`, after its `converting` line and the int8 one).
5. An int8 file's drift (`drift.drift_of`, on up to `DRIFT_IMAGES` images): against the converted
   model, or against the format's own float file where it quantizes one (`File.float_data`);
   `Format.runner` runs the file. A quantization-aware model's file is compared on generated
   images, the model's FakeQuant ops in float32, and so is a file of float16 weights
   (`File.precision`: the web page's).
6. The output written whole or not at all (`Format.write`; a file's bytes by default).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from migrate.common import console
from migrate.export.drift import DRIFT_IMAGES, drift_notes, drift_of
from migrate.export.inputs import calibration_images, carried, converted_config, load_converted
from ssd_mobilenet.errors import InputError
from ssd_mobilenet import atomic_write

# The command's options that some format does not take, and their defaults: an option whose
# default is a value (--input uint8) counts as given only with another value, and is named with it.
OPTION_DEFAULTS = {"--nms": None, "--int8": False, "--calibration": None, "--example": None, "--input": "uint8",
                   "--float32": False}
# Why the file formats refuse --example and --float32.
WEB_ONLY = "for the --web page only"


def refusal(form: type, given: dict) -> str | None:
    """The line refusing the first option in `given` ({flag: value}, `OPTION_DEFAULTS`' flags)
    that the format `form` does not take (`form.refused`, in its order), or None."""
    for flag, why in form.refused.items():
        value, default = given.get(flag, OPTION_DEFAULTS[flag]), OPTION_DEFAULTS[flag]
        if value not in (None, False, default):
            return f"{f'{flag} {value}' if default else flag}: {why}"
    return None


@dataclass
class Job:
    """What the shared steps hand a format to convert.

    Attributes:
      converted: the converted directory; model: its Keras model (`inputs.load_converted`);
      entry: what the file carries of it (`inputs.carried`: labels, synthetic);
      max_detections: rows of the file's outputs (the model's `max_total_detections` by default);
      int8: post-training quantization asked for; aware: a quantization-aware model (int8 always);
      names, images: the calibration images (uint8 [H, W, 3] each) with --int8, else empty.
    """
    converted: str
    model: object
    entry: dict
    max_detections: int
    int8: bool
    aware: bool
    names: list
    images: list

    @property
    def config(self):
        return self.model.config


@dataclass
class File:
    """A format's conversion.

    Attributes:
      data: the file's bytes (the web page's: its model's);
      notes: what the file differs in from the converted model, for the command to print;
      float_data: the float file an int8 file is compared with, or None: with the converted model;
      fields: what `export`'s dict says of the file besides the shared keys (its NMS, input, ...);
      precision: "float16" for a file of float16 weights, compared with the converted model as an
      int8 file is (its drift line named so); None for float32 and int8 files;
      agreement: the drift lines (`drift_notes`), which `export` fills in before `Format.write`.
    """
    data: bytes
    notes: list = field(default_factory=list)
    float_data: bytes | None = None
    fields: dict = field(default_factory=dict)
    precision: str | None = None
    agreement: list = field(default_factory=list)


class Format:
    """What one export format says of itself; `export` does the rest. The defaults are a file
    format that takes every shared option and writes one file."""

    flag = ""  # the option naming the output, in its errors ("--tflite")
    is_dir = False  # the output is a folder
    refused: dict = {}  # {flag of OPTION_DEFAULTS: why the format does not take it}, checked in this order
    int8_name = "int8"  # what its int8 file is called in the progress lines ("int8 QDQ")
    aware_note = ""  # the note on a quantization-aware model's file: how it is int8, what checks it

    def check(self, int8: bool) -> None:
        """Its own options' values and the packages it needs, before anything is read.
        Raises `InputError`."""

    def check_model(self, converted: str, config) -> None:
        """What it does not take of the model, from its config (`SSDConfig`), before the weights
        are loaded. Raises `InputError` naming `converted` or the option."""

    def prepare(self, job: Job, say) -> None:
        """What it finds with the loaded model before converting it (the web page's example)."""

    def converting(self, job: Job) -> str:
        """Its progress line before the conversion."""
        raise NotImplementedError

    def convert(self, job: Job) -> File:
        """The conversion: with `job.int8` the int8 file, calibrated on `job.images`."""
        raise NotImplementedError

    def runner(self, data: bytes, job: Job):
        """The runner of its file's bytes `data` for the drift: `feed(image uint8 [H, W, 3])` ->
        the file's input [1, ...]; `run(feed)` -> the four detection outputs, numpy [1, D, ...]."""
        raise NotImplementedError

    def compared_on(self, calibration) -> str:
        """What its int8 drift line says it was measured on ("calibration images", "generated
        images"); `calibration` as given to `export`."""
        return "generated images" if calibration is None else "calibration images"

    def write(self, out: str, file: File, job: Job, say) -> dict:
        """Writes `file` to `out` whole or not at all; returns its fields of `export`'s dict."""
        atomic_write.write_bytes(out, file.data)
        return {"bytes": len(file.data)}


def _silent(msg: str) -> None:
    pass


def export(form: Format, converted: str, out: str, max_detections: int | None = None, int8: bool = False,
           calibration=None, labels: str | None = None, force: bool = False, progress=None, warn=None) -> dict:
    """Writes `form`'s file (or folder) of the converted directory `converted` to `out`.

    Args:
      form: the format, its own options set (`tflite.TFLite(nms, input_type)`, ...).
      max_detections: rows of the outputs (default: the model's `max_total_detections`).
      int8: post-training int8 quantization, calibrated on `calibration` (image files and
        folders) or, when None, on generated images; then compared with its float reference on
        (up to `DRIFT_IMAGES` of) those images, `warn` called for each image whose detections
        scoring >= `REPORT_MIN_SCORE` the int8 file does not all keep.
      labels: the label map the file carries (a file or `coco`; default: the one `converted`
        carries; `inputs.carried`).
      force: replace an existing `out`.
      progress: `say(line)` for the progress lines.
    Returns:
      dict: out, max_detections, int8 (the file is int8), quantization_aware, drift (`drift_of`'s
      dict, or None), notes, seconds, and the format's fields (`File.fields`, `Format.write`'s).
    Raises:
      InputError: bad input, one line naming the path or option; nothing is written.
    """
    say, warn = progress or _silent, warn or _silent
    start = time.perf_counter()
    aware = _checked(form, converted, out, max_detections, int8, calibration, force)
    entry = carried(converted, labels)
    model = load_converted(converted)
    names, images = calibration_images(calibration, model.config) if int8 else ([], [])
    job = Job(converted, model, entry, max_detections or model.config.max_total_detections, int8, aware, names,
              images)
    form.prepare(job, say)
    say(form.converting(job))
    if int8 or aware:
        say(f"{form.int8_name} calibrated on {len(images)} images" if int8 else
            f"{form.int8_name} on the checkpoint's quantization ranges")
    file = form.convert(job)
    notes, drift = list(file.notes), None
    if aware:
        notes.append(form.aware_note)
    if int8 or aware or file.precision:
        precision = file.precision or "int8"
        compared_on = form.compared_on(calibration) if int8 else "generated images"
        drift, reference = _drift(form, job, file, compared_on, precision, say)
        # A quantization-aware file differs on every image by design (its integer input and
        # weights): the totals say by how much; per-image warnings are for post-training files.
        file.agreement = drift_notes(drift, compared_on, reference, None if aware else warn, precision)
        notes += file.agreement
    written = form.write(out, file, job, say)
    return {"out": os.path.abspath(out), "max_detections": job.max_detections, "int8": int8 or aware,
            "quantization_aware": aware, "drift": drift, "notes": notes, **file.fields, **written,
            "seconds": time.perf_counter() - start}


def _checked(form: Format, converted: str, out: str, max_detections, int8: bool, calibration, force: bool) -> bool:
    """Steps 1 and 2 (module docstring): bad input refused before the weights are loaded, in one
    line (`InputError`); returns whether the model is quantization-aware."""
    atomic_write.check_output(out, force, is_dir=form.is_dir, flag=form.flag)
    if max_detections is not None and max_detections < 1:
        raise InputError(f"--max-detections {max_detections}: must be >= 1")
    if calibration is not None and not int8:
        raise InputError("--calibration: calibrates the --int8 quantization; add --int8")
    form.check(int8)
    config = converted_config(converted)
    if config.weight_bits and int8:
        # Its file is int8 on the ranges its checkpoint holds, without calibration.
        raise InputError("--int8: a quantization-aware model exports as int8 without it")
    form.check_model(converted, config)
    return bool(config.weight_bits)


def _drift(form: Format, job: Job, file: File, compared_on: str, precision: str, say) -> tuple:
    """(`drift_of`'s dict, what the notes call the reference): the `precision` file against the
    converted model, or against the format's float file (`file.float_data`), on the calibration
    images, or generated ones for a quantization-aware model and a float16 file."""
    names, images = (job.names, job.images) if job.int8 else calibration_images(None, job.config)
    names, images = names[:DRIFT_IMAGES], images[:DRIFT_IMAGES]
    said, reference = ("the converted model", "the float model") if file.float_data is None else ("the float file",) * 2
    say(f"comparing the {precision} file with {said} on {compared_on}")
    with console.native_stderr_quieted():
        runner = form.runner(file.data, job)
        expected = (_model_detections(job.model) if file.float_data is None else
                    _file_detections(form.runner(file.float_data, job)))
        pairs = ((expected(image, feed), runner.run(feed)) for image, feed in
                 ((image, runner.feed(image)) for image in images))
        return drift_of(names, pairs), reference


def _model_detections(model):
    """(image, feed) -> the converted model's detections (numpy, [1, D, ...]) on the pixels a
    file of `feed` sees of `image`."""
    from ssd_mobilenet import detector
    detect = detector.Detector(model, fold_batch_norm=True)

    def detections(image, feed):
        # The float model on the same pixels: the photo itself, or the fixed-size file's uint8
        # frame; a float32 feed is the model's preprocessing of the photo: the model gets the photo.
        pixels = feed if feed.dtype == np.uint8 else np.asarray(image)[None]
        return {k: v.numpy() for k, v in detect(pixels).items()}
    return detections


def _file_detections(runner):
    """(image, feed) -> the float file's detections on the same `feed` (`Format.runner`'s run)."""
    return lambda image, feed: runner.run(feed)
