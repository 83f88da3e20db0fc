// ONNX Runtime Web (its WebAssembly build, the page's runtime) on one .onnx file, in Node:
//   ORT_WEB=path/to/node_modules/onnxruntime-web node run_onnx_web.js model.onnx feeds.json
// feeds.json: a list of runs, each {input name: {"data": [...], "shape": [...]}} (float32);
// prints a list of their outputs, each {output name: {"data", "shape"}}, as JSON on stdout.
// Used by test_ties.py.
const fs = require('fs');
const ort = require(process.env.ORT_WEB);

(async () => {
  ort.env.wasm.numThreads = 1;
  const session = await ort.InferenceSession.create(fs.readFileSync(process.argv[2]));
  const results = [];
  for (const feeds of JSON.parse(fs.readFileSync(process.argv[3]))) {
    const inputs = {};
    for (const [name, v] of Object.entries(feeds)) inputs[name] = new ort.Tensor('float32', Float32Array.from(v.data), v.shape);
    const outputs = await session.run(inputs);
    const result = {};
    for (const [name, t] of Object.entries(outputs)) result[name] = {data: Array.from(t.data), shape: t.dims};
    results.push(result);
  }
  process.stdout.write(JSON.stringify(results));
})().catch((e) => { console.error(String(e)); process.exit(1); });
