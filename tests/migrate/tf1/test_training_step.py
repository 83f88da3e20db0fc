"""One training step of `ssd_mobilenet.training.trainer.Trainer` against the same step built in TF1.

`migrate.tf1.training_step` builds the step the way the OD API's TF1 code did (slim network with
batch norm in training mode, TF1 target assignment, losses and hard example miner, slim's L2
regularisation collection, `tf.compat.v1.train` optimisers, `ExponentialMovingAverage`); it
shares no code with `ssd_mobilenet.training`. Both start from the same weights
(`builder.synthetic_weights`, assigned into the Keras model by the project's name map) and take
the same batch: two 128x128 images with 4 and 3 groundtruth boxes of 3 classes, padded to 4 rows
(the TF2 side gives the padding weight 0, the TF1 side slices it off as model_lib's
`unstack_batch` did); one box is large, one small and one of FPN's coarsest anchors, so the
anchors of every feature map (every FPN level) are matched and every variable gets a gradient.

Cases: plain SSD (two), FPN and PPN with their zoo configs' training fields (focal loss, no miner,
background as zeros, in-place batch norm updates, momentum with cosine decay and warm-up) on the
weight-shared predictor. PPN's MobileNet Conv2d_12/13, which TF1 builds and regularises without
using and the converted model does not have, are compared on their own (their terms and
gradients: weight decay alone) and left out of the rest.

In the focal cases the TF2 side runs without Grappler's arithmetic optimizer, as the TF1 side
runs its graph without Grappler: the optimizer rewrites the focal loss's `pow(1 - p_t, gamma)`
into `square`, which rounds otherwise (measured on the FPN case: the classification loss 1 ulp
apart, gradients up to 1.3e-5 relative, a BN gamma of Conv2d_1). TF1 sessions ran the same
rewrite by default, so neither form is "the" OD API's; as written, both sides are bit-identical.
The plain cases run TF2 as `train` does (with the optimizer): bit-identical to TF1 as written.
FPN and PPN run fused batch norm, as the OD API's own exports of them (FusedBatchNormV3): with
the unfused op sequence on the weight-shared towers the FPN case's losses are equal but its
gradients differ by up to 1.6e-5 relative (a BN gamma of Conv2d_2), beyond the tolerance below. The TF2 gradients are the trainer's first step's own,
recorded as the step applies them (eagerly, TF2's first-layer batch-norm gamma gradients differ
from its own graph's by up to 2e-5 relative: other kernels, other summation orders). Compared, per
case:

- the four losses of the first step: 1e-6 relative (float32 sums in other orders; measured:
  equal, the total up to 1.2e-7, `tf.add_n` of the terms in another order).
- every gradient of the total loss (unclipped), by relative norm error |g_tf2 - g_tf1| / |g_tf1|
  <= 1e-5, the margin for float32 reductions in other orders (measured: 0, bit-identical).
- every model variable after the step (weights, batch-norm gamma/beta and moving statistics):
  |tf2 - tf1| <= 1e-6 * max|tf1| per variable, and the update itself (after - before) by
  relative norm error with the gradients' tolerance (measured: 0 for both).
- the moving-average shadows after the step, when the config has a moving average: as the
  weights (measured: 0).
- the four losses of a second step on the same batch: 1e-5 relative, as that step starts from
  weights that may already differ by the first step's rounding (measured: up to 1.2e-7).
The hard example miner selects anchors by their losses (NMS, then the negatives in loss order up
to the cap), so a difference there would show as a loss and gradient difference; the losses
being equal, the two sides select the same anchors here.
"""

from __future__ import annotations

import contextlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from migrate.tf1 import assign, builder, name_map
from migrate.tf1 import training_step as tf1_step
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1
from ssd_mobilenet.training.train_config import TrainingConfig
from ssd_mobilenet.training.trainer import Trainer

from tests.ssd_mobilenet.training.training_pipeline import FPN_SMALL, PPN_SMALL, SMALL, focal_pipeline, pipeline

LOSS_RTOL = 1e-6
SECOND_LOSS_RTOL = 1e-5
GRADIENT_RTOL = 1e-5
WEIGHT_RTOL = 1e-6
BATCH, ROWS = 2, 4
MOMENTUM = """momentum_optimizer {
      learning_rate { exponential_decay_learning_rate { initial_learning_rate: 0.001 decay_steps: 1
        decay_factor: 0.5 staircase: false } }
      momentum_optimizer_value: 0.8 }
    use_moving_average: false"""


def _softmax_pipeline() -> str:
    """Softmax (logit scale 2) and L2 losses, a miner scoring both losses, localization weight 2,
    Momentum with a rate that halves every step, gradients clipped to a global norm of 100 (theirs
    is ~14000 on this batch), no moving average. Rate and norm are chosen so that every variable
    moves in float32 and the loss of the second step is lower (a global norm of 1 leaves some
    batch-norm parameters unmoved; larger steps raise the loss on these synthetic weights)."""
    text = pipeline(optimizer=MOMENTUM, train_extra="  gradient_clipping_by_norm: 100.0\n")
    for old, new in (("weighted_sigmoid { }", "weighted_softmax { logit_scale: 2.0 }"),
                     ("weighted_smooth_l1 { }", "weighted_l2 { }"),
                     ("loss_type: CLASSIFICATION", "loss_type: BOTH"),
                     ("localization_weight: 1.0", "localization_weight: 2.0")):
        assert old in text
        text = text.replace(old, new)
    return text


# {case: (pipeline.config text, SSDConfig fields)}
CASES = {
    # The zoo-like config: sigmoid, smooth L1, mining by classification loss, RMSProp, moving
    # average; unfused batch norm (moments, as the 2018 zoo graphs).
    "sigmoid_rmsprop_average": (pipeline, SMALL),
    # ... and the fused batch-norm kernel in training mode (newer exports).
    "softmax_momentum_clipped_fused": (_softmax_pipeline, {**SMALL, "fused_batch_norm": True}),
    # FPN and PPN with their zoo configs' training fields (`focal_pipeline`: sigmoid focal loss
    # without a miner, background encoded as zeros, the losses normalised by the code size too,
    # batch norm updated in place with the zoo's decay, the base taking the feature extractor's
    # hyperparams), momentum with the cosine schedule's warm-up for the first step and its decay
    # for the second; the weight-shared heads' per-feature-map batch norm in training mode, fused
    # as in the OD API's own FPN and PPN exports (FusedBatchNormV3). FPN with separate towers,
    # PPN with one shared tower.
    "fpn_focal_momentum_cosine_fused": (lambda: focal_pipeline(FPN_SMALL), {**FPN_SMALL, "fused_batch_norm": True}),
    "ppn_focal_momentum_cosine_fused": (lambda: focal_pipeline(PPN_SMALL), {**PPN_SMALL, "fused_batch_norm": True}),
}


def _batch():
    rng = np.random.default_rng(0)
    batch = {"image": rng.uniform(-1.0, 1.0, (BATCH, 128, 128, 3)).astype(np.float32),
             "boxes": np.zeros((BATCH, ROWS, 4), np.float32), "classes": np.zeros((BATCH, ROWS), np.int32),
             "num_boxes": np.array([4, 3], np.int32)}
    for i, n in enumerate(batch["num_boxes"]):
        for j in range(n):
            y, x = rng.uniform(0.0, 0.6, 2)
            h, w = rng.uniform(0.15, 0.4, 2)
            batch["boxes"][i, j] = [y, x, y + h, x + w]
            batch["classes"][i, j] = rng.integers(1, SMALL["num_classes"] + 1)
    # One large box, which the anchors of the three 1x1 maps match: every layer then sees a loss.
    batch["boxes"][0, 2] = [0.05, 0.1, 0.95, 0.85]
    # And a small one: FPN's finest level has anchors of 16 and 23 pixels. With these, every
    # FPN level has matched anchors, so its box tower's batch norm at every level gets a gradient.
    batch["boxes"][0, 3] = [0.3, 0.5, 0.44, 0.64]
    # And one that FPN's coarsest level matches (its 128-pixel anchor at the first cell: IoU 0.56).
    batch["boxes"][1, 2] = [0.0, 0.0, 0.75, 0.75]
    return batch


def _tf1_side(config, training, weights, batch):
    step = tf1_step.build_training_step(config, training, BATCH, ROWS)
    session = tf1_step.TrainingSession(step, weights)
    try:
        first = session.run_step(batch)
        after, averages = session.values(), session.averages()
        second = session.run_step(batch)
    finally:
        session.close()
    return {"losses": first["losses"], "gradients": first["gradients"], "after": after, "averages": averages,
            "second": second["losses"], "terms": (first["regularization_terms"], second["regularization_terms"])}


@contextlib.contextmanager
def _graphs_as_written():
    """Within: TF2's functions run without Grappler's arithmetic optimizer, as the TF1 side runs its
    graph without Grappler (`TrainingSession`), for the focal loss cases (module docstring)."""
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"arithmetic_optimization":
                                                      before.get("arithmetic_optimization", True)})


def _tf2_side(config, training, weights, batch):
    if training.loss.classification != "weighted_sigmoid_focal":
        return _tf2_step(config, training, weights, batch)
    with _graphs_as_written():
        return _tf2_step(config, training, weights, batch)


def _tf2_step(config, training, weights, batch):
    keras.utils.set_random_seed(0)
    model = SSDMobileNetV1(config)
    assign.assign(weights, model)
    trainer = Trainer(model, training)
    gradients = _recording_gradients(trainer)
    inputs = {k: tf.constant(v) for k, v in batch.items()}
    first = trainer.train_step(inputs)
    gradients = [g.numpy() for g in gradients]
    after = {v.path: v.numpy() for v in model.weights}
    averages = {}
    if trainer.moving_average is not None:
        averages = {v.path: s.numpy() for v, s in zip(trainer.variables, trainer.moving_average.shadows)}
    second = trainer.train_step(inputs)
    return {"losses": {k: float(v) for k, v in first.items()},
            "gradients": {v.path: g for v, g in zip(trainer.variables, gradients)},
            "after": after, "averages": averages, "second": {k: float(v) for k, v in second.items()},
            "unused": [re.compile(pattern) for pattern, _ in model.unused_tf1_weights]}


def _recording_gradients(trainer) -> list:
    """Variables that hold, after each step of `trainer`, the gradients its step applied: of the
    total loss, before clipping (`Trainer._apply` gets them so, and is wrapped here to copy them
    before it applies them). The step's own gradients, in its own trace: a separate gradient
    function would trace the forward and backward pass a second time (5-7 s a case)."""
    recorded = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in trainer.variables]
    apply = trainer._apply

    def recording(grads):
        for variable, grad in zip(recorded, grads, strict=True):
            variable.assign(tf.convert_to_tensor(grad))
        return apply(grads)

    trainer._apply = recording  # before the step is first traced
    return recorded


# Each case builds and runs both sides in its fixture: 14-29 s for the plain ones (the first in a
# process pays the TF1 builder's warm-up), ~35 s for FPN and PPN. The slow tier, all of them; the
# fast tier keeps the stages' own TF1 comparisons (tests/ssd_mobilenet/training/: optimizers, losses, batch norm).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=sorted(CASES))
def sides(request):
    text, fields = CASES[request.param]
    config = SSDConfig(**fields)
    training = TrainingConfig.from_pipeline_config(text())
    weights = builder.synthetic_weights(config, seed=3)
    batch = _batch()
    tf1, tf2 = _tf1_side(config, training, weights, batch), _tf2_side(config, training, weights, batch)
    unused = lambda name: any(p.search(name) for p in tf2["unused"])  # noqa: E731
    # PPN builds MobileNet to Conv2d_13 and uses Conv2d_11: the OD API's regularisation loss (and
    # so its total) counts the unused layers' kernels, which the converted model does not have.
    # Their terms are left out of TF1's losses compared here, and checked on their own below.
    for losses, terms in zip((tf1["losses"], tf1["second"]), tf1["terms"]):
        left_out = sum(float(t) for n, t in terms.items() if unused(n))
        for name in (tf1_step.REGULARIZATION_LOSS, tf1_step.TOTAL_LOSS):
            if name in losses:
                losses[name] = float(losses[name]) - left_out
    return {"case": request.param, "training": training, "weights": weights, "tf1": tf1, "tf2": tf2,
            "unused": unused}


def _relative_error(got, want) -> float:
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), np.finfo(np.float32).tiny))


def test_losses_of_the_first_step(sides):
    tf1_losses, tf2 = sides["tf1"]["losses"], sides["tf2"]
    assert set(tf1_losses) == set(tf2["losses"]) == {
        tf1_step.LOCALIZATION_LOSS, tf1_step.CLASSIFICATION_LOSS, tf1_step.REGULARIZATION_LOSS, tf1_step.TOTAL_LOSS}
    for name, want in tf1_losses.items():
        assert want > 0, name
        np.testing.assert_allclose(tf2["losses"][name], want, rtol=LOSS_RTOL, err_msg=name)


def test_unused_layers_only_in_the_regularisation_loss(sides):
    """The kernels TF1 regularises and the converted model lacks are exactly the feature extractor's
    unused layers (PPN: MobileNet's Conv2d_12 and Conv2d_13); their gradient is their weight decay
    alone, and their batch norm gets none."""
    terms, grads, unused = sides["tf1"]["terms"][0], sides["tf1"]["gradients"], sides["unused"]
    left_out = sorted(n for n in terms if unused(n))
    if sides["case"].startswith("ppn"):
        assert left_out == [f"FeatureExtractor/MobilenetV1/Conv2d_{i}_{kind}/{kind}_weights".replace(
            "pointwise/pointwise_weights", "pointwise/weights") for i in (12, 13) for kind in ("depthwise", "pointwise")]
    else:
        assert left_out == []
    for name in left_out:
        weight = np.float32(sides["training"].feature_extractor_hyperparams.l2_weight)
        np.testing.assert_allclose(grads[name], weight * sides["weights"][name], rtol=1e-6, err_msg=name)
    assert sorted(n for n in grads if unused(n)) == left_out


def test_every_gradient(sides):
    tf1_grads = {n: g for n, g in sides["tf1"]["gradients"].items() if not sides["unused"](n)}
    tf2_grads = sides["tf2"]["gradients"]
    assert sorted(name_map.tf2_path(n) for n in tf1_grads) == sorted(tf2_grads)
    errors = {n: _relative_error(tf2_grads[name_map.tf2_path(n)], g) for n, g in tf1_grads.items()}
    worst = max(errors, key=errors.get)
    assert errors[worst] <= GRADIENT_RTOL, f"{worst}: relative error {errors[worst]:.3g}"
    # Not vacuous: every variable has a non-zero gradient, and the clipped case has many beyond its norm.
    assert all(np.any(g != 0) for g in tf1_grads.values())
    clip = sides["training"].train.gradient_clipping_by_norm
    if clip:
        assert np.sqrt(sum(np.sum(np.square(g)) for g in tf1_grads.values())) > clip  # the global norm clips


def test_every_variable_after_the_step(sides):
    tf1_after = {n: v for n, v in sides["tf1"]["after"].items() if not sides["unused"](n)}
    tf2_after, before = sides["tf2"]["after"], sides["weights"]
    assert sorted(name_map.tf2_path(n) for n in tf1_after) == sorted(tf2_after)
    for name, want in tf1_after.items():
        got = tf2_after[name_map.tf2_path(name)]
        assert not np.array_equal(want, before[name]), f"{name} did not move"
        assert np.max(np.abs(got - want)) <= WEIGHT_RTOL * np.max(np.abs(want)), name
        error = _relative_error(got - before[name], want - before[name])
        assert error <= GRADIENT_RTOL, f"{name}: update relative error {error:.3g}"


def test_moving_averages_after_the_step(sides):
    tf1_averages, tf2_averages = sides["tf1"]["averages"], sides["tf2"]["averages"]
    if not sides["training"].train.optimizer.use_moving_average:
        assert tf1_averages == {} and tf2_averages == {}
        return
    assert sorted(name_map.tf2_path(n) for n in tf1_averages) == sorted(tf2_averages)
    # decay 0.9999: a shadow moves by 1e-4 of its variable's update, below float32 rounding for some.
    assert sum(not np.array_equal(want, sides["weights"][name]) for name, want in tf1_averages.items()) >= 10
    for name, want in tf1_averages.items():
        got = tf2_averages[name_map.tf2_path(name)]
        assert np.max(np.abs(got - want)) <= WEIGHT_RTOL * np.max(np.abs(want)), name


def test_losses_of_a_second_step(sides):
    first, second = sides["tf1"]["losses"], sides["tf1"]["second"]
    assert second[tf1_step.TOTAL_LOSS] < first[tf1_step.TOTAL_LOSS]
    for name, want in second.items():
        np.testing.assert_allclose(sides["tf2"]["second"][name], want, rtol=SECOND_LOSS_RTOL, err_msg=name)


def _ancestors(op) -> set:
    """The names of `op` and of every op it waits for, by data or control edges."""
    seen, pending = set(), [op]
    while pending:
        op = pending.pop()
        if op.name not in seen:
            seen.add(op.name)
            pending.extend([t.op for t in op.inputs] + list(op.control_inputs))
    return seen


def test_no_update_of_the_tf1_step_runs_before_what_it_reports():
    # The TF1 session may run independent ops in any order or side by side, and its ref variables
    # are updated in place: the losses and each regularization term `run_step` reports must be computed before
    # any variable is updated, or they may read weights partly updated (a second step's
    # regularization loss 1.6e-5 relative off, once in a whole suite's run). (The gradients
    # read no variable once computed, and `GATE_GRAPH` computes them all before any update.)
    # PPN's config: depthwise kernels, whose slim regularization terms are built lazily.
    text, fields = CASES["ppn_focal_momentum_cosine_fused"]
    config, training = SSDConfig(**fields), TrainingConfig.from_pipeline_config(text())
    step = tf1_step.build_training_step(config, training, BATCH, ROWS)
    updates = [op for op in step.graph.get_operations() if op.type.startswith(("Apply", "ResourceApply"))]
    reported = [*step.losses.values(), *step.regularization_terms.values()]
    assert len(updates) == len(step.gradients) and any("depthwise" in n for n in step.regularization_terms)
    for update in updates:
        before = _ancestors(update)
        late = [t.name for t in reported if t.op.name not in before]
        assert not late, f"{update.name} may run before {late[:3]}"
