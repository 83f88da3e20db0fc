"""`python -m migrate shapes DIR`: the training demo's inputs (records, label map, images, a TF1
model, a training config that `train` reads as meant), and an existing DIR refused; the PPN demo trains."""

from __future__ import annotations

import os

import numpy as np
import pytest

from migrate import shapes
from migrate.cli import main
from migrate.tf1 import sources
from ssd_mobilenet import converted_dir, detector
from ssd_mobilenet.training import builders, data
from ssd_mobilenet.training.train_config import TrainingConfig


def test_the_demo_inputs_are_written_and_read_as_meant(tmp_path, capsys):
    out = shapes.write(str(tmp_path / "demo"), num_train=4, num_eval=2)
    assert sorted(os.listdir(out)) == ["eval.record", "images", "label_map.pbtxt", "tf1_model", "train.config",
                                       "train.record"]
    assert sorted(os.listdir(os.path.join(out, "images"))) == ["eval_00000.jpg", "eval_00001.jpg"]
    examples = list(data.read_examples([os.path.join(out, "eval.record")]))
    assert len(examples) == 2 and all(len(e["classes"]) >= 1 for e in examples)
    # The TF1 model is one `convert` reads, for the shapes' classes at the demo's size.
    source = sources.open_source(os.path.join(out, "tf1_model"))
    assert source.weights and source.pipeline_config
    # Its weights are generated: marked so, for convert to carry and predict to say (issue 51).
    assert converted_dir.synthetic_weights(os.path.join(out, "tf1_model"))
    config = TrainingConfig.from_pipeline_config(os.path.join(out, "train.config"))
    assert config.num_classes == 3 and config.train.batch_size == shapes.BATCH_SIZE
    assert config.train.optimizer.kind == "adam_optimizer" and not config.train.optimizer.use_moving_average
    assert [a.kind for a in config.train.data_augmentation] == ["random_horizontal_flip"]
    decays = {s.batch_norm_decay for s in builders.group_settings(config).values()}
    assert decays == {np.float32(shapes.BATCH_NORM_DECAY)}
    # An existing DIR is refused in one line, exit 2, and left as it was.
    before = sorted(os.listdir(out))
    assert main(["shapes", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and out in err[0]
    assert sorted(os.listdir(out)) == before


@pytest.mark.slow
def test_the_ppn_demo_trains(tmp_path, capsys):
    """`shapes --model ppn`: a PPN and the zoo PPN config's losses (focal, no miner, background as
    zeros), which convert and `train` take: two steps move the weights of a model that stays a PPN."""
    out = shapes.write(str(tmp_path / "demo"), num_train=4, num_eval=2, model="ppn")
    config = TrainingConfig.from_pipeline_config(os.path.join(out, "train.config"))
    assert (config.loss.classification, config.loss.focal_alpha, config.loss.hard_example_miner) == \
        ("weighted_sigmoid_focal", 0.75, None)
    assert config.encode_background_as_zeros and config.class_prediction_bias_init == np.float32(-4.6)
    assert config.train.optimizer.kind == "adam_optimizer"
    converted = os.path.join(out, "converted")
    assert main(["convert", os.path.join(out, "tf1_model"), "--out", converted, "--quiet", "--no-check"]) == 0
    run = os.path.join(out, "run")
    assert main(["train", converted, "--config", os.path.join(out, "train.config"), "--train",
                 os.path.join(out, "train.record"), "--steps", "2", "--batch", "2", "--out", run]) == 0
    assert "step 2/2: loss" in capsys.readouterr().err
    # The conversion carries the mark of synthetic weights; the trained model does not.
    assert converted_dir.synthetic_weights(converted)
    assert not converted_dir.synthetic_weights(os.path.join(run, "model"))
    before, after = detector.load_model(converted), detector.load_model(os.path.join(run, "model"))
    assert after.config.feature_extractor_type == shapes.PPN_MODEL_CONFIG.feature_extractor_type
    assert after.config.box_predictor_type == shapes.PPN_MODEL_CONFIG.box_predictor_type
    moved = [a.path for a, b in zip(before.weights, after.weights) if not np.array_equal(a.numpy(), b.numpy())]
    assert any("WeightSharedConvolutionalBoxPredictor" in p for p in moved) and any("Conv2d_0" in p for p in moved)
    # The --model flag: an existing DIR is still refused before anything is written.
    assert main(["shapes", out, "--model", "ppn"]) == 2
