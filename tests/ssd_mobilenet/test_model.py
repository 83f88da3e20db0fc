"""Invariants of the Keras model for the configs of the family (no TF1 graph needed)."""

import numpy as np
import pytest

from tests.conftest import needs_shared, zoo_path
from ssd_mobilenet import SSDConfig, SSDMobileNetV1, count_parameters
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.anchor_generators import generate_anchors


def _tf1_variables(name):
    out = {}
    with open(zoo_path(name, "variables.txt")) as f:
        for line in f:
            parts = line.split()
            if parts:
                out[parts[0]] = line
    return out


@pytest.fixture(scope="module")
def zoo_model():
    return SSDMobileNetV1(SSDConfig())


def test_zoo_model_has_the_checkpoint_weights(zoo_model):
    assert len(zoo_model.weights) == 199
    assert count_parameters(zoo_model) == 6_845_183
    assert zoo_model.feature_map_shapes == [(19, 19), (10, 10), (5, 5), (3, 3), (2, 2), (1, 1)]
    assert zoo_model.anchors.shape == (1917, 4)


@needs_shared
def test_weight_names_and_shapes_match_variables_txt(zoo_model):
    from migrate.tf1.name_map import tf2_path
    import re
    expected = {}
    with open(zoo_path("ssd_mobilenet_v1_coco_2018_01_28", "variables.txt")) as f:
        for line in f:
            m = re.match(r"\s*(\S+)\s+(.*)$", line)
            if m and m.group(1) != "global_step" and "/" in m.group(1):
                shape = tuple(int(x) for x in re.findall(r"\d+", m.group(2)))
                expected[tf2_path(m.group(1))] = shape
    got = {v.path: tuple(v.shape) for v in zoo_model.weights}
    assert got == expected


@pytest.mark.parametrize("kwargs, maps, anchors, weights", [
    # 0.75 depth multiplier (sample config): channels scale, anchors do not.
    (dict(depth_multiplier=0.75), [(19, 19, 384), (10, 10, 768), (5, 5, 384), (3, 3, 192), (2, 2, 192), (1, 1, 96)],
     1917, 199),
    (dict(num_classes=1), [(19, 19, 512), (10, 10, 1024), (5, 5, 512), (3, 3, 256), (2, 2, 256), (1, 1, 128)],
     1917, 199),
    (dict(num_classes=29), None, 1917, 199),
    (dict(image_height=200, image_width=200), [(13, 13, 512), (7, 7, 1024), (4, 4, 512), (2, 2, 256), (1, 1, 256),
                                              (1, 1, 128)], 13 * 13 * 3 + (49 + 16 + 4 + 1 + 1) * 6, 199),
    # Odd, non-square input: TF SAME rounds up at every stride-2 layer.
    (dict(image_height=257, image_width=311), [(17, 20, 512), (9, 10, 1024), (5, 5, 512), (3, 3, 256), (2, 2, 256),
                                               (1, 1, 128)], 17 * 20 * 3 + (90 + 25 + 9 + 4 + 1) * 6, 199),
    (dict(num_classes=2, use_depthwise=True, box_predictor_use_depthwise=True, box_predictor_kernel_size=3,
          depth_multiplier=0.5, min_depth=16),
     [(19, 19, 256), (10, 10, 512), (5, 5, 256), (3, 3, 128), (2, 2, 128), (1, 1, 64)], 1917, 279),
])
def test_family_configs_build(kwargs, maps, anchors, weights):
    config = SSDConfig(**kwargs)
    model = SSDMobileNetV1(config)
    fmaps = [tuple(model.get_layer(n).output.shape[1:]) for n in model.feature_map_names]
    if maps is not None:
        assert fmaps == maps
    assert model.anchors.shape == (anchors, 4)
    assert len(model.weights) == weights
    out = model(np.zeros((2,) + tuple(model.inputs[0].shape[1:]), np.float32))
    assert out["box_encodings"].shape == (2, anchors, 4)
    assert out["class_predictions_with_background"].shape == (2, anchors, config.num_classes + 1)


def test_depthwise_zoo_export_weight_count():
    # custom_nc2_use_depthwise: 280 checkpoint variables = 279 weights + global_step.
    model = SSDMobileNetV1(SSDConfig(num_classes=2, use_depthwise=True, box_predictor_use_depthwise=True,
                                     box_predictor_kernel_size=3))
    assert len(model.weights) == 279
    names = {v.path for v in model.weights}
    assert "BoxPredictor_0/ClassPredictor_depthwise/depthwise_weights" in names
    assert "Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512_depthwise/BatchNorm/gamma" in names


@needs_shared
def test_anchors_bit_exact_with_the_zoo_graph():
    expected = np.load(zoo_path("ssd_mobilenet_v1_coco_2018_01_28", "anchors_300x300.npy"))
    got = generate_anchors(SSDConfig(), [(19, 19), (10, 10), (5, 5), (3, 3), (2, 2), (1, 1)])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


def test_non_square_anchors_scale_the_base_size():
    config = SSDConfig(image_height=300, image_width=600)
    a = generate_anchors(config, [(1, 2)] * 6)
    h = a[:, 2] - a[:, 0]
    w = a[:, 3] - a[:, 1]
    # Layer 0 has 1x2 cells x 3 anchors; anchor 6 is layer 1's first, aspect ratio 1.0.
    # In pixels it is square, so in normalised units of a 300x600 image w/h = 300/600.
    np.testing.assert_allclose(w[6] / h[6], 0.5, rtol=1e-6)


def test_legacy_anchor_order_moves_the_interpolated_anchor():
    new = generate_anchors(SSDConfig(), [(1, 1)] * 6)
    old = generate_anchors(SSDConfig(interpolated_anchor_after_unit_ratio=True), [(1, 1)] * 6)
    np.testing.assert_array_equal(old[3], new[3])
    np.testing.assert_array_equal(old[4], new[8])
    np.testing.assert_array_equal(old[5:9], new[4:8])


FPN_640 = "ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config"
PPN_300 = "ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync.config"


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name, maps, anchors, weights, scopes", [
    # Levels 3..7: Conv2d_5, 11 and 13 (strides 8, 16, 32) through the pyramid, two bottom-up convs.
    (FPN_640, [(80, 80, 256), (40, 40, 256), (20, 20, 256), (10, 10, 256), (5, 5, 256)], 51150, 333,
     ["fpn/top_down/projection_3", "fpn/top_down/projection_2", "fpn/top_down/smoothing_2",
      "fpn/top_down/projection_1", "fpn/top_down/smoothing_1", "fpn/bottom_up_Conv2d_14", "fpn/bottom_up_Conv2d_15"]),
    # Conv2d_11_pointwise and its five max-pools; MobileNet's Conv2d_12 and 13 not built.
    (PPN_300, [(19, 19, 512), (10, 10, 512), (5, 5, 512), (3, 3, 512), (2, 2, 512), (1, 1, 512)], 3000, 144,
     [f"MaxPool2d_{i}_2x2" for i in range(5)]),
])
def test_zoo_fpn_and_ppn_build(name, maps, anchors, weights, scopes):
    """The zoo's FPN 640 and PPN 300: feature maps, anchors (the issue's 51150 for FPN), weight count
    (that of the OD API export of the same config in ../shared, variables.txt), and the layers after
    MobileNet named by their TF1 op scopes."""
    model = SSDMobileNetV1(read_pipeline_config(zoo_path("sample_configs", name)))
    assert [tuple(model.get_layer(n).output.shape[1:]) for n in model.feature_map_names] == maps
    assert model.anchors.shape == (anchors, 4) and len(model.weights) == weights
    assert [s for s in model.endpoint_scopes.values() if not s.startswith("Conv2d_")] == scopes
    assert "Conv2d_12_depthwise" not in model.endpoint_scopes if name == PPN_300 else True


def _nontrivial(model, seed):
    """Batch norm statistics and biases away from their initial values, so folding has work to do."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if v.path.endswith(("moving_variance", "gamma")):
            v.assign(rng.uniform(0.5, 2.0, v.shape).astype(np.float32))
        elif v.path.endswith(("moving_mean", "beta", "biases")):
            v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("fields", [
    dict(feature_extractor_type="ssd_mobilenet_v1_fpn", fpn_min_level=3, fpn_max_level=6, use_depthwise=True,
         use_explicit_padding=True, box_predictor_depth=16, box_predictor_num_layers_before_predictor=2,
         box_predictor_use_depthwise=True, box_predictor_kernel_size=3,
         anchor_generator_type="multiscale_anchor_generator", anchor_max_level=6,
         aspect_ratios=(1.0, 2.0, 0.5), image_height=104, image_width=136),
    dict(feature_extractor_type="ssd_mobilenet_v1_ppn", box_predictor_depth=16,
         box_predictor_num_layers_before_predictor=1, box_predictor_kernel_size=1, share_prediction_tower=True,
         reduce_boxes_in_lowest_layer=False, image_height=96, image_width=96),
])
def test_fpn_and_ppn_fold_their_batch_norm_and_round_trip_a_checkpoint(fields, tmp_path):
    """The inference copy folds every feature extractor batch norm (FPN's separable convs into their
    pointwise kernels) and keeps the weight-shared heads' per-map batch norm, within float32
    rounding of the model; `detector.save` and the strict `load_model` give the model back."""
    from ssd_mobilenet import detector
    from ssd_mobilenet.box_predictors.weight_shared import WeightSharedConvolutionalBoxPredictor
    from ssd_mobilenet.model import fold_batch_norm
    config = SSDConfig(num_classes=4, depth_multiplier=0.25,
                       box_predictor_type="weight_shared_convolutional_box_predictor", **fields)
    model = SSDMobileNetV1(config)
    _nontrivial(model, 2)
    folded = fold_batch_norm(model)
    assert not any(v.path.endswith("moving_mean") and not v.path.startswith("WeightShared") for v in folded.weights)
    assert isinstance(folded.get_layer("WeightSharedConvolutionalBoxPredictor"), WeightSharedConvolutionalBoxPredictor)
    x = np.random.default_rng(3).uniform(-1, 1, (2, config.image_height, config.image_width, 3)).astype(np.float32)
    exact, fast = model(x), folded(x)
    for key in exact:
        scale = float(np.max(np.abs(exact[key])))
        np.testing.assert_allclose(fast[key], exact[key], rtol=0, atol=1e-5 * max(scale, 1.0), err_msg=key)
    detector.save(model, str(tmp_path))
    again = detector.load_model(str(tmp_path))
    assert again.config == config
    for key, value in again(x).items():
        np.testing.assert_array_equal(value, exact[key])


@pytest.mark.parametrize("min_level, stem_end", [(2, "Conv2d_3_pointwise"), (3, "Conv2d_5_pointwise")])
def test_fpn_stem_ends_before_the_finest_tapped_layer(min_level, stem_end):
    """The Detector runs the high-resolution stem on slices (`split`); the rest of the network must
    depend on the stem only through its last layer, so a level-2 FPN (tapping Conv2d_3) ends it there."""
    config = SSDConfig(num_classes=2, depth_multiplier=0.25, image_height=96, image_width=96,
                       feature_extractor_type="ssd_mobilenet_v1_fpn", fpn_min_level=min_level, fpn_max_level=5,
                       box_predictor_type="weight_shared_convolutional_box_predictor", box_predictor_kernel_size=3,
                       anchor_generator_type="multiscale_anchor_generator", anchor_min_level=min_level,
                       anchor_max_level=5, aspect_ratios=(1.0,), scales_per_octave=1)
    model = SSDMobileNetV1(config)
    assert model.stem_end == stem_end
    stem, head = model.split()  # keras refuses a head whose inputs do not reach its outputs
    x = np.random.default_rng(0).uniform(-1, 1, (1, 96, 96, 3)).astype(np.float32)
    np.testing.assert_array_equal(head(stem(x))["box_encodings"], model(x)["box_encodings"])
