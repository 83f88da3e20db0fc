"""training.builders: optimiser, schedule and moving average from pipeline.configs, the slim L2
regulariser over the right variables, and the batch-norm decay of each layer group."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import needs_shared, zoo_path
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.model import SSDMobileNetV1
from ssd_mobilenet.training import builders, optimizers, schedules
from ssd_mobilenet.training.train_config import TrainingConfig
from tests.ssd_mobilenet.training.training_pipeline import SMALL, pipeline

F32 = lambda x: float(np.float32(x))  # noqa: E731  (proto floats are float32)
# Conv2d_0 + 13 x (depthwise, pointwise); the extra layers are 4 x (1x1, 3x3); 6 maps x 2 heads.
BASE_KERNELS, BASE_DEPTHWISE, EXTRA_KERNELS, HEAD_KERNELS = 27, 13, 8, 12


def config(**kwargs) -> TrainingConfig:
    return TrainingConfig.from_pipeline_config(pipeline(**kwargs))


@pytest.fixture(scope="module")
def model():
    return SSDMobileNetV1(SSDConfig(**SMALL))


@needs_shared
def test_zoo_2018_optimizer_schedule_and_moving_average():
    c = TrainingConfig.from_pipeline_config(zoo_path("ssd_mobilenet_v1_coco_2018_01_28", "pipeline.config"))
    opt = builders.optimizer(c.train.optimizer)
    assert isinstance(opt, optimizers.RMSProp)
    assert (opt.decay, opt.momentum, opt.epsilon) == (F32(0.9), F32(0.9), 1.0)
    rate = opt._learning_rate
    assert isinstance(rate, schedules.ExponentialDecay)
    assert (rate.initial_learning_rate, rate.decay_steps, rate.decay_factor, rate.staircase) == \
        (F32(0.004), 800720, F32(0.95), True)
    assert (rate.burnin_steps, rate.min_learning_rate) == (0, 0.0)
    # Staircase: the rate holds for the first decay period, then drops by the factor.
    assert float(rate(tf.constant(800719, tf.int64))) == np.float32(F32(0.004))
    assert float(rate(tf.constant(800720, tf.int64))) == np.float32(0.004) * np.float32(0.95)
    variables = [tf.Variable(np.ones(3, np.float32))]
    ema = builders.moving_average(c.train.optimizer, variables)
    assert ema.decay == F32(0.9999) and ema._num_updates is None  # proto default; no num_updates


@pytest.mark.parametrize("optimizer, kind, values", [
    ("""momentum_optimizer { learning_rate { cosine_decay_learning_rate { learning_rate_base: 0.2
        total_steps: 1000 warmup_learning_rate: 0.06 warmup_steps: 100 } }
        momentum_optimizer_value: 0.8 }
    use_moving_average: false""",
     optimizers.Momentum, {"momentum": F32(0.8)}),
    ("""adam_optimizer { learning_rate { manual_step_learning_rate { initial_learning_rate: 0.01
        schedule { step: 100 learning_rate: 0.001 } schedule { step: 200 learning_rate: 0.0001 } } } }
    moving_average_decay: 0.99""",
     optimizers.Adam, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
])
def test_edited_optimizers(optimizer, kind, values):
    c = config(optimizer=optimizer)
    opt = builders.optimizer(c.train.optimizer)
    assert isinstance(opt, kind)
    assert {k: getattr(opt, k) for k in values} == values
    rate = opt._learning_rate
    ema = builders.moving_average(c.train.optimizer, [tf.Variable(1.0)])
    if kind is optimizers.Momentum:
        assert isinstance(rate, schedules.CosineDecayWithWarmup) and ema is None
        assert (rate.learning_rate_base, rate.total_steps, rate.warmup_steps) == (F32(0.2), 1000, 100)
        assert float(rate(tf.constant(0, tf.int64))) == pytest.approx(0.06, rel=1e-6)
    else:
        assert isinstance(rate, schedules.ManualStepping) and ema.decay == F32(0.99)
        # initial_learning_rate before the first step, then each step's rate.
        assert rate.boundaries == [100, 200] and rate.rates == [F32(0.01), F32(0.001), F32(0.0001)]
        got = [float(rate(tf.constant(s, tf.int64))) for s in (99, 100, 250)]
        assert got == [np.float32(0.01), np.float32(0.001), np.float32(0.0001)]


def _names(pairs):
    return [w.path for w, _ in pairs]


def _expected_loss(pairs):
    return sum(np.float32(weight) * tf.nn.l2_loss(w).numpy() for w, weight in pairs)


def test_regulariser_default_base_scope(model):
    pairs = builders.regularized_weights(model, config())
    names = _names(pairs)
    assert len(pairs) == BASE_KERNELS + EXTRA_KERNELS + HEAD_KERNELS
    # No biases, no batch norm variables: kernels only.
    assert all(n.endswith("/weights") or n.endswith("/depthwise_weights") for n in names)
    assert sum(n.endswith("/depthwise_weights") for n in names) == BASE_DEPTHWISE
    weights = {n: w for n, (_, w) in zip(names, pairs)}
    # The MobileNet layers take slim's arg scope (0.00004 as a Python float, depthwise included);
    # the extra layers and the heads the config's float32 4e-5.
    assert weights["Conv2d_1_depthwise/depthwise_weights"] == 0.00004
    assert weights["Conv2d_0/weights"] == 0.00004
    assert weights["BoxPredictor_0/ClassPredictor/weights"] == F32(4e-5)
    extra = [n for n in names if n.startswith("Conv2d_13_pointwise_")]
    assert len(extra) == EXTRA_KERNELS and all(weights[n] == F32(4e-5) for n in extra)
    loss = builders.regularization_loss(pairs)
    np.testing.assert_allclose(loss.numpy(), _expected_loss(pairs), rtol=1e-6)
    # Each term is slim's: float32 weight times tf.nn.l2_loss (sum of squares / 2).
    w, weight = pairs[0]
    np.testing.assert_allclose(builders.regularization_loss([(w, weight)]).numpy(),
                               np.float32(weight) * np.sum(np.square(w.numpy())) / 2, rtol=1e-6)


def test_regulariser_override_without_regularizer_leaves_the_base_out(model):
    # The overriding conv_hyperparams have no regularizer: the base layers (depthwise ones
    # included) lose slim's, the heads keep the box predictor's.
    text = pipeline(ssd_extra="").replace(
        '      type: "ssd_mobilenet_v1"', '      type: "ssd_mobilenet_v1"\n'
        "      override_base_feature_extractor_hyperparams: true", 1)
    text = text.replace("\n        regularizer { l2_regularizer { weight: 4e-05 } }", "", 1)  # the feature extractor's
    c = TrainingConfig.from_pipeline_config(text)
    assert c.override_base_feature_extractor_hyperparams and c.feature_extractor_hyperparams.l2_weight == 0.0
    names = _names(builders.regularized_weights(model, c))
    assert len(names) == HEAD_KERNELS and not any(n.endswith("depthwise_weights") for n in names)


def test_regulariser_depthwise_heads_are_regularised_whatever_regularize_depthwise():
    depthwise = SSDMobileNetV1(SSDConfig(**SMALL, use_depthwise=True, box_predictor_use_depthwise=True))
    for flag in ("false", "true"):
        head_activation = "          activation: RELU_6\n"  # the box predictor's block (deeper indent)
        text = pipeline(use_depthwise=True, box_predictor_use_depthwise=True).replace(
            head_activation, f"{head_activation}          regularize_depthwise: {flag}\n", 1)
        c = TrainingConfig.from_pipeline_config(text)
        assert c.box_predictor_hyperparams.regularize_depthwise == (flag == "true")
        names = _names(builders.regularized_weights(depthwise, c))
        # base 13 + extra layers 4 + heads 12 depthwise kernels, as slim's separable_conv2d took them
        assert sum(n.endswith("/depthwise_weights") for n in names) == BASE_DEPTHWISE + 4 + 12
        assert "BoxPredictor_0/BoxEncodingPredictor_depthwise/depthwise_weights" in names


def test_no_regularisation_loss_when_the_config_says_so(model):
    c = config(train_extra="  add_regularization_loss: false\n")
    assert builders.regularized_weights(model, c) == []
    assert float(builders.regularization_loss([])) == 0.0


def test_batch_norm_decay_per_group(model):
    text = pipeline().replace("batch_norm { decay: 0.9997", "batch_norm { decay: 0.99", 1)  # the feature extractor's
    c = TrainingConfig.from_pipeline_config(text)
    builders.set_batch_norm_decay(model, c)
    groups = builders.layer_groups(model)
    assert {layer.norm.decay for layer in groups[builders.BASE]} == {0.9997}  # slim's arg scope
    assert {layer.norm.decay for layer in groups[builders.EXTRA]} == {F32(0.99)}
    overridden = TrainingConfig.from_pipeline_config(text.replace(
        '      type: "ssd_mobilenet_v1"', '      type: "ssd_mobilenet_v1"\n'
        "      override_base_feature_extractor_hyperparams: true", 1))
    builders.set_batch_norm_decay(model, overridden)
    assert {layer.norm.decay for layer in groups[builders.BASE]} == {F32(0.99)}
    assert [len(groups[g]) for g in (builders.BASE, builders.EXTRA, builders.BOX_PREDICTOR)] == \
        [BASE_KERNELS, EXTRA_KERNELS, HEAD_KERNELS]
