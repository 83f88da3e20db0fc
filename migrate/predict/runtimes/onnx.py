"""The ONNX Runtime runtime of `predict`: an `.onnx` file of `migrate export --onnx` on ONNX
Runtime's CPU provider, one image per call, in a process that never imports TensorFlow
(`ssd_mobilenet.formats.onnx.runner`; `pip install 'ssd-mobilenet-migrate[onnx]'`).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.formats.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`OnnxFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.

`runner(path, threads)` is the same file as a measured runner, `run(images [1, H, W, 3])`, for
`verify --onnx`.
"""

from __future__ import annotations

from migrate.predict.runtimes.file import FileRuntime, one_image_runner
from ssd_mobilenet.formats.onnx.runner import OnnxFile


class OnnxRuntime(FileRuntime):
    """`predict`'s runtime for an `.onnx` file (`migrate.predict.runtimes.Runtime`, `file.FileRuntime`)."""

    name = "ONNX Runtime"

    def __init__(self, path: str, threads: int | None = None, say=None, warn=None):
        self.file = OnnxFile(path, threads=threads)
        super().__init__(path, "ONNX file, ONNX Runtime", say, warn)


def runner(path: str, threads: int | None = None):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` (numpy, [1, D, ...]) of the `.onnx`
    file at `path` on ONNX Runtime with `threads` threads (default: the CPU count): the photo fed
    as the file takes it, as `predict` runs it. Imports no TensorFlow.
    Raises:
      InputError: no such file, or not one of `migrate export --onnx`.
    """
    return one_image_runner(OnnxFile(path, threads=threads), "an ONNX side")
