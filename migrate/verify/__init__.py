"""`verify`'s room: a conversion against its TF1 graph, tensor by tensor, and the cost of both.

`verification` (the run, `verify(...) -> VerifyReport`, and its comparison of tensors and
detections; the rules are `migrate.tf1.parity`'s), `inputs` (paths, images, output checks),
`same_network` (the two models are one network: same input size, classes, depth and anchors, or
refused before anything runs), `sides` (the measurement factories), `measuring` (each side in a
fresh process), `report` (the `VerifyReport`, its table and PNGs) and `tflite_file` (a `.tflite`
or `.onnx` file as the TF2 side: what it is, how it runs and is judged).
"""
