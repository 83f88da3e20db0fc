"""The ONNX export (`ssd_mobilenet.formats.onnx.writer`): one static ONNX file whose detections on ONNX
Runtime are the converted model's, and whose post-processing graph (`onnx_postprocessing`)
gives TF's post-processing's (`ssd_mobilenet.postprocessing`) detections bit for bit on crafted
boxes and scores: the boundary cases (a score at the threshold, an IoU at the limit, boxes the
clip leaves empty, equal scores) on ONNX Runtime, on OpenVINO and on OpenCV's DNN module.

Small models (depth 0.25, 128x128, 3 classes) with the TF1 builder's seeded synthetic weights,
saved as converted directories: the default one and its file by `migrate export --onnx` once per
run (`conftest.small_model()`, whose file the predict and int8 cases read too), the other once per module.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ssd_mobilenet.detections import DETECTION_OUTPUTS

pytest.importorskip("onnx", reason="the ONNX export needs the onnx package (pip install '.[onnx-export]')")
pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed (pip install '.[onnx]')")

import onnx  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests.conftest import SMALL_PRESETS, check_detections, random_images, save_synthetic_model  # noqa: E402
from ssd_mobilenet import detector, loading, postprocessing  # noqa: E402
from ssd_mobilenet.config.ssd_config import BACKGROUND_SLICE_LOGITS, NMS_CLIP_AFTER, NMS_CLIP_BEFORE, SSDConfig  # noqa: E402
from ssd_mobilenet.formats.onnx import file_format as onnx_format  # noqa: E402
from ssd_mobilenet.formats.onnx import openvino_model  # noqa: E402
from ssd_mobilenet.formats.onnx import postprocessing as onnx_postprocessing  # noqa: E402
from ssd_mobilenet.formats.onnx import writer as onnx_export  # noqa: E402

CONFIG = SSDConfig(**SMALL_PRESETS["plain"])
# The other branches of the graph in one model: the nearest-neighbour resize after the scaling,
# softmax with a logit scale over the class columns only (2017 graphs), NMS before the clip.
OTHER = CONFIG.replace(resize_method="NEAREST_NEIGHBOR", normalize_before_resize=True, score_converter="SOFTMAX",
                       logit_scale=2.0, background_slice=BACKGROUND_SLICE_LOGITS, nms_variant=NMS_CLIP_AFTER,
                       score_threshold=0.2, max_detections_per_class=7, max_total_detections=20)
SIZES = [(128, 128), (300, 200), (77, 513)]


def _session(model_bytes: bytes):
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def exported(small_model, tmp_path_factory):
    """{name: (converted directory, .onnx path)} for CONFIG (`conftest.small_model()`) and OTHER."""
    root = tmp_path_factory.mktemp("onnx_export")
    converted = str(root / "other")
    model = save_synthetic_model(converted, OTHER)
    path = str(root / "other.onnx")
    onnx_export.export_onnx(model, path)
    return {"default": (small_model().converted, small_model().onnx), "other": (converted, path)}


def test_file_is_a_checked_static_graph_of_opset_13_with_a_uint8_input_of_any_size(exported):
    _, path = exported["default"]
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")] == [("", 13)]
    ops = {node.op_type for node in model.graph.node}
    assert not ops & set(onnx_export.FORBIDDEN_OPS) and "Loop" in onnx_export.FORBIDDEN_OPS
    assert sum(node.op_type == "NonMaxSuppression" for node in model.graph.node) == 1
    assert "Resize" in ops  # the legacy resize is inside the file
    (graph_input,) = model.graph.input
    dims = graph_input.type.tensor_type.shape.dim
    assert graph_input.name == "input_tensor" and graph_input.type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert dims[0].dim_value == 1 and dims[3].dim_value == 3 and not dims[1].HasField("dim_value")
    # The photo's full-size copies: NHWC -> NCHW while still uint8, then the one cast to float32.
    (first,) = [n for n in model.graph.node if graph_input.name in n.input]
    (cast,) = [n for n in model.graph.node if first.output[0] in n.input]
    assert (first.op_type, cast.op_type) == ("Transpose", "Cast")
    assert [a.i for a in cast.attribute if a.name == "to"] == [onnx.TensorProto.FLOAT]
    assert [o.name for o in model.graph.output] == list(DETECTION_OUTPUTS)
    meta = json.loads({p.key: p.value for p in model.metadata_props}[onnx_format.METADATA_NAME])
    assert meta["image_size"] == [128, 128] and meta["any_size"] and meta["num_classes"] == 3


@pytest.mark.parametrize("name", ["default", "other"])
def test_detections_are_the_converted_models_on_photos_of_any_size(exported, name):
    converted, path = exported[name]
    session = _session(path)
    model = loading.load(converted)
    totals = 0
    for i, (h, w) in enumerate(SIZES):
        image = random_images(10 + i, 1, h, w)
        ours = dict(zip(DETECTION_OUTPUTS, session.run(list(DETECTION_OUTPUTS), {"input_tensor": image})))
        ref = {k: v.numpy() for k, v in model(tf.constant(image)).items() if k in DETECTION_OUTPUTS}
        check_detections(ours, ref)
        # Padded rows as TF1's: zeros, classes 1.0.
        n = int(ref["num_detections"][0])
        np.testing.assert_array_equal(ours["detection_classes"][0, n:], ref["detection_classes"][0, n:])
        totals += n
    assert totals >= 20  # the comparison saw detections, not only padding


@pytest.mark.slow
def test_float32_input_is_a_fixed_size_scaled_image(exported, tmp_path):
    converted, _ = exported["default"]
    from ssd_mobilenet.formats import preprocess
    model = detector.load_model(converted)
    proto = onnx_export.convert(model, input_type="float32", max_detections=30)
    (graph_input,) = proto.graph.input
    assert graph_input.name == "normalized_input_image_tensor"
    assert [d.dim_value for d in graph_input.type.tensor_type.shape.dim] == [1, 128, 128, 3]
    image = random_images(5, 1, 200, 150)
    scaled = preprocess.preprocess(image[0], 128, 128)[None]
    ours = dict(zip(DETECTION_OUTPUTS, _session(proto.SerializeToString()).run(
        list(DETECTION_OUTPUTS), {"normalized_input_image_tensor": scaled})))
    ref = {k: v.numpy()[:, :30] if k != "num_detections" else np.minimum(v.numpy(), 30)
           for k, v in loading.load(converted)(tf.constant(image)).items() if k in DETECTION_OUTPUTS}
    assert ours["detection_scores"].shape == (1, 30)
    check_detections(ours, ref)


# --- the post-processing graph alone, on crafted inputs ------------------------------------------


def _runtimes():
    """run(model_proto, feeds) -> outputs dict, for ONNX Runtime and, where installed, OpenVINO (as
    `openvino_model.compile_model` compiles the file: OpenVINO's own NMS would suppress a box whose
    IoU equals the limit, and its TopK is imported unstable, which the file leaves no tie to) and
    OpenCV's DNN module (its NMS keeps a box whose IoU equals the limit, as TF1 does: `NMSBoxes`
    suppresses above it only)."""
    def onnxruntime_run(proto, feeds):
        session = _session(proto.SerializeToString())
        return dict(zip(DETECTION_OUTPUTS, session.run(list(DETECTION_OUTPUTS), feeds)))

    def openvino_run(proto, feeds):
        ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (pip install '.[openvino]')")
        compiled = openvino_model.compile_model(ov.Core(), proto.SerializeToString())  # as the project runs it
        results = compiled(feeds)
        return {key: np.asarray(results[compiled.output(key)]) for key in DETECTION_OUTPUTS}

    def opencv_run(proto, feeds):
        cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (pip install '.[opencv]')")
        net = cv2.dnn.readNetFromONNX(np.frombuffer(proto.SerializeToString(), np.uint8))  # bytes would be a path
        for name, value in feeds.items():
            net.setInput(value, name)
        return {key: np.asarray(value) for key, value in zip(DETECTION_OUTPUTS, net.forward(list(DETECTION_OUTPUTS)))}

    return [pytest.param(onnxruntime_run, id="onnxruntime"), pytest.param(openvino_run, id="openvino"),
            pytest.param(opencv_run, id="opencv")]


def _compare(config, boxes, scores, run, max_detections=None):
    """The ONNX post-processing of boxes [A, 4], scores [A, slots] equals TF's, bit for bit."""
    config = config.replace(max_total_detections=max_detections or config.max_total_detections)
    boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
    proto = onnx_postprocessing.graph(config, boxes.shape[0])
    onnx.checker.check_model(proto, full_check=True)
    ours = run(proto, {"boxes": boxes[None], "scores": scores[None]})
    ref = postprocessing.postprocess_image(tf.constant(boxes), tf.constant(scores), config)
    ref = {"detection_boxes": ref[0].numpy()[None], "detection_scores": ref[1].numpy()[None],
           "detection_classes": ref[2].numpy()[None] + 1.0, "num_detections": ref[3].numpy()[None]}
    for key in DETECTION_OUTPUTS:
        np.testing.assert_array_equal(ours[key], ref[key], err_msg=key)
    return ref


def _config(**changes):
    return SSDConfig(num_classes=2, depth_multiplier=0.25, image_height=128, image_width=128,
                     score_threshold=0.5, iou_threshold=0.5, **changes)


VARIANTS = [NMS_CLIP_BEFORE, NMS_CLIP_AFTER]


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_score_at_the_threshold_is_dropped(run, variant):
    # Disjoint boxes; class 1 at, just above and just below 0.5 (TF1 keeps > only; OpenVINO's
    # NMS alone would keep the one at it).
    boxes = [[0.0, 0.1 * i, 0.05, 0.1 * i + 0.05] for i in range(6)]
    above, below = np.nextafter(np.float32(0.5), np.float32(1)), np.nextafter(np.float32(0.5), np.float32(0))
    scores = [[0.0, s, 0.0] for s in (0.5, above, below, 0.5, 0.9, 0.5)]
    ref = _compare(_config(nms_variant=variant), boxes, scores, run)
    assert ref["num_detections"][0] == 2  # `above` and 0.9


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_an_iou_at_the_limit_keeps_both_boxes_and_one_above_suppresses(run, variant):
    # IoU of the first two is exactly 0.5 (areas 1 and 0.5, intersection 0.5): both kept;
    # the third overlaps the first by a little more than 0.5: suppressed.
    boxes = [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.5], [0.0, 0.0, 1.0, 0.5078125]]
    scores = [[0.0, 0.9, 0.0], [0.0, 0.8, 0.0], [0.0, 0.85, 0.0]]
    ref = _compare(_config(nms_variant=variant), boxes, scores, run)
    assert ref["num_detections"][0] == 2 and list(ref["detection_scores"][0, :2]) == [np.float32(0.9),
                                                                                      np.float32(0.8)]


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_boxes_the_clip_leaves_empty_are_dropped(run, variant):
    boxes = [[1.2, 0.1, 1.5, 0.3],    # below the image: empty once clipped
             [0.2, -0.5, 0.4, -0.1],  # left of it
             [0.3, 0.3, 0.3, 0.6],    # zero height
             [-0.2, -0.2, 0.5, 0.5],  # partly outside: clipped, kept
             [0.6, 0.6, 0.9, 0.9]]
    scores = [[0.0, 0.9 - 0.01 * i, 0.5 + 0.01 * i] for i in range(5)]  # no ties: the clip is what is tested
    ref = _compare(_config(nms_variant=variant), boxes, scores, run)
    assert ref["num_detections"][0] == 4  # two boxes, two classes


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_equal_scores_keep_tfs_order(run, variant):
    # Overlapping and disjoint boxes, every score equal: the lower box index wins NMS, and the
    # sort puts the lower class, then the lower box first.
    rng = np.random.default_rng(1)
    yx = rng.uniform(0.0, 0.8, (40, 2)).astype(np.float32)
    boxes = np.concatenate([yx, yx + 0.2], axis=1)
    scores = np.full([40, 3], 0.75, np.float32)
    scores[::3, 2] = 0.875
    ref = _compare(_config(nms_variant=variant, max_detections_per_class=8), boxes, scores, run, max_detections=12)
    assert ref["num_detections"][0] == 12


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_random_candidates_with_ties_caps_and_padding(run, variant):
    # Scores on a grid of eighths (many ties, many at the threshold), boxes partly outside the
    # image; per-class cap 5 of 200 anchors; 3 classes x 5 < 20 rows: padding past TF1's top k.
    rng = np.random.default_rng(2)
    yx = rng.uniform(-0.3, 1.0, (200, 2))
    boxes = np.concatenate([yx, yx + rng.uniform(0.0, 0.5, (200, 2))], axis=1)
    scores = np.round(rng.uniform(0, 1, (200, 4)) * 8) / 8
    config = SSDConfig(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128, nms_variant=variant,
                       score_threshold=0.375, max_detections_per_class=5)
    ref = _compare(config, boxes, scores, run, max_detections=20)
    assert ref["num_detections"][0] >= 10


@pytest.mark.parametrize("run", _runtimes())
def test_no_candidate_gives_only_padding(run):
    boxes = [[0.1, 0.1, 0.2, 0.2], [0.3, 0.3, 0.5, 0.5]]
    ref = _compare(_config(), boxes, [[0.9, 0.5, 0.1], [0.9, 0.2, 0.3]], run, max_detections=4)
    assert ref["num_detections"][0] == 0


@pytest.mark.parametrize("run", _runtimes())
@pytest.mark.parametrize("variant", VARIANTS)
def test_classes_the_first_pass_cannot_settle_go_through_all_their_boxes(run, variant):
    # Cap 3 a class, so the first NMS pass takes each class's best 12 of 150 anchors. Class 1: a
    # cluster of 60 nested boxes outscores its other boxes (its best 12 suppress one another: one
    # kept, the second pass decides). Class 2: disjoint boxes (settled by the first pass). Class 3:
    # 40 equal scores, cluster and disjoint boxes alike, so its 12th best ties across the cut.
    rng = np.random.default_rng(3)
    cluster = np.array([0.3, 0.3, 0.7, 0.7]) + rng.uniform(-0.02, 0.02, (60, 4))
    yx = np.stack(np.meshgrid(np.arange(10) * 0.1, np.arange(9) * 0.11, indexing="ij"), -1).reshape(-1, 2)
    disjoint = np.concatenate([yx, yx + 0.05], axis=1)  # 90 boxes apart from one another
    boxes = np.concatenate([cluster, disjoint]).astype(np.float32)
    scores = np.zeros([150, 4], np.float32)
    scores[:60, 1] = rng.uniform(0.9, 1.0, 60)
    scores[60:, 1] = rng.uniform(0.55, 0.85, 90)
    scores[60:, 2] = rng.uniform(0.55, 0.95, 90)
    scores[:, 3] = rng.uniform(0.2, 0.7, 150)
    scores[rng.choice(150, 40, replace=False), 3] = 0.75
    config = SSDConfig(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128, nms_variant=variant,
                       score_threshold=0.5, iou_threshold=0.5, max_detections_per_class=3)
    assert np.all(np.argsort(-scores[:, 1], kind="stable")[:12] < 60)  # class 1's best 12: the cluster
    proto = onnx_postprocessing.graph(config, 150)
    assert [n.op_type for n in proto.graph.node].count("NonMaxSuppression") == 2
    ref = _compare(config, boxes, scores, run, max_detections=9)
    assert ref["num_detections"][0] == 9 and np.sum(ref["detection_classes"] == 2.0) == 3  # class 1 (0-based)
