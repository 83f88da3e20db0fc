"""The TF1 graph's post-processing (`ssd_mobilenet.postprocessing`) as an ONNX graph: one
`NonMaxSuppression` for all classes, no Loop, If, Scan or Sequence op.

`graph(config, num_anchors, max_detections)` takes the decoded boxes and the converted scores
of one image and gives the OD API's four outputs:

- inputs `boxes` float32 [1, A, 4] ([ymin, xmin, ymax, xmax], normalised, unclipped: the box
  coder's output) and `scores` float32 [1, A, slots] (`postprocessing.convert_scores`, the
  background column first when the model has one);
- outputs `detection_boxes` [1, D, 4] (clipped to [0, 0, 1, 1]), `detection_scores` [1, D],
  `detection_classes` [1, D] (1-based, float32; padded rows read 1.0 as TF1's do),
  `num_detections` [1]; D = `max_detections`.

What it does, in the order of `postprocessing._postprocess_image`:

1. clip the boxes to the unit window and take their clipped areas;
2. the class columns of the scores as [1, classes, A], with `clip_before_nms` every score of
   a box the clip leaves empty (area <= 0) at -inf. The scores not strictly above the threshold
   are NMS's to drop: TF1's NMS keeps `score > threshold`, and so do the NMS of ONNX Runtime,
   OpenVINO (2026.4) and OpenCV (5.0), so all select the same boxes (measured:
   tests/ssd_mobilenet/formats/onnx/test_onnx_writer.py, a score at the threshold and a float32
   step on each side of it);
3. one `NonMaxSuppression` over all classes: on the clipped boxes (`clip_before_nms`) or the
   unclipped ones (`clip_after_sort`), each class capped at `max_detections_per_class`, with
   the config's IoU and score thresholds. ONNX leaves the order of its selected triples to the
   runtime, so nothing below depends on it. Which of two overlapping boxes with one score it
   keeps is the runtime's too: ONNX Runtime, OpenVINO and OpenCV keep the
   lower index, as TF1's NMS does (measured: tests/ssd_mobilenet/formats/test_ties.py); TensorRT does
   not document its rule;
4. each selected (class, anchor) writes its score into a dense [classes, A], -inf elsewhere
   (GatherND and ScatterND on the pairs, the code's step 4 says why; `clip_after_sort`: -inf
   also for a box empty once clipped, which TF1 drops after the sort), read as a row. The best D
   of that row, equal scores lower index first (`_top_k_lower_index_first`, which leaves no tie
   to the runtime's TopK): ties come out lower class first, then lower anchor index first, which
   is TF1's order (its sort of the class-major list of NMS results, whose NMS breaks score ties
   by the lower box index);
5. rows past the number of detections are zeros (classes 1.0), as TF1 pads them.

Built with `onnx.helper`; the opset is `OPSET`.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ssd_mobilenet.config.ssd_config import NMS_CLIP_BEFORE

# ONNX opset of the file: 13 has every op used here (NonMaxSuppression since 10 / 11, TopK's
# lower-index-first tie order since 11, Split and ReduceSum with their axes as inputs), and
# is one TensorRT's, ONNX Runtime's and OpenVINO's parsers all read.
OPSET = 13

INPUT_BOXES, INPUT_SCORES = "boxes", "scores"


class _Builder:
    """Nodes and constants of one graph, each output named after its node."""

    def __init__(self, prefix: str):
        self.nodes, self.initializers, self.prefix, self.count = [], [], prefix, 0

    def const(self, value, dtype, name: str) -> str:
        full = f"{self.prefix}{name}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype), full))
        return full

    def op(self, op_type: str, inputs, name: str, outputs: int = 1, **attrs):
        self.count += 1
        names = [f"{self.prefix}{name}" if outputs == 1 else f"{self.prefix}{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=f"{self.prefix}{name}_node", **attrs))
        return names[0] if outputs == 1 else names


def _top_k_lower_index_first(g: _Builder, row: str, n: int, k: int) -> str:
    """Indices int64 [k] of the k largest values of `row` float32 [n], largest first, equal values
    lower index first, whatever order the runtime's TopK gives ties in.

    ONNX asks TopK for the lower index first among equal values, and ONNX Runtime does so; but
    OpenVINO imports it unstable, and TensorRT does not document its order. So no tie is left to
    the runtime: the first TopK gives the k largest values (a multiset every runtime agrees on)
    and v_k, the smallest of them; the g values above v_k are in whatever their order, and the
    k - g values equal to v_k are the lowest positions holding v_k (a TopK of n - position over
    those, 0 elsewhere: unique keys). A rank over the k chosen ((value, -position) pairs
    compared, [k, k]) then orders them, and a TopK of -rank (unique keys again) gives that order.
    """
    if n >= 2 ** 24:  # positions as float32 keys must be exact
        raise ValueError(f"{n} class-anchor pairs: more than float32 positions hold exactly")
    f32, i64 = np.float32, np.int64
    k_const = g.const([k], i64, "topk_k")
    top_values, top_index = g.op("TopK", [row, k_const], "topk_first", outputs=2, axis=0, largest=1, sorted=1)
    v_k = g.op("Gather", [top_values, g.const(k - 1, i64, "topk_last")], "topk_v_k", axis=0)
    g_count = g.op("ReduceSum", [g.op("Cast", [g.op("Greater", [top_values, v_k], "topk_above")], "topk_above_f",
                                       to=TensorProto.FLOAT)], "topk_g", keepdims=0)
    # n - position where the value is v_k, 0 elsewhere (a cast and a product: a select over the
    # n values is several times slower on ONNX Runtime); exact, as positions are below 2^24. The
    # n, n - 1, ..., 1 come from a Range: as a constant they were 4 bytes a class-anchor pair in
    # the file (18 MB of FPN 640's).
    reverse_positions = g.op("Range", [g.const(float(n), f32, "topk_n"), g.const(0.0, f32, "topk_zero_f"),
                                       g.const(-1.0, f32, "topk_minus_one")], "topk_reverse_positions")
    at_v_k = g.op("Cast", [g.op("Equal", [row, v_k], "topk_at_v_k")], "topk_at_v_k_f", to=TensorProto.FLOAT)
    tie_key = g.op("Mul", [at_v_k, reverse_positions], "topk_tie_key")
    _, tie_index = g.op("TopK", [tie_key, k_const], "topk_ties", outputs=2, axis=0, largest=1, sorted=1)
    rows = g.const(np.arange(k), i64, "topk_rows")
    rows_f = g.const(np.arange(k), f32, "topk_rows_f")
    tie_row = g.op("Max", [g.op("Sub", [rows, g.op("Cast", [g_count], "topk_g_int", to=TensorProto.INT64)],
                                "topk_tie_row_raw"), g.const(0, i64, "topk_zero")], "topk_tie_row")
    chosen = g.op("Where", [g.op("Less", [rows_f, g_count], "topk_from_first"), top_index,
                            g.op("Gather", [tie_index, tie_row], "topk_tie_pick", axis=0)], "topk_chosen")
    value = g.op("Gather", [row, chosen], "topk_chosen_values", axis=0)
    position = g.op("Cast", [chosen], "topk_chosen_pos", to=TensorProto.FLOAT)
    axis0, axis1 = g.const([0], i64, "topk_axis0"), g.const([1], i64, "topk_axis1")
    v_i, v_j = g.op("Unsqueeze", [value, axis1], "topk_v_i"), g.op("Unsqueeze", [value, axis0], "topk_v_j")
    p_i, p_j = g.op("Unsqueeze", [position, axis1], "topk_p_i"), g.op("Unsqueeze", [position, axis0], "topk_p_j")
    before = g.op("Or", [g.op("Greater", [v_j, v_i], "topk_higher"),
                         g.op("And", [g.op("Equal", [v_j, v_i], "topk_equal"), g.op("Less", [p_j, p_i], "topk_lower")],
                              "topk_tied_lower")], "topk_before")  # [k, k]: j goes before i
    rank = g.op("ReduceSum", [g.op("Cast", [before], "topk_before_f", to=TensorProto.FLOAT), axis1], "topk_rank",
                keepdims=0)
    _, permutation = g.op("TopK", [g.op("Neg", [rank], "topk_neg_rank"), k_const], "topk_order", outputs=2, axis=0,
                          largest=1, sorted=1)
    return g.op("Gather", [chosen, permutation], "topk_index", axis=0)


def graph(config, num_anchors: int, max_detections: int | None = None, prefix: str = "postprocess/") -> onnx.ModelProto:
    """The post-processing model of `config` for `num_anchors` anchors (module docstring).

    `max_detections`: D, the rows of the outputs (default: the config's `max_total_detections`).
    Node and constant names start with `prefix`, so that the graph merges with the network's.
    """
    a = int(num_anchors)
    c = int(config.num_classes)
    slots = int(config.num_class_slots)
    first = 1 if config.add_background_class else 0  # the background column is not a class
    d = int(max_detections or config.max_total_detections)
    m = min(int(config.max_detections_per_class), a)  # what TF1 asks its NMS for
    k = min(d, c * m)  # TF1's top-k size; the rest of the D rows is padding
    g = _Builder(prefix)
    f32, i64 = np.float32, np.int64
    neg_inf = g.const(-np.inf, f32, "neg_inf")
    zero = g.const(0.0, f32, "zero")

    # 1. Clip as TF does it: max(min(v, 1), 0), coordinate by coordinate, and the clipped area.
    boxes = g.op("Reshape", [INPUT_BOXES, g.const([a, 4], i64, "boxes_shape")], "boxes_2d")
    clipped = g.op("Max", [g.op("Min", [boxes, g.const(1.0, f32, "one")], "clip_min"), zero], "clipped")
    ymin, xmin, ymax, xmax = g.op("Split", [clipped], "corners", outputs=4, axis=1)
    area = g.op("Mul", [g.op("Sub", [ymax, ymin], "height"), g.op("Sub", [xmax, xmin], "width")], "area_2d")
    area = g.op("Reshape", [area, g.const([a], i64, "anchors_shape")], "area")
    nonempty = g.op("Greater", [area, zero], "nonempty")

    # 2. The class columns [1, C, A], everything NMS must not select at -inf.
    columns = g.op("Slice", [INPUT_SCORES, g.const([first], i64, "first_class"), g.const([slots], i64, "slots"),
                             g.const([2], i64, "class_axis")], "class_scores")
    columns = g.op("Transpose", [columns], "class_major", perm=[0, 2, 1])
    nms_scores = columns  # NMS drops those not above its score threshold itself
    if config.nms_variant == NMS_CLIP_BEFORE:
        # A box the clip leaves empty: its scores -inf (min with -inf), the others unchanged (with
        # +inf). A [A] select and a broadcast min: a select over [1, C, A] is several times slower.
        box_cap = g.op("Where", [nonempty, g.const(np.inf, f32, "pos_inf"), neg_inf], "box_cap")
        nms_scores = g.op("Min", [columns, box_cap], "nms_scores")  # [1, C, A] and [A] broadcast

    # 3. One NMS for all classes.
    nms_boxes = clipped if config.nms_variant == NMS_CLIP_BEFORE else boxes
    nms_boxes = g.op("Reshape", [nms_boxes, g.const([1, a, 4], i64, "nms_boxes_shape")], "nms_boxes")
    selected = g.op("NonMaxSuppression", [nms_boxes, nms_scores, g.const([m], i64, "max_per_class"),
                                          g.const([np.float32(config.iou_threshold)], f32, "iou_threshold"),
                                          g.const([np.float32(config.score_threshold)], f32, "nms_score_threshold")],
                    "selected", center_point_box=0)  # [K, 3] (batch, class, anchor)
    # 4. Dense [C, A] scores in (class, anchor) order: each kept (class, anchor) pair its score, -inf
    # elsewhere, by GatherND and ScatterND on the pairs as NMS gives them plus a spare (0, A) in a
    # column of -inf dropped after. No elementwise op takes the K kept ones, and K + 1 >= 1: OpenCV
    # 5.0 keeps an elementwise op's shape from the net's first run (its K rows: later runs lost the
    # kept ones past them), and its GatherND stops the process on zero rows.
    pairs = g.op("Slice", [selected, g.const([1], i64, "pair_start"), g.const([3], i64, "pair_end"),
                           g.const([1], i64, "pair_axis")], "selected_pairs")  # [K, 2] (class, anchor)
    pairs = g.op("Concat", [pairs, g.const([[0, a]], i64, "spare_pair")], "pairs", axis=0)  # [K + 1, 2]
    class_major = g.op("Reshape", [columns, g.const([c, a], i64, "class_major_shape")], "class_major_2d")
    class_major = g.op("Concat", [class_major, g.const(np.full([c, 1], -np.inf), f32, "spare_column")],
                       "class_major_spare", axis=1)  # [C, A + 1]
    values = g.op("GatherND", [class_major, pairs], "selected_scores")  # [K + 1]
    dense = g.op("Expand", [neg_inf, g.const([c, a + 1], i64, "dense_size")], "dense_empty")
    dense = g.op("ScatterND", [dense, pairs, values], "dense_spare")
    dense = g.op("Slice", [dense, g.const([0], i64, "dense_start"), g.const([a], i64, "dense_end"),
                           g.const([1], i64, "dense_axis")], "dense_2d")  # [C, A]
    if config.nms_variant != NMS_CLIP_BEFORE:
        # TF1 drops the boxes NMS kept but the clip leaves empty (after its sort: the same rows).
        dense = g.op("Where", [nonempty, dense, neg_inf], "dense_nonempty")  # [A] and [C, A] broadcast
    dense = g.op("Reshape", [dense, g.const([c * a], i64, "dense_shape")], "dense")
    # The global top k in TF1's order.
    order = _top_k_lower_index_first(g, dense, c * a, k)
    top_scores = g.op("Gather", [dense, order], "top_scores", axis=0)
    real = g.op("Greater", [top_scores, neg_inf], "real")  # the first `num` rows
    num = g.op("ReduceSum", [g.op("Cast", [real], "real_count", to=TensorProto.FLOAT)], "num", keepdims=1)

    # 5. The rows: anchor = index mod A, class = index div A; padding as TF1's.
    top_anchor = g.op("Mod", [order, g.const(a, i64, "a_mod")], "top_anchor")
    top_class = g.op("Cast", [g.op("Div", [order, g.const(a, i64, "a_div")], "top_class_int")], "top_class",
                     to=TensorProto.FLOAT)
    det_boxes = g.op("Gather", [clipped, top_anchor], "top_boxes", axis=0)  # [k, 4]
    real_column = g.op("Unsqueeze", [real, g.const([1], i64, "axis1b")], "real_column")
    det_boxes = g.op("Where", [real_column, det_boxes, zero], "boxes_kept")
    det_scores = g.op("Where", [real, top_scores, zero], "scores_kept")
    det_classes = g.op("Where", [real, top_class, zero], "classes_kept")
    if d > k:  # TF1 pads past its top-k size with zeros
        det_boxes = g.op("Concat", [det_boxes, g.const(np.zeros([d - k, 4]), f32, "pad_boxes")], "boxes_padded", axis=0)
        det_scores = g.op("Concat", [det_scores, g.const(np.zeros([d - k]), f32, "pad_rows")], "scores_padded", axis=0)
        det_classes = g.op("Concat", [det_classes, g.const(np.zeros([d - k]), f32, "pad_rows_c")], "classes_padded",
                           axis=0)
    det_classes = g.op("Add", [det_classes, g.const(1.0, f32, "label_offset")], "classes_1based")
    outputs = {
        "detection_boxes": ("Reshape", det_boxes, [1, d, 4]),
        "detection_scores": ("Reshape", det_scores, [1, d]),
        "detection_classes": ("Reshape", det_classes, [1, d]),
        "num_detections": ("Reshape", num, [1]),
    }
    for key, (op_type, value, shape) in outputs.items():
        g.nodes.append(helper.make_node(op_type, [value, g.const(shape, i64, f"{key}_shape")], [key],
                                        name=f"{prefix}{key}_node"))
    model = helper.make_model(
        helper.make_graph(
            g.nodes, "ssd_postprocessing",
            [helper.make_tensor_value_info(INPUT_BOXES, TensorProto.FLOAT, [1, a, 4]),
             helper.make_tensor_value_info(INPUT_SCORES, TensorProto.FLOAT, [1, a, slots])],
            [helper.make_tensor_value_info("detection_boxes", TensorProto.FLOAT, [1, d, 4]),
             helper.make_tensor_value_info("detection_scores", TensorProto.FLOAT, [1, d]),
             helper.make_tensor_value_info("detection_classes", TensorProto.FLOAT, [1, d]),
             helper.make_tensor_value_info("num_detections", TensorProto.FLOAT, [1])],
            initializer=g.initializers),
        opset_imports=[helper.make_opsetid("", OPSET)])
    return model
