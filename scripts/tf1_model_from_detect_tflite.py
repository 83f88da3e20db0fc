"""A TF1 model directory with trained weights, from a quantized `detect.tflite` of the TF1 OD API.

    .venv/bin/python scripts/tf1_model_from_detect_tflite.py DETECT.tflite OUT_DIR \
        [--score-threshold S] [--max-detections N]

The zoo's quantization-aware SSD MobileNet v1 files (`export_tflite_ssd_graph.py` + TOCO, uint8,
`TFLite_Detection_PostProcess`, e.g. the `coco_ssd_mobilenet_v1_*_quant` starter model) are small
enough to be everywhere, unlike the float checkpoints. Their weights are trained: what a
benchmark needs to see a trained model's scores (a handful of detections per photo, where the
project's seeded synthetic weights score ~100), which changes how much work NMS does.

Every convolution's uint8 kernel and int32 bias are dequantized (`(q - zero_point) * scale`);
batch norm was folded into them by TOCO, so it is written as the identity (gamma sqrt(1 + eps),
beta the folded bias, mean 0, variance 1). The config comes from the file: input size, depth
multiplier (Conv2d_0's filters over 32), classes, thresholds, detection counts and box coder
scales from the custom op's options (the threshold and count can be set instead: the starter
model's file says 1e-8 and 10, the built-in default model 0.3 and 100); the rest is the zoo's
(`SSDConfig` defaults). The directory
is written by the project's TF1 builder (`migrate.tf1.builder.write_model_dir`): checkpoint,
frozen graph, SavedModel, pipeline.config, as a TF1 exporter writes them; the weights are
float32 versions of 8-bit ones, so detections differ from the uint8 file's by its rounding.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from migrate.tf1 import builder  # noqa: E402
from ssd_mobilenet.config.ssd_config import NMS_CLIP_AFTER, SSDConfig  # noqa: E402
from ssd_mobilenet.litert import file_format  # noqa: E402
from ssd_mobilenet.litert.model_file import litert_interpreter  # noqa: E402

KERNEL = "/weights_quant/FakeQuantWithMinMaxVars"


def read_tensors(path: str) -> dict:
    """{tensor name: float64 array} of the file's constant uint8/int32 tensors, dequantized."""
    interpreter = litert_interpreter()(model_path=path, experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    tensors = {}
    for d in interpreter.get_tensor_details():
        scale, zero_point = d["quantization"]
        if scale and (d["name"].endswith(KERNEL) or d["name"].endswith("_bias")):
            tensors[d["name"]] = (interpreter.get_tensor(d["index"]).astype(np.float64) - zero_point) * scale
        elif d["name"] == "normalized_input_image_tensor":
            tensors[d["name"]] = np.asarray(d["shape"])
    return tensors


def config_of(tensors: dict, options: dict) -> SSDConfig:
    first = next(v for k, v in tensors.items() if k.endswith("Conv2d_0" + KERNEL))
    _, h, w, _ = tensors["normalized_input_image_tensor"]
    return SSDConfig(num_classes=int(options["num_classes"]), depth_multiplier=first.shape[0] / 32.0,
                     image_height=int(h), image_width=int(w),
                     score_threshold=float(np.float32(options["nms_score_threshold"])),
                     iou_threshold=float(np.float32(options["nms_iou_threshold"])),
                     max_detections_per_class=int(options.get("detections_per_class", 100)),
                     max_total_detections=int(options["max_detections"]),
                     box_coder_scales=tuple(float(options[k]) for k in ("y_scale", "x_scale", "h_scale", "w_scale")),
                     fused_batch_norm=True, nms_variant=NMS_CLIP_AFTER)


def weights_of(tensors: dict, config: SSDConfig) -> dict:
    """The TF1 checkpoint's variables ({name: float32 array}) from the file's tensors."""
    def one(suffixes):
        found = [k for k in tensors if any(k.endswith(s) for s in suffixes)]
        if len(found) != 1:
            raise SystemExit(f"expected one tensor ending in {suffixes}, found {found}")
        return tensors[found[0]]

    eps = config.batch_norm_epsilon
    weights = {}
    for name, shape in ((k, v.shape) for k, v in builder.synthetic_weights(config).items()):
        scope, leaf = name.rsplit("/", 1)
        if scope.endswith("/BatchNorm"):
            layer = scope[:-len("/BatchNorm")].split("/")[-1]
            value = {"beta": lambda: one([f"/{layer}/Conv2D_Fold_bias", f"/{layer}/depthwise_Fold_bias"]),
                     "gamma": lambda: np.full(shape, np.sqrt(1.0 + eps)),  # scale 1 after (var + eps) ** -0.5
                     "moving_mean": lambda: np.zeros(shape), "moving_variance": lambda: np.ones(shape)}[leaf]()
        elif scope.startswith("BoxPredictor"):
            value = tensors[scope + "/Conv2D_bias"] if leaf == "biases" else \
                tensors[scope + KERNEL].transpose(1, 2, 3, 0)  # TFLite's [out, h, w, in] -> TF's [h, w, in, out]
        else:
            value = one([f"/{scope.split('/')[-1]}{KERNEL}"]).transpose(1, 2, 3, 0)
        if value.shape != tuple(shape):
            raise SystemExit(f"{name}: {value.shape} in the file, the model needs {tuple(shape)}")
        weights[name] = value.astype(np.float32)
    return weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("detect_tflite")
    p.add_argument("out")
    p.add_argument("--score-threshold", type=float, help="instead of the op's nms_score_threshold")
    p.add_argument("--max-detections", type=int, help="instead of the op's max_detections")
    args = p.parse_args()
    with open(args.detect_tflite, "rb") as f:
        options = file_format.custom_op_options(f.read())
    if len(options) != 1:
        raise SystemExit(f"{args.detect_tflite}: expected one TFLite_Detection_PostProcess op, found {len(options)}")
    tensors = read_tensors(args.detect_tflite)
    overrides = {"nms_score_threshold": args.score_threshold, "max_detections": args.max_detections}
    config = config_of(tensors, {**options[0][0], **{k: v for k, v in overrides.items() if v is not None}})
    weights = weights_of(tensors, config)
    builder.write_model_dir(config, args.out, weights=weights)
    print(f"{len(weights)} variables, depth {config.depth_multiplier:g}, {config.num_classes} classes, "
          f"{config.image_height}x{config.image_width} -> {args.out}")


if __name__ == "__main__":
    main()
