"""The TF1 graph's post-processing (`ssd_mobilenet.postprocessing`) as an ONNX graph: one
`NonMaxSuppression` for all classes (two with many anchors), no Loop, If, Scan or Sequence op.

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
3. NMS on the clipped boxes (`clip_before_nms`) or the unclipped ones (`clip_after_sort`), each
   class capped at m = `max_detections_per_class`, with the config's IoU and score thresholds:
   one `NonMaxSuppression` over all classes. With many anchors a class (FPN's:
   `postprocessing.first_take_pays`), a first one over each class's best kk = FIRST_TAKE x m
   boxes (each class a batch of its own), and the second over all boxes of the classes the first
   cannot settle only (`_prefix_pass` says when it can), the others' scores at -inf: a runtime's NMS
   sorts or heaps every candidate of every class (FPN 640: 90 x 51,150, all above its 1e-8
   threshold), which the first pass spares it; the detections are the same, by construction
   and measured (tests/ssd_mobilenet/formats/onnx/test_onnx_writer.py). ONNX leaves the order of
   the selected triples to the runtime, so nothing below depends on it. Which of two
   overlapping boxes with one score NMS keeps is the runtime's too: ONNX Runtime, OpenVINO and
   OpenCV keep the lower index, as TF1's NMS does (measured: tests/ssd_mobilenet/formats/test_ties.py;
   the first pass hands them each class's boxes in anchor order); TensorRT does not document
   its rule;
4. the selected (class, anchor) pairs of both passes, padded to the most each NMS can give, with
   their scores (-inf for padding, a class the first pass left to the second, and with
   `clip_after_sort` a box empty once clipped, which TF1 drops after the sort) and keys
   class x A + anchor. The best D of them, equal scores lower key first
   (`_top_k_lower_key_first`, which leaves no tie to the runtime's TopK): ties come out lower
   class first, then lower anchor index first, which is TF1's order (its sort of the
   class-major list of NMS results, whose NMS breaks score ties by the lower box index);
5. rows past the number of detections are zeros (classes 1.0), as TF1 pads them.

Built with `onnx.helper`; the opset is `OPSET`.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ssd_mobilenet.config.ssd_config import NMS_CLIP_BEFORE
from ssd_mobilenet.postprocessing import FIRST_TAKE, first_take_pays

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


def _cut(g: _Builder, selected: str, padding_row, rows: int, name: str) -> str:
    """int64 [rows, 3]: an NMS's selections [K, 3] (K <= rows), then copies of `padding_row`."""
    padding = g.const(np.tile(np.asarray([padding_row], np.int64), [rows, 1]), np.int64, f"{name}_padding")
    return g.op("Slice", [g.op("Concat", [selected, padding], f"{name}_padded", axis=0),
                          g.const([0], np.int64, f"{name}_cut_start"), g.const([rows], np.int64, f"{name}_cut_end"),
                          g.const([0], np.int64, f"{name}_cut_axis")], f"{name}_table")


def _prefix_pass(g: _Builder, scores: str, boxes: str, nms: list, c: int, kk: int, threshold: np.float32,
                 m: int):
    """The first NMS pass, over each class's best `kk` of `scores` float32 [C, A] (`boxes` [A, 4],
    `nms` NonMaxSuppression's last three inputs): ((class int64, anchor int64, real bool) [C * m]
    rows, settled bool [C]).

    A class is settled if its kk best hold every candidate (its kk-th score at or below the
    threshold), or if the pass kept m boxes scoring above its kk-th score: those boxes are a
    prefix of TF1's order (score descending, then anchor), so TF1's NMS over all the class's
    boxes stops at the same m. Ties at the kk-th score may cross the cut (ONNX asks TopK for the
    lower indices, as ONNX Runtime and OpenVINO take them, but a runtime need not), so a box kept
    there does not count. A row is real if NMS gave it and its class is settled: the second pass
    gives the other classes' rows again, with the rest of theirs.
    """
    f32, i64 = np.float32, np.int64
    values, index = g.op("TopK", [scores, g.const([kk], i64, "prefix_k")], "prefix", outputs=2, axis=1, largest=1,
                         sorted=1)  # [C, kk]
    # The chosen anchors in ascending order (a TopK of minus the index: unique keys), so that the
    # runtime's NMS, which keeps the lower index of equal scores, keeps the lower anchor, as TF1's.
    ascending, _ = g.op("TopK", [g.op("Neg", [g.op("Cast", [index], "prefix_index_f", to=TensorProto.FLOAT)],
                                      "prefix_neg_index"), g.const([kk], i64, "prefix_k_order")],
                        "prefix_ascending", outputs=2, axis=1, largest=1, sorted=1)
    anchor = g.op("Cast", [g.op("Neg", [ascending], "prefix_anchor_f")], "prefix_anchor", to=TensorProto.INT64)
    prefix_scores = g.op("GatherElements", [scores, anchor], "prefix_scores", axis=1)  # [C, kk]
    prefix_boxes = g.op("Gather", [boxes, anchor], "prefix_boxes", axis=0)  # [C, kk, 4]
    # Each class a batch of its own kk boxes: selections (class, 0, position).
    selected = g.op("NonMaxSuppression", [
        prefix_boxes, g.op("Unsqueeze", [prefix_scores, g.const([1], i64, "prefix_axis")], "prefix_scores_3d"),
        *nms], "selected_prefix", center_point_box=0)  # [K1, 3]
    # Padded and cut as the second pass's (graph(), step 4); a padding row (0, 1, kk) reads a spare
    # column and is told apart by its 1.
    table = _cut(g, selected, [0, 1, kk], c * m, "prefix")
    pairs = g.op("Gather", [table, g.const([0, 2], i64, "prefix_pair_columns")], "prefix_pairs", axis=1)
    cls = g.op("Gather", [table, g.const(0, i64, "prefix_class_column")], "prefix_class", axis=1)
    given = g.op("Equal", [g.op("Gather", [table, g.const(1, i64, "prefix_pad_column")], "prefix_pad_flag", axis=1),
                           g.const(0, i64, "prefix_pad_zero")], "prefix_given")
    anchor_spare = g.op("Concat", [anchor, g.const(np.zeros([c, 1], np.int64), i64, "prefix_spare_anchor")],
                        "prefix_anchor_spare", axis=1)  # [C, kk + 1]
    row_anchor = g.op("GatherND", [anchor_spare, pairs], "prefix_row_anchor")
    # Kept above the kk-th score, counted on a dense [C, kk + 1] (the spare column 0).
    kth = g.op("Gather", [values, g.const(kk - 1, i64, "prefix_last")], "prefix_kth", axis=1)  # [C]
    above = g.op("Cast", [g.op("Greater", [prefix_scores, g.op("Unsqueeze", [kth, g.const([1], i64, "prefix_axis_b")],
                                                                 "prefix_kth_column")], "prefix_above_kth")],
                 "prefix_above_kth_f", to=TensorProto.FLOAT)
    above = g.op("Concat", [above, g.const(np.zeros([c, 1]), f32, "prefix_spare_zero")], "prefix_above_spare", axis=1)
    empty = g.op("Expand", [g.const(0.0, f32, "prefix_zero"), g.const([c, kk + 1], i64, "prefix_dense_size")],
                 "prefix_dense_empty")
    counted = g.op("ScatterND", [empty, pairs, g.op("GatherND", [above, pairs], "prefix_above_each")], "prefix_counted")
    kept_above = g.op("ReduceSum", [counted, g.const([1], i64, "prefix_axis_c")], "prefix_kept_above", keepdims=0)
    settled = g.op("Or", [g.op("LessOrEqual", [kth, g.const(threshold, f32, "prefix_threshold")], "prefix_all_in"),
                          g.op("GreaterOrEqual", [kept_above, g.const(float(m), f32, "prefix_m")], "prefix_full")],
                   "settled")  # [C]
    real = g.op("And", [given, g.op("Gather", [settled, cls], "prefix_row_settled", axis=0)], "prefix_real")
    return (cls, row_anchor, real), settled


def _top_k_lower_key_first(g: _Builder, row: str, keys: str, bound: int, k: int) -> str:
    """Indices int64 [k] of the k largest values of `row` float32 [n], largest first, equal values
    lower key first (`keys` float32 [n], unique, integers in [0, bound)), whatever order the
    runtime's TopK gives ties in.

    ONNX asks TopK for the lower index first among equal values, and ONNX Runtime does so; but
    OpenVINO imports it unstable, and TensorRT does not document its order. So no tie is left to
    the runtime: the first TopK gives the k largest values (a multiset every runtime agrees on)
    and v_k, the smallest of them; the g values above v_k are in whatever their order, and the
    k - g values equal to v_k are those of the lowest keys holding v_k (a TopK of bound - key
    over those, 0 elsewhere: unique). A rank over the k chosen ((value, -key) pairs compared,
    [k, k]) then orders them, and a TopK of -rank (unique again) gives that order.
    """
    if bound >= 2 ** 24:  # keys as float32 must be exact
        raise ValueError(f"{bound} keys: more than float32 holds exactly")
    f32, i64 = np.float32, np.int64
    k_const = g.const([k], i64, "topk_k")
    top_values, top_index = g.op("TopK", [row, k_const], "topk_first", outputs=2, axis=0, largest=1, sorted=1)
    v_k = g.op("Gather", [top_values, g.const(k - 1, i64, "topk_last")], "topk_v_k", axis=0)
    g_count = g.op("ReduceSum", [g.op("Cast", [g.op("Greater", [top_values, v_k], "topk_above")], "topk_above_f",
                                       to=TensorProto.FLOAT)], "topk_g", keepdims=0)
    # bound - key where the value is v_k, 0 elsewhere (a cast and a product: a select is several
    # times slower on ONNX Runtime); exact, as keys are below 2^24.
    at_v_k = g.op("Cast", [g.op("Equal", [row, v_k], "topk_at_v_k")], "topk_at_v_k_f", to=TensorProto.FLOAT)
    tie_key = g.op("Mul", [at_v_k, g.op("Sub", [g.const(float(bound), f32, "topk_bound"), keys], "topk_reverse_keys")],
                   "topk_tie_key")
    _, tie_index = g.op("TopK", [tie_key, k_const], "topk_ties", outputs=2, axis=0, largest=1, sorted=1)
    rows = g.const(np.arange(k), i64, "topk_rows")
    rows_f = g.const(np.arange(k), f32, "topk_rows_f")
    tie_row = g.op("Max", [g.op("Sub", [rows, g.op("Cast", [g_count], "topk_g_int", to=TensorProto.INT64)],
                                "topk_tie_row_raw"), g.const(0, i64, "topk_zero")], "topk_tie_row")
    chosen = g.op("Where", [g.op("Less", [rows_f, g_count], "topk_from_first"), top_index,
                            g.op("Gather", [tie_index, tie_row], "topk_tie_pick", axis=0)], "topk_chosen")
    value = g.op("Gather", [row, chosen], "topk_chosen_values", axis=0)
    key = g.op("Gather", [keys, chosen], "topk_chosen_keys", axis=0)
    axis0, axis1 = g.const([0], i64, "topk_axis0"), g.const([1], i64, "topk_axis1")
    v_i, v_j = g.op("Unsqueeze", [value, axis1], "topk_v_i"), g.op("Unsqueeze", [value, axis0], "topk_v_j")
    p_i, p_j = g.op("Unsqueeze", [key, axis1], "topk_p_i"), g.op("Unsqueeze", [key, axis0], "topk_p_j")
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

    # 3. NMS (module docstring): with many anchors a class, first over each class's best kk,
    # then over all boxes of the classes that pass cannot settle; with few, over all at once.
    nms_boxes = clipped if config.nms_variant == NMS_CLIP_BEFORE else boxes  # [A, 4]
    threshold = np.float32(config.score_threshold)
    nms = [g.const([m], i64, "max_per_class"), g.const([np.float32(config.iou_threshold)], f32, "iou_threshold"),
           g.const([threshold], f32, "nms_score_threshold")]  # NonMaxSuppression's last three inputs
    scores_2d = g.op("Reshape", [nms_scores, g.const([c, a], i64, "scores_2d_shape")], "scores_2d")  # [C, A]
    kk = FIRST_TAKE * m
    rows, rest_scores = [], scores_2d
    if first_take_pays(a, m):
        first_rows, settled = _prefix_pass(g, scores_2d, nms_boxes, nms, c, kk, threshold, m)
        rows.append(first_rows)
        # The other classes over all their boxes: a settled class's scores at -inf ([C, 1] and a
        # broadcast min, cheaper than a select over [C, A]).
        cap = g.op("Where", [g.op("Unsqueeze", [settled, g.const([1], i64, "settled_axis")], "settled_column"),
                             neg_inf, g.const(np.inf, f32, "unsettled_inf")], "unsettled_cap")
        rest_scores = g.op("Min", [scores_2d, cap], "rest_scores")  # [C, A]
    rest = g.op("NonMaxSuppression", [
        g.op("Reshape", [nms_boxes, g.const([1, a, 4], i64, "nms_boxes_shape")], "nms_boxes"),
        g.op("Reshape", [rest_scores, g.const([1, c, a], i64, "rest_scores_shape")], "rest_scores_3d"), *nms],
        "selected", center_point_box=0)  # [K, 3] (0, class, anchor)
    # 4. Its selections padded to the most it can give and cut there (`_cut`), a padding row
    # (1, 0, 0) told apart by its batch 1; then (class, anchor, real) [capacity] of both passes.
    table = _cut(g, rest, [1, 0, 0], c * m, "rest")
    column = {name: g.op("Gather", [table, g.const(i, i64, f"rest_{name}_column")], f"rest_{name}", axis=1)
              for i, name in enumerate(("batch", "class", "anchor"))}
    rows.append((column["class"], column["anchor"],
                 g.op("Equal", [column["batch"], g.const(0, i64, "rest_batch_zero")], "rest_real")))
    capacity = c * m * len(rows)
    cls, anchor, real = (v[0] if len(v) == 1 else g.op("Concat", list(v), f"rows_{name}", axis=0)
                         for v, name in zip(zip(*rows), ("class", "anchor", "real")))  # [capacity]
    if config.nms_variant != NMS_CLIP_BEFORE:
        # TF1 drops the boxes NMS kept but the clip leaves empty (after its sort: the same rows).
        real = g.op("And", [real, g.op("Gather", [nonempty, anchor], "row_nonempty", axis=0)], "real_nonempty")
    flat = g.op("Add", [g.op("Mul", [cls, g.const(a, i64, "a_row")], "row_offset"), anchor], "row_flat")
    class_major = g.op("Reshape", [columns, g.const([c * a], i64, "class_major_shape")], "class_major_flat")
    values = g.op("Where", [real, g.op("Gather", [class_major, flat], "row_scores", axis=0), neg_inf], "row_values")
    # Keys: class * A + anchor for a real row (TF1's order of equal scores), past every such key
    # for the others (unique all the same).
    keys = g.op("Where", [real, g.op("Cast", [flat], "row_flat_f", to=TensorProto.FLOAT),
                          g.const(np.arange(capacity) + float(c * a), f32, "row_spare_keys")], "row_keys")
    # The global top k in TF1's order.
    order = _top_k_lower_key_first(g, values, keys, c * a + capacity, k)
    top_scores = g.op("Gather", [values, order], "top_scores", axis=0)
    real = g.op("Greater", [top_scores, neg_inf], "real")  # the first `num` rows
    num = g.op("ReduceSum", [g.op("Cast", [real], "real_count", to=TensorProto.FLOAT)], "num", keepdims=1)

    # 5. The rows: class and anchor of each; padding as TF1's.
    top_anchor = g.op("Gather", [anchor, order], "top_anchor", axis=0)
    top_class = g.op("Cast", [g.op("Gather", [cls, order], "top_class_int", axis=0)], "top_class", to=TensorProto.FLOAT)
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
