"""What `predict`'s runtimes for a model file share (`litert.LiteRTRuntime`, `onnx.OnnxRuntime`):
one image per call through the file's `detect(image uint8 [H, W, 3]) -> the four outputs
([1, D, ...] numpy)`, images decoded as TensorFlow decodes them (`ssd_mobilenet.formats.images`),
and the measured runner of `verify` and `bench` (`one_image_runner`). Imports no TensorFlow.
"""

from __future__ import annotations

import threading

import numpy as np

from migrate.predict.runtimes.base import Result, from_outputs, unreadable
from ssd_mobilenet.formats import images
from ssd_mobilenet.errors import InputError


class FileRuntime:
    """`predict`'s runtime (`migrate.predict.runtimes.Runtime`) around `self.file`, a file runner
    (`ssd_mobilenet.formats.file_runner.FileRunner`) that a subclass opens before calling `__init__`."""

    batch_size = 1  # the file holds a batch of one image

    def __init__(self, path: str, runs_on: str, say=None, warn=None):
        """Says what runs `path` (`runs_on`, e.g. "LiteRT"), with how many threads, and what the file
        is; warns where photos of other sizes cannot get the graph's preprocessing exactly."""
        self._lock = threading.Lock()
        say, threads = say or (lambda msg: None), self.file.threads
        say(f"{path}: {runs_on}, {threads} thread{'s' if threads > 1 else ''}")
        say(self.file.kind)
        if not self.file.exact_for_any_size and warn:
            h, w = self.file.image_size
            # Other sizes are resized outside the file and rounded to uint8, so their detections differ
            # slightly from the TF1 graph's; exported again (any size), the file resizes photos itself.
            warn(f"warning: {path}: {h}x{w} only; other sizes, resized outside it, differ slightly")

    def results(self, paths):
        """One `Result` per path, in order; an unreadable image is a `Result` with its error."""
        for path in paths:
            try:
                image = images.read_image(path)
            except InputError as e:
                yield unreadable(path, e)
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
            except InputError as e:
                results.append(unreadable(path, e))
                continue
            results.append(self._detect(path, image))
        return results

    def _detect(self, path: str, image: np.ndarray) -> Result:
        with self._lock:  # one image at a time: the runtime's own threads work on it
            outputs = self.file.detect(image)
        return from_outputs(path, image.shape[0], image.shape[1], outputs)

    @staticmethod
    def read_image(path) -> np.ndarray:
        """The image as this runtime decodes it, uint8 [H, W, 3]."""
        return images.read_image(path)


def one_image_runner(file, side: str):
    """`run(images uint8 [1, H, W, 3]) -> file.detect(images[0])` (the four outputs, [1, D, ...]);
    ValueError naming `side` ("a TFLite side") for any other batch."""
    def run(batch):
        batch = np.asarray(batch)
        if batch.ndim != 4 or batch.shape[0] != 1:
            raise ValueError(f"{side} takes one image [1, H, W, 3], got {list(batch.shape)}")
        return file.detect(batch[0])
    return run
