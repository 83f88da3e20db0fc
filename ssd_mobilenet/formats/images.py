"""Image files to uint8 [H, W, 3] RGB without TensorFlow, pixel for pixel what TensorFlow's
decoder gives (`tf.io.decode_image(channels=3)`, the decoder the TF1 exporters put in front of
the graph and the one `predict` uses on the TensorFlow runtime).

JPEG: libjpeg-turbo through `simplejpeg`, with TensorFlow's decode_jpeg defaults: the fast
integer DCT (TF maps its default `dct_method=""` to JDCT_IFAST) and fancy upsampling of the
chroma planes. Pillow's JPEG decoder uses the accurate DCT and differs from TensorFlow's by up
to 22 levels on real photos; with Pillow's `draft` it takes the fast DCT but also turns fancy
upsampling off. Every other format (PNG, GIF's first frame, BMP) through Pillow, whose lossless
decoders give the same pixels; a 16-bit PNG keeps the high byte of each sample, as libpng's
`png_set_strip_16` does in TensorFlow. No EXIF orientation is applied, as in TensorFlow.
"""

from __future__ import annotations

import io
import os

import numpy as np

from ssd_mobilenet.errors import InputError

JPEG_MAGIC = b"\xff\xd8\xff"


def decode(data: bytes) -> np.ndarray:
    """Encoded bytes -> uint8 [H, W, 3] RGB (see the module docstring).

    Raises:
      ValueError: the bytes are not an image these decoders read (the message says why).
    """
    if data[:3] == JPEG_MAGIC:
        import simplejpeg
        # strict: a truncated or corrupt JPEG is an error, as in TensorFlow (try_recover_truncated=False).
        return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True, fastupsample=False, strict=True)
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(0)  # an animation's first frame (TF: expand_animations=False)
            image.load()
            if image.mode in ("I;16", "I;16B", "I;16L", "I"):
                # 16-bit grayscale: the high byte, replicated to three channels.
                gray = (np.asarray(image, np.uint32) >> 8).astype(np.uint8)
                return np.repeat(gray[:, :, None], 3, axis=2)
            # RGBA and LA drop their alpha without compositing, as TensorFlow's channels=3 does.
            return np.asarray(image.convert("RGB"), np.uint8)
    except UnidentifiedImageError:
        # Pillow's message names its in-memory file object (`<_io.BytesIO object at 0x...>`).
        raise ValueError("unknown image format (not JPEG, PNG, GIF or BMP)") from None
    except (OSError, SyntaxError) as e:
        raise ValueError(str(e) or type(e).__name__) from None


def read_image(path) -> np.ndarray:
    """The image file at `path` as uint8 [H, W, 3] RGB.

    Raises:
      InputError: naming the file when it is missing, unreadable or does not decode.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read image: {e.strerror or e}") from None
    return decode_named(data, path)


def decode_named(data: bytes, path: str) -> np.ndarray:
    """`decode`, its errors as an `InputError` naming `path` (the file the bytes were read from)."""
    try:
        return decode(data)
    except ValueError as e:
        raise InputError(f"{path}: cannot read image: {str(e).splitlines()[0] if str(e) else 'not an image'}") from None
