"""ssd_mobilenet.training.shapes_dataset: generated images, their exact boxes, and the round trip
through the TFRecord reader."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet import label_map
from ssd_mobilenet.training import data, shapes_dataset


def test_make_image_boxes_are_the_shapes_pixel_extent():
    rng = np.random.default_rng(3)
    for _ in range(10):
        image, boxes, classes = shapes_dataset.make_image(rng, 150, 210)
        assert image.shape == (150, 210, 3) and image.dtype == np.uint8
        assert 1 <= len(boxes) <= shapes_dataset.MAX_OBJECTS and len(classes) == len(boxes)
        assert set(classes.tolist()) <= {1, 2, 3}
        for box in boxes:
            assert 0.0 <= box[0] < box[2] <= 1.0 and 0.0 <= box[1] < box[3] <= 1.0
            # Not tiny: at least MIN_SIZE of the shorter side, up to a pixel of rounding.
            assert (box[2] - box[0]) * 150 >= 150 * shapes_dataset.MIN_SIZE - 2
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert shapes_dataset._overlap(a, b) <= shapes_dataset.MAX_OVERLAP


def test_the_last_drawn_shape_fills_its_box_edges():
    # The box is the painted extent: the rows and columns on the box's edges hold the object's colour.
    rng = np.random.default_rng(0)
    image, boxes, _ = shapes_dataset.make_image(rng, 120, 120)
    y0, x0, y1, x1 = np.rint(boxes[-1] * 120).astype(int)
    inside = image[y0:y1, x0:x1].astype(int)
    colour = np.median(inside.reshape(-1, 3), axis=0)
    on_colour = np.abs(inside - colour).max(axis=2) <= 1
    assert on_colour[0].any() and on_colour[-1].any() and on_colour[:, 0].any() and on_colour[:, -1].any()
    if y0 > 0:
        assert not (np.abs(image[y0 - 1, x0:x1].astype(int) - colour).max(axis=1) <= 1).all()


def test_seeded():
    a = shapes_dataset.make_image(np.random.default_rng(7), 100, 140)
    b = shapes_dataset.make_image(np.random.default_rng(7), 100, 140)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_round_trip_through_the_reader(tmp_path):
    out = shapes_dataset.write_shapes_dataset(tmp_path / "shapes", num_train=6, num_eval=3, image_size=(128, 160),
                                              seed=11)
    assert sorted(os.listdir(out)) == ["eval.record", "label_map.pbtxt", "train.record"]
    assert label_map.read(os.path.join(out, "label_map.pbtxt")) == {1: "circle", 2: "square", 3: "triangle"}
    # Regenerate what was written from the same seed, image by image.
    rng = np.random.default_rng(11)
    expected = []
    for _ in range(9):
        height, width = shapes_dataset._sizes(rng, (128, 160))
        expected.append(shapes_dataset.make_image(rng, height, width))
    read = list(data.read_examples([os.path.join(out, "train.record"), os.path.join(out, "eval.record")]))
    assert len(read) == 9
    for example, (image, boxes, classes) in zip(read, expected):
        assert example["image"].shape == image.shape
        np.testing.assert_array_equal(example["boxes"].numpy(), boxes)  # exactly, not approximately
        np.testing.assert_array_equal(example["classes"].numpy(), classes)
        # The pixels are the generated image's, through the JPEG encoding (quality 95) as written.
        np.testing.assert_array_equal(example["image"].numpy(), tf.io.decode_jpeg(tf.io.encode_jpeg(image, quality=95)))
    assert read[0]["source_id"].numpy() == b"train_00000.jpg" and read[6]["source_id"].numpy() == b"eval_00000.jpg"
    # The class texts resolve through the written label map to the same ids.
    record = next(iter(tf.data.TFRecordDataset(os.path.join(out, "train.record")))).numpy()
    texts = tf.train.Example.FromString(record).features.feature["image/object/class/text"].bytes_list.value
    assert [shapes_dataset.CLASS_NAMES.index(t.decode()) + 1 for t in texts] == expected[0][2].tolist()


def test_refuses_to_overwrite_unless_forced(tmp_path):
    out = tmp_path / "shapes"
    shapes_dataset.write_shapes_dataset(out, 1, 1, 64, seed=0)
    first = (out / "train.record").read_bytes()
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        shapes_dataset.write_shapes_dataset(out, 1, 1, 64, seed=1)
    assert (out / "train.record").read_bytes() == first
    shapes_dataset.write_shapes_dataset(out, 1, 1, 64, seed=1, force=True)
    assert (out / "train.record").read_bytes() != first
    assert sorted(os.listdir(tmp_path)) == ["shapes"]  # no temporary folders left behind
