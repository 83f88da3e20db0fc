"""The anchors a TF1 graph decodes against, evaluated, and the anchor-grid fields behind them.

`anchor_box_specs` (graph_traits) reads each layer's scales and aspect ratios off constants.
The rest of `ssd_anchor_generator` — the base anchor size and explicit strides and offsets —
reaches the anchors through arithmetic on the image and feature-map shapes, so instead of
pattern-matching it, the anchor subgraph is run (it holds no weights and, in every OD API
release seen, only shape and arithmetic ops) and the fields are fitted to what it gives, then
checked by generating the anchors again.

Where the anchors are: the first input of `Postprocessor/ExpandDims` (anchors [A, 4] expanded to
[1, A, 4] before tiling over the batch; `MultipleGridAnchorGenerator/Identity` in graphs until mid
2018, `Concatenate/concat` after), or the `anchors` constant of a TFLite export
([ycenter, xcenter, height, width], as `export_tflite_ssd_graph` writes it).
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import tensor_util

from migrate.tf1.op_allowlist import disallowed_ops
from ssd_mobilenet.anchor_generators import generate_anchors
from ssd_mobilenet.anchor_generators.ssd import box_specs

ANCHORS_CONSUMER = "Postprocessor/ExpandDims"
TFLITE_ANCHORS = "anchors"
IMAGE_INPUT = "image_tensor"
# Anchors are computed in float32 from the same constants by the same ops; a fitted grid must
# give them to this (the parity tests' stage tolerance is 1e-5).
ANCHOR_ATOL = 1e-6


def graph_anchors(graph_def, image_size):
    """(anchors, form, why): the graph's anchors as float32 [A, 4], or (None, None, why not).

    `form` is "corners" ([ymin, xmin, ymax, xmax], normalised, unclipped) or "centers"
    ([ycenter, xcenter, height, width]: a TFLite export's constant). `image_size` (H, W) is the
    size of the uint8 image fed to `image_tensor` when the anchors depend on it (the resizer
    brings any size to the model's).
    """
    nodes = {n.name: n for n in graph_def.node}
    if ANCHORS_CONSUMER in nodes and nodes[ANCHORS_CONSUMER].input:
        tensor, form = nodes[ANCHORS_CONSUMER].input[0], "corners"
    elif TFLITE_ANCHORS in nodes:
        tensor, form = TFLITE_ANCHORS, "centers"
    else:
        return None, None, f"no {ANCHORS_CONSUMER} node"
    target = tensor.split(":")[0]
    tensor = tensor if ":" in tensor else tensor + ":0"
    if target not in nodes:
        return None, None, f"{target} is not in the graph"
    if nodes[target].op == "Const":
        value = tensor_util.MakeNdarray(nodes[target].attr["value"].tensor)
        return _checked(value, target, form)
    sub = tf.compat.v1.graph_util.extract_sub_graph(graph_def, [target])
    refused = disallowed_ops(sub)
    if refused:
        return None, None, f"its anchor subgraph holds ops outside the SSD inference set ({', '.join(refused)})"
    inputs = [n.name for n in sub.node if n.op.startswith("Placeholder")]
    if set(inputs) - {IMAGE_INPUT}:
        return None, None, f"its anchors depend on inputs other than {IMAGE_INPUT} ({', '.join(inputs)})"
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(sub, name="")
    options = tf.compat.v1.ConfigProto()
    options.graph_options.rewrite_options.disable_meta_optimizer = True  # the ops as written
    feed = {f"{IMAGE_INPUT}:0": np.zeros([1, image_size[0], image_size[1], 3], np.uint8)} if inputs else {}
    try:
        with tf.compat.v1.Session(graph=graph, config=options) as session:
            value = session.run(tensor, feed)
    except (tf.errors.OpError, ValueError, TypeError) as e:
        return None, None, f"its anchor subgraph did not run ({str(e).splitlines()[0][:120]})"
    return _checked(value, target, form)


def _checked(value, name, form):
    if value.ndim != 2 or value.shape[1] != 4:
        return None, None, f"{name} is {list(value.shape)}, not [anchors, 4]"
    return value.astype(np.float32), form, None


def to_centers(corners):
    """[ymin, xmin, ymax, xmax] -> [ycenter, xcenter, height, width] in float32, as the OD API's
    `get_center_coordinates_and_sizes` computes it."""
    ymin, xmin, ymax, xmax = (corners[:, i] for i in range(4))
    height, width = ymax - ymin, xmax - xmin
    return np.stack([ymin + height / np.float32(2.0), xmin + width / np.float32(2.0), height, width], axis=1)


def max_difference(config, feature_map_shapes, anchors, form) -> float:
    """Largest |difference| between `config`'s anchors and `anchors` (inf when counts differ)."""
    mine = generate_anchors(config, feature_map_shapes)
    if form == "centers":
        mine = to_centers(mine)
    if mine.shape != anchors.shape:
        return math.inf
    return float(np.max(np.abs(mine.astype(np.float64) - anchors))) if mine.size else 0.0


def fit_anchor_grid(config, feature_map_shapes, anchors, form) -> dict | None:
    """The `base_anchor_height/width`, `anchor_strides` and `anchor_offsets` that give `anchors`
    with `config`'s scales and aspect ratios, or None when no such fields do.

    Read per layer from the first cell (heights and widths over their scale / sqrt(ratio)) and
    the first two rows and columns (center spacing and first center); strides and offsets are
    integers in pixels in the OD API proto, and stay unset where the defaults (1 / grid size,
    half a stride) give the graph's.
    """
    centers = anchors.astype(np.float64) if form == "centers" else to_centers(anchors).astype(np.float64)
    im_h, im_w = config.image_height, config.image_width
    min_im = min(im_h, im_w)
    specs = box_specs(config)
    counts = [gh * gw * len(s) for (gh, gw), s in zip(feature_map_shapes, specs)]
    if sum(counts) != len(centers):
        return None
    base_h, base_w, grid = [], [], []
    start = 0
    for (gh, gw), layer_specs, count in zip(feature_map_shapes, specs, counts):
        a = centers[start:start + count].reshape(gh, gw, len(layer_specs), 4)
        start += count
        scales = np.float32([s for s, _ in layer_specs])
        sqrt_ratios = np.sqrt(np.float32([r for _, r in layer_specs]))
        base_h.extend(a[0, 0, :, 2] / (scales / sqrt_ratios))
        base_w.extend(a[0, 0, :, 3] / (scales * sqrt_ratios))
        stride_y = a[1, 0, 0, 0] - a[0, 0, 0, 0] if gh > 1 else None
        stride_x = a[0, 1, 0, 1] - a[0, 0, 0, 1] if gw > 1 else None
        grid.append(((gh, gw), (stride_y, stride_x), (a[0, 0, 0, 0], a[0, 0, 0, 1])))

    def default_stride(size, stride):
        return stride is None or abs(stride - 1.0 / size) <= ANCHOR_ATOL

    def pixels(value, image):
        return int(round(value * image))

    fields = {"base_anchor_height": float(f"{np.median(base_h) * im_h / min_im:.6g}"),
              "base_anchor_width": float(f"{np.median(base_w) * im_w / min_im:.6g}"),
              "anchor_strides": (), "anchor_offsets": ()}
    if not all(default_stride(gh, sy) and default_stride(gw, sx) for (gh, gw), (sy, sx), _ in grid):
        # A one-cell axis shows no spacing: its stride is taken as twice its first center (the
        # default offset is half a stride), and an explicit offset covers any other.
        fields["anchor_strides"] = tuple(
            (pixels(sy if sy is not None else 2 * oy, im_h), pixels(sx if sx is not None else 2 * ox, im_w))
            for _, (sy, sx), (oy, ox) in grid)
        strides = [(sh / im_h, sw / im_w) for sh, sw in fields["anchor_strides"]]
    else:
        strides = [(1.0 / gh, 1.0 / gw) for (gh, gw), _, _ in grid]
    if not all(abs(oy - 0.5 * sy) <= ANCHOR_ATOL and abs(ox - 0.5 * sx) <= ANCHOR_ATOL
               for (_, _, (oy, ox)), (sy, sx) in zip(grid, strides)):
        fields["anchor_offsets"] = tuple((pixels(oy, im_h), pixels(ox, im_w)) for _, _, (oy, ox) in grid)
    try:
        candidate = config.replace(**fields)
    except ValueError:
        return None
    return fields if max_difference(candidate, feature_map_shapes, anchors, form) <= ANCHOR_ATOL else None
