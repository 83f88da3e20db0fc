"""`ssd_mobilenet.load` and `predict` on a conversion: by default they run its SavedModel, with
no Keras model built and nothing traced, and give the TF1 graph's detections; the levers, and a
SavedModel that no longer belongs to the directory's config or checkpoint, build the Keras model."""

import glob
import json
import os
import shutil
import warnings

import numpy as np
import pytest

import ssd_mobilenet
from tests.conftest import SHARED, needs_shared
from migrate.cli import main
from migrate.common import images
from migrate.tf1 import parity
from ssd_mobilenet import converted_dir, detector, loading
from ssd_mobilenet import model as model_lib
from ssd_mobilenet.formats.saved_model.runner import SavedModelDetector
from ssd_mobilenet.detections import DETECTION_OUTPUTS

PHOTOS = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))


@pytest.fixture
def no_keras_model(monkeypatch):
    """Building the Keras model, or tracing a `Detector`, fails in this test."""
    def refused(*args, **kwargs):
        raise AssertionError("the default path built the Keras model")
    monkeypatch.setattr(model_lib.SSDMobileNetV1, "__init__", refused)
    monkeypatch.setattr(detector.Detector, "__init__", refused)


@pytest.fixture
def copied(zoo_converted, tmp_path):
    """A copy of the zoo conversion, to change."""
    return shutil.copytree(zoo_converted[1], tmp_path / "converted")


def _agree(ours, ref, count):
    for i in range(count):
        result = parity.compare_detections(ours, ref, i, atol=1e-5, rtol=0)
        assert result["ok"], result


@needs_shared
def test_load_runs_the_saved_model_without_the_keras_model(zoo_converted, no_keras_model):
    src, converted = zoo_converted
    det = ssd_mobilenet.load(converted)
    assert isinstance(det, SavedModelDetector)
    assert (det.precision, det.jit_compile, det.slice_size, det.weights_frozen) == ("float32", False, 1, False)
    images_ = np.load(os.path.join(src, "inputs.npz"))["images"]
    ref = dict(np.load(os.path.join(src, "reference.npz")))
    _agree({k: v.numpy() for k, v in det(images_).items()}, ref, len(images_))
    # One image, no batch axis; and no images: empty outputs in a batch's shapes.
    single = det(images_[0])
    assert single["detection_boxes"].shape == (1, 100, 4)
    empty = det(np.zeros((0, 480, 640, 3), np.uint8))
    assert {k: v.shape[1:] for k, v in empty.items()} == {k: v.shape[1:] for k, v in single.items()}
    assert all(v.shape[0] == 0 for v in empty.values())
    with pytest.raises(TypeError, match="uint8"):
        det(images_.astype(np.float32))


@needs_shared
@pytest.mark.slow
def test_predict_on_photos_runs_the_saved_model_and_gives_the_tf1_graphs_detections(zoo_converted, tmp_path,
                                                                                    monkeypatch):
    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from migrate.tf1.sources import read_graph_def
    src, converted = zoo_converted
    runner = FrozenGraphRunner(read_graph_def(os.path.join(src, "frozen_inference_graph.pb")))
    tf1 = {path: runner.run(images.read_image(path)[None], {k: f"{k}:0" for k in DETECTION_OUTPUTS})
           for path in PHOTOS}
    runner.close()
    monkeypatch.setattr(model_lib.SSDMobileNetV1, "__init__", lambda *a, **k: pytest.fail("Keras model built"))
    out = tmp_path / "r.jsonl"
    # The photos' sizes differ: batches of 3 mix them (resized in the input pipeline).
    assert main(["predict", converted, *PHOTOS, "--batch", "3", "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["image"] for line in lines] == PHOTOS
    for line in lines:
        ref = tf1[line["image"]]
        dets = line["detections"]
        ours = {"num_detections": np.array([len(dets)], np.float32),
                "detection_classes": np.array([[d["class_id"] for d in dets]], np.float32),
                "detection_scores": np.array([[d["score"] for d in dets]], np.float32),
                "detection_boxes": np.array([[d["box"] for d in dets]], np.float32).reshape(1, -1, 4)}
        n = len(dets)
        _agree(ours, {k: v[:, :n] if v.ndim > 1 else v for k, v in ref.items()}, 1)
        assert n == int(ref["num_detections"][0]) > 0


@needs_shared
def test_the_levers_build_the_keras_model(zoo_converted):
    converted = zoo_converted[1]
    assert loading.saved_model_for(converted) is not None
    # What the SavedModel holds, asked for explicitly.
    assert loading.saved_model_for(converted, freeze_weights=False, slice_size=1, concurrent_slices=2) is not None
    for options in ({"jit_compile": True}, {"precision": "mixed_bfloat16"}, {"freeze_weights": True},
                    {"fold_batch_norm": False}, {"slice_size": None}, {"concurrent_slices": 1}, {"unknown": 1}):
        assert loading.saved_model_for(converted, **options) is None, options
    det = ssd_mobilenet.load(converted, freeze_weights=True)
    assert isinstance(det, detector.Detector) and det.weights_frozen


@needs_shared
@pytest.mark.slow
def test_a_saved_model_of_another_config_or_checkpoint_is_not_run(zoo_converted, copied):
    assert converted_dir.saved_model_mismatch(str(copied), _metadata(copied)) is None
    # A config edited by hand: the checkpoint and config decide, with a warning.
    config = json.loads((copied / "model_config.json").read_text())
    config["score_threshold"] = 0.5
    (copied / "model_config.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match="saved_model/ not used: made for another model_config.json$"):
        det = ssd_mobilenet.load(str(copied))
    assert isinstance(det, detector.Detector) and det.config.score_threshold == 0.5
    out = det(np.load(os.path.join(zoo_converted[0], "inputs.npz"))["images"][:1])
    n = int(out["num_detections"][0])
    assert n > 0 and out["detection_scores"].numpy()[0, :n].min() >= 0.5


@needs_shared
def test_the_fingerprints_name_what_changed(copied):
    metadata = _metadata(copied)
    index = copied / "checkpoint" / "ckpt.index"
    index.write_bytes(index.read_bytes() + b"\0")
    assert converted_dir.saved_model_mismatch(str(copied), metadata) == "made from another checkpoint/"
    assert converted_dir.saved_model_mismatch(str(copied), {**metadata, "source": None}) == \
        "no source in its metadata"
    os.unlink(index)
    assert "to compare" in converted_dir.saved_model_mismatch(str(copied), metadata)


@needs_shared
def test_saved_model_files_other_than_the_metadata_says_are_not_run(copied):
    path = copied / "saved_model" / converted_dir.METADATA_PATH
    metadata = _metadata(copied)
    path.write_text(json.dumps({**metadata, "saved_model_fingerprint": "1/2/3/4"}))
    with pytest.warns(UserWarning, match="saved_model/ not used: its files differ from its metadata$"):
        assert loading.saved_model_for(str(copied)) is None


@needs_shared
def test_a_conversion_without_metadata_builds_the_keras_model_quietly(copied):
    shutil.rmtree(copied / "saved_model" / "assets.extra")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loading.saved_model_for(str(copied)) is None


@needs_shared
def test_the_keras_model_of_a_saved_model_detector_is_built_on_first_use(zoo_converted):
    det = ssd_mobilenet.load(zoo_converted[1])
    assert det._model is None
    model = det.model
    assert model.batch_norm_folded and det.model is model


def _metadata(converted) -> dict:
    return converted_dir.read_metadata(os.path.join(converted, "saved_model"))
