"""Post-processing of the TF1 SSD graph (scope `Postprocessor`): scores, per-class NMS, top-k.

Two orders exist in TF1 exports (`SSDConfig.nms_variant`):

- `clip_before_nms` (OD API until mid 2018, e.g. the 2018_01_28 zoo graph and TF 1.3 exports):
  per class keep scores strictly above the threshold, clip boxes to [0, 0, 1, 1], drop boxes
  whose clipped area is <= 0, then NMS on the clipped boxes.
- `clip_after_sort` (later exports): per class NMS on the *unclipped* boxes with the
  threshold inside NMS; then the global sort, and clipping/dropping empty boxes after it.

Both then concatenate classes in class order, sort by score with TopK's tie order (lower
position first: lower class, then NMS order), keep `max_total_detections` and pad with zeros.

The per-class NMS is TensorFlow's own kernel (NonMaxSuppressionV4, the V1..V3 kernels'
padded form): run on all anchors with the excluded ones masked below the threshold, it
selects what the TF1 graph selects on its filtered subset, because the kernel breaks score
ties by index and filtering keeps index order. Another runtime's NMS kernel may break them
otherwise (LiteRT's), so a TFLite file sorts each class's candidates first and gives its NMS
scores that cannot tie (`postprocess_image(..., sort_first=True)`), its best 100 first. With
many anchors a class (FPN's: `first_take_pays`), TensorFlow's NMS too runs over each class's best
few hundred candidates first (`_per_class_nms`). Either goes over all of a class's candidates
only where its first take could leave out one of the image's top detections (`_settled`): the
same detections in less time than over them all at once.
"""

from __future__ import annotations

import tensorflow as tf

from ssd_mobilenet.config.ssd_config import BACKGROUND_SLICE_LOGITS, NMS_CLIP_BEFORE, SSDConfig
from ssd_mobilenet.detections import ALL_OUTPUTS

# With many anchors (`first_take_pays`), TensorFlow's NMS and the `.onnx` file's first NMS pass
# (`formats/onnx/postprocessing.py`) first take each class's best FIRST_TAKE * max_detections_per_class
# candidates.
FIRST_TAKE = 4
# `_nms_in_order` (LiteRT's) sorts each class's best SORT_TAKE * max_detections_per_class
# candidates first.
SORT_TAKE = 1
# That first take is faster than TensorFlow's NMS over every candidate (and than one NMS in the
# `.onnx` file) where a class has at least FIRST_TAKE_PAYS times as many anchors (`first_take_pays`).
FIRST_TAKE_PAYS = 8


def first_take_pays(num_anchors: int, max_per_class: int) -> bool:
    """Whether NMS over each class's best FIRST_TAKE x m candidates first (m the per-class cap)
    beats one NMS over all `num_anchors`: with FPN's many anchors, not PPN's or the plain model's.

    Measured (2-core Xeon, Ice Lake; docs/measurements.md), 90 classes, every anchor a candidate
    (the zoo configs' 1e-8 threshold), m = 100: TensorFlow's post-processing of one image 113.5 ms
    -> 45.5 with it at 51,150 anchors (FPN 640), 33.1 -> 29.0 at 12,750, 22.8 -> 17.5 at 6,000,
    13.3 -> 14.7 at 3,000 (PPN 300); the `.onnx` file's likewise on ONNX Runtime and OpenVINO.
    """
    m = min(int(max_per_class), int(num_anchors))
    return int(num_anchors) >= FIRST_TAKE_PAYS * FIRST_TAKE * m


# TensorFlow's float32 sigmoid on x86 CPUs: Eigen's `scalar_logistic_op<float>` packet path (the
# Eigen that TensorFlow 2.21 ships, compiled without fused multiply-adds), its constants as Eigen
# writes them. S(x) = e / (1 + e), e = exp(x / 2)^2, exp by Cephes' range reduction and a degree-5
# polynomial.
SIGMOID_SCOPE = "tensorflow_sigmoid"  # the name scope of `tensorflow_sigmoid`'s ops
_SIGMOID_ONE_FROM = 16.6355324  # the first x whose result is exactly 1.0
_SIGMOID_ZERO_BELOW = -104.0  # Eigen returns 0 below it; from there up to -87 the results are subnormal
_LOG2E = 1.44269504088896341
_LN2_HIGH, _LN2_LOW = -0.693359375, 2.12194440e-4  # -ln 2 = _LN2_HIGH - _LN2_LOW, the high part exact in 9 bits
_LN2 = 0.693147182  # ln 2 rounded to float32: exp(m * _LN2) is within 1e-5 of 2^m for m in [-75, 12]
_SPLIT_ONE_BIT = 8388609.0  # 2^23 + 1: Veltkamp's split of a float32 keeps 24 - 23 = 1 significant bit
_EXP_POLYNOMIAL = (0.49999141693115234375, 0.16666877269744873046875, 4.1898667812347412109375e-2,
                   8.33471305668354034423828125e-3)  # p2, p3, p4, p5


def tensorflow_sigmoid(x):
    """TensorFlow's own float32 sigmoid of `x` (any shape), bit for bit wherever it is a normal
    float32 (>= 1.2e-38, x > -87), in elementwise ops that every runtime computes as IEEE float32
    does (min, max, multiply, add, floor, exp, divide).

    A file's runtime has its own sigmoid (LiteRT's, ONNX Runtime's, OpenVINO's, OpenCV's), each
    rounding some results a float32 step or more away from TensorFlow's, and reaching 1.0 at
    another x (15.8 to 17.3 against TensorFlow's 16.64). Near 1 the steps are 6e-8 apart: a trained
    detector's surest boxes, and neighbouring anchors on one object, tie there in the TF1 graph,
    where NMS keeps the lower anchor index of a tie; a score one step off turns the tie into an
    order and keeps another box. This is the TF1 graph's kernel (Eigen's logistic, module comment)
    step by step, each product rounded before its sum. Below x = -87 TensorFlow's results are
    subnormal, which some runtimes flush to 0, and below -104 exactly 0; here x is clamped at -104
    instead (one op, where a select is seven in ONNX): no score threshold reaches those scores.
    """
    with tf.name_scope(SIGMOID_SCOPE):  # its ops named so that a file can find them (`onnx.integer`)
        x = tf.maximum(tf.minimum(x, _SIGMOID_ONE_FROM), _SIGMOID_ZERO_BELOW)
        half = x * 0.5
        m = tf.floor(half * _LOG2E + 0.5)  # in [-75, 12] on the clamped range
        # Each sum whose result is summed again is written as a difference with a negated operand
        # (negation is exact): TensorFlow's graph optimizer rewrites a tree of adds into one AddN,
        # which sums in another order (10,216 of 100,000 scores off in a tf.function).
        r = half - m * -_LN2_HIGH  # m * _LN2_HIGH + half; the product exact (m has 7 bits, the constant 9)
        r = r - m * -_LN2_LOW  # m * _LN2_LOW + r
        r2 = r * r
        p2, p3, p4, p5 = _EXP_POLYNOMIAL
        minus_even = r2 * -p4 - p2  # -(r2 * p4 + p2)
        p = r * (r2 * p5 + p3) - minus_even
        minus_low = -1.0 - r  # -(r + 1)
        p = r2 * p - minus_low
        e = p * _power_of_two(m)  # exact, as Eigen's exponent bits
        e = e * e
        return e / (1.0 + e)


def file_sigmoid(int8: bool):
    """The sigmoid a file's score conversion takes (`convert_scores`'s `sigmoid`): for a float file
    `tensorflow_sigmoid`, TensorFlow's own step by step, which keeps the TF1 graph's ties; for an
    int8 file (post-training, or a quantization-aware model's) the runtime's one op (`tf.sigmoid`,
    traced as LiteRT's LOGISTIC and ONNX's Sigmoid): its logits come off the class predictor's int8
    grid, steps of ~0.1 where the two sigmoids differ by a float32 step, so it keeps no tie of
    TF1's either way, and the one op is ~2 ms faster a 300x300 photo (docs/measurements.md, "The
    int8 files' sigmoid"). A post-training int8 `.onnx` file quantizes the float file's graph, so
    it swaps the sigmoid there instead (`formats.onnx.integer.runtime_sigmoid`)."""
    return tf.sigmoid if int8 else tensorflow_sigmoid


def _power_of_two(m):
    """2^m exactly for whole floats m in [-75, 12], in ops every runtime runs fast: exp(m ln 2)
    rounded to one significant bit (`round_to_one_bit`), which is 2^m for any exp within -25% /
    +50% of it, so every runtime's exp, however it rounds, gives the same powers. A power op runs
    one element at a time in LiteRT's reference kernel and in ONNX Runtime, and a gather from a
    table of the 88 powers is not much faster; exp is a vectorised kernel in both (the three
    measured in docs/measurements.md)."""
    return round_to_one_bit(tf.exp(m * _LN2))


def round_to_one_bit(y):
    """Positive normal float32 `y` (any shape) rounded to the nearest power of two (a float32 with
    one significant bit), exactly: Veltkamp's split, g = y * (2^23 + 1), g - (g - y), in three
    IEEE float32 operations (a runtime that fused the first two into one would break it)."""
    g = y * _SPLIT_ONE_BIT
    return g - (g - y)


def _converter(logits, config: SSDConfig, sigmoid):
    # Dividing by 1.0 gives every float back unchanged: no pass over [N, A, slots] for it.
    x = logits if config.logit_scale == 1.0 else tf.divide(logits, config.logit_scale)
    if config.score_converter == "SIGMOID":
        return sigmoid(x)
    if config.score_converter == "SOFTMAX":
        return tf.nn.softmax(x, axis=-1)
    return x


def convert_scores(class_logits, config: SSDConfig, sigmoid=tf.sigmoid):
    """Logits [N, A, slots] -> scores [N, A, slots] (logit_scale, then the score converter).

    `sigmoid`: TensorFlow's op, or for a file another runtime runs `tensorflow_sigmoid`: the same
    values in ops the runtime does not replace by its own sigmoid.

    With `background_slice == "logits"` (2017 exports) the graph slices the background column
    off the logits first and converts the class columns alone (a softmax over the classes
    only); column 0 of the result is then 0, a score that graph never computes.
    """
    if config.add_background_class and config.background_slice == BACKGROUND_SLICE_LOGITS:
        classes = _converter(class_logits[..., 1:], config, sigmoid)
        return tf.concat([tf.zeros_like(classes[..., :1]), classes], axis=-1)
    return _converter(class_logits, config, sigmoid)


def clip_to_unit_window(boxes):
    """Clips [..., 4] [ymin, xmin, ymax, xmax] boxes to [0, 0, 1, 1]; returns (boxes, area)."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
    ymin = tf.maximum(tf.minimum(ymin, 1.0), 0.0)
    ymax = tf.maximum(tf.minimum(ymax, 1.0), 0.0)
    xmin = tf.maximum(tf.minimum(xmin, 1.0), 0.0)
    xmax = tf.maximum(tf.minimum(xmax, 1.0), 0.0)
    return tf.stack([ymin, xmin, ymax, xmax], axis=-1), (ymax - ymin) * (xmax - xmin)


def _sorted_nms(boxes, columns, above, take: int, iou_threshold, max_out: int) -> tuple:
    """NMS of each class over its best candidates above the threshold, at most `take` of them,
    in TF1's order (`_nms_in_order`).

    Each class's candidates are sorted (TopK: larger first, equal values lower index first in
    TensorFlow and in LiteRT's TOPK_V2 alike), and NMS gets their boxes in that order with the
    scores replaced by n, n - 1, ..., 1 (exact in float32, all different). `above` int32 [K]:
    each class's count above the threshold, the size of its sort (at least 1: TFLite's kernels
    take no empty tensor; a class without a candidate gives its one box the key 0, which NMS
    drops).
    Returns selected int32 [K, max_out] (anchor indices, padded), counts int32 [K] and left float32
    [K]: of a class with more candidates than `take`, the best score of those it left out (the
    sort takes one more), an upper bound on the scores of its selections past them.
    """
    classes, a = columns.shape
    # Per class, n sorted and keys m, m - 1, ..., m - n + 1 (m = n, or 0 for a class without a
    # candidate), worked out for all classes at once: each op per class costs LiteRT more than
    # its arithmetic.
    m = tf.minimum(above, take)
    n = tf.maximum(m, 1)
    sort = tf.maximum(tf.minimum(above, min(take + 1, a)), 1)
    first, last = tf.cast(m, tf.float32), tf.cast(m - n, tf.float32)
    selected, counts, left = [], [], []
    for column, n_k, sort_k, first_k, last_k in zip(*(tf.unstack(t, num=classes)
                                                      for t in (columns, n, sort, first, last))):
        values, order = tf.math.top_k(column, k=sort_k, sorted=True)
        s, c = tf.raw_ops.NonMaxSuppressionV4(
            boxes=tf.gather(boxes, order[:n_k]), scores=tf.range(first_k, last_k, -1.0), max_output_size=max_out,
            iou_threshold=iou_threshold, score_threshold=tf.constant(0.0), pad_to_max_output_size=True)
        selected.append(tf.gather(order, s))
        counts.append(c)
        left.append(values[-1])
    return tf.stack(selected), tf.stack(counts), tf.stack(left)


def _nms_in_order(boxes, columns, threshold, iou_threshold, max_out: int, detections) -> tuple:
    """The candidates of each class in TF1's NMS order before the NMS op sees them, so that no
    kernel's own tie rule decides; `detections(selected, valid)` gives the image's outputs, and
    the score and class of the k-th detection (`_top_detections`).

    TensorFlow's NMS takes equal scores lower index first; LiteRT's NON_MAX_SUPPRESSION_V4 keeps
    its candidates in a heap compared by score alone, so among equal scores (a sigmoid near 1,
    two anchors that see the same object) it may keep another box. With the candidates sorted
    and ranked (`_sorted_nms`), its selection is the one TF1's makes, in TF1's order, whatever its
    tie rule.

    Only the candidates NMS reaches need an order, and a sort costs more than the kernel's heap:
    each class sorts its best SORT_TAKE x max_out candidates first. Where that settles every
    class (`_settled`) the detections are TF1's; otherwise (an IF in the file) the classes it
    does not settle sort all their candidates, the others keep what they have.

    Args:
      boxes: float32 [A, 4] boxes NMS compares; columns: float32 [K, A] each class's scores
        (-inf where a candidate is not allowed; a score of +inf, which no score converter gives,
        would make that NaN, which TopK may rank first); threshold, iou_threshold: float32
        scalars; max_out: the most boxes NMS keeps of a class.
    Returns:
      `detections`' outputs, those of TF1's selection.
    """
    a = boxes.shape[0]
    take = min(a, SORT_TAKE * max_out)
    above = tf.reduce_sum(tf.cast(columns > threshold, tf.int32), axis=1)  # [K]
    selected, counts, left = _sorted_nms(boxes, columns, above, take, iou_threshold, max_out)
    if take == a:
        return detections(*_valid(selected, counts, max_out, a))[0]

    def the_rest(settled):
        # A settled class sorts nothing more: no candidate left, one element sorted and dropped.
        return _sorted_nms(boxes, columns, tf.where(settled, 0, above), a, iou_threshold, max_out)[:2]

    return _first_take_then_rest((selected, counts, left, above <= take), the_rest, detections, max_out, a)


def _first_take_then_rest(first, the_rest, detections, max_out: int, num_anchors: int):
    """The image's outputs (`detections`') from NMS over each class's best candidates first, and
    over all candidates of the classes that leaves unsettled (`_settled`), if any (a cond).

    `first`: (selected int32 [K, max_out], counts int32 [K], left float32 [K], whole bool [K]) of
    the first take (`_settled`'s); `the_rest(settled)`: (selected, counts) of NMS over all the
    candidates of the classes not `settled` (bool [K]), whatever it gives for the others.
    """
    selected, counts, left, whole = first
    outputs, kth_score, kth_class = detections(*_valid(selected, counts, max_out, num_anchors))
    settled = _settled(counts >= max_out, whole, left, kth_score, kth_class)

    def rest():
        more, more_counts = the_rest(settled)
        return detections(*_valid(tf.where(settled[:, None], selected, more), tf.where(settled, counts, more_counts),
                                  max_out, num_anchors))[0]

    return tf.cond(tf.reduce_all(settled), lambda: outputs, rest)


def _settled(full, whole, left, kth_score, kth_class):
    """Which classes NMS over their best candidates first settles (bool [K]): TF1's top k
    detections hold no other selection of theirs.

    A class's selections from its best candidates, in TF1's order, are the first of TF1's
    selections for it (NMS is greedy in that order). They are all of them where the class kept
    max_out boxes (`full` bool [K]: TF1's NMS stops there) or its take held all its candidates
    (`whole` bool [K]). Otherwise its missing selections score at most `left` float32 [K] (the
    best score its take left out) and come after its others in its NMS order: none of them
    enters the top k, in which equal scores go lower class first, if `left` is below
    `kth_score`, that of the k-th detection of the first take (-inf where those are fewer than
    k), or equal to it with the class no lower than `kth_class` (int32 scalar); int8 files'
    scores, a few hundred values, often tie there. Where other classes then add selections, the
    k-th detection can only move ahead in that order, so a class settled stays settled.
    """
    classes = tf.range(tf.shape(full)[0])
    return full | whole | (left < kth_score) | ((left == kth_score) & (classes >= kth_class))


def _penalty(keep):
    """float32 [A]: 0 where `keep` bool [A, 1] is true, -inf elsewhere. Added to a class's scores it
    pushes what is not kept to -inf (or NaN from +inf), which NMS's strict `score > threshold`
    rejects; adding 0 leaves every kept score as it compares (-0.0 becomes 0.0). Added per
    column, on [A] each, it costs less than one select over [A, slots] (docs/measurements.md)."""
    return tf.where(keep[:, 0], tf.constant(0.0), tf.constant(-float("inf")))


def _sorted_per_class_nms(boxes, scores, keep, config: SSDConfig, first: int, detections):
    """`_per_class_nms` with each class's candidates sorted first (`_nms_in_order`), for LiteRT,
    whose NMS kernel breaks score ties its own way: `detections`' outputs (`_nms_in_order`). The
    class columns are the rows of the transpose [slots, A], the cheaper way in TFLite, whose
    UNPACK along axis 1 copies element by element where a TRANSPOSE and an UNPACK of rows move
    whole blocks."""
    columns = tf.transpose(scores)[first:]
    if keep is not None:
        columns = columns + _penalty(keep)
    return _nms_in_order(boxes, columns, tf.constant(config.score_threshold, tf.float32),
                         tf.constant(config.iou_threshold, tf.float32), config.max_detections_per_class, detections)


def _per_class_nms(boxes, scores, keep, config: SSDConfig, first: int, detections):
    """NMS of every class on one image, with TensorFlow's kernel: `detections(selected, valid)`'s
    outputs (`_top_detections`). Where `first_take_pays` (FPN's anchors), NMS first runs over
    each class's best FIRST_TAKE * max_out candidates: the same detections, faster.

    Args:
      boxes: float32 [A, 4] boxes NMS compares.
      scores: float32 [A, slots] class scores; columns before `first` (background) are skipped.
      keep: bool [A, 1], or None for all: candidates allowed into NMS besides the score test.
    """
    max_out = config.max_detections_per_class
    a = boxes.shape[0]
    threshold = tf.constant(config.score_threshold, tf.float32)
    iou_threshold = tf.constant(config.iou_threshold, tf.float32)
    if keep is not None:
        penalty = _penalty(keep)
    # One NMS op per class, unrolled as in the TF1 graph: independent ops the executor runs in
    # parallel, where a map_fn loop would run them one after the other (docs/measurements.md;
    # identical outputs). One unstack along the classes gives each class's contiguous column
    # (a strided slice per class would add one op per class; a transpose first is one more
    # pass over the scores in TensorFlow, which oneDNN reorders).
    columns = [column if keep is None else column + penalty for column in tf.unstack(scores, axis=1)[first:]]

    if not first_take_pays(a, max_out):
        out = [tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=column, max_output_size=max_out,
                                              iou_threshold=iou_threshold, score_threshold=threshold,
                                              pad_to_max_output_size=True) for column in columns]
        return detections(*_valid(tf.stack([s for s, _ in out]), tf.stack([c for _, c in out]), max_out, a))[0]
    # FPN's many anchors: each class's best FIRST_TAKE * max_out first (top_k: TF1's order of
    # the candidates, equal scores lower index first; one more, the best one left out), NMS over
    # those in that order, so the kernel's own tie rule (lower position first) is TF1's; then
    # over all candidates of the classes that leaves unsettled.
    take = FIRST_TAKE * max_out
    stacked = tf.stack(columns)  # [K, A]
    values, order = tf.math.top_k(stacked, k=take + 1, sorted=True)  # [K, take + 1]
    taken_boxes = tf.gather(boxes, order[:, :take])  # [K, take, 4]
    out = [tf.raw_ops.NonMaxSuppressionV4(boxes=b, scores=v, max_output_size=max_out, iou_threshold=iou_threshold,
                                          score_threshold=threshold, pad_to_max_output_size=True)
           for b, v in zip(tf.unstack(taken_boxes), tf.unstack(values[:, :take]))]
    selected = tf.gather(order, tf.stack([s for s, _ in out]), batch_dims=1)
    counts = tf.stack([c for _, c in out])
    left = values[:, take]

    # The rest as a loop over the classes: unrolled, its NMS ops cost each process's first run
    # ~0.5 s of graph optimisation and ~35 MiB more (FPN 640, measured: docs/measurements.md).
    @tf.autograph.experimental.do_not_convert
    def one_class(column):
        return tuple(tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=column, max_output_size=max_out,
                                                    iou_threshold=iou_threshold, score_threshold=threshold,
                                                    pad_to_max_output_size=True))

    def the_rest(settled):
        # A settled class's scores at -inf: its NMS finds no candidate.
        unsettled = stacked + tf.where(settled, -float("inf"), 0.0)[:, None]
        signature = (tf.TensorSpec([max_out], tf.int32), tf.TensorSpec([], tf.int32))
        return tf.map_fn(one_class, unsettled, fn_output_signature=signature)

    return _first_take_then_rest((selected, counts, left, left <= threshold), the_rest, detections, max_out, a)


def _valid(selected, counts, max_out: int, num_anchors: int) -> tuple:
    """(selected int32 [K, M], valid bool [K, M]) from NMS's padded selections [K, max_out] and counts
    [K], M = min(max_out, A): what `_top_detections` takes."""
    # The TF1 graph asks NMS for min(max_detections_per_class, candidates) boxes.
    m = min(max_out, num_anchors)
    selected = selected[:, :m]
    valid = tf.range(m)[None, :] < counts[:, None]
    return selected, valid


def _postprocess_image(boxes, multiclass_scores, config: SSDConfig, sort_first: bool = False):
    """One image: decoded boxes [A, 4], scores with background [A, slots]; `sort_first`: each
    class's candidates sorted before its NMS (`_sorted_per_class_nms`)."""
    first = 1 if config.add_background_class else 0  # the background column is not a class
    clipped, area = clip_to_unit_window(boxes)
    if config.nms_variant == NMS_CLIP_BEFORE:
        nms_boxes, keep = clipped, (area > 0.0)[:, None]
    else:
        nms_boxes, keep = boxes, None

    def detections(selected, valid):
        return _top_detections(selected, valid, clipped, area, multiclass_scores, config)

    if sort_first:
        return _sorted_per_class_nms(nms_boxes, multiclass_scores, keep, config, first, detections)
    return _per_class_nms(nms_boxes, multiclass_scores, keep, config, first, detections)


def _top_detections(selected, valid, clipped, area, multiclass_scores, config: SSDConfig):
    """The image's outputs (`postprocess_image`) from each class's NMS selections: selected int32
    [K, M] anchor indices in NMS order, valid bool [K, M]; clipped float32 [A, 4] boxes and their
    area [A]. Also the score and class (0-based, int32) of the k-th detection (k = the outputs'
    rows that can be detections; the score -inf where they are fewer)."""
    first = 1 if config.add_background_class else 0
    num_classes = config.num_classes
    m = selected.shape[1]
    flat_idx = tf.reshape(selected, [-1])
    flat_cls = tf.reshape(tf.tile(tf.range(num_classes)[:, None], [1, m]), [-1])
    flat_valid = tf.reshape(valid, [-1])
    flat_scores = tf.gather_nd(multiclass_scores, tf.stack([flat_idx, flat_cls + first], axis=1))
    if config.nms_variant != NMS_CLIP_BEFORE:
        # Boxes NMS kept but that are empty once clipped are dropped after the sort.
        flat_valid = tf.logical_and(flat_valid, tf.gather(area, flat_idx) > 0.0)
    # TopK over [class-major, NMS order] with invalid entries at -inf reproduces the TF1
    # sort of the compacted list, ties included (top_k puts the lower position first).
    key = tf.where(flat_valid, flat_scores, tf.constant(-float("inf"), tf.float32))
    k = min(config.max_total_detections, num_classes * m)
    top, order = tf.math.top_k(key, k=k, sorted=True)
    num = tf.minimum(tf.reduce_sum(tf.cast(flat_valid, tf.int32)), k)
    real = tf.range(k) < num
    pad = config.max_total_detections - k

    anchor_idx = tf.gather(flat_idx, order)

    def take(values, dtype, index=order):
        # Per-anchor values are gathered for the k kept entries only, not all K * m candidates.
        v = tf.gather(values, index)
        mask = tf.reshape(real, [-1] + [1] * (len(v.shape) - 1))
        v = tf.where(mask, v, tf.zeros_like(v))
        v = tf.pad(v, [[0, pad]] + [[0, 0]] * (len(v.shape) - 1))
        return tf.cast(v, dtype)

    outputs = (take(clipped, tf.float32, anchor_idx), take(flat_scores, tf.float32),
               take(flat_cls, tf.float32), tf.cast(num, tf.float32),
               take(multiclass_scores, tf.float32, anchor_idx),
               tf.pad(tf.where(real, anchor_idx, 0), [[0, pad]]))
    return outputs, top[-1], flat_cls[order[-1]]


def postprocess_image(boxes, multiclass_scores, config: SSDConfig, sort_first: bool = False) -> tuple:
    """One image's post-processing, what `postprocess` maps over the batch; for exports with a
    static batch of one (TFLite), which need no loop around it. `sort_first`: each class's
    candidates sorted before its NMS, for NMS kernels that break score ties otherwise than
    TensorFlow's (LiteRT's: `_nms_in_order`), the same detections.

    Args:
      boxes: float32 [A, 4] decoded boxes, unclipped; multiclass_scores: float32 [A, slots]
        (`convert_scores`).
    Returns:
      (boxes [D, 4] clipped, scores [D], classes [D] (0-based: add 1 for the output's ids),
      num_detections [], multiclass scores [D, slots], anchor indices int32 [D]),
      D = max_total_detections.
    """
    return _postprocess_image(boxes, multiclass_scores, config, sort_first)


def empty_outputs(config: SSDConfig, num_anchors: int) -> dict:
    """What `postprocess` gives for a batch of 0 images: float32 zeros [0, ...] in each output's
    shape, the per-anchor outputs' rows `num_anchors` (the convolutions reject an empty batch,
    and so does the TF1 graph, so a batch of none never reaches the network)."""
    d, slots = config.max_total_detections, config.num_class_slots
    shapes = {"detection_boxes": [d, 4], "detection_scores": [d], "detection_classes": [d], "num_detections": [],
              "raw_detection_boxes": [num_anchors, 4], "raw_detection_scores": [num_anchors, slots],
              "detection_multiclass_scores": [d, slots], "detection_anchor_indices": [d]}
    return {k: tf.zeros([0] + shapes[k], tf.float32) for k in ALL_OUTPUTS}


def postprocess(box_encodings_decoded, class_logits, config: SSDConfig) -> dict:
    """Detections from decoded boxes and class logits.

    Args:
      box_encodings_decoded: float32 [N, A, 4] decoded boxes [ymin, xmin, ymax, xmax], unclipped.
      class_logits: float32 [N, A, num_class_slots] (column 0 is background when present).
    Returns:
      dict of float32 tensors, TF2 OD API export layout:
        detection_boxes [N, D, 4] (clipped, normalised), detection_scores [N, D],
        detection_classes [N, D] (1-based class ids; padded rows read 1.0), num_detections [N],
        raw_detection_boxes [N, A, 4], raw_detection_scores [N, A, slots] (`convert_scores`),
        detection_multiclass_scores [N, D, slots], detection_anchor_indices [N, D];
      D = max_total_detections.
    """
    raw_scores = convert_scores(class_logits, config)
    d, slots = config.max_total_detections, config.num_class_slots
    signature = (tf.TensorSpec([d, 4], tf.float32), tf.TensorSpec([d], tf.float32), tf.TensorSpec([d], tf.float32),
                 tf.TensorSpec([], tf.float32), tf.TensorSpec([d, slots], tf.float32), tf.TensorSpec([d], tf.int32))
    # A batch of one skips map_fn's while loop and tensor lists (measured in docs/measurements.md):
    # the same per-image function, so the same detections.
    def one_image():
        return tuple(t[tf.newaxis] for t in _postprocess_image(box_encodings_decoded[0], raw_scores[0], config))

    # Not converted: map_fn would have autograph rewrite the per-image function on every trace even
    # where the caller's tf.function has autograph off (its control flow is written as tf ops).
    @tf.autograph.experimental.do_not_convert
    def per_image(args):
        return _postprocess_image(*args, config)

    def each_image():
        return tf.map_fn(per_image, (box_encodings_decoded, raw_scores), fn_output_signature=signature)

    if box_encodings_decoded.shape[0] == 1:
        outputs = one_image()
    elif box_encodings_decoded.shape[0] is None:
        outputs = tf.cond(tf.equal(tf.shape(box_encodings_decoded)[0], 1), one_image, each_image)
    else:
        outputs = each_image()
    boxes, det_scores, classes, num, multiclass, anchor_idx = outputs
    return {
        "detection_boxes": boxes,
        "detection_scores": det_scores,
        "detection_classes": classes + 1.0,  # label_id_offset: class ids start at 1
        "num_detections": num,
        "raw_detection_boxes": box_encodings_decoded,
        "raw_detection_scores": raw_scores,
        "detection_multiclass_scores": multiclass,
        "detection_anchor_indices": tf.cast(anchor_idx, tf.float32),
    }
