"""The LiteRT runtime of `predict`: a `.tflite` file of `migrate export` on LiteRT's interpreter,
one image per call, in a process that never imports TensorFlow (`ssd_mobilenet.litert`).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.litert.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`ModelFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.

`runner(path, threads)` is the same file as a measured runner, `run(images [1, H, W, 3])`, for
`verify --tflite`'s and bench's TFLite sides (bench's memory process runs it without TensorFlow).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from migrate.runtimes.base import ModelDirError, Result, from_outputs
from ssd_mobilenet.litert import images, model_file


class LiteRTRuntime:
    """`predict`'s runtime for a `.tflite` file (`migrate.runtimes.Runtime`)."""

    name = "LiteRT"
    batch_size = 1  # the file holds a batch of one image

    def __init__(self, path: str, threads: int | None = None, say=None, warn=None):
        from migrate.common import console
        problem = None
        with console.native_stderr_quieted():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
            try:
                self.file = model_file.ModelFile(path, threads=threads or os.cpu_count())
            except model_file.ModelFileError as e:
                problem = str(e)  # raised outside: the quieted lines are shown only for a crash
        if problem:
            raise ModelDirError(problem)
        self._lock = threading.Lock()
        (say or (lambda msg: None))(f"{path}: {self.file.kind}, LiteRT with {self.file.threads} "
                                    f"thread{'s' if self.file.threads > 1 else ''}")
        if not self.file.exact_for_any_size and warn:
            h, w = self.file.image_size
            warn(f"warning: {path} takes uint8 images of {h}x{w} only: other sizes are resized outside it and "
                 "rounded to uint8, so their detections differ slightly from the TF1 graph's (export it again for "
                 "a file that resizes photos itself)")

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
        """Encoded images, already read (by an engine's file systems) -> one `Result` each, in
        order, as `results` gives for those files. Threads may call it at once.

        Args:
          items: (path, encoded bytes) pairs.
        """
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
        with self._lock:  # the interpreter runs one image at a time
            outputs = self.file.detect(image)
        return from_outputs(path, image.shape[0], image.shape[1], outputs)

    @staticmethod
    def read_image(path) -> np.ndarray:
        """The image as this runtime decodes it, uint8 [H, W, 3]."""
        return images.read_image(path)


def _unreadable(path: str, error: images.ImageError) -> Result:
    """The `Result` of an image that cannot be read: the error's reason, without the path it names."""
    reason = str(error)
    return Result(path, error=reason[len(path) + 2:] if reason.startswith(path + ": ") else reason)


def runner(path: str, threads: int | None = None):
    """`run(images uint8 [1, H, W, 3]) -> the four outputs` (numpy, [1, D, ...]) of the `.tflite`
    file at `path` on LiteRT's interpreter with `threads` threads (default `os.cpu_count()`, as
    `ModelFile`): `ModelFile.detect`, the photo fed as the file takes it (as `predict` runs it).
    The runner of the TFLite side's measurement in `verify` and of bench's TFLite sides; imports
    no TensorFlow. A file takes one image per call: `run` raises ValueError for other batches.
    Raises:
      model_file.ModelFileError: no such file, or not one LiteRT can run as `migrate export` writes it.
    """
    from migrate.common import console
    with console.native_stderr_quieted():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
        file = model_file.ModelFile(path, threads=threads)

    def run(images):
        images = np.asarray(images)
        if images.ndim != 4 or images.shape[0] != 1:
            raise ValueError(f"a TFLite side takes one image [1, H, W, 3], got {list(images.shape)}")
        return file.detect(images[0])
    return run
