"""`export --tflite`: a converted model directory -> a deployable file (`--tflite OUT.tflite`).

`export(converted, tflite=OUT, ...)` is the command as a library function; what the file holds
and how each post-processing mode differs from the TF graph is `ssd_mobilenet.formats.tflite.writer`'s
docstring. `TFLite` is what the format says of itself; `pipeline.export` does the steps every
format shares (bad input is an `InputError` with one line naming the path or option,
before anything is written; the file is written under a temporary name and renamed into place).
"""

from __future__ import annotations

import tensorflow as tf

from migrate.common import console
from migrate.export import pipeline
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.preprocess import INPUT_TYPES, UINT8
from ssd_mobilenet.formats.tflite import file_format as tflite_format
from ssd_mobilenet.formats.tflite import writer as tflite_lib


class TFLite(pipeline.Format):
    """The `.tflite` file: `nms` (per-class, regular, fast) and `input_type` (uint8, float32) are
    `ssd_mobilenet.formats.tflite.writer.convert`'s; int8 during the conversion, the drift against the
    converted model on LiteRT's interpreter."""

    flag = "--tflite"
    refused = {"--example": pipeline.WEB_ONLY, "--float32": pipeline.WEB_ONLY}
    aware_note = ("quantization-aware: int8 convolutions on the checkpoint's FakeQuant ranges (weights "
                  "re-annotated symmetric per channel, the input on a [-1, 1] grid: "
                  "ssd_mobilenet/formats/tflite/integer.py); `verify --tflite` matches it with the TF1 graph")

    def __init__(self, nms: str = tflite_format.NMS_PER_CLASS, input_type: str = UINT8):
        self.nms, self.input_type = nms, input_type

    def check(self, int8: bool) -> None:
        if self.nms not in tflite_format.NMS_MODES:
            raise InputError(f"--nms {self.nms}: one of {', '.join(tflite_format.NMS_MODES)}")
        if self.input_type not in INPUT_TYPES:
            raise InputError(f"--input {self.input_type}: one of {', '.join(INPUT_TYPES)}")

    def check_model(self, converted: str, config) -> None:
        """A quantization-aware model's file is its integer file: uint8 input, per-class NMS."""
        if config.weight_bits and (self.nms != tflite_format.NMS_PER_CLASS or self.input_type != UINT8):
            flag = f"--nms {self.nms}" if self.nms != tflite_format.NMS_PER_CLASS else f"--input {self.input_type}"
            raise InputError(f"{flag}: not for a quantization-aware model (uint8 input, per-class NMS)")

    def converting(self, job: pipeline.Job) -> str:
        return f"converting to TFLite: {self.nms} NMS, {self.input_type} input, {job.max_detections} detections"

    def convert(self, job: pipeline.Job) -> pipeline.File:
        notes = []
        with console.native_stderr_quieted():
            data, nms = self._convert(job, notes)
        notes += [tflite_lib.DIFFERENCES[nms]] if nms in tflite_lib.DIFFERENCES else []
        return pipeline.File(data, notes, fields={"nms": nms, "input": self.input_type,
                                                  "operators": tflite_format.operator_names(data)})

    def _convert(self, job: pipeline.Job, notes: list) -> tuple:
        """(file bytes, the NMS mode it has): per-class falls back to regular when the converter
        would need Flex ops for it (the issue's rule), with a note in `notes`."""
        def convert(nms):
            return tflite_lib.convert(job.model, nms=nms, input_type=self.input_type,
                                      max_detections=job.max_detections,
                                      representative_images=job.images if job.int8 else None, carried=job.entry)
        try:
            return convert(self.nms), self.nms
        except tflite_lib.NeedsFlexOps as e:
            if self.nms != tflite_format.NMS_PER_CLASS:
                raise
            notes.append(f"per-class NMS needs Flex ops with TensorFlow {tf.__version__}'s converter ({e}); "
                         f"fell back to --nms {tflite_format.NMS_REGULAR}")
            return convert(tflite_format.NMS_REGULAR), tflite_format.NMS_REGULAR

    def runner(self, data: bytes, job: pipeline.Job):
        """The file on LiteRT's interpreter (`ModelFile`: `feed` as `tflite.file_input` takes a
        photo, the image itself for a file that resizes photos)."""
        from ssd_mobilenet.formats.tflite import runner as model_file
        return model_file.ModelFile.from_bytes(data, name="the converted int8 file")

    def compared_on(self, calibration) -> str:
        # The images it was calibrated on, given or generated: its line has always said so.
        return "calibration images"


def export(converted: str, tflite: str, nms: str = tflite_format.NMS_PER_CLASS, input_type: str = UINT8,
           max_detections: int | None = None, int8: bool = False, calibration=None, force: bool = False,
           progress=None, warn=None, labels: str | None = None) -> dict:
    """Writes the TFLite file of `converted` to `tflite`.

    Args:
      converted: a directory written by `migrate convert`.
      tflite: the `.tflite` file to write.
      nms: `ssd_mobilenet.formats.tflite.writer.convert`'s.
      input_type: `ssd_mobilenet.formats.tflite.writer.convert`'s.
      max_detections: `ssd_mobilenet.formats.tflite.writer.convert`'s.
      int8: post-training int8 quantization, calibrated on `calibration` (image files and
        folders) or, when None, on generated images (`tflite.generated_images`). The file is then
        compared with the float model on (up to `DRIFT_IMAGES` of) those images, and `warn` is
        called for each image whose confident detections (score >= `REPORT_MIN_SCORE`) the
        quantized file does not all reproduce (same class, IoU >= `MATCH_IOU`). Refused for a
        quantization-aware model, whose file is always int8 on its checkpoint's ranges
        (compared with the converted model on generated images).
      force: replace an existing `tflite`.
      labels: the label map the file's metadata carries (a file or `coco`; default: the one
        `converted` carries; `inputs.carried`), for `predict` on the file.
    Returns:
      dict: notes (what the file differs in from the converted model), int8, quantization_aware,
      drift (`drift.drift_of`'s, or None), out, bytes, nms, input, max_detections, operators (the
      file's op names), seconds.
    Raises:
      InputError: bad input, one line naming the path or option; nothing is written.
    """
    return pipeline.export(TFLite(nms, input_type), converted, tflite, max_detections=max_detections, int8=int8,
                           calibration=calibration, labels=labels, force=force, progress=progress, warn=warn)
