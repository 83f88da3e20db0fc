"""Native TF2 Keras SSD MobileNet v1, numerically faithful to the TF1 Object Detection API graph.

Stages, each in its own module: `preprocessing`, `feature_extractors` (MobileNet v1 with the
SSD extra layers, FPN or PPN), `box_predictors` (convolutional or weight-shared),
`anchor_generators` (ssd or multiscale grid), `box_coder`, `postprocessing`; `model` holds the
Keras network and `detector` the `tf.function` inference wrapper; `load` (`loading`) runs a
converted directory's SavedModel (`saved_model_detector`) or builds the Keras model.
(`backbone`, `box_predictor` and `anchors` keep their old names for the same code.)
Boxes are [ymin, xmin, ymax, xmax], normalised to the image, everywhere.
"""

from ssd_mobilenet.config import ConfigError, SSDConfig

__version__ = "0.1.0"

__all__ = ["ConfigError", "SSDConfig", "SSDMobileNetV1", "count_parameters", "load", "Detector", "__version__"]


def __getattr__(name):
    # The model and the detector import TensorFlow: on first use, so that the package's light
    # modules (config, pipeline_text, atomic_write, label_map) load without it, as the command
    # line needs before it quiets TensorFlow's start-up lines.
    if name in ("SSDMobileNetV1", "count_parameters"):
        from ssd_mobilenet import model
        return getattr(model, name)
    if name == "load":
        # The default path runs the converted directory's SavedModel: no Keras model is built.
        from ssd_mobilenet import loading
        return loading.load
    if name == "Detector":
        from ssd_mobilenet import detector
        return detector.Detector
    raise AttributeError(name)
