"""A converted directory's SavedModel behind `Detector`'s interface, without the Keras model.

`convert` writes the fast SavedModel from the same Keras model and with the same settings that
`ssd_mobilenet.load` would trace (batch norm folded, heads merged, the early layers in slices),
and records in it the config and checkpoint it came from (`ssd_mobilenet.converted_dir`). Run
from there, a process starts with the traced graph as written: no Keras model built, no weights
restored into it, no autograph, no second trace; it holds the weights about once
(docs/cold_start.md).
"""

from __future__ import annotations

import tensorflow as tf

from ssd_mobilenet import converted_dir, image_io


class SavedModelDetector:
    """`ssd_mobilenet.load`'s detector when the directory's SavedModel computes what was asked for
    (`ssd_mobilenet.loading`): the same calls and attributes as `Detector`.

    Args:
      directory: the converted directory.
      metadata: its SavedModel's metadata (`converted_dir.read_metadata`), already checked
        against the directory.
      config: its `SSDConfig` (read from the directory when None).
    Call:
      images: uint8 [N, H, W, 3] or [H, W, 3] (numpy or tensor), any N (0 gives empty outputs),
        H, W.
    Returns:
      dict of float32 tensors (`detections.ALL_OUTPUTS`); boxes are [ymin, xmin, ymax, xmax]
      normalised to the input image.
    """

    def __init__(self, directory: str, metadata: dict, config=None):
        self.directory = directory
        self.config = config if config is not None else converted_dir.read_config(directory)
        self.metadata = metadata
        self.saved_model = tf.saved_model.load(converted_dir.saved_model_path(directory))
        self.function = self.saved_model.__call__
        self.concrete_function = self.function.get_concrete_function(*image_io.INPUT_SIGNATURE)
        self.jit_compile = False
        self.precision = metadata["precision"]
        self.slice_size = metadata["slice_size"]
        self.concurrent_slices = metadata["concurrent_slices"]
        self.weights_frozen = metadata["weights"] == "constants"
        self._model = None
        self._keras_detector = None

    def __call__(self, images) -> dict:
        # The SavedModel's function gives empty outputs for an empty batch itself.
        return self.concrete_function(image_io.image_batch(images))

    def serve(self, input_tensor):
        """The computation, for tracing into another function (as `Detector.serve`)."""
        return self.function(input_tensor)

    @property
    def resized_function(self):
        """The SavedModel's `detect_resized`: float32 [N, h, w, 3] images at the input size
        (values 0..255, as `preprocessing.resize` gives them) -> the output dict. A SavedModel
        with its weights as constants holds no such function (it would hold them twice): then
        the Keras model's, traced with the SavedModel's settings on first use."""
        if self.metadata.get("detect_resized"):
            return self.saved_model.detect_resized
        if self._keras_detector is None:
            from ssd_mobilenet import detector
            self._keras_detector = detector.Detector(
                detector.load_model(self.directory), precision=self.precision, fold_batch_norm=True,
                slice_size=self.slice_size, concurrent_slices=self.concurrent_slices,
                freeze_weights=self.weights_frozen)
        return self._keras_detector.resized_function

    def empty_outputs(self) -> dict:
        """The outputs of a batch of 0 images, as `Detector.empty_outputs`."""
        return self(tf.zeros([0, 1, 1, 3], tf.uint8))

    @property
    def model(self):
        """The Keras model the SavedModel computes (batch norm folded, as `Detector.model` with
        `fold_batch_norm`), built from the checkpoint with its strict check on first use."""
        if self._model is None:
            from ssd_mobilenet import detector
            from ssd_mobilenet.model import fold_batch_norm
            self._model = fold_batch_norm(detector.load_model(self.directory), self.precision)
        return self._model
