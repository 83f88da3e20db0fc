"""What a converted model directory holds, and how its SavedModel is tied to its checkpoint.

    CONVERTED/
      model_config.json           the `SSDConfig`
      label_map.pbtxt             the class names, when the model has them (`label_map_file`)
      synthetic_weights.txt       when the weights are seeded synthetic ones (`synthetic_weights`)
      checkpoint/ckpt.*           the Keras model's TF2 checkpoint (`ssd_mobilenet.detector.save`)
      saved_model/                the SavedModel (`ssd_mobilenet.formats.saved_model`), with
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

The label map travels with the model: `convert` keeps the one its source's pipeline.config names
(or the one given with `--labels`), `train` writes it along, and `predict`, `export` and
`evaluate` read it unless `--labels` gives another. `synthetic_weights.txt` marks a model whose
weights `migrate.tf1.builder` generated (the built-in default model, the shapes demo before
training), whose detections, and so their labels, mean nothing: the commands that show
detections say so. The builder writes the same file into the TF1 model directories it writes
with generated weights, and `convert` carries it over.
"""

from __future__ import annotations

import hashlib
import json
import os

CONFIG_FILE = "model_config.json"
CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_PREFIX = "ckpt"
SAVED_MODEL_DIR = "saved_model"
LABEL_MAP_FILE = "label_map.pbtxt"
SYNTHETIC_FILE = "synthetic_weights.txt"
# The marker's text: why the file is there, for a person who finds it.
SYNTHETIC_TEXT = ("The weights of this model are seeded synthetic ones (migrate.tf1.builder), not trained:\n"
                  "its detections and their labels mean nothing.\n")
# Under the SavedModel directory (module docstring).
METADATA_PATH = os.path.join("assets.extra", "ssd_mobilenet.json")
# The metadata's layout; a file of another format is not read.
METADATA_FORMAT = 1


def is_converted(path: str) -> bool:
    """Whether `path` is a directory `convert` (or `train`) wrote: it holds `CONFIG_FILE`."""
    return os.path.isfile(os.path.join(path, CONFIG_FILE))


def not_converted(path: str) -> str:
    """The one line every command gives for a path that `is_converted` refuses."""
    return f"{path}: not a converted model directory (no {CONFIG_FILE})"


def config_path(directory: str) -> str:
    return os.path.join(directory, CONFIG_FILE)


def checkpoint_prefix(directory: str) -> str:
    return os.path.join(directory, CHECKPOINT_DIR, CHECKPOINT_PREFIX)


def saved_model_path(directory: str) -> str:
    return os.path.join(directory, SAVED_MODEL_DIR)


def label_map_file(directory: str) -> str | None:
    """The label map a converted directory carries (`LABEL_MAP_FILE`), or None without one."""
    path = os.path.join(directory, LABEL_MAP_FILE)
    return path if os.path.isfile(path) else None


def synthetic_weights(directory: str) -> bool:
    """Whether a model directory (converted, or a TF1 one the builder wrote) is marked as holding
    seeded synthetic weights (`SYNTHETIC_FILE`)."""
    return os.path.isfile(os.path.join(directory, SYNTHETIC_FILE))


def mark_synthetic(directory: str) -> None:
    """Writes the `SYNTHETIC_FILE` marker into `directory`."""
    with open(os.path.join(directory, SYNTHETIC_FILE), "w", encoding="utf-8") as f:
        f.write(SYNTHETIC_TEXT)


def carried(directory: str, labels: str | None = None) -> dict:
    """What an exported file's metadata carries of a converted directory besides its config:
    `labels`, {class id (str): name} of `labels` (a label map file or `coco`) or else of the
    directory's label map, when there is one; `synthetic`, true when the directory is marked
    (`synthetic_weights`). Keys without a value are left out.

    Raises:
      InputError: the label map does not read, or names ids beyond the model's
        classes (`label_map.fits`).
    """
    from ssd_mobilenet import label_map
    path = labels or label_map_file(directory)
    entry = {}
    if path is not None:
        names = label_map.read(path)
        label_map.fits(path, names, read_config(directory).num_classes)
        entry["labels"] = {str(k): v for k, v in sorted(names.items())}
    if synthetic_weights(directory):
        entry["synthetic"] = True
    return entry


def read_config(directory: str):
    """The `SSDConfig` of a converted directory's `model_config.json`.

    Raises:
      FileNotFoundError: no such file (not a converted directory).
      ConfigError: a config this version cannot read.
    """
    from ssd_mobilenet.config.ssd_config import SSDConfig
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
