// The page of `migrate export --web`: the converted model's `.tflite` file on LiteRT.js (model.js:
// XNNPACK on WebAssembly; threads where the page is cross-origin isolated), photos decoded as
// TensorFlow decodes them (jpeg.js), detections drawn as `predict --png` draws them (draw.js).
//
// For automation: `window.detect(url)` -> Promise of that photo's record in `predict`'s JSON lines
// format; `window.modelReady` settles once the model is loaded (rejecting with the page's
// message when it cannot be); `window.exampleShown` settles once the example photo that
// `export --web --example` wrote into the page has been detected here (its record, or null without
// one); `window.pageInfo` says what runs; `window.lastTiming` holds the last photo's times in
// milliseconds. Query parameters: `threads=N` (LiteRT.js's threads), `min_score=S` (the
// score from which boxes are drawn, as `predict --png-min-score`; default 0.5).
//
// Every failure ends as one message on the page (#message), written for the page's visitor: a
// photo that is not there or not an image, a file missing from the page's folder, a browser
// without WebAssembly. What the page's developer can do about it goes to the browser's console.

const MANIFEST = "model.json";
// Files the page needs besides those model.json names (the folder `export --web` writes).
const PAGE_FILES = ["app.js", "model.js", "jpeg.js", "draw.js", "style.css"];
// XNNPACK's threads past a few gain little on one photo (each convolution is split between them)
// and take cores from the rest of the browser.
const MAX_THREADS = 4;

class PageError extends Error {}

const $ = (id) => document.getElementById(id);
// `turn`: the photo being detected; the next one waits for it (one model, one photo at a time).
const state = { labels: {}, model: null, decoder: null, draw: null, manifest: null, turn: Promise.resolve() };

// For the page's developer, not its visitor: the console of the browser's developer tools.
function hint(text) {
  console.info(`[migrate export --web] ${text}`);
}

function showMessage(text) {
  const box = $("message");
  box.textContent = text;
  box.hidden = false;
}

function clearMessage() {
  $("message").hidden = true;
  $("message").textContent = "";
}

function describe(error) {
  if (error instanceof PageError) return error.message;
  return `unexpected error: ${error && error.message ? error.message : error}`;
}

// ---- the model folder ----------------------------------------------------------------------

const EXPORT_AGAIN = "not a complete `migrate export --web` folder: export it again " +
  "(python -m migrate export CONVERTED --web DIR)";

function gone(response) {
  return response.status === 404 || response.status === 410;
}

// One of the page's own files (model.json names them): its absence is an incomplete folder.
async function fetchPageFile(name, as) {
  let response;
  try {
    response = await fetch(name, { cache: "no-cache" });
  } catch (error) {
    throw new PageError(`${name} could not be downloaded (${error.message}): check the connection and reload.`);
  }
  if (gone(response)) {
    hint(`${name}: HTTP ${response.status}: ${EXPORT_AGAIN}`);
    throw new PageError(`${name} is missing from this page's folder (HTTP ${response.status}): ` +
      "the page is incomplete and cannot run.");
  }
  if (!response.ok) {
    throw new PageError(`${name} could not be downloaded (HTTP ${response.status}): reload the page later.`);
  }
  return as === "json" ? response.json() : new Uint8Array(await response.arrayBuffer());
}

// A photo of `window.detect(url)`: its absence is the photo's problem, not the page's.
async function fetchPhoto(url) {
  let response;
  try {
    response = await fetch(url, { cache: "no-cache" });
  } catch (error) {
    throw new PageError(`${url}: could not be fetched (${error.message})`);
  }
  if (gone(response)) throw new PageError(`${url}: not found (HTTP ${response.status})`);
  if (!response.ok) throw new PageError(`${url}: could not be fetched (HTTP ${response.status})`);
  return new Uint8Array(await response.arrayBuffer());
}

async function checkPresent(names) {
  // HEAD requests: a missing file is named before megabytes of others are downloaded.
  const missing = [];
  await Promise.all(names.map(async (name) => {
    try {
      const response = await fetch(name, { method: "HEAD", cache: "no-cache" });
      // Its (empty) body read to the end: a response left unread is cancelled, a failed request
      // in the browser's network log.
      await response.arrayBuffer();
      if (gone(response)) missing.push(name);
    } catch (error) {
      // A server that refuses HEAD is read with GET later, with the same message.
    }
  }));
  if (missing.length) {
    missing.sort();
    hint(`${missing.join(", ")}: not found: ${EXPORT_AGAIN}`);
    throw new PageError(`${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} missing from this page's ` +
      "folder: the page is incomplete and cannot run.");
  }
}

// The score from which detections are drawn (`predict --png-min-score`; the record holds them all).
function drawMinScore() {
  const asked = Number(new URLSearchParams(location.search).get("min_score"));
  return asked > 0 && asked <= 1 ? asked : state.draw.MIN_SCORE;
}

// WebAssembly threads need SharedArrayBuffer, which browsers give only to a cross-origin isolated
// page: served with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy:
// require-corp. A page cannot set these itself. LiteRT.js's threaded build also needs relaxed SIMD.
function threadCount(threadsSupported) {
  if (!threadsSupported) return 1;
  const asked = Number(new URLSearchParams(location.search).get("threads"));
  if (Number.isInteger(asked) && asked > 0) return asked;
  return Math.min(navigator.hardwareConcurrency || 1, MAX_THREADS);
}

async function loadModel() {
  if (typeof WebAssembly !== "object") throw new PageError("this browser has no WebAssembly: the model cannot run");
  let manifest;
  try {
    manifest = await fetchPageFile(MANIFEST, "json");
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    hint(`${MANIFEST}: ${error.message}: ${EXPORT_AGAIN}`);
    throw new PageError(`${MANIFEST} is damaged (not valid JSON): the page cannot run.`);
  }
  state.manifest = manifest;
  await checkPresent([...PAGE_FILES, ...Object.keys(manifest.files)]);
  const [jpeg, draw, { Model }] = await Promise.all([
    import("./jpeg.js"), import("./draw.js"), import("./model.js"),
  ]).catch((error) => {
    hint(`${error.message}: ${EXPORT_AGAIN}`);
    throw new PageError(`the page's scripts could not be loaded (${error.message}): the page cannot run.`);
  });
  state.draw = draw;
  state.jpeg = jpeg;
  state.labels = await fetchPageFile(manifest.labels, "json");
  state.decoder = await jpeg.JpegDecoder.load(manifest.decoder.wasm);

  const threadsSupported = await Model.threadsSupported();
  const threads = threadCount(threadsSupported);
  const modelBytes = await fetchPageFile(manifest.model);
  try {
    state.model = await Model.load(manifest, modelBytes, threads);
  } catch (error) {
    throw new PageError(`${manifest.model}: LiteRT.js cannot load it (${error.message || error}).`);
  }
  const [h, w] = manifest.image_size;
  const isolated = self.crossOriginIsolated;
  window.pageInfo = {
    runtime: `LiteRT.js ${manifest.runtime.version}`, backend: "wasm", threads, precision: manifest.precision,
    cross_origin_isolated: isolated, model: manifest.model, image_size: manifest.image_size,
  };
  $("model-name").textContent = `(${manifest.name})`;
  $("status").textContent = `Ready: choose photos of any size. The model (${h}x${w}, ${manifest.num_classes} ` +
    `classes) runs in this browser (LiteRT.js ${manifest.runtime.version}, ${threads} ` +
    `thread${threads > 1 ? "s" : ""}).`;
  if (!isolated && threads === 1) {
    hint("one thread: the page is not cross-origin isolated. Served with the headers Cross-Origin-Opener-Policy: " +
      "same-origin and Cross-Origin-Embedder-Policy: require-corp, it runs on min(cores, 4) threads " +
      "(ssd-mobilenet-migrate, docs/guides/deploy.md).");
  }
}

// ---- one photo -----------------------------------------------------------------------------

// A photo's bytes -> {width, height, rgb}: JPEG through libjpeg-turbo as TensorFlow decodes it,
// other formats through the browser's decoder without colour management (the file's values, as
// TensorFlow's PNG, GIF and BMP decoders give them for 8-bit opaque images).
async function decodePhoto(bytes, name) {
  if (state.jpeg.isJpeg(bytes)) {
    try {
      return state.decoder.decode(bytes);
    } catch (error) {
      throw new PageError(`${name}: cannot read image: ${error.message}`);
    }
  }
  let bitmap;
  try {
    bitmap = await createImageBitmap(new Blob([bytes]), { colorSpaceConversion: "none", premultiplyAlpha: "none" });
  } catch (error) {
    throw new PageError(`${name}: not an image this page reads (JPEG, PNG, GIF, BMP or WebP)`);
  }
  return pixelsOf(bitmap, bitmap.width, bitmap.height);
}

// Anything drawable (an ImageBitmap, a video frame) -> {width, height, rgb}.
function pixelsOf(source, width, height) {
  const canvas = new OffscreenCanvas(width, height);
  const context = canvas.getContext("2d", { willReadFrequently: true });
  context.drawImage(source, 0, 0);
  const rgba = context.getImageData(0, 0, width, height).data;
  const rgb = new Uint8Array(width * height * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
    rgb[j] = rgba[i]; rgb[j + 1] = rgba[i + 1]; rgb[j + 2] = rgba[i + 2];
  }
  return { width, height, rgb };
}

// The shortest decimal that reads back as the same float32 (predict's `_short`).
function short(value) {
  for (let digits = 1; digits < 10; digits++) {
    const text = Number(value.toPrecision(digits));
    if (Math.fround(text) === value) return text;
  }
  return value;
}

async function run(pixels) {
  const { model, manifest } = state;
  const out = await model.run(pixels);
  const count = Math.round(out.num_detections[0]);
  const boxes = out.detection_boxes, scores = out.detection_scores, classes = out.detection_classes;
  const { height, width } = pixels;
  const detections = [];
  for (let k = 0; k < count; k++) {
    const classId = Math.round(classes[k]);
    const box = Array.from(boxes.subarray(4 * k, 4 * k + 4), short);
    const detection = { class_id: classId };
    if (manifest.has_labels) detection.label = state.labels[classId] ?? null;
    Object.assign(detection, {
      score: short(scores[k]), box,
      box_pixels: box.map((v, i) => Math.round(Math.fround(v) * (i % 2 ? width : height) * 1000) / 1000),
    });
    detections.push(detection);
  }
  return { height, width, num_detections: count, detections };
}

// bytes (or decoded pixels) -> {record, pixels, timing}, the times in milliseconds, once the
// photos asked for before it are done.
function detectPhoto(name, bytes, pixels) {
  const done = state.turn.then(() => detectNow(name, bytes, pixels));
  state.turn = done.catch(() => {});
  return done;
}

async function detectNow(name, bytes, pixels) {
  const start = performance.now();
  pixels = pixels || await decodePhoto(bytes, name);
  const decoded = performance.now();
  const record = { image: name, ...(await run(pixels)) };
  const end = performance.now();
  const timing = { decode_ms: decoded - start, model_ms: end - decoded, total_ms: end - start };
  window.lastTiming = timing;
  return { record, pixels, timing };
}

// ---- what the page shows -------------------------------------------------------------------

// The caption under a photo (migrate.export.web._caption says the same of the example until it runs here).
function caption(record, minScore, timing) {
  const drawn = record.detections.filter((d) => d.score >= minScore).length;
  return `${record.image}: ${record.width}x${record.height}, ${drawn} of ${record.num_detections} detections ` +
    `drawn (score ${minScore} or more); ${Math.round(timing.total_ms)} ms (decoding ` +
    `${Math.round(timing.decode_ms)} ms, model ${Math.round(timing.model_ms)} ms)`;
}

// A detected photo as a <figure>: the photo, its detections drawn, the caption.
function figureOf({ record, pixels, timing }) {
  const card = document.createElement("figure");
  const canvas = document.createElement("canvas");
  canvas.width = pixels.width;
  canvas.height = pixels.height;
  const context = canvas.getContext("2d");
  const rgba = new ImageData(pixels.width, pixels.height);
  for (let i = 0, j = 0; j < pixels.rgb.length; i += 4, j += 3) {
    rgba.data[i] = pixels.rgb[j]; rgba.data[i + 1] = pixels.rgb[j + 1]; rgba.data[i + 2] = pixels.rgb[j + 2];
    rgba.data[i + 3] = 255;
  }
  context.putImageData(rgba, 0, 0);
  const minScore = drawMinScore();
  state.draw.drawLabelled(context, record, state.labels, minScore);
  const text = document.createElement("figcaption");
  text.textContent = caption(record, minScore, timing);
  card.append(canvas, text);
  return card;
}

function show(result) {
  $("results").prepend(figureOf(result));
}

async function detectAndShow(name, bytes, pixels) {
  await window.modelReady;
  try {
    const result = await detectPhoto(name, bytes, pixels);
    clearMessage();
    show(result);
    return result.record;
  } catch (error) {
    showMessage(describe(error));
    throw error instanceof PageError ? error : new PageError(describe(error));
  }
}

async function detectFiles(files) {
  for (const file of files) {
    try {
      await detectAndShow(file.name, new Uint8Array(await file.arrayBuffer()));
    } catch (error) {
      return; // the message names the file; the others wait for the next choice
    }
  }
}

window.detect = async function detect(url) {
  await window.modelReady;
  let bytes;
  try {
    bytes = await fetchPhoto(url);
  } catch (error) {
    showMessage(describe(error));
    throw error;
  }
  return detectAndShow(url, bytes);
};

// ---- inputs: file picker, drag and drop, camera --------------------------------------------

function wireInputs() {
  const pick = $("pick");
  pick.disabled = false;
  pick.addEventListener("change", () => detectFiles([...pick.files]).then(() => { pick.value = ""; }));
  document.addEventListener("dragover", (event) => { event.preventDefault(); document.body.classList.add("dragging"); });
  document.addEventListener("dragleave", () => document.body.classList.remove("dragging"));
  document.addEventListener("drop", (event) => {
    event.preventDefault();
    document.body.classList.remove("dragging");
    const files = [...event.dataTransfer.files];
    if (files.length) detectFiles(files);
  });
  // The camera where the browser allows it: a secure context (https, localhost) with getUserMedia.
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) return;
  const camera = $("camera"), capture = $("capture"), video = $("video");
  camera.hidden = false;
  camera.disabled = false;
  camera.addEventListener("click", async () => {
    try {
      video.srcObject = await navigator.mediaDevices.getUserMedia({ video: true, audio: false });
      await video.play();
      video.hidden = false;
      capture.hidden = false;
      capture.disabled = false;
      clearMessage();
    } catch (error) {
      showMessage(`the camera is not available (${error.name}: ${error.message})`);
    }
  });
  capture.addEventListener("click", () => {
    const pixels = pixelsOf(video, video.videoWidth, video.videoHeight);
    const name = `camera ${new Date().toLocaleTimeString()}`;
    detectAndShow(name, null, pixels).catch(() => {});
  });
}

window.addEventListener("error", (event) => showMessage(`unexpected error: ${event.message}`));
window.addEventListener("unhandledrejection", (event) => {
  if (!(event.reason instanceof PageError)) showMessage(describe(event.reason));
});

// The example photo index.html shows with the detections found at export time (#example) is
// detected again here and replaced by this browser's figure. -> its record, or null without one.
async function showExample() {
  const figure = $("example");
  if (!figure) return null;
  try {
    const result = await detectPhoto(figure.dataset.photo, await fetchPageFile(figure.dataset.photo));
    const live = figureOf(result);
    live.id = "example";
    figure.replaceWith(live);
    return result.record;
  } catch (error) {
    showMessage(describe(error));
    throw error;
  }
}

window.modelReady = loadModel().then(wireInputs, (error) => {
  showMessage(describe(error));
  $("status").textContent = "The model could not be loaded.";
  document.querySelectorAll(".pending").forEach((part) => part.remove()); // the example's "running the model"
  throw error instanceof PageError ? error : new PageError(describe(error));
});
window.modelReady.catch(() => {}); // shown on the page above; detect() callers get the rejection
window.exampleShown = window.modelReady.then(showExample);
window.exampleShown.catch(() => {});
