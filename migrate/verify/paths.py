"""What a path given to `verify` is, by its names only: a TF1 model, or not. No TensorFlow: the
command checks its paths (`migrate.commands.verify.missing_path`) before TensorFlow starts."""

from __future__ import annotations

import os
import re

from ssd_mobilenet import converted_dir

# What a TF1 model directory holds (`migrate.tf1.sources.open_source` reads these), and the files
# and checkpoint prefixes it names itself.
_TF1_FILES = ("frozen_inference_graph.pb", "saved_model.pb", os.path.join("saved_model", "saved_model.pb"),
              "pipeline.config", "checkpoint", "tflite_graph.pb")
_TF1_FILE = re.compile(r"\.(pb|meta|index|config|pbtxt|data-\d+-of-\d+)$")


def looks_tf1(path) -> bool:
    """Whether `path` looks like a TF1 model (a directory of one, a file or checkpoint prefix in
    one) and not like a converted directory: what `sources.open_source` reads, by names only."""
    if os.path.isdir(path):
        return not converted_dir.is_converted(path) and (any(os.path.isfile(os.path.join(path, f)) for f in _TF1_FILES)
                                                         or any(f.endswith(".index") for f in os.listdir(path)))
    return bool(_TF1_FILE.search(path)) or os.path.isfile(path + ".index")
