"""Readers for TF1 model sources; each returns {tf1_variable_name: ndarray}."""

from __future__ import annotations

import tensorflow as tf


def read_checkpoint(prefix: str) -> dict:
    """All tensors of a TF1 (name-based) checkpoint `prefix` (`model.ckpt`)."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
