"""`export --web DIR`: a converted model as a static web page that detects objects in the browser.

The folder holds the page (`migrate/export/web_page/page/`: index.html, with the model's name and size
and the example written into it, app.js, jpeg.js, draw.js, style.css), the model's `.onnx` file
(`ssd_mobilenet.formats.onnx.writer`, the uint8 photo of any size in), its label map as `labels.json`,
`model.json` (what the page reads first: the files, the input's name, the model's size, the
example's record), with `example` an example photo and the same photo with the converted model's
detections drawn (`predict --png`'s drawing), which the page shows from its first paint and
replaces by its own run once the model has loaded, and the browser runtime, copied from
`migrate/export/web_page/node_modules` (npm, pinned by `migrate/export/web_page/package-lock.json`, installed by
`scripts/setup_env.sh` in a clone and by `install_hint`'s line in an install from a wheel):

- ONNX Runtime Web (`onnxruntime-web`): its WebAssembly build with SIMD and threads, which run
  where the page is cross-origin isolated (served with COOP/COEP headers), else on one thread;
- libjpeg-turbo compiled to WebAssembly (`@cwasm/jpeg-turbo`), which the page calls with
  TensorFlow's decode_jpeg settings, so that a JPEG photo's pixels, and so its detections, are
  the TF1 graph's.

Any static file server serves it; it fetches nothing from elsewhere. `export_web(converted, out,
...)` is the command as a library function; `Web` is what the format says of itself,
`pipeline.export` does the steps every format shares. Bad input (no converted model, an existing
DIR without `force`, a label map that does not read, an example that is not an image, an option
that does not apply, the runtime not installed) raises `InputError` with one line before
anything is written; the folder is written beside DIR and renamed into place.
"""

from __future__ import annotations

import html
import io
import json
import os
import shutil

from migrate.common.console import shown
from migrate.export import pipeline
from migrate.export.onnx import onnx_converter
from ssd_mobilenet import atomic_write
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, UINT8

# The page's folder, package data of `migrate` (in a clone as in an installed wheel): page/,
# package.json and its lockfile; node_modules once npm has installed the runtime there.
WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_page")
PAGE_DIR = os.path.join(WEB_DIR, "page")
PAGE_FILES = ("index.html", "app.js", "jpeg.js", "draw.js", "style.css")
MODEL_FILE = "model.onnx"
LABELS_FILE = "labels.json"
MANIFEST_FILE = "model.json"
LICENSES_FILE = "third_party.txt"
# The example photo (its own extension) and the same photo with the detections found at export time.
EXAMPLE_STEM = "example"
EXAMPLE_DRAWN = "example_drawn.jpg"
# The page draws detections from this score (draw.js's MIN_SCORE, `predict --png-min-score`'s default).
DRAW_MIN_SCORE = 0.5

ONNXRUNTIME_WEB = "onnxruntime-web"
JPEG_TURBO = "@cwasm/jpeg-turbo"
# The runtime's files: (npm package, path in the package, name in the folder). The WebAssembly-only
# build of ONNX Runtime Web: its script, the loader of its module (also each thread's), the module.
RUNTIME_FILES = (
    (ONNXRUNTIME_WEB, "dist/ort.wasm.min.mjs", "ort.wasm.min.mjs"),
    (ONNXRUNTIME_WEB, "dist/ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.mjs"),
    (ONNXRUNTIME_WEB, "dist/ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.wasm"),
    (JPEG_TURBO, "jpeg-turbo.wasm", "jpeg-turbo.wasm"),
)


def pinned_versions(web_dir: str = WEB_DIR) -> dict:
    """{npm package: version} of the runtime's packages as `web_dir/package-lock.json` pins them."""
    with open(os.path.join(web_dir, "package-lock.json"), encoding="utf-8") as f:
        lock = json.load(f)
    return {name: lock["packages"][f"node_modules/{name}"]["version"] for name in (ONNXRUNTIME_WEB, JPEG_TURBO)}


def install_hint(web_dir: str = WEB_DIR) -> str:
    """The command that installs the runtime into `web_dir/node_modules`, the versions its lockfile
    pins (what `scripts/setup_env.sh` runs in a clone), with `web_dir` as the console shows paths:
    `migrate/export/web_page` from a clone's root, the installed package's folder from elsewhere."""
    return f"npm ci --ignore-scripts --prefix {shown(web_dir)}"


def installed_runtime(web_dir: str = WEB_DIR) -> dict:
    """{npm package: its package.json} of the runtime in `web_dir/node_modules`, checked against
    the lockfile.

    Raises:
      InputError: a package missing or of another version than the lockfile's, or a file of
        `RUNTIME_FILES` missing.
    """
    pinned = pinned_versions(web_dir)
    found = {}
    for name, version in pinned.items():
        path = os.path.join(web_dir, "node_modules", name, "package.json")
        if not os.path.isfile(path):
            raise InputError(f"--web: {name} is not installed: {install_hint(web_dir)}")
        with open(path, encoding="utf-8") as f:
            found[name] = json.load(f)
        if found[name].get("version") != version:
            raise InputError(f"--web: {name} {found[name].get('version')}, lockfile "
                             f"{version}: {install_hint(web_dir)}")
    for package, inside, _ in RUNTIME_FILES:
        if not os.path.isfile(os.path.join(web_dir, "node_modules", package, inside)):
            raise InputError(f"--web: {package}/{inside} is missing: {install_hint(web_dir)}")
    return found


def _example_image(photo: str):
    """The example photo as TensorFlow decodes it (`predict`'s pixels): uint8 [H, W, 3].

    Raises:
      InputError: not an image TensorFlow reads, naming it and --example.
    """
    from migrate.common import images
    try:
        return images.read_image(photo)
    except InputError as e:
        # TensorFlow's reason to its first sentence ("Unknown image file format"), within 100 columns.
        raise InputError(f"{str(e).split('. ')[0].rstrip('.')} (--example)") from None


def _example(model, photo: str, image, names: dict, max_detections: int) -> dict:
    """The example's part of the folder: the converted model's detections on `photo`, the TF1
    graph's as `verify` checks them, found here so that the page shows them from its first paint.

    Args:
      model: the converted `SSDMobileNetV1`; image: the photo's pixels (`_example_image`);
      names: {class id (str): name} (`inputs.carried`'s labels); max_detections: rows of
      the page's `.onnx` file, which keeps the best that many.
    Returns:
      dict: photo (its name in the folder: `EXAMPLE_STEM` and the file's extension), data (the
      file's bytes), record (`predict`'s JSON line of it), drawn (JPEG bytes of the photo with
      the detections scoring >= `DRAW_MIN_SCORE` drawn as `predict --png` draws them).
    """
    import numpy as np
    from PIL import Image

    from migrate.predict import prediction
    from migrate.common import draw
    from migrate.predict.runtimes.base import from_outputs
    from ssd_mobilenet.detector import Detector
    name = EXAMPLE_STEM + os.path.splitext(photo)[1].lower()
    # Unsliced: the model is converted to ONNX afterwards, as loaded.
    outputs = {k: v.numpy() for k, v in Detector(model, slice_size=None)(image[None]).items()}
    outputs["num_detections"] = np.minimum(outputs["num_detections"], max_detections)
    result = from_outputs(name, image.shape[0], image.shape[1], outputs)
    labels = {int(k): v for k, v in names.items()} or None
    drawn = io.BytesIO()
    Image.fromarray(draw.draw_labelled(image, result.boxes, result.classes, result.scores, labels,
                                       DRAW_MIN_SCORE)).save(drawn, format="JPEG", quality=90)
    with open(photo, "rb") as f:
        data = f.read()
    return {"photo": name, "data": data, "record": prediction.record(result, labels), "drawn": drawn.getvalue()}


def _filled(html_text: str, marker: str, content: str) -> str:
    """`html_text` with its one `marker` replaced by `content`."""
    if html_text.count(marker) != 1:  # web_page/page/index.html changed without this module
        raise RuntimeError(f"index.html: {marker!r} found {html_text.count(marker)} times, not once")
    return html_text.replace(marker, content)


def _caption(record: dict) -> str:
    """The example's caption (HTML) until the page has run the model itself (app.js's `caption`
    then); its `pending` part goes when the model cannot load."""
    drawn = sum(d["score"] >= DRAW_MIN_SCORE for d in record["detections"])
    return html.escape(f"{record['image']}: {record['width']}x{record['height']}, {drawn} of "
                       f"{record['num_detections']} detections drawn (score {DRAW_MIN_SCORE:g} or more), as found "
                       "when this page was made") + '<span class="pending">; running the model in this browser…</span>'


# Said on the page of a model with seeded synthetic weights (the default model, the shapes demo).
SYNTHETIC_NOTE = ('<p id="synthetic">This model\'s weights are synthetic (seeded, not trained): its boxes and '
                  'labels mean nothing.</p>')


def _page_html(template: str, name: str, model_bytes: int, example: dict | None, synthetic: bool = False) -> str:
    """index.html with what the export knows written into it: the model's name and download size,
    that its weights are synthetic (`SYNTHETIC_NOTE`), and the example photo with its detections
    drawn, which a browser paints before its load event (a screenshot, a link preview) while
    app.js is still loading the model."""
    page = _filled(template, '<span id="model-name"></span>', f'<span id="model-name">({html.escape(name)})</span>')
    page = _filled(page, "Loading the model&hellip;", f"Loading the model ({model_bytes / 1e6:.1f} MB)&hellip;")
    if synthetic:
        page = _filled(page, '<p id="message" role="alert" hidden></p>',
                       SYNTHETIC_NOTE + '\n  <p id="message" role="alert" hidden></p>')
    if example is not None:
        record = example["record"]
        figure = (f'<figure id="example" data-photo="{html.escape(example["photo"])}">'
                  f'<img src="{EXAMPLE_DRAWN}" width="{record["width"]}" height="{record["height"]}" '
                  f'alt="The example photo with the detections found on it">'
                  f"<figcaption>{_caption(record)}</figcaption></figure>")
        page = _filled(page, '<section id="results" aria-live="polite"></section>',
                       f'<section id="results" aria-live="polite">{figure}</section>')
    return page


def _licenses(packages: dict) -> str:
    lines = ["Third-party software in this folder (from the npm registry, copied by `migrate export --web`):", ""]
    for name, info in sorted(packages.items()):
        repository = info.get("repository")
        repository = repository.get("url") if isinstance(repository, dict) else repository
        lines.append(f"- {name} {info.get('version')}: {info.get('license')} licence ({repository})")
    lines += ["", "ONNX Runtime Web bundles ONNX Runtime (MIT, Microsoft Corporation); @cwasm/jpeg-turbo is "
              "libjpeg-turbo (IJG and BSD-style licences, the libjpeg-turbo Project) compiled to WebAssembly.", ""]
    return "\n".join(lines)


def _manifest(job: pipeline.Job, versions: dict) -> dict:
    """`model.json` but its `files` and `example`: the model's name, size, input and classes, the
    label file, the runtime's files and `versions` ({npm package: version})."""
    config = job.config
    return {
        "format": 1, "name": os.path.basename(os.path.normpath(job.converted)), "model": MODEL_FILE,
        "input": INPUT_NAMES[UINT8], "image_size": [config.image_height, config.image_width],
        "num_classes": int(config.num_classes), "max_detections": int(job.max_detections),
        "labels": LABELS_FILE, "has_labels": bool(job.entry.get("labels")),
        "synthetic": bool(job.entry.get("synthetic")),
        "runtime": {"package": ONNXRUNTIME_WEB, "version": versions[ONNXRUNTIME_WEB],
                    "script": "ort.wasm.min.mjs", "loader": "ort-wasm-simd-threaded.mjs",
                    "wasm": "ort-wasm-simd-threaded.wasm"},
        "decoder": {"package": JPEG_TURBO, "version": versions[JPEG_TURBO], "wasm": "jpeg-turbo.wasm"},
    }


class Web(pipeline.Format):
    """The web page folder: the float32 `.onnx` file of a uint8 photo of any size, which the page
    runs in the browser, with `example` (a photo, or None) shown with the converted model's
    detections from the first paint (`_example`); `verbose` shows tf2onnx's log."""

    flag = "--web"
    is_dir = True
    refused = dict.fromkeys(("--nms", "--int8", "--calibration", "--input"),
                            "not for --web (the page runs the float32 .onnx file on the photo itself)")

    def __init__(self, example: str | None = None, verbose: bool = False):
        self.example, self.verbose = example, verbose
        self.image = self.packages = self.shown = None

    def check(self, int8: bool) -> None:
        """The example is an image; the browser runtime and the ONNX converter are installed."""
        self.image = None if self.example is None else _example_image(self.example)
        self.packages = installed_runtime()
        onnx_converter(self.flag)

    def check_model(self, converted: str, config) -> None:
        from ssd_mobilenet.formats import network
        if config.weight_bits:
            # Its ONNX file is int8 QDQ, which the page is not tested with.
            raise InputError(f"{converted}: quantization-aware; --web does not take it (--onnx does)")
        if not network.any_size(config, UINT8):
            # The page takes photos of any size, resized inside the file.
            raise InputError(f"{converted}: resize_method {config.resize_method}: no ONNX form takes any size")

    def prepare(self, job: pipeline.Job, say) -> None:
        if self.example is not None:
            say(f"detecting objects in {self.example} (--example) with the converted model")
            self.shown = _example(job.model, self.example, self.image, job.entry.get("labels", {}),
                                  job.max_detections)

    def converting(self, job: pipeline.Job) -> str:
        from ssd_mobilenet.formats.onnx import writer as onnx_lib
        return (f"converting to ONNX (opset {onnx_lib.OPSET}, uint8 input of any size, "
                f"{job.max_detections} detections)")

    def convert(self, job: pipeline.Job) -> pipeline.File:
        from ssd_mobilenet.formats.onnx import writer as onnx_lib
        return pipeline.File(onnx_lib.convert(job.model, UINT8, job.max_detections,
                                              verbose=self.verbose).SerializeToString())

    def write(self, out: str, file: pipeline.File, job: pipeline.Job, say) -> dict:
        """The folder (module docstring), written beside `out` and renamed into place."""
        names, shown = job.entry.get("labels", {}), self.shown
        versions = {name: info["version"] for name, info in self.packages.items()}
        manifest = _manifest(job, versions)
        say(f"writing the page, the model and the browser runtime ({ONNXRUNTIME_WEB} {versions[ONNXRUNTIME_WEB]})")
        files = {}
        with atomic_write.atomic_directory(out, prefix=".web-") as folder:
            def put(name, data: bytes):
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data)
                files[name] = len(data)

            for name in PAGE_FILES:
                if name == "index.html":
                    with open(os.path.join(PAGE_DIR, name), encoding="utf-8") as f:
                        put(name, _page_html(f.read(), manifest["name"], len(file.data), shown,
                                             manifest["synthetic"]).encode("utf-8"))
                    continue
                shutil.copyfile(os.path.join(PAGE_DIR, name), os.path.join(folder, name))
                files[name] = os.path.getsize(os.path.join(folder, name))
            for package, inside, name in RUNTIME_FILES:
                shutil.copyfile(os.path.join(WEB_DIR, "node_modules", package, inside), os.path.join(folder, name))
                files[name] = os.path.getsize(os.path.join(folder, name))
            put(MODEL_FILE, file.data)
            put(LABELS_FILE, (json.dumps(names, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
            put(LICENSES_FILE, _licenses(self.packages).encode("utf-8"))
            if shown is not None:
                put(shown["photo"], shown["data"])
                put(EXAMPLE_DRAWN, shown["drawn"])
                manifest["example"] = {"photo": shown["photo"], "drawn": EXAMPLE_DRAWN, "record": shown["record"]}
            # The page checks that every file it will fetch is there before it fetches megabytes.
            manifest["files"] = {name: size for name, size in sorted(files.items()) if name not in PAGE_FILES}
            put(MANIFEST_FILE, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
        return {"files": files, "bytes": sum(files.values()), "model_bytes": len(file.data), "runtime": versions,
                "example": shown and shown["record"]}


def export_web(converted: str, out: str, labels: str | None = None, max_detections: int | None = None,
               example: str | None = None, force: bool = False, verbose: bool = False, progress=None) -> dict:
    """Writes the web page folder of `converted` to `out` (module docstring).

    Args:
      labels: a label map (`label_map.pbtxt` or a names file, or `coco`) whose names the page
        shows; default: the label map `converted` carries (`inputs.carried`), else the
        page shows `id N`.
      max_detections: rows of the model's outputs (default: the model's `max_total_detections`).
      example: a photo the page shows with the converted model's detections from its first paint
        (`_example`), then with its own; without one the page starts empty.
    Returns:
      dict: out, files ({name: bytes}), bytes (all files), model_bytes, runtime ({package: version}),
      max_detections, example (its record, or None), seconds (and `pipeline.export`'s int8 keys:
      the page's file is float32).
    Raises:
      InputError: bad input, one line naming the path or option; nothing is written.
    """
    return pipeline.export(Web(example, verbose), converted, out, max_detections=max_detections, labels=labels,
                           force=force, progress=progress)
