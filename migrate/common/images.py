"""Finding and decoding the images a model runs on.

`list_images` expands files and folders into a list of JPEG/PNG files; `read_image` and
`decode` turn one file into uint8 [H, W, 3] RGB with TensorFlow's own decoders, the ones
the TF1 Object Detection API exporters put in front of the graph (`tf.image.decode_image`
with `channels=3`). Like them, no EXIF orientation is applied: pixels are used as stored.
TensorFlow is imported by those two only: listing images, and `InputError`, serve the LiteRT
runtime too (`ssd_mobilenet.formats.images` decodes the same pixels without TensorFlow).
"""

from __future__ import annotations

import os

import numpy as np

from ssd_mobilenet.errors import InputError

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXTENSIONS = (".jpg", ".jpeg", ".jpe", ".jfif", ".png")


def has_image_extension(path: str) -> bool:
    """True for a JPEG or PNG file name."""
    return path.lower().endswith(EXTENSIONS)


def has_image_magic(head: bytes) -> bool:
    """True when a file's first bytes (at least len(PNG_MAGIC)) are a JPEG's or PNG's."""
    return head.startswith(JPEG_MAGIC) or head.startswith(PNG_MAGIC)


def _has_image_magic(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return has_image_magic(f.read(len(PNG_MAGIC)))
    except OSError:
        return False


def is_image_file(path: str) -> bool:
    """True for a JPEG or PNG by extension or by its first bytes (content is not validated)."""
    return has_image_extension(path) or _has_image_magic(path)


def _images_in_folder(folder: str) -> list:
    found = []
    for root, dirs, files in os.walk(folder):
        # Hidden entries are metadata, not images: `.git/`, macOS `._photo.jpg` AppleDouble files.
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [os.path.join(root, f) for f in files if not f.startswith(".")
                  and is_image_file(os.path.join(root, f))]
    return sorted(found)


def list_images(paths) -> list:
    """Files and folders -> image files, in argument order, each folder's images sorted by path.

    Folders are searched recursively (hidden files and folders skipped) for JPEG and PNG
    files, recognised by extension or content. A file named explicitly must be a JPEG or
    PNG by extension or content; whether it decodes is found out when it is read. A file
    reached twice is listed once.

    Raises:
      InputError: naming the path, for a missing path, a folder without images, or a
        named file that is neither JPEG nor PNG.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    images, seen = [], set()
    for path in map(os.fspath, paths):
        if os.path.isdir(path):
            found = _images_in_folder(path)
            if not found:
                raise InputError(f"{path}: no JPEG or PNG images in this folder (searched recursively)")
        elif os.path.isfile(path):
            if not is_image_file(path):
                raise InputError(f"{path}: not a JPEG or PNG image (neither by extension nor content)")
            found = [path]
        else:
            raise InputError(f"{path}: no such file or folder")
        for image in found:
            key = os.path.realpath(image)
            if key not in seen:
                seen.add(key)
                images.append(image)
    if not images:
        raise InputError("no image paths given")
    return images


def read_image(path) -> np.ndarray:
    """Reads a JPEG or PNG (or any format `tf.io.decode_image` knows) as uint8 [H, W, 3] RGB.

    Raises:
      InputError: naming the file when it is missing or cannot be decoded.
    """
    import tensorflow as tf

    from ssd_mobilenet.image_io import error_message
    path = os.fspath(path)
    try:
        # As bytes: a file name that is not valid UTF-8 reaches the file system unchanged.
        return decode(tf.io.read_file(os.fsencode(path))).numpy()
    except (tf.errors.OpError, ValueError) as e:
        raise InputError(f"{path}: cannot read image: {error_message(e)}") from None


def decode(contents):
    """`ssd_mobilenet.image_io.decode` (TensorFlow's decoder, usable in `tf.data`)."""
    from ssd_mobilenet.image_io import decode as tf_decode
    return tf_decode(contents)
