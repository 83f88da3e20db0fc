"""What `verify` runs on: the TF1 source and converted directory per the CLI rules, the images
(generated or read from files), and the output paths it may write."""

from __future__ import annotations

import json
import os

import numpy as np

from migrate.convert import conversion
from ssd_mobilenet import converted_dir
from ssd_mobilenet.errors import OutputExistsError
from ssd_mobilenet.errors import InputError


def _is_converted(path: str) -> bool:
    return os.path.isfile(os.path.join(path, conversion.REPORT)) and os.path.isfile(
        os.path.join(path, "model_config.json"))


def _source_of(converted: str) -> str:
    """The TF1 source a converted directory was made from, per its `conversion_report.json`."""
    report_path = os.path.join(converted, conversion.REPORT)
    try:
        with open(report_path, encoding="utf-8") as f:
            src = json.load(f)["source"]["path"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{report_path}: unreadable conversion report ({e})") from None
    if not os.path.exists(src) and not os.path.exists(src + ".index"):
        raise InputError(f"{report_path}: its source {src} is gone; name SRC")
    return src


def resolve_paths(src=None, converted=None, progress=None):
    """(src, converted) per the CLI rules: a lone converted directory names its source in
    `conversion_report.json`; CONVERTED defaults to where `convert` writes; nothing given
    means the built-in default model (`migrate.convert.default_model`, its TF1 side built on
    first use)."""
    if src is None and converted is None:
        from migrate.convert import default_model
        converted = default_model.converted_dir()
        if not os.path.isdir(converted):
            raise InputError(f"{converted}: not converted yet (`python -m migrate convert` writes it)")
        src = default_model.ensure_tf1_model(progress)
    elif converted is None and os.path.isdir(src) and _is_converted(src):
        src, converted = None, src
    if src is None:
        src = _source_of(converted)
    if not os.path.exists(src) and not os.path.exists(src + ".index"):
        raise InputError(f"{src}: no such file or directory")
    converted = os.path.abspath(converted or conversion.default_out(src))
    if not os.path.isdir(converted):
        raise InputError(f"{converted}: no such folder (`python -m migrate convert SRC` writes it)")
    if not converted_dir.is_converted(converted):
        raise InputError(converted_dir.not_converted(converted))
    return src, converted


def saved_model_precision(converted: str) -> str:
    """The compute precision `convert` wrote `CONVERTED/saved_model` in (its report), float32 for
    reports from before the precision was recorded."""
    try:
        with open(os.path.join(converted, "conversion_report.json"), encoding="utf-8") as f:
            return json.load(f).get("saved_model", {}).get("precision", "float32")
    except (OSError, ValueError):
        return "float32"


def generated_images(config, batch: int) -> list:
    """A fixed set of [(names, uint8 [N, H, W, 3])]: the model size at batch 1, 257x311 at batch
    `batch`, 480x640 at batch 1. Blocky colour fields with noise, so that edges and flat areas
    both occur (pure noise would hide errors that only show on structure)."""
    rng = np.random.default_rng(20180128)
    batches = []
    for n, h, w in [(1, config.image_height, config.image_width), (batch, 257, 311), (1, 480, 640)]:
        blocks = rng.integers(0, 256, (n, h // 16 + 1, w // 16 + 1, 3))
        images = np.repeat(np.repeat(blocks, 16, axis=1), 16, axis=2)[:, :h, :w]
        images = np.clip(images + rng.integers(-24, 25, images.shape), 0, 255).astype(np.uint8)
        batches.append(([f"generated:{h}x{w}#{i}" for i in range(n)], images))
    return batches


def file_images(paths, batch: int, warn=None, skipped: list | None = None) -> list:
    """[(names, uint8 [N, H, W, 3])]: the images of `paths`, same-size images batched up to `batch`.

    An image that cannot be decoded is skipped, as `predict` skips it: a `warning:` line through
    `warn` (default stderr), its path appended to `skipped`.
    Raises:
      InputError: a missing path, a folder without images, or no image that decodes (one
        line, no warnings: the first image's error and how many could not be read).
    """
    import sys

    from migrate.common import images as images_lib
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    by_size, errors = {}, []
    listed = images_lib.list_images(paths)
    for path in listed:
        try:
            image = images_lib.read_image(path)
        except InputError as e:
            errors.append((path, str(e)))
            continue
        by_size.setdefault(image.shape, []).append((path, image))
    if not by_size:
        first = errors[0][1]
        raise InputError(first if len(errors) == 1 else
                         f"none of the {len(errors)} images can be read ({first})")
    for path, error in errors:
        warn(f"warning: {error}")
        if skipped is not None:
            skipped.append(path)
    batches = []
    for group in by_size.values():
        for start in range(0, len(group), batch):
            chunk = group[start:start + batch]
            batches.append(([p for p, _ in chunk], np.stack([im for _, im in chunk])))
    return batches


def _check_outputs(json_path, png_dir, force):
    if json_path and os.path.isdir(json_path):
        raise InputError(f"{json_path}: is a directory, not a JSON file path")
    if png_dir and os.path.exists(png_dir) and not os.path.isdir(png_dir):
        raise InputError(f"{png_dir}: exists and is not a directory")
    if json_path and os.path.exists(json_path) and not force:
        raise OutputExistsError(f"{json_path}: exists (use --force to replace it)")
    if png_dir and os.path.exists(png_dir) and (not os.path.isdir(png_dir) or os.listdir(png_dir)) and not force:
        raise OutputExistsError(f"{png_dir}: exists and is not empty (use --force to replace it)")
