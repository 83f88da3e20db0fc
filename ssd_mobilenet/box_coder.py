"""FasterRcnnBoxCoder decoding, in the TF1 graph's float32 operation order."""

from __future__ import annotations

import tensorflow as tf


def decode(box_encodings, anchors, scales=(10.0, 10.0, 5.0, 5.0)):
    """Decodes [ty, tx, th, tw] codes relative to anchors.

    Args:
      box_encodings: float32 [..., A, 4] codes [ty, tx, th, tw].
      anchors: float32 [A, 4] as [ymin, xmin, ymax, xmax].
      scales: (y, x, height, width) scale factors; codes are divided by them (the graph
        divides; multiplying by 0.1 would differ by an ulp). th, tw are not clamped.
    Returns:
      float32 [..., A, 4] boxes [ymin, xmin, ymax, xmax], normalised, not clipped.
    """
    anchors = tf.convert_to_tensor(anchors, tf.float32)
    ymin_a, xmin_a, ymax_a, xmax_a = tf.unstack(anchors, axis=-1)
    ha = ymax_a - ymin_a
    wa = xmax_a - xmin_a
    yc_a = ymin_a + ha / 2.0
    xc_a = xmin_a + wa / 2.0
    ty, tx, th, tw = tf.unstack(box_encodings, axis=-1)
    ty = ty / scales[0]
    tx = tx / scales[1]
    th = th / scales[2]
    tw = tw / scales[3]
    w = tf.exp(tw) * wa
    h = tf.exp(th) * ha
    yc = ty * ha + yc_a
    xc = tx * wa + xc_a
    return tf.stack([yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0], axis=-1)
