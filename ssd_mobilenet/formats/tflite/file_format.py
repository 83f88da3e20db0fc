"""What a `.tflite` file of `migrate export` holds, and reading it without TensorFlow.

The contract between the writer (`ssd_mobilenet.formats.tflite.writer`) and the readers (`runner`,
`verify --tflite`, `bench`): one signature, `serving_default`, with one input named for its
type (`preprocess.INPUT_NAMES`, as the `.onnx` file's) and the SavedModel's four outputs, and a
metadata entry `METADATA_NAME` (UTF-8 JSON) that says what the signature alone cannot: the
model's input size and resize kernel when the file takes images of any size, the
post-processing mode, the class count.

Reading uses the TFLite schema's generated FlatBuffer classes that `ai-edge-litert` ships
(`ai_edge_litert.schema_py_generated`, the schema TensorFlow's converter writes), except for what
`predict`'s runtime reads of every file (`custom_operator_names`, `read_metadata`): importing
that module costs a LiteRT process several MiB, so those two read the few fields they need with
flatbuffers' generic tables, at the schema's field slots (`_MODEL`, `_OPERATOR_CODE`, ...).
"""

from __future__ import annotations

import json

import numpy as np

SIGNATURE_KEY = "serving_default"
# The post-processing modes (`--nms`): the graph's per-class NMS in builtin ops, or the custom op's
# regular or fast NMS (`writer`'s docstring).
NMS_PER_CLASS = "per-class"
NMS_REGULAR = "regular"
NMS_FAST = "fast"
NMS_MODES = (NMS_PER_CLASS, NMS_REGULAR, NMS_FAST)
CUSTOM_OP = "TFLite_Detection_PostProcess"
# A FlatBuffer's file identifier sits at bytes 4..8; TFLite's is "TFL3".
IDENTIFIER = b"TFL3"
METADATA_NAME = "ssd_mobilenet_migrate"
# The metadata's version: readers refuse a larger one (a file of a newer project release).
METADATA_VERSION = 1


# The schema's field slots (vtable offsets: 4 + 2 x the field's index in schema.fbs) that the
# generic reader uses, and BuiltinOperator.CUSTOM.
_MODEL = {"operator_codes": 6, "buffers": 12, "metadata": 16}
_OPERATOR_CODE = {"custom_code": 6, "builtin_code": 10, "deprecated_builtin_code": 4}
_METADATA = {"name": 4, "buffer": 6}
_BUFFER = {"data": 4, "offset": 6, "size": 8}
_BUILTIN_CUSTOM = 32


def _root(tflite_bytes: bytes):
    from flatbuffers import encode, table
    from flatbuffers import number_types as N
    return table.Table(tflite_bytes, encode.Get(N.UOffsetTFlags.packer_type, tflite_bytes, 0))


def _tables(tab, slot: int) -> list:
    """The tables of a vector-of-tables field (empty when the field is absent)."""
    from flatbuffers import table
    o = tab.Offset(slot)
    if not o:
        return []
    start = tab.Vector(o)
    return [table.Table(tab.Bytes, tab.Indirect(start + 4 * i)) for i in range(tab.VectorLen(o))]


def _string(tab, slot: int):
    o = tab.Offset(slot)
    return tab.String(o + tab.Pos).decode() if o else None


def _scalar(tab, slot: int, flags, default=0):
    o = tab.Offset(slot)
    return tab.Get(flags, o + tab.Pos) if o else default


def custom_operator_names(tflite_bytes: bytes) -> list:
    """The sorted names of a `.tflite` file's custom operators (`TFLite_Detection_PostProcess`,
    `Flex<TF op>`), without LiteRT's generated schema module (module docstring)."""
    from flatbuffers import number_types as N
    names = set()
    for code in _tables(_root(tflite_bytes), _MODEL["operator_codes"]):
        op = max(_scalar(code, _OPERATOR_CODE["builtin_code"], N.Int32Flags),
                 _scalar(code, _OPERATOR_CODE["deprecated_builtin_code"], N.Int8Flags))
        if op == _BUILTIN_CUSTOM:
            names.add(_string(code, _OPERATOR_CODE["custom_code"]))
    return sorted(names)


def _schema():
    from ai_edge_litert import schema_py_generated
    return schema_py_generated


def operator_names(tflite_bytes: bytes) -> list:
    """The sorted names of the operators a `.tflite` file uses: builtin names
    (`CONV_2D`, `NON_MAX_SUPPRESSION_V4`) and custom ones (`TFLite_Detection_PostProcess`;
    Flex ops are custom ops named `Flex<TF op>`)."""
    schema = _schema()
    model = schema.Model.GetRootAsModel(tflite_bytes, 0)
    builtin = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    names = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        op = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())  # the schema's two fields
        names.add(code.CustomCode().decode() if op == schema.BuiltinOperator.CUSTOM else builtin[op])
    return sorted(names)


def custom_op_options(tflite_bytes: bytes) -> list:
    """[(attributes dict, anchors float32 [A, 4] or None)] of every `TFLite_Detection_PostProcess`
    op in a `.tflite` file: its custom options (a FlexBuffer map) and its third input when that
    is a constant (the center-size anchors)."""
    from flatbuffers import flexbuffers
    schema = _schema()
    model = schema.Model.GetRootAsModel(tflite_bytes, 0)
    found = []
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            if code.CustomCode() is None or code.CustomCode().decode() != CUSTOM_OP:
                continue
            attributes = flexbuffers.Loads(op.CustomOptionsAsNumpy().tobytes())
            tensor = graph.Tensors(op.Inputs(2))
            buffer = model.Buffers(tensor.Buffer())
            anchors = None
            if buffer.DataLength():
                anchors = _constant(tensor, buffer, schema)
            found.append((attributes, anchors))
    return found


def _constant(tensor, buffer, schema) -> np.ndarray:
    """A constant tensor's values as float32: float32 as stored; uint8 (TOCO's quantized
    anchors in the zoo's quantization-aware files) dequantized, (q - zero_point) * scale."""
    data = buffer.DataAsNumpy().tobytes()
    if tensor.Type() == schema.TensorType.UINT8:
        q = tensor.Quantization()
        values = (np.frombuffer(data, np.uint8).astype(np.float64) - q.ZeroPoint(0)) * q.Scale(0)
        return values.astype(np.float32).reshape(tensor.ShapeAsNumpy())
    return np.frombuffer(data, np.float32).reshape(tensor.ShapeAsNumpy())


def read_metadata(tflite_bytes: bytes) -> dict | None:
    """The file's `METADATA_NAME` entry as a dict, or None when it has none (a file of an
    earlier release, which took images at the model's size only). Reads no generated schema
    (module docstring)."""
    from flatbuffers import number_types as N
    model = _root(tflite_bytes)
    for entry in _tables(model, _MODEL["metadata"]):
        if _string(entry, _METADATA["name"]) != METADATA_NAME:
            continue
        buffer = _tables(model, _MODEL["buffers"])[_scalar(entry, _METADATA["buffer"], N.Uint32Flags)]
        o = buffer.Offset(_BUFFER["data"])
        if o:
            data = bytes(buffer.Bytes[buffer.Vector(o):buffer.Vector(o) + buffer.VectorLen(o)])
        else:  # a buffer stored after the FlatBuffer (files over 2 GB): offset and size into the file
            offset = _scalar(buffer, _BUFFER["offset"], N.Uint64Flags)
            data = bytes(tflite_bytes[offset:offset + _scalar(buffer, _BUFFER["size"], N.Uint64Flags)])
        return json.loads(data.decode("utf-8"))
    return None
