"""Invariants of the Keras model for the configs of the family (no TF1 graph needed)."""

import numpy as np
import pytest

from tests.conftest import needs_shared, zoo_path
from ssd_mobilenet import SSDConfig, SSDMobileNetV1, count_parameters
from ssd_mobilenet.anchors import generate_anchors


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
