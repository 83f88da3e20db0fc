"""Deployable forms of the converted model: the SavedModel (`saved_model`) and the TFLite file
(`tflite`: `ssd_mobilenet.export.tflite.export_tflite(model, path, nms, input_type, ...)`).

`ssd_mobilenet.export.export_saved_model(model, path, variant, precision)` and the names
below are the public interface; each format's module says what its files hold.
"""

from ssd_mobilenet.export.saved_model import (EXACT, FAST, SIGNATURE_KEY, VARIANTS, DetectionModule, describe,
                                              export_saved_model, weights_as_constants)

__all__ = ["EXACT", "FAST", "SIGNATURE_KEY", "VARIANTS", "DetectionModule", "describe", "export_saved_model",
           "weights_as_constants"]
