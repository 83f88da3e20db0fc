"""The TF1 models `scripts/bench.py --model NAME` measures, built from ../shared/zoo with synthetic weights.

`ssd` is the 2018 zoo release: its published graph (`model.ckpt.meta`) made a complete model directory by
../shared/tools/make_zoo_fixture.py. The zoo's FPN and PPN releases came with no graph here, only their
training configs (`sample_configs/`); `fpn_640` and `ppn_300` are those configs built by the project's
TF1 builder (`migrate.tf1.builder`: slim, the OD API's graph, every stage 0.0 from the OD API exporter's
own exports in tests/migrate/tf1/test_builder.py and tests/migrate/convert/test_odapi_exports.py) with seeded synthetic weights.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ssd_mobilenet.errors import InputError

# name: (what it is, the folder under ../shared/zoo, the sample config it is built from or None).
MODELS = {
    "ssd": ("SSD MobileNet v1 COCO, the 2018_01_28 zoo release (300x300, 90 classes)",
            "ssd_mobilenet_v1_coco_2018_01_28", None),
    "fpn_640": ("SSD MobileNet v1 FPN (shared box predictor), the zoo's 640x640 COCO config", "sample_configs",
                "ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config"),
    "ppn_300": ("SSD MobileNet v1 PPN (shared box predictor), the zoo's 300x300 COCO config", "sample_configs",
                "ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync.config"),
}
DEFAULT = "ssd"
SEED = 0


def _inputs(name: str, shared: str) -> list:
    _, folder, config_name = MODELS[name]
    zoo = os.path.join(shared, "zoo", folder)
    if config_name is None:
        return [os.path.join(shared, "tools", "make_zoo_fixture.py"), os.path.join(zoo, "model.ckpt.meta")]
    return [os.path.join(zoo, config_name)]


def missing(name: str, shared: str) -> str | None:
    """The one line saying which file model `name` is made from is not in `shared`, or None."""
    for path in _inputs(name, shared):
        if not os.path.isfile(path):
            return f"{path}: not found (the {name} model is made from it)"
    return None


def make(name: str, shared: str, out: str, **replace) -> str:
    """Writes model `name` (a `MODELS` key) as a TF1 model directory at `out` and returns `out`.

    Args:
      shared: the ../shared folder (its `zoo/` and `tools/`).
      replace: SSDConfig fields that replace the config's (a builder model only; e.g. a smaller
        `depth_multiplier` and image size, as the tests build them).
    Raises:
      InputError: naming the file that is not there.
    """
    problem = missing(name, shared)
    if problem:
        raise InputError(problem)
    inputs = _inputs(name, shared)
    if MODELS[name][2] is None:
        if replace:
            raise ValueError(f"{name}: the published graph is built as it is (no fields replaced)")
        tool, meta = inputs
        subprocess.run([sys.executable, tool, os.path.dirname(meta), out], check=True, capture_output=True)
        return out
    from migrate.tf1 import builder
    from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
    config = read_pipeline_config(inputs[0])
    return builder.write_model_dir(config.replace(**replace) if replace else config, out, seed=SEED)
