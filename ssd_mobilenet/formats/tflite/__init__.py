"""The `.tflite` file: `file_format` (the contract between writer and readers: signature,
metadata, the NMS modes `NMS_MODES`), `writer` (`export_tflite`, `convert`), `integer` (a
quantization-aware model's integer network) and `runner` (`ModelFile(path).detect` on LiteRT,
`pip install 'ssd-mobilenet-migrate[litert]'`). `file_format` and `runner` load without
TensorFlow; the writers need it.
"""
