"""`migrate export`'s room: a converted model directory -> a deployable file or folder.

- `tflite`: `--tflite OUT.tflite` (`tflite.export`);
- `onnx`: `--onnx OUT.onnx` (`onnx.export_onnx`);
- `web`: `--web DIR`, a static web page that runs the `.onnx` file in the browser (`web.export_web`);
- `inputs`: what every format reads (the converted directory, calibration images) and
  `ExportInputError`, the one error of bad input;
- `drift`: an int8 file's agreement with its float reference, and the notes the command prints.
"""
