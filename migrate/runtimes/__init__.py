"""The runtimes `predict` runs a model on, behind one small interface:

    runtime = open_runtime(model, ...)   # a converted directory -> TensorFlow; a .tflite file -> LiteRT
    runtime.batch_size                   # images per model call
    runtime.results(paths)               # one `base.Result` per path, in order; unreadable images as errors
    runtime.read_image(path)             # uint8 [H, W, 3], decoded as the runtime decodes it (for --png)
    runtime.results_of_encoded(items)    # (path, bytes) pairs read elsewhere -> one `base.Result` each
                                         # (an engine's workers, `migrate.engines`)

`tensorflow` imports TensorFlow; `litert` and `base` never do, so that `predict` on a `.tflite`
file runs where TensorFlow is not installed.
"""

from __future__ import annotations

import os


def open_runtime(model: str, **options):
    """The runtime for `model`: `LiteRTRuntime(model, threads=...)` for a file,
    `TensorFlowRuntime(model, ...)` for a directory; `options` are theirs."""
    if os.path.isfile(model):
        from migrate.runtimes.litert import LiteRTRuntime
        return LiteRTRuntime(model, **options)
    from migrate.runtimes.tensorflow import TensorFlowRuntime
    return TensorFlowRuntime(model, **options)
