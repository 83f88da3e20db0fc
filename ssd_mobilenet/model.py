"""`SSDMobileNetV1`: the Keras 3 network of the TF1 SSD MobileNet v1 graph."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from ssd_mobilenet import anchors as anchors_lib
from ssd_mobilenet import box_coder, postprocessing, preprocessing
from ssd_mobilenet.backbone import build_feature_extractor
from ssd_mobilenet.box_predictor import build_box_predictors
from ssd_mobilenet.config import SSDConfig


class SSDMobileNetV1(keras.Model):
    """SSD MobileNet v1 with layers named after the TF1 scopes.

    The network maps a preprocessed image to raw predictions; `detect` adds the stages
    around it (preprocessing, anchors, box decoding, post-processing).

    Args:
      config: an `SSDConfig`.
    Call:
      float32 [N, h, w, 3] preprocessed images (h, w: the config size, padded to
      `pad_to_multiple`) -> dict with
        `box_encodings` [N, A, 4] ([ty, tx, th, tw], TF1 node `concat`),
        `class_predictions_with_background` [N, A, num_class_slots] (logits, `concat_1`).
      A = 1917 for the zoo config at 300x300.
    Example:
      >>> model = SSDMobileNetV1(SSDConfig(num_classes=2))
      >>> out = model.detect(np.zeros([1, 480, 640, 3], np.uint8))
      >>> out["detection_boxes"].shape   # [1, 100, 4], [ymin, xmin, ymax, xmax]
    """

    def __init__(self, config: SSDConfig, **kwargs):
        if isinstance(config, dict):
            config = SSDConfig.from_dict(config)
        m = config.pad_to_multiple
        h = -(-config.image_height // m) * m
        w = -(-config.image_width // m) * m
        # === Layers and functional graph ===
        image = keras.Input((h, w, 3), dtype="float32", name="preprocessed_image")
        feature_maps, endpoints = build_feature_extractor(image, config)
        box_encodings, class_logits = build_box_predictors(feature_maps, config)
        super().__init__(inputs=image,
                         outputs={"box_encodings": box_encodings,
                                  "class_predictions_with_background": class_logits},
                         name=kwargs.pop("name", "ssd_mobilenet_v1"), **kwargs)
        # === Config and derived constants ===
        self.config = config
        self.feature_map_names = [t._keras_history.operation.name for t in feature_maps]
        self.feature_map_shapes = [(int(t.shape[1]), int(t.shape[2])) for t in feature_maps]
        self.anchors = anchors_lib.generate_anchors(config, self.feature_map_shapes)
        self._endpoint_names = list(endpoints)

    @property
    def endpoint_names(self) -> list:
        """Every feature extractor layer's scope in graph order (`Conv2d_0` ... extra layers)."""
        return list(self._endpoint_names)

    def endpoint_model(self, names=None) -> keras.Model:
        """A model returning the named layers' outputs (default: all feature extractor layers)
        plus `box_encodings` and `class_predictions_with_background`, for stage-by-stage checks."""
        names = self._endpoint_names if names is None else names
        outputs = {n: self.get_layer(n).output for n in names}
        outputs.update(self.outputs_dict())
        return keras.Model(self.inputs, outputs)

    def outputs_dict(self) -> dict:
        return {"box_encodings": self.get_layer("concat").output,
                "class_predictions_with_background": self.get_layer("concat_1").output}

    def preprocess(self, images):
        """uint8 [N, H, W, 3], any H, W -> float32 [N, h, w, 3] (see `preprocessing`)."""
        return preprocessing.preprocess(images, self.config)

    def decode(self, box_encodings):
        """[N, A, 4] codes -> [N, A, 4] boxes [ymin, xmin, ymax, xmax] (unclipped)."""
        return box_coder.decode(box_encodings, self.anchors, self.config.box_coder_scales)

    def predict_raw(self, images):
        """uint8 images -> (decoded boxes [N, A, 4], class logits [N, A, slots])."""
        out = self(self.preprocess(images), training=False)
        return self.decode(out["box_encodings"]), out["class_predictions_with_background"]

    def detect(self, images) -> dict:
        """uint8 [N, H, W, 3] images -> the output dict of `postprocessing.postprocess`."""
        boxes, logits = self.predict_raw(images)
        return postprocessing.postprocess(boxes, logits, self.config)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(SSDConfig.from_dict(config["config"]), name=config.get("name", "ssd_mobilenet_v1"))


def count_parameters(model: keras.Model) -> int:
    return int(sum(np.prod(v.shape) for v in model.weights))
