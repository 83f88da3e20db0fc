"""The IoU limit that makes an NMS which suppresses at the limit decide as TF1's.

TF1's NMS (TensorFlow's NonMaxSuppressionV2/V3 kernel; ONNX Runtime's and OpenCV's likewise)
suppresses a box whose IoU with a kept one is above the limit; OpenVINO's and LiteRT's suppress
one at the limit too. IoUs are float32, so given the next float32 above the limit, "at or above"
it is "above" the limit for every IoU. No TensorFlow here.
"""

from __future__ import annotations

import numpy as np


def inclusive_limit(limit) -> np.float32:
    """The limit for an NMS that suppresses at IoU >= its limit, to suppress exactly the boxes
    TF1's suppresses at IoU > `limit` (a float, or a float32 scalar or 0-d array)."""
    return np.nextafter(np.float32(limit), np.float32(np.inf))
