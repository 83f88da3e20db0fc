"""`export --onnx`: a converted model directory -> one `.onnx` file (`ssd_mobilenet.formats.onnx.writer`;
a quantization-aware model's is int8 QDQ on its checkpoint's ranges).

`export_onnx(converted, out, ...)` is the command as a library function; `Onnx` is what the
format says of itself, `pipeline.export` does the steps every format shares (bad input is an
`InputError` with one line naming the path or option, before anything is written; the
file is written under a temporary name and renamed into place). `onnx_converter` is the ONNX
conversion with the packages it imports checked, for the web page too.
"""

from __future__ import annotations

from migrate.export import pipeline
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.preprocess import INPUT_TYPES


def onnx_converter(flag: str, int8: bool = False):
    """`ssd_mobilenet.formats.onnx.writer`, every package the export imports imported here (tf2onnx; with
    `int8` onnxruntime's quantization tools), so that a missing one is one line.

    Raises:
      InputError: `flag` ("--onnx", "--web"), the missing package and the extra to install.
    """
    try:
        import tf2onnx  # noqa: F401  (imported by `onnx_lib.convert`)

        from ssd_mobilenet.formats.onnx import writer as onnx_lib
        if int8:
            from ssd_mobilenet.formats.onnx.runner import import_onnxruntime
            import_onnxruntime()  # its telemetry off before the quantization tools load it
            import onnxruntime.quantization  # noqa: F401  (`onnx_integer.quantize`, the drift)
    except ImportError as e:
        raise InputError(f"{flag}: {(e.name or 'tf2onnx').split('.')[0]} is not installed: pip install "
                               "'ssd-mobilenet-migrate[onnx-export]'") from None
    return onnx_lib


class Onnx(pipeline.Format):
    """The `.onnx` file: `input_type` "uint8" (a photo of any size, resized and scaled inside the
    file) or "float32" (the scaled image at the model's size, fixed: for TensorRT, which refuses
    uint8 inputs); `verbose` shows tf2onnx's log. Its int8 file is the float file quantized
    (`ssd_mobilenet.formats.onnx.integer`), compared with that float file on ONNX Runtime."""

    flag = "--onnx"
    refused = {"--example": pipeline.WEB_ONLY, "--float32": pipeline.WEB_ONLY,
               "--nms": "applies to --tflite files only, not to --onnx"}
    int8_name = "int8 QDQ"
    aware_note = ("quantization-aware: QDQ int8 convolutions on the checkpoint's FakeQuant ranges (the integer "
                  ".tflite file's weights, uint8 activations on TF1's grid, which TensorRT refuses: "
                  "ssd_mobilenet/formats/onnx/aware.py); `verify --onnx` matches it with the TF1 graph")

    def __init__(self, input_type: str = "uint8", verbose: bool = False):
        self.input_type, self.verbose = input_type, verbose

    def check(self, int8: bool) -> None:
        onnx_converter(self.flag, int8)
        if self.input_type not in INPUT_TYPES:
            raise InputError(f"--input {self.input_type}: one of {', '.join(INPUT_TYPES)}")

    def check_model(self, converted: str, config) -> None:
        """A quantization-aware model's ranges must be 8-bit (`onnx_aware.check_bits`)."""
        if config.weight_bits:
            from ssd_mobilenet.formats.onnx import aware as onnx_aware
            try:
                onnx_aware.check_bits(config)
            except ValueError as e:
                raise InputError(f"{converted}: {e}") from None

    def converting(self, job: pipeline.Job) -> str:
        from ssd_mobilenet.formats.onnx import writer as onnx_lib
        return f"converting to ONNX: opset {onnx_lib.OPSET}, {self.input_type} input, {job.max_detections} detections"

    def convert(self, job: pipeline.Job) -> pipeline.File:
        from ssd_mobilenet.formats.onnx import writer as onnx_lib
        from ssd_mobilenet.formats.onnx.integer import activations_for
        proto = onnx_lib.convert(job.model, self.input_type, job.max_detections, verbose=self.verbose,
                                 carried=job.entry)
        float_data = None
        if job.int8:
            from ssd_mobilenet.formats import network
            from ssd_mobilenet.formats.onnx import integer as onnx_integer
            float_data = proto.SerializeToString()
            proto = onnx_integer.quantize(proto, [network.file_input(image, job.config, self.input_type)
                                                  for image in job.images], verbose=self.verbose)
        return pipeline.File(proto.SerializeToString(), float_data=float_data,
                             fields={"input": self.input_type, "opset": onnx_lib.OPSET,
                                     "operators": onnx_lib.operator_names(proto),
                                     "activations": activations_for(self.input_type) if job.int8 else None})

    def runner(self, data: bytes, job: pipeline.Job):
        return _Session(data, job.config, self.input_type)


class _Session:
    """An `.onnx` file's bytes on ONNX Runtime's CPU provider: `feed(image)` as the file takes
    a photo (`network.file_input`, as its calibration took it), `run(feed)` -> the four outputs."""

    def __init__(self, data: bytes, config, input_type: str):
        from ssd_mobilenet.formats.onnx.runner import import_onnxruntime, session_options
        ort = import_onnxruntime()
        self.session = ort.InferenceSession(data, sess_options=session_options(None),
                                            providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        self.config, self.input_type = config, input_type

    def feed(self, image):
        from ssd_mobilenet.formats import network
        return network.file_input(image, self.config, self.input_type)

    def run(self, feed) -> dict:
        return dict(zip(DETECTION_OUTPUTS, self.session.run(list(DETECTION_OUTPUTS), {self.input_name: feed})))


def export_onnx(converted: str, out: str, input_type: str = "uint8", max_detections: int | None = None,
                int8: bool = False, calibration=None, force: bool = False, verbose: bool = False, progress=None,
                warn=None, labels: str | None = None) -> dict:
    """Writes the ONNX file of `converted` to `out`.

    Args:
      input_type: "uint8" (a photo of any size, resized and scaled inside the file) or "float32"
        (the scaled image at the model's size, fixed: for TensorRT, which refuses uint8 inputs).
      max_detections: rows of the outputs (default: the model's `max_total_detections`).
      int8: QDQ int8 convolutions (`ssd_mobilenet.formats.onnx.integer`; uint8 activations for the
        uint8 input, symmetric int8 ones, TensorRT's form, for the float32 input), calibrated on
        `calibration` (image files and folders) or, when None, generated images, then compared with
        the float file on (up to `DRIFT_IMAGES` of) them; `warn` is called for each image whose
        detections scoring >= `REPORT_MIN_SCORE` the int8 file does not all keep. Refused for a
        quantization-aware model, whose file is always int8 on its checkpoint's ranges
        (`ssd_mobilenet.formats.onnx.aware`; compared with the converted model on generated images).
      verbose: show tf2onnx's log.
      labels: the label map the file's metadata carries (a file or `coco`; default: the one
        `converted` carries; `inputs.carried`), for `predict` on the file.
    Returns:
      dict: out, bytes, input, max_detections, opset, operators (the file's op types), int8, activations
        ("uint8" or "int8" for a post-training int8 file, else None),
      quantization_aware, drift (`drift.drift_of`'s, or None), notes, seconds.
    Raises:
      InputError: bad input, one line naming the path or option; nothing is written.
    """
    return pipeline.export(Onnx(input_type, verbose), converted, out, max_detections=max_detections, int8=int8,
                           calibration=calibration, labels=labels, force=force, progress=progress, warn=warn)
