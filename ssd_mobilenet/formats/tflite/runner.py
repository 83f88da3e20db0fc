"""A `.tflite` file of `migrate export` on the LiteRT interpreter (`ai-edge-litert`), without
TensorFlow: what the file is, and its detections on one photo of any size.

`ModelFile(path).detect(image)` takes uint8 [H, W, 3] RGB and returns the signature's four
outputs for it (numpy, [1, D, ...]: `detection_boxes` [ymin, xmin, ymax, xmax] normalised to
the image, `detection_scores`, `detection_classes` 1-based, `num_detections`). How the photo
reaches the network depends on the file (`input_mode`, `ssd_mobilenet.formats.preprocess`; the
feeding is `file_runner.FileRunner`'s, shared with the `.onnx` file's runner):
- "any size" (uint8 files with metadata, the default export): the photo goes in as it is, and
  the file resizes and scales it with the TF1 graph's kernels (TFLite's RESIZE_BILINEAR /
  RESIZE_NEAREST_NEIGHBOR with align_corners and half_pixel_centers off, on float32).
- "model size, float32": the graph's `Preprocessor` in numpy (`preprocess`, bit for bit), and
  the scaled image goes in.
- "model size, uint8" (files written with a fixed size): resized in numpy as the graph
  resizes, rounded to uint8 for the file. Exact for photos of the model's size; for other
  sizes the rounding moves pixels by up to 0.5 (`exact_for_any_size` is False).

The interpreter is LiteRT's with its default op resolver, which holds
`TFLite_Detection_PostProcess` and applies the XNNPACK delegate, with `threads` threads.
"""

from __future__ import annotations

import os

import numpy as np

from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.formats.file_runner import FileRunner, first_line, input_type, thread_count
from ssd_mobilenet.formats.preprocess import INPUT_NAMES
from ssd_mobilenet.formats.tflite import file_format as ff
from ssd_mobilenet.errors import InputError


def litert_interpreter():
    """LiteRT's `Interpreter` class, or `InputError` saying how to install it."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        # (or `pip install ai-edge-litert`)
        raise InputError("LiteRT is not installed: pip install 'ssd-mobilenet-migrate[litert]'") from None
    return Interpreter


class ModelFile(FileRunner):
    """One `.tflite` file on the LiteRT interpreter.

    `ModelFile(path)` reads a file; `ModelFile.from_bytes(content)` takes its bytes (a file just
    converted, never written).

    Attributes (besides `FileRunner`'s: the input, its mode and size, the graph's resize):
      path, bytes: the file (absolute; None from bytes) and its size.
      nms: "per-class", "regular" or "fast"; int8: the network is quantized (any int8 tensor);
      max_detections: D; operators: sorted op names; metadata: the file's entry or None.
    """

    def __init__(self, path: str, threads: int | None = None):
        self.path = os.path.abspath(path)
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such file")
        with open(path, "rb") as f:
            data = f.read()
        self._load(data, threads, path)

    @classmethod
    def from_bytes(cls, content: bytes, threads: int | None = None, name: str = "<bytes>") -> "ModelFile":
        """The `ModelFile` of a file's bytes `content`, as `ModelFile(path)` of a file holding them;
        `InputError` messages name `name` where they would name the path. `path` is None."""
        file = cls.__new__(cls)
        file.path = None
        # An immutable copy of a bytearray or memoryview (bytes as they are): the interpreter
        # reads the model from this buffer without copying it, for the object's whole life.
        file._load(bytes(content), threads, name)
        return file

    def _load(self, data: bytes, threads: int | None, name: str) -> None:
        """Loads `data` (a file's bytes) on the interpreter and reads what the file is (the
        class docstring's attributes but `path`); errors name `name`."""
        if data[4:8] != ff.IDENTIFIER:
            raise InputError(f"{name}: not a TFLite file (no TFL3 identifier)")
        Interpreter = litert_interpreter()
        threads = thread_count(threads)
        try:
            # From the bytes: the interpreter verifies the FlatBuffer there, while a truncated
            # file given by path can crash the process.
            interpreter = Interpreter(model_content=data, num_threads=threads)
            interpreter.allocate_tensors()  # applies the XNNPACK delegate now, not at the first image
            custom = ff.custom_operator_names(data)
        except (ValueError, RuntimeError) as e:
            raise InputError(f"{name}: the LiteRT interpreter cannot load it ({first_line(e)})") from None
        self.bytes, self.threads = len(data), threads
        signature = interpreter.get_signature_list().get(ff.SIGNATURE_KEY)
        if (not signature or len(signature["inputs"]) != 1 or signature["inputs"][0] not in INPUT_NAMES.values()
                or sorted(signature["outputs"]) != sorted(DETECTION_OUTPUTS)):
            # Taking one of INPUT_NAMES, returning DETECTION_OUTPUTS.
            raise InputError(f"{name}: no {ff.SIGNATURE_KEY} signature as `migrate export` writes it")
        flex = [op for op in custom if op.startswith("Flex")]
        if flex:
            more = f", {len(flex) - 1} more" if len(flex) > 1 else ""
            raise InputError(f"{name}: holds Flex ops ({flex[0]}{more}): LiteRT's builtins cannot run them")
        input_name = signature["inputs"][0]
        dtype = input_type(input_name)
        self._runner = interpreter.get_signature_runner(ff.SIGNATURE_KEY)
        self._interpreter = interpreter
        detail = self._runner.get_input_details()[input_name]
        shape = [int(s) for s in detail.get("shape_signature", detail["shape"])]
        if len(shape) != 4 or shape[0] != 1 or shape[3] != 3 or detail["dtype"] != np.dtype(dtype):
            raise InputError(f"{name}: input is {np.dtype(detail['dtype']).name} {shape}, not "
                             f"{dtype} [1, h, w, 3]")
        try:
            self.metadata = ff.read_metadata(data)
        except (ValueError, UnicodeDecodeError):
            raise InputError(f"{name}: its {ff.METADATA_NAME} metadata is not JSON") from None
        meta = self.metadata or {}
        if meta.get("version", 1) > ff.METADATA_VERSION:
            raise InputError(f"{name}: written by a newer release (metadata version {meta['version']})")
        dynamic = shape[1] < 0 or shape[2] < 0
        if dynamic and "image_size" not in meta:
            # A file of any size says the model's size in its metadata only.
            raise InputError(f"{name}: of any size, no {ff.METADATA_NAME} metadata")
        self._take_input(input_name, meta.get("image_size", shape[1:3]), dynamic, meta)
        self.nms = ff.NMS_PER_CLASS
        if ff.CUSTOM_OP in custom:
            self.nms = ff.NMS_REGULAR if ff.custom_op_options(data)[0][0].get("use_regular_nms") else ff.NMS_FAST
        self.int8 = any(t["dtype"] == np.int8 for t in interpreter.get_tensor_details())
        self.max_detections = int(self._runner.get_output_details()["detection_scores"]["shape_signature"][-1])
        self._data = data  # the interpreter reads the model from these bytes

    @property
    def operators(self) -> list:
        """Sorted op names of the file (`file_format.operator_names`; read when asked, as it
        imports LiteRT's generated schema)."""
        return ff.operator_names(self._data)

    @property
    def kind(self) -> str:
        """One line: post-processing, input, precision, detections."""
        return (f"{self.nms} NMS, {self.input_kind}, {'int8' if self.int8 else 'float32'}, "
                f"{self.max_detections} detections")

    def run(self, feed: np.ndarray) -> dict:
        """The file's input [1, ...] as `feed` gives it -> the four outputs (numpy, [1, D, ...])."""
        return {k: np.asarray(v) for k, v in self._runner(**{self.input_name: feed}).items()}
