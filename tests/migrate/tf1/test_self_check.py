"""`convert`'s self-check: a wrong inferred trait never reaches the output.

Each trait the converter infers is injected wrong in turn into the config `infer_config`
returns, for a small 2017-style TF1 model (softmax over the class columns after the
background slice, threshold and clipping before NMS, zero-padded extra layers; 128 px, depth
0.25, built by `migrate.tf1.builder`): `convert` must exit 1, write nothing, and name the
first divergent stage and the field. The faithful conversion passes the same check.
"""

import os

import numpy as np
import pytest

from migrate.tf1 import builder
from migrate.cli import main
from migrate.tf1 import config_inference, self_check, sources
from tests.conftest import fits_100_columns, unwrapped
from ssd_mobilenet.config.ssd_config import NMS_CLIP_BEFORE, SSDConfig

SMALL_2017 = SSDConfig(num_classes=5, image_height=128, image_width=128, depth_multiplier=0.25,
                       score_converter="SOFTMAX", background_slice="logits", nms_variant=NMS_CLIP_BEFORE,
                       pad_extra_layers_to_even=True, interpolated_anchor_after_unit_ratio=True,
                       score_threshold=float(np.float32(0.05)), max_detections_per_class=20,
                       max_total_detections=30)

# field -> (wrong value, the stage the check must name)
INJECTED = {
    "add_background_class": (False, "Postprocessor"),
    "background_slice": ("scores", "Postprocessor"),
    "nms_variant": ("clip_after_sort", "Postprocessor"),
    "pad_extra_layers_to_even": (False, "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_"),
    "interpolated_anchor_after_unit_ratio": (False, "Postprocessor/Decode"),
    "score_converter": ("SIGMOID", "Postprocessor"),
    "logit_scale": (2.0, "Postprocessor"),
    "box_coder_scales": ((10.0, 10.0, 5.0, 4.0), "Postprocessor/Decode"),
    "score_threshold": (float(np.float32(0.1)), "Postprocessor"),
    "max_detections_per_class": (15, "Postprocessor"),
    # Rounding only (inside the tolerances): caught because the other order is exact.
    "normalize_before_resize": (True, "Preprocessor"),
}


@pytest.fixture(scope="module")
def model_2017(tmp_path_factory):
    return builder.write_model_dir(SMALL_2017, str(tmp_path_factory.mktemp("self_check") / "tf1"), seed=3)


@pytest.mark.slow
def test_faithful_conversion_passes_and_the_report_says_what_was_checked(model_2017, tmp_path):
    import json
    out = str(tmp_path / "out")
    assert main(["convert", model_2017, "--out", out, "--quiet"]) == 0
    with open(os.path.join(out, "conversion_report.json")) as f:
        check = json.load(f)["check"]
    assert check["ran"] and check["passed"]
    assert len(check["tensors"]) == 39 and all(t["ok"] for t in check["tensors"])
    assert [d["image"] for d in check["detections"]] == ["generated:128x128#0", "generated:257x311#0",
                                                         "generated:257x311#1"]
    # The crafted values fill the total cap on one image and stay under it on the other.
    counts = check["postprocessing"]["num_tf1"]
    assert counts[0] == SMALL_2017.max_total_detections and 0 < counts[1] < SMALL_2017.max_total_detections


@pytest.mark.parametrize("field", sorted(INJECTED))
@pytest.mark.slow
def test_each_wrong_trait_is_caught_and_nothing_is_written(model_2017, tmp_path, monkeypatch, capsys, field):
    value, stage = INJECTED[field]
    real = config_inference.infer_config

    def wrong(*args, **kwargs):
        config, notes = real(*args, **kwargs)
        assert getattr(config, field) != value
        change = {field: value}
        if field == "add_background_class":  # the same class head read without a background column
            change["num_classes"] = config.num_classes + 1
        return config.replace(**change), notes

    monkeypatch.setattr(config_inference, "infer_config", wrong)
    out = tmp_path / "out"
    code = main(["convert", model_2017, "--out", str(out), "--quiet"])
    printed = capsys.readouterr().err.strip()
    assert code == 1
    assert not out.exists() and not list(tmp_path.glob(".convert-*"))
    # One message, wrapped within 100 columns (its stage and numbers are the diagnosis).
    assert fits_100_columns(printed), printed
    err = unwrapped(printed)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    assert f"first at {stage}" in err
    assert field in err.split("; likely ", 1)[1]


def test_no_check_writes_it_anyway_and_says_so(model_2017, tmp_path, monkeypatch):
    import json
    real = config_inference.infer_config
    monkeypatch.setattr(config_inference, "infer_config",
                        lambda *a, **k: (real(*a, **k)[0].replace(logit_scale=2.0), real(*a, **k)[1]))
    out = str(tmp_path / "out")
    assert main(["convert", model_2017, "--out", out, "--quiet", "--no-check"]) == 0
    with open(os.path.join(out, "conversion_report.json")) as f:
        assert json.load(f)["check"] == {"ran": False, "reason": "--no-check"}


def test_a_checkpoint_alone_names_every_assumed_trait(model_2017, tmp_path, capsys):
    import json
    import shutil
    src = tmp_path / "ckpt"
    src.mkdir()
    for name in os.listdir(model_2017):
        if name.startswith("model.ckpt.") and not name.endswith(".meta") or name == "checkpoint":
            shutil.copy(os.path.join(model_2017, name), src)
    shutil.copy(os.path.join(model_2017, "pipeline.config"), src)
    out = str(tmp_path / "out")
    assert main(["convert", str(src), "--out", out]) == 0
    err = capsys.readouterr().err
    with open(os.path.join(out, "conversion_report.json")) as f:
        check = json.load(f)["check"]
    assert not check["ran"] and "nothing to check against" in check["reason"]
    assert sorted(check["assumed"]) == sorted(self_check_assumed := [
        "nms_variant", "fused_batch_norm", "pad_extra_layers_to_even", "interpolated_anchor_after_unit_ratio",
        "background_slice", "base_batch_norm_epsilon", "normalize_before_resize"])
    for field in self_check_assumed:
        assert f"{field}=" in err


def test_postprocessing_check_alone_catches_a_background_slice_verify_would_miss(model_2017):
    """On generated images the stages agree whatever `background_slice` says (it acts after the
    network); only post-processing on crafted values shows it, in verify as in convert."""
    from migrate.tf1.parity import DEFAULT_ATOL, DEFAULT_RTOL
    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from ssd_mobilenet import SSDMobileNetV1
    from migrate.tf1 import assign
    source = sources.open_source(model_2017)
    config, _ = config_inference.infer_config(source)
    runner = FrozenGraphRunner(source.graph_def, exact_arithmetic=True)
    for background_slice, ok in (("logits", True), ("scores", False)):
        model = SSDMobileNetV1(config.replace(background_slice=background_slice))
        assign.assign(source.weights, model)
        result = self_check.check_postprocessing(runner, model, model.config, DEFAULT_ATOL, DEFAULT_RTOL)
        assert result["ok"] == ok
        if not ok:
            assert result["suspects"] == ["background_slice (the graph computes as with logits)"]
    runner.close()


@pytest.mark.slow
def test_a_normalize_first_graph_is_compared_at_its_preprocessed_image(tmp_path, monkeypatch, capsys):
    """In a graph of later OD API code `Preprocessor/sub` is the full-size image: the check compares
    the resize loop's output instead (before, every such conversion failed at Preprocessor with
    "shape [2, 128, 128, 3] vs TF1 [2, 257, 311, 3]"), bit for bit; the older order, off by rounding
    only, fails naming the field."""
    import json
    src = builder.write_model_dir(SMALL_2017.replace(normalize_before_resize=True, pad_extra_layers_to_even=False,
                                                     interpolated_anchor_after_unit_ratio=False),
                                      str(tmp_path / "tf1"), seed=3)
    out = tmp_path / "out"
    assert main(["convert", src, "--out", str(out), "--quiet"]) == 0
    with open(out / "conversion_report.json") as f:
        report = json.load(f)
    assert report["config"]["normalize_before_resize"] is True and report["check"]["passed"]
    pre = report["check"]["tensors"][0]
    assert (pre["name"], pre["tf1_tensor"]) == ("Preprocessor", "Preprocessor/map/TensorArrayStack/TensorArrayGatherV3:0")
    assert pre["shape"] == [1, 128, 128, 3] and pre["max_abs_err"] == 0.0
    real = config_inference.infer_config
    monkeypatch.setattr(config_inference, "infer_config",
                        lambda *a, **k: (real(*a, **k)[0].replace(normalize_before_resize=False), real(*a, **k)[1]))
    capsys.readouterr()
    assert main(["convert", src, "--out", str(tmp_path / "wrong"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert fits_100_columns(err), err
    err = unwrapped(err)
    assert not (tmp_path / "wrong").exists()
    assert "first at Preprocessor: max abs error" in err and "shape" not in err
    assert err.startswith(f"error: {os.path.join(src, 'frozen_inference_graph.pb')}: the conversion differs first at "
                          "Preprocessor: max abs error")
    assert err.endswith("likely normalize_before_resize (the graph computes as with True); nothing written "
                        "(--no-check writes it)")
