"""The TF1 optimisers, schedules, moving averages and clipping against TF1 itself.

The reference side of each test is TF1's own implementation run in a `tf.compat.v1` graph
and session (`tf.compat.v1.train.RMSPropOptimizer`, ..., `ExponentialMovingAverage`,
`clip_by_global_norm` as `tf.contrib.layers.optimize_loss` applied it), fed the same gradients
step after step; every weight, slot and rate must be equal to the bit. The OD API schedules,
which are not part of TensorFlow, are held to the numbers of the OD API's own unit tests (utils/learning_schedules_test.py).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet.training import moving_average, optimizers, schedules

from tests.conftest import REPO

STEPS = 6
SHAPES = ((3, 4), (4,))


def _gradients(seed=0):
    rng = np.random.default_rng(seed)
    # Gradients of mixed sign and scale, some large enough for clipping to matter.
    return [[(rng.normal(size=s) * rng.choice([0.01, 1.0, 30.0])).astype(np.float32) for s in SHAPES]
            for _ in range(STEPS)]


def _initial(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s).astype(np.float32) for s in SHAPES]


def _tf1_run(make_optimizer, make_rate, grads, initial, clip=None, ema_decay=None, ema_num_updates=False):
    """Per step: the variables (and EMA shadows) after TF1's update with `grads[step]`."""
    g = tf.Graph()
    with g.as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        variables = [tf.compat.v1.get_variable(f"v{i}", initializer=x, use_resource=True) for i, x in enumerate(initial)]
        feeds = [tf.compat.v1.placeholder(tf.float32, s) for s in SHAPES]
        pairs = list(zip(feeds, variables))
        if clip is not None:
            # model_lib's optimize_loss with a float `clip_gradients`: clip_by_global_norm.
            clipped, _ = tf.compat.v1.clip_by_global_norm(feeds, clip)
            pairs = list(zip(clipped, variables))
        rate = make_rate(step)
        train = make_optimizer(rate).apply_gradients(pairs, global_step=step)
        shadows = []
        if ema_decay is not None:
            ema = tf.compat.v1.train.ExponentialMovingAverage(ema_decay, num_updates=step if ema_num_updates else None)
            with tf.control_dependencies([train]):
                train = ema.apply(variables)
            shadows = [ema.average(v) for v in variables]
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            out = []
            for gs in grads:
                r = sess.run(rate)
                sess.run(train, dict(zip(feeds, gs)))
                out.append((r, sess.run(variables), sess.run(shadows)))
    return out


def _tf2_run(optimizer, grads, initial, clip=None, ema_decay=None, ema_num_updates=False):
    variables = [keras.Variable(x, name=f"v{i}") for i, x in enumerate(initial)]
    ema = None
    if ema_decay is not None:
        ema = moving_average.MovingAverage(variables, ema_decay,
                                           num_updates=(lambda: optimizer.iterations) if ema_num_updates else None)

    @tf.function
    def step(gs):
        # The rate this update uses, computed in the graph as the update is (eager `Pow` can
        # round an ulp differently from the graph's, TF1's included).
        rate = tf.identity(optimizer.learning_rate)
        if clip is not None:
            gs = optimizers.clip_gradients_by_global_norm(gs, clip)
        optimizer.apply(gs, variables)
        if ema is not None:
            ema.update()
        return rate

    optimizer.build(variables)
    out = []
    for gs in grads:
        rate = step([tf.constant(x) for x in gs]).numpy()
        out.append((rate, [v.numpy() for v in variables], [s.numpy() for s in ema.shadows] if ema else []))
    return out


def _assert_same(ours, ref):
    for k, ((r1, v1, s1), (r2, v2, s2)) in enumerate(zip(ours, ref)):
        assert np.float32(r1) == np.float32(r2), f"step {k}: rate {r1!r} vs TF1 {r2!r}"
        for a, b in zip(v1, v2):
            np.testing.assert_array_equal(a, b, err_msg=f"step {k}: weights differ from TF1's")
        for a, b in zip(s1, s2):
            np.testing.assert_array_equal(a, b, err_msg=f"step {k}: moving averages differ from TF1's")


def _tf1_exponential(step):
    return tf.compat.v1.train.exponential_decay(0.004, step, 2, 0.95, staircase=True)


OPTIMIZERS = {
    # The OD API builder's arguments (its proto defaults: RMSProp decay 0.9, momentum 0.9, epsilon 1.0).
    "rms_prop": (lambda r: tf.compat.v1.train.RMSPropOptimizer(r, decay=0.9, momentum=0.9, epsilon=1.0),
                 lambda s: optimizers.RMSProp(s, decay=0.9, momentum=0.9, epsilon=1.0)),
    "rms_prop_no_momentum": (lambda r: tf.compat.v1.train.RMSPropOptimizer(r, decay=0.95, momentum=0.0, epsilon=1e-3),
                             lambda s: optimizers.RMSProp(s, decay=0.95, momentum=0.0, epsilon=1e-3)),
    "momentum": (lambda r: tf.compat.v1.train.MomentumOptimizer(r, momentum=0.9),
                 lambda s: optimizers.Momentum(s, momentum=0.9)),
    "adam": (lambda r: tf.compat.v1.train.AdamOptimizer(r), lambda s: optimizers.Adam(s)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_equal_tf1(name):
    tf1_optimizer, ours = OPTIMIZERS[name]
    grads, initial = _gradients(), _initial()
    ref = _tf1_run(tf1_optimizer, _tf1_exponential, grads, initial)
    schedule = schedules.ExponentialDecay(0.004, 2, 0.95, staircase=True)
    _assert_same(_tf2_run(ours(schedule), grads, initial), ref)
    # The schedule changed the rate within the run, and the weights moved.
    assert len({r for r, _, _ in ref}) > 1
    assert not np.array_equal(ref[-1][1][0], initial[0])


def test_keras_rmsprop_is_not_tf1s():
    # Why the module exists: Keras' RMSprop with the same settings takes other steps.
    tf1_optimizer, _ = OPTIMIZERS["rms_prop"]
    grads, initial = _gradients(), _initial()
    ref = _tf1_run(tf1_optimizer, lambda s: tf.constant(0.004), grads, initial)
    keras_run = _tf2_run(keras.optimizers.RMSprop(0.004, rho=0.9, momentum=0.9, epsilon=1.0), grads, initial)
    assert not np.allclose(keras_run[0][1][0], ref[0][1][0], rtol=1e-3, atol=0)


@pytest.mark.parametrize("num_updates", [False, True])
def test_moving_average_and_clipping_equal_tf1(num_updates):
    tf1_optimizer, ours = OPTIMIZERS["momentum"]
    grads, initial = _gradients(seed=3), _initial(seed=4)
    ref = _tf1_run(tf1_optimizer, lambda s: tf.constant(0.01), grads, initial, clip=2.0, ema_decay=0.9,
                   ema_num_updates=num_updates)
    _assert_same(_tf2_run(ours(0.01), grads, initial, clip=2.0, ema_decay=0.9, ema_num_updates=num_updates), ref)
    # The averages lag the weights, and clipping was active (a step's global norm above 2).
    assert not np.array_equal(ref[-1][1][0], ref[-1][2][0])
    assert max(np.sqrt(sum(np.sum(np.square(x)) for x in gs)) for gs in grads) > 2.0


def test_moving_average_copy_to_writes_the_shadows():
    v = keras.Variable(np.array([1.0, 2.0], np.float32))
    ema = moving_average.MovingAverage([v], 0.5)
    v.assign([3.0, 4.0])
    ema.update()
    ema.copy_to()
    np.testing.assert_array_equal(v.numpy(), [2.0, 3.0])




@pytest.mark.parametrize("name", ["rmsprop", "momentum", "adam"])
def test_a_dropped_trace_of_an_update_keeps_nothing(name):
    # Keras' gradient all-reduce registered a global gradient function in a traced step, and
    # AutoGraph's conversion of Adam's `apply` was kept too: either kept the dropped trace and
    # every variable it captured (`optimizers._Optimizer`, `optimizers.Adam.apply`).
    variable = keras.Variable(np.ones((4, 4), np.float32))
    optimizer = {"rmsprop": optimizers.RMSProp, "momentum": optimizers.Momentum, "adam": optimizers.Adam}[name](0.1)
    optimizer.build([variable])
    step = tf.function(lambda: optimizer.apply([tf.ones((4, 4))], [variable]))
    step()
    graph = weakref.ref(step.get_concrete_function().graph)
    del step
    gc.collect()
    assert graph() is None
    assert float(variable.numpy()[0, 0]) != 1.0  # the step ran


@pytest.mark.slow
def test_moving_average_shadows_hold_memory_of_their_own():
    # Made from the weights' values, the shadows must not share the weights' buffers: the first
    # update of either would then copy them, so a training process gains a copy of the weights at
    # its first step, after `train --max-memory` took what was resident before (its budget search
    # counts a size measured first higher than later). Counted by the BFC allocator, which only a
    # fresh process can switch on for the CPU.
    script = """
import numpy as np, keras
from ssd_mobilenet import memory
memory.configure(device="CPU")
from ssd_mobilenet.training import moving_average
weights = [keras.Variable(np.full((256, 1024), i, np.float32)) for i in range(4)]  # 4 MiB
before = memory.memory_info()["current"]
ema = moving_average.MovingAverage(weights, 0.9)
print((memory.memory_info()["current"] - before) / 2**20)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.split()[-1]) >= 4.0, proc.stdout


def _rates(schedule, steps):
    # In a graph, as training computes them (see _tf2_run).
    rate = tf.function(schedule)
    return [float(rate(tf.constant(s, tf.int64))) for s in steps]


def test_exponential_decay_equals_tf1_exponential_decay():
    steps = list(range(0, 40, 3))
    for staircase in (True, False):
        g = tf.Graph()
        with g.as_default():
            step = tf.compat.v1.placeholder(tf.int64, [])
            rate = tf.compat.v1.train.exponential_decay(0.004, step, 7, 0.95, staircase=staircase)
            with tf.compat.v1.Session(graph=g) as sess:
                ref = [sess.run(rate, {step: s}) for s in steps]
        ours = _rates(schedules.ExponentialDecay(0.004, 7, 0.95, staircase=staircase), steps)
        assert [np.float32(x) for x in ours] == ref
        assert len(set(ref)) > 2


def test_schedules_match_the_od_api_unit_tests():
    # utils/learning_schedules_test.py, testExponentialDecayWithBurnin (rtol 1e-4 there).
    burnin = schedules.ExponentialDecay(1.0, 3, 0.1, staircase=True, burnin_learning_rate=0.5, burnin_steps=2,
                                        min_learning_rate=0.05)
    np.testing.assert_allclose(_rates(burnin, range(9)), [.5, .5, 1, 1, 1, .1, .1, .1, .05], rtol=1e-4)
    # testCosineDecayWithWarmup and testCosineDecayAfterTotalSteps (assertAllClose: rtol and atol 1e-6).
    cosine = schedules.CosineDecayWithWarmup(1.0, 100, 0.1, 9)
    np.testing.assert_allclose(_rates(cosine, [0, 4, 8, 9, 100, 101]), [0.1, 0.5, 0.9, 1.0, 0, 0], rtol=1e-6,
                               atol=1e-6)
    # testCosineDecayWithHoldBaseLearningRateSteps.
    hold = schedules.CosineDecayWithWarmup(1.0, 120, 0.1, 9, hold_base_rate_steps=20)
    np.testing.assert_allclose(_rates(hold, [0, 4, 8, 9, 10, 29, 30, 50, 70, 120]),
                               [0.1, 0.5, 0.9, 1.0, 1.0, 1.0, 0.999702, 0.874255, 0.577365, 0.0], rtol=1e-6, atol=1e-6)
    # testManualStepping, testManualSteppingWithWarmup, testManualSteppingWithZeroBoundaries.
    np.testing.assert_allclose(_rates(schedules.ManualStepping([2, 3, 7], [1.0, 2.0, 3.0, 4.0]), range(10)),
                               [1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        _rates(schedules.ManualStepping([4, 6, 8], [0.02, 0.10, 0.01, 0.001], warmup=True), range(9)),
        [0.02, 0.04, 0.06, 0.08, 0.10, 0.10, 0.01, 0.01, 0.001], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_rates(schedules.ManualStepping([], [0.01]), range(4)), [0.01] * 4, rtol=1e-6)


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="boundaries"):
        schedules.ManualStepping([3, 2], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="rates"):
        schedules.ManualStepping([3], [1.0])
    with pytest.raises(ValueError, match="step 0"):
        schedules.ManualStepping([0, 2], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="warmup"):
        schedules.CosineDecayWithWarmup(0.1, 100, warmup_learning_rate=0.2)
    with pytest.raises(ValueError, match="decay_steps"):
        schedules.ExponentialDecay(0.1, 0, 0.9)
