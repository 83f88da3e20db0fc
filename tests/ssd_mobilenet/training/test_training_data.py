"""ssd_mobilenet.training.data: real TFRecords written to tmp_path and read back."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

from ssd_mobilenet import preprocessing
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.training import data
from ssd_mobilenet.training.tf_example import make_example
from ssd_mobilenet.errors import InputError

LABELS = "item { id: 1 name: '/m/cat' display_name: 'cat' }\nitem { id: 2 name: 'dog' }\n"


def _image(seed, height=24, width=32):
    return np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)


def _png(image):
    return tf.io.encode_png(image).numpy()


def _record(seed, boxes=((0.1, 0.2, 0.5, 0.6),), classes=(1,), texts=None, encoded=None, **kwargs):
    image = _image(seed)
    return make_example(_png(image) if encoded is None else encoded, 24, 32, boxes, classes, texts,
                        image_format="png", **kwargs).SerializeToString()


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


def _read(*args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        examples = [{k: v.numpy() for k, v in e.items()} for e in data.read_examples(*args, **kwargs)]
    return examples, [str(w.message) for w in caught if issubclass(w.category, data.RecordWarning)]


def test_round_trip(tmp_path):
    path = _write(tmp_path / "a.record", [
        _record(0, boxes=[(0.1, 0.2, 0.5, 0.6), (0.0, 0.0, 1.0, 1.0)], classes=[2, 1], source_id="img0"),
        _record(1, boxes=np.zeros([0, 4]), classes=[], filename="one.png"),
        _record(2)])
    examples, warned = _read(path)
    assert warned == [] and len(examples) == 3
    np.testing.assert_array_equal(examples[0]["image"], _image(0))
    assert examples[0]["image"].dtype == np.uint8
    np.testing.assert_array_equal(examples[0]["boxes"], np.float32([(0.1, 0.2, 0.5, 0.6), (0.0, 0.0, 1.0, 1.0)]))
    assert examples[0]["classes"].tolist() == [2, 1] and examples[0]["classes"].dtype == np.int32
    assert examples[1]["boxes"].shape == (0, 4) and examples[1]["classes"].shape == (0,)
    # source_id, else the filename, else file:index.
    assert [e["source_id"].decode() for e in examples] == ["img0", "one.png", f"{path}:2"]


def test_several_files_and_a_glob(tmp_path):
    for name, seeds in (("x-0.record", (0, 1)), ("x-1.record", (2,))):
        _write(tmp_path / name, [_record(s, source_id=f"s{s}") for s in seeds])
    examples, _ = _read(str(tmp_path / "x-*.record"))
    assert sorted(e["source_id"].decode() for e in examples) == ["s0", "s1", "s2"]


def test_corrupt_record_and_non_image_bytes_are_named_and_skipped(tmp_path):
    path = _write(tmp_path / "mixed.record", [
        _record(0, source_id="good0"),
        b"this is not a tf.Example",
        _record(1, encoded=b"GIF? no, plain text", source_id="text-as-image"),
        _record(2, encoded=_png(_image(2))[:40], source_id="truncated-png"),
        _record(3, source_id="good1")])
    examples, warned = _read(path)
    assert [e["source_id"].decode() for e in examples] == ["good0", "good1"]
    assert len(warned) == 3
    assert re.match(rf"{re.escape(path)}: record 1 skipped: not a tf.Example", warned[0]), warned[0]
    assert warned[1].startswith(f"{path}: record 2 (source_id 'text-as-image') skipped: image/encoded does not decode")
    assert warned[2].startswith(f"{path}: record 3 (source_id 'truncated-png') skipped:"), warned[2]
    assert all("\n" not in w for w in warned)


def test_inconsistent_objects_are_named_and_skipped(tmp_path):
    three_ymins = make_example(_png(_image(0)), 24, 32, [(0.1, 0.1, 0.2, 0.2)], [1])
    three_ymins.features.feature["image/object/bbox/ymin"].float_list.value.extend([0.3, 0.4])
    path = _write(tmp_path / "bad.record", [
        three_ymins.SerializeToString(),
        _record(1, classes=[1, 2], source_id="two-classes-one-box"),
        _record(2, classes=[0], source_id="zero-based"),
        _record(3, classes=[7], source_id="above-num-classes"),
        _record(4, source_id="fine")])
    examples, warned = _read(path, num_classes=3)
    assert [e["source_id"].decode() for e in examples] == ["fine"]
    assert len(warned) == 4
    assert "differ in length" in warned[0]
    assert "differ in number" in warned[1]
    assert "must be >= 1" in warned[2]
    assert "num_classes (3)" in warned[3]


def test_class_text_resolved_through_the_label_map(tmp_path):
    labels = tmp_path / "label_map.pbtxt"
    labels.write_text(LABELS)
    path = _write(tmp_path / "text.record", [
        # No labels: texts by display_name ('cat') or name ('/m/cat', 'dog').
        _record(0, boxes=[(0.1, 0.1, 0.3, 0.3)] * 3, classes=None, texts=["cat", "dog", "/m/cat"], source_id="t"),
        # Labels present: they are used as they are.
        _record(1, classes=[2], texts=["cat"], source_id="both"),
        _record(2, classes=None, texts=["horse"], source_id="unknown")])
    examples, warned = _read(path, label_map=str(labels))
    assert [e["classes"].tolist() for e in examples] == [[1, 2, 1], [2]]
    assert len(warned) == 1 and "(source_id 'unknown')" in warned[0] and "not in the label map" in warned[0]
    # Without a label map, texts alone cannot be resolved.
    examples, warned = _read(path)
    assert [e["source_id"].decode() for e in examples] == ["both"] and len(warned) == 2


def test_missing_and_empty_files_are_named(tmp_path):
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path / 'nope.record'))}: no such file$"):
        data.read_examples(str(tmp_path / "nope.record"))
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "none-*.record")) + ": no file matches"):
        data.read_examples(str(tmp_path / "none-*.record"))
    empty = tmp_path / "empty.record"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=f"^{re.escape(str(empty))}: empty record file"):
        data.read_examples([_write(tmp_path / "ok.record", [_record(0)]), str(empty)])
    with pytest.raises(InputError, match="missing.pbtxt: cannot read label map"):
        data.read_examples(str(tmp_path / "ok.record"), label_map=str(tmp_path / "missing.pbtxt"))


def test_truncated_file_is_named_with_its_offset(tmp_path):
    path = _write(tmp_path / "cut.record", [_record(0, source_id="a"), _record(1, source_id="b")])
    whole = open(path, "rb").read()
    open(path, "wb").write(whole[:-10])
    examples, warned = _read(path)
    assert [e["source_id"].decode() for e in examples] == ["a"]
    first = len(whole) - len(_record(1, source_id="b")) - 16  # the first record's frame
    assert warned == [f"{path}: corrupt at byte {first}: 1 records read, the rest skipped"]


def test_boxes_outside_the_image_are_clipped_or_dropped(tmp_path):
    boxes = [(-0.1, 0.2, 0.5, 1.3),       # clipped to [0, 0.2, 0.5, 1]
             (0.6, 0.1, 0.4, 0.3),        # ymin > ymax: dropped
             (1.2, 0.1, 1.5, 0.3),        # below the image: dropped
             (np.nan, 0.1, 0.2, 0.3),     # NaN: dropped
             (0.25, 0.25, 0.75, 0.75)]
    path = _write(tmp_path / "b.record", [_record(0, boxes=boxes, classes=[1, 2, 3, 4, 5])])
    (example,), warned = _read(path)
    assert warned == []
    np.testing.assert_array_equal(example["boxes"], np.float32([(0.0, 0.2, 0.5, 1.0), (0.25, 0.25, 0.75, 0.75)]))
    assert example["classes"].tolist() == [1, 5]


def test_pad_objects_clips_to_max_boxes():
    boxes, classes, count = data.pad_objects(tf.ones([5, 4]), tf.constant([1, 2, 3, 4, 5]), 3)
    assert count.numpy() == 3 and classes.numpy().tolist() == [1, 2, 3] and boxes.shape == (3, 4)
    boxes, classes, count = data.pad_objects(tf.ones([2, 4]), tf.constant([4, 5]), 4)
    assert count.numpy() == 2 and classes.numpy().tolist() == [4, 5, 0, 0]
    np.testing.assert_array_equal(boxes.numpy()[2:], 0)


CONFIG = SSDConfig(num_classes=3, image_height=40, image_width=48)


def test_eval_dataset_is_the_models_preprocessing(tmp_path):
    path = _write(tmp_path / "e.record", [_record(s, source_id=f"s{s}") for s in range(3)])
    batches = list(data.make_dataset(path, CONFIG, 2, training=False, max_boxes=5))
    assert [b["image"].shape[0] for b in batches] == [2, 1]  # one pass, last batch kept
    first = batches[0]
    expected = preprocessing.preprocess(_image(0)[None], CONFIG)[0]
    np.testing.assert_array_equal(first["image"][0].numpy(), expected.numpy())
    assert first["boxes"].shape == (2, 5, 4) and first["classes"].shape == (2, 5)
    assert first["num_boxes"].numpy().tolist() == [1, 1]
    np.testing.assert_array_equal(first["boxes"][0, 0].numpy(), np.float32([0.1, 0.2, 0.5, 0.6]))
    assert first["classes"][0].numpy().tolist() == [1, 0, 0, 0, 0]
    assert [s.decode() for s in first["source_id"].numpy()] == ["s0", "s1"]


def _training_batches(path, seed):
    """Four training batches of 3 images (12 from 4 records) of `make_dataset`, as numpy."""
    return [{k: v.numpy() for k, v in b.items()}
            for b in data.make_dataset(path, CONFIG, 3, seed=seed, shuffle_buffer=8).take(4)]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """(records path, four training batches of seed 1): each dataset built costs 2-4 s (its
    functions traced), so the fast tier builds one, the seeding case two more."""
    path = _write(tmp_path_factory.mktemp("seeded") / "t.record",
                  [_record(s, boxes=[(0.2, 0.2, 0.6, 0.7)], source_id=f"s{s}") for s in range(4)])
    return path, _training_batches(path, 1)


def test_training_dataset_repeats_and_augments(seeded):
    _, a = seeded
    assert len(a) == 4  # 12 images from 4 records: the dataset repeats
    for batch in a:
        assert batch["image"].shape == (3, 40, 48, 3) and batch["image"].dtype == np.float32
        assert batch["image"].min() >= -1.0 and batch["image"].max() <= 1.0
        n = batch["num_boxes"]
        for i in range(3):
            assert batch["boxes"][i, :n[i]].min() >= 0.0 and batch["boxes"][i, :n[i]].max() <= 1.0
            assert (batch["classes"][i, :n[i]] == 1).all() and (batch["classes"][i, n[i]:] == 0).all()
    # The augmentation changes the images (a flip or crop of these noise images always shows).
    plain = preprocessing.preprocess(np.stack([_image(s) for s in range(4)]), CONFIG).numpy()
    augmented = [img for batch in a for img in batch["image"]]
    assert sum(not any(np.array_equal(img, p) for p in plain) for img in augmented) > 0


@pytest.mark.slow  # two more datasets built: 5 s
def test_training_dataset_is_seeded(seeded):
    path, a = seeded
    b, c = _training_batches(path, 1), _training_batches(path, 2)
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    assert any(not np.array_equal(x["image"], z["image"]) for x, z in zip(a, c))
