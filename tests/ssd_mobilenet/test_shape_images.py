"""ssd_mobilenet.shape_images: generated images of shapes, their exact boxes, and the pixels the
int8 exports calibrate on when the user gives no images (`network.generated_images`, seed 0)."""

from __future__ import annotations

import hashlib

import numpy as np

from ssd_mobilenet import shape_images


def test_make_image_boxes_are_the_shapes_pixel_extent():
    rng = np.random.default_rng(3)
    for _ in range(10):
        image, boxes, classes = shape_images.make_image(rng, 150, 210)
        assert image.shape == (150, 210, 3) and image.dtype == np.uint8
        assert 1 <= len(boxes) <= shape_images.MAX_OBJECTS and len(classes) == len(boxes)
        assert set(classes.tolist()) <= {1, 2, 3}
        for box in boxes:
            assert 0.0 <= box[0] < box[2] <= 1.0 and 0.0 <= box[1] < box[3] <= 1.0
            # Not tiny: at least MIN_SIZE of the shorter side, up to a pixel of rounding.
            assert (box[2] - box[0]) * 150 >= 150 * shape_images.MIN_SIZE - 2
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert shape_images._overlap(a, b) <= shape_images.MAX_OVERLAP


def test_the_last_drawn_shape_fills_its_box_edges():
    # The box is the painted extent: the rows and columns on the box's edges hold the object's colour.
    rng = np.random.default_rng(0)
    image, boxes, _ = shape_images.make_image(rng, 120, 120)
    y0, x0, y1, x1 = np.rint(boxes[-1] * 120).astype(int)
    inside = image[y0:y1, x0:x1].astype(int)
    colour = np.median(inside.reshape(-1, 3), axis=0)
    on_colour = np.abs(inside - colour).max(axis=2) <= 1
    assert on_colour[0].any() and on_colour[-1].any() and on_colour[:, 0].any() and on_colour[:, -1].any()
    if y0 > 0:
        assert not (np.abs(image[y0 - 1, x0:x1].astype(int) - colour).max(axis=1) <= 1).all()


def test_seeded():
    a = shape_images.make_image(np.random.default_rng(7), 100, 140)
    b = shape_images.make_image(np.random.default_rng(7), 100, 140)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_the_generated_calibration_images_are_the_same_pixels():
    """The 16 images `export --int8` calibrates on without --calibration, at 128x128 (the small
    models') and 300x300 (the zoo's), as `ssd_mobilenet.training.shapes_dataset.make_image` drew
    them before the generator moved here (sha256 of their uint8 pixels, measured then): an int8
    file's calibration, and so its figures, do not change."""
    expected = {(128, 128): "46238540866410f59f13c92c66e9f256dfb70a47824541b03734119607f8b179",
                (300, 300): "60b08452cd56d72860235bf37260cb2dcfb72c1dd826191d3de9da754cf0368f"}
    for (height, width), digest in expected.items():
        rng = np.random.default_rng(0)
        images = np.stack([shape_images.make_image(rng, height, width)[0] for _ in range(16)])
        assert hashlib.sha256(images.tobytes()).hexdigest() == digest, (height, width)
