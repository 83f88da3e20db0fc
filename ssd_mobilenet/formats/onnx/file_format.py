"""What an `.onnx` file of `migrate export --onnx` holds, and reading its metadata without ONNX
Runtime or the onnx package.

The contract between the writer (`ssd_mobilenet.formats.onnx.writer`) and the readers (`runner`,
`predict`, `verify --onnx`): one input (`preprocess.INPUT_NAMES`, as the `.tflite` file's),
`input_tensor` uint8 [1, H, W, 3] of any size (the default) or `normalized_input_image_tensor`
float32 [1, h, w, 3] at the model's size, already scaled to [-1, 1] (`--onnx-input float32`, for
TensorRT, which refuses uint8); the OD API's four
outputs (`DETECTION_OUTPUTS`: `detection_boxes` [1, D, 4] [ymin, xmin, ymax, xmax] normalised,
clipped, `detection_scores` [1, D], `detection_classes` [1, D] 1-based float32, `num_detections`
[1]); and a metadata property `METADATA_NAME` (UTF-8 JSON: the model's input size, resize kernel
and order, NMS variant, class count), which ONNX Runtime reads without the `onnx` package.
"""

from __future__ import annotations

import json

METADATA_NAME = "ssd_mobilenet_migrate"
# Readers refuse a larger version (a file of a newer project release).
METADATA_VERSION = 1


# ModelProto's `metadata_props` (field 14, StringStringEntryProto: key 1, value 2), in protobuf's
# wire format: wire types 0 varint, 1 eight bytes, 2 length-delimited, 5 four bytes.
_METADATA_PROPS, _KEY, _VALUE = 14, 1, 2


def _varint(data: bytes, i: int) -> tuple:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i


def _fields(data: bytes):
    """(field number, value) of a protobuf message's fields; a length-delimited value as bytes."""
    i = 0
    while i < len(data):
        tag, i = _varint(data, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"wire type {wire}")
        yield field, value


def read_metadata(path: str) -> dict | None:
    """The file's `METADATA_NAME` entry as a dict, read from the ModelProto's wire format without
    ONNX Runtime or the onnx package (the graph is skipped by its length); None when the file
    has none or is not an ONNX file this way."""
    try:
        with open(path, "rb") as f:
            data = memoryview(f.read())  # slices of it are views: the graph's bytes are not copied
        for field, value in _fields(data):
            if field == _METADATA_PROPS:
                entry = dict(_fields(value))
                if bytes(entry.get(_KEY, b"")) == METADATA_NAME.encode():
                    meta = json.loads(bytes(entry.get(_VALUE, b"")).decode("utf-8"))
                    return meta if isinstance(meta, dict) else None
    except (OSError, ValueError, IndexError):  # unreadable, truncated, not protobuf, not JSON
        return None
    return None
