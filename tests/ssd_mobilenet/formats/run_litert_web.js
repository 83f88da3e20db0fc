// LiteRT.js (the web page's runtime: `export --web`'s copy of its module and WebAssembly) on one
// .tflite file of fixed shapes, in the browser: served beside litert.js, the file (model.tflite)
// and feeds.json, a list of runs, each {input name: {"data": [...], "shape": [...]}} (float32).
// `window.results` settles as the list of their outputs, each {output name: {"data", "shape"}}.
// Used by test_ties.py.
import * as litert from "./litert.js";

async function main() {
  self.Module = { print: (text) => console.debug(text), printErr: (text) => console.debug(text) };
  await litert.loadLiteRt(new URL("./", location.href).href, { threads: false });
  const model = await litert.loadAndCompile("model.tflite", { accelerator: "wasm", cpuOptions: { numThreads: 1 } });
  const results = [];
  for (const feeds of await (await fetch("feeds.json")).json()) {
    const inputs = {};
    for (const [name, v] of Object.entries(feeds)) inputs[name] = new litert.Tensor(Float32Array.from(v.data), v.shape);
    const outputs = await model.run(inputs);
    const result = {};
    const details = Object.fromEntries(model.getOutputDetails().map((d) => [d.name, d.shape]));
    for (const [name, tensor] of Object.entries(outputs)) {
      result[name] = { data: Array.from(tensor.toTypedArray()), shape: Array.from(details[name]) };
      tensor.delete();
    }
    Object.values(inputs).forEach((tensor) => tensor.delete());
    results.push(result);
  }
  return results;
}

window.results = main();
