"""Finding and decoding images (`migrate.common.images`; drawing: test_draw.py)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import random_images
from migrate.common import images
from ssd_mobilenet.errors import InputError


def _write(path, data: bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _png(array):
    return tf.io.encode_png(array).numpy()


def _jpeg(array):
    return tf.io.encode_jpeg(array, quality=95).numpy()


def test_list_images_recurses_sorts_and_sniffs(tmp_path):
    img = random_images(0, 1, 8, 8)[0]
    a = _write(tmp_path / "b" / "z.png", _png(img))
    b = _write(tmp_path / "b" / "a" / "y.JPG", _jpeg(img))
    c = _write(tmp_path / "a.jpeg", _jpeg(img))
    d = _write(tmp_path / "no_extension", _png(img))  # PNG by content
    _write(tmp_path / "notes.txt", b"not an image")
    _write(tmp_path / "._z.jpg", b"AppleDouble metadata")  # hidden: skipped
    _write(tmp_path / ".cache" / "x.png", _png(img))
    extra = _write(tmp_path.parent / f"{tmp_path.name}_single.png", _png(img))
    got = images.list_images([str(tmp_path), extra, a])  # `a` again: listed once
    assert got == sorted([a, b, c, d]) + [extra]


def test_list_images_errors_name_the_path(tmp_path):
    with pytest.raises(InputError, match=f"{tmp_path / 'missing'}: no such file or folder"):
        images.list_images([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "empty" / "readme.md", b"# no images")
    with pytest.raises(InputError, match=f"{tmp_path / 'empty'}: no JPEG or PNG images"):
        images.list_images([str(tmp_path / "empty")])
    text = _write(tmp_path / "notes.txt", b"text")
    with pytest.raises(InputError, match=f"{text}: not a JPEG or PNG"):
        images.list_images([text])
    assert str(InputError("x")) == "x" and issubclass(InputError, ValueError)


def test_read_image_converts_to_rgb_uint8(tmp_path):
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (17, 23, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, (17, 23, 1), dtype=np.uint8)
    rgba = rng.integers(0, 256, (17, 23, 4), dtype=np.uint8)
    gray16 = rng.integers(0, 65536, (17, 23, 1), dtype=np.uint16)
    np.testing.assert_array_equal(images.read_image(_write(tmp_path / "rgb.png", _png(rgb))), rgb)
    np.testing.assert_array_equal(images.read_image(_write(tmp_path / "gray.png", _png(gray))),
                                  np.repeat(gray, 3, axis=-1))
    np.testing.assert_array_equal(images.read_image(_write(tmp_path / "rgba.png", _png(rgba))), rgba[..., :3])
    # 16-bit PNG: the high byte of each sample.
    np.testing.assert_array_equal(images.read_image(_write(tmp_path / "g16.png", _png(gray16))),
                                  np.repeat((gray16 >> 8).astype(np.uint8), 3, axis=-1))
    jpeg = _jpeg(rgb)
    got = images.read_image(_write(tmp_path / "rgb.jpg", jpeg))
    assert got.dtype == np.uint8 and got.shape == (17, 23, 3)
    np.testing.assert_array_equal(got, tf.io.decode_jpeg(jpeg, channels=3).numpy())


def test_read_image_errors_name_the_file(tmp_path):
    truncated = _write(tmp_path / "cut.jpg", _jpeg(random_images(1, 1, 64, 64)[0])[:300])
    junk = _write(tmp_path / "junk.png", b"\x89PNG\r\n\x1a\n but nothing after")
    for path in (truncated, junk, str(tmp_path / "missing.png")):
        with pytest.raises(InputError) as e:
            images.read_image(path)
        message = str(e.value)
        assert message.startswith(f"{path}: cannot read image: ") and "\n" not in message
        assert "function_node" not in message and "[Op:" not in message
