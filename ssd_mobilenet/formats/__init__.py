"""The converted model's deployable forms: one package per file format, each holding its writer
(the converted Keras model -> the file, with TensorFlow) and its runner (the file -> detections).

- `saved_model/`: `writer` (the fast / exact SavedModel, reduced precision, its metadata) and
  `runner` (`SavedModelDetector`: a converted directory's SavedModel behind `Detector`'s calls).
- `tflite/`: `file_format` (the `.tflite` contract: signature, metadata, NMS modes; reading it
  without TensorFlow), `writer` (per-class / custom-op NMS, uint8 / float32 input, int8),
  `integer` (a quantization-aware model's integer file), `runner` (`ModelFile(path).detect` on
  LiteRT, no TensorFlow).
- `onnx/`: `file_format` (the `.onnx` contract and its metadata, read without ONNX Runtime),
  `writer` (one static ONNX file: tf2onnx for the network), `postprocessing` (the TF1
  post-processing in `onnx.helper`: one NMS), `aware` (a quantization-aware model's QDQ file),
  `integer` (post-training QDQ int8), `runner` (`OnnxFile(path).detect` on ONNX Runtime, no
  TensorFlow).

Shared by the formats: `network` (what every file holds before its post-processing: the folded
network with constant weights, the any-size resize and scaling, calibration images),
`integer_weights` (a quantization-aware model's symmetric int8 kernels), and, without
TensorFlow, `images` (image files to TensorFlow's pixels), `preprocess` (a file's input types and
their tensor names, the graph's resize and scaling in numpy, and how a photo is fed to a file) and
`file_runner` (`FileRunner`, what both file runners share: the file's input, `feed`, `detect`).

The runners of `.tflite` and `.onnx` files, `file_runner`, their `file_format` modules, `images`
and `preprocess` never import TensorFlow (`tests/migrate/predict/test_predict_litert.py`, `tests/migrate/test_device_install.py`).
"""
