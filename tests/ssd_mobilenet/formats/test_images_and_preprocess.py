"""`ssd_mobilenet.formats.images` and `.preprocess`: TensorFlow's decoder and the graph's legacy
resize and scaling without TensorFlow, compared with TensorFlow's own ops pixel for pixel."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.conftest import SHARED
from ssd_mobilenet.formats import images, preprocess
from ssd_mobilenet.errors import InputError

PHOTOS = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))
needs_photos = pytest.mark.skipif(not PHOTOS, reason=f"no photos at {SHARED}/photos")


def tf_decode(path) -> np.ndarray:
    return tf.io.decode_image(tf.io.read_file(str(path)), channels=3, expand_animations=False).numpy()


@needs_photos
def test_real_jpegs_decode_to_tensorflows_pixels():
    """The fast integer DCT and fancy upsampling, as TensorFlow's decode_jpeg (Pillow's accurate
    DCT differs by up to 22 levels on these photos, which the last assertion keeps in view)."""
    for path in PHOTOS:
        ours, ref = images.read_image(path), tf_decode(path)
        assert ours.dtype == np.uint8 and ours.shape == ref.shape
        np.testing.assert_array_equal(ours, ref, err_msg=path)
    pillow = np.asarray(Image.open(PHOTOS[1]).convert("RGB"))
    assert (pillow != tf_decode(PHOTOS[1])).any()


def test_pngs_and_a_grayscale_jpeg_decode_to_tensorflows_pixels(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
    cases = {"rgba.png": Image.fromarray(pixels, "RGBA"), "rgb.png": Image.fromarray(pixels[..., :3]),
             "gray.png": Image.fromarray(pixels[..., 0]), "gray_alpha.png": Image.fromarray(pixels[..., :2], "LA"),
             "palette.png": Image.fromarray(pixels[..., :3]).convert("P"),
             "gray16.png": Image.fromarray(rng.integers(0, 65536, (37, 53)).astype(np.uint16)),
             "gray.jpg": Image.fromarray(pixels[..., 0])}
    for name, image in cases.items():
        image.save(tmp_path / name)
        np.testing.assert_array_equal(images.read_image(tmp_path / name), tf_decode(tmp_path / name), err_msg=name)


def test_unreadable_images_are_one_line_naming_the_file(tmp_path):
    cases = {"truncated.jpg": b"\xff\xd8\xff\xe0" + bytes(200), "broken.png": b"\x89PNG\r\n\x1a\nnonsense",
             "text.jpg": b"not an image at all"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError) as e:
            images.read_image(tmp_path / name)
        assert str(e.value).startswith(f"{tmp_path / name}: cannot read image: ") and "\n" not in str(e.value)
    with pytest.raises(InputError, match="missing.png: cannot read image"):
        images.read_image(tmp_path / "missing.png")


def _sources():
    rng = np.random.default_rng(1)
    found = [rng.integers(0, 256, (h, w, 3)).astype(np.uint8) for h, w in ((1, 1), (7, 300), (480, 640))]
    return found + [images.read_image(p) for p in PHOTOS[:3]]


@pytest.mark.parametrize("size", [(300, 300), (128, 128), (257, 311), (1000, 700)])
def test_legacy_resizes_and_scaling_are_tensorflows_bit_for_bit(size):
    h, w = size
    for image in _sources():
        for before in (False, True):  # normalize_before_resize graphs resize the scaled float32 image
            source = preprocess.normalize(image) if before else image.astype(np.float32)
            ref = tf.raw_ops.ResizeBilinear(images=source[None], size=size, align_corners=False,
                                            half_pixel_centers=False).numpy()[0]
            np.testing.assert_array_equal(preprocess.resize_bilinear(source, h, w), ref)
        ref = tf.raw_ops.ResizeNearestNeighbor(images=image[None], size=size, align_corners=False,
                                               half_pixel_centers=False).numpy()[0]
        np.testing.assert_array_equal(preprocess.resize_nearest(image, h, w), ref)
    from ssd_mobilenet import preprocessing
    from ssd_mobilenet.config.ssd_config import SSDConfig
    for method in preprocess.RESIZE_METHODS:
        for before in (False, True):
            config = SSDConfig(num_classes=2, image_height=h, image_width=w, resize_method=method,
                               normalize_before_resize=before)
            image = _sources()[-1]
            np.testing.assert_array_equal(preprocess.preprocess(image, h, w, method, before),
                                          preprocessing.preprocess(image[None], config).numpy()[0])
    with pytest.raises(ValueError, match="BICUBIC"):
        preprocess.preprocess(image, h, w, "BICUBIC")
