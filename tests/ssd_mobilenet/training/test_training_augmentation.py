"""ssd_mobilenet.training.augmentation: the geometry against the numbers of the OD API's unit tests
(research/object_detection/core/{box_list_ops,preprocessor}_test.py, TF1 era; inputs and expected
values carried over, each test names its source), and the random crop's properties."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet.training import augmentation as aug

# preprocessor_test.createTestBoxes / createTestLabels.
TEST_BOXES = np.array([[0.0, 0.25, 0.75, 1.0], [0.25, 0.5, 0.75, 1.0]], np.float32)
TEST_LABELS = np.array([1, 2], np.int32)
# box_list_ops_test's window and corners (in pixels: the helpers do not assume [0, 1]).
WINDOW = np.array([0, 0, 9, 14], np.float32)
CORNERS = np.array([[5.0, 5.0, 6.0, 6.0], [-1.0, -2.0, 4.0, 5.0], [2.0, 3.0, 5.0, 9.0],
                    [0.0, 0.0, 9.0, 14.0], [-10.0, -10.0, -9.0, -9.0], [-100.0, -100.0, 300.0, 600.0]], np.float32)
IOA_1 = np.array([[4.0, 3.0, 7.0, 5.0], [5.0, 6.0, 10.0, 7.0]], np.float32)
IOA_2 = np.array([[3.0, 4.0, 6.0, 8.0], [14.0, 14.0, 15.0, 15.0], [0.0, 0.0, 20.0, 20.0]], np.float32)


def colorful_image():
    """preprocessor_test.createColorfulTestImage: 200x400, four flat quadrants."""
    q = lambda r, g, b: np.broadcast_to(np.array([r, g, b], np.uint8), (100, 200, 3))  # noqa: E731
    return np.concatenate([np.concatenate([q(255, 0, 0), q(255, 255, 0)], 1),
                           np.concatenate([q(255, 0, 255), q(128, 128, 128)], 1)], 0)


def test_flip_boxes_left_right():
    # preprocessor_test.testFlipBoxesLeftRight / expectedBoxesAfterLeftRightFlip.
    np.testing.assert_array_equal(aug.flip_boxes_left_right(TEST_BOXES).numpy(),
                                  [[0.0, 0.0, 0.75, 0.75], [0.25, 0.0, 0.75, 0.5]])


def test_flip_image_mirrors_pixels_and_boxes_together():
    image = np.zeros([4, 8, 3], np.uint8)
    image[1:3, 0:2] = 255  # an object at the left edge, box [0.25, 0, 0.75, 0.25]
    flipped, boxes = aug.flip_left_right(image, [[0.25, 0.0, 0.75, 0.25]])
    assert flipped.numpy()[1:3, 6:8].min() == 255 and flipped.numpy()[:, :6].max() == 0
    np.testing.assert_array_equal(boxes.numpy(), [[0.25, 0.75, 0.75, 1.0]])


def test_random_horizontal_flip_is_one_or_the_other_and_seeded():
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    outcomes = set()
    for s in range(16):
        out, boxes = aug.random_horizontal_flip(image, TEST_BOXES, tf.constant([7, s]))
        again, _ = aug.random_horizontal_flip(image, TEST_BOXES, tf.constant([7, s]))
        np.testing.assert_array_equal(out.numpy(), again.numpy())
        flipped = not np.array_equal(out.numpy(), image)
        np.testing.assert_array_equal(out.numpy(), image[:, ::-1] if flipped else image)
        np.testing.assert_array_equal(boxes.numpy(), aug.flip_boxes_left_right(TEST_BOXES) if flipped else TEST_BOXES)
        outcomes.add(flipped)
    assert outcomes == {True, False}


def test_prune_completely_outside_window():
    # box_list_ops_test.test_prune_completely_outside_window: keeps [0, 1, 2, 3, 5].
    keep = aug.prune_completely_outside_window(CORNERS, WINDOW).numpy()
    assert np.flatnonzero(keep).tolist() == [0, 1, 2, 3, 5]


def test_prune_completely_outside_window_of_no_boxes():
    # box_list_ops_test.test_prune_completely_outside_window_with_empty_boxlist.
    assert aug.prune_completely_outside_window(np.zeros([0, 4], np.float32), WINDOW).shape == (0,)


def test_intersection_over_area():
    # box_list_ops_test.test_ioa.
    np.testing.assert_allclose(aug.intersection_over_area(IOA_1, IOA_2).numpy(),
                               [[2.0 / 12.0, 0, 6.0 / 400.0], [1.0 / 12.0, 0.0, 5.0 / 400.0]], rtol=1e-6)
    np.testing.assert_allclose(aug.intersection_over_area(IOA_2, IOA_1).numpy(),
                               [[2.0 / 6.0, 1.0 / 5.0], [0, 0], [6.0 / 6.0, 5.0 / 5.0]], rtol=1e-6)


def test_prune_non_overlapping_boxes():
    # box_list_ops_test.test_prune_non_overlapping_boxes (min_overlap 0.5): all of boxes1 kept
    # against boxes2, none of boxes2 against boxes1.
    assert aug.prune_non_overlapping_boxes(IOA_1, IOA_2, 0.5).numpy().tolist() == [True, True]
    assert aug.prune_non_overlapping_boxes(IOA_2, IOA_1, 0.5).numpy().tolist() == [False, False, False]


def test_change_coordinate_frame():
    # box_list_ops_test.test_change_coordinate_frame.
    out = aug.change_coordinate_frame([[0.25, 0.5, 0.75, 0.75], [0.5, 0.0, 1.0, 1.0]], [0.25, 0.25, 0.75, 0.75])
    np.testing.assert_allclose(out.numpy(), [[0, 0.5, 1.0, 1.0], [0.5, -0.5, 1.5, 1.5]], rtol=1e-6)


@pytest.mark.parametrize("filter_nonoverlapping, expected, kept", [
    # box_list_ops_test.test_clip_to_window_filter_boxes_which_fall_outside_the_window
    (True, [[5.0, 5.0, 6.0, 6.0], [0.0, 0.0, 4.0, 5.0], [2.0, 3.0, 5.0, 9.0], [0.0, 0.0, 9.0, 14.0],
            [0.0, 0.0, 9.0, 14.0]], [0, 1, 2, 3, 4]),
    # ..._without_filtering_boxes_which_fall_outside_the_window
    (False, [[5.0, 5.0, 6.0, 6.0], [0.0, 0.0, 4.0, 5.0], [2.0, 3.0, 5.0, 9.0], [0.0, 0.0, 9.0, 14.0],
             [0.0, 0.0, 9.0, 14.0], [0.0, 0.0, 0.0, 0.0]], [0, 1, 2, 3, 4, 5]),
])
def test_clip_to_window(filter_nonoverlapping, expected, kept):
    # That test orders its corners with the huge box before the one outside.
    corners = CORNERS[[0, 1, 2, 3, 5, 4]]
    boxes, keep = aug.clip_to_window(corners, WINDOW, filter_nonoverlapping)
    np.testing.assert_array_equal(boxes.numpy(), expected)
    assert np.flatnonzero(keep.numpy()).tolist() == kept


def test_clip_to_window_drops_inverted_boxes():
    boxes, keep = aug.clip_to_window([[0.6, 0.1, 0.4, 0.3], [0.1, 0.1, 0.2, 0.2]], [0.0, 0.0, 1.0, 1.0])
    assert keep.numpy().tolist() == [False, True]
    np.testing.assert_allclose(boxes.numpy(), [[0.1, 0.1, 0.2, 0.2]])


# The window preprocessor_test's mock sample_distorted_bounding_box returns: offset (6, 143),
# size (190, 237) of the 200x400 image, i.e. [0.03, 0.3575, 0.98, 0.95].
MOCK_OFFSET, MOCK_SIZE = [6, 143], [190, 237]


def test_crop_to_window_strict_crop():
    # preprocessor_test.testStrictRandomCropImageWithLabelScores (overlap_thresh 0.3, the default).
    image, boxes, classes = aug.crop_to_window(colorful_image(), TEST_BOXES, TEST_LABELS, MOCK_OFFSET, MOCK_SIZE, 0.3)
    assert image.shape == (190, 237, 3)
    np.testing.assert_array_equal(image.numpy(), colorful_image()[6:196, 143:380])
    np.testing.assert_allclose(boxes.numpy(), [[0.0, 0.0, 0.75789469, 1.0],
                                               [0.23157893, 0.24050637, 0.75789469, 1.0]], rtol=1e-6, atol=1e-7)
    assert classes.numpy().tolist() == [1, 2]


def test_crop_to_window_prunes_outside_and_non_overlapping():
    # preprocessor_test.testRandomCropWithMockSampleDistortedBoundingBox: the first box lies
    # left of the window (dropped), the other two are kept with their labels 7 and 11.
    boxes = np.array([[0.1, 0.1, 0.8, 0.3], [0.2, 0.4, 0.75, 0.75], [0.3, 0.1, 0.4, 0.7]], np.float32)
    _, out, classes = aug.crop_to_window(colorful_image(), boxes, [1, 7, 11], MOCK_OFFSET, MOCK_SIZE, 0.3)
    np.testing.assert_allclose(out.numpy(), [[0.178947, 0.07173, 0.75789469, 0.66244733],
                                             [0.28421, 0.0, 0.38947365, 0.57805908]], atol=1e-5)
    assert classes.numpy().tolist() == [7, 11]


def test_crop_to_window_overlap_threshold():
    # The third box above has 0.6 of its area inside the window ((0.7 - 0.3575) / 0.6 wide):
    # kept at a threshold of 0.5, dropped at 0.7.
    boxes = np.array([[0.3, 0.1, 0.4, 0.7]], np.float32)
    for thresh, kept in ((0.5, 1), (0.7, 0)):
        _, out, classes = aug.crop_to_window(colorful_image(), boxes, [11], MOCK_OFFSET, MOCK_SIZE, thresh)
        assert out.shape[0] == classes.shape[0] == kept


def test_ssd_random_crop_defaults_are_the_od_apis():
    ops = aug.SSD_CROP_OPERATIONS
    assert [op.min_object_covered for op in ops] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert [op.overlap_thresh for op in ops] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert {(op.aspect_ratio_range, op.area_range, op.random_coef) for op in ops} == {((0.5, 2.0), (0.1, 1.0), 0.15)}


def _crop(seed, image, boxes, classes):
    return [t.numpy() for t in aug.ssd_random_crop(image, boxes, classes, tf.constant(seed, tf.int64))]


def test_ssd_random_crop_properties():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    boxes = np.array([[0.1, 0.1, 0.5, 0.4], [0.4, 0.5, 0.9, 0.95], [0.05, 0.6, 0.3, 0.9]], np.float32)
    classes = np.array([1, 2, 3], np.int32)
    uncropped = 0
    for s in range(40):
        out_image, out_boxes, out_classes = _crop([3, s], image, boxes, classes)
        again = _crop([3, s], image, boxes, classes)
        for a, b in zip((out_image, out_boxes, out_classes), again):
            np.testing.assert_array_equal(a, b)  # one seed, one result
        assert out_boxes.shape[0] == out_classes.shape[0]
        assert set(out_classes.tolist()) <= {1, 2, 3}
        assert out_boxes.size == 0 or (out_boxes.min() >= 0.0 and out_boxes.max() <= 1.0)
        if out_image.shape == image.shape and np.array_equal(out_image, image):
            uncropped += 1
            np.testing.assert_array_equal(out_boxes, boxes)
            continue
        # The crop is a window of the image; find it, and check the kept boxes against it.
        h, w = out_image.shape[:2]
        offsets = [(y, x) for y in range(121 - h) for x in range(161 - w)
                   if np.array_equal(image[y:y + h, x:x + w], out_image)]
        assert len(offsets) == 1
        (y, x), = offsets
        window = np.array([y / 120, x / 160, (y + h) / 120, (x + w) / 160], np.float32)
        expected = aug.intersection_over_area(window[None], boxes).numpy()[0]
        kept = [c for c, o in zip(classes, expected) if o > 0]
        # Every kept box overlaps the window; the threshold is the chosen operation's (unknown here).
        assert set(out_classes.tolist()) <= set(kept)
        assert 0.1 * 120 * 160 * 0.99 <= h * w  # area_range's lower end, up to pixel rounding
    # random_coef 0.15 leaves some images uncropped; 40 draws all cropped or all not would be a bug.
    assert 0 < uncropped < 40


def test_ssd_random_crop_without_boxes():
    image = np.zeros([50, 60, 3], np.uint8)
    out_image, out_boxes, out_classes = _crop([1, 2], image, np.zeros([0, 4], np.float32), np.zeros([0], np.int32))
    assert out_boxes.shape == (0, 4) and out_classes.shape == (0,) and out_image.shape[2] == 3


def test_random_crop_image_with_random_coef_one_is_identity():
    # preprocessor_test.testRandomCropImageWithRandomCoefOne: random_coef 1.0 never crops.
    op = aug.CropOperation(random_coef=1.0)
    image = colorful_image()
    out = aug.random_crop_image(image, TEST_BOXES, TEST_LABELS, tf.constant([0, 1]), op)
    for got, want in zip(out, (image, TEST_BOXES, TEST_LABELS)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_min_object_covered_one_keeps_a_whole_box():
    # With min_object_covered 1.0 and overlap_thresh 1.0 (the last SSD operation) and no
    # random_coef, the window holds at least one whole box, which stays whole.
    op = aug.CropOperation(min_object_covered=1.0, aspect_ratio_range=(0.5, 2.0), overlap_thresh=1.0)
    image = np.random.default_rng(1).integers(0, 255, (100, 100, 3), dtype=np.uint8)
    boxes = np.array([[0.2, 0.2, 0.5, 0.5]], np.float32)
    for s in range(10):
        out_image, out_boxes, out_classes = aug.random_crop_image(image, boxes, [4], tf.constant([s, 0]), op)
        assert out_classes.numpy().tolist() == [4]
        h, w = out_image.shape[:2]
        b = out_boxes.numpy()[0]
        # The box keeps its size in pixels (30x30) inside the window.
        np.testing.assert_allclose([(b[2] - b[0]) * h, (b[3] - b[1]) * w], [30, 30], atol=1e-3)


def test_ssd_augment_is_seeded():
    image = np.random.default_rng(2).integers(0, 255, (64, 80, 3), dtype=np.uint8)
    a = aug.ssd_augment(image, TEST_BOXES, TEST_LABELS, tf.constant([5, 9]))
    b = aug.ssd_augment(image, TEST_BOXES, TEST_LABELS, tf.constant([5, 9]))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_crop_to_window_without_clipping():
    # clip_boxes: false keeps the boxes' coordinates in the window's frame past its edges:
    # (y - 0.03) / 0.95 and (x - 0.3575) / 0.5925 for the mock window above.
    _, boxes, _ = aug.crop_to_window(colorful_image(), TEST_BOXES, TEST_LABELS, MOCK_OFFSET, MOCK_SIZE, 0.3,
                                     clip_boxes=False)
    window = np.array([6 / 200, 143 / 400, 196 / 200, 380 / 400])
    size = np.tile(window[2:] - window[:2], 2)
    expected = (TEST_BOXES - np.tile(window[:2], 2)) / size
    assert expected.min() < 0 and expected.max() > 1  # the case clipping would change
    np.testing.assert_allclose(boxes.numpy(), expected, rtol=1e-5, atol=1e-6)


def _config_steps(*kinds_and_ops):
    from ssd_mobilenet.training.train_config import AugmentationConfig
    return aug.steps_of([AugmentationConfig(kind, ops) for kind, ops in kinds_and_ops])


def test_augment_follows_the_configured_steps():
    from ssd_mobilenet.training.train_config import SSDRandomCropOperation
    image = np.random.default_rng(3).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    seeds = [tf.constant([1, i]) for i in range(8)]
    # No steps: the images as they are.
    for seed in seeds[:2]:
        out, boxes, _ = aug.augment(image, TEST_BOXES, TEST_LABELS, seed, ())
        np.testing.assert_array_equal(out, image)
    # The flip alone: each image as it is or mirrored, never cropped; both happen over 8 seeds.
    mirrored = []
    for seed in seeds:
        out, boxes, _ = aug.augment(image, TEST_BOXES, TEST_LABELS, seed, _config_steps(("random_horizontal_flip", ())))
        flipped = not np.array_equal(out.numpy(), image)
        np.testing.assert_array_equal(out.numpy(), image[:, ::-1] if flipped else image)
        mirrored.append(flipped)
    assert any(mirrored) and not all(mirrored)
    # A written crop operation is taken as written: a quarter of the area, square, always cropped.
    quarter = SSDRandomCropOperation(min_object_covered=0.0, min_aspect_ratio=1.0, max_aspect_ratio=1.0,
                                     min_area=0.25, max_area=0.25, overlap_thresh=0.0, clip_boxes=True,
                                     random_coef=0.0)
    steps = _config_steps(("ssd_random_crop", (quarter,)))
    assert steps[0].operations == (aug.CropOperation(0.0, (1.0, 1.0), (0.25, 0.25), 0.0, 0.0, True),)
    for seed in seeds[:3]:
        out, _, _ = aug.augment(image, TEST_BOXES, TEST_LABELS, seed, steps)
        assert out.shape == (32, 32, 3)
    # `ssd_random_crop {}` takes the OD API's seven operations.
    assert _config_steps(("ssd_random_crop", ()))[0].operations == aug.SSD_CROP_OPERATIONS
