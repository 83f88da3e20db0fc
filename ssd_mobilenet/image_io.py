"""Image bytes to tensors, shared by the model's data pipeline and the command-line tools, and the
images a detector takes."""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

# What a detector's function takes: uint8 images of any batch and size.
INPUT_SIGNATURE = (tf.TensorSpec([None, None, None, 3], tf.uint8, name="input_tensor"),)


def decode(contents):
    """Encoded bytes (scalar string tensor) -> uint8 [H, W, 3] RGB tensor.

    Grayscale is replicated to three channels, alpha is dropped, 16-bit PNG is scaled to
    8 bits, an animation gives its first frame. Usable inside `tf.data` and `tf.function`.
    """
    return tf.io.decode_image(contents, channels=3, dtype=tf.uint8, expand_animations=False)


def error_message(error: Exception) -> str:
    """The first line of a TensorFlow error, without its `{{function_node ...}}` and `[Op:...]` wrapping."""
    text = (getattr(error, "message", None) or str(error)).strip()
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text.splitlines()[0] if text else "")
    return text.split(" [Op:")[0].strip() or type(error).__name__


def error_about(path: str, error: Exception, what: str) -> str:
    """`PATH: WHAT: MESSAGE` of `error_message(error)`, or the message alone when it already starts
    with `PATH: ` (the library's own errors name the path they are about: once on the line)."""
    message = error_message(error)
    return message if message.startswith(f"{path}: ") else f"{path}: {what}: {message}"


def image_batch(images) -> tf.Tensor:
    """A detector's input, checked: uint8 [N, H, W, 3] or [H, W, 3] (numpy or tensor) -> uint8
    tensor [N, H, W, 3] (a single image becomes a batch of one).

    Raises:
      TypeError: not uint8. ValueError: not [N, H, W, 3] or [H, W, 3].
    """
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
    return tf.convert_to_tensor(images, tf.uint8)
