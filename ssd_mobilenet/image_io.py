"""Image bytes to tensors, shared by the model's data pipeline and the command-line tools."""

from __future__ import annotations

import re

import tensorflow as tf


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
