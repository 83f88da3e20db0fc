"""The LiteRT runtime of `predict`: a `.tflite` file of `migrate export` on LiteRT's interpreter,
one image per call, in a process that never imports TensorFlow
(`ssd_mobilenet.formats.tflite.runner`).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.formats.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`ModelFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.

`runner(path, threads)` is the same file as a measured runner, `run(images [1, H, W, 3])`, for
`verify --tflite`'s and bench's TFLite sides (bench's memory process runs it without TensorFlow).
"""

from __future__ import annotations

import os

from migrate.predict.runtimes.file import FileRuntime, one_image_runner
from ssd_mobilenet.formats.tflite.runner import ModelFile
from ssd_mobilenet.errors import InputError


class LiteRTRuntime(FileRuntime):
    """`predict`'s runtime for a `.tflite` file (`migrate.predict.runtimes.Runtime`, `file.FileRuntime`)."""

    name = "LiteRT"

    def __init__(self, path: str, threads: int | None = None, say=None, warn=None):
        from migrate.common import console
        problem = None
        with console.native_stderr_quieted():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
            try:
                self.file = ModelFile(path, threads=threads or os.cpu_count())
            except InputError as e:
                problem = str(e)  # raised outside: the quieted lines are shown only for a crash
        if problem:
            raise InputError(problem)
        super().__init__(path, "LiteRT", say, warn)


def runner(path: str, threads: int | None = None):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` (numpy, [1, D, ...]) of the `.tflite`
    file at `path` on LiteRT's interpreter with `threads` threads (default `os.cpu_count()`, as
    `ModelFile`): `ModelFile.detect`, the photo fed as the file takes it (as `predict` runs it).
    The runner of the TFLite side's measurement in `verify` and of bench's TFLite sides; imports
    no TensorFlow. A file takes one image per call: `run` raises ValueError for other batches.
    Raises:
      InputError: no such file, or not one LiteRT can run as `migrate export` writes it.
    """
    from migrate.common import console
    with console.native_stderr_quieted():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
        file = ModelFile(path, threads=threads)
    return one_image_runner(file, "a TFLite side")
