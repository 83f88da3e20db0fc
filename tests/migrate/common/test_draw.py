"""Detections drawn for people (`migrate.common.draw`): Pillow only, no TensorFlow."""

import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from migrate.common import draw

from tests.conftest import REPO
BACKGROUND = 50
H, W = 200, 300
BOX = [0.3, 0.2, 0.8, 0.6]  # rows 60..159, columns 60..179


def _grey(height=H, width=W):
    return np.full((height, width, 3), BACKGROUND, np.uint8)


def _is(pixels, colour):
    return (pixels == colour).all(-1)


def _strip_above(got, box=BOX):
    """The band of rows just above the box, over its width: where its label strip goes."""
    y0, x0, x1 = int(box[0] * got.shape[0]), int(box[1] * got.shape[1]), int(box[3] * got.shape[1])
    return got[max(y0 - 12, 0):y0, x0:x1]


def test_outline_takes_the_class_colour_inside_the_box():
    got = draw.draw_labelled(_grey(), [BOX], [1], [0.9])
    colour = draw.colour_of(1)
    # Pixel rows/columns of the box: [0, 1] spans 0..H-1; the outline is drawn inwards.
    top, left, bottom, right = 60, 60, 159, 179
    for y, x in [(top, 100), (bottom, 100), (100, left), (100, right)]:
        assert _is(got[y, x], colour), (y, x, got[y, x])
    assert _is(got[bottom + 1, 100], BACKGROUND) and _is(got[100, right + 1], BACKGROUND)
    assert _is(got[100, 100], BACKGROUND)  # the inside stays clear
    assert _is(got[bottom - 2:bottom + 1, 100], colour).sum() >= 2  # a line at least 2 pixels wide


def test_two_classes_get_different_colours():
    other = [0.05, 0.7, 0.5, 0.95]
    got = draw.draw_labelled(_grey(), [BOX, other], [1, 2], [0.9, 0.8])
    assert draw.colour_of(1) != draw.colour_of(2)
    assert _is(got[159, 100], draw.colour_of(1)) and _is(got[99, 250], draw.colour_of(2))
    assert len(set(draw.COLOURS)) == len(draw.COLOURS)


def test_label_strip_holds_text_and_is_absent_below_min_score():
    colour = draw.colour_of(3)
    strip = _strip_above(draw.draw_labelled(_grey(), [BOX], [3], [0.87], {3: "dog"}))
    filled, background = _is(strip, colour), _is(strip, BACKGROUND)
    assert filled.sum() > 100                        # a filled strip over the box ...
    assert (~filled & ~background).sum() > 20        # ... with text in it
    # Below min_score: neither the box nor its strip.
    skipped = draw.draw_labelled(_grey(), [BOX], [3], [0.4], {3: "dog"}, min_score=0.5)
    np.testing.assert_array_equal(skipped, _grey())
    assert not _is(_strip_above(skipped), colour).any()


def test_a_name_and_an_id_read_differently():
    named = draw.draw_labelled(_grey(), [BOX], [3], [0.87], {3: "a rather long class name"})
    unnamed = draw.draw_labelled(_grey(), [BOX], [3], [0.87], {4: "cat"})   # `id 3: 87%`
    no_labels = draw.draw_labelled(_grey(), [BOX], [3], [0.87])
    np.testing.assert_array_equal(unnamed, no_labels)
    colour = draw.colour_of(3)
    assert _is(named, colour).sum() > _is(unnamed, colour).sum()  # the longer text, the wider strip


def test_text_contrasts_with_the_strip():
    # Class 2 is light (yellow): dark text; class 18 is dark (navy): light text.
    for class_id, want_dark in ((2, True), (18, False)):
        strip = _strip_above(draw.draw_labelled(_grey(), [BOX], [class_id], [0.9]))
        text = strip[~_is(strip, draw.colour_of(class_id)) & ~_is(strip, BACKGROUND)].astype(int).sum(-1)
        assert (text.min() < 100) if want_dark else (text.max() > 600), (class_id, text.min(), text.max())


def test_the_best_label_ends_on_top():
    # Same box, two classes: whichever order they come in, the higher score's strip shows.
    for scores in ([0.6, 0.9], [0.9, 0.6]):
        best = [1, 2][int(np.argmax(scores))]
        strip = _strip_above(draw.draw_labelled(_grey(), [BOX, BOX], [1, 2], scores))
        assert _is(strip, draw.colour_of(best)).sum() > 5 * _is(strip, draw.colour_of(3 - best)).sum()


def test_strip_goes_inside_a_box_at_the_top_edge():
    top_box = [0.0, 0.2, 0.5, 0.6]
    got = draw.draw_labelled(_grey(), [top_box], [1], [0.9])
    band = got[2:12, 65:175]
    assert _is(band, draw.colour_of(1)).sum() > 200  # the strip fills the top of the box


def test_boxes_outside_the_image_do_not_raise_and_are_clipped():
    image = _grey()
    boxes = [[-0.2, -0.1, 0.5, 0.4], [0.6, 0.7, 1.3, 1.5], [1.2, 1.2, 1.5, 1.5], [0.5, 0.5, 0.4, 0.4]]
    got = draw.draw_labelled(image, boxes, [1, 2, 3, 4], [0.9, 0.9, 0.9, 0.9])
    assert got.shape == image.shape and got.dtype == np.uint8
    assert _is(got[H - 1, 250], draw.colour_of(2)) and _is(got[150, W - 1], draw.colour_of(2))  # clipped edges
    assert _is(got[50, 0], draw.colour_of(1))
    assert not _is(got, draw.colour_of(3)).any() and not _is(got, draw.colour_of(4)).any()


def test_the_input_is_not_modified():
    image = np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)
    kept = image.copy()
    got = draw.draw_labelled(image, [BOX], [1], [0.9], {1: "person"})
    np.testing.assert_array_equal(image, kept)
    assert not np.shares_memory(got, image) and not np.array_equal(got, image)
    got[0, 0] = 0  # writable


def test_wrong_inputs_raise():
    with pytest.raises(ValueError, match="uint8"):
        draw.draw_labelled(np.zeros((4, 4, 3), np.float32), [], [], [])
    with pytest.raises(ValueError, match="same length"):
        draw.draw_labelled(_grey(), [BOX], [1, 2], [0.9])
    with pytest.raises(ValueError, match="same height"):
        draw.side_by_side(_grey(100), _grey(), "a", "b")


def test_no_detections_round_trip_unchanged_through_write_png(tmp_path):
    image = np.random.default_rng(1).integers(0, 256, (H, W, 3), dtype=np.uint8)
    out = tmp_path / "sub" / "drawn.png"
    drawn = draw.draw_labelled(image, np.zeros([0, 4]), np.zeros([0], int), np.zeros([0]))
    draw.write_png(drawn, str(out))
    with Image.open(out) as png:
        assert png.format == "PNG" and png.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(png), image)
    assert os.listdir(tmp_path / "sub") == ["drawn.png"]  # no temporary left behind


def test_side_by_side_puts_titles_over_both_pictures():
    left, right = np.zeros((H, 120, 3), np.uint8), np.full((H, 80, 3), 255, np.uint8)
    got = draw.side_by_side(left, right, "TF1 graph", "TF2")
    title = got.shape[0] - H
    assert got.dtype == np.uint8 and 10 < title < 40 and got.shape[1] == 120 + draw.GAP + 80
    np.testing.assert_array_equal(got[title:, :120], left)
    np.testing.assert_array_equal(got[title:, 120 + draw.GAP:], right)
    for strip in (got[:title, :120], got[:title, 120 + draw.GAP:]):
        assert _is(strip, draw.TITLE_COLOUR).mean() > 0.5 and (~_is(strip, draw.TITLE_COLOUR)).sum() > 20
    untitled = draw.side_by_side(left, right, "", "")
    assert _is(untitled[:title, :120], draw.TITLE_COLOUR).all()


def test_imports_without_tensorflow(tmp_path):
    # A `tensorflow` that cannot be imported, first on the path: the module and a drawing still work.
    (tmp_path / "tensorflow.py").write_text("raise ImportError('tensorflow is not available here')\n")
    code = ("import sys, numpy as np\n"
            "from migrate.common import draw\n"
            "got = draw.draw_labelled(np.zeros((50, 60, 3), np.uint8), [[0.1, 0.1, 0.9, 0.9]], [1], [0.9], {1: 'x'})\n"
            f"draw.write_png(draw.side_by_side(got, got, 'a', 'b'), {str(tmp_path / 'x.png')!r})\n"
            "assert 'tensorflow' not in sys.modules\n"
            "try:\n    import tensorflow\nexcept ImportError:\n    pass\n"  # the stand-in did block it
            "else:\n    raise SystemExit('tensorflow imported')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x.png").is_file()
