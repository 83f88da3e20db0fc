"""Memory levers of training (`precision`, `recompute`): mixed precision steps start where float32 does,
float16's loss scale skips overflowing steps and is checkpointed, and recomputing the backbone gives
the plain step's losses, gradients and moving statistics. Small model (depth 0.25, 128x128), a batch
of two images of the generated shapes set, with plausible trained weights (`builder`'s synthetic
ones: He-normal kernels, batch norm statistics in range) and without hard example mining (its
selection by non-maximum suppression on the predicted boxes makes the losses jump with rounding).
(`--max-memory` is tested in tests/migrate/test_train.py: it needs
a process started with the BFC allocator.)"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from migrate.tf1.builder import _synthetic_value
from ssd_mobilenet import detector
from ssd_mobilenet.feature_extractors.mobilenet_v1 import MOBILENET_V1_BLOCKS
from ssd_mobilenet.feature_extractors.ssd_mobilenet_v1 import extra_layer_names
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1
from ssd_mobilenet.training import data, precision, shapes_dataset
from ssd_mobilenet.training.ssd_loss import CLASSIFICATION_LOSS, LOCALIZATION_LOSS
from ssd_mobilenet.training.train_config import TrainingConfig
from ssd_mobilenet.training.trainer import TOTAL_LOSS, Trainer, write_model
from tests.ssd_mobilenet.training.training_pipeline import FPN_SMALL, PPN_SMALL, SMALL, focal_pipeline, pipeline

BATCH = 2
# Unit roundoff (half the spacing of numbers in [1, 2)) of the 16-bit compute types.
UNIT_ROUNDOFF = {"mixed_float16": 2.0**-11, "mixed_bfloat16": 2.0**-8}
MINER = """      hard_example_miner { num_hard_examples: 3000 iou_threshold: 0.99 loss_type: CLASSIFICATION
        max_negatives_per_positive: 3 min_negatives_per_image: 3 }
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    shapes = shapes_dataset.write_shapes_dataset(tmp_path_factory.mktemp("levers") / "shapes", num_train=4,
                                                 num_eval=2, image_size=128, seed=2)
    model = SSDMobileNetV1(SSDConfig(**SMALL))
    rng = np.random.default_rng(0)
    for v in model.weights:
        v.assign(_synthetic_value(v.path, list(v.shape), rng))
    batch = next(iter(data.make_dataset(os.path.join(shapes, "train.record"), model.config, BATCH, training=False)))
    batch = {k: batch[k] for k in ("image", "boxes", "classes", "num_boxes")}
    text = pipeline()
    assert MINER in text
    config = TrainingConfig.from_pipeline_config(text.replace(MINER, ""))
    return {"model": model, "batch": batch, "config": config, "trainers": {}}


def copy(model) -> SSDMobileNetV1:
    new = SSDMobileNetV1(model.config)
    for a, b in zip(new.weights, model.weights, strict=True):
        a.assign(b)
    return new


def mixed_trainer(setup, policy) -> Trainer:
    """A trainer of `policy` with frozen batch norm (see the first test)."""
    if policy not in setup["trainers"]:
        setup["trainers"][policy] = Trainer(precision.with_policy(copy(setup["model"]), policy), setup["config"],
                                            freeze_batch_norm=True)
    return setup["trainers"][policy]


@pytest.fixture(scope="module")
def float32_losses(setup) -> dict:
    """The float32 losses with frozen batch norm (eager, no step)."""
    trainer = Trainer(copy(setup["model"]), setup["config"], freeze_batch_norm=True)
    return {k: float(v) for k, v in trainer.losses(setup["batch"]).items()}


def longest_path(config) -> int:
    """Convolutions from the image to the last feature map's predictor: the 27 MobileNet layers, the
    extra layers, one predictor."""
    base = sum(1 if kind == "conv" else 2 for _, kind, _, _ in MOBILENET_V1_BLOCKS)
    return base + 2 * len(extra_layer_names(config)) + 1


# Each policy's trainer traces its step once (5-8 s), shared with the case after it that reads the
# same policy: the fast tier keeps mixed_bfloat16's (this case's and the written model's), the slow
# tier adds mixed_float16's (this case's and its loss scale's).
@pytest.mark.parametrize("policy", [pytest.param("mixed_float16", marks=pytest.mark.slow), "mixed_bfloat16"])
def test_a_mixed_precision_step_starts_at_the_float32_losses(setup, float32_losses, policy):
    trainer = mixed_trainer(setup, policy)
    assert trainer.model.compute_dtype == policy.split("_")[1]
    assert all(v.dtype == "float32" for v in trainer.model.weights)
    assert precision.is_loss_scaled(trainer.optimizer) == (policy == "mixed_float16")
    losses = {k: float(v) for k, v in trainer.train_step(setup["batch"]).items()}  # step 1: the weights as given
    assert all(np.isfinite(v) for v in losses.values()), losses
    # Each layer rounds its output to the 16-bit type (relative error up to its unit roundoff u);
    # along the deepest path the errors add up to at most about depth * u relative in the
    # predictions, and the losses (sums of smooth L1 and sigmoid cross-entropy of them over the
    # anchors, matched by the groundtruth alone) follow. That holds for a well-conditioned
    # network: batch norm with fixed statistics (frozen). In training mode the late 1x1 and 2x2
    # maps are normalised over the batch's few values each, whose differences can be as small as
    # their rounding; in one run the localisation loss then moved 16% under bfloat16.
    bound = longest_path(trainer.model.config) * UNIT_ROUNDOFF[policy]
    for name in (LOCALIZATION_LOSS, CLASSIFICATION_LOSS, TOTAL_LOSS):
        reference = float32_losses[name]
        assert abs(losses[name] - reference) <= bound * abs(reference), (name, losses[name], reference, bound)
        assert losses[name] != reference  # the step did compute in 16 bits


def _weights(trainer) -> list:
    return [v.numpy() for v in trainer.variables]


@pytest.mark.slow
def test_float16_loss_scale_skips_overflowing_steps_and_is_checkpointed(setup, tmp_path):
    trainer = mixed_trainer(setup, "mixed_float16")
    scale, counter = trainer.optimizer.dynamic_scale, trainer.optimizer.step_counter
    # A scale of 2^100 overflows float16 (max 65504) in the backward pass: the step is skipped.
    scale.assign(2.0**100)
    before, step = _weights(trainer), int(trainer.step)
    trainer.train_step(setup["batch"])
    assert int(trainer.step) == step and float(scale) == 2.0**99 and int(counter) == 0
    for a, b in zip(before, _weights(trainer)):
        np.testing.assert_array_equal(a, b)
    # A small scale: the gradients are finite, the update is applied, the scale is kept.
    scale.assign(2.0**4)
    trainer.train_step(setup["batch"])
    assert int(trainer.step) == step + 1 and float(scale) == 2.0**4 and int(counter) == 1
    assert any(not np.array_equal(a, b) for a, b in zip(before, _weights(trainer)))
    path = trainer.checkpoint().write(str(tmp_path / "ckpt"))
    resumed = Trainer(precision.with_policy(copy(setup["model"]), "mixed_float16"), setup["config"],
                      freeze_batch_norm=True)
    assert float(resumed.optimizer.dynamic_scale) == 2.0**15  # Keras' initial scale, until restored
    resumed.checkpoint().read(path).assert_consumed()
    assert float(resumed.optimizer.dynamic_scale) == 2.0**4 and int(resumed.optimizer.step_counter) == 1
    assert int(resumed.step) == int(trainer.step)
    for a, b in zip(_weights(trainer), _weights(resumed)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # two trainers traced on both sides: 12-15 s
def test_recompute_gives_the_plain_losses_gradients_and_moving_statistics(setup):
    _check_recompute(setup)


@pytest.mark.slow
@pytest.mark.parametrize("fields", [FPN_SMALL, PPN_SMALL], ids=["fpn", "ppn"])
def test_recompute_of_fpn_and_ppn(setup, fields):
    """FPN reads MobileNet's Conv2d_5, 11 and 13, PPN Conv2d_11 alone (its model stops there): the
    recomputed segments end at the last block read, and the step is the plain one as above."""
    model = SSDMobileNetV1(SSDConfig(**fields))
    rng = np.random.default_rng(0)
    for v in model.weights:
        v.assign(_synthetic_value(v.path, list(v.shape), rng))
    recomputed = Trainer(copy(model), TrainingConfig.from_pipeline_config(focal_pipeline(fields)), recompute=True)
    last = recomputed.forward.segments[-1].name
    assert last == ("recompute_Conv2d_13_pointwise" if fields is FPN_SMALL else "recompute_Conv2d_11_pointwise")
    _check_recompute({**setup, "model": model, "config": recomputed.config})


def _check_recompute(setup):
    plain = Trainer(copy(setup["model"]), setup["config"])
    recomputed = Trainer(copy(setup["model"]), setup["config"], recompute=True)
    plain_fn = tf.function(plain._gradients)
    plain_losses, plain_grads = plain_fn(setup["batch"])
    losses, grads = tf.function(recomputed._gradients)(setup["batch"])
    # The forward pass runs the same ops on the same inputs (bitwise equal here); rtol 1e-6 allows
    # float32 rounding should a kernel be chosen differently.
    for name, value in plain_losses.items():
        np.testing.assert_allclose(losses[name].numpy(), value.numpy(), rtol=1e-6, err_msg=name)
    # One forward pass in training mode moved the moving statistics once, as the plain one did
    # (twice, the recomputation's update included, would move them about twice as far).
    start = {v.path: v.numpy() for v in setup["model"].non_trainable_weights}
    moved = 0.0
    for a, b in zip(plain.model.non_trainable_weights, recomputed.model.non_trainable_weights, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=0, err_msg=a.path)
        moved = max(moved, float(np.max(np.abs(a.numpy() - start[a.path]))))
    assert moved > 1e-5
    # Gradients: the backward pass of a recomputed block is taken on its own tape, and the large
    # reductions (batch norm's gamma and beta over N*H*W positions, with cancellation) may add in
    # another order. Reordering the batch's images leaves the exact gradient unchanged, so what
    # it changes in the plain step is float32 rounding; the recomputed gradients stay within
    # twice that of the plain ones (plus one float32 unit roundoff of the tensor's largest entry).
    permuted = {k: tf.reverse(v, [0]) for k, v in setup["batch"].items()}
    _, reordered = plain_fn(permuted)
    eps = np.finfo(np.float32).eps / 2
    for v, p, q, r in zip(plain.variables, plain_grads, reordered, grads, strict=True):
        p, q, r = p.numpy(), q.numpy(), r.numpy()
        spread = np.max(np.abs(q - p))
        assert np.max(np.abs(r - p)) <= 2 * spread + eps * np.max(np.abs(p)), (v.path, np.max(np.abs(r - p)),
                                                                                spread)


def test_the_model_trained_in_mixed_precision_is_written_in_float32(setup, tmp_path):
    trainer = mixed_trainer(setup, "mixed_bfloat16")
    trainer.train_step(setup["batch"])
    write_model(trainer, str(tmp_path / "model"))
    written = detector.load_model(str(tmp_path / "model"))  # strict: every variable matched
    assert written.compute_dtype == "float32" and precision.of_model(written) == "float32"
    with trainer.averaged_weights():  # what the OD API's saver stored (the config keeps moving averages)
        expected = {v.path: v.numpy() for v in trainer.model.weights}
    assert [v.path for v in written.weights] == list(expected)
    for v in written.weights:
        np.testing.assert_array_equal(v.numpy(), expected[v.path], err_msg=v.path)
