"""Detections drawn for people to read, with Pillow alone (no TensorFlow), and written as PNG.

As the TF1 Object Detection API's `visualize_boxes_and_labels_on_image_array` showed them:
each box outlined in a colour of its class, a filled strip above it (inside it when the box
touches the image's top) with the class name and the score, e.g. `dog: 87%`.
Boxes are [ymin, xmin, ymax, xmax] normalised to the image, as everywhere in the repo.
"""

from __future__ import annotations

import functools
import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ssd_mobilenet import atomic_write

# Clearly distinct colours, picked as `class_id % len(COLOURS)` (the OD API's rule): neighbouring
# ids differ in hue, and each is light or dark enough for black or white text to read on it.
COLOURS = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
    (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0),
    (170, 255, 195), (128, 128, 0), (255, 215, 180), (0, 0, 128), (128, 128, 128),
)
TITLE_COLOUR = (40, 40, 40)      # side_by_side's title strips, white text
GAP_COLOUR = (255, 255, 255)
GAP = 8                          # pixels between the two pictures of side_by_side


def colour_of(class_id: int) -> tuple:
    """The (r, g, b) outline and strip colour of a class id."""
    return COLOURS[int(class_id) % len(COLOURS)]


def _text_colour(background) -> tuple:
    # Black or white, whichever has the higher WCAG contrast ratio with the background:
    # a fixed threshold on plain (r + g + b) would put white on yellow and black on blue.
    linear = [(c / 255) / 12.92 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in background]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return (0, 0, 0) if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else (255, 255, 255)


@functools.lru_cache(maxsize=None)
def _font(size: int):
    # Pillow >= 10.1 scales its built-in font when FreeType is there; before 10.1 `size` is not
    # accepted and the small bitmap font is all there is.
    try:
        return ImageFont.load_default(size=size)
    except TypeError:
        return ImageFont.load_default()


def _sizes(height: int, width: int) -> tuple:
    """(font size, outline width) in pixels: they grow mildly with the picture, so labels stay
    readable on 300x300 model inputs and do not shout on a 4000-pixel photo."""
    short = min(height, width)
    return int(np.clip(10 + short / 40, 11, 32)), max(2, round(short / 250))


def _check_image(image) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image must be uint8 [H, W, 3], got {image.dtype} {list(image.shape)}")
    return image


def _text_block(draw: ImageDraw.ImageDraw, text: str, font, margin: int) -> tuple:
    """(width, height, (dx, dy)) of a strip holding `text`, and where to draw the text in it.
    The height comes from tall and deep glyphs, not from `text`, so all strips match."""
    left, _, right, _ = draw.textbbox((0, 0), text, font=font)
    _, top, _, bottom = draw.textbbox((0, 0), "Ayg|%", font=font)
    return right - left + 2 * margin, bottom - top + 2 * margin, (margin - left, margin - top)


def draw_labelled(image, boxes, classes, scores, labels: dict | None = None, min_score: float = 0.5) -> np.ndarray:
    """Draws each detection scoring >= `min_score` as an outlined box with a `name: 87%` strip.

    Args:
      image: uint8 [H, W, 3] RGB; not modified.
      boxes: float [K, 4] normalised [ymin, xmin, ymax, xmax]; parts outside [0, 1] are clipped.
      classes: int [K] 1-based class ids; scores: float [K].
      labels: {class id: name}; ids without a name (or labels None) show as `id N`.
      min_score: detections scoring less are not drawn.
    Returns:
      a new uint8 [H, W, 3] array.
    Raises:
      ValueError: on a wrong image dtype/shape or boxes, classes, scores of different lengths.
    """
    image = _check_image(image)
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    classes, scores = np.asarray(classes).reshape(-1), np.asarray(scores, np.float64).reshape(-1)
    if not len(boxes) == len(classes) == len(scores):
        raise ValueError(f"boxes, classes and scores must have the same length, got "
                         f"{len(boxes)}, {len(classes)}, {len(scores)}")
    height, width = image.shape[:2]
    font_size, thickness = _sizes(height, width)
    font, margin = _font(font_size), max(2, font_size // 6)
    picture = Image.fromarray(image.copy())
    draw = ImageDraw.Draw(picture)

    shown = [k for k in np.argsort(scores, kind="stable") if scores[k] >= min_score and np.isfinite(boxes[k]).all()]
    placed = []
    for k in shown:  # lowest score first, so the best box is drawn last, over the others
        ymin, xmin, ymax, xmax = boxes[k]
        # Pixel rows/columns the box covers: [0, 1] spans the whole image, 0..H-1.
        x0, y0 = max(int(np.floor(xmin * width)), 0), max(int(np.floor(ymin * height)), 0)
        x1, y1 = min(int(np.ceil(xmax * width)) - 1, width - 1), min(int(np.ceil(ymax * height)) - 1, height - 1)
        if x1 < x0 or y1 < y0:  # wholly outside the image, or inside out
            continue
        colour = colour_of(classes[k])
        draw.rectangle([x0, y0, x1, y1], outline=colour, width=thickness)  # Pillow's width goes inwards
        placed.append((k, x0, y0, colour))

    # Strips after all outlines: no outline crosses a label, and the best label ends on top.
    for k, x0, y0, colour in placed:
        class_id = int(classes[k])
        name = labels.get(class_id) if labels else None
        text = f"{name if name else f'id {class_id}'}: {scores[k]:.0%}"
        strip_w, strip_h, (dx, dy) = _text_block(draw, text, font, margin)
        top = y0 - strip_h if y0 >= strip_h else y0  # above the box; inside it at the image's top
        left = max(min(x0, width - strip_w), 0)      # kept on the image at its right edge
        draw.rectangle([left, top, left + strip_w - 1, top + strip_h - 1], fill=colour)
        draw.text((left + dx, top + dy), text, fill=_text_colour(colour), font=font)
    return np.array(picture)  # a writable array of its own


def side_by_side(left, right, left_title: str, right_title: str) -> np.ndarray:
    """Two pictures of the same height next to each other, GAP pixels apart, each with a title strip on top.

    Args:
      left, right: uint8 [H, W1, 3] and [H, W2, 3].
    Returns:
      uint8 [T + H, W1 + GAP + W2, 3], T the title strip's height.
    Raises:
      ValueError: on a wrong dtype/shape or different heights.
    """
    left, right = _check_image(left), _check_image(right)
    if left.shape[0] != right.shape[0]:
        raise ValueError(f"pictures must have the same height, got {left.shape[0]} and {right.shape[0]}")
    height = left.shape[0]
    font_size, _ = _sizes(height, min(left.shape[1], right.shape[1]))
    font, margin = _font(font_size), max(2, font_size // 4)
    _, strip_h, _ = _text_block(ImageDraw.Draw(Image.new("RGB", (1, 1))), "", font, margin)
    out = Image.new("RGB", (left.shape[1] + GAP + right.shape[1], strip_h + height), GAP_COLOUR)
    for x, picture, title in ((0, left, left_title), (left.shape[1] + GAP, right, right_title)):
        # Each title on its own strip, so a long one is cut at its picture's edge, not drawn over the other.
        strip = Image.new("RGB", (picture.shape[1], strip_h), TITLE_COLOUR)
        strip_draw = ImageDraw.Draw(strip)
        _, _, (dx, dy) = _text_block(strip_draw, title, font, margin)
        strip_draw.text((dx, dy), title, fill=(255, 255, 255), font=font)
        out.paste(strip, (x, 0))
        out.paste(Image.fromarray(picture), (x, strip_h))
    return np.array(out)


def write_png(image, out_png_path: str) -> None:
    """Writes uint8 [H, W, 3] RGB as a PNG, atomically; missing parent folders are created."""
    buffer = io.BytesIO()
    Image.fromarray(_check_image(image)).save(buffer, format="PNG")
    atomic_write.write_bytes(out_png_path, buffer.getvalue())
