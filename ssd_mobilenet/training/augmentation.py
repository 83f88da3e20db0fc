"""The SSD data augmentation of the TF1 Object Detection API (`core/preprocessor.py`):
`random_horizontal_flip`, `ssd_random_crop` and `random_crop_image`, applied in the order a
pipeline.config's `data_augmentation_options` lists them (`augment`); the zoo's SSD MobileNet v1
config lists the flip, then the SSD crop (`ZOO_STEPS`), its FPN config the flip, then
`random_crop_image`. A config that lists none trains on the images as they are.

Every function works on one image and its objects:
  image: uint8 (or float) [H, W, C]; boxes: float32 [M, 4] as [ymin, xmin, ymax, xmax],
  normalised to the image (0 at the top/left edge, 1 at the bottom/right edge);
  classes: int32 [M], 1-based.

The randomness and the geometry are kept apart. `sample_crop` and the coin of
`random_horizontal_flip` draw from stateless ops seeded by a `seed` tensor (int32/int64 [2]),
so one seed gives one result whatever the order or parallelism of a `tf.data` pipeline;
`flip_left_right` and `crop_to_window` then apply a given choice exactly, and the box helpers
(`prune_completely_outside_window`, `prune_non_overlapping_boxes`, `change_coordinate_frame`,
`clip_to_window`) compute as the OD API's `box_list_ops` do. The crop window is sampled by
`tf.image.stateless_sample_distorted_bounding_box`, the stateless form of the op the OD API
calls, with its arguments, so the windows follow the same distribution but are other draws.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import tensorflow as tf

from ssd_mobilenet.training.targets import intersection


@dataclass(frozen=True)
class CropOperation:
    """One crop operation of `random_crop_image` (the defaults are that function's).

    min_object_covered: the window must cover at least this fraction of some box.
    aspect_ratio_range: the window's width/height (in pixels) lies in this range.
    area_range: the window's area as a fraction of the image's lies in this range.
    overlap_thresh: a box is kept when at least this fraction of its area lies in the window.
    random_coef: the probability of leaving the image uncropped.
    clip_boxes: clip the kept boxes to the window (else they may reach past its edges).
    """

    min_object_covered: float = 1.0
    aspect_ratio_range: tuple = (0.75, 1.33)
    area_range: tuple = (0.1, 1.0)
    overlap_thresh: float = 0.3
    random_coef: float = 0.0
    clip_boxes: bool = True


# `ssd_random_crop`'s seven operations (the SSD paper's sampling): one is chosen uniformly per image.
SSD_CROP_OPERATIONS = tuple(
    CropOperation(min_object_covered=c, aspect_ratio_range=(0.5, 2.0), area_range=(0.1, 1.0),
                  overlap_thresh=c, random_coef=0.15)
    for c in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0))

# `sample_distorted_bounding_box`'s attempts before it falls back to the whole image, as the OD API sets it.
MAX_ATTEMPTS = 100


# ---- box geometry (box_list_ops) ------------------------------------------------------------

def _coordinates(boxes):
    """float32 [M, 4] -> four [M] tensors ymin, xmin, ymax, xmax."""
    return tf.unstack(tf.convert_to_tensor(boxes, tf.float32), num=4, axis=1)


def area(boxes):
    """float32 [M, 4] [ymin, xmin, ymax, xmax] -> float32 [M] (negative for inverted boxes, as the OD API's)."""
    ymin, xmin, ymax, xmax = _coordinates(boxes)
    return (ymax - ymin) * (xmax - xmin)


def intersection_over_area(boxes1, boxes2):
    """Pairwise intersection over the area of the *second* box (the OD API's `ioa`).

    boxes1: float32 [N, 4]; boxes2: float32 [M, 4], both [ymin, xmin, ymax, xmax].
    Returns float32 [N, M]: area(boxes1[i] & boxes2[j]) / area(boxes2[j]).
    """
    return intersection(boxes1, boxes2) / area(boxes2)[None, :]


def prune_completely_outside_window(boxes, window):
    """bool [M]: True for the boxes that reach into `window` ([4], [ymin, xmin, ymax, xmax]).

    A box that only touches the window's edge counts as outside, as in the OD API.
    """
    ymin, xmin, ymax, xmax = _coordinates(boxes)
    wymin, wxmin, wymax, wxmax = tf.unstack(tf.convert_to_tensor(window, tf.float32))
    outside = (ymin >= wymax) | (xmin >= wxmax) | (ymax <= wymin) | (xmax <= wxmin)
    return tf.logical_not(outside)


def prune_non_overlapping_boxes(boxes, windows, min_overlap):
    """bool [M]: True for the boxes of which at least `min_overlap` of their area lies in some window.

    boxes: float32 [M, 4]; windows: float32 [K, 4]. A box of zero area has no defined overlap
    (0/0) and is dropped, as the OD API's comparison of NaN drops it.
    """
    overlap = tf.reduce_max(intersection_over_area(windows, boxes), axis=0)
    return overlap >= min_overlap


def change_coordinate_frame(boxes, window):
    """float32 [M, 4] -> [M, 4]: the boxes in coordinates relative to `window` ([4]), whose
    top-left corner becomes (0, 0) and bottom-right (1, 1); nothing is clipped."""
    window = tf.convert_to_tensor(window, tf.float32)
    boxes = tf.convert_to_tensor(boxes, tf.float32) - tf.gather(window, [0, 1, 0, 1])
    # Multiplied by the reciprocal, as box_list_ops.scale does, so values round as the OD API's.
    scale = 1.0 / tf.stack([window[2] - window[0], window[3] - window[1]] * 2)
    return boxes * scale[tf.newaxis, :]


def clip_to_window(boxes, window, filter_nonoverlapping=True):
    """Clips boxes ([M, 4]) to `window` ([4]) -> (clipped boxes [M', 4], kept bool [M]).

    With `filter_nonoverlapping`, boxes whose clipped area is not positive (outside the
    window, or inverted: ymin > ymax or xmin > xmax) are dropped; `kept` marks the survivors.
    """
    wymin, wxmin, wymax, wxmax = tf.unstack(tf.convert_to_tensor(window, tf.float32))
    ymin, xmin, ymax, xmax = _coordinates(boxes)
    clipped = tf.stack([tf.clip_by_value(ymin, wymin, wymax), tf.clip_by_value(xmin, wxmin, wxmax),
                        tf.clip_by_value(ymax, wymin, wymax), tf.clip_by_value(xmax, wxmin, wxmax)], axis=1)
    kept = area(clipped) > 0.0 if filter_nonoverlapping else tf.ones_like(ymin, tf.bool)
    return tf.boolean_mask(clipped, kept), kept


# ---- horizontal flip ------------------------------------------------------------------------

def flip_boxes_left_right(boxes):
    """float32 [M, 4] -> [M, 4]: the boxes of the mirrored image ([ymin, 1 - xmax, ymax, 1 - xmin])."""
    ymin, xmin, ymax, xmax = _coordinates(boxes)
    return tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1)


def flip_left_right(image, boxes):
    """Mirrors image [H, W, C] and boxes [M, 4] left to right."""
    return tf.image.flip_left_right(image), flip_boxes_left_right(boxes)


def random_horizontal_flip(image, boxes, seed):
    """`flip_left_right` with probability 1/2 (the OD API flips when a uniform draw exceeds 0.5).

    seed: int [2], the stateless seed of the coin. Returns (image, boxes) as given or mirrored.
    """
    image, boxes = tf.convert_to_tensor(image), tf.convert_to_tensor(boxes, tf.float32)
    flip = tf.random.stateless_uniform([], seed) > 0.5
    return tf.cond(flip, lambda: flip_left_right(image, boxes), lambda: (image, boxes))


# ---- random crop ----------------------------------------------------------------------------

def crop_to_window(image, boxes, classes, offset, size, overlap_thresh, clip_boxes=True):
    """Crops image and objects to a pixel window, as `random_crop_image` does once it has one.

    image: [H, W, C]; boxes: float32 [M, 4]; classes: [M];
    offset: int32 [2] (top, left) and size: int32 [2] (height, width) of the window in pixels.
    The boxes completely outside the window are dropped, then those with less than
    `overlap_thresh` of their area inside it; the rest are expressed relative to the window and,
    with `clip_boxes` (a Python bool), clipped to [0, 1].
    Returns (image [height, width, C], boxes [M', 4], classes [M']).
    """
    offset = tf.cast(offset, tf.int32)
    size = tf.cast(size, tf.int32)
    shape = tf.cast(tf.shape(image)[:2], tf.float32)
    # Normalised as sample_distorted_bounding_box reports its window: pixel edges over the image size.
    top_left = tf.cast(offset, tf.float32) / shape
    bottom_right = tf.cast(offset + size, tf.float32) / shape
    window = tf.concat([top_left, bottom_right], axis=0)
    new_image = tf.slice(image, tf.concat([offset, [0]], 0), tf.concat([size, [-1]], 0))

    boxes = tf.convert_to_tensor(boxes, tf.float32)
    inside = prune_completely_outside_window(boxes, window)
    boxes, classes = tf.boolean_mask(boxes, inside), tf.boolean_mask(classes, inside)
    overlapping = prune_non_overlapping_boxes(boxes, window[tf.newaxis, :], overlap_thresh)
    boxes, classes = tf.boolean_mask(boxes, overlapping), tf.boolean_mask(classes, overlapping)
    boxes = change_coordinate_frame(boxes, window)
    if clip_boxes:
        boxes = tf.clip_by_value(boxes, 0.0, 1.0)
    return new_image, boxes, classes


def sample_crop(image_shape, boxes, seed, operations=SSD_CROP_OPERATIONS):
    """Draws one crop: which operation, whether to crop, and the window.

    image_shape: int32 [3] (H, W, C); boxes: float32 [M, 4]; seed: int [2].
    Returns (crop: bool [], offset: int32 [2], size: int32 [2], overlap_thresh: float32 []).
    The operation is chosen uniformly; the window is sampled around the boxes clipped to the
    image (as the OD API clips them for the sampler only); with M == 0 any window qualifies.
    """
    choice_seed, window_seed, coin_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    index = tf.random.stateless_uniform([], choice_seed, maxval=len(operations), dtype=tf.int32)
    sampler_boxes = tf.clip_by_value(tf.convert_to_tensor(boxes, tf.float32), 0.0, 1.0)[tf.newaxis]
    coin = tf.random.stateless_uniform([], coin_seed)

    def branch(op):
        def draw():
            offset, size, _ = tf.image.stateless_sample_distorted_bounding_box(
                image_shape, sampler_boxes, seed=window_seed, min_object_covered=op.min_object_covered,
                aspect_ratio_range=op.aspect_ratio_range, area_range=op.area_range,
                max_attempts=MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True)
            # random_crop_image crops without a coin when random_coef < sys.float_info.min.
            crop = coin > op.random_coef if op.random_coef >= sys.float_info.min else tf.constant(True)
            return crop, offset[:2], size[:2], tf.constant(op.overlap_thresh, tf.float32)
        return draw

    if len(operations) == 1:
        return branch(operations[0])()
    return tf.switch_case(index, [branch(op) for op in operations])


def random_crop_image(image, boxes, classes, seed, operation=CropOperation()):
    """One crop operation: with probability `operation.random_coef` the inputs unchanged, else
    `crop_to_window` on a sampled window. Returns (image, boxes, classes)."""
    return ssd_random_crop(image, boxes, classes, seed, operations=(operation,))


def ssd_random_crop(image, boxes, classes, seed, operations=SSD_CROP_OPERATIONS):
    """`ssd_random_crop`: one of `operations` chosen uniformly, then applied as `random_crop_image`.

    An image left uncropped keeps its boxes exactly as given (no pruning, no clipping), as in
    the OD API. Returns (image [h, w, C], boxes [M', 4], classes [M']).
    """
    image = tf.convert_to_tensor(image)
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    classes = tf.convert_to_tensor(classes)
    clip = {op.clip_boxes for op in operations}
    if len(clip) != 1:
        # The flag decides the graph (a clip or none) while the operation is drawn per image.
        raise ValueError("ssd_random_crop: operations that clip and operations that do not cannot be mixed")
    crop, offset, size, overlap_thresh = sample_crop(tf.shape(image), boxes, seed, operations)
    return tf.cond(crop, lambda: crop_to_window(image, boxes, classes, offset, size, overlap_thresh, clip.pop()),
                   lambda: (image, boxes, classes))


# ---- the configured steps ---------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One augmentation step: `kind` "random_horizontal_flip", or "ssd_random_crop" or
    "random_crop_image" with its `operations` (one for random_crop_image)."""

    kind: str
    operations: tuple = ()


ZOO_STEPS = (Step("random_horizontal_flip"), Step("ssd_random_crop", SSD_CROP_OPERATIONS))


def steps_of(config_steps) -> tuple:
    """`Step`s of a `TrainConfig.data_augmentation` (`AugmentationConfig`s): an `ssd_random_crop`
    without `operations` takes the OD API's seven (`SSD_CROP_OPERATIONS`); written operations
    are taken as written (the OD API read every field of one, an unset field being 0); a
    `random_crop_image` is its one operation."""
    steps = []
    for c in config_steps:
        if c.kind == "random_horizontal_flip":
            steps.append(Step(c.kind))
        elif c.kind in ("ssd_random_crop", "random_crop_image"):
            ops = tuple(CropOperation(min_object_covered=o.min_object_covered,
                                      aspect_ratio_range=(o.min_aspect_ratio, o.max_aspect_ratio),
                                      area_range=(o.min_area, o.max_area), overlap_thresh=o.overlap_thresh,
                                      random_coef=o.random_coef, clip_boxes=o.clip_boxes)
                        for o in c.operations)
            if c.kind == "random_crop_image" and len(ops) != 1:
                raise ValueError(f"random_crop_image takes one operation, got {len(ops)}")
            steps.append(Step(c.kind, ops or SSD_CROP_OPERATIONS))
        else:
            raise ValueError(f"augmentation {c.kind!r} is not supported")
    return tuple(steps)


def augment(image, boxes, classes, seed, steps=ZOO_STEPS):
    """`steps` applied in order, each with a seed of its own split from `seed`.

    image: [H, W, 3]; boxes: float32 [M, 4]; classes: int32 [M]; seed: int [2].
    Returns (image [h, w, 3], boxes [M', 4], classes [M']).
    """
    if not steps:
        return image, boxes, classes
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, len(steps)))
    for step, step_seed in zip(steps, seeds):
        if step.kind == "random_horizontal_flip":
            image, boxes = random_horizontal_flip(image, boxes, step_seed)
        else:
            image, boxes, classes = ssd_random_crop(image, boxes, classes, step_seed, step.operations)
    return image, boxes, classes


def ssd_augment(image, boxes, classes, seed):
    """The zoo SSD MobileNet v1 config's augmentation: `random_horizontal_flip`, then `ssd_random_crop`."""
    return augment(image, boxes, classes, seed, ZOO_STEPS)
