"""The speed and memory levers: folded batch norm, batch slices, mixed precision, memory limits,
allocator statistics, the budgeted batch size and profiler traces.

Settings that must precede TensorFlow's device initialisation run in a fresh Python process.
"""

import glob
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO, ZOO_2018, model_for_fixture, needs_shared, random_images
from migrate.tf1.frozen_graph import FrozenGraphRunner
from ssd_mobilenet import SSDConfig, SSDMobileNetV1, detector, memory
from ssd_mobilenet.box_predictors.convolutional import MERGED_CHANNEL_MULTIPLE, BoxPredictor
from ssd_mobilenet.model import fold_batch_norm
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

SMALL = SSDConfig(num_classes=3, image_height=96, image_width=96)


@pytest.fixture(scope="module")
def zoo(zoo_fixture):
    model, graph_def = model_for_fixture(zoo_fixture(ZOO_2018))
    return model, graph_def


@pytest.fixture(scope="module")
def folded(zoo):
    """`folded(freeze_weights) -> Detector`: the zoo model's folded detector, made once per setting
    (the mixed precision case compares with the float32 one)."""
    model, _ = zoo
    made = {}

    def get(freeze_weights):
        if freeze_weights not in made:
            made[freeze_weights] = detector.Detector(model, fold_batch_norm=True, freeze_weights=freeze_weights)
        return made[freeze_weights]
    return get


@pytest.fixture(scope="module")
def session_detections(zoo):
    """[(images, the TF1 session's detections)] at two shapes, the session run once for both settings."""
    _, graph_def = zoo
    runner = FrozenGraphRunner(graph_def)
    out = []
    for shape in [(2, 300, 300), (1, 480, 640)]:
        images = random_images(sum(shape) + 1, *shape)
        out.append((images, runner.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS})))
    runner.close()
    return out


@needs_shared
@pytest.mark.parametrize("freeze_weights", [False, True])
def test_folded_detector_matches_the_tf1_session_with_default_optimisations(zoo, folded, session_detections,
                                                                              freeze_weights):
    model, _ = zoo
    # The TF1 session folds batch norm the same way, so the folded model (heads merged; with
    # freeze_weights its weights graph constants, as the TF1 frozen graph's are) is held to
    # it, at 1e-5, with exact counts and classes; the exact model stays the reference.
    det = folded(freeze_weights)
    assert det.model.batch_norm_folded and not model.batch_norm_folded
    assert det.weights_frozen == freeze_weights
    assert len(det.model.weights) < len(model.weights)
    for images, ref in session_detections:
        out = {k: v.numpy() for k, v in det(images).items()}
        np.testing.assert_array_equal(out["num_detections"], ref["num_detections"])
        np.testing.assert_array_equal(out["detection_classes"], ref["detection_classes"])
        np.testing.assert_allclose(out["detection_boxes"], ref["detection_boxes"], rtol=0, atol=1e-5)
        np.testing.assert_allclose(out["detection_scores"], ref["detection_scores"], rtol=0, atol=1e-5)


def test_folding_keeps_every_layer_within_float32_rounding():
    model = SSDMobileNetV1(SMALL)
    rng = np.random.default_rng(0)
    # Non-trivial batch norm statistics, so folding has something to fold.
    for v in model.weights:
        if v.path.endswith(("moving_variance", "gamma")):
            v.assign(rng.uniform(0.5, 2.0, v.shape).astype(np.float32))
        elif v.path.endswith(("moving_mean", "beta")):
            v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    folded = fold_batch_norm(model)
    x = rng.uniform(-1, 1, (2, 96, 96, 3)).astype(np.float32)
    exact, fast = model(x), folded(x)
    for key in exact:
        scale = float(np.max(np.abs(exact[key])))
        np.testing.assert_allclose(fast[key], exact[key], rtol=0, atol=1e-5 * max(scale, 1.0))
    with pytest.raises(ValueError, match="already"):
        fold_batch_norm(folded)
    with pytest.raises(ValueError, match="precision"):
        fold_batch_norm(model, precision="float64")


@pytest.mark.parametrize("heads", [{}, {"box_predictor_kernel_size": 3},
                                   {"box_predictor_kernel_size": 3, "box_predictor_use_depthwise": True}])
def test_folded_copy_runs_plain_conv_heads_as_one_conv(heads):
    model = SSDMobileNetV1(SSDConfig(num_classes=5, image_height=96, image_width=96, **heads))
    rng = np.random.default_rng(1)
    for v in model.weights:  # non-zero biases, so a bias put in the wrong channel shows
        if "BoxPredictor" in v.path and v.path.endswith("biases"):
            v.assign(rng.normal(0, 1, v.shape).astype(np.float32))
    folded = fold_batch_norm(model)
    predictors = [layer for layer in folded.layers if isinstance(layer, BoxPredictor)]
    assert len(predictors) == 6
    merged = not heads.get("box_predictor_use_depthwise", False)
    for p in predictors:
        assert p.merge_heads == merged
        if merged:  # box codes + class logits (6 classes with background), padded to 16
            assert p.merged.filters % MERGED_CHANNEL_MULTIPLE == 0
            assert p.num_anchors * (4 + 6) <= p.merged.filters < p.num_anchors * (4 + 6) + 16
    x = rng.uniform(-1, 1, (2, 96, 96, 3)).astype(np.float32)
    exact, fast = model(x), folded(x)
    for key in exact:
        scale = float(np.max(np.abs(exact[key])))
        np.testing.assert_allclose(fast[key], exact[key], rtol=0, atol=1e-5 * max(scale, 1.0), err_msg=key)
    if merged:
        with pytest.raises(ValueError, match="unmerged"):
            predictors[0].merge_from(predictors[1])


@pytest.fixture(scope="module")
def whole_batches():
    """(model of `SMALL`, {n: (images uint8 [n, 120, 90, 3], the whole-batch detector's outputs)})
    for n = 5 and 2: the reference of the slicing cases, traced and run once for all of them."""
    model = SSDMobileNetV1(SMALL)
    whole = detector.Detector(model, slice_size=None)
    out = {}
    for n in (5, 2):
        images = random_images(n + 10, n, 120, 90)
        out[n] = images, {k: v.numpy() for k, v in whole(images).items()}
    return model, out


@pytest.mark.parametrize("slice_size, freeze_weights", [(1, False), (3, False), (3, True)])
def test_batch_slices_give_the_whole_batch_result(whole_batches, slice_size, freeze_weights):
    model, wholes = whole_batches
    sliced = detector.Detector(model, slice_size=slice_size, freeze_weights=freeze_weights, concurrent_slices=1)
    # With frozen weights every weight is a constant of the graph, inside the loop too.
    assert len(sliced.concrete_function.captured_inputs) == (0 if freeze_weights else len(model.weights))
    # 5 images: the last slice is shorter; 2 images: one slice of 3, run without the loop.
    for n in (5, 2) if slice_size > 1 else (5,):
        images, a = wholes[n]
        b = sliced(images)
        for key in a:
            np.testing.assert_allclose(b[key].numpy(), a[key], rtol=0, atol=1e-6, err_msg=f"{n} {key}")
    with pytest.raises(ValueError, match="slice_size"):
        detector.Detector(model, slice_size=0)
    # XLA compiles the batch whole (it cannot compile the slice loop over a dynamic batch).
    assert detector.Detector(model, jit_compile=True, slice_size=2).slice_size is None


def test_concurrent_slices_give_the_whole_batch_result(whole_batches):
    model, wholes = whole_batches
    # 5 slices of 1 image, 3 in flight at a time, the weights constants made inside the loop.
    concurrent = detector.Detector(model, slice_size=1, concurrent_slices=3, freeze_weights=True)
    images, a = wholes[5]
    b = concurrent(images)
    for key in a:
        np.testing.assert_allclose(b[key].numpy(), a[key], rtol=0, atol=1e-6, err_msg=key)
    with pytest.raises(ValueError, match="concurrent_slices"):
        detector.Detector(model, concurrent_slices=0)


def _iou(a, b):
    """IoU of [K, 4] vs [M, 4] [ymin, xmin, ymax, xmax] boxes -> [K, M]."""
    y0, x0 = np.maximum(a[:, None, 0], b[None, :, 0]), np.maximum(a[:, None, 1], b[None, :, 1])
    y1, x1 = np.minimum(a[:, None, 2], b[None, :, 2]), np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(y1 - y0, 0, None) * np.clip(x1 - x0, 0, None)
    area = lambda t: (t[:, 2] - t[:, 0]) * (t[:, 3] - t[:, 1])
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


@needs_shared
@pytest.mark.parametrize("precision", ["mixed_bfloat16"])
def test_mixed_precision_detections_agree_with_float32(zoo, folded, precision):
    model, _ = zoo
    images = random_images(21, 2, 300, 300)
    ref = {k: v.numpy() for k, v in folded(False)(images).items()}
    det = detector.Detector(model, precision=precision, fold_batch_norm=True)
    out = {k: v.numpy() for k, v in det(images).items()}
    assert all(v.dtype == np.float32 for v in out.values())
    np.testing.assert_array_equal(out["num_detections"], ref["num_detections"])
    # 16-bit scores tie and reorder; agreement is by box and class: each of float32's 20 best
    # detections has a same-class detection with IoU >= 0.5 among the mixed model's.
    for i in range(len(images)):
        iou = _iou(ref["detection_boxes"][i, :20], out["detection_boxes"][i])
        same = ref["detection_classes"][i, :20, None] == out["detection_classes"][i][None, :]
        assert np.all(np.any((iou >= 0.5) & same, axis=1))
        np.testing.assert_allclose(out["detection_scores"][i, :20], ref["detection_scores"][i, :20], atol=0.02)
    with pytest.raises(ValueError, match="folded"):
        detector.Detector(model, precision=precision, fold_batch_norm=False)


def test_configure_after_devices_exist_is_refused():
    tf.constant(1.0) + 1.0  # initialises the devices of this process
    with pytest.raises(InputError, match="already initialised"):
        memory.configure(memory_limit_mb=100)
    before = os.environ.get(memory.WEIGHT_CACHE_ENV)
    with pytest.raises(InputError, match="already initialised"):
        memory.configure(onednn_weight_cache=True)
    assert os.environ.get(memory.WEIGHT_CACHE_ENV) == before  # nothing applied when refused
    with pytest.raises(InputError, match="exclude"):
        memory.configure(memory_growth=True, memory_limit_mb=100)


# The settings that must precede TensorFlow's devices (a CPU allocator limit, the oneDNN weight
# cache) in two fresh processes serving three cases: both configure the same limit (generous: the
# budgeted batch runs under it), the second also the weight cache; both first run the same seeded
# model's detections (the weight cache case compares them), then the first goes on with the budgeted
# batch size and the limit's refusal. One TensorFlow start per setting, not four.
LIMIT_MB = 1024
SETTINGS_RUN = """
    import sys, warnings
    import numpy as np, keras, tensorflow as tf
    from ssd_mobilenet import SSDConfig, SSDMobileNetV1, detector, memory
    cache, detections = sys.argv[1] == "1", sys.argv[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        applied = memory.configure(memory_limit_mb=%d, onednn_weight_cache=cache)
    assert applied["device"] == "CPU" and applied["memory_limit_mb"] == %d, applied
    assert applied["onednn_weight_cache"] == cache, applied
    assert any("CPU" in str(w.message) for w in caught), "the CPU fallback must be said"

    # The weight cache case: the same seeded model across batch sizes (the slice loop and its
    # one-slice branch) and after a first call with other images.
    keras.utils.set_random_seed(0)
    det = detector.Detector(SSDMobileNetV1(SSDConfig(num_classes=3, image_height=96, image_width=96)),
                            fold_batch_norm=True)
    rng = np.random.default_rng(1)
    out = {}
    for i, n in enumerate([1, 3, 1, 5]):
        images = rng.integers(0, 256, (n, 120, 160, 3), dtype=np.uint8)
        for k, v in det(images).items():
            out[f"{i}/{k}"] = v.numpy()
    np.savez(detections, **out)
    if cache:
        sys.exit(0)

    # The budgeted batch size.
    det = detector.Detector(SSDMobileNetV1(SSDConfig(num_classes=3, image_height=192, image_width=192)),
                            slice_size=None)

    def peak(n):  # measured as max_batch_size measures it (same images, the highest of 3 runs)
        images = tf.constant(np.random.default_rng(0).integers(0, 256, (n, 240, 320, 3), dtype=np.uint8))
        run = lambda: [t.numpy() for t in det(images).values()]
        run()
        return max(memory.measure_peak(run) for _ in range(3))

    peaks = {n: peak(n) for n in range(1, 7)}
    # The peak grows by the BFC allocator's chunks, in uneven steps (0.1 to 9 MB here), and
    # moves by up to ~1 MB between runs and processes (batch 3 measured below batch 2 once),
    # so the budget goes halfway across the widest gap between all batches <= k and all > k.
    def gap(k):
        return min(peaks[j] for j in range(k + 1, 7)) - max(peaks[j] for j in range(1, k + 1))
    k = max(range(2, 6), key=gap)
    assert gap(k) > 2**20, peaks
    budget = max(peaks[j] for j in range(1, k + 1)) + gap(k) // 2
    n = memory.max_batch_size(det, budget, image_size=(240, 320), limit=16)
    print("n", n == k, peak(n) <= budget, peak(n + 1) > budget, n, k, peaks)
    print("none fits", memory.max_batch_size(det, 1024, image_size=(240, 320)))

    # The limit, last (an allocation it refuses).
    small = tf.random.uniform([4 * 2**20])              # 16 MiB: fits
    print("small", memory.memory_info()["current"] >= 16 * 2**20)
    try:
        big = tf.random.uniform([512 * 2**20])         # 2 GiB: over the limit
        print("big allocated")
    except tf.errors.ResourceExhaustedError:
        print("big refused")
""" % (LIMIT_MB, LIMIT_MB)


@pytest.fixture(scope="module")
def settings_runs(tmp_path_factory):
    """{"0": (process, detections npz), "1": ...}: `SETTINGS_RUN` without and with the weight cache."""
    root = tmp_path_factory.mktemp("runtime_settings")
    environ = {k: v for k, v in os.environ.items() if k not in (memory.WEIGHT_CACHE_ENV, memory.BFC_ENV,
                                                                  memory.BFC_LIMIT_ENV)}
    runs = {}
    for cache in ("0", "1"):
        path = str(root / f"cache{cache}.npz")
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SETTINGS_RUN), cache, path],
                              capture_output=True, text=True, timeout=600,
                              env={**environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"})
        runs[cache] = (proc, path)
    return runs


@pytest.mark.slow
def test_memory_limit_is_honoured_on_the_cpu(settings_runs):
    proc, _ = settings_runs["0"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "small True" in proc.stdout and "big refused" in proc.stdout


@pytest.mark.slow
def test_onednn_weight_cache_keeps_the_detections(settings_runs):
    # The cache (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS, read once per process) must not change what the
    # detector computes; the same seeded model runs with and without it.
    results = {}
    for cache, (proc, path) in settings_runs.items():
        assert proc.returncode == 0, proc.stderr[-2000:]
        results[cache] = dict(np.load(path))
    assert results["0"].keys() == results["1"].keys() and len(results["0"]) == 4 * 8
    for key, value in results["0"].items():
        # The cached filter is the same reordered filter: the same arithmetic, bit for bit.
        np.testing.assert_array_equal(results["1"][key], value, err_msg=key)


def test_memory_info_needs_the_bfc_allocator_on_the_cpu(monkeypatch):
    # The refusal is read from the environment TensorFlow's CPU allocator was chosen by, so this
    # process (whatever its allocator) asks as a process started without TF_CPU_ALLOCATOR_USE_BFC would.
    monkeypatch.delenv(memory.BFC_ENV, raising=False)
    assert not memory.memory_stats_available("CPU:0")
    with pytest.raises(InputError, match="CPU:0: the allocator keeps no statistics; set "
                                                         "TF_CPU_ALLOCATOR_USE_BFC=true first"):
        memory.memory_info("CPU:0")
    with pytest.raises(InputError, match="TF_CPU_ALLOCATOR_USE_BFC"):
        memory.measure_peak(lambda: None, "CPU:0")


@pytest.mark.slow
def test_max_batch_size_stays_under_the_budget(settings_runs):
    proc, _ = settings_runs["0"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "n True True True" in proc.stdout and "none fits 0" in proc.stdout, proc.stdout


def test_trace_writes_a_profiler_trace(tmp_path):
    with memory.trace(str(tmp_path)):
        tf.reduce_sum(tf.ones([64, 64]) @ tf.ones([64, 64])).numpy()
    assert glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))
