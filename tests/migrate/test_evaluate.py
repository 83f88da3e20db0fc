"""`python -m migrate evaluate`: COCO metrics of a TF1 model and of its conversion on OD API
TFRecords (the generated shapes set), and its refusals of bad input."""

from __future__ import annotations

import json
import os

import pytest

from migrate import evaluate
from migrate.convert import conversion
from migrate.cli import main
from migrate.common.console import shown
from migrate.tf1 import builder
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.training import shapes_dataset

CONFIG = SSDConfig(num_classes=3, depth_multiplier=0.25, image_height=128, image_width=128, score_threshold=0.05)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluate")
    tf1_dir = builder.write_model_dir(CONFIG, str(root / "tf1"), seed=3)
    converted = str(root / "tf2")
    # Without convert's stage-by-stage check (test_convert's and test_self_check's subject): the
    # scores compared below are this conversion's proof here.
    conversion.convert(tf1_dir, converted, check=False)
    data_dir = str(root / "shapes")
    shapes_dataset.write_shapes_dataset(data_dir, num_train=4, num_eval=12, image_size=160, seed=5)
    return tf1_dir, converted, data_dir


@pytest.mark.slow
def test_tf1_graph_and_conversion_score_the_same(models, tmp_path):
    tf1_dir, converted, data_dir = models
    records, labels = os.path.join(data_dir, "eval.record"), os.path.join(data_dir, "label_map.pbtxt")
    ref = evaluate.evaluate(tf1_dir, [records], labels=labels)
    ours = evaluate.evaluate(converted, [records], labels=labels, json_path=str(tmp_path / "m.json"))
    assert ref["images"] == ours["images"] == 12
    assert ref["model"].startswith("TF1 graph") and ours["model"] == f"converted model ({shown(converted)})"
    # The same detections give the same metrics; ports of the OD API compare them to 3 decimals.
    assert list(ours["metrics"]) == list(ref["metrics"])
    for name, value in ref["metrics"].items():
        assert round(ours["metrics"][name], 3) == round(value, 3), name
    # Synthetic weights find little, but the metrics are computed (not the -1 of no groundtruth).
    assert ours["metrics"]["DetectionBoxes_Precision/mAP"] >= 0.0
    written = json.loads((tmp_path / "m.json").read_text())
    assert written["metrics"] == pytest.approx(ours["metrics"])


def test_cli_prints_the_table_and_refuses_bad_input(models, tmp_path, capsys):
    _, converted, data_dir = models
    records = os.path.join(data_dir, "eval.record")
    out = tmp_path / "metrics.json"
    assert main(["evaluate", converted, "--records", records, "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "DetectionBoxes_Precision/mAP@.50IOU" in printed and out.exists()
    before = out.read_bytes()

    def refused(argv, words):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(w in err[0] for w in words), err

    refused(["evaluate", converted, "--records", records, "--json", str(out), "--quiet"], [str(out), "--force"])
    assert out.read_bytes() == before
    refused(["evaluate", converted, "--records", str(tmp_path / "none.record")], ["none.record", "no"])
    empty = tmp_path / "empty.record"
    empty.write_bytes(b"")
    refused(["evaluate", converted, "--records", str(empty)], ["empty.record", "empty"])
    not_a_model = tmp_path / "folder"
    not_a_model.mkdir()
    refused(["evaluate", str(not_a_model), "--records", records], [str(not_a_model)])
    refused(["evaluate", converted, "--records", records, "--labels", str(tmp_path / "nolabels.pbtxt")],
            ["nolabels.pbtxt"])


def test_a_label_map_missing_the_models_classes_is_named(models, tmp_path, capsys):
    """Its classes are the categories scored: a class the label map does not name is not scored,
    and the one warning line says which."""
    _, converted, data_dir = models
    two = tmp_path / "two.pbtxt"
    two.write_text("item { id: 1 name: 'circle' }\nitem { id: 2 name: 'square' }\n")
    records = os.path.join(data_dir, "eval.record")
    assert main(["evaluate", converted, "--records", records, "--labels", str(two), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warning: {two}: no name for the model's class id 3 (their detections not scored)"]
