"""The ONNX Runtime runtime of `predict`: an `.onnx` file of `migrate export --onnx` on ONNX
Runtime's CPU provider, one image per call, in a process that never imports TensorFlow
(`ssd_mobilenet.onnx_file`; `pip install 'ssd-mobilenet-migrate[onnx]'`).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.litert.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`OnnxFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.

`runner(path, threads)` is the same file as a measured runner, `run(images [1, H, W, 3])`, for
`verify --onnx`.
"""

from __future__ import annotations

import threading

import numpy as np

from migrate.runtimes.base import ModelDirError, Result, from_outputs
from migrate.runtimes.litert import _unreadable
from ssd_mobilenet import onnx_file
from ssd_mobilenet.litert import images


class OnnxRuntime:
    """`predict`'s runtime for an `.onnx` file (`migrate.runtimes.Runtime`)."""

    name = "ONNX Runtime"
    batch_size = 1  # the file holds a batch of one image

    def __init__(self, path: str, threads: int | None = None, say=None, warn=None):
        try:
            self.file = onnx_file.OnnxFile(path, threads=threads)
        except onnx_file.OnnxFileError as e:
            raise ModelDirError(str(e)) from None
        self._lock = threading.Lock()
        (say or (lambda msg: None))(f"{path}: ONNX file, {self.file.kind}, ONNX Runtime with {self.file.threads} "
                                    f"thread{'s' if self.file.threads > 1 else ''}")
        if not self.file.exact_for_any_size and warn:
            h, w = self.file.image_size
            warn(f"warning: {path} takes uint8 images of {h}x{w} only: other sizes are resized outside it and "
                 "rounded to uint8, so their detections differ slightly from the TF1 graph's")

    def results(self, paths):
        """One `Result` per path, in order; an unreadable image is a `Result` with its error."""
        for path in paths:
            try:
                image = images.read_image(path)
            except images.ImageError as e:
                yield _unreadable(path, e)
                continue
            yield self._detect(path, image)

    def results_of_encoded(self, items) -> list:
        """(path, encoded bytes) pairs read elsewhere -> one `Result` each, in order, as `results`
        gives for those files. Threads may call it at once."""
        results = []
        for path, data in items:
            try:
                image = images.decode_named(data, path)
            except images.ImageError as e:
                results.append(_unreadable(path, e))
                continue
            results.append(self._detect(path, image))
        return results

    def _detect(self, path: str, image: np.ndarray) -> Result:
        with self._lock:  # one image at a time: the session's threads work on it
            outputs = self.file.detect(image)
        return from_outputs(path, image.shape[0], image.shape[1], outputs)

    @staticmethod
    def read_image(path) -> np.ndarray:
        """The image as this runtime decodes it, uint8 [H, W, 3]."""
        return images.read_image(path)


def runner(path: str, threads: int | None = None, spinning: bool = True):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` (numpy, [1, D, ...]) of the `.onnx`
    file at `path` on ONNX Runtime with `threads` threads (default: the CPU count): the photo fed
    as the file takes it, as `predict` runs it; `spinning`: `onnx_file.session_options`'. Imports no
    TensorFlow.
    Raises:
      onnx_file.OnnxFileError: no such file, or not one of `migrate export --onnx`.
    """
    file = onnx_file.OnnxFile(path, threads=threads, spinning=spinning)

    def run(batch):
        batch = np.asarray(batch)
        if batch.ndim != 4 or batch.shape[0] != 1:
            raise ValueError(f"an ONNX side takes one image [1, H, W, 3], got {list(batch.shape)}")
        return file.detect(batch[0])
    return run
