"""The `.onnx` file: `file_format` (the contract between writer and readers: inputs, outputs,
metadata), `writer` (`export_onnx`; the `onnx-export` extra), `postprocessing` (the TF1
post-processing in `onnx.helper`), `aware` (a quantization-aware model's QDQ network), `integer`
(post-training QDQ int8) and `runner` (`OnnxFile(path).detect` on ONNX Runtime,
`pip install 'ssd-mobilenet-migrate[onnx]'`). `file_format` and `runner` load without TensorFlow;
the writers need it.
"""
