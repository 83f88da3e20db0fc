"""The LiteRT runtime of `predict`: a `.tflite` file of `migrate export` on LiteRT's interpreter,
one image per call, in a process that never imports TensorFlow (`ssd_mobilenet.litert`).

Images are decoded as TensorFlow decodes them (`ssd_mobilenet.litert.images`) and go to the file
at their own size when it resizes them itself (the default export); a fixed-size file gets them
prepared as the graph prepares them (`ModelFile.feed`). Boxes are normalised to the image, as on
the TensorFlow runtime.
"""

from __future__ import annotations

import os

import numpy as np

from migrate.runtimes.base import ModelDirError, Result, from_outputs
from ssd_mobilenet.litert import images, model_file


class LiteRTRuntime:
    """`predict`'s runtime for a `.tflite` file (`migrate.runtimes.Runtime`)."""

    name = "LiteRT"
    batch_size = 1  # the file holds a batch of one image

    def __init__(self, path: str, threads: int | None = None, say=None, warn=None):
        from migrate.common import console
        try:
            with console.native_stderr_quieted():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
                self.file = model_file.ModelFile(path, threads=threads or os.cpu_count())
        except model_file.ModelFileError as e:
            raise ModelDirError(str(e)) from None
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
                reason = str(e)
                yield Result(path, error=reason.split(": ", 1)[1] if reason.startswith(path + ": ") else reason)
                continue
            yield from_outputs(path, image.shape[0], image.shape[1], self.file.detect(image))

    @staticmethod
    def read_image(path) -> np.ndarray:
        """The image as this runtime decodes it, uint8 [H, W, 3]."""
        return images.read_image(path)
