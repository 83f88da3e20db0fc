"""Inference wrapper: a concrete `tf.function` over the whole pipeline, and `load`.

A converted model directory (written by `python -m migrate convert`) holds
`model_config.json` (the `SSDConfig`) and `checkpoint/` (a TF2 object-based checkpoint of
the Keras model); `load` needs only those two.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import tensorflow as tf

from ssd_mobilenet import postprocessing
from ssd_mobilenet.config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1

CONFIG_FILE = "model_config.json"
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_PREFIX = "ckpt"
INPUT_SIGNATURE = (tf.TensorSpec([None, None, None, 3], tf.uint8, name="input_tensor"),)


class Detector:
    """Runs `SSDMobileNetV1` end to end through one concrete `tf.function`.

    Args:
      model: an `SSDMobileNetV1` with its weights.
      jit_compile: compile preprocessing, the network, box decoding and score conversion
        with XLA. Post-processing (per-class NMS) stays outside the compiled cluster.
        On CPUs XLA has been measured slower for this network (see the README); it pays
        on GPUs.
    Call:
      images: uint8 [N, H, W, 3] or [H, W, 3] (numpy or tensor), any N, H, W.
    Returns:
      dict of float32 tensors (`postprocessing.OUTPUT_KEYS`); boxes are
      [ymin, xmin, ymax, xmax] normalised to the input image.
    """

    def __init__(self, model: SSDMobileNetV1, jit_compile: bool = False):
        self.model = model
        self.config = model.config
        self.jit_compile = jit_compile
        network = tf.function(self._network, jit_compile=True) if jit_compile else self._network

        def serve(input_tensor):
            boxes, logits = network(input_tensor)
            return postprocessing.postprocess(boxes, logits, self.config)

        self.function = tf.function(serve, input_signature=INPUT_SIGNATURE)
        self.concrete_function = self.function.get_concrete_function()

    def _network(self, images):
        return self.model.predict_raw(images)

    def __call__(self, images) -> dict:
        if not isinstance(images, tf.Tensor):
            images = np.asarray(images)
            if images.dtype != np.uint8:
                raise TypeError(f"images must be uint8, got {images.dtype}")
        if images.dtype != tf.uint8:
            raise TypeError(f"images must be uint8, got {images.dtype}")
        if len(images.shape) == 3:
            images = images[None]
        if len(images.shape) != 4 or images.shape[-1] != 3:
            raise ValueError(f"images must be [N, H, W, 3] or [H, W, 3], got shape {list(images.shape)}")
        return self.concrete_function(tf.convert_to_tensor(images, tf.uint8))


def save(model: SSDMobileNetV1, directory: str) -> None:
    """Writes `model_config.json` and `checkpoint/` of `model` into an existing `directory`."""
    with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as f:
        json.dump(model.config.to_dict(), f, indent=2, sort_keys=True)
    tf.train.Checkpoint(model=model).write(os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX))


def load_model(directory: str) -> SSDMobileNetV1:
    """The Keras model of a converted directory, with every weight restored (strict)."""
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path}: not found (not a converted model directory)")
    with open(config_path, encoding="utf-8") as f:
        config = SSDConfig.from_dict(json.load(f))
    model = SSDMobileNetV1(config)
    prefix = os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX)
    stored = [name for name, _ in tf.train.list_variables(prefix) if name.endswith("VARIABLE_VALUE")]
    # No silent partial restore: the checkpoint holds exactly the model's variables and
    # every one of them is matched (a variable the object graph does not reach would
    # otherwise keep its initial value without any error).
    if len(stored) != len(model.weights):
        raise ValueError(f"{prefix}: holds {len(stored)} variables, the model has {len(model.weights)}")
    tf.train.Checkpoint(model=model).read(prefix).assert_consumed()
    return model


def load(directory: str, jit_compile: bool = False) -> Detector:
    """A `Detector` for a directory written by `python -m migrate convert`."""
    if jit_compile and not tf.config.list_physical_devices("GPU"):
        warnings.warn("jit_compile=True on CPU: XLA was measured several times slower than the default "
                      "for this network on CPUs; it pays on GPUs", stacklevel=2)
    return Detector(load_model(directory), jit_compile=jit_compile)
