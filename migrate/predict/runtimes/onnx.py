"""The `.onnx` runtime of `predict`: an `.onnx` file of `migrate export --onnx` on ONNX Runtime's
CPU provider (`ssd_mobilenet.formats.onnx.runner`; `pip install 'ssd-mobilenet-migrate[onnx]'`) or
on OpenVINO's CPU plugin (`openvino_model`; the `openvino` extra), one image per call, in a process
that never imports TensorFlow: ONNX Runtime unless `--runtime openvino` names OpenVINO
(`ssd_mobilenet.formats.onnx.runtimes` says which files run faster where).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.formats.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`OnnxFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.

`runner(path, threads, runtime)` is the same file as a measured runner, `run(images [1, H, W, 3])`,
for `verify --onnx` and `bench`.
"""

from __future__ import annotations

from migrate.predict.runtimes.file import FileRuntime, one_image_runner
from ssd_mobilenet.formats.onnx import runtimes


class OnnxRuntime(FileRuntime):
    """`predict`'s runtime for an `.onnx` file (`migrate.predict.runtimes.Runtime`, `file.FileRuntime`);
    an instance's `name` is the runtime that runs its file."""

    name = "ONNX Runtime"  # the default (`--runtime openvino`: OpenVINO)

    def __init__(self, path: str, threads: int | None = None, runtime: str | None = None, say=None, warn=None):
        self.file = runtimes.open_file(path, threads=threads, runtime=runtime or runtimes.ONNX_RUNTIME)
        self.name = self.file.runtime
        super().__init__(path, f"ONNX file, {self.file.runtime}", say, warn)


def runner(path: str, threads: int | None = None, runtime: str | None = None):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` (numpy, [1, D, ...]) of the `.onnx`
    file at `path` on `runtime` (a `runtimes.RUNTIMES` key; default ONNX Runtime) with `threads`
    threads (default: the CPU count): the photo fed as the file takes it, as `predict` runs it.
    Imports no TensorFlow.
    Raises:
      InputError: no such file, or not one of `migrate export --onnx`.
    """
    file = runtimes.open_file(path, threads=threads, runtime=runtime or runtimes.ONNX_RUNTIME)
    return one_image_runner(file, "an ONNX side")
