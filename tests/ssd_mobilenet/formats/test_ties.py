"""Equal scores decided as the TF1 graph decides them, on every runtime the project deploys to.

TF1's per-class NMS (TensorFlow's NonMaxSuppressionV2/V3 kernel) takes equal scores lower box
index first, and its sort of the class-major list of NMS results (TopK) lower position first: of
two overlapping boxes with one score, the lower index is kept, and equal scores come out lower
class, then lower index first. Scores tie wherever a sigmoid saturates (float32 steps near 1 are
6e-8 apart, and 1.0 itself) and wherever two anchors see the same thing. LiteRT's
NON_MAX_SUPPRESSION_V4 keeps its candidates in a heap compared by score alone, so before each
class's candidates were sorted for it (`postprocessing._nms_in_order`) the `.tflite` file kept
other boxes where scores tied.

The post-processing of each format, as its exporter builds it, runs on crafted decoded boxes and
scores (the network would not give ties on demand), and its detections must equal, bit for bit,
those of the TF1 graph's `multiclass_non_max_suppression` (`migrate.tf1.builder`, a
`tf.compat.v1` session) on the same inputs, in both `nms_variant`s:

- image 0: three boxes in a chain (the middle one overlaps both ends, the ends do not overlap),
  one score, in each of the 6 orders of their indices, at 1.0, at 0.999996 and at 0.5 (which also
  ties across two classes); and pairs of overlapping boxes 1 float32 step apart in score, the
  higher score at the higher index and at the lower;
- image 1: a crowd of overlapping boxes whose scores take four values (1.0, 0.999996, the float32
  just below it, 0.5) in every class: many ties at once, in every class;
- image 2: one box at 450 anchors and 30 disjoint boxes at the others, one score each (1.0 and
  0.5): NMS keeps one of the 450 and must reach past them, beyond the best
  `postprocessing.FIRST_TAKE * max_out` candidates the `.tflite` file sorts first;
- image 3: pairs of boxes whose IoU is the NMS limit exactly: TF1 suppresses above the limit
  only, so both of each pair stay (OpenVINO's NMS suppresses at it: `openvino_model`);
- image 4: the first take's detections tie with what it left out: class 1's best 100 are copies
  of one box, and 30 disjoint boxes past them score as much as class 2's 99, so the first take's
  100th detection (class 2) ties with them and TF1's sort puts them (class 1) first: the
  `.tflite` file must sort on (`postprocessing._first_take_decides`).

The scores NMS compares are TensorFlow's too: each file's score conversion
(`postprocessing.tensorflow_sigmoid`, TensorFlow's sigmoid kernel step by step) gives `tf.sigmoid`'s
scores bit for bit on every runtime, where their own sigmoid ops round otherwise near 1, where
trained detectors' scores tie (`SCORE_RUNTIMES`; tests/migrate/export/test_ties_on_photos.py runs
whole files on photos).

Runtimes: TensorFlow (`postprocessing.postprocess`, what the SavedModel's function runs), LiteRT
(the "per-class" `.tflite` file's `per_class_outputs`, converted alone), ONNX Runtime, OpenVINO and
OpenCV's DNN module (the `.onnx` file's `postprocessing.graph`), LiteRT.js (the same `.tflite` file on
the web page's runtime, as `export --web` copies it, in headless Chromium: `run_litert_web.js`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from migrate.export import web
from migrate.tf1 import builder
from ssd_mobilenet import postprocessing
from ssd_mobilenet.config.ssd_config import NMS_CLIP_AFTER, NMS_CLIP_BEFORE, SSDConfig
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.formats.onnx import openvino_model
from ssd_mobilenet.formats.onnx import postprocessing as onnx_postprocessing
from ssd_mobilenet.formats.tflite import writer as tflite_writer

ANCHORS = 480
NEAR_ONE = np.float32(0.999996)
LEVELS = np.array([1.0, NEAR_ONE, np.nextafter(NEAR_ONE, np.float32(0)), 0.5], np.float32)
# Three boxes in a row, 0.1 wide, 0.02 apart: neighbours overlap at IoU 2/3, above the 0.6 limit,
# the two ends at 3/7, below it.
CHAIN = np.array([[0.0, 0.0, 0.1, 0.1], [0.0, 0.02, 0.1, 0.12], [0.0, 0.04, 0.1, 0.14]], np.float32)


def _config(variant: str) -> SSDConfig:
    # The zoo's post-processing (score threshold 1e-8, IoU 0.6, 100 per class and in all); the
    # scores are fed as they are (IDENTITY), so the TF graph's input is the other runtimes' too.
    return SSDConfig(num_classes=3, nms_variant=variant, score_converter="IDENTITY")


def _orders_image(rng) -> tuple:
    """Image 0 (module docstring): boxes [A, 4], scores [A, 4] (background column first), and the
    boxes TF1's rule keeps of class 1's chains, {score: set of box tuples}: of each chain the box at
    its lowest index, and with an end there the other end too (the middle is suppressed)."""
    boxes = rng.uniform(0.0, 1.0, (ANCHORS, 4)).astype(np.float32)  # anchors left at score 0
    scores = np.zeros((ANCHORS, 4), np.float32)
    spots = iter(itertools.product(np.arange(7) * 0.14, np.arange(7) * 0.14))  # a 7x7 grid, 0.14 apart
    anchors = iter(rng.permutation(ANCHORS))
    expected = {}
    for level in (1.0, NEAR_ONE, 0.5):
        for order in itertools.permutations(range(3)):  # order[j]: the box at the j-th lowest index
            y, x = next(spots)
            indices = sorted(next(anchors) for _ in range(3))
            boxes[indices] = CHAIN[list(order)] + np.float32([y, x, y, x])
            scores[indices, 1] = level
            if level == 0.5:
                scores[indices, 2] = level
            kept = [order[0]] if order[0] == 1 else [0, 2]
            expected.setdefault(float(level), set()).update(tuple(CHAIN[k] + np.float32([y, x, y, x])) for k in kept)
    for higher_first in (True, False):
        for level in LEVELS[:2]:
            y, x = next(spots)
            pair = sorted(next(anchors) for _ in range(2))
            boxes[pair] = CHAIN[:2] + np.float32([y, x, y, x])
            above = np.nextafter(np.float32(level), np.float32(2)) if level < 1 else level
            below = level if level < 1 else np.nextafter(np.float32(1), np.float32(0))
            scores[pair, 3] = [above, below] if higher_first else [below, above]
    return boxes, scores, expected


def _crowd_image(rng) -> tuple:
    """Image 1 (module docstring)."""
    centre = rng.uniform(0.3, 0.7, (ANCHORS, 2))
    size = rng.uniform(0.15, 0.35, (ANCHORS, 2))
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1).astype(np.float32)
    scores = np.zeros((ANCHORS, 4), np.float32)
    scores[:, 1:] = LEVELS[rng.integers(0, len(LEVELS), (ANCHORS, 3))]
    return boxes, scores


def _beyond_image(rng) -> tuple:
    """Image 2 (module docstring)."""
    boxes = np.tile(np.float32([[0.8, 0.8, 0.95, 0.95]]), (ANCHORS, 1))
    scores = np.zeros((ANCHORS, 4), np.float32)
    scores[:, 1] = 1.0
    spread = rng.choice(ANCHORS, size=30, replace=False)
    grid = np.float32([[0.15 * (i // 6), 0.15 * (i % 6)] for i in range(30)])
    boxes[spread] = np.concatenate([grid, grid + 0.1], axis=1)
    scores[spread, 1] = 0.5
    return boxes, scores


def _iou(a, b) -> np.float32:
    """The IoU of boxes a, b [4] in float32, as TensorFlow's NMS kernel computes it."""
    area = lambda box: (box[2] - box[0]) * (box[3] - box[1])  # noqa: E731
    height = max(min(a[2], b[2]) - max(a[0], b[0]), np.float32(0))
    width = max(min(a[3], b[3]) - max(a[1], b[1]), np.float32(0))
    intersection = height * width
    return intersection / (area(a) + area(b) - intersection)


def _limit_image(rng, limit: float) -> tuple:
    """Image 3 (module docstring): pairs of boxes whose IoU is the limit exactly, in float32 (a box
    0.25 square and one of its width times 0.6 inside it, every difference exact): TF1 keeps both
    of each pair, whichever has the higher score and the lower index."""
    boxes = rng.uniform(0.0, 1.0, (ANCHORS, 4)).astype(np.float32)  # anchors left at score 0
    scores = np.zeros((ANCHORS, 4), np.float32)
    anchors = iter(rng.permutation(ANCHORS))
    for row, (outer_first, outer_higher) in enumerate(itertools.product((True, False), (True, False))):
        y = np.float32(0.25 * row)
        outer = np.float32([y, 0.0, y + 0.25, 0.25])
        inner = np.float32([y, 0.0, y + 0.25, np.float32(0.25) * np.float32(limit)])
        assert _iou(outer, inner) == np.float32(limit), (outer, inner)
        pair = sorted(next(anchors) for _ in range(2))
        boxes[pair] = [outer, inner] if outer_first else [inner, outer]
        scores[pair, 1] = [0.9, 0.8] if outer_first == outer_higher else [0.8, 0.9]
    return boxes, scores


def _bound_image(rng) -> tuple:
    """Image 4 (module docstring): one box at anchors 0-199 and 30 disjoint boxes at 200-229, class
    1, and 99 disjoint boxes at 230-328, class 2, all scoring 0.7."""
    boxes = rng.uniform(0.0, 1.0, (ANCHORS, 4)).astype(np.float32)  # anchors left at score 0
    scores = np.zeros((ANCHORS, 4), np.float32)
    boxes[:200] = [0.9, 0.9, 1.0, 1.0]
    corners = np.float32([[0.08 * (i // 11), 0.08 * (i % 11)] for i in range(129)])  # 0.05 wide, 0.08 apart
    boxes[200:329] = np.concatenate([corners, corners + 0.05], axis=1)
    scores[:230, 1] = 0.7
    scores[230:329, 2] = 0.7
    return boxes, scores


def _images() -> tuple:
    """boxes float32 [5, A, 4] and scores float32 [5, A, 4]."""
    rng = np.random.default_rng(53)
    pairs = [_orders_image(rng)[:2], _crowd_image(rng), _beyond_image(rng),
             _limit_image(rng, _config(NMS_CLIP_BEFORE).iou_threshold), _bound_image(rng)]
    return np.stack([b for b, _ in pairs]), np.stack([s for _, s in pairs])


# ---- the runtimes: (config, boxes [N, A, 4], scores [N, A, slots]) -> DETECTION_OUTPUTS [N, ...] ----

def _tf1(config, boxes, scores) -> dict:
    """The TF1 graph's per-image NMS and sort, padded to D rows as its PadOrClipBoxList pads."""
    d = config.max_total_detections
    graph = tf.Graph()
    with graph.as_default():
        b = tf.compat.v1.placeholder(tf.float32, boxes.shape[1:])
        s = tf.compat.v1.placeholder(tf.float32, scores.shape[1:])
        nms = builder.multiclass_nms(b, s[:, 1:], config, tf.constant([0.0, 0.0, 1.0, 1.0]))
        with tf.compat.v1.Session(graph=graph) as session:
            runs = [session.run(nms, {b: bi, s: si}) for bi, si in zip(boxes, scores)]
    out = {key: [] for key in DETECTION_OUTPUTS}
    for det_boxes, det_scores, det_classes, num in runs:
        out["detection_boxes"].append(np.pad(det_boxes, [[0, d - num], [0, 0]]))
        out["detection_scores"].append(np.pad(det_scores, [0, d - num]))
        out["detection_classes"].append(np.pad(det_classes, [0, d - num]) + 1.0)
        out["num_detections"].append(np.float32(num))
    return {key: np.stack(v).astype(np.float32) for key, v in out.items()}


def _tensorflow(config, boxes, scores) -> dict:
    out = postprocessing.postprocess(tf.constant(boxes), tf.constant(scores), config)
    return {key: out[key].numpy() for key in DETECTION_OUTPUTS}


def _per_class_tflite(config, boxes, scores) -> bytes:
    """The "per-class" `.tflite` file's post-processing alone: inputs b [A, 4], s [A, C + 1]."""
    module = tf.Module()
    module.serve = tf.function(lambda b, s: tflite_writer.per_class_outputs(b, s, config), autograph=False)
    function = module.serve.get_concrete_function(tf.TensorSpec(boxes.shape[1:], tf.float32),
                                                  tf.TensorSpec(scores.shape[1:], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # as the file's
    return converter.convert()


def _litert(config, boxes, scores) -> dict:
    from ai_edge_litert.interpreter import Interpreter
    runner = Interpreter(model_content=_per_class_tflite(config, boxes, scores)).get_signature_runner()
    runs = [runner(b=b, s=s) for b, s in zip(boxes, scores)]
    return {key: np.concatenate([r[key] for r in runs]) for key in DETECTION_OUTPUTS}


def _onnx_proto(config, boxes):
    proto = onnx_postprocessing.graph(config, boxes.shape[1])
    proto.ir_version = 7  # the file's (tf2onnx's at opset 13); ONNX Runtime Web reads up to 13
    return proto


def _onnxruntime(config, boxes, scores) -> dict:
    import onnxruntime
    session = onnxruntime.InferenceSession(_onnx_proto(config, boxes).SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    runs = [session.run(list(DETECTION_OUTPUTS), {"boxes": b[None], "scores": s[None]}) for b, s in zip(boxes, scores)]
    return {key: np.concatenate([r[i] for r in runs]) for i, key in enumerate(DETECTION_OUTPUTS)}


def _openvino(config, boxes, scores) -> dict:
    import openvino
    core = openvino.Core()
    compiled = openvino_model.compile_model(core, _onnx_proto(config, boxes).SerializeToString())
    runs = [compiled({"boxes": b[None], "scores": s[None]}) for b, s in zip(boxes, scores)]
    return {key: np.concatenate([np.asarray(r[compiled.output(key)]) for r in runs]) for key in DETECTION_OUTPUTS}


def _opencv(config, boxes, scores) -> dict:
    import cv2
    net = cv2.dnn.readNetFromONNX(np.frombuffer(_onnx_proto(config, boxes).SerializeToString(), np.uint8))
    runs = []
    for b, s in zip(boxes, scores):
        net.setInput(b[None], "boxes")
        net.setInput(s[None], "scores")
        runs.append(net.forward(list(DETECTION_OUTPUTS)))
    return {key: np.concatenate([np.asarray(r[i]) for r in runs]) for i, key in enumerate(DETECTION_OUTPUTS)}


def _run_litert_web(model: bytes, feeds: list, folder: str) -> list:
    """A `.tflite` file of fixed shapes on LiteRT.js in headless Chromium, once per feed ({input
    name: float32 array}): the runtime's files as `export --web` copies them (`web.runtime_file`),
    served with `run_litert_web.js`. Returns each run's {output name: array}."""
    from migrate.bench import browser
    for package, inside, name in web.RUNTIME_FILES:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(web.runtime_file(web.WEB_DIR, package, inside))
    with open(os.path.join(folder, "model.tflite"), "wb") as f:
        f.write(model)
    with open(os.path.join(folder, "feeds.json"), "w") as f:
        json.dump([{name: {"data": a.ravel().tolist(), "shape": list(a.shape)} for name, a in feed.items()}
                   for feed in feeds], f)
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_litert_web.js"), folder)
    with open(os.path.join(folder, "index.html"), "w") as f:
        f.write('<!doctype html><script type="importmap">{"imports": {"@litertjs/wasm-utils": '
                '"./litert-wasm-utils.js"}}</script><script type="module" src="run_litert_web.js"></script>')
    with browser.chromium() as context, browser.serve(folder) as base:
        page = context.new_page()
        page.goto(f"{base}index.html")
        runs = page.evaluate("() => window.results")
    return [{name: np.asarray(v["data"], np.float32).reshape(v["shape"]) for name, v in run.items()} for run in runs]


def _litert_web(config, boxes, scores, folder) -> dict:
    """The post-processing's `.tflite` file (`_per_class_tflite`) on LiteRT.js."""
    runs = _run_litert_web(_per_class_tflite(config, boxes, scores), [{"b": b, "s": s} for b, s in zip(boxes, scores)],
                           folder)
    return {key: np.concatenate([r[key] for r in runs]) for key in DETECTION_OUTPUTS}


RUNTIMES = {"tensorflow": _tensorflow, "litert": _litert, "onnxruntime": _onnxruntime, "openvino": _openvino,
            "opencv": _opencv, "litert_web": _litert_web}


@pytest.fixture(scope="module")
def tf1_detections():
    """{nms_variant: the TF1 graph's detections on `_images()`}, each computed once."""
    cache = {}

    def get(variant):
        if variant not in cache:
            cache[variant] = _tf1(_config(variant), *_images())
        return cache[variant]
    return get


@pytest.mark.parametrize("variant", [NMS_CLIP_BEFORE, NMS_CLIP_AFTER])
def test_tf1_keeps_the_lower_index_of_equal_scores_and_the_cases_depend_on_it(variant, tf1_detections):
    # Not vacuous: which boxes of the chains TF1 keeps depends on the order of their indices
    # (the lower index first), the crowd fills the total cap with scores of LEVELS only, and
    # image 2 keeps one box of the 450 and the 30 behind them, image 4 class 1's first box and the
    # 30 behind its copies before class 2's boxes of the same score.
    _, _, expected = _orders_image(np.random.default_rng(53))
    out = tf1_detections(variant)
    n = int(out["num_detections"][0])
    for level, boxes in expected.items():
        rows = (out["detection_classes"][0][:n] == 1.0) & (out["detection_scores"][0][:n] == np.float32(level))
        assert {tuple(b) for b in out["detection_boxes"][0][:n][rows]} == boxes, level
    assert int(out["num_detections"][1]) == 100
    assert set(out["detection_scores"][1].tolist()) <= set(LEVELS.tolist())
    assert int(out["num_detections"][2]) == 31
    assert int(out["num_detections"][3]) == 8  # at the IoU limit, not above it: both of each pair
    assert out["detection_classes"][4].tolist() == [1.0] * 31 + [2.0] * 69


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
@pytest.mark.parametrize("variant", [NMS_CLIP_BEFORE, NMS_CLIP_AFTER])
def test_every_runtime_keeps_the_tf1_graphs_boxes_in_its_order_where_scores_tie(runtime, variant, tf1_detections,
                                                                               tmp_path):
    config = _config(variant)
    boxes, scores = _images()
    run = RUNTIMES[runtime]
    ours = run(config, boxes, scores, str(tmp_path)) if runtime == "litert_web" else run(config, boxes, scores)
    ref = tf1_detections(variant)
    for key in DETECTION_OUTPUTS:
        np.testing.assert_array_equal(ours[key], ref[key], err_msg=f"{runtime}: {key}")


@pytest.mark.parametrize("runtime", ["tensorflow", "onnxruntime", "openvino", "opencv"])
@pytest.mark.parametrize("variant", [NMS_CLIP_BEFORE, NMS_CLIP_AFTER])
def test_the_first_take_keeps_the_tf1_graphs_boxes_where_scores_tie(runtime, variant):
    # 10 boxes a class: NMS first takes each class's best 40 of the 480 anchors, as FPN's takes
    # 400 of 51,150 (`postprocessing.first_take_pays`): TensorFlow's post-processing (the
    # SavedModel's) and the `.onnx` file's first NMS pass (onnx_postprocessing, step 3). The
    # crowd's ties straddle the 40th score, and the 450 copies of one box leave that class to
    # the second pass.
    config = _config(variant).replace(max_detections_per_class=10, max_total_detections=30)
    boxes, scores = _images()
    assert postprocessing.first_take_pays(ANCHORS, 10) and not postprocessing.first_take_pays(ANCHORS, 100)
    assert [n.op_type for n in _onnx_proto(config, boxes).graph.node].count("NonMaxSuppression") == 2
    ours = RUNTIMES[runtime](config, boxes, scores)
    ref = _tf1(config, boxes, scores)
    assert ref["num_detections"][2] > 1  # image 2: TF1's NMS reached past the 450 copies, beyond the best 40
    for key in DETECTION_OUTPUTS:
        np.testing.assert_array_equal(ours[key], ref[key], err_msg=f"{runtime}: {key}")


# ---- the score conversion: TensorFlow's sigmoid on every runtime, bit for bit ----

# Logits [1, A, 4] (3 classes and background): dense where the sigmoid nears 1 (a float32 step of
# the score spans up to 0.01 of logit there, so neighbouring anchors tie), the rest of the range
# coarser, and the edges of TensorFlow's kernel (exactly 1.0 from 16.6355324; subnormal below -87).
_EDGES = [16.6355324, np.nextafter(np.float32(16.6355324), np.float32(0)), 15.7, 17.4, -87.0, -90.0, -104.0, -120.0]
LOGITS = np.concatenate([np.linspace(6.0, 17.5, 24000), np.linspace(-30.0, 6.0, 7992),
                         _EDGES]).astype(np.float32).reshape(1, -1, 4)
NORMAL = np.finfo(np.float32).tiny  # scores below it are subnormal: some runtimes flush them to 0


def _scores_function(sigmoid):
    return tf.function(lambda logits: postprocessing.convert_scores(logits, SSDConfig(num_classes=3), sigmoid=sigmoid),
                       autograph=False)


def _scores_tflite(sigmoid) -> bytes:
    module = tf.Module()
    module.serve = _scores_function(sigmoid)
    function = module.serve.get_concrete_function(tf.TensorSpec(LOGITS.shape, tf.float32, name="logits"))
    return tf.lite.TFLiteConverter.from_concrete_functions([function], module).convert()


def _scores_onnx(sigmoid) -> bytes:
    import tf2onnx
    proto, _ = tf2onnx.convert.from_function(_scores_function(sigmoid), opset=onnx_postprocessing.OPSET,
                                             input_signature=[tf.TensorSpec(LOGITS.shape, tf.float32, name="logits")])
    proto.ir_version = 7
    return proto.SerializeToString()


def _scores_litert(sigmoid, folder=None):
    from ai_edge_litert.interpreter import Interpreter
    runner = Interpreter(model_content=_scores_tflite(sigmoid)).get_signature_runner()
    return next(iter(runner(logits=LOGITS).values()))


def _scores_onnxruntime(sigmoid, folder=None):
    import onnxruntime
    session = onnxruntime.InferenceSession(_scores_onnx(sigmoid), providers=["CPUExecutionProvider"])
    return session.run(None, {"logits": LOGITS})[0]


def _scores_openvino(sigmoid, folder=None):
    import openvino
    core = openvino.Core()
    compiled = openvino_model.compile_model(core, _scores_onnx(sigmoid))
    return np.asarray(compiled({"logits": LOGITS})[compiled.output(0)])


def _scores_opencv(sigmoid, folder=None):
    import cv2
    net = cv2.dnn.readNetFromONNX(np.frombuffer(_scores_onnx(sigmoid), np.uint8))
    net.setInput(LOGITS, "logits")
    return np.asarray(net.forward())


def _scores_litert_web(sigmoid, folder):
    return next(iter(_run_litert_web(_scores_tflite(sigmoid), [{"logits": LOGITS}], folder)[0].values()))


# Each runtime with the score conversion its file holds: the `.tflite` file's (LiteRT, LiteRT.js)
# or the `.onnx` file's (ONNX Runtime, OpenVINO, OpenCV); and the function itself in TensorFlow.
SCORE_RUNTIMES = {"tensorflow": (lambda sigmoid, folder=None: _scores_function(sigmoid)(LOGITS).numpy(),
                                 postprocessing.tensorflow_sigmoid),
                  "litert": (_scores_litert, postprocessing.tensorflow_sigmoid),
                  "litert_web": (_scores_litert_web, postprocessing.tensorflow_sigmoid),
                  "onnxruntime": (_scores_onnxruntime, postprocessing.tensorflow_sigmoid),
                  "openvino": (_scores_openvino, postprocessing.tensorflow_sigmoid),
                  "opencv": (_scores_opencv, postprocessing.tensorflow_sigmoid)}


@pytest.mark.parametrize("runtime", sorted(SCORE_RUNTIMES))
def test_every_runtime_converts_scores_as_the_tf1_graphs_sigmoid(runtime, tmp_path):
    """The files' score conversion (`postprocessing.tensorflow_sigmoid`) gives TensorFlow's own
    sigmoid (the TF1 graph's kernel) bit for bit on every runtime, where a score is a normal
    float32: a score a float32 step off near 1 makes a tie an order, and NMS keeps another box."""
    run, sigmoid = SCORE_RUNTIMES[runtime]
    expected = tf.sigmoid(LOGITS).numpy()
    ours = np.asarray(run(sigmoid, str(tmp_path))).reshape(expected.shape)
    normal = expected >= NORMAL
    np.testing.assert_array_equal(ours[normal], expected[normal], err_msg=runtime)
    assert (ours[~normal] < NORMAL).all(), runtime


@pytest.mark.parametrize("runtime", ["litert", "onnxruntime"])
def test_the_runtimes_own_sigmoid_differs_from_the_tf1_graphs_near_1(runtime):
    # Why the float files do not hold the runtime's sigmoid op (int8 files do:
    # `postprocessing.file_sigmoid`): LiteRT's LOGISTIC and ONNX Runtime's Sigmoid round scores near 1
    # otherwise, and reach 1.0 at another logit than TensorFlow's 16.64.
    run, _ = SCORE_RUNTIMES[runtime]
    expected, theirs = tf.sigmoid(LOGITS).numpy(), np.asarray(run(tf.sigmoid)).reshape(LOGITS.shape)
    near_one = LOGITS > 8.0
    assert (theirs[near_one] != expected[near_one]).sum() > 100
    assert LOGITS[theirs == 1.0].min() != LOGITS[expected == 1.0].min()


def test_the_sigmoids_power_of_two_is_exact_whatever_the_runtimes_exp_rounds():
    # `tensorflow_sigmoid` takes 2^m as exp(m ln 2) rounded to one significant bit: the same power
    # for an exp off by far more than any runtime's (here -20% to +40%), for every m it meets.
    powers = np.float32(2.0) ** np.arange(-75, 13, dtype=np.float32)
    off = np.linspace(-0.2, 0.4, 61, dtype=np.float32)
    approximate = (powers[:, None] * (1 + off[None, :])).astype(np.float32)
    rounded = postprocessing.round_to_one_bit(tf.constant(approximate)).numpy()
    np.testing.assert_array_equal(rounded, np.broadcast_to(powers[:, None], rounded.shape))
    # Past the rounding's reach (+-50%: half a step of the next power) it would not hold.
    assert postprocessing.round_to_one_bit(tf.constant(np.float32(1.6))).numpy() == 2.0


def test_tensorflow_sigmoid_is_tensorflows_op_on_four_million_logits():
    # Denser than LOGITS, in TensorFlow alone: every normal score equal, on logits spread over the
    # whole range, and every float32 logit from 8 to 8.5 (where a score step spans ~40 logits).
    rng = np.random.default_rng(0)
    every_float = np.arange(np.float32(8.0).view(np.int32), np.float32(8.5).view(np.int32)).view(np.float32)
    logits = np.concatenate([rng.uniform(-90.0, 20.0, 1 << 21), rng.normal(0.0, 5.0, 1 << 20), every_float])
    logits = logits.astype(np.float32)
    expected = tf.sigmoid(logits).numpy()
    ours = postprocessing.tensorflow_sigmoid(tf.constant(logits)).numpy()
    normal = expected >= NORMAL
    np.testing.assert_array_equal(ours[normal], expected[normal])
