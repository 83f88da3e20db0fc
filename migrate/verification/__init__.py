"""The parts of `migrate.verify` beyond its comparison rules (`migrate.tf1.parity`): `inputs`
(paths, images, output checks), `same_network` (the two models are one network: same input
size, classes, depth and anchors, or refused before anything runs), `sides` (the measurement
factories), `measuring` (each side in a fresh process), `report` (the `VerifyReport`, its table
and PNGs) and `tflite_file` (a `.tflite` file as the TF2 side: what it is, how it runs and is
judged)."""
