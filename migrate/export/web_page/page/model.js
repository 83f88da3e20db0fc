// The page's model: the `.tflite` file of `migrate export --web` on LiteRT.js (LiteRT with XNNPACK,
// WebAssembly). LiteRT.js takes inputs of the file's shape only, and the file's input is a photo of
// any size ([1, -1, -1, 3] uint8, resized inside the file as the TF1 graph does): the model is
// compiled for each photo size, with the size written into the file's input shape where
// model.json says it is (`input_shape_offsets`, found by the export), and kept until another
// size comes.

import * as litert from "./litert.js";

export class Model {
  // manifest: model.json; bytes: the file (Uint8Array, patched in place); threads: XNNPACK's.
  constructor(manifest, bytes, threads) {
    this.manifest = manifest;
    this.bytes = bytes;
    this.threads = threads;
    this.sized = null; // {height, width, compiled}
  }

  // Loads LiteRT.js's WebAssembly (from the page's folder: the threaded build when `threads` > 1,
  // which needs a cross-origin isolated page and relaxed SIMD) -> the Model of `bytes`, compiled
  // for the model's own size (a file LiteRT.js cannot read fails here, not at the first photo).
  static async load(manifest, bytes, threads) {
    // LiteRT's log (its INFO lines on stderr, which the WebAssembly module prints as console
    // errors) at the console's debug level: its failures reach the page as exceptions.
    self.Module = { print: (text) => console.debug(text), printErr: (text) => console.debug(text) };
    await litert.loadLiteRt(new URL("./", location.href).href, { threads: threads > 1 });
    const model = new Model(manifest, bytes, threads);
    const [height, width] = manifest.image_size;
    await model.compiled(height, width);
    return model;
  }

  // Whether LiteRT.js can use threads here: WebAssembly threads (a cross-origin isolated page)
  // and relaxed SIMD, which its threaded build needs.
  static async threadsSupported() {
    if (!self.crossOriginIsolated) return false;
    const [relaxed, threads] = await Promise.all([litert.supportsFeature("relaxedSimd"), litert.supportsFeature("threads")]);
    return Boolean(relaxed && threads);
  }

  // The model compiled for photos of height x width (the last size's, kept).
  async compiled(height, width) {
    if (this.sized && this.sized.height === height && this.sized.width === width) return this.sized.compiled;
    if (this.sized) this.sized.compiled.delete();
    this.sized = null;
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
    for (const offset of this.manifest.input_shape_offsets) {
      view.setInt32(offset, height, true);
      view.setInt32(offset + 4, width, true);
    }
    const compiled = await litert.loadAndCompile(this.bytes, {
      accelerator: "wasm", cpuOptions: { numThreads: this.threads },
    });
    this.sized = { height, width, compiled };
    return compiled;
  }

  // pixels {width, height, rgb: Uint8Array of height * width * 3} -> {num_detections,
  // detection_boxes ([ymin, xmin, ymax, xmax] per row, normalized), detection_classes,
  // detection_scores}, each a Float32Array.
  async run(pixels) {
    const compiled = await this.compiled(pixels.height, pixels.width);
    const input = new litert.Tensor(pixels.rgb, [1, pixels.height, pixels.width, 3]);
    let outputs;
    try {
      outputs = await compiled.run({ [this.manifest.input]: input });
    } finally {
      input.delete();
    }
    const arrays = {};
    for (const [name, tensor] of Object.entries(outputs)) {
      arrays[name] = Float32Array.from(tensor.toTypedArray());
      tensor.delete();
    }
    return arrays;
  }
}
