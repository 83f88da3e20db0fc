"""An `.onnx` file of `migrate export --onnx` on ONNX Runtime, without TensorFlow: what the file
is, and its detections on one photo of any size (`OnnxFile(path).detect`). What the file holds:
`file_format`; how a photo is fed to it, as to a `.tflite` file: `file_runner.FileRunner`.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.formats.file_runner import FileRunner, first_line, thread_count
from ssd_mobilenet.formats.onnx.file_format import METADATA_NAME, METADATA_VERSION
from ssd_mobilenet.formats.preprocess import INPUT_NAMES
from ssd_mobilenet.errors import InputError

# ONNX Runtime (1.32 measured, on Linux) starts Microsoft's telemetry as it loads unless this is set:
# it writes a device id and an SQLite store under ~/.cache/Microsoft/DeveloperTools and a `.ses` file
# into the temporary folder, files outside the paths a command is given (tests/test_leftovers.py).
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"


def import_onnxruntime():
    """The `onnxruntime` module, loaded with its telemetry off (`TELEMETRY_ENV` set to 1 unless the
    environment already sets it; read once, as the library loads). Raises ImportError without it."""
    os.environ.setdefault(TELEMETRY_ENV, "1")
    import onnxruntime
    return onnxruntime


def session_options(threads: int | None):
    """ONNX Runtime's session options: `threads` intra-op threads (default: the CPU count), one
    inter-op thread (the graph is a chain), its log at errors only, and its threads' spinning off.

    Spinning (ONNX Runtime's default) keeps the worker threads busy-waiting for work after each
    parallel section. Measured on 2 cores (docs/benchmarks_onnx.md): on a quiet machine it gained
    a few percent; left on after a run it slowed a TF1 session run between two of its runs (not
    with `session.force_spinning_stop`); and with another process busy on one of the cores it
    ran several times slower than without. A `predict` process decodes each photo between runs
    and shares its machine, so spinning is off there, and `bench` measures it as `predict` runs
    it."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = thread_count(threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors: its warnings about unused initializers are not the user's
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _return_freed_memory() -> None:
    """Gives the C heap's free pages back to the system (glibc's `malloc_trim`; nothing where
    the C library is another). Building a session frees several copies of the graph and its
    weights (ONNX Runtime's layout transforms reorder every convolution's filters); glibc keeps
    those pages, while the large blocks a large photo's tensors need are mapped apart from the
    heap, on top of them (docs/benchmarks_onnx.md measures both)."""
    import ctypes
    try:  # the symbols the process has loaded, the C library's among them
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only (not musl, macOS)
    except OSError:
        trim = None
    if trim is not None:
        trim(0)


class OnnxFile(FileRunner):
    """An `.onnx` file of `migrate export --onnx` in an ONNX Runtime session.

    `detect(image uint8 [H, W, 3])` -> the four outputs (numpy, [1, D, ...]) for that photo,
    fed as the file takes it (`FileRunner`: the photo as it is for the default file, which
    resizes and scales it itself; prepared as the TF1 graph prepares it for a fixed-size
    float32 file, `ssd_mobilenet.formats.preprocess`, bit for bit).

    Attributes (besides `FileRunner`'s: the input, its mode and size, the graph's resize):
      path, threads, session: the file, ONNX Runtime's intra-op threads, its session.
      metadata: the file's `METADATA_NAME` entry; kind: one line saying what the file is.
    Raises:
      InputError: no such file, a file ONNX Runtime cannot load (truncated, not ONNX), or an
        ONNX file that is not this project's (other outputs, no metadata).
    """

    runtime = "ONNX Runtime"  # what runs the file, as a line names it (`openvino_model.OpenVinoFile`'s is OpenVINO)

    def __init__(self, path: str, threads: int | None = None):
        try:
            ort = import_onnxruntime()
        except ImportError:
            # (or `pip install onnxruntime`)
            raise InputError("ONNX Runtime is not installed: pip install 'ssd-mobilenet-migrate[onnx]'") from None
        self.path = path
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such file")
        self.threads = thread_count(threads)
        try:
            self.session = ort.InferenceSession(path, sess_options=session_options(self.threads),
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's errors have no stable public classes
            # Its message repeats the path: "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model
            # from PATH failed:Protobuf parsing failed."; the reason is after "failed:".
            reason = first_line(e).rpartition(" failed:")[2].strip() or type(e).__name__
            raise InputError(f"{path}: ONNX Runtime cannot load it: {reason}") from None
        _return_freed_memory()
        self._take_contract([o.name for o in self.session.get_outputs()],
                            self.session.get_modelmeta().custom_metadata_map.get(METADATA_NAME),
                            [i.name for i in self.session.get_inputs()])

    def _take_contract(self, outputs: list, entry, inputs: list) -> None:
        """Checks what the runtime read from `self.path` against `file_format`'s contract and
        takes its input: `outputs` and `inputs` (names), `entry` (the `METADATA_NAME` value, a
        JSON string, or None). Sets `metadata`. Raises InputError naming the file."""
        path = self.path
        if sorted(outputs) != sorted(DETECTION_OUTPUTS):
            raise InputError(f"{path}: not from `migrate export` (outputs: {', '.join(outputs) or 'none'})")
        try:
            self.metadata = json.loads(entry) if entry else None
        except ValueError:
            self.metadata = None
        if not isinstance(self.metadata, dict):
            raise InputError(f"{path}: not from `migrate export` (no {METADATA_NAME} metadata)")
        try:
            version = int(self.metadata.get("version", 0))
            image_size = [int(v) for v in self.metadata["image_size"]]
            if len(image_size) != 2:  # [h, w]
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: {METADATA_NAME} metadata without version or image_size") from None
        if version > METADATA_VERSION:
            raise InputError(f"{path}: from a newer release (metadata version {version}, this one reads "
                             f"{METADATA_VERSION})")
        if len(inputs) != 1 or inputs[0] not in INPUT_NAMES.values():
            raise InputError(f"{path}: not from `migrate export` (inputs: {', '.join(inputs)})")
        self._take_input(inputs[0], image_size, bool(self.metadata.get("any_size")), self.metadata)

    @property
    def kind(self) -> str:
        """One line, as the TFLite file's `ModelFile.kind`: input, precision, classes, detections."""
        precision = "float32"
        if self.metadata.get("int8"):
            aware = self.metadata.get("quantization") == "quantization-aware"
            activations = self.metadata.get("activations")  # post-training files since uint8 became the default
            precision = ("int8 QDQ (quantization-aware)" if aware else
                         f"int8 QDQ, {activations} activations" if activations else "int8 QDQ")
        return (f"{self.input_kind}, {precision}, {self.metadata.get('num_classes')} classes, "
                f"{self.metadata.get('max_detections')} detections")

    def run(self, feed: np.ndarray) -> dict:
        """The file's input [1, ...] as `feed` gives it -> the four outputs (numpy, [1, D, ...])."""
        values = self.session.run(list(DETECTION_OUTPUTS), {self.input_name: feed})
        return dict(zip(DETECTION_OUTPUTS, values))
