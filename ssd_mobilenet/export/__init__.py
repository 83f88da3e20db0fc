"""Deployable forms of the converted model: the SavedModel (`saved_model`), the TFLite file
(`tflite`: `ssd_mobilenet.export.tflite.export_tflite(model, path, nms, input_type, ...)`) and the
ONNX file (`onnx`: `ssd_mobilenet.export.onnx.export_onnx(model, path, input_type, ...)`, with
`onnx_postprocessing` and, for int8, `onnx_integer`; they need the `onnx-export` extra).

`ssd_mobilenet.export.export_saved_model(model, path, variant, precision)` and the names
below are the public interface; each format's module says what its files hold.
"""

from ssd_mobilenet.export.saved_model import (EXACT, FAST, SIGNATURE_KEY, VARIANTS, DetectionModule, describe,
                                              export_saved_model, weights_as_constants, weights_kind)

__all__ = ["EXACT", "FAST", "SIGNATURE_KEY", "VARIANTS", "DetectionModule", "describe", "export_saved_model",
           "weights_as_constants", "weights_kind"]
