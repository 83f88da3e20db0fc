"""The anchor generators (`ssd_mobilenet.anchor_generators`): the multiscale grid generator against
the OD API's own unit tests (`multiscale_grid_anchor_generator_test.py`, their configurations and
expected corners), and bit for bit against the same generator built of TF1 float32 ops
(`migrate.tf1.builder`, proven against the OD API's FPN export in tests/migrate/tf1/test_builder.py)."""

import numpy as np
import pytest
import tensorflow as tf

from migrate.tf1 import builder
from ssd_mobilenet import SSDConfig, anchor_generators
from ssd_mobilenet.anchor_generators import multiscale_grid

tf1 = tf.compat.v1


def _multiscale(min_level, max_level, anchor_scale, aspect_ratios, scales_per_octave, height=64, width=64):
    """A config whose anchors are the OD API test's generator's: an FPN of as many levels (the
    generator's levels need not be FPN's, only as many), weight-shared heads."""
    return SSDConfig(feature_extractor_type="ssd_mobilenet_v1_fpn", fpn_min_level=3,
                     fpn_max_level=3 + max_level - min_level, use_explicit_padding=True,
                     box_predictor_type="weight_shared_convolutional_box_predictor",
                     anchor_generator_type="multiscale_anchor_generator", anchor_min_level=min_level,
                     anchor_max_level=max_level, anchor_scale=anchor_scale, aspect_ratios=tuple(aspect_ratios),
                     scales_per_octave=scales_per_octave, image_height=max(height, 33), image_width=max(width, 33))


# (test name, generator args, image size, feature map shapes, expected corners in pixels): every case of
# the OD API's test with a static image size (its dynamic-size case is the in-graph form of a 64x64 one).
ODAPI_CASES = [
    ("test_construct_single_anchor", (5, 5, 4.0, [1.0], 1), (64, 64), [(2, 2)],
     [[-48, -48, 80, 80], [-48, -16, 80, 112], [-16, -48, 112, 80], [-16, -16, 112, 112]]),
    ("test_construct_single_anchor_unit_dimensions", (5, 5, 1.0, [1.0], 1), (1, 1), [(2, 2)],
     [[0, 0, 32, 32], [0, 32, 32, 64], [32, 0, 64, 32], [32, 32, 64, 64]]),
    ("test_construct_single_anchor_with_odd_input_dimension", (5, 5, 4.0, [1.0], 1), (65, 65), [(3, 3)],
     [[-64, -64, 64, 64], [-64, -32, 64, 96], [-64, 0, 64, 128], [-32, -64, 96, 64], [-32, -32, 96, 96],
      [-32, 0, 96, 128], [0, -64, 128, 64], [0, -32, 128, 96], [0, 0, 128, 128]]),
    ("test_construct_single_anchor_on_two_feature_maps", (5, 6, 4.0, [1.0], 1), (64, 64), [(2, 2), (1, 1)],
     [[-48, -48, 80, 80], [-48, -16, 80, 112], [-16, -48, 112, 80], [-16, -16, 112, 112], [-96, -96, 160, 160]]),
    ("test_construct_single_anchor_with_two_scales_per_octave", (6, 6, 4.0, [1.0], 2), (64, 64), [(1, 1)],
     [[-96., -96., 160., 160.], [-149.0193, -149.0193, 213.0193, 213.0193]]),
    ("test_construct_single_anchor_with_two_scales_per_octave_and_aspect", (6, 6, 4.0, [1.0, 2.0], 2), (64, 64),
     [(1, 1)], [[-96., -96., 160., 160.], [-149.0193, -149.0193, 213.0193, 213.0193],
                [-58.50967, -149.0193, 122.50967, 213.0193], [-96., -224., 160., 288.]]),
]


@pytest.mark.parametrize("name, args, size, shapes, expected", ODAPI_CASES, ids=[c[0] for c in ODAPI_CASES])
def test_multiscale_anchors_give_the_odapi_unit_tests_corners(name, args, size, shapes, expected):
    """In pixels (`normalize_coordinates: false`, as those tests state them), within the tests' own
    tolerance (assertAllClose: 1e-6 relative and absolute); the offset is half a stride only where
    the image size divides by 2^level (65 does not: the odd-size case's grid starts at 0)."""
    config = _multiscale(*args, *size)
    got = multiscale_grid.generate_anchors(config, shapes, *size, normalize=False)
    np.testing.assert_allclose(got, np.float32(expected), rtol=1e-6, atol=1e-6)


def test_multiscale_anchors_normalised_to_a_non_square_image():
    """The OD API's test_construct_single_anchor_in_normalized_coordinates (64x128 image): each
    coordinate times 1 / its side."""
    config = _multiscale(5, 5, 4.0, [1.0], 1, 64, 128)
    got = anchor_generators.generate_anchors(config, [(2, 2)], 64, 128)
    expected = [[-48. / 64, -48. / 128, 80. / 64, 80. / 128], [-48. / 64, -16. / 128, 80. / 64, 112. / 128],
                [-16. / 64, -48. / 128, 112. / 64, 80. / 128], [-16. / 64, -16. / 128, 112. / 64, 112. / 128]]
    np.testing.assert_allclose(got, np.float32(expected), rtol=1e-6, atol=1e-6)


def test_multiscale_anchors_per_location():
    """The OD API's test_num_anchors_per_location: aspect ratios times scales per octave, per level."""
    assert anchor_generators.anchors_per_location(_multiscale(5, 6, 4.0, [1.0, 2.0], 3)) == [6, 6]


@pytest.mark.parametrize("args, size", [
    ((3, 7, 4.0, [1.0, 2.0, 0.5], 2), (256, 256)),    # the zoo's FPN generator
    ((2, 5, 3.3, [1.0, 0.3333, 3.0], 3), (200, 168)),  # odd levels: offsets 0 where 2^l does not divide
    ((4, 6, 5.0, [0.5], 1), (321, 199)),
])
def test_multiscale_anchors_are_bit_exact_with_tf1_float32_ops(args, size):
    """The numpy anchors equal, bit for bit, the generator as TF1 ops compute it (constants, meshgrid,
    tile_anchors, 1 / size) for the feature map shapes of the config's FPN."""
    from ssd_mobilenet.feature_extractors import feature_map_shapes
    config = _multiscale(*args, *size).replace(fpn_min_level=args[0], fpn_max_level=args[1])
    shapes = feature_map_shapes(config)
    graph = tf.Graph()
    with graph.as_default():
        tensor = builder._multiscale_anchors(config, shapes, *size)
        with tf1.Session(graph=graph) as session:
            want = session.run(tensor)
    got = anchor_generators.generate_anchors(config, shapes)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
