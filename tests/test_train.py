"""`python -m migrate train`: a converted model trained on OD API TFRecords (the generated shapes set)
into a model directory the other commands accept, class heads started fresh for another label
map, a killed run resumed, and bad input refused. Small models (depth 0.25, 128x128)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import ssd_mobilenet
from migrate import convert, evaluate, shapes, train
from migrate.cli import main
from migrate.tf1 import builder
from ssd_mobilenet import detector
from ssd_mobilenet.config import SSDConfig
from ssd_mobilenet.training import shapes_dataset

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tests.conftest import unwrapped
from tests.training.training_pipeline import pipeline

SMALL = dict(depth_multiplier=0.25, image_height=128, image_width=128, score_threshold=0.05)
MEMORISE_STEPS = 200


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    converted = {}
    for classes in (3, 5):
        tf1_dir = builder.write_model_dir(SSDConfig(num_classes=classes, **SMALL), str(root / f"tf1_{classes}"), seed=3)
        converted[classes] = str(root / f"tf2_{classes}")
        convert.convert(tf1_dir, converted[classes])
    data = shapes_dataset.write_shapes_dataset(str(root / "shapes"), num_train=24, num_eval=6, image_size=128, seed=1)
    config = root / "train.config"
    config.write_text(pipeline(**SMALL))
    return {"converted": converted, "records": os.path.join(data, "train.record"),
            "eval": os.path.join(data, "eval.record"), "labels": os.path.join(data, "label_map.pbtxt"),
            "config": str(config), "root": root}


def _argv(s, out, steps=4, converted=3, *extra):
    return ["train", s["converted"][converted], "--train", s["records"], "--config", s["config"], "--steps", str(steps),
            "--batch", "4", "--out", str(out), *extra]


@pytest.mark.slow
def test_the_trained_model_is_a_converted_directory(setup, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_argv(setup, out, 4, 3, "--eval", setup["eval"], "--labels", setup["labels"])) == 0
    captured = capsys.readouterr()
    assert "DetectionBoxes_Precision/mAP" in captured.out and "step 4/4: loss" in captured.err
    model_dir = out / "model"
    assert sorted(os.listdir(model_dir)) == ["checkpoint", "model_config.json", "pipeline.config", "saved_model"]
    # Training moved the weights; the directory loads like a conversion and evaluates.
    before, after = detector.load_model(setup["converted"][3]), detector.load_model(str(model_dir))
    assert any(not np.array_equal(a.numpy(), b.numpy()) for a, b in zip(before.weights, after.weights))
    images = np.random.default_rng(0).integers(0, 256, (2, 128, 160, 3), dtype=np.uint8)
    # `load` runs the SavedModel written beside the checkpoint (its metadata ties it to them); the
    # Keras model restored from the checkpoint gives the same detections.
    loaded = ssd_mobilenet.load(str(model_dir))
    assert type(loaded).__name__ == "SavedModelDetector"
    ours = detector.Detector(after, fold_batch_norm=True)(images)
    served = tf.saved_model.load(str(model_dir / "saved_model"))(tf.constant(images))
    for out in (served, loaded(images)):
        np.testing.assert_array_equal(ours["num_detections"].numpy(), out["num_detections"].numpy())
        np.testing.assert_allclose(ours["detection_scores"].numpy(), out["detection_scores"].numpy(), atol=1e-5)
    assert evaluate.evaluate(str(model_dir), [setup["eval"]])["images"] == 6


@pytest.mark.slow
def test_another_class_count_starts_the_class_heads_fresh(setup, tmp_path, capsys):
    model = detector.load_model(setup["converted"][5])
    new, fresh = train.with_fresh_class_heads(model, 3)
    assert new.config.num_classes == 3 and fresh and all("ClassPredictor" in p for p in fresh)
    old = {v.path: v.numpy() for v in model.weights}
    copied = [v for v in new.weights if v.path not in fresh]
    assert len(copied) == len(model.weights) - len(fresh)
    for v in copied:
        np.testing.assert_array_equal(v.numpy(), old[v.path])
    assert main(_argv(setup, tmp_path / "run", 2, 5, "--labels", setup["labels"])) == 0
    assert "the class heads start fresh" in unwrapped(capsys.readouterr().err)
    assert detector.load_model(str(tmp_path / "run" / "model")).config.num_classes == 3


def _command(setup, out, steps):
    return [sys.executable, "-m", "migrate"] + _argv(setup, out, steps) + ["--checkpoint-every", "2"]


@pytest.mark.slow
def test_a_killed_run_resumes_where_it_was(setup, tmp_path, capsys):
    env = {**os.environ, "PYTHONPATH": REPO}
    out = tmp_path / "killed"
    proc = subprocess.Popen(_command(setup, out, 30), cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    checkpoints = out / "checkpoints"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if checkpoints.exists() and any(f.startswith("ckpt-") and f.endswith(".index") and f != "ckpt-2.index"
                                        for f in os.listdir(checkpoints)):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "model").exists()  # nothing half-written
    resumed = subprocess.run(_command(setup, out, 30), cwd=REPO, env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming the run" in resumed.stderr and "trained to step 30" in resumed.stdout
    # Its checkpoints hold a float32 run of batch 4: resuming it otherwise is refused in one line.
    for extra, words in ((["--batch", "2"], ["batch_size 4, not 2"]),
                         (["--precision", "mixed_bfloat16"], ["precision float32, not mixed_bfloat16"])):
        capsys.readouterr()
        assert main(_command(setup, out, 32)[3:] + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(w in err[0] for w in words), err
    straight = subprocess.run(_command(setup, tmp_path / "straight", 30), cwd=REPO, env=env, capture_output=True,
                              text=True)
    assert straight.returncode == 0, straight.stderr[-2000:]
    # The same batches in the same order, the same state restored: the same trained weights.
    a = detector.load_model(str(out / "model"))
    b = detector.load_model(str(tmp_path / "straight" / "model"))
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=x.path)


def test_bad_input_is_refused_in_one_line(setup, tmp_path, capsys):
    def refused(argv, words):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(w in err[0] for w in words), err

    no_config = ["train", setup["converted"][3], "--train", setup["records"], "--steps", "1", "--out",
                 str(tmp_path / "a")]
    refused(no_config, ["no training settings", "--config"])
    refused(_argv(setup, tmp_path / "b")[:4] + ["--config", str(tmp_path / "none.config")], ["none.config"])
    empty = tmp_path / "empty.record"
    empty.write_bytes(b"")
    refused(["train", setup["converted"][3], "--train", str(empty), "--config", setup["config"]], ["empty.record"])
    garbage = tmp_path / "garbage.record"
    with tf.io.TFRecordWriter(str(garbage)) as writer:
        writer.write(b"not an example")
    refused(["train", setup["converted"][3], "--train", str(garbage), "--config", setup["config"]],
            ["garbage.record", "no usable record"])
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    refused(_argv(setup, taken), [str(taken), "--force"])
    assert (taken / "notes.txt").read_text() == "mine"
    refused(_argv(setup, tmp_path / "c", 4, 3, "--accumulate", "3"), ["--batch 4", "--accumulate 3"])


@pytest.mark.slow
def test_training_raises_the_map_of_the_images_it_learns(setup, tmp_path):
    # The whole chain at once: records -> targets -> losses -> updates -> the written model ->
    # detections scored by pycocotools against the records' own boxes. A few images seen often
    # enough to be learnt by heart: their mAP@.5 goes from about 0 to well above half. A loss
    # that encoded boxes in another order or frame, matched the wrong anchors, or a written model
    # that were not the trained one would leave it near 0. The shapes demo's config (Adam, no
    # moving average) without the flip, and with batch norm decay 0.9: the moving statistics
    # must be the trained network's after this short a run.
    config = tmp_path / "demo.config"
    config.write_text(shapes.train_config_text(SSDConfig(num_classes=3, **SMALL), batch_norm_decay=0.9, flip=False))
    before = evaluate.evaluate(setup["converted"][3], [setup["eval"]])["metrics"]["DetectionBoxes_Precision/mAP@.50IOU"]
    result = train.run(setup["converted"][3], [setup["eval"]], eval_records=[setup["eval"]], out=str(tmp_path / "run"),
                       config=str(config), steps=MEMORISE_STEPS, batch_size=6, checkpoint_every=MEMORISE_STEPS)
    after = result["metrics"]["DetectionBoxes_Precision/mAP@.50IOU"]
    assert before < 0.1 and after > 0.5, (before, after)


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["0", "1"], ids=["eigen", "onednn"])
def test_max_memory_picks_the_largest_batch_and_refuses_an_impossible_budget(setup, tmp_path, kernels):
    # Allocator peaks on a CPU need the BFC allocator, which `train --max-memory` switches on before
    # TensorFlow starts: a fresh process, as a user runs it, refused here. The budget search is
    # checked in another fresh process (the BFC allocator switched on first; both run at once) on a
    # float32 trainer, once on each kind of TensorFlow's CPU kernels (TF_ENABLE_ONEDNN_OPTS:
    # Eigen's, as CPUs without AVX-512 run them, whose convolution gradients hold large
    # temporaries, and oneDNN's). One inter-op thread: with two, which of Eigen's temporaries
    # concurrent ops hold at once varies from trace to trace and run to run (docs/measurements.md);
    # serialised, a size's peak is one number, so what history adds to it shows.
    out = tmp_path / "run"
    argv = ["train", setup["converted"][3], "--train", setup["records"], "--config", setup["config"], "--steps", "1",
            "--out", str(out), "--precision", "mixed_bfloat16", "--recompute", "--max-memory", "1"]
    script = f"""
import json
import numpy as np
from migrate import train
from ssd_mobilenet import detector, runtime
from ssd_mobilenet.training import memory_budget
from ssd_mobilenet.training.trainer import Trainer

runtime.configure(device="CPU")
_, config = train.training_settings({setup["converted"][3]!r}, {setup["config"]!r})
trainer = Trainer(detector.load_model({setup["converted"][3]!r}), config)
before = [v.numpy() for v in trainer.model.weights]
# Batch 1 measured first in the process, then after batch 2 was.
with memory_budget.preserved_state(trainer):
    alone = [memory_budget.step_peaks(trainer, n, runs=3) for n in (1, 2, 1)]
searches = [[]]
everything = memory_budget.largest_batch(trainer, 1e6, limit=2, progress=searches[-1].append)
peaks = [float(line.split()[4]) for line in searches[0]]  # "batch N: step peak X MiB"
budget = (peaks[0] + peaks[1]) / 2
searches.append([])
between = memory_budget.largest_batch(trainer, budget, limit=2, progress=searches[-1].append)
kept = all(np.array_equal(a, v.numpy()) for a, v in zip(before, trainer.model.weights)) and int(trainer.step) == 0
print(json.dumps({{"alone": alone, "everything": everything, "between": between, "budget": budget,
                  "searches": searches, "kept": kept}}))
"""
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": kernels}
    refusal = subprocess.Popen([sys.executable, "-m", "migrate", *argv], cwd=REPO, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          env={**env, "TF_NUM_INTEROP_THREADS": "1"})
    _, refusal_stderr = refusal.communicate()
    assert proc.returncode == 0, proc.stderr[-3000:]
    searched = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = refusal_stderr.strip().splitlines()
    assert refusal.returncode == 2, refusal_stderr[-3000:]
    assert "[migrate] memory levers: precision mixed_bfloat16, recompute, max memory 1 MiB" in lines, lines
    assert re.fullmatch(r"error: --max-memory 1: one 128x128 image's training step peaks at \d+ MiB "
                        r"\(weights included\)", lines[-1]), lines
    assert not out.exists()  # nothing written
    # A size measures the same first in the process as after a larger size was measured: within 5%
    # or 2 MiB, what the BFC allocator's layout can add (it hands out a free chunk of up to twice the
    # size asked for without splitting it and counts it whole, so what was freed before matters;
    # the figures are in docs/measurements.md).
    first, _, later = [max(peaks) for peaks in searched["alone"]]
    assert abs(first - later) <= max(0.05 * first, 2 * 2**20), searched["alone"]
    # The peak grows with the batch, and the search picks the largest batch measured under the
    # budget: the limit for an ample budget, and for one halfway between the first search's batch
    # 1 and 2, what the second search measured under it.
    first_search, second_search = [{int(line.split()[1].rstrip(":")): float(line.split()[4]) for line in search}
                                   for search in searched["searches"]]
    assert searched["everything"] == 2 and first_search[1] < first_search[2], searched
    assert searched["between"] == max([n for n, peak in second_search.items() if peak <= searched["budget"]],
                                      default=0), searched
    assert searched["kept"], searched
