"""`predict`'s room: a model over image files and folders -> JSON lines (and pictures).

`prediction` (the run in this process: the images read, the runtime called, the lines and
pictures written), `runtimes/` (what runs the model, behind one interface: `open_runtime`,
`KINDS`; TensorFlow for a converted directory, LiteRT for a `.tflite` file, ONNX Runtime for an
`.onnx` file) and `beam` (the engine).

A runtime runs a model on images; an engine decides where and how many run at once. Without
`--engine`, `predict` reads the images and calls its runtime in this process. `beam`: an Apache
Beam pipeline (`migrate.predict.beam`), on Beam's local runner with worker processes or on any
runner Beam's pipeline options name (Flink, Spark, Dataflow); each worker opens the same runtime
through `migrate.predict.runtimes.open_runtime` and feeds it the bytes the engine's file systems
read (`runtime.results_of_encoded`). Engines are extras (`pip install
'ssd-mobilenet-migrate[beam]'`): `beam` is imported only when `--engine` names it.
"""
