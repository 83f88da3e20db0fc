"""ssd_mobilenet.training.shapes_dataset: the generated images (`ssd_mobilenet.shape_images`, its
own tests: tests/ssd_mobilenet/test_shape_images.py) written as records, and the round trip through the
TFRecord reader."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet import label_map, shape_images
from ssd_mobilenet.training import data, shapes_dataset


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
        expected.append(shape_images.make_image(rng, height, width))
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
    assert [shape_images.CLASS_NAMES.index(t.decode()) + 1 for t in texts] == expected[0][2].tolist()


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
