"""training.trainer on the generated shapes dataset: the loss falls, gradient accumulation gives the
large batch's update, frozen batch norm stays frozen (on the accumulation test's steps). (A resumed
run ends where an uninterrupted one does: tests/migrate/test_train.py, a `train` process killed and started
again.) Small models (depth 0.25, 128x128), written into tmp_path once per module."""

from __future__ import annotations

import itertools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1
from ssd_mobilenet.training import data, shapes_dataset
from ssd_mobilenet.training.train_config import TrainingConfig
from ssd_mobilenet.training.trainer import TOTAL_LOSS, Trainer, batch_norm_parameters, groundtruth
from tests.ssd_mobilenet.training.training_pipeline import SMALL, pipeline

BATCH = 4


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    out = tmp_path_factory.mktemp("trainer") / "shapes"
    return shapes_dataset.write_shapes_dataset(out, num_train=64, num_eval=16, image_size=128, seed=0)


def config(**kwargs) -> TrainingConfig:
    return TrainingConfig.from_pipeline_config(pipeline(**kwargs))


def new_model(seed: int = 0) -> SSDMobileNetV1:
    keras.utils.set_random_seed(seed)
    return SSDMobileNetV1(SSDConfig(**SMALL))


def values(variables) -> list:
    return [np.array(v) for v in variables]


@pytest.mark.slow
def test_total_loss_falls(shapes):
    trainer = Trainer(new_model(), config())
    batches = iter(data.make_dataset(os.path.join(shapes, "train.record"), trainer.model.config, BATCH))
    # 150 steps: the mean of the last 20 is 0.50 of the first 20's (0.49 after 300, where it levels
    # off; 0.56 after 100).
    totals = [float(trainer.train_step(next(batches))[TOTAL_LOSS]) for _ in range(150)]
    first, last = np.mean(totals[:20]), np.mean(totals[-20:])
    assert np.all(np.isfinite(totals))
    assert last < 0.6 * first, (first, last)


def _matched_anchors(trainer, batch):
    boxes, classes, weights = groundtruth(batch["boxes"], batch["classes"], batch["num_boxes"],
                                          trainer.config.num_classes)
    unmatched = trainer.loss.unmatched_class_label(trainer.config.num_classes + 1)
    labels = [tf.pad(c, [[0, 0], [1, 0]]) for c in classes]
    targets = trainer.loss.assigner.batch_assign(trainer.anchors, boxes, labels, unmatched, weights)
    return tf.reduce_sum(targets.reg_weights, axis=1).numpy()


def _images_with_equal_matches(trainer, shapes):
    """Four eval images (i, j, k, l) whose pairs (i, j) and (k, l) match as many anchors: then the
    mean of the two pairs' normalised gradients is the gradient of the four together."""
    batch = next(iter(data.make_dataset(os.path.join(shapes, "eval.record"), trainer.model.config, 16,
                                        training=False)))
    batch = {k: batch[k] for k in ("image", "boxes", "classes", "num_boxes")}
    matched = _matched_anchors(trainer, batch)
    for i, j, k, m in itertools.permutations(range(len(matched)), 4):
        if i < j and k < m and i < k and matched[i] + matched[j] == matched[k] + matched[m] \
                and matched[i] != matched[k]:
            return {key: tf.gather(v, [i, j, k, m]) for key, v in batch.items()}
    pytest.fail(f"no four images with equal matched-anchor sums in pairs: {matched}")


def _moving_statistics(model) -> list:
    """The batch norm layers' moving means and variances."""
    return [v for v in model.non_trainable_variables if "moving_" in v.path]


@pytest.mark.slow
def test_accumulating_two_micro_batches_gives_the_batch_update_and_frozen_batch_norm_stays(shapes):
    # Batch norm frozen: in training mode each micro-batch would be normalised with its own two
    # images' statistics, not the four's, and the forward passes would differ. Both trainers'
    # steps (the whole batch's and the accumulated one's) also show frozen batch norm frozen: its
    # gamma, beta and moving statistics are not trained and do not move.
    model = new_model()
    initial = values(model.weights)
    whole = Trainer(model, config(), accumulate=1, freeze_batch_norm=True)
    norms = batch_norm_parameters(model)
    assert len(_moving_statistics(model)) == len(norms) and norms
    assert len(whole.variables) == len(model.trainable_variables) - len(norms)
    assert not {id(v) for v in norms} & {id(v) for v in whole.variables}
    four = _images_with_equal_matches(whole, shapes)
    halves = [{k: v[:2] for k, v in four.items()}, {k: v[2:] for k, v in four.items()}]
    split_model = new_model(seed=1)
    split_model.set_weights(initial)
    split = Trainer(split_model, config(), accumulate=2, freeze_batch_norm=True)
    start = values(whole.variables)
    frozen = [values(batch_norm_parameters(m) + _moving_statistics(m)) for m in (model, split_model)]
    for _ in range(2):
        whole.train_step(four)
        split.train_step(halves[0])
        assert int(split.step) == int(whole.step) - 1  # no update after the first micro-batch
        split.train_step(halves[1])
    assert int(whole.step) == int(split.step) == 2
    moved = max(np.abs(a - b).max() for a, b in zip(values(whole.variables), start))
    assert moved > 1e-3
    # Float32 rounding: the two sum the same per-image terms in another order, so an update can
    # differ in its last bits and a weight by an ulp or so (1e-6 relative); tiny weights by 5e-9.
    for a, b, v in zip(values(whole.variables), values(split.variables), whole.variables):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=5e-9, err_msg=v.path)
    for a, b in zip(whole.moving_average.shadows, split.moving_average.shadows):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=5e-9)
    for m, before in zip((model, split_model), frozen):
        for a, b in zip(before, values(batch_norm_parameters(m) + _moving_statistics(m)), strict=True):
            np.testing.assert_array_equal(b, a)
    # Every kernel moves (the L2 term alone moves them); a head's bias may see no gradient yet when
    # mining selects none of its anchors.
    kernels = [i for i, v in enumerate(whole.variables) if v.path.endswith("weights")]
    assert all(not np.array_equal(start[i], whole.variables[i].numpy()) for i in kernels)


@pytest.mark.parametrize("ssd_extra, train_flag, frozen", [
    ("", None, False),
    ("    freeze_batchnorm: true\n", None, True),
    ("    freeze_batchnorm: true\n", False, False),  # the argument wins over the config
    ("", True, True),
])
def test_frozen_batch_norm_from_the_config_or_the_argument(ssd_extra, train_flag, frozen):
    c = config(ssd_extra=ssd_extra)
    assert Trainer(new_model(), c, freeze_batch_norm=train_flag).batch_norm_frozen is frozen


def test_batch_norm_train_false_freezes():
    no_train = pipeline().replace("scale: true epsilon", "scale: true train: false epsilon", 1)
    assert Trainer(new_model(), TrainingConfig.from_pipeline_config(no_train)).batch_norm_frozen
