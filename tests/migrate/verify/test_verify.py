"""`python -m migrate verify`: faithful conversions pass, broken ones fail at the layer that is wrong.

Broken conversions are real converted directories edited the way a converter bug would
break them (box code channels permuted, one layer's batch norm lost), or a TF1 source with one
mid-network weight scaled (the zoo fixture's frozen graph with one weight constant scaled by
1.5, as make_zoo_fixture's `--perturb` scales it before freezing). A converted model of another
network (a class dropped, another input size, depth or anchors) is refused in one line before
either side runs.
"""

import glob
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import tensor_util

from tests.conftest import (DEPTHWISE, ZOO_2018, needs_shared, random_images, save_synthetic_model, warnings_in,
                            zoo_path)
from migrate.tf1.parity import DEFAULT_ATOL, MIXED_TOLERANCES, compare_detections, compare_tensor, match_detections
from migrate.verify import verification
from migrate.verify.report import format_report
from migrate.cli import main
from migrate.common import draw
from migrate.tf1 import op_allowlist
from migrate.tf1.sources import read_graph_def, read_meta_graph
from migrate.verify import measuring
from ssd_mobilenet import SSDMobileNetV1, detector
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

FE = "FeatureExtractor/MobilenetV1/"
PERTURBED = FE + "Conv2d_7_pointwise"


@pytest.fixture(scope="module")
def zoo(zoo_converted):
    """(TF1 fixture dir, its conversion) of the 2018 zoo graph, shared by the session."""
    return zoo_converted


@pytest.fixture(scope="module")
def perturbed(zoo_fixture, tmp_path_factory):
    """The zoo fixture's frozen graph with PERTURBED's weights scaled by 1.5 (what the fixture
    tool's `--perturb` does before it freezes; here on the frozen graph's constant, in this
    process), beside the fixture's pipeline.config: a TF1 source one mid-network layer off."""
    fx = zoo_fixture(ZOO_2018)
    graph_def = read_graph_def(os.path.join(fx, "frozen_inference_graph.pb"))
    (node,) = [n for n in graph_def.node if n.name == PERTURBED + "/weights" and n.op == "Const"]
    value = tensor_util.MakeNdarray(node.attr["value"].tensor)
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value * np.float32(1.5)))
    folder = tmp_path_factory.mktemp("verify_perturbed")
    (folder / "frozen_inference_graph.pb").write_bytes(graph_def.SerializeToString())
    shutil.copy(os.path.join(fx, "pipeline.config"), folder)
    return str(folder)


@pytest.fixture(scope="module")
def small_images(tmp_path_factory):
    """A folder of PNGs: two 200x240 (one batch of 2) and one 300x300; few pixels keep tests fast."""
    folder = tmp_path_factory.mktemp("verify_images")
    images = list(random_images(5, 2, 200, 240)) + list(random_images(6, 1, 300, 300))
    for i, image in enumerate(images):
        tf.io.write_file(str(folder / f"im{i}.png"), tf.io.encode_png(image))
    return str(folder)


@pytest.fixture(scope="module")
def one_image(tmp_path_factory):
    """A folder of one 300x300 PNG (small_images' third): enough for a broken conversion's first
    divergence, at about two thirds of small_images' time."""
    folder = tmp_path_factory.mktemp("verify_one_image")
    tf.io.write_file(str(folder / "im0.png"), tf.io.encode_png(random_images(6, 1, 300, 300)[0]))
    return str(folder)


def _edited_copy(converted, out, edit):
    """A copy of a converted directory whose Keras model went through `edit(model) -> model`."""
    model = edit(detector.load_model(converted))
    os.makedirs(out)
    detector.save(model, str(out))
    shutil.copy(os.path.join(converted, "conversion_report.json"), out)
    return str(out)


def _weights(model, suffix):
    return [v for v in model.weights if v.path.endswith(suffix)]


def _check_ok_before(report, name):
    names = [t["name"] for t in report.tensors]
    assert all(t["ok"] for t in report.tensors[:names.index(name)])


# ---- the comparison rules ----------------------------------------------------------------------

def _detections(boxes, scores, classes):
    pad = 5 - len(scores)
    return {"detection_boxes": np.array([boxes + [[0.0] * 4] * pad], np.float32),
            "detection_scores": np.array([scores + [0.0] * pad], np.float32),
            "detection_classes": np.array([classes + [1.0] * pad], np.float32),
            "num_detections": np.array([len(scores)], np.float32)}


def test_tied_detections_may_swap_but_classes_and_counts_are_exact():
    a, b, c = [0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.6, 0.9], [0.0, 0.0, 0.4, 0.4]
    tf1 = _detections([a, b, c], [0.9, 0.7, 0.7], [3.0, 5.0, 8.0])
    swapped = _detections([a, c, b], [0.9, 0.7 + 1e-7, 0.7], [3.0, 8.0, 5.0])
    result = compare_detections(swapped, tf1, 0, 1e-5, 1e-5)
    assert result["ok"] and result["ties_swapped"] == 2 and "another order" in result["note"]
    # No tolerance makes a wrong class or a missing detection pass.
    wrong_class = _detections([a, b, c], [0.9, 0.7, 0.7], [3.0, 5.0, 9.0])
    assert not compare_detections(wrong_class, tf1, 0, 1.0, 1.0)["ok"]
    one_less = _detections([a, b], [0.9, 0.7], [3.0, 5.0])
    result = compare_detections(one_less, tf1, 0, 1.0, 1.0)
    assert not result["ok"] and result["note"] == "3 detections in TF1, 2 in TF2"
    moved = _detections([a, b, [0.0, 0.0, 0.4, 0.41]], [0.9, 0.7, 0.7], [3.0, 5.0, 8.0])
    assert not compare_detections(moved, tf1, 0, 1e-5, 1e-5)["ok"]


def test_tensor_tolerance_scales_with_the_tensor_range():
    ref = np.array([6.0, 0.0001, 3.0], np.float32)
    # 3e-5 off on a near-zero element of a tensor whose range is 6: rounding, within 1e-5 + 6 * 1e-5.
    near = compare_tensor(ref + np.array([0, 3e-5, 0], np.float32), ref, 1e-5, 1e-5)
    assert near["ok"] and near["max_rel_err"] == pytest.approx(3e-5 / 6, rel=1e-3)
    assert not compare_tensor(ref + np.array([0, 1e-4, 0], np.float32), ref, 1e-5, 1e-5)["ok"]
    shape = compare_tensor(np.zeros((1, 10, 90)), np.zeros((1, 10, 91)), 1e-5, 1e-5)
    assert not shape["ok"] and "shape" in shape["note"]
    assert not compare_tensor(np.array([np.nan]), np.array([0.0]), 1.0, 1.0)["ok"]


# ---- faithful conversions pass ---------------------------------------------------------------

@needs_shared
@pytest.mark.slow
def test_zoo_conversion_passes_on_the_generated_set(zoo, tmp_path, capsys):
    fx, converted = zoo
    out = tmp_path / "report.json"
    # Only the converted directory: the source comes from its conversion_report.json. (The
    # measurement, a memory limit reaching both its processes, latency at batch 1 and 3: the
    # suite's one measured verify, tests/migrate/common/test_console.py's
    # test_verify_with_measurement_prints_only_the_projects_lines.)
    code = main(["verify", converted, "--json", str(out), "--batch", "3", "--no-measure"])
    printed = capsys.readouterr()
    assert code == 0, printed.out
    report = json.loads(out.read_text())
    assert report["passed"] and report["first_divergence"] is None
    assert report["tf1"]["measured"] is False and report["tf2"]["measured"] is False
    assert report["src"] == os.path.abspath(fx)
    model = detector.load_model(converted)
    # The preprocessed image, every feature extractor layer, both heads and the decoded boxes.
    assert [t["name"] for t in report["tensors"]] == (
        ["Preprocessor"] + [FE + n for n in model.endpoint_names] + ["concat", "concat_1", "Postprocessor/Decode"])
    assert all(t["ok"] for t in report["tensors"])
    # The generated set: several sizes, batch 1 and 3.
    assert {name.split("#")[0] for name in report["images"]} == {
        "generated:300x300", "generated:257x311", "generated:480x640"}
    assert len(report["detections"]) == 5 and all(d["ok"] for d in report["detections"])
    assert sum(d["num_tf1"] for d in report["detections"]) > 0
    assert report["tf2"]["mode"] == "function" and report["tolerances"]["atol"] == DEFAULT_ATOL
    assert report["versions"]["tensorflow"] == tf.__version__
    assert "PASSED" in printed.out
    # The table says the bound as it is applied and the largest error beside the bound at its own
    # tensor, so that a pass reads as one (the Detector's largest error, ~1.1e-5, is over atol alone).
    n = len(report["tensors"])
    assert f"tensors      {n}/{n} within atol + rtol * max|TF1| (atol 1e-05, rtol 1e-05)" in printed.out
    worst = max(report["tensors"], key=lambda t: t["max_abs_err"])
    (error, stage, allowed), = re.findall(r"largest error (\S+) at\s+(\S+)\s+\(allowed there (\S+)\)", printed.out)
    assert stage == worst["name"] and float(error) == pytest.approx(worst["max_abs_err"], rel=1e-2)
    assert float(allowed) == pytest.approx(worst["allowed"], rel=1e-2) and float(error) <= float(allowed)


def _side_by_side_shape(height: int, width: int) -> tuple:
    """The shape of a `--png` picture of an image of that size: both sides' drawings, titled."""
    blank = np.zeros((height, width, 3), np.uint8)
    return draw.side_by_side(blank, blank, "TF1 graph", "TF2").shape


@needs_shared
@pytest.mark.slow
def test_custom_checkpoint_with_meta_graph_passes(zoo_dir_converted, tmp_path, small_images):
    fx, converted = zoo_dir_converted(DEPTHWISE)  # the session's `convert DIR` (test_convert reads it too)
    # Naming the .meta file: the graph comes from it, its variables from the checkpoint.
    png = tmp_path / "png"
    report = verification.verify(os.path.join(fx, "model.ckpt.meta"), converted, images=[small_images], batch=2,
                                 mode="eager", measure=False, png_dir=str(png))
    assert report.passed, format_report(report)
    assert "model.ckpt.meta" in report.notes[0]
    assert len(report.images) == 3 and all(d["ok"] for d in report.detections)
    # Eager Keras against the graph as written: bit-identical.
    assert all(t["max_abs_err"] == 0.0 for t in report.tensors)
    drawn = sorted(png.iterdir())
    assert len(drawn) == 3
    # Each image twice, TF1 graph and TF2 side by side, under a title strip.
    shapes = {tuple(tf.io.decode_png(tf.io.read_file(str(p))).shape) for p in drawn}
    assert shapes == {_side_by_side_shape(200, 240), _side_by_side_shape(300, 300)}


# (A checkpoint without a graph is verified against the graph the TF1 builder makes of its config
# and weights: tests/migrate/convert/test_odapi_exports.py::test_a_checkpoint_alone_converts_and_verifies_through_the_tf1_builder;
# the builder's plain SSD graph against the zoo graphs, stage by stage: tests/migrate/tf1/test_builder.py.)


@needs_shared
@pytest.mark.slow
def test_xla_mode_compares_the_network_after_tf_preprocessing(zoo, tmp_path):
    # XLA's own legacy resize differs from TensorFlow's (by up to 1.9 at 480x640); the Detector
    # keeps preprocessing outside XLA and the stage comparison must compile what the Detector does.
    fx, converted = zoo
    tf.io.write_file(str(tmp_path / "big.png"), tf.io.encode_png(random_images(7, 1, 480, 640)[0]))
    report = verification.verify(fx, converted, images=[str(tmp_path)], mode="xla", measure=False)
    assert report.passed, format_report(report)


# ---- broken conversions fail, at the right place ------------------------------------------------

@needs_shared
def test_perturbed_mid_network_layer_is_named(zoo, perturbed, tmp_path, one_image, capsys):
    _, converted = zoo
    out = tmp_path / "report.json"
    code = main(["verify", perturbed, converted, "--images", one_image, "--mode", "eager", "--no-measure",
                 "--json", str(out)])
    assert code == 1
    assert f"FIRST DIVERGENCE  {PERTURBED}" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert not report["passed"] and report["first_divergence"]["name"] == PERTURBED
    assert report["first_divergence"]["max_abs_err"] > 1e-2
    assert report["tf1"]["measured"] is False


@needs_shared
def test_swapped_box_coordinates_are_caught(zoo, tmp_path, one_image):
    def swap_ty_tx(model):
        # Each anchor's 4 box code channels come out as [tx, ty, th, tw].
        for var in _weights(model, "BoxEncodingPredictor/weights") + _weights(model, "BoxEncodingPredictor/biases"):
            value = var.numpy()
            codes = value.reshape(value.shape[:-1] + (-1, 4))
            var.assign(codes[..., [1, 0, 2, 3]].reshape(value.shape))
        return model
    broken = _edited_copy(zoo[1], tmp_path / "swapped", swap_ty_tx)
    report = verification.verify(zoo[0], broken, images=[one_image], mode="eager", measure=False)
    assert not report.passed and report.first_divergence["name"] == "concat"
    _check_ok_before(report, "concat")
    assert not all(d["ok"] for d in report.detections)


NO_BN = FE + "Conv2d_5_pointwise"


@pytest.fixture(scope="module")
def no_bn(zoo, tmp_path_factory):
    """The zoo conversion with Conv2d_5_pointwise's batch norm lost (identity statistics)."""
    def drop_bn(model):
        for leaf, value in (("gamma", 1.0), ("beta", 0.0), ("moving_mean", 0.0), ("moving_variance", 1.0)):
            (var,) = _weights(model, f"{NO_BN.split('/')[-1]}/BatchNorm/{leaf}")
            var.assign(np.full(var.shape, value, np.float32))
        return model
    return _edited_copy(zoo[1], tmp_path_factory.mktemp("verify_no_bn") / "no_bn", drop_bn)


@needs_shared
@pytest.mark.slow
def test_dropped_batch_norm_is_caught(zoo, no_bn, one_image):
    report = verification.verify(zoo[0], no_bn, images=[one_image], mode="eager", measure=False)
    assert not report.passed and report.first_divergence["name"] == NO_BN
    _check_ok_before(report, NO_BN)


@needs_shared
def test_wrong_class_count_is_caught(zoo, tmp_path, one_image):
    def drop_last_class(model):
        fewer = SSDMobileNetV1(model.config.replace(num_classes=model.config.num_classes - 1))
        old = {v.path: v.numpy() for v in model.weights}
        for var in fewer.weights:
            value = old[var.path]
            if value.shape != tuple(var.shape):  # ClassPredictor: [..., anchors * 91] -> [..., anchors * 90]
                slots = value.reshape(value.shape[:-1] + (-1, model.config.num_class_slots))
                value = slots[..., :-1].reshape(tuple(var.shape))
            var.assign(value)
        return fewer
    broken = _edited_copy(zoo[1], tmp_path / "89_classes", drop_last_class)
    # Another class count is another network: refused before either side runs, not compared.
    with pytest.raises(InputError, match="classes 89, TF1 90: not a conversion of this model"):
        verification.verify(zoo[0], broken, images=[one_image], mode="eager", measure=False)


def _checkpoint_alone(tf1_dir, folder) -> str:
    """The checkpoint of a TF1 model directory copied alone into `folder`: no .meta, graph or
    pipeline.config beside it."""
    folder.mkdir()
    for name in ("checkpoint", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
        shutil.copy(os.path.join(tf1_dir, name), folder)
    return str(folder)


@pytest.mark.slow  # 18 s on a loaded 2-core machine: a conversion, verify up to its TF1 config
def test_a_conversion_at_another_input_size_is_refused_in_one_line(small_model, tmp_path, capsys):
    # A checkpoint converted alone takes the zoo's 300x300; its TF1 graph resizes to 128x128.
    src, _ = small_model("two_classes").pair
    out = tmp_path / "at_300"
    assert main(["convert", _checkpoint_alone(src, tmp_path / "ckpt"), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    json_out = tmp_path / "report.json"
    code = main(["verify", src, str(out), "--no-measure", "--quiet", "--json", str(json_out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "image size 300x300, TF1 128x128" in err and "convert again with --image-size 128 128" in err
    assert not json_out.exists()


@pytest.mark.slow  # 13 s on a loaded 2-core machine: a converted model written, verify up to its TF1 config
def test_another_network_is_refused_in_one_line_naming_each_difference(small_model, tmp_path, capsys):
    # small_model("two_classes")'s TF1 model: 2 classes, depth 0.25, the zoo's anchors (3 on the first layer, then 6).
    src, converted = small_model("two_classes").pair
    other = tmp_path / "other"
    save_synthetic_model(str(other), detector.load_model(converted).config.replace(
        num_classes=3, depth_multiplier=0.5, aspect_ratios=(1.0, 2.0, 0.5)))
    code = main(["verify", src, str(other), "--no-measure", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert ("depth multiplier 0.5, TF1 0.25; classes 3, TF1 2; anchors per location [3 4 4 4 4 4], TF1 [3 6 6 6 6 6]: "
            "not a conversion of this model") in err


# ---- safety: ops outside the SSD inference set are not run ----------------------------------------

@needs_shared
@pytest.mark.parametrize("meta", sorted(glob.glob(zoo_path("*", "model.ckpt.meta"))))
def test_zoo_inference_graphs_use_only_allowed_ops(meta):
    graph_def = read_meta_graph(meta).graph_def
    # The meta graph as saved holds training and checkpoint ops; none of them is on the
    # path to the detections, so none is run.
    assert {"SaveV2", "RestoreV2", "Assign"} <= set(op_allowlist.disallowed_ops(graph_def))
    needed = tf.compat.v1.graph_util.extract_sub_graph(graph_def, list(DETECTION_OUTPUTS))
    assert op_allowlist.disallowed_ops(needed) == ["VariableV2"]  # replaced by constants before running


def _graph_writing_a_file(fx, directory, evidence):
    """The fixture's frozen graph plus a `WriteFile` that `num_detections` depends on."""
    graph_def = read_graph_def(os.path.join(fx, "frozen_inference_graph.pb"))
    for name, value in (("evil/filename", evidence.encode()), ("evil/contents", b"ran")):
        node = graph_def.node.add(name=name, op="Const")
        node.attr["dtype"].CopyFrom(attr_value_pb2.AttrValue(type=tf.string.as_datatype_enum))
        node.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=tensor_util.make_tensor_proto(value)))
    graph_def.node.add(name="evil/write", op="WriteFile", input=["evil/filename", "evil/contents"])
    next(n for n in graph_def.node if n.name == "num_detections").input.append("^evil/write")
    os.makedirs(directory)
    with open(os.path.join(directory, "frozen_inference_graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    return str(directory)


@needs_shared
@pytest.mark.slow
def test_unknown_ops_are_refused_unless_allowed(zoo, tmp_path, one_image, capsys):
    fx, converted = zoo
    evidence = tmp_path / "written_by_the_graph.txt"
    src = _graph_writing_a_file(fx, tmp_path / "evil", str(evidence))
    json_out = tmp_path / "report.json"
    args = ["verify", src, converted, "--images", one_image, "--mode", "eager", "--no-measure", "--quiet"]
    assert main(args + ["--json", str(json_out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "WriteFile" in err and "--allow-ops WriteFile" in err
    assert not evidence.exists() and not json_out.exists()
    assert main(args + ["--allow-ops", "WriteFile"]) == 0
    assert evidence.read_text() == "ran"


# ---- bad input --------------------------------------------------------------------------------

def _bad(capsys, args, expect):
    code = main(["verify", *args, "--no-measure", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and expect in err


@needs_shared
def test_bad_input(zoo, tmp_path, capsys, small_images):
    fx, converted = zoo
    _bad(capsys, [fx, str(tmp_path / "nope")], "no such folder (`python -m migrate convert SRC` writes it)")
    _bad(capsys, [str(tmp_path / "missing_src"), converted], "no such file")
    (tmp_path / "not_converted").mkdir()
    _bad(capsys, [fx, str(tmp_path / "not_converted")], "no model_config.json")
    existing = tmp_path / "exists.json"
    existing.write_text("{}")
    _bad(capsys, [fx, converted, "--json", str(existing)], "--force")
    assert existing.read_text() == "{}"
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    _bad(capsys, [fx, converted, "--images", str(corrupt)], "corrupt.png")
    _bad(capsys, [fx, converted, "--memory-growth", "--memory-limit", "100"], "exclude each other")
    _bad(capsys, [fx, converted, "--memory-limit", "0"], "--memory-limit 0")
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "old").write_text("")
    _bad(capsys, [fx, converted, "--trace", str(trace)], "--force")


@pytest.mark.slow
def test_an_unreadable_image_is_skipped_with_a_warning_and_counted(small_model, tmp_path, capsys):
    """As `predict` does: a broken JPEG among `--images` is a warning, the others are compared, and
    the report says how many were; with no image left, one error line."""
    src, converted = small_model("two_classes").pair
    folder = tmp_path / "images"
    folder.mkdir()
    for i, image in enumerate(random_images(7, 2, 96, 120)):
        (folder / f"im{i}.jpg").write_bytes(tf.io.encode_jpeg(image).numpy())
    broken = folder / "broken.jpg"
    broken.write_bytes((folder / "im0.jpg").read_bytes()[:300])
    report = tmp_path / "report.json"
    code = main(["verify", src, converted, "--images", str(folder), "--no-measure", "--quiet", "--json", str(report)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert warnings_in(captured.err) == [line for line in captured.err.splitlines()
                                         if line.startswith(f"warning: {broken}: cannot read image")] != []
    assert "images       2 compared, 1 unreadable (skipped)" in captured.out.splitlines()
    written = json.loads(report.read_text())
    assert (written["skipped"], len(written["images"]), written["passed"]) == ([str(broken)], 2, True)
    # Nothing left to compare: one error line, nothing written.
    code = main(["verify", src, converted, "--images", str(broken), "--no-measure", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {broken}: cannot read image"), err


# ---- mixed precision: looser tensors, detections matched by class and IoU ------------------------

def test_mixed_precision_detection_matching():
    a, b, c = [0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.6, 0.9], [0.6, 0.0, 0.9, 0.3]
    tf1 = _detections([a, b, c], [0.9, 0.8, 0.33], [3.0, 5.0, 8.0])
    # Boxes and scores moved by rounding, another order: all matched.
    moved = _detections([b, a, [0.6, 0.0, 0.9, 0.31]], [0.79, 0.91, 0.34], [5.0, 3.0, 8.0])
    result = match_detections(moved, tf1, 0, 0.3, 0.05, 100, 0.6)
    assert result["ok"] and result["matched"] == 3 and result["max_score_err"] == pytest.approx(0.01, abs=1e-6)
    # A confident detection without a counterpart fails; one near the threshold (0.33 < 0.3 + 0.05) does not.
    assert not match_detections(_detections([b, c], [0.8, 0.33], [5.0, 8.0]), tf1, 0, 0.3, 0.05, 100, 0.6)["ok"]
    result = match_detections(_detections([a, b], [0.9, 0.8], [3.0, 5.0]), tf1, 0, 0.3, 0.05, 100, 0.6)
    assert result["ok"] and [d["index"] for d in result["unmatched_tf1"]] == [2]
    # Same box, wrong class: unmatched on both sides.
    wrong = match_detections(_detections([a, b, c], [0.9, 0.8, 0.33], [3.0, 6.0, 8.0]), tf1, 0, 0.3, 0.05, 100, 0.6)
    assert not wrong["ok"] and wrong["matched"] == 2 and wrong["unmatched_tf2"][0]["class"] == 6
    # NMS flip: TF2 keeps a box that TF1's higher-scoring box of its class overlaps at IoU 0.58,
    # near the NMS threshold 0.6; a box overlapping it at 0.3 is a real extra detection.
    shift = 0.4 * (1 - 0.58) / (1 + 0.58)  # two 0.4 x 0.4 boxes this far apart overlap at IoU 0.58
    near = [0.1, 0.1 + shift, 0.5, 0.5 + shift]
    flipped = match_detections(_detections([a, b, c, near], [0.9, 0.8, 0.33, 0.85], [3.0, 5.0, 8.0, 3.0]),
                               tf1, 0, 0.3, 0.05, 100, 0.6)
    (extra,) = flipped["unmatched_tf2"]
    assert flipped["ok"] and extra["nms_flip"] and extra["suppressor_iou"] == pytest.approx(0.58, abs=1e-3)
    far = [0.1, 0.3, 0.5, 0.7]
    assert not match_detections(_detections([a, b, c, far], [0.9, 0.8, 0.33, 0.85], [3.0, 5.0, 8.0, 3.0]),
                                tf1, 0, 0.3, 0.05, 100, 0.6)["ok"]


@needs_shared
@pytest.mark.slow  # 8.0 s in the fresh-clone run (b1fafbe), over the marker's ~5 s
def test_mixed_bfloat16_faithful_conversion_passes_with_a_trace(zoo, small_images, tmp_path, capsys,
                                                               without_reduced_precision_units):
    fx, converted = zoo
    out, trace = tmp_path / "report.json", tmp_path / "trace"
    # As on a CPU without bfloat16 units (an AVX-512 Xeon of 2017) and no GPU: it still runs and passes,
    # and says once that the precision is emulated there.
    code = main(["verify", fx, converted, "--images", small_images, "--precision", "mixed_bfloat16", "--no-measure",
                 "--json", str(out), "--trace", str(trace)])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, printed
    warned = warnings_in(captured.err)
    assert len(warned) == 1 and warned[0].startswith(without_reduced_precision_units("mixed_bfloat16")), warned
    assert "mixed_bfloat16" in printed and "NMS flips" in printed
    report = json.loads(out.read_text())
    assert report["passed"] and report["precision"] == "mixed_bfloat16"
    tolerances = report["tolerances"]
    assert tolerances["criterion"] == "mixed_precision"
    assert tolerances["rtol"] == MIXED_TOLERANCES["mixed_bfloat16"]["rtol"]
    # Every convolution output carries bfloat16 rounding, far beyond the float32 tolerance
    # (the preprocessed image is computed in float32 on both sides).
    convs = [t for t in report["tensors"] if t["name"].startswith(FE)]
    assert all(t["ok"] and t["max_rel_err"] > 1e-3 for t in convs)
    assert report["tensors"][0]["name"] == "Preprocessor" and report["tensors"][0]["max_abs_err"] == 0.0
    dets = report["detections"]
    assert len(dets) == 3 and all(d["ok"] for d in dets)
    assert sum(d["matched"] for d in dets) >= 0.9 * sum(d["num_tf1"] for d in dets) > 0
    assert all(d["min_iou"] >= 0.5 for d in dets)
    profiles = glob.glob(str(trace / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert profiles and os.path.getsize(profiles[0]) > 0
    assert report["trace_dir"] == str(trace)


@needs_shared
@pytest.mark.slow
def test_mixed_bfloat16_still_names_the_broken_layer(zoo, perturbed, no_bn, one_image):
    fx, converted = zoo
    rtol = MIXED_TOLERANCES["mixed_bfloat16"]["rtol"]
    for src, model, layer in ((perturbed, converted, PERTURBED), (fx, no_bn, NO_BN)):
        report = verification.verify(src, model, images=[one_image], measure=False, precision="mixed_bfloat16")
        assert not report.passed and report.first_divergence["name"] == layer, format_report(report)
        # Far outside the bfloat16 tolerance, not at its edge.
        assert report.first_divergence["max_rel_err"] > 4 * rtol
        _check_ok_before(report, layer)


# ---- memory levers reach the measured processes -------------------------------------------------

@needs_shared
@pytest.mark.slow
def test_too_small_a_memory_limit_fails_in_one_line(zoo, tmp_path):
    fx, converted = zoo
    # (A limit that fits is applied in both processes: tests/migrate/common/test_console.py::
    # test_verify_with_measurement_prints_only_the_projects_lines.)
    # Far too small a limit: the TF2 worker fails at its first allocation beyond it (on a CPU,
    # TensorFlow's BFC allocator cap), reported as one line. (The TF1 worker, measured first by
    # `verify`, waits out the allocator's retries for minutes before failing, so it is not used here.)
    images_npz = tmp_path / "images.npz"
    np.savez(images_npz, batch_000=random_images(1, 1, 200, 240))
    with pytest.raises(InputError) as failure:
        measuring._measure_one("migrate.verify.sides:tf2_runner", {"converted": converted},
                               str(images_npz), {"memory_growth": False, "memory_limit_mb": 1}, 0, 1, "TF2")
    message = str(failure.value)
    assert message.startswith("TF2 measurement failed under --memory-limit 1 MiB") and "OOM" in message
    assert "\n" not in message


@needs_shared
def test_png_folder_is_replaced_whole_with_force(zoo, one_image, tmp_path):
    fx, converted = zoo
    drawn = tmp_path / "drawn"
    drawn.mkdir()
    (drawn / "old.png").write_bytes(b"stale")
    # (One picture per image at several sizes: test_custom_checkpoint_with_meta_graph_passes.)
    report = verification.verify(fx, converted, images=[one_image], mode="eager", measure=False,
                                 png_dir=str(drawn), force=True)
    assert report.passed
    names = sorted(os.listdir(drawn))
    assert "old.png" not in names and len(names) == 1 and all(n.endswith(".png") for n in names)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


# ---- a TFLite file as the TF2 side (`--tflite`) -------------------------------------------------

TFLITE_WARNING = "ignore:.*tf.lite.Interpreter is deprecated:UserWarning"


@pytest.fixture(scope="module")
def zoo_tflite(zoo, tmp_path_factory):
    """The zoo conversion's `.tflite` files, exported once: float32 per-class (the default of
    `migrate export`), the regular-NMS custom op taking the float32 input (the image scaled to
    [-1, 1], as TF1's TFLite graphs took it), and int8 calibrated on 2 generated images."""
    from ssd_mobilenet.formats import network
    from ssd_mobilenet.formats.preprocess import FLOAT32
    from ssd_mobilenet.formats.tflite import file_format
    from ssd_mobilenet.formats.tflite import writer as tflite
    model = detector.load_model(zoo[1])
    folder = tmp_path_factory.mktemp("verify_tflite")
    files = {}
    regular = {"nms": file_format.NMS_REGULAR, "input_type": FLOAT32}
    for name, options in (("per-class", {}), ("regular", regular),
                          ("int8", {"representative_images": network.generated_images(model.config, 2)})):
        files[name] = str(folder / f"{name}.tflite")
        with open(files[name], "wb") as f:
            f.write(tflite.convert(model, **options))
    return files


@needs_shared
@pytest.mark.filterwarnings(TFLITE_WARNING)
@pytest.mark.slow
def test_tflite_per_class_file_reproduces_the_tf1_detections(zoo, zoo_tflite, tmp_path, capsys):
    """The float32 per-class file of the 2018 zoo conversion on the generated verify set (6 images
    of 3 sizes, each fed at its own size: the file resizes it as the TF1 graph does): counts and
    classes exact, boxes and scores within 1e-5."""
    fx, converted = zoo
    out, png = tmp_path / "report.json", tmp_path / "png"
    code = main(["verify", converted, "--tflite", zoo_tflite["per-class"], "--threads", "1", "--no-measure",
                 "--json", str(out), "--png", str(png)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "per-class NMS, uint8 input of any size, resized to 300x300 inside, float32" in printed
    assert "1 thread" in printed
    report = json.loads(out.read_text())
    assert report["passed"] and report["mode"] == "tflite" and report["src"] == os.path.abspath(fx)
    info = report["tflite"]
    assert info["file"] == zoo_tflite["per-class"] and info["threads"] == 1
    assert (info["nms"], info["input_type"], info["int8"], info["input_size"]) == ("per-class", "uint8", False,
                                                                                  [300, 300])
    assert report["tolerances"]["criterion"] == "exact" and report["tolerances"]["atol"] == DEFAULT_ATOL
    dets = report["detections"]
    assert len(dets) == 6 and all(d["ok"] and d["classes_equal"] and d["num_tf1"] == d["num_tf2"] for d in dets)
    assert sum(d["num_tf1"] for d in dets) > 0
    assert max(d["max_box_err"] for d in dets) <= 1e-5 and max(d["max_score_err"] for d in dets) <= 1e-5
    # Drawn on the photos both sides got, at their own sizes.
    drawn = sorted(png.iterdir())
    assert len(drawn) == 6 and {tuple(tf.io.decode_png(tf.io.read_file(str(p))).shape) for p in drawn} == {
        _side_by_side_shape(h, w) for h, w in ((300, 300), (257, 311), (480, 640))}


@needs_shared
@pytest.mark.filterwarnings(TFLITE_WARNING)
@pytest.mark.slow  # a share of zoo_tflite (25 s in the fast tier of 82cbcaa), as every case that reads its files
@pytest.mark.parametrize("name", ["regular", "int8"])
def test_tflite_custom_op_and_int8_files_report_their_agreement(zoo, zoo_tflite, small_images, name):
    """Files whose detections differ from the graph's by design are matched by class and IoU;
    the rates are printed (pytest -s) and each image must reach `AGREEMENT_MIN_RATE`."""
    from migrate.verify import tflite_file
    fx, converted = zoo
    report = verification.verify(fx, converted, images=[small_images], tflite=zoo_tflite[name], threads=2,
                                 measure=False)
    printed = format_report(report)
    print(printed)
    assert report.passed, printed
    info = report.tflite
    assert info["nms"] == ("regular" if name == "regular" else "per-class") and info["int8"] == (name == "int8")
    assert info["input_type"] == ("float32" if name == "regular" else "uint8")
    assert report.precision == ("int8" if name == "int8" else "float32") and info["threads"] == 2
    assert report.tolerances["criterion"] == "agreement" and "agreement" in printed
    agreement = info["agreement"]
    # Synthetic zoo weights: every TF1 detection scores >= 0.5, so all 300 are matched for.
    assert agreement["reference"] == 300 == sum(d["reference"] for d in report.detections)
    assert agreement["matched"] == sum(d["matched"] for d in report.detections)
    assert all(tflite_file.AGREEMENT_MIN_RATE <= d["rate"] <= 1.0 and d["ok"] for d in report.detections)
    # Not the same detections as the graph's, but the same objects where matched.
    assert agreement["rate"] < 1.0 and agreement["mean_iou"] > 0.9
    # A tolerance does not apply to a file judged by agreement.
    with pytest.raises(InputError, match="agreement"):
        verification.verify(fx, converted, images=[small_images], tflite=zoo_tflite[name], atol=1e-3, measure=False)


@needs_shared
@pytest.mark.filterwarnings(TFLITE_WARNING)
def test_tflite_bad_input(zoo, tmp_path, capsys):
    # (Without zoo_tflite's files: the options are refused before the file is read, and a file
    # judged by agreement refuses --atol in test_tflite_custom_op_and_int8_files_report_their_agreement.)
    fx, converted = zoo
    report = tmp_path / "report.json"
    common = ["--json", str(report)]
    _bad(capsys, [converted, "--tflite", str(tmp_path / "none.tflite"), *common], "none.tflite: no such file")
    garbage = tmp_path / "garbage.tflite"
    garbage.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(range(256)) * 8)
    _bad(capsys, [converted, "--tflite", str(garbage), *common], "garbage.tflite: the LiteRT interpreter cannot")
    not_tflite = tmp_path / "graph.tflite"
    shutil.copy(os.path.join(fx, "frozen_inference_graph.pb"), not_tflite)
    _bad(capsys, [converted, "--tflite", str(not_tflite), *common], "graph.tflite: not a TFLite file")
    # Real TFLite files of a small function: the export's signature at 128x128 (against the
    # converted model's 300x300), and another signature.
    def tiny_file(name, input_name):
        def detections(image):
            level = tf.reduce_mean(tf.cast(image, tf.float32))
            return {"detection_boxes": tf.fill([1, 1, 4], level), "detection_scores": tf.fill([1, 1], level),
                    "detection_classes": tf.ones([1, 1]), "num_detections": tf.ones([1])}
        function = tf.function(lambda **kw: detections(kw[input_name])).get_concrete_function(
            **{input_name: tf.TensorSpec([1, 128, 128, 3], tf.uint8, name=input_name)})
        path = tmp_path / name
        path.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module()).convert())
        return str(path)
    per_class = tiny_file("small.tflite", "input_tensor")
    _bad(capsys, [converted, "--tflite", per_class, *common],
         "small.tflite: takes 128x128 images, the converted model 300x300")
    # A real file cut short: its flatbuffer ends inside its tables.
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(open(per_class, "rb").read()[:os.path.getsize(per_class) // 2])
    _bad(capsys, [converted, "--tflite", str(truncated), *common], "truncated.tflite: the LiteRT interpreter cannot")
    _bad(capsys, [converted, "--tflite", tiny_file("other.tflite", "pixels"), *common],
         "other.tflite: no serving_default signature as `migrate export` writes it")
    for flags, words in ((["--mode", "eager"], "--mode eager: does not apply with --tflite"),
                         (["--precision", "mixed_bfloat16"], "--precision mixed_bfloat16: does not apply"),
                         (["--batch", "2"], "--batch 2: does not apply"),
                         (["--memory-limit", "512"], "--memory-limit 512: does not apply"),
                         (["--threads", "0"], "--threads 0: must be at least 1")):
        _bad(capsys, [converted, "--tflite", per_class, *flags, *common], words)
    _bad(capsys, [converted, "--threads", "2", *common], "--threads 2: for a --tflite or --onnx file")
    assert not report.exists()


@needs_shared
@pytest.mark.filterwarnings(TFLITE_WARNING)
@pytest.mark.slow  # zoo_tflite
def test_tflite_file_of_other_weights_fails_at_the_detections(zoo, perturbed, zoo_tflite, one_image):
    """The zoo file against the TF1 graph with Conv2d_7_pointwise's weights scaled (`perturbed`):
    same model, same size, other weights; a file has no stages, so the mismatch is named at its
    detections."""
    report = verification.verify(perturbed, zoo[1], images=[one_image], tflite=zoo_tflite["per-class"], measure=False)
    assert not report.passed and report.first_divergence["name"] == "detections of the TFLite file"
    assert "without a TF2 counterpart" in report.first_divergence["note"]
    assert not any(d["ok"] for d in report.detections)
    assert "FIRST DIVERGENCE  detections of the TFLite file" in format_report(report)


@needs_shared
@pytest.mark.filterwarnings(TFLITE_WARNING)
@pytest.mark.slow  # zoo_tflite
def test_tflite_side_is_measured_in_a_fresh_process_without_tensorflow(zoo_tflite):
    """The file's side of `verify --tflite`'s measurement (the TF1 side's is the other modes'), as
    bench measures its file sides: latency at batch 1 and the peak RSS of a process that holds
    LiteRT and the file but never imports TensorFlow (the file's footprint, bench's figure); no
    allocator figures (the interpreter's arena is not TensorFlow's)."""
    result = measuring._measure_tflite_side(zoo_tflite["per-class"], 1, [random_images(3, 1, 300, 300)], 0, 2)
    assert result["tensorflow_imported"] is False and result["runtime"].startswith("LiteRT ")
    summary = measuring._side_summary(result, "tflite")
    assert summary["measured"] and summary["device"] == "CPU (TFLite)" and summary["peak_rss_bytes"] > 0
    assert summary["peak_memory_bytes"] is None and summary["transient_peak_bytes"] is None
    latency = summary["latency_ms"]["batch_1"]
    assert latency["image_size"] == [300, 300] and 0 < latency["median"] <= latency["p90"]
