"""Training on two logical CPU devices (MirroredStrategy) against one device on the same global
batches: the same losses, weights, optimiser slots, moving averages and written model, and
checkpoints that restore across the two.

Batch norm is frozen: in training mode each replica normalises its slice with the slice's own
statistics (as TF1's multi-clone training did), so the forward passes, and with them the losses,
would differ from one device's by design. The config clips gradients and keeps a moving average
so that the order (clip the replicas' summed gradient, average once) is tested too. Logical
devices must be set before TensorFlow initialises its devices, so the two-device run is a fresh
process (`two_device_run.py`, the `train` command's `run` with `devices=2`, SavedModel export
included, then the loss-scaled step's check on the same two devices), started before the
one-device run here (`trainer.train`) so that the two overlap.
Small model (depth 0.25, 128x128, 3 classes), two steps of 4 images.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from migrate.cli import main
from ssd_mobilenet import detector
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1
from ssd_mobilenet.training import shapes_dataset, trainer
from ssd_mobilenet.training.train_config import TrainingConfig
from tests.conftest import REPO
from tests.ssd_mobilenet.training.training_pipeline import RMSPROP, SMALL, pipeline

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_device_run.py")
STEPS, BATCH = 2, 4
# float32 summation order: each replica sums its two images' gradient terms and the all-reduce
# adds the two partial sums, where one device sums the four at once, so a loss or update can
# differ in its last bits. Losses: 1e-6 relative (a few ulps). Weights, slots and averages after
# two steps: 1e-6 relative, 5e-9 absolute for the near-zero ones (the tolerance the accumulation
# test in test_trainer.py states for the same reordering).
LOSS_RTOL = 1e-6
WEIGHT_RTOL, WEIGHT_ATOL = 1e-6, 5e-9


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("distribute")
    shapes = shapes_dataset.write_shapes_dataset(str(root / "shapes"), num_train=16, num_eval=1, image_size=128,
                                                 seed=2)
    config = root / "train.config"
    optimizer = RMSPROP + "\n    use_moving_average: true moving_average_decay: 0.9"
    config.write_text(pipeline(optimizer, train_extra="  gradient_clipping_by_norm: 1.0\n"))
    keras.utils.set_random_seed(0)
    converted = root / "converted"
    converted.mkdir()
    detector.save(SSDMobileNetV1(SSDConfig(**SMALL)), str(converted))
    return {"root": root, "converted": str(converted), "records": os.path.join(shapes, "train.record"),
            "config": str(config)}


@pytest.fixture(scope="module")
def two_devices(setup):
    """`result(key)`: what the fresh two-device process printed, "run" (`two_device_run.py`) or
    "loss_scaled" (`loss_scaled_average_run.py`); the process starts with the fixture and is read
    on the first call."""
    args = {"run": _run_args(setup, setup["root"] / "two"),
            "loss_scaled": {"converted": setup["converted"], "config": setup["config"], "records": setup["records"],
                            "batch": BATCH}}
    worker = subprocess.Popen([sys.executable, WORKER, json.dumps(args)], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    results = {}

    def result(key):
        if not results:
            stdout, stderr = worker.communicate(timeout=600)
            assert worker.returncode == 0, stderr[-3000:]
            run, loss_scaled = stdout.strip().splitlines()[-2:]
            results.update(run=json.loads(run), loss_scaled=json.loads(loss_scaled))
        return results[key]

    yield result
    if worker.poll() is None:
        worker.kill()
        worker.communicate()


def _run_args(setup, out):
    return dict(converted=setup["converted"], train_records=[setup["records"]], config=setup["config"], out=str(out),
                steps=STEPS, batch_size=BATCH, freeze_batch_norm=True, checkpoint_every=1)


def _restored(setup, out):
    """A one-device Trainer holding the state of `out`'s last checkpoint (every object of it
    consumed, the dataset iterator included), and that iterator."""
    training_config = TrainingConfig.from_pipeline_config(setup["config"])
    one = trainer.Trainer(detector.load_model(setup["converted"]), training_config, freeze_batch_norm=True)
    iterator = iter(trainer._dataset([setup["records"]], one.model, BATCH, None, 0, training_config))
    checkpoint = one.checkpoint(iterator=iterator)
    checkpoint.restore(tf.train.latest_checkpoint(os.path.join(out, trainer.CHECKPOINT_DIR))).assert_consumed()
    return one, iterator


def _state(one) -> dict:
    state = {f"model/{v.path}": v.numpy() for v in one.model.weights}
    state.update({f"optimizer/{v.path}": v.numpy() for v in one.optimizer.variables})
    state.update({f"average/{i}": s.numpy() for i, s in enumerate(one.moving_average.shadows)})
    return state


@pytest.mark.slow
def test_two_devices_train_as_one_on_the_same_global_batch(setup, two_devices):
    two_out, one_out = setup["root"] / "two", setup["root"] / "one"
    tf.random.set_seed(0)  # as the worker: the dataset's shuffles combine their seed with the global one
    training_config = TrainingConfig.from_pipeline_config(setup["config"])
    one_result = trainer.train(detector.load_model(setup["converted"]), training_config, [setup["records"]],
                               str(one_out), steps=STEPS, batch_size=BATCH, freeze_batch_norm=True, checkpoint_every=1)
    two_result = two_devices("run")
    assert two_result["replicas"] == 2 and two_result["step"] == one_result["step"] == STEPS

    assert sorted(two_result["losses"]) == sorted(one_result["losses"])
    for key, value in one_result["losses"].items():
        np.testing.assert_allclose(two_result["losses"][key], value, rtol=LOSS_RTOL, err_msg=key)

    # The two-device checkpoint restores whole into a one-device Trainer, and holds the one-device
    # run's state: weights, RMSProp slots and step, moving averages, and the iterator's position.
    one, one_iterator = _restored(setup, one_out)
    two, two_iterator = _restored(setup, two_out)
    assert int(two.step) == STEPS
    initial = {v.path: v.numpy() for v in detector.load_model(setup["converted"]).weights}
    assert max(np.abs(v.numpy() - initial[v.path]).max() for v in one.variables) > 1e-3  # training moved them
    one_state, two_state = _state(one), _state(two)
    assert sorted(one_state) == sorted(two_state)
    for name, value in one_state.items():
        np.testing.assert_allclose(two_state[name], value, rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL, err_msg=name)
    next_one, next_two = next(one_iterator), next(two_iterator)
    np.testing.assert_array_equal(next_two["image"].numpy(), next_one["image"].numpy())

    # The written models (the moving averages, with a SavedModel) agree as the states do.
    one_model = detector.load_model(str(one_out / trainer.MODEL_DIR))
    two_model = detector.load_model(str(two_out / trainer.MODEL_DIR))
    assert os.path.isdir(two_out / trainer.MODEL_DIR / "saved_model")
    for a, b in zip(one_model.weights, two_model.weights):
        assert a.path == b.path
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL, err_msg=a.path)


@pytest.mark.slow
def test_a_loss_scaled_step_updates_the_moving_average_once_across_replicas(two_devices):
    """mixed_float16 takes the moving average's update through a `tf.cond` (a step skipped for
    non-finite gradients skips it too) instead of `replicas.once`: on two replicas the first
    applied step must still move each shadow once, not once per replica."""
    result = two_devices("loss_scaled")
    assert result["applied"] == 1, result  # a step was applied within the worker's steps
    # One update is `shadow - (shadow - var) * (1 - decay)` exactly; a second would move it by
    # (1 - decay) * decay of the step again (decay 0.9 here), far beyond float32 rounding.
    assert result["moved"] > 0.0 and result["once_error"] <= 1e-6 * result["moved"] < result["twice_error"], result


def test_a_batch_that_does_not_split_is_refused_in_one_line(setup, tmp_path, capsys, monkeypatch):
    def refused(argv, words):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(w in err[0] for w in words), err
        assert not os.path.exists(tmp_path / "out")

    base = ["train", setup["converted"], "--train", setup["records"], "--config", setup["config"], "--out",
            str(tmp_path / "out")]
    refused(base + ["--batch", "4", "--devices", "3"], ["--batch 4", "--devices 3", "--accumulate 1"])
    refused(base + ["--batch", "4", "--devices", "2", "--accumulate", "4"], ["--batch 4", "--devices 2",
                                                                            "--accumulate 4"])
    # The config's batch_size (4) when --batch is not given: refused before the CPU is split.
    refused(base + ["--devices", "3"], [setup["config"], "batch_size 4", "3 replicas"])
    refused(base + ["--devices", "none"], ["--devices none", "'all'"])
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    refused(base + ["--devices", "2"], ["--devices 2", "TF_CONFIG"])
