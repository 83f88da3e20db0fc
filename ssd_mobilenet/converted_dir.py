"""What a converted model directory holds, and how its SavedModel is tied to its checkpoint.

    CONVERTED/
      model_config.json           the `SSDConfig`
      checkpoint/ckpt.*           the Keras model's TF2 checkpoint (`ssd_mobilenet.detector.save`)
      saved_model/                the SavedModel (`ssd_mobilenet.export`), with
        assets.extra/ssd_mobilenet.json   what it holds and what it was exported from (below)

The SavedModel's metadata file says how the SavedModel computes (variant, precision, weights as
variables or constants, slicing) and what it was exported from: the SHA-256 of `model_config.json`
and of the checkpoint's index (which holds every tensor's dtype, shape, offset and CRC32C, so it
changes with any weight), and TensorFlow's own fingerprint of the SavedModel as written
(`tf.saved_model.experimental.read_fingerprint`). `assets.extra/` is the SavedModel's place for
files that travel with a model and that no TensorFlow loader reads (TF Serving keeps its warm-up
requests there).

`ssd_mobilenet.load` runs the SavedModel instead of rebuilding the Keras model only when the
metadata matches the directory's config and checkpoint (`source_fingerprint`) and the SavedModel
is the one the metadata describes; this module reads files only, without TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
import os

CONFIG_FILE = "model_config.json"
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_PREFIX = "ckpt"
SAVED_MODEL_DIR = "saved_model"
# Under the SavedModel directory (module docstring).
METADATA_PATH = os.path.join("assets.extra", "ssd_mobilenet.json")
# The metadata's layout; a file of another format is not read.
METADATA_FORMAT = 1


def config_path(directory: str) -> str:
    return os.path.join(directory, CONFIG_FILE)


def checkpoint_prefix(directory: str) -> str:
    return os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX)


def saved_model_path(directory: str) -> str:
    return os.path.join(directory, SAVED_MODEL_DIR)


def read_config(directory: str):
    """The `SSDConfig` of a converted directory's `model_config.json`.

    Raises:
      FileNotFoundError: no such file (not a converted directory).
      ssd_mobilenet.ConfigError: a config this version cannot read.
    """
    from ssd_mobilenet.config import SSDConfig
    path = config_path(directory)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: not found (not a converted model directory)")
    with open(path, encoding="utf-8") as f:
        return SSDConfig.from_dict(json.load(f))


def file_sha256(path: str) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_fingerprint(directory: str) -> dict | None:
    """{"config_sha256", "checkpoint_index_sha256", "checkpoint_data_bytes"} of a converted
    directory's `model_config.json` and checkpoint; None when either is missing.

    The checkpoint's index (kilobytes) stands for its weights: it records each tensor's CRC32C,
    and TensorFlow checks those when it reads the data, so a change of any weight changes it.
    """
    prefix = checkpoint_prefix(directory)
    index = prefix + ".index"
    folder = os.path.dirname(prefix)
    try:
        data = sorted(f for f in os.listdir(folder) if f.startswith(CHECKPOINT_PREFIX + ".data-"))
        if not data or not os.path.isfile(index) or not os.path.isfile(config_path(directory)):
            return None
        return {"config_sha256": file_sha256(config_path(directory)), "checkpoint_index_sha256": file_sha256(index),
                "checkpoint_data_bytes": sum(os.path.getsize(os.path.join(folder, f)) for f in data)}
    except OSError:
        return None


def write_metadata(saved_model: str, metadata: dict) -> None:
    """Writes `metadata` (JSON-able) as the SavedModel's metadata file."""
    path = os.path.join(saved_model, METADATA_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"format": METADATA_FORMAT, **metadata}, f, indent=2, sort_keys=True)


def read_metadata(saved_model: str) -> dict | None:
    """The SavedModel's metadata (`write_metadata`), or None: no such file (a SavedModel exported
    before it was written, or by other tools), unreadable, or of another format."""
    try:
        with open(os.path.join(saved_model, METADATA_PATH), encoding="utf-8") as f:
            metadata = json.load(f)
    except (OSError, ValueError):
        return None
    return metadata if isinstance(metadata, dict) and metadata.get("format") == METADATA_FORMAT else None


def saved_model_mismatch(directory: str, metadata: dict) -> str | None:
    """Why the SavedModel of `metadata` was not exported from `directory`'s config and checkpoint
    as they are now (a few words, for a console line that names `directory`), or None when it was."""
    recorded = metadata.get("source")
    if not recorded:
        return "no source in its metadata"
    current = source_fingerprint(directory)
    if current is None:
        return f"no {CONFIG_FILE} and checkpoint to compare"
    if current["config_sha256"] != recorded.get("config_sha256"):
        return f"made for another {CONFIG_FILE}"
    if (current["checkpoint_index_sha256"] != recorded.get("checkpoint_index_sha256")
            or current["checkpoint_data_bytes"] != recorded.get("checkpoint_data_bytes")):
        return f"made from another {CHECKPOINT_DIR}/"
    return None
