"""The second runtime: the project's `.tflite` files on LiteRT (`ai-edge-litert`), in a process
that never imports TensorFlow (`pip install 'ssd-mobilenet-migrate[litert]'`).

- `images`: image files to uint8 RGB, pixel for pixel TensorFlow's decoder.
- `preprocess`: the graph's resize and scaling in numpy, bit for bit, for fixed-size files.
- `file_format`: the file's contract (signature, metadata) and reading it.
- `model_file`: `ModelFile(path).detect(photo)`.

Nothing here imports TensorFlow; `tests/litert` checks that in a process where it cannot load.
"""
