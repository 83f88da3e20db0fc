"""What every `export` format reads before it converts: the converted model directory and the
calibration images of an int8 file; bad input is an `InputError`, one line naming the path.

`migrate.export.tflite` (`--tflite`), `migrate.export.onnx` (`--onnx`) and `migrate.export.web`
(`--web`) take these from here.
"""

from __future__ import annotations

import os

import tensorflow as tf

from ssd_mobilenet import detector as detector_lib
from ssd_mobilenet.formats.network import generated_images
from ssd_mobilenet.image_io import error_about
from ssd_mobilenet import converted_dir
from ssd_mobilenet.errors import InputError


def _check_converted(converted: str) -> None:
    if not os.path.isdir(converted):
        raise InputError(f"{converted}: no such directory (expected the output of `migrate convert`)")
    if not converted_dir.is_converted(converted):
        raise InputError(converted_dir.not_converted(converted))


def converted_config(converted: str):
    """The `SSDConfig` of a converted directory, read without its weights (an option the model
    does not take is refused before they are loaded), or `InputError` naming the directory."""
    _check_converted(converted)
    try:
        return detector_lib.read_config(converted)
    except (OSError, ValueError) as e:
        raise InputError(error_about(converted, e, "cannot load it")) from None


def carried(converted: str, labels: str | None = None) -> dict:
    """What the exported file carries of `converted` (`converted_dir.carried`: its label map, or
    `labels` in its place; whether its weights are synthetic), or `InputError` naming a
    label map that does not read."""
    converted_config(converted)  # a directory that is not one is named as such, first
    return converted_dir.carried(converted, labels)


def load_converted(converted: str):
    """The Keras model of a converted directory, or `InputError` naming the directory."""
    _check_converted(converted)
    try:
        return detector_lib.load_model(converted)
    # A truncated tensor data file: the checkpoint reader raises IndexError ("Read less bytes
    # than requested").
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
        raise InputError(error_about(converted, e, "cannot load it")) from None


def calibration_images(paths, config) -> tuple:
    """(names, uint8 [H, W, 3] images) to calibrate an int8 file on: the JPEG and PNG files of
    `paths` (files and folders), or when None `network.generated_images(config)`, named
    `generated:I`.

    Raises:
      InputError: no image among `paths`, or one that cannot be read (naming it).
    """
    if paths is None:
        images = generated_images(config)
        return [f"generated:{i}" for i in range(len(images))], list(images)
    from migrate.common import images as images_lib
    files = images_lib.list_images(paths)
    if not files:
        raise InputError(f"{' '.join(paths)}: no JPEG or PNG images for --calibration")
    return files, [images_lib.read_image(f) for f in files]
