"""What every exported file holds before its own post-processing: the folded inference network
with constant weights, the photo's resize and scaling, and the images int8 calibrates on.

The file formats (`tflite`, `onnx` and its quantized `aware` / `integer` variants, and the web
page that runs the `.onnx` file) differ in how they express the post-processing; the network in
front of it is this module's, so that each format takes it from here and none from another
(`input_type`: `preprocess.UINT8` or `FLOAT32`, the file's input):

- `any_size(config, input_type)`: whether a file takes photos of any size and resizes them itself;
- `prepare(images, config, input_type)`: the file's own resize and scaling of its input;
- `network(model, input_type)`: the folded copy and its traced function, input -> heads;
- `generated_images(config)`: calibration images when the user gives none;
- `file_input(image, config, input_type)`: what a file takes for a photo, in numpy.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ssd_mobilenet import preprocessing
from ssd_mobilenet.formats import preprocess
from ssd_mobilenet.formats.preprocess import FLOAT32, RESIZE_METHODS, UINT8
from ssd_mobilenet.model import fold_batch_norm, with_weights_as_constants


def any_size(config, input_type: str) -> bool:
    """Whether a file takes photos of any size and resizes them itself: uint8 input, and a resize
    kernel the formats express with the TF1 kernel's flags (`RESIZE_METHODS`: BILINEAR and
    NEAREST_NEIGHBOR, TFLite's RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR builtins and ONNX's
    asymmetric `Resize`; the graph's BICUBIC and AREA have neither, so such a file takes the
    model's size). The float32 input is the scaled image `export_tflite_ssd_graph.py` graphs
    took, at the model's size."""
    return input_type == UINT8 and config.resize_method in RESIZE_METHODS


def prepare(images, config, input_type: str):
    """The file's input [1, ...] -> the network's float32 [1, h, w, 3] in [-1, 1].

    A file of `any_size` holds the graph's `Preprocessor` (`preprocessing.preprocess`: the legacy
    resize to the model's size and the scaling, in the graph's order) on the image cast to
    float32: TFLite's uint8 RESIZE_BILINEAR would round its output to uint8, where TF's returns
    float32. A fixed-size uint8 file (BICUBIC or AREA graphs) is only cast and scaled: at the
    model's own size the legacy resize is the identity (scale 1, every interpolation weight 0,
    for all four kernels). A float32 input is already scaled.
    """
    if any_size(config, input_type):
        return preprocessing.preprocess(tf.cast(images, tf.float32), config)
    if input_type == UINT8:
        return preprocessing.normalize(tf.cast(images, tf.float32))
    return images


def network(model, input_type: str):
    """(folded, fn): the inference copy of `model` (`model.fold_batch_norm`: batch norm folded,
    each feature map's box and class heads one convolution) and its function of a file's input
    [1, ...] (`prepare`) -> (box codes [1, A, 4], logits [1, A, slots]), anchors in the model's
    order.

    The weights are traced in as constants: the TFLite converter freezes a function's captured
    variables, but Keras 3 variables read through their resource handles came out as NaN in the
    converted file (TF 2.21), tf2onnx would make each a graph input, and constants are what a
    deployable file holds anyway. On real photos LiteRT's and ONNX Runtime's resize give
    TensorFlow's values bit for bit (tests/ssd_mobilenet/formats/tflite/test_tflite_writer.py, tests/ssd_mobilenet/formats/onnx/).
    """
    folded = fold_batch_norm(model)

    def run(images):
        out = folded(prepare(images, folded.config, input_type), training=False)
        return out["box_encodings"], out["class_predictions_with_background"]

    return folded, with_weights_as_constants(run, folded.weights)


# Generated calibration images when the user gives none: the shapes set's (gradient backgrounds,
# noise, solid shapes), enough to see every layer's activation range.
GENERATED_CALIBRATION_IMAGES = 16


def generated_images(config, count: int = GENERATED_CALIBRATION_IMAGES, seed: int = 0) -> np.ndarray:
    """uint8 [count, h, w, 3] shapes-set images at the model's size (`shape_images.make_image`)."""
    from ssd_mobilenet import shape_images
    rng = np.random.default_rng(seed)
    return np.stack([shape_images.make_image(rng, config.image_height, config.image_width)[0]
                     for _ in range(count)])


def file_input(image, config, input_type: str = UINT8) -> np.ndarray:
    """One uint8 [H, W, 3] image (any size) -> what a file of `config` and `input_type` takes for
    it ([1, ...]; `preprocess.feed`, as LiteRT's `ModelFile.detect` and `OnnxFile.detect` feed it):
    the photo itself for a file of `any_size`, else resized and, for float32, scaled in numpy."""
    mode = preprocess.input_mode(any_size(config, input_type), input_type == FLOAT32)
    return preprocess.feed(image, mode, (config.image_height, config.image_width), config.resize_method,
                           config.normalize_before_resize)
