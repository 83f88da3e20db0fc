"""Writing one object detection `tf.train.Example` in the TF1 Object Detection API's format (the
keys its `create_*_tf_record.py` tools write and `training.data` reads)."""

from __future__ import annotations

import hashlib

import numpy as np
import tensorflow as tf


def _bytes(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() if isinstance(v, str) else v
                                                                 for v in values]))


def _floats(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def _ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def make_example(encoded: bytes, height: int, width: int, boxes, classes=None, texts=None, *,
                 image_format: str = "jpeg", filename: str = "", source_id: str = "") -> tf.train.Example:
    """One image and its objects -> a `tf.train.Example`.

    Args:
      encoded: the JPEG or PNG file's bytes; height, width: its size in pixels.
      boxes: float [M, 4] as [ymin, xmin, ymax, xmax], normalised to the image.
      classes: int [M], 1-based (`image/object/class/label`); None leaves the key out.
      texts: [M] class names (`image/object/class/text`); None leaves the key out.
      image_format: `image/format` ("jpeg" or "png"); filename, source_id: written when not empty.
    """
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    feature = {
        "image/encoded": _bytes([encoded]),
        "image/format": _bytes([image_format]),
        "image/height": _ints([height]),
        "image/width": _ints([width]),
        "image/key/sha256": _bytes([hashlib.sha256(encoded).hexdigest()]),
        "image/object/bbox/ymin": _floats(boxes[:, 0]),
        "image/object/bbox/xmin": _floats(boxes[:, 1]),
        "image/object/bbox/ymax": _floats(boxes[:, 2]),
        "image/object/bbox/xmax": _floats(boxes[:, 3]),
    }
    if classes is not None:
        feature["image/object/class/label"] = _ints(classes)
    if texts is not None:
        feature["image/object/class/text"] = _bytes(texts)
    if filename:
        feature["image/filename"] = _bytes([filename])
    if source_id:
        feature["image/source_id"] = _bytes([source_id])
    return tf.train.Example(features=tf.train.Features(feature=feature))
