"""Native TF2 Keras SSD MobileNet v1, numerically faithful to the TF1 Object Detection API graph.

Stages, each in its own module: `preprocessing`, `feature_extractors` (MobileNet v1 with the
SSD extra layers, FPN or PPN), `box_predictors` (convolutional or weight-shared),
`anchor_generators` (ssd or multiscale grid), `box_coder`, `postprocessing`; `model` holds the
Keras network and `detector` the `tf.function` inference wrapper; `load` (`loading`) runs a
converted directory's SavedModel (`formats.saved_model.runner`) or builds the Keras model.
`formats` holds each file format's writer and runner (SavedModel, `.tflite`, `.onnx`); `memory`
the memory and profiling levers.
Boxes are [ymin, xmin, ymax, xmax], normalised to the image, everywhere.

`import ssd_mobilenet` loads no TensorFlow. The first name taken from the package that needs it
(`ssd_mobilenet.load`, `from ssd_mobilenet import image_io`) imports TensorFlow without the
lines its libraries print while they load (`tensorflow_start`); what TensorFlow logs afterwards
is left as it is. The modules in `WITHOUT_TENSORFLOW` load without it.
"""

import importlib.util

from ssd_mobilenet.config.ssd_config import SSDConfig
from ssd_mobilenet.errors import ConfigError

__version__ = "0.1.0"

__all__ = ["ConfigError", "SSDConfig", "SSDMobileNetV1", "count_parameters", "load", "Detector", "__version__"]

# The modules that load without TensorFlow (the command line reads them before it loads
# TensorFlow, or instead of it: a `.tflite` or `.onnx` file on a device).
# `formats` is only its docstring; of its modules, the file runners (and file_runner, their base),
# their file_format modules, images and preprocess load without TensorFlow too.
WITHOUT_TENSORFLOW = ("anchor_generators", "atomic_write", "config", "converted_dir", "detections", "formats",
                      "hardware", "label_map", "label_maps", "tensorflow_start")
# The names loaded on first use: {name: module that defines it}.
_ON_FIRST_USE = {"SSDMobileNetV1": "model", "count_parameters": "model", "load": "loading", "Detector": "detector"}


def __getattr__(name):
    # Also asked by `from ssd_mobilenet import MODULE` before a module not yet imported is: the
    # modules that need TensorFlow load it without its start-up lines first.
    if name in _ON_FIRST_USE or (name not in WITHOUT_TENSORFLOW and importlib.util.find_spec(f"{__name__}.{name}")):
        from ssd_mobilenet import tensorflow_start
        tensorflow_start.import_quietly()
        module = importlib.import_module(f"{__name__}.{_ON_FIRST_USE.get(name, name)}")
        return getattr(module, name) if name in _ON_FIRST_USE else module
    raise AttributeError(name)
