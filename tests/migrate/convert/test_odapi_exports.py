"""SSD MobileNet v1 FPN and PPN, from exports written by the OD API's own exporter
(../shared/zoo/odapi_exports: `model_builder` + `exporter.export_inference_graph`, TF1 graph mode, seeded
synthetic weights; a plain SSD export beside them as a control).

Every form a user has converts to the same network (checkpoint with its meta graph, frozen graph,
TF1 SavedModel; with and without pipeline.config), and `convert`'s check holds it to the export's
frozen graph stage by stage. Measured: every stage (the preprocessed image, each MobileNet, FPN
and PPN layer, box encodings, class logits, decoded boxes) 0.0 from the frozen graph run with
Grappler off, anchors bit for bit; the SavedModel's detections against the export's reference
outputs (TF 2.15.1, Grappler on) counts and classes equal, boxes within 2.4e-7, scores 1.0e-6.
Asserted at the project's tolerances: 1e-5 on tensors, 1e-4 on detections. `train` takes the
conversions with the exports' own pipeline.config.
"""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import ODAPI_EXPORTS, needs_shared, run_cli
from migrate.verify import verification
from migrate.verify.report import format_report
from migrate.tf1 import assign, config_inference, name_map, sources
from migrate.tf1.graph_anchors import graph_anchors
from ssd_mobilenet import SSDMobileNetV1, detector
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.feature_extractors import feature_map_shapes

EXPORTS = ODAPI_EXPORTS
FPN, PPN, CONTROL = "fpn_small", "ppn_small", "control_small"
ATOL = 1e-5
DETECTION_ATOL = 1e-4
# Fields only training reads: a graph does not show them (its ClassPredictor bias is trained).
TRAINING_ONLY = ("class_prediction_bias_init", "box_predictor_use_dropout", "dropout_keep_probability")
# Each source form: the export's files it holds.
FORMS = {
    "checkpoint_meta": ["checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index", "model.ckpt.meta"],
    "frozen_graph": ["frozen_inference_graph.pb"],
    "saved_model": ["saved_model"],
}

pytestmark = needs_shared


def export(name: str) -> str:
    return os.path.join(EXPORTS, name)


def _copy(name, files, dst, config=True):
    os.makedirs(dst)
    for f in files + (["pipeline.config"] if config else []):
        (shutil.copytree if os.path.isdir(export(name) + "/" + f) else shutil.copy)(
            os.path.join(export(name), f), os.path.join(dst, f))
    return str(dst)


def _report(converted) -> dict:
    with open(os.path.join(converted, "conversion_report.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.parametrize("name, stages", [(FPN, 38), (PPN, 32)])
def test_export_converts_and_its_check_holds_every_stage(odapi_converted, name, stages):
    """The check compared every stage on generated images at the graph's size and at 257x311, and
    post-processing on crafted values; the SavedModel reproduces the export's own reference run."""
    converted = odapi_converted(name)
    check = _report(converted)["check"]
    assert check["ran"] and check["passed"] and len(check["tensors"]) == stages
    names = [t["name"] for t in check["tensors"]]
    for t in check["tensors"]:
        assert t["max_abs_err"] <= ATOL, t
    if name == FPN:
        for scope in ("fpn/top_down/projection_3", "fpn/top_down/smoothing_1", "fpn/bottom_up_Conv2d_15"):
            assert f"FeatureExtractor/MobilenetV1/{scope}" in names
    else:
        assert "FeatureExtractor/MobilenetV1/MaxPool2d_4_2x2" in names
        assert not any("Conv2d_12" in n or "Conv2d_13" in n for n in names)
    assert names[-3:] == ["concat", "concat_1", "Postprocessor/Decode"]
    serve = tf.saved_model.load(os.path.join(converted, "saved_model")).signatures["serving_default"]
    images = np.load(os.path.join(export(name), "inputs.npz"))["images"]
    ref = np.load(os.path.join(export(name), "reference.npz"))
    got = {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    np.testing.assert_array_equal(got["num_detections"], ref["num_detections"])
    np.testing.assert_array_equal(got["detection_classes"], ref["detection_classes"])
    np.testing.assert_allclose(got["detection_boxes"], ref["detection_boxes"], rtol=0, atol=DETECTION_ATOL)
    np.testing.assert_allclose(got["detection_scores"], ref["detection_scores"], rtol=0, atol=DETECTION_ATOL)
    np.testing.assert_allclose(got["raw_detection_boxes"], ref["raw_detection_boxes"], rtol=0, atol=DETECTION_ATOL)
    np.testing.assert_allclose(got["raw_detection_scores"], ref["raw_detection_scores"], rtol=0,
                               atol=DETECTION_ATOL)


@pytest.mark.parametrize("name", [FPN, PPN])
def test_anchors_are_the_graphs_bit_for_bit(name):
    """FPN's multiscale grid anchors and PPN's SSD anchors (no reduced lowest layer), against the
    export's own anchor subgraph, evaluated."""
    source = sources.open_source(export(name))
    config, _ = config_inference.infer_config(source)
    want, form, why = graph_anchors(source.graph_def, (config.image_height, config.image_width))
    assert form == "corners", why
    from ssd_mobilenet.anchor_generators import generate_anchors
    got = generate_anchors(config, feature_map_shapes(config))
    assert got.shape == want.shape == ((8184 if name == FPN else 1170), 4)
    np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def directory_network():
    """`directory_network(name) -> (config, model, {keras path: value})` of the export's whole folder, once."""
    cache = {}

    def get(name):
        if name not in cache:
            config, _ = config_inference.infer_config(sources.open_source(export(name)))
            model = SSDMobileNetV1(config)
            cache[name] = config, model, _model_weights(sources.open_source(export(name)), model)
        return cache[name]
    return get


def _model_weights(source, model) -> dict:
    assignments, _ = assign.plan(source.weights, model)
    return {path: value for path, _, value in assignments}


@pytest.mark.parametrize("name", [FPN, PPN])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("with_config", [True, False], ids=["pipeline.config", "no pipeline.config"])
def test_every_source_form_gives_the_same_network(directory_network, name, form, with_config, tmp_path):
    """With or without pipeline.config: the same config (the graph's traits included; without one,
    the zoo's value of the training-only fields) and the same weights in every variable, so the
    network the checked directory conversion holds. Without pipeline.config the graph and weights
    decide the feature extractor, its levels and depths, the towers and the anchors."""
    want, model, ref = directory_network(name)
    source = sources.open_source(_copy(name, FORMS[form], tmp_path / form, with_config))
    config, notes = config_inference.infer_config(source)
    ignore = TRAINING_ONLY if not with_config else ()
    assert {k: v for k, v in config.to_dict().items() if k not in ignore} == \
           {k: v for k, v in want.to_dict().items() if k not in ignore}
    if not with_config:
        assert any(n.startswith(f"no pipeline.config: starting from the zoo defaults (ssd_mobilenet_v1_"
                                f"{name[:3]}_shared_box_predictor") for n in notes)
    got = _model_weights(source, model)
    assert sorted(got) == sorted(ref) == sorted(v.path for v in model.weights)
    for path in ref:
        np.testing.assert_array_equal(got[path], ref[path])


def test_pipeline_config_named_stands_for_its_directory(tmp_path, capsys):
    """`convert DIR/pipeline.config` reads DIR with that config (it used to look for the checkpoint's
    index beside the config and report it missing)."""
    src = _copy(FPN, FORMS["checkpoint_meta"], tmp_path / "m")
    source = sources.open_source(os.path.join(src, "pipeline.config"))
    assert source.weights_from == os.path.join(src, "model.ckpt.index")
    assert source.graph_from == os.path.join(src, "model.ckpt.meta")
    assert source.pipeline_config_from == os.path.join(src, "pipeline.config")
    # Another config file named: that one, not the directory's pipeline.config.
    other = tmp_path / "other.config"
    other.write_text(open(os.path.join(src, "pipeline.config")).read().replace("num_classes: 3", "num_classes: 5"))
    shutil.copy(other, src)
    assert sources.open_source(os.path.join(src, "other.config")).pipeline_config_from == os.path.join(
        src, "other.config")
    code, _, err = run_cli(["convert", os.path.join(src, "other.config"), "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 2 and "other.config: num_classes 5, the weights 3 (--trust-weights)" in err


@pytest.mark.parametrize("name", [FPN, PPN, CONTROL])
def test_keras_layers_carry_the_tf1_variable_names(name):
    """Every model weight of the export's checkpoint (`variables.txt`) is a Keras variable of the same
    shape through the name map's renames; PPN's MobileNet layers after Conv2d_11 are ignored with
    their reason, as a frozen graph prunes them."""
    config = read_pipeline_config(os.path.join(export(name), "pipeline.config"))
    model = SSDMobileNetV1(config)
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    used = {}
    with open(os.path.join(export(name), "variables.txt")) as f:
        for line in f:
            tf1, shape = line.split(" ", 1)
            if name_map.ignore_reason(tf1):
                continue
            if any(re.match(pattern, tf1) for pattern, _ in model.unused_tf1_weights):
                assert name == PPN and re.match(r"FeatureExtractor/MobilenetV1/Conv2d_1[23]_", tf1)
                continue
            used[name_map.tf2_path(tf1)] = tuple(json.loads(shape))
    assert used == shapes


@pytest.mark.slow
def test_ppn_reports_the_checkpoint_layers_it_does_not_use(odapi_converted):
    """PPN's checkpoint holds MobileNet's Conv2d_12 and Conv2d_13 (slim builds the base to the end);
    the conversion accounts for them as ignored, naming why."""
    report = _report(odapi_converted(PPN))
    unused = sorted(n for n, why in report["ignored"].items() if "Conv2d_11_pointwise" in why)
    assert len(unused) == 20 and all(re.match(r"FeatureExtractor/MobilenetV1/Conv2d_1[23]_", n) for n in unused)
    assert report["num_weights"] + len(report["ignored"]) == 165


def _scaled(converted, out, layer_path, factor=1.5):
    model = detector.load_model(converted)
    var = next(v for v in model.weights if v.path == layer_path)
    var.assign(var * factor)
    os.makedirs(out)
    detector.save(model, str(out))
    shutil.copy(os.path.join(converted, "conversion_report.json"), out)
    return str(out)


@pytest.mark.slow
@pytest.mark.parametrize("name, weight, stage", [
    (FPN, "fpn/smoothing_1/weights", "FeatureExtractor/MobilenetV1/fpn/top_down/smoothing_1"),
    (PPN, "WeightSharedConvolutionalBoxPredictor/PredictionTower/conv2d_0/BatchNorm/feature_3/gamma", "concat"),
])
def test_verify_names_the_first_diverging_stage(odapi_converted, tmp_path, name, weight, stage):
    """One weight scaled in the converted model (whose conversion the check passed): verify passes
    the layers before it and fails at its stage (a weight-shared predictor's level: at the heads'
    concatenation)."""
    from tests.conftest import random_images
    folder = tmp_path / "images"
    folder.mkdir()
    for i, image in enumerate(random_images(3, 2, 150, 170)):
        tf.io.write_file(str(folder / f"im{i}.png"), tf.io.encode_png(image))
    broken = _scaled(odapi_converted(name), tmp_path / "broken", weight)
    report = verification.verify(export(name), broken, images=[str(folder)], measure=False)
    assert not report.passed and report.first_divergence["name"] == stage, format_report(report)



@pytest.mark.slow
def test_a_checkpoint_alone_converts_and_verifies_through_the_tf1_builder(tmp_path):
    """FPN's checkpoint without its meta graph, with its pipeline.config: converted with the fields
    no graph shows assumed (named in the report), and verified against the graph the TF1 builder
    (slim, as the OD API builds it) makes of the same config and weights."""
    src = _copy(FPN, ["checkpoint", "model.ckpt.index", "model.ckpt.data-00000-of-00001"], tmp_path / "ckpt")
    out = str(tmp_path / "tf2")
    code, _, err = run_cli(["convert", src, "--out", out, "--quiet"])
    assert code == 0, err
    check = _report(out)["check"]
    assert not check["ran"] and "fused_batch_norm" in check["assumed"]
    report = verification.verify(src, out, images=None, measure=False)
    assert report.passed and "migrate.tf1.builder" in report.notes[0], format_report(report)
    assert any(t["name"] == "FeatureExtractor/MobilenetV1/fpn/bottom_up_Conv2d_15" and t["max_abs_err"] <= ATOL
               for t in report.tensors)


@pytest.mark.slow
@pytest.mark.parametrize("name, augmentation", [
    (FPN, "random_horizontal_flip, random_crop_image"), (PPN, "random_horizontal_flip, ssd_random_crop")])
def test_train_takes_the_export_with_its_own_pipeline_config(odapi_converted, tmp_path, capsys, name, augmentation):
    """`train` on the conversion of the OD API's own export, with the settings its pipeline.config gives
    (the zoo config's focal loss, momentum with cosine decay, its augmentation): two steps move the
    weights and the written model is still that family. The step's arithmetic is proven against TF1
    in tests/migrate/tf1/test_training_step.py."""
    from migrate.cli import main
    from ssd_mobilenet.training import shapes_dataset
    records = shapes_dataset.write_shapes_dataset(str(tmp_path / "shapes"), num_train=4, num_eval=1, image_size=128,
                                                  seed=1)
    converted, out = odapi_converted(name), str(tmp_path / "run")
    assert main(["train", converted, "--train", os.path.join(records, "train.record"), "--steps", "2", "--batch", "2",
                 "--out", out]) == 0
    err = capsys.readouterr().err
    assert "source_pipeline.config" in err and f"augmentation: {augmentation}" in err and "step 2/2: loss" in err
    before, after = detector.load_model(converted), detector.load_model(os.path.join(out, "model"))
    assert after.config == before.config
    moved = [a.path for a, b in zip(before.weights, after.weights) if not np.array_equal(a.numpy(), b.numpy())]
    assert any("WeightSharedConvolutionalBoxPredictor" in p for p in moved) and any("Conv2d_0" in p for p in moved)
