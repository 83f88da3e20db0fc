"""`python -m migrate convert` on the real TF1 graphs, from each single source form."""

import glob
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

import ssd_mobilenet
from tests.conftest import (CONVERT_STDERR, DEPTHWISE, ODAPI_EXPORTS, QUANTIZED, TF13, ZOO_2017, ZOO_2018,
                            check_detections, needs_shared, random_images, unwrapped, zoo_path)
from migrate.cli import main
from migrate.tf1.frozen_graph import FrozenGraphRunner
from migrate.tf1.sources import read_graph_def
from migrate.tf1.parity import MIXED_TOLERANCES, compare_detections, match_detections
from ssd_mobilenet import converted_dir, label_map
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.detections import DETECTION_OUTPUTS


def _only(src_dir, dst, patterns):
    os.makedirs(dst)
    for pattern in patterns:
        for path in glob.glob(os.path.join(src_dir, pattern)):
            shutil.copy(path, dst)
    return str(dst)


FORMS = {
    "checkpoint": ["checkpoint", "model.ckpt.*"],
    "frozen_graph": ["frozen_inference_graph.pb"],
    "zoo_dir": ["*"],
}


# Every real graph in ../shared/zoo converts, each from one form at least, through every reader:
# - The whole directory (the session's conversions, which other tests read too): the 2018 graph,
#   the quantization-aware graph, the depthwise heads and the TF 1.3 export (with --trust-weights).
# - The checkpoint with its .meta (the graph as its release saved it, its variables frozen with the
#   checkpoint's values; no pipeline.config, so the score path is read off the graph alone): the
#   depthwise heads (TF 1.12) and the TF 1.3 export; the FakeQuant graph's (TF 1.9) reads as its
#   whole directory, config, weights and the checked graph node for node
#   (test_quantization_aware_checkpoint_with_its_meta_graph_reads_as_its_whole_directory).
# - The frozen graph alone (the weights its constants, every field read off the graph): the 2017
#   graph (TF 1.4: slice before scale and convert) and the TF 1.3 export.
# Left out, as the same readers on the same kind of graph: the 2017 whole directory (as convert
# reads it, pipeline.config, graph traits and checkpoint weights: test_parity's 2017 case, every
# stage at three sizes), the 2018 frozen graph alone (every field it shows is the 2017 graph's but
# its score path, which its whole directory's conversion reads off the same frozen graph), the
# quantization-aware frozen graph (its bits and constants: test_quantization_aware_model_from_one_file),
# the depthwise frozen graph (depthwise constants: test_family's frozen graphs), the 2017 and 2018
# meta graphs (their score paths: tests/migrate/tf1/test_graph_traits.py; a zoo .meta frozen for a check:
# the checkpoint cases here).
SOURCE_FORMS = [(ZOO_2018, "zoo_dir"), (ZOO_2017, "frozen_graph"),
                (QUANTIZED, "zoo_dir"), (DEPTHWISE, "checkpoint"), (DEPTHWISE, "zoo_dir"),
                (TF13, "checkpoint"), (TF13, "frozen_graph"), (TF13, "zoo_dir")]


@needs_shared
@pytest.mark.slow
# The frozen graph is read before the .meta when a directory holds both. Every form holds a
# graph, so every conversion here also passes the self-check against it.
@pytest.mark.parametrize("name, form", SOURCE_FORMS)
def test_each_source_form_converts_to_a_faithful_saved_model(zoo_fixture, zoo_dir_converted, request, tmp_path, name,
                                                             form, capsys):
    # The quantization-aware graph with ranges that look trained (see conftest.quantized_fixture).
    fx = request.getfixturevalue("quantized_fixture") if name == QUANTIZED else zoo_fixture(name)
    if form == "zoo_dir":
        # The whole directory: the conversion the session shares (`convert DIR --quiet`, the
        # other tests read it too).
        if name == TF13:
            # Its pipeline.config says 1 class, its weights 3: refused (resolved by --trust-weights).
            out = str(tmp_path / "out")
            assert main(["convert", fx, "--out", out, "--quiet"]) == 2
            assert "pipeline.config: num_classes 1, the weights 3 (--trust-weights)" in capsys.readouterr().err
            assert not os.path.exists(out)
        src, out = zoo_dir_converted(name)
        assert src == fx
    else:
        src = _only(fx, tmp_path / "src", FORMS[form])
        out = str(tmp_path / "out")
        assert main(["convert", src, "--out", out, "--quiet"]) == 0
    # A source with a pipeline.config (a zoo directory that has one) also has it kept as it was, for
    # training, and the label map it names where that is found: the zoo's configs name the OD API's
    # COCO map (the package's copy kept); the users' exports here name maps their folders lack.
    config = os.path.join(src, "pipeline.config")
    kept = ["source_pipeline.config"] if os.path.isfile(config) else []
    coco = bool(kept) and 'label_map_path: "PATH_TO_BE_CONFIGURED/mscoco_label_map.pbtxt"' in open(config).read()
    assert sorted(os.listdir(out)) == sorted(["checkpoint", "conversion_report.json", "model_config.json",
                                              "pipeline.config", "saved_model"] + kept
                                             + ["label_map.pbtxt"] * coco)
    if kept:
        with open(os.path.join(out, "source_pipeline.config")) as f, open(config) as g:
            assert f.read() == g.read()
    if coco:
        with open(os.path.join(out, "label_map.pbtxt")) as f, open(label_map.builtin_path("coco")) as g:
            assert f.read() == g.read()
    with open(os.path.join(out, "conversion_report.json")) as f:
        check = json.load(f)["check"]
    # Every form holds a graph (the checkpoint form its .meta): the conversion was checked against it.
    assert check["ran"] and check["passed"] and all(t["ok"] for t in check["tensors"])
    # The SavedModel as written, on the check's images (the graph's size and 257x311), against the graph.
    deployed = check["saved_model"]["detections"]
    assert [d["image"] for d in deployed] == check["images"] and "generated:257x311#1" in check["images"]
    assert all(d["ok"] for d in deployed)
    serve = tf.saved_model.load(os.path.join(out, "saved_model")).signatures["serving_default"]
    images = np.load(os.path.join(fx, "inputs.npz"))["images"]
    ref = np.load(os.path.join(fx, "reference.npz"))
    got = {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    assert ref["num_detections"].max() > 0
    np.testing.assert_array_equal(got["num_detections"], ref["num_detections"])
    np.testing.assert_array_equal(got["detection_classes"], ref["detection_classes"])
    np.testing.assert_allclose(got["detection_boxes"], ref["detection_boxes"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(got["detection_scores"], ref["detection_scores"], rtol=0, atol=1e-4)
    if form != "zoo_dir" and name != ZOO_2017:
        return
    # A larger image goes through the same legacy resize as the TF1 graph (checked once per
    # model, on its whole directory or the 2017 graph's one form: the source form decides the
    # weights and config, which the reference run covers;
    # 257x311, smaller than the input, is the conversion check's own, above).
    # Against the graph as written: the SavedModel folds batch norm as a TF1 session does, so two
    # detections of one class whose scores differ by ~1e-7 can come in the other order (a tie,
    # which compare_detections matches; measured on the 2018 graph at 257x311).
    runner = FrozenGraphRunner(read_graph_def(os.path.join(fx, "frozen_inference_graph.pb")),
                               exact_arithmetic=True)
    with open(os.path.join(out, "model_config.json")) as f:
        config = json.load(f)
    for shape in [(1, 480, 640)]:
        imgs = random_images(11, *shape)
        expected = runner.run(imgs, {k: f"{k}:0" for k in DETECTION_OUTPUTS})
        got = {k: v.numpy() for k, v in serve(input_tensor=tf.constant(imgs)).items()}
        for i in range(len(imgs)):
            if name == QUANTIZED:
                # A FakeQuant step at a boundary lands either side depending on the process (see
                # self_check._check_deployed): matched by class and IoU, as the conversion check does.
                result = match_detections(got, expected, i, config["score_threshold"],
                                          MIXED_TOLERANCES["mixed_bfloat16"]["score_margin"],
                                          config["max_total_detections"], config["iou_threshold"])
                assert result["ok"], result
                continue
            result = compare_detections(got, expected, i, atol=1e-5, rtol=0)
            assert result["ok"] and result["classes_equal"], result
    # No images: empty outputs of the batch's shapes (the convolutions alone reject a batch of 0).
    empty = {k: v.numpy() for k, v in serve(input_tensor=tf.zeros([0, 480, 640, 3], tf.uint8)).items()}
    assert set(empty) == set(got)
    for k, v in empty.items():
        assert v.shape == (0,) + got[k].shape[1:] and v.dtype == got[k].dtype, k


@needs_shared
@pytest.mark.slow
def test_the_2018_frozen_graph_alone_reads_as_its_whole_directory(zoo_fixture, tmp_path):
    """What its conversion would start from is the whole directory's, whose conversion is the
    session's (`zoo_converted`, checked against the same frozen graph): the config read off the
    graph alone equals the one pipeline.config and the graph give, and the graph's constants are
    the checkpoint's weights, bit for bit. (So the 2018 frozen graph alone is not converted
    again in test_each_source_form_converts_to_a_faithful_saved_model.)"""
    from migrate.tf1 import config_inference, sources
    fx = zoo_fixture(ZOO_2018)
    alone = sources.open_source(_only(fx, tmp_path / "alone", FORMS["frozen_graph"]))
    whole = sources.open_source(fx)
    assert alone.pipeline_config is None and whole.pipeline_config is not None
    assert alone.graph_from.endswith("frozen_inference_graph.pb") and whole.graph_from == os.path.join(
        fx, "frozen_inference_graph.pb")
    assert whole.weights_from.endswith("model.ckpt.index") and alone.weights_from == alone.graph_from
    assert config_inference.infer_config(alone)[0] == config_inference.infer_config(whole)[0]
    assert set(alone.weights) == set(whole.weights) - {"global_step"} and len(alone.weights) == 199
    for name, value in alone.weights.items():
        np.testing.assert_array_equal(value, whole.weights[name], err_msg=name)


@needs_shared
def test_report_accounts_for_every_weight(zoo_converted):
    _, out = zoo_converted
    with open(os.path.join(out, "conversion_report.json")) as f:
        report = json.load(f)
    assert len(report["name_map"]) == 199 and report["ignored"] == {"global_step": "training step counter"}
    assert all(len(h) == 64 for h in report["source"]["files"].values())
    assert report["config"]["nms_variant"] == "clip_before_nms"
    det = ssd_mobilenet.load(out)
    assert det(np.zeros((1, 300, 300, 3), np.uint8))["detection_boxes"].shape == (1, 100, 4)


@needs_shared
def test_written_pipeline_config_spells_numbers_as_a_person_would_and_reads_back_the_same(zoo_converted):
    """The 2018 zoo config spells its float32 values to 12 digits (0.600000023842), SSDConfig
    holds them as Python floats (0.6000000238418579); the written pipeline.config has the shortest
    spelling of each float32 (0.6), and reading it back gives the very same float32 values."""
    from migrate.convert.conversion import GRAPH_ONLY_FIELDS
    _, out = zoo_converted
    with open(os.path.join(out, "pipeline.config")) as f:
        written = f.read()
    for line in ("score_threshold: 0.3", "iou_threshold: 0.6", "aspect_ratios: 0.3333", "min_scale: 0.2",
                 "max_scale: 0.95", "depth_multiplier: 1.0"):
        assert re.search(rf"^ *{re.escape(line)}$", written, re.M), line
    assert not re.findall(r"\d\.\d{8,}", written)  # no float32 noise anywhere
    with open(os.path.join(out, "model_config.json")) as f:
        converted = ssd_mobilenet.SSDConfig.from_dict(json.load(f))
    again = read_pipeline_config(written)
    # What a pipeline.config cannot hold (read off the graph) stays model_config.json's alone.
    assert again.replace(**{k: getattr(converted, k) for k in GRAPH_ONLY_FIELDS + ("anchor_specs",)}) == converted
    assert (again.iou_threshold, again.score_threshold) == (float(np.float32(0.6)), float(np.float32(0.3)))


@needs_shared
def test_console_says_what_the_graph_gave_in_lines_that_fit_the_terminal(zoo_converted):
    """The zoo conversion's console (--quiet: its notes only): no line over 100 columns; the
    fields read off the graph as a count and those other than the zoo defaults, the full list
    in the report (and on the console with --verbose)."""
    from migrate.tf1 import config_inference
    _, out = zoo_converted
    printed = open(os.path.join(os.path.dirname(out), CONVERT_STDERR)).read().splitlines()
    assert printed and max(len(line) for line in printed) <= 100, printed
    joined = unwrapped("\n".join(printed)).splitlines()
    summary = [line for line in joined if line.startswith("[migrate] from the graph: ")]
    assert len(summary) == 1 and "fields, " in summary[0] and "score_threshold=0.3" in summary[0]
    assert not any(config_inference.EVERY_GRAPH_FIELD in line for line in joined)
    with open(os.path.join(out, "conversion_report.json")) as f:
        every = [n for n in json.load(f)["notes"] if n.startswith(config_inference.EVERY_GRAPH_FIELD)]
    assert len(every) == 1 and every[0].count("=") >= 20
    # Both notes as they come from `graph_field_notes`: the zoo's own values leave the summary short.
    # (The graph's floats are float32 values, as SSDConfig holds them.)
    traits = {"score_threshold": float(np.float32(1e-8)), "iou_threshold": float(np.float32(0.6)), "image_height": 512}
    short, full = config_inference.graph_field_notes(traits)
    assert short == "from the graph: 3 fields, 1 other than the zoo defaults: image_height=512"
    assert full == config_inference.EVERY_GRAPH_FIELD + "image_height=512, iou_threshold=0.6, score_threshold=1e-08"


@needs_shared
@pytest.mark.slow  # an FPN conversion: 30 s on a loaded 2-core machine
def test_a_checkpoint_alone_console_states_the_size_and_thresholds_model_config_json_holds(tmp_path, capsys):
    """FPN's checkpoint without its .meta or pipeline.config takes its zoo config's 640x640: the
    console says that size once (the written one, not 300x300) and the thresholds as
    model_config.json's float32 values read (1e-08 and 0.6, not their float64 spelling)."""
    from ssd_mobilenet.config.ssd_config import float_text
    src = tmp_path / "fpn_checkpoint"
    src.mkdir()
    for name in ("checkpoint", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
        shutil.copy(os.path.join(ODAPI_EXPORTS, "fpn_small", name), src)
    out = tmp_path / "tf2"
    assert main(["convert", str(src), "--out", str(out)]) == 0
    printed = unwrapped(capsys.readouterr().err)
    with open(out / "model_config.json") as f:
        written = json.load(f)
    assert (written["image_height"], written["image_width"]) == (640, 640)
    assert re.findall(r"\b(\d+)x(\d+)\b", printed) == [("640", "640")], printed
    assert "image size 640x640 assumed" in printed and "image_height" not in printed
    for key in ("score_threshold", "iou_threshold"):
        (stated,) = re.findall(rf"\b{key}=([^,\s]+)", printed)
        assert stated == float_text(written[key]) and np.float32(stated) == np.float32(written[key])
    assert "score_threshold=1e-08" in printed and "iou_threshold=0.6," in printed
    # One statement per fact: an assumed value is stated in the assumed fields only.
    assert printed.count("clip_before_nms") == 1


@pytest.mark.slow  # a conversion: 15 s on a loaded 2-core machine
def test_a_checkpoint_alone_with_no_check_still_states_what_it_assumed(small_model, tmp_path, capsys):
    # --no-check skips a check that a checkpoint alone cannot have anyway: what was assumed is said all the same.
    src = tmp_path / "checkpoint"
    src.mkdir()
    for name in ("checkpoint", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
        shutil.copy(os.path.join(small_model("two_classes").tf1, name), src)
    out = tmp_path / "tf2"
    assert main(["convert", str(src), "--out", str(out), "--no-check"]) == 0
    printed = unwrapped(capsys.readouterr().err)
    assert "alone): assumed nms_variant=clip_before_nms," in printed and "iou_threshold=0.6," in printed
    with open(out / "conversion_report.json") as f:
        check = json.load(f)["check"]
    assert check["reason"] == "--no-check" and check["assumed"]["nms_variant"] == "clip_before_nms"


@pytest.mark.slow  # a conversion and its check: 20 s on a loaded 2-core machine
def test_each_check_line_is_a_whole_statement(small_model, tmp_path, capsys):
    src, _ = small_model("two_classes").pair
    assert main(["convert", src, "--out", str(tmp_path / "tf2")]) == 0
    printed = unwrapped(capsys.readouterr().err).splitlines()
    passed = [line for line in printed if line.startswith("[migrate] check passed")]
    assert passed[1].startswith("[migrate] check passed: post-processing on 2 crafted images (") and \
        passed[1].endswith(" detections)"), passed
    assert passed[2] == ("[migrate] check passed: the SavedModel as written (float32) agrees with the TF1 graph's "
                         "detections on the 3 images"), passed


def test_long_notes_are_wrapped_to_the_terminal(capsys):
    from migrate.commands.common import print_wrapped
    print_wrapped("[migrate] " + ", ".join(f"field_{i}=value" for i in range(40)))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 4 and max(map(len, lines)) <= 100 and all(line.startswith("    ") for line in lines[1:])


# ---- bad input: exit 2, one line naming the file, nothing written ----------------------------

def _bad(tmp_path, capsys, args, expect):
    out = tmp_path / "out"
    code = main(["convert", *args, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    assert expect in err
    assert not out.exists() or not any(out.iterdir())
    assert not list(tmp_path.glob(".convert-*"))


def test_missing_path(tmp_path, capsys):
    _bad(tmp_path, capsys, [str(tmp_path / "nope")], "no such file")


def test_empty_directory(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _bad(tmp_path, capsys, [str(tmp_path / "empty")], "empty directory")


def test_truncated_frozen_graph(tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    (d / "frozen_inference_graph.pb").write_bytes(b"\x0a\xff\xff\x01garbage")
    _bad(tmp_path, capsys, [str(d)], "frozen_inference_graph.pb")


def test_pipeline_config_alone(tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    (d / "pipeline.config").write_text("model { ssd { num_classes: 3 } }")
    _bad(tmp_path, capsys, [str(d)], "no weights")


@needs_shared
def test_index_without_data(zoo_fixture, tmp_path, capsys):
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.index"])
    _bad(tmp_path, capsys, [src], "without its data file")


@needs_shared
def test_data_without_index(zoo_fixture, tmp_path, capsys):
    # With its `checkpoint` state file and .meta beside it: still the index is named, in one line.
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["checkpoint", "model.ckpt.data-*", "model.ckpt.meta"])
    _bad(tmp_path, capsys, [src], "model.ckpt.index: not found")


@needs_shared
def test_corrupt_index(zoo_fixture, tmp_path, capsys):
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.index", "model.ckpt.data-*"])
    with open(os.path.join(src, "model.ckpt.index"), "r+b") as f:
        f.truncate(100)
    _bad(tmp_path, capsys, [src], "model.ckpt.index")


@needs_shared
def test_truncated_checkpoint_data(zoo_fixture, tmp_path, capsys):
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.index", "model.ckpt.data-*"])
    data = glob.glob(os.path.join(src, "model.ckpt.data-*"))[0]
    with open(data, "r+b") as f:
        f.truncate(1000)
    _bad(tmp_path, capsys, [src], "model.ckpt")


@needs_shared
def test_corrupt_pipeline_config(zoo_fixture, tmp_path, capsys):
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.*", "checkpoint"])
    with open(os.path.join(src, "pipeline.config"), "w") as f:
        f.write("model { ssd { num_classes: 90 \n")
    _bad(tmp_path, capsys, [src], "pipeline.config")


@needs_shared
@pytest.mark.parametrize("written, misspelt, problem", [
    ("train_config {", "train_confg {", 'no field "train_confg" (did you mean "train_config"?)'),
    ("num_classes: 90", "num_clases: 90", 'no field "num_clases" (did you mean "num_classes"?)'),
    ("iou_threshold: 0.600000023842", "iou_treshold: 0.5", 'no field "iou_treshold" (did you mean "iou_threshold"?)'),
])
def test_misspelt_pipeline_config_field(zoo_fixture, tmp_path, capsys, written, misspelt, problem):
    # Read as "unset" before, so convert wrote the default (iou_threshold 0.6) and exited 0.
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.*", "checkpoint"])
    with open(zoo_path(ZOO_2018, "pipeline.config")) as f:
        text = f.read().replace(written, misspelt, 1)
    with open(os.path.join(src, "pipeline.config"), "w") as f:
        f.write(text)
    line = text[:text.index(misspelt)].count("\n") + 1
    _bad(tmp_path, capsys, [src], f"error: {os.path.join(src, 'pipeline.config')}:{line}: {problem}")


@needs_shared
def test_unsupported_pipeline_config(zoo_fixture, tmp_path, capsys):
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.*", "checkpoint"])
    with open(zoo_path("sample_configs", "ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config")) as f:
        text = f.read()
    with open(os.path.join(src, "pipeline.config"), "w") as f:
        text = text.replace("ssd_mobilenet_v1_fpn", "ssd_mobilenet_v2_fpn")
        f.write(text)
    line = text[:text.index("type: 'ssd_mobilenet_v2_fpn'")].count("\n") + 1
    _bad(tmp_path, capsys, [src], f"pipeline.config:{line}: type: ssd_mobilenet_v2_fpn — only ssd_mobilenet_v1(_fpn, _ppn)")


@needs_shared
def test_config_of_another_network_than_the_weights(zoo_fixture, tmp_path, capsys):
    """The zoo's FPN config beside the plain zoo checkpoint: refused naming both networks (the
    weights in another network are no model, --trust-weights or not)."""
    src = _only(zoo_fixture(ZOO_2018), tmp_path / "m", ["model.ckpt.*", "checkpoint"])
    shutil.copy(zoo_path("sample_configs", "ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config"),
                os.path.join(src, "pipeline.config"))
    _bad(tmp_path, capsys, [src, "--trust-weights"],
         f"error: {os.path.join(src, 'pipeline.config')}: ssd_mobilenet_v1_fpn, but the weights are ssd_mobilenet_v1; "
         "weight_shared_convolutional_box_predictor, but the weights are convolutional_box_predictor")


def test_checkpoint_of_another_model(tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    v = tf.Variable(np.zeros((3, 3), np.float32), name="dense/kernel")
    # A name-based (TF1-style) checkpoint holding one variable of some other network.
    tf.raw_ops.SaveV2(prefix=str(d / "model.ckpt"), tensor_names=["dense/kernel"], shape_and_slices=[""],
                      tensors=[v])
    _bad(tmp_path, capsys, [str(d)], "fit no model variable")


@needs_shared
@pytest.mark.slow
def test_quantization_aware_model_converts_to_a_faithful_saved_model(zoo_dir_converted):
    # Every layer's FakeQuant ranges are weights; the bits come from the graph and pipeline.config.
    # (The session's conversion of the whole directory, as test_each_source_form_... reads it; its
    # SavedModel's detections against the graph's reference run are checked there.)
    quantized_fixture, out = zoo_dir_converted(QUANTIZED)
    with open(os.path.join(out, "model_config.json")) as f:
        config = json.load(f)
    assert (config["weight_bits"], config["activation_bits"]) == (8, 8)
    images = np.load(os.path.join(quantized_fixture, "inputs.npz"))["images"]
    ref = np.load(os.path.join(quantized_fixture, "reference.npz"))
    assert ref["num_detections"].min() > 0
    # The inference copy `load` gives: batch norm folded and each kernel rounded once at load
    # (not on every call), the same detections.
    detector = ssd_mobilenet.load(out)
    layers = [layer for layer in detector.model._flatten_layers() if getattr(layer, "weights_quant", None)]
    assert len(layers) > 27 and all(layer.kernel_quantized for layer in layers)
    check_detections({k: v.numpy() for k, v in detector(images).items()}, dict(ref))


@needs_shared
@pytest.mark.slow  # in place of a slow-tier conversion (2.9 s at -n 0, load ~5)
def test_quantization_aware_checkpoint_with_its_meta_graph_reads_as_its_whole_directory(quantized_fixture,
                                                                                        tmp_path):
    """The checkpoint with its .meta alone (no pipeline.config: the bits from the graph's FakeQuant
    ops) gives what the whole directory gives: the same config, the same weights, and the same
    graph for the check (the .meta frozen with the checkpoint's values is the directory's frozen
    graph node for node, the fixture having frozen it with those values). Its conversion is then
    the whole directory's, which test_each_source_form_converts_to_a_faithful_saved_model checks
    (34.1 s of conversion in the fresh-clone log of 97db5d3 not done twice)."""
    from migrate.tf1 import config_inference, sources
    from migrate.tf1.inference_graph import inference_graph_of
    from migrate.tf1.self_check import checked_stages
    from ssd_mobilenet import SSDMobileNetV1

    meta = sources.open_source(_only(quantized_fixture, tmp_path / "src", FORMS["checkpoint"]))
    whole = sources.open_source(quantized_fixture)
    assert meta.graph_from.endswith("model.ckpt.meta") and meta.pipeline_config is None
    assert whole.graph_from.endswith("frozen_inference_graph.pb") and whole.pipeline_config is not None
    config, _ = config_inference.infer_config(meta)
    assert config == config_inference.infer_config(whole)[0] and (config.weight_bits, config.activation_bits) == (8, 8)
    assert set(meta.weights) == set(whole.weights)
    for name, value in meta.weights.items():
        np.testing.assert_array_equal(value, whole.weights[name], err_msg=name)
    # The graph the conversion check runs, with the stages it compares (self_check.check_conversion).
    _, nodes = checked_stages(SSDMobileNetV1(config))
    ours, theirs = (inference_graph_of(s, nodes, config=config)[0] for s in (meta, whole))
    assert sum(n.op == "FakeQuantWithMinMaxVars" for n in ours.node) > 50
    ours, theirs = ({n.name: n.SerializeToString(deterministic=True) for n in g.node} for g in (ours, theirs))
    assert ours == theirs

@needs_shared
@pytest.mark.parametrize("form", ["frozen_graph", "weights_only"])
def test_quantization_aware_model_from_one_file(quantized_fixture, tmp_path, form):
    # The frozen graph alone holds the ranges as constants and the bits in its FakeQuant ops;
    # the checkpoint's data and index alone get contrib.quantize's 8 bits, with a note.
    from migrate.tf1 import assign, config_inference, sources
    from ssd_mobilenet import SSDMobileNetV1

    patterns = {"frozen_graph": FORMS["frozen_graph"],
                "weights_only": ["checkpoint", "model.ckpt.data-*", "model.ckpt.index"]}[form]
    source = sources.open_source(_only(quantized_fixture, tmp_path / "src", patterns))
    config, notes = config_inference.infer_config(source)
    assert (config.weight_bits, config.activation_bits) == (8, 8)
    assert sum("8-bit weights and activations assumed" in n for n in notes) == (form == "weights_only")
    model = SSDMobileNetV1(config)
    assign.assign(source.weights, model)
    images = np.load(os.path.join(quantized_fixture, "inputs.npz"))["images"]
    if form == "frozen_graph":
        check_detections({k: v.numpy() for k, v in model.detect(images).items()},
                         dict(np.load(os.path.join(quantized_fixture, "reference.npz"))))
        return
    # Without graph or config the post-processing is the zoo defaults' (score threshold 1e-8,
    # where this model's is 0.3): the network's outputs are what the weights decide.
    runner = FrozenGraphRunner(read_graph_def(os.path.join(quantized_fixture, "frozen_inference_graph.pb")))
    expected = runner.run(images, {"box_encodings": "concat:0", "class_predictions_with_background": "concat_1:0"})
    got = model(model.preprocess(images))
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value.reshape(got[key].shape), rtol=0, atol=1e-5)


@needs_shared
def test_quantization_must_agree_between_config_and_weights(zoo_fixture, quantized_fixture, tmp_path, capsys):
    # The same weights computed with and without FakeQuant give other detections: refused both ways.
    weights_and_config = ["checkpoint", "model.ckpt.data-*", "model.ckpt.index", "pipeline.config"]
    quantized = _only(quantized_fixture, tmp_path / "q", weights_and_config)
    with open(os.path.join(quantized, "pipeline.config")) as f:
        text = f.read()
    with open(os.path.join(quantized, "pipeline.config"), "w") as f:
        f.write(text[:text.index("graph_rewriter")])
    _bad(tmp_path, capsys, [quantized], "model.ckpt.index: quantization-aware weights (FakeQuant ranges), but "
         "pipeline.config is float")
    plain = _only(zoo_fixture(ZOO_2018), tmp_path / "f", weights_and_config)
    with open(os.path.join(plain, "pipeline.config"), "a") as f:
        f.write("graph_rewriter { quantization { delay: 48000 } }\n")
    _bad(tmp_path, capsys, [plain], "model.ckpt.index: float weights (no FakeQuant ranges), but pipeline.config is "
         "8-bit quantization-aware")
    shutil.copy(os.path.join(zoo_fixture(ZOO_2018), "model.ckpt.meta"), plain)
    _bad(tmp_path, capsys, [plain], "pipeline.config: 8-bit quantization-aware, but model.ckpt.meta is float")


@needs_shared
def test_existing_output_is_not_overwritten(zoo_fixture, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code = main(["convert", zoo_fixture(ZOO_2018), "--out", str(out), "--quiet"])
    assert code == 2 and "--force" in capsys.readouterr().err
    assert os.listdir(out) == ["keep.txt"]


def test_force_never_replaces_the_source_or_a_file(tmp_path, capsys):
    # --force replaces the output folder whole: as the source or a folder holding it, that deleted the model.
    parent = tmp_path / "models"
    src = parent / "ssd"
    src.mkdir(parents=True)
    (src / "frozen_inference_graph.pb").write_bytes(b"the TF1 model")
    for out in (src, parent, src / ".." / "ssd"):
        assert main(["convert", str(src), "--out", str(out), "--force", "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "holds the source" in err, err
    assert (src / "frozen_inference_graph.pb").read_bytes() == b"the TF1 model"
    existing = tmp_path / "out.txt"
    existing.write_text("mine")
    assert main(["convert", str(src), "--out", str(existing), "--force", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a file" in err and existing.read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["models", "out.txt"]


def _save_tf1_checkpoint(prefix, weights):
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])


@needs_shared
@pytest.mark.slow
def test_moving_average_shadows_are_taken_only_when_asked(zoo_fixture, tmp_path):
    from migrate.tf1.sources import read_checkpoint
    weights = read_checkpoint(os.path.join(zoo_fixture(ZOO_2018), "model.ckpt"))
    # A training checkpoint with EMA shadows of every model variable (values differ from the raw ones).
    shadows = {f"{n}/ExponentialMovingAverage": v * np.float32(0.5) for n, v in weights.items() if n != "global_step"}
    src = tmp_path / "ema"
    src.mkdir()
    _save_tf1_checkpoint(str(src / "model.ckpt"), {**weights, **shadows})
    name = "FeatureExtractor/MobilenetV1/Conv2d_7_pointwise/weights"
    for flag, expected in [([], weights[name]), (["--use-moving-averages"], shadows[name + "/ExponentialMovingAverage"])]:
        out = str(tmp_path / f"out{len(flag)}")
        assert main(["convert", str(src), "--out", out, "--quiet", *flag]) == 0
        model = ssd_mobilenet.detector.load_model(out)
        np.testing.assert_array_equal(model.get_layer("Conv2d_7_pointwise").kernel.numpy(), expected)
        with open(os.path.join(out, "conversion_report.json")) as f:
            report = json.load(f)
        assert report["use_moving_averages"] == bool(flag)
        assert len(report["ignored"]) == len(shadows) + 1


@needs_shared
@pytest.mark.slow
def test_report_records_the_tf_release_that_wrote_the_graph(zoo_dir_converted):
    _, out = zoo_dir_converted(TF13)  # `convert DIR --trust-weights`, shared with the source-form test
    with open(os.path.join(out, "conversion_report.json")) as f:
        source = json.load(f)["source"]
    assert source["tensorflow_version"] == "1.3.0" and source["graph_def_version"] == 24


def _with_label_map_path(pair, folder, named: str) -> str:
    """A copy of the small TF1 model whose pipeline.config names `named` as its label map."""
    src = str(folder / "model")
    shutil.copytree(pair[0], src)
    with open(os.path.join(src, "pipeline.config"), "a", encoding="utf-8") as f:
        f.write(f'train_input_reader {{\n  label_map_path: "{named}"\n}}\n')
    return src


def _photo(folder) -> str:
    from PIL import Image
    path = str(folder / "photo.png")
    Image.fromarray(random_images(5, 1, 96, 120)[0]).save(path)
    return path


@pytest.mark.slow  # three small conversions without their check, and a predict: ~10 s
def test_the_label_map_the_pipeline_config_names_travels_with_the_model(small_model, tmp_path, capsys):
    """convert keeps the label map the pipeline.config names, found beside it by its base name
    when the folder moved, and says which; predict then labels without --labels, and says once
    that the boxes mean nothing, the source being marked as synthetic weights (as the default
    model and the shapes demo are). `--labels` wins (`coco` too), a map of ids beyond the
    model's classes is refused, and a named map that is not there is said, with how to give it."""
    src = _with_label_map_path(small_model("two_classes").pair, tmp_path, "/data/moved/my_label_map.pbtxt")
    converted_dir.mark_synthetic(src)
    labels = "item {\n  id: 1\n  name: '/m/cat'\n  display_name: 'cat'\n}\nitem {\n  id: 2\n  name: 'dog'\n}\n"
    (tmp_path / "model" / "my_label_map.pbtxt").write_text(labels)
    out = str(tmp_path / "converted")
    assert main(["convert", src, "--out", out, "--no-check"]) == 0
    kept = os.path.join(src, "my_label_map.pbtxt")
    assert f"[migrate] label map: {kept} (pipeline.config's label_map_path), kept as label_map.pbtxt" in \
        unwrapped(capsys.readouterr().err)
    assert (tmp_path / "converted" / "label_map.pbtxt").read_text() == labels  # as it was: name and display_name
    with open(os.path.join(out, "conversion_report.json")) as f:
        assert json.load(f)["label_map"] == kept
    results = str(tmp_path / "results.jsonl")
    assert main(["predict", out, _photo(tmp_path), "--out", results]) == 0
    with open(results) as f:
        detections = json.loads(f.readline())["detections"]
    assert detections and {d["label"] for d in detections} <= {"cat", "dog"}
    assert capsys.readouterr().err.count("[migrate] note: synthetic weights (seeded, not trained): these "
                                         "detections and labels mean nothing\n") == 1

    # --labels wins over the config's; a map of other classes is refused before anything is written.
    names = tmp_path / "names.txt"
    names.write_text("kitten\npuppy\n")
    assert main(["convert", src, "--out", out, "--no-check", "--force", "--labels", str(names), "--quiet"]) == 0
    assert label_map.read(os.path.join(out, "label_map.pbtxt")) == {1: "kitten", 2: "puppy"}
    capsys.readouterr()
    refused = str(tmp_path / "refused")
    assert main(["convert", src, "--out", refused, "--no-check", "--labels", "coco", "--quiet"]) == 2
    assert capsys.readouterr().err == ("error: coco: ids 3..90 beyond the model's 2 classes: the map of another "
                                       "model?\n")
    assert not os.path.exists(refused)

    os.remove(kept)
    os.remove(os.path.join(src, converted_dir.SYNTHETIC_FILE))
    assert main(["convert", src, "--out", out, "--no-check", "--force"]) == 0
    assert ("[migrate] label map /data/moved/my_label_map.pbtxt (pipeline.config's label_map_path) not found: "
            "give it with `--labels FILE` (or `--labels coco`)") in unwrapped(capsys.readouterr().err)
    assert not os.path.exists(os.path.join(out, "label_map.pbtxt"))
    # A model not marked (a user's) is not said to mean nothing.
    assert main(["predict", out, _photo(tmp_path), "--out", results, "--force"]) == 0
    assert "note:" not in capsys.readouterr().err


@pytest.mark.slow  # a 90-class small TF1 model built, two small conversions without their check: ~15 s
def test_a_zoo_config_naming_the_od_apis_coco_map_keeps_the_shipped_one(small_model, tmp_path, capsys):
    """The zoo's configs name `PATH_TO_BE_CONFIGURED/mscoco_label_map.pbtxt`, which their archives
    leave out: a model of COCO's 90 classes keeps the package's copy of that map (the same ids and
    display names) and says so; a model of other classes naming it keeps none and says how to give
    one (the shipped map would name ids it does not have)."""
    from migrate.tf1 import builder
    named = "PATH_TO_BE_CONFIGURED/mscoco_label_map.pbtxt"
    coco = str(tmp_path / "coco90")
    builder.write_model_dir(ssd_mobilenet.SSDConfig(num_classes=90, image_height=128, image_width=128,
                                                    depth_multiplier=0.25), coco, seed=0)
    with open(os.path.join(coco, "pipeline.config"), "a", encoding="utf-8") as f:
        f.write(f'train_input_reader {{\n  label_map_path: "{named}"\n}}\n')
    out = tmp_path / "coco90_tf2"
    assert main(["convert", coco, "--out", str(out), "--no-check"]) == 0
    assert ("[migrate] label map: coco, the package's mscoco_label_map.pbtxt (pipeline.config's label_map_path, "
            "not found), kept as label_map.pbtxt") in unwrapped(capsys.readouterr().err)
    with open(label_map.builtin_path("coco"), encoding="utf-8") as f:
        assert (out / "label_map.pbtxt").read_text() == f.read()
    two = _with_label_map_path(small_model("two_classes").pair, tmp_path, named)
    assert main(["convert", two, "--out", str(tmp_path / "two_tf2"), "--no-check"]) == 0
    assert (f"[migrate] label map {named} (pipeline.config's label_map_path) not found: give it with "
            "`--labels FILE` (or `--labels coco`)") in unwrapped(capsys.readouterr().err)
    assert not (tmp_path / "two_tf2" / "label_map.pbtxt").exists()


def test_the_default_model_is_marked_as_synthetic_weights(tmp_path, monkeypatch):
    """The built-in default model's weights are generated: its TF1 directory is marked (also one
    built before the mark existed), so that its conversion carries the mark and predict says that
    its boxes mean nothing."""
    from migrate.convert import default_model
    monkeypatch.setattr(default_model, "checkpoints_dir", lambda: str(tmp_path))
    os.makedirs(default_model.tf1_dir())
    # A default model built by an earlier release: its frozen graph there, no mark.
    (tmp_path / default_model.NAME / "frozen_inference_graph.pb").write_bytes(b"")
    assert default_model.ensure_tf1_model() == default_model.tf1_dir()
    assert converted_dir.synthetic_weights(default_model.tf1_dir())
    assert "not trained" in (tmp_path / default_model.NAME / converted_dir.SYNTHETIC_FILE).read_text()
