"""What `bench` accepts: size and batch lists, and a TF1 side whose frozen graph a session can run."""

from __future__ import annotations

import os

from ssd_mobilenet.errors import InputError


def parse_sizes(text: str) -> list:
    """"300x300,480x640" -> [(300, 300), (480, 640)] (H x W)."""
    sizes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise InputError(f"--size {text!r}: expected HxW[,HxW...] with positive integers")
        sizes.append((int(parts[0]), int(parts[1])))
    return sizes


def parse_batches(text: str) -> list:
    """"1,8,32" -> [1, 8, 32]."""
    try:
        batches = [int(b) for b in text.split(",")]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise InputError(f"--batch {text!r}: expected positive integers separated by commas")
    return batches


def _frozen_graph(src: str) -> str:
    path = src if os.path.isfile(src) else os.path.join(src, "frozen_inference_graph.pb")
    if not os.path.isfile(path):
        raise InputError(f"{src}: no frozen_inference_graph.pb (bench's TF1 side runs it)")
    return path


def _check_frozen_graph(src: str) -> None:
    """Before any worker starts: the TF1 side's graph exists and is one a session can run."""
    from migrate.tf1 import graph_traits
    from migrate.tf1.sources import read_graph_def
    path = _frozen_graph(src)
    if graph_traits.is_tflite_export(read_graph_def(path)):
        raise InputError(f"{path}: {graph_traits.TFLITE_REFUSAL}")


def check_tflite(converted: str, sides, sizes, batches) -> tuple:
    """(the model's input size (H, W), whether the files bench exports take photos of any size,
    whether the model is quantization-aware: its `tflite` file is then the integer one),
    after checking that the run measures the TFLite sides among `sides` somewhere: a file takes
    one uint8 image per call, so the run needs batch 1 among `batches`; the default export
    resizes photos of any size itself (`ssd_mobilenet.formats.network.any_size`), so any size will
    do, while a file of one size would need the model's size among `sizes` (bench does not resize
    for it). Raises InputError naming what to add otherwise, or for `tflite_int8` on a
    quantization-aware model (whose `tflite` file is already int8, on the checkpoint's ranges), or
    `onnx_int8`, `openvino`, `openvino_int8` and `opencv` on one (its `onnx` file is the int8 QDQ one)."""
    import json

    from ssd_mobilenet.config.ssd_config import SSDConfig
    from ssd_mobilenet.detector import CONFIG_FILE
    from ssd_mobilenet.formats import network
    from ssd_mobilenet.formats.preprocess import UINT8
    with open(os.path.join(converted, CONFIG_FILE), encoding="utf-8") as f:
        config = SSDConfig.from_dict(json.load(f))
    model_size = (config.image_height, config.image_width)
    text = f"{model_size[0]}x{model_size[1]}"
    if config.weight_bits and "tflite_int8" in sides:
        # Its `tflite` side is already the integer file (int8 on the checkpoint's ranges).
        raise InputError("--sides tflite_int8: none of a quantization-aware model (its tflite side is int8)")
    onnx_sides = [s for s in sides if s in ("onnx_int8", "openvino", "openvino_int8", "opencv")]
    if config.weight_bits and onnx_sides:
        # Its `onnx` file is already int8 QDQ on the checkpoint's ranges; OpenVINO's and OpenCV's
        # sides run a float32 file, which such a model has none of.
        raise InputError(f"--sides {','.join(onnx_sides)}: none of a quantization-aware model (its onnx side "
                         "is int8)")
    any_size = network.any_size(config, UINT8)
    if 1 not in batches:
        raise InputError("--batch: the .tflite and .onnx sides run at batch 1 (one image per call); add 1")
    if not any_size and model_size not in [tuple(s) for s in sizes]:
        asked = ",".join(f"{h}x{w}" for h, w in sizes)
        raise InputError(f"--size: the .tflite and .onnx sides take {text} only: --size {asked},{text}")
    return model_size, any_size, bool(config.weight_bits)
