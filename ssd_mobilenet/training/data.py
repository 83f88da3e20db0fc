"""Reading the TF1 Object Detection API's TFRecords with `tf.data`, for training and evaluation.

Each record is a `tf.train.Example` as the OD API's dataset tools write it
(`data_decoders/tf_example_decoder.py` reads the same keys):
  image/encoded               JPEG or PNG bytes (told apart by content, as `tf.io.decode_image` does)
  image/object/bbox/ymin, xmin, ymax, xmax   float, normalised to the image
  image/object/class/label    int64, 1-based
  image/object/class/text     optional; resolved to ids through a label map when labels are missing
  image/source_id, image/filename            optional
`read_examples` gives one example at a time:
  image uint8 [H, W, 3]; boxes float32 [M, 4] as [ymin, xmin, ymax, xmax], normalised;
  classes int32 [M] (1-based); source_id string [] (else the filename, else `<file>:<index>`).
`make_dataset` adds what training needs, in the OD API's order (`builders/dataset_builder.py`,
`inputs.py`): file and record shuffling, repetition, parallel decoding, the SSD augmentation
(`training.augmentation`), the model's own resize and normalisation (`ssd_mobilenet.preprocessing`),
boxes and classes padded to a fixed count, batching and prefetching.

Boxes, as the OD API treats them: a box with a NaN coordinate is dropped with its class
(`filter_groundtruth_with_nan_box_coordinates`); the rest are clipped to the image and those
left with no area (outside the image, or ymin > ymax, xmin > xmax) dropped (`clip_to_window`
with `filter_nonoverlapping`). The OD API clipped only inside `ssd_random_crop`; clipping every
box on reading gives the uncropped and the evaluation images the same boxes inside the image.

A record that cannot be used (not a `tf.Example`, an image that does not decode, box
coordinate lists of different lengths, classes missing, 0-based or unknown) is skipped with one
`RecordWarning` naming the file, the record's index in it and its source id, and the reason;
a TFRecord file whose framing breaks off (truncated, bad checksum) is named with the byte
offset where reading stopped. A missing or empty file raises `InputError` before anything runs.
"""

from __future__ import annotations

import glob
import os
import threading
import warnings

import tensorflow as tf
from google.protobuf.message import DecodeError

from ssd_mobilenet import image_io as images
from ssd_mobilenet import label_map as label_maps
from ssd_mobilenet import preprocessing
from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.training import augmentation
from ssd_mobilenet.errors import InputError

# input_reader.proto's defaults.
MAX_NUMBER_OF_BOXES = 100
SHUFFLE_BUFFER_SIZE = 2048
FILENAMES_SHUFFLE_BUFFER_SIZE = 100
# Files read at once (input_reader.proto's num_readers is 64, sized for sharded datasets on many cores).
NUM_READERS = 8

BOX_KEYS = tuple(f"image/object/bbox/{k}" for k in ("ymin", "xmin", "ymax", "xmax"))
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/filename": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/source_id": tf.io.FixedLenFeature((), tf.string, default_value=""),
    "image/object/class/label": tf.io.VarLenFeature(tf.int64),
    "image/object/class/text": tf.io.VarLenFeature(tf.string),
    **{k: tf.io.VarLenFeature(tf.float32) for k in BOX_KEYS},
}
# A TFRecord frame around each record: length (8 bytes) and its CRC (4), the data, its CRC (4).
FRAME_BYTES = 16
# tf.data converts each function it is given with autograph unless told not to. The pipeline's
# control flow on tensors is written as tf ops (tf.cond, tf.where) and its Python `if`s decide on
# Python values, so conversion would only rewrite every function the trace calls, at the start of
# every run (docs/measurements.md, "A run's start"); the functions they call are not converted either.
NOT_CONVERTED = tf.autograph.experimental.do_not_convert
_UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


class RecordWarning(UserWarning):
    """A record skipped as unusable; the message names file, record index, source id and reason."""


def record_files(paths) -> list:
    """TFRecord paths or glob patterns -> the files, in order (a pattern's matches sorted).

    Raises:
      InputError: naming the path, for a missing file, a pattern matching nothing, or an empty file.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in map(os.fspath, paths):
        matches = [path] if os.path.exists(path) or not glob.has_magic(path) else sorted(glob.glob(path))
        if not matches:
            raise InputError(f"{path}: no file matches this pattern")
        for f in matches:
            if not os.path.isfile(f):
                raise InputError(f"{f}: no such file" if not os.path.exists(f) else f"{f}: not a file")
            if os.path.getsize(f) == 0:
                raise InputError(f"{f}: empty record file (0 bytes, no records)")
            files.append(f)
    if not files:
        raise InputError("no record files given")
    return files


class _Decoder:
    """Serialized `tf.Example` -> (image, boxes, classes, source id); raises on an unusable record."""

    def __init__(self, class_ids: dict | None, num_classes: int | None):
        self.num_classes = num_classes
        self.table = None
        if class_ids:
            self.table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant(list(class_ids)),
                                                    tf.constant(list(class_ids.values()), tf.int64)), default_value=-1)

    def _classes_from_text(self, texts):
        if self.table is None:
            return tf.fill(tf.shape(texts), tf.constant(-1, tf.int64))
        return self.table.lookup(texts)

    def parse(self, serialized):
        return tf.io.parse_single_example(serialized, FEATURES)

    @staticmethod
    def image(features):
        encoded = features["image/encoded"]
        with tf.control_dependencies([tf.debugging.assert_greater(tf.strings.length(encoded), 0,
                                                                  message="image/encoded is missing or empty")]):
            return images.decode(encoded)

    def objects(self, features):
        """-> boxes float32 [M, 4] inside [0, 1], classes int32 [M]; raises on inconsistent lists."""
        coordinates = [tf.sparse.to_dense(features[k]) for k in BOX_KEYS]
        count = tf.size(coordinates[0])
        checks = [tf.debugging.assert_equal(tf.size(c), count, message=f"{k} and {BOX_KEYS[0]} differ in length")
                  for k, c in zip(BOX_KEYS[1:], coordinates[1:])]
        labels = tf.sparse.to_dense(features["image/object/class/label"])
        texts = tf.sparse.to_dense(features["image/object/class/text"], default_value="")
        from_text = tf.equal(tf.size(labels), 0)
        classes = tf.cond(from_text, lambda: self._classes_from_text(texts), lambda: labels)
        checks.append(tf.debugging.assert_equal(tf.size(classes), count, message=(
            "the boxes and the class labels (image/object/class/label, else class/text) differ in number")))
        with tf.control_dependencies(checks):
            # Separate messages: a text the label map lacks, or a label that is not 1-based.
            one = tf.ones_like(classes)
            checks = [tf.debugging.assert_greater_equal(
                tf.where(from_text, classes, one), one,
                message="image/object/class/text not in the label map (or no label map given)"),
                tf.debugging.assert_greater_equal(tf.where(from_text, one, classes), one,
                                                  message="image/object/class/label must be >= 1 (1-based)")]
        if self.num_classes is not None:
            checks.append(tf.debugging.assert_less_equal(classes, tf.constant(self.num_classes, tf.int64), message=(
                f"class id above the model's num_classes ({self.num_classes})")))
        with tf.control_dependencies(checks):
            boxes = tf.stack(coordinates, axis=1)
            classes = tf.cast(classes, tf.int32)
        finite = tf.logical_not(tf.reduce_any(tf.math.is_nan(boxes), axis=1))
        boxes, classes = tf.boolean_mask(boxes, finite), tf.boolean_mask(classes, finite)
        boxes, kept = augmentation.clip_to_window(boxes, _UNIT_WINDOW)
        return boxes, tf.boolean_mask(classes, kept)

    def __call__(self, serialized):
        features = self.parse(serialized)
        boxes, classes = self.objects(features)
        source_id = tf.where(features["image/source_id"] != "", features["image/source_id"],
                             features["image/filename"])
        return self.image(features), boxes, classes, source_id


class _Reader:
    """The records of some files as examples, skipping (and naming once) the unusable ones."""

    def __init__(self, paths, label_map=None, num_classes=None):
        self.files = record_files(paths)
        class_ids = label_maps.class_ids(os.fspath(label_map)) if label_map is not None else None
        self.decoder = _Decoder(class_ids, num_classes)
        self._reported = set()
        self._lock = threading.Lock()

    def records(self, files, interleave: bool):
        """Dataset of file paths -> elements {path, index, serialized, frame_end}, the files one
        after the other, or with `interleave` several read at once, record by record; `frame_end` is -1
        for a record, and for the one element added after each file's last record, the byte offset
        where reading stopped (the file's size when its framing is intact)."""
        @NOT_CONVERTED
        def of_file(path):
            ends = tf.data.Dataset.from_tensors((tf.constant(""), tf.constant(True)))
            frames = tf.data.TFRecordDataset(path).ignore_errors().map(lambda r: (r, tf.constant(False)))

            def step(state, frame):
                index, offset = state
                record, last = frame
                element = {"path": path, "index": index, "serialized": record,
                           "frame_end": tf.where(last, offset, tf.constant(-1, tf.int64))}
                length = tf.cast(tf.strings.length(record), tf.int64) + FRAME_BYTES
                return (index + 1, offset + tf.where(last, tf.constant(0, tf.int64), length)), element

            stream = frames.concatenate(ends).scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), step)
            # The file's size is read (a py_function) for its end marker alone.
            return stream.filter(lambda e: tf.cond(e["frame_end"] < 0, lambda: tf.constant(True),
                                                   lambda: tf.logical_not(self._intact_end(e))))

        return files.interleave(of_file, cycle_length=min(len(self.files), NUM_READERS) if interleave else 1,
                                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def _intact_end(self, element):
        size = tf.py_function(lambda p: os.path.getsize(p.numpy().decode()), [element["path"]], tf.int64)
        return tf.equal(element["frame_end"], size)

    def _decoded(self, element):
        # Raises in the graph on an unusable record; `examples` turns that into a skip.
        tf.debugging.assert_less(element["frame_end"], tf.constant(0, tf.int64), message="framing")
        image, boxes, classes, source_id = self.decoder(element["serialized"])
        fallback = tf.strings.join([element["path"], tf.strings.as_string(element["index"])], ":")
        return {"image": image, "boxes": boxes, "classes": classes,
                "source_id": tf.where(source_id != "", source_id, fallback),
                "valid": tf.constant(True), **{k: element[k] for k in ("path", "index", "frame_end")},
                "serialized": tf.constant("")}

    @staticmethod
    def _failed(element):
        return {"image": tf.zeros([0, 0, 3], tf.uint8), "boxes": tf.zeros([0, 4], tf.float32),
                "classes": tf.zeros([0], tf.int32), "source_id": tf.constant(""), "valid": tf.constant(False),
                **{k: element[k] for k in ("path", "index", "frame_end", "serialized")}}

    def examples(self, records):
        """Record elements -> {image, boxes, classes, source_id}, decoded in parallel, in order."""
        @NOT_CONVERTED
        def decode_or_mark(element):
            # `ignore_errors` on a one-element dataset turns a failed decode into an empty one; the
            # marker after it then stands for the record, so the skip can be named downstream.
            decoded = tf.data.Dataset.from_tensors(element).map(self._decoded).ignore_errors()
            return decoded.concatenate(tf.data.Dataset.from_tensors(self._failed(element))).take(1)

        @NOT_CONVERTED
        def keep(e):
            return tf.cond(e["valid"], lambda: tf.constant(True), lambda: tf.py_function(
                self._report, [e["path"], e["index"], e["serialized"], e["frame_end"]], tf.bool))

        decoded = records.interleave(decode_or_mark, cycle_length=tf.data.AUTOTUNE,
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return decoded.filter(keep).map(NOT_CONVERTED(lambda e: {k: e[k] for k in ("image", "boxes", "classes",
                                                                                  "source_id")}))

    def _report(self, path, index, serialized, frame_end) -> bool:
        """Warns once per skipped record (a repeated dataset meets it every epoch). Returns False."""
        path, index, frame_end = path.numpy().decode(errors="replace"), int(index.numpy()), int(frame_end.numpy())
        with self._lock:
            if (path, index) in self._reported:
                return False
            self._reported.add((path, index))
        if frame_end >= 0:
            # The TFRecord framing breaks off there (a truncated or corrupt file).
            message = f"{path}: corrupt at byte {frame_end}: {index} records read, the rest skipped"
        else:
            message = f"{path}: record {index}{self._source_id(serialized.numpy())} skipped: " \
                      f"{self._reason(serialized)}"
        warnings.warn(message, RecordWarning, stacklevel=2)
        return False

    @staticmethod
    def _source_id(serialized: bytes) -> str:
        try:
            feature = tf.train.Example.FromString(serialized).features.feature
        except DecodeError:  # the reason says it is not a tf.Example
            return ""
        for key in ("image/source_id", "image/filename"):
            values = feature[key].bytes_list.value if key in feature else []
            if values and values[0]:
                return f" (source_id {values[0].decode(errors='replace')!r})"
        return ""

    def _reason(self, serialized) -> str:
        """Runs the decoder's steps eagerly on the one record, for the failing step's own message."""
        def fails(step, *args):
            try:
                step(*args)
            except (tf.errors.OpError, ValueError) as e:
                return images.error_message(e)
            return None

        problem = fails(self.decoder.parse, serialized)
        if problem:
            return f"not a tf.Example ({problem})"
        features = self.decoder.parse(serialized)
        problem = fails(self.decoder.objects, features)
        if problem:
            return problem
        problem = fails(self.decoder.image, features)
        if problem:
            return problem if problem.startswith("image/encoded") else \
                f"image/encoded does not decode as JPEG or PNG ({problem})"
        return "unknown reason (it decodes when retried)"


def read_examples(paths, label_map=None, num_classes=None) -> tf.data.Dataset:
    """The examples of TFRecord files, in file and record order, once.

    Args:
      paths: a TFRecord file, a glob pattern, or a list of them.
      label_map: a `label_map.pbtxt`, to resolve `image/object/class/text` where a record has
        no `image/object/class/label` (by an item's `name` or `display_name`).
      num_classes: when given, a record with a class id above it is skipped as unusable.

    Returns:
      A dataset of {"image": uint8 [H, W, 3], "boxes": float32 [M, 4] ([ymin, xmin, ymax, xmax],
      normalised, inside [0, 1]), "classes": int32 [M] (1-based), "source_id": string []}.

    Raises:
      InputError: a missing or empty file. InputError: an unreadable label map.
    """
    reader = _Reader(paths, label_map, num_classes)
    return reader.examples(reader.records(tf.data.Dataset.from_tensor_slices(reader.files), interleave=False))


def pad_objects(boxes, classes, max_boxes: int):
    """Boxes [M, 4] and classes [M] -> boxes [max_boxes, 4], classes [max_boxes] (zeros after the
    objects) and their count min(M, max_boxes). Objects beyond `max_boxes` are dropped, the
    first ones kept, as the OD API's `pad_input_data_to_static_shapes` clips them."""
    count = tf.minimum(tf.shape(boxes)[0], max_boxes)
    pad = max_boxes - count
    boxes = tf.pad(boxes[:count], [[0, pad], [0, 0]])
    classes = tf.pad(classes[:count], [[0, pad]])
    boxes.set_shape([max_boxes, 4])
    classes.set_shape([max_boxes])
    return boxes, classes, count


def make_dataset(paths, config: SSDConfig, batch_size: int, *, training: bool = True, label_map=None,
                 max_boxes: int = MAX_NUMBER_OF_BOXES, shuffle_buffer: int = SHUFFLE_BUFFER_SIZE,
                 seed: int = 0, augmentation_steps=augmentation.ZOO_STEPS) -> tf.data.Dataset:
    """Batches of model inputs from TFRecord files.

    With `training`: files and records shuffled (seeded), repeated without end, each image
    augmented by `augmentation_steps` (`augmentation.augment`; the zoo config's flip and crop
    unless given, none for an empty tuple) with a seed of its own (derived from `seed` and its
    position in the stream, so a run is reproducible), and only full batches.
    Without: file order, one pass, no augmentation, the last batch possibly smaller.

    Returns:
      A dataset of {"image": float32 [B, image_height, image_width, 3] in [-1, 1] (the model's
      preprocessing), "boxes": float32 [B, max_boxes, 4] ([ymin, xmin, ymax, xmax], normalised;
      zeros after the objects), "classes": int32 [B, max_boxes] (1-based; 0 after the objects),
      "num_boxes": int32 [B], "source_id": string [B]}.

    Raises:
      InputError: a missing or empty file. InputError: an unreadable label map.
    """
    reader = _Reader(paths, label_map, config.num_classes)
    files = tf.data.Dataset.from_tensor_slices(reader.files)
    if training:
        files = files.shuffle(FILENAMES_SHUFFLE_BUFFER_SIZE, seed=seed).repeat()
    records = reader.records(files, interleave=training)
    if training:
        records = records.shuffle(shuffle_buffer, seed=seed)
    examples = reader.examples(records).enumerate()

    @NOT_CONVERTED
    def prepare(position, e):
        image, boxes, classes = e["image"], e["boxes"], e["classes"]
        if training:
            image, boxes, classes = augmentation.augment(
                image, boxes, classes, tf.stack([tf.constant(seed, tf.int64), position]), augmentation_steps)
        image = preprocessing.preprocess(image[tf.newaxis], config)[0]
        image.set_shape([config.image_height, config.image_width, 3])
        boxes, classes, count = pad_objects(boxes, classes, max_boxes)
        return {"image": image, "boxes": boxes, "classes": classes, "num_boxes": count, "source_id": e["source_id"]}

    batches = examples.map(prepare, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return batches.batch(batch_size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)
