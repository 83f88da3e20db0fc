"""The op types an SSD MobileNet v1 inference graph uses, as exported by TF 1.3 .. 1.15.

`verify` runs the user's TF1 graph in a session; a GraphDef can hold any op, including ones
that read or write files or call Python (`ReadFile`, `WriteFile`, `PyFunc`, `SaveV2`, ...).
Before a graph runs, every op of the subgraph that will run is checked against this set and
anything else is refused unless the user names it (`--allow-ops`).

Where the set comes from:
- `OBSERVED`: the op types of the inference subgraphs (the four detection outputs, variables
  frozen to constants) of the real exports in ../shared/zoo: the 2018_01_28 zoo graph (TF 1.5),
  the quantization-aware zoo graph (TF 1.9; its FakeQuant ops are plain arithmetic, so they are
  allowed), a TF 1.12 `use_depthwise` export and a TF 1.3 export; and the OD API exporter's FPN
  and PPN exports in ../shared/zoo/odapi_exports (PPN's pooling pyramid adds `MaxPool`).
- `VARIANTS`: ops the same builders emit under other TF 1.x releases or config options, read
  off the Object Detection API and TF sources.
"""

from __future__ import annotations

OBSERVED = frozenset({
    "Add", "All", "Assert", "BiasAdd", "Cast", "ConcatV2", "Const", "Conv2D", "DepthwiseConv2dNative",
    "Enter", "Equal", "Exit", "Exp", "ExpandDims", "FakeQuantWithMinMaxVars", "Fill", "FusedBatchNorm",
    "Gather", "GatherV2", "Greater", "GreaterEqual", "Identity", "Less", "LogicalAnd", "LoopCond", "Maximum",
    "MaxPool", "Merge", "Minimum", "Mul", "NextIteration", "NonMaxSuppression", "NonMaxSuppressionV2",
    "NonMaxSuppressionV3", "Pack", "Pad", "Placeholder", "Range", "Rank", "RealDiv", "Relu6", "Reshape",
    "ResizeBilinear", "Rsqrt", "Select", "Shape", "Sigmoid", "Size", "Slice", "Split", "Sqrt", "Squeeze",
    "StridedSlice", "Sub", "Sum", "Switch", "TensorArrayGatherV3", "TensorArrayReadV3",
    "TensorArrayScatterV3", "TensorArraySizeV3", "TensorArrayV3", "TensorArrayWriteV3", "Tile", "TopKV2",
    "Transpose", "Unpack", "Where", "ZerosLike",
})

VARIANTS = frozenset({
    # Padded / score-returning NMS (use_static_shapes, soft NMS in 1.13 .. 1.15).
    "NonMaxSuppressionV4", "NonMaxSuppressionV5",
    # Batch norm kernels of later releases; `AddV2` is `+` from TF 1.15 on, `SelectV2` its tf.where.
    "FusedBatchNormV2", "FusedBatchNormV3", "AddV2", "SelectV2",
    # Other resize methods, the softmax score converter, explicit padding, quantized exports.
    "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea", "Softmax", "PadV2", "MirrorPad",
    "FakeQuantWithMinMaxVarsPerChannel", "FakeQuantWithMinMaxArgs", "Relu",
    # Arithmetic, shape and comparison ops that other releases use for the same expressions.
    "Div", "FloorDiv", "FloorMod", "Floor", "Neg", "Abs", "Square", "Log", "Max", "Min", "Prod", "Mean",
    "ArgMax", "LessEqual", "NotEqual", "LogicalOr", "LogicalNot", "OnesLike", "ShapeN", "SplitV", "Concat",
    "TopK", "BroadcastTo", "ClipByValue", "Round", "CropAndResize",
    # Graph plumbing.
    "PlaceholderWithDefault", "IdentityN", "NoOp", "StopGradient", "CheckNumerics",
    "TensorArrayConcatV3", "TensorArraySplitV3",
})

SSD_INFERENCE_OPS = OBSERVED | VARIANTS


def graph_op_types(graph_def) -> set:
    """Every op type in `graph_def`, including those inside its function library."""
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


def disallowed_ops(graph_def, allow=()) -> list:
    """Sorted op types of `graph_def` outside `SSD_INFERENCE_OPS` and `allow`."""
    return sorted(graph_op_types(graph_def) - SSD_INFERENCE_OPS - set(allow))
