"""`migrate export`'s room: a converted model directory -> a deployable file or folder.

- `pipeline`: the steps every format shares (the refusals, reading the converted model,
  calibration, the int8 drift against the float model, atomic writing) and `Format`, what a
  format says of itself;
- `tflite`: `--tflite OUT.tflite` (`TFLite`, `tflite.export`);
- `onnx`: `--onnx OUT.onnx` (`Onnx`, `onnx.export_onnx`);
- `web`: `--web DIR`, a static web page that runs the `.onnx` file in the browser (`Web`,
  `web.export_web`);
- `inputs`: what every format reads (the converted directory, calibration images); bad input is
  `ssd_mobilenet.errors.InputError`;
- `drift`: an int8 file's agreement with its float reference, and the notes the command prints.

A new format is a module with a `pipeline.Format` that says what differs (its options, its
conversion, its writer, the runner of its file for the drift) and its flag in
`migrate/commands/export.py`.
"""
