"""`export --web DIR`: a converted model as a static web page that detects objects in the browser.

The folder holds the page (`migrate/export/web_page/page/`: index.html, with the model's name, size
and agreement and the example written into it, app.js, model.js, jpeg.js, draw.js, style.css), the
model's `.tflite` file (`ssd_mobilenet.formats.tflite.writer`: per-class NMS, the uint8 photo of any
size in), its label map as `labels.json`, `model.json` (what the page reads first: the files, the
model's size, precision and agreement, where the file holds its input's shape, the example's
record), with `example` an example photo and the same photo with the converted model's detections
drawn (`predict --png`'s drawing), which the page shows from its first paint and replaces by its own
run once the model has loaded, and the browser runtime, copied from
`migrate/export/web_page/node_modules` (npm, pinned by `migrate/export/web_page/package-lock.json`,
installed by `scripts/setup_env.sh` in a clone and by `install_hint`'s line in an install from a wheel):

- LiteRT.js (`@litertjs/core`): LiteRT with XNNPACK compiled to WebAssembly, in three builds of
  which the browser fetches one: threads and relaxed SIMD where the page is cross-origin isolated
  (served with COOP/COEP headers), relaxed SIMD on one thread elsewhere, plain SIMD where the
  browser has no relaxed SIMD;
- libjpeg-turbo compiled to WebAssembly (`@cwasm/jpeg-turbo`), which the page calls with
  TensorFlow's decode_jpeg settings, so that a JPEG photo's pixels, and so its detections, are
  the TF1 graph's.

The file's precision (`PRECISIONS`): float16 weights by default (half the download; dequantized to
float32 when LiteRT loads the file, float32 arithmetic), whose agreement with the converted model
`export` measures on generated images and prints as `export --int8` prints an int8 file's
(`drift.drift_notes`), and the page says; `float32=True` (`--float32`) the float32 file, whose
detections are the TF1 graph's; `--int8` the int8 file, calibrated and compared as `--tflite
--int8`'s. LiteRT.js runs a model of fixed input shape: the page writes each photo's height and
width into the file's input shape (`input_shape_offsets`) and compiles it again for a new size.

Any static file server serves it; it fetches nothing from elsewhere. `export_web(converted, out,
...)` is the command as a library function; `Web` is what the format says of itself,
`pipeline.export` does the steps every format shares. Bad input (no converted model, an existing
DIR without `force`, a label map that does not read, an example that is not an image, an option
that does not apply, the runtime not installed) raises `InputError` with one line before
anything is written; the folder is written beside DIR and renamed into place.
"""

from __future__ import annotations

import contextlib
import gzip
import html
import io
import json
import os
import shutil

from migrate.common.console import shown
from migrate.export import pipeline
from ssd_mobilenet import atomic_write
from ssd_mobilenet.errors import InputError
from ssd_mobilenet.formats.preprocess import INPUT_NAMES, UINT8

# The page's folder, package data of `migrate` (in a clone as in an installed wheel): page/,
# package.json and its lockfile; node_modules once npm has installed the runtime there.
WEB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_page")
PAGE_DIR = os.path.join(WEB_DIR, "page")
PAGE_FILES = ("index.html", "app.js", "model.js", "jpeg.js", "draw.js", "style.css")
MODEL_FILE = "model.tflite"
LABELS_FILE = "labels.json"
MANIFEST_FILE = "model.json"
LICENSES_FILE = "third_party.txt"
# The example photo (its own extension) and the same photo with the detections found at export time.
EXAMPLE_STEM = "example"
EXAMPLE_DRAWN = "example_drawn.jpg"
# The page draws detections from this score (draw.js's MIN_SCORE, `predict --png-min-score`'s default).
DRAW_MIN_SCORE = 0.5

LITERT = "@litertjs/core"
LITERT_UTILS = "@litertjs/wasm-utils"
JPEG_TURBO = "@cwasm/jpeg-turbo"
# LiteRT.js's WebAssembly builds, `litert_wasm_<build>_internal.{js,wasm}`, which it picks itself from
# the folder it is given: threaded (cross-origin isolated, relaxed SIMD), plain (relaxed SIMD, one
# thread), compat (SIMD without relaxed SIMD). Its JSPI build (WebGPU and WebNN) is not copied.
LITERT_BUILDS = ("threaded", "", "compat")


def _litert_build(build: str, ext: str) -> str:
    """The file name of LiteRT.js's `build` (`LITERT_BUILDS`), its loader (js) or module (wasm)."""
    return f"litert_wasm{'_' + build if build else ''}_internal.{ext}"


# The runtime's files: (npm package, path in the package, name in the folder). LiteRT.js's module
# imports its helper by package name: index.html's import map names the copy.
RUNTIME_FILES = (
    (LITERT, "dist/index.js", "litert.js"),
    (LITERT_UTILS, "dist/index.js", "litert-wasm-utils.js"),
    *((LITERT, f"wasm/{_litert_build(build, ext)}", _litert_build(build, ext))
      for build in LITERT_BUILDS for ext in ("js", "wasm")),
    (JPEG_TURBO, "jpeg-turbo.wasm", "jpeg-turbo.wasm"),
)
# LiteRT.js's `loadLiteRt` makes its default environment with a WebGPU device it asks the browser
# for (a GPU woken up; a console warning where there is none), which the page's CPU model never
# uses: the page's copy of its module makes the environment without one.
LITERT_NO_WEBGPU = ("await Environment.create()", "await Environment.create({ webGpuDevice: null })")
# The file's precision: float16 weights (the default), float32 (`--float32`), int8 (`--int8`).
FLOAT16, FLOAT32, INT8 = "float16", "float32", "int8"
PRECISIONS = {FLOAT16: "float16 weights", FLOAT32: "float32", INT8: "int8"}


def pinned_versions(web_dir: str = WEB_DIR) -> dict:
    """{npm package: version} of the runtime's packages as `web_dir/package-lock.json` pins them."""
    with open(os.path.join(web_dir, "package-lock.json"), encoding="utf-8") as f:
        lock = json.load(f)
    return {name: lock["packages"][f"node_modules/{name}"]["version"] for name in (LITERT, LITERT_UTILS, JPEG_TURBO)}


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
    runtime_file(web_dir, *RUNTIME_FILES[0][:2])
    return found


def runtime_file(web_dir: str, package: str, inside: str) -> bytes:
    """A runtime file's bytes as the folder holds them: LiteRT.js's module without its WebGPU
    device (`LITERT_NO_WEBGPU`), the others as npm installed them.

    Raises:
      InputError: LiteRT.js's module does not make its environment as `LITERT_NO_WEBGPU` expects.
    """
    with open(os.path.join(web_dir, "node_modules", package, inside), "rb") as f:
        data = f.read()
    if (package, inside) != RUNTIME_FILES[0][:2]:
        return data
    text = data.decode("utf-8")
    if text.count(LITERT_NO_WEBGPU[0]) != 1:
        raise InputError(f"--web: {package}/{inside} is not the module this export knows: {install_hint(web_dir)}")
    return text.replace(*LITERT_NO_WEBGPU).encode("utf-8")


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
      the page's `.tflite` file, which keeps the best that many.
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
    # Unsliced: the model is converted to TFLite afterwards, as loaded.
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


def _fidelity(manifest: dict) -> str:
    """The footer's sentence (HTML) on whose detections the page gives: the TF1 graph's for the
    float32 file, else the file's agreement with them as `export` measured it (`drift_notes`)."""
    if manifest["precision"] == FLOAT32:
        return ("The detections are those of the original TensorFlow 1 model (JPEG photos decoded by libjpeg-turbo "
                "as TensorFlow decodes them; the model's float32 file on LiteRT.js).")
    measured = "; ".join(manifest["agreement"])
    return html.escape(f"The model's file has {PRECISIONS[manifest['precision']]}: its detections are close to "
                       f"the original TensorFlow 1 model's, not equal. Measured when this page was made: {measured}.")


def _page_html(template: str, manifest: dict, model_bytes: int, example: dict | None) -> str:
    """index.html with what the export knows written into it: the model's name and download size,
    that its weights are synthetic (`SYNTHETIC_NOTE`), how close its detections are to the TF1
    graph's (`_fidelity`), and the example photo with its detections drawn, which a browser paints
    before its load event (a screenshot, a link preview) while app.js is still loading the model."""
    name = manifest["name"]
    page = _filled(template, '<span id="model-name"></span>', f'<span id="model-name">({html.escape(name)})</span>')
    page = _filled(page, "Loading the model&hellip;", f"Loading the model ({model_bytes / 1e6:.1f} MB)&hellip;")
    page = _filled(page, '<p id="fidelity"></p>', f'<p id="fidelity">{_fidelity(manifest)}</p>')
    if manifest["synthetic"]:
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


def one_visit(names) -> list:
    """The files of a page folder (`names`) that one visit of a cross-origin isolated page
    downloads: all but the licences and LiteRT.js's builds other than the threaded one."""
    others = {_litert_build(build, ext) for build in LITERT_BUILDS[1:] for ext in ("js", "wasm")}
    return sorted(name for name in names if name not in others and name != LICENSES_FILE)


def gzip_bytes(folder: str, names) -> int:
    """The total size of the files `names` of `folder` compressed by gzip -6 (what a server that
    compresses sends)."""
    total = 0
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            total += len(gzip.compress(f.read(), compresslevel=6))
    return total


def _licenses(packages: dict) -> str:
    lines = ["Third-party software in this folder (from the npm registry, copied by `migrate export --web`):", ""]
    for name, info in sorted(packages.items()):
        repository = info.get("repository")
        repository = repository.get("url") if isinstance(repository, dict) else repository
        lines.append(f"- {name} {info.get('version')}: {info.get('license')} licence ({repository})")
    lines += ["", "LiteRT.js bundles LiteRT (TensorFlow Lite) and XNNPACK (Apache 2.0 and BSD licences, Google "
              "LLC); @cwasm/jpeg-turbo is libjpeg-turbo (IJG and BSD-style licences, the libjpeg-turbo Project) "
              "compiled to WebAssembly.", ""]
    return "\n".join(lines)


def input_shape_offsets(tflite_bytes: bytes) -> list:
    """Byte offsets in the `.tflite` file of the height of each [1, H, W, 3] shape of the photo
    (the width follows 4 bytes on): `shape` and `shape_signature` of the input and of every tensor
    of the first subgraph shaped as it is (its cast to float32). The page writes a photo's size
    there, as little-endian int32s, and compiles the file for it: LiteRT.js takes no input of
    another shape than the file's."""
    from ssd_mobilenet.formats.tflite import file_format
    schema = file_format._schema()
    graph = schema.Model.GetRootAsModel(tflite_bytes, 0).Subgraphs(0)

    def shapes(tensor) -> tuple:
        # The generated reader gives 0 for a vector the tensor does not have.
        return tuple(list(getattr(v, "tolist", lambda: [])()) for v in (tensor.ShapeAsNumpy(),
                                                                         tensor.ShapeSignatureAsNumpy()))
    want = shapes(graph.Tensors(graph.Inputs(0)))
    offsets = []
    for i in range(graph.TensorsLength()):
        tensor = graph.Tensors(i)
        if shapes(tensor) != want:
            continue
        # The schema's Tensor table: shape in field slot 4, shape_signature in slot 18.
        offsets += [tensor._tab.Vector(tensor._tab.Offset(slot)) + 4 for slot in (4, 18)]
    if want[1][1:3] != [-1, -1] or not offsets:
        raise RuntimeError(f"the .tflite file's input is {want[1]}, not [1, -1, -1, 3]")
    return sorted(offsets)


def _manifest(job: pipeline.Job, versions: dict, precision: str, agreement: list, data: bytes) -> dict:
    """`model.json` but its `files` and `example`: the model's name, size, input, classes and
    `precision` (`PRECISIONS`' key), its `agreement` (the drift lines, empty for float32), the
    label file, the runtime's files and `versions` ({npm package: version})."""
    config = job.config
    return {
        "format": 2, "name": os.path.basename(os.path.normpath(job.converted)), "model": MODEL_FILE,
        "precision": precision, "agreement": agreement, "input_shape_offsets": input_shape_offsets(data),
        "input": INPUT_NAMES[UINT8], "image_size": [config.image_height, config.image_width],
        "num_classes": int(config.num_classes), "max_detections": int(job.max_detections),
        "labels": LABELS_FILE, "has_labels": bool(job.entry.get("labels")),
        "synthetic": bool(job.entry.get("synthetic")),
        "runtime": {"package": LITERT, "version": versions[LITERT], "script": "litert.js",
                    "helper": "litert-wasm-utils.js"},
        "decoder": {"package": JPEG_TURBO, "version": versions[JPEG_TURBO], "wasm": "jpeg-turbo.wasm"},
    }


class Web(pipeline.Format):
    """The web page folder: the `.tflite` file of a uint8 photo of any size (per-class NMS), of
    float16 weights, or float32 with `float32`, or int8 with `--int8`, which the page runs in the
    browser, with `example` (a photo, or None) shown with the converted model's detections from
    the first paint (`_example`); `verbose` shows the converter's log."""

    flag = "--web"
    is_dir = True
    refused = dict.fromkeys(("--nms", "--input"), "not for --web (the page runs the per-class .tflite file on the "
                                                  "photo itself)")

    def __init__(self, example: str | None = None, verbose: bool = False, float32: bool = False):
        self.example, self.verbose, self.float32 = example, verbose, float32
        self.image = self.packages = self.shown = None

    def check(self, int8: bool) -> None:
        """The example is an image; --float32 is not asked with --int8; the browser runtime is installed."""
        if self.float32 and int8:
            raise InputError("--float32: the page's file is float32 or --int8, not both")
        self.image = None if self.example is None else _example_image(self.example)
        self.packages = installed_runtime()

    def check_model(self, converted: str, config) -> None:
        from ssd_mobilenet.formats import network
        if config.weight_bits:
            # Its file is the integer one, which the page is not tested with.
            raise InputError(f"{converted}: quantization-aware; --web does not take it (--tflite does)")
        if not network.any_size(config, UINT8):
            # The page takes photos of any size, resized inside the file.
            raise InputError(f"{converted}: resize_method {config.resize_method}: no .tflite form takes any size")

    def prepare(self, job: pipeline.Job, say) -> None:
        if self.example is not None:
            say(f"detecting objects in {self.example} (--example) with the converted model")
            self.shown = _example(job.model, self.example, self.image, job.entry.get("labels", {}),
                                  job.max_detections)

    def precision(self, job: pipeline.Job) -> str:
        """The file's precision (`PRECISIONS`' key)."""
        return INT8 if job.int8 else FLOAT32 if self.float32 else FLOAT16

    def converting(self, job: pipeline.Job) -> str:
        return (f"converting to TFLite ({PRECISIONS[self.precision(job)]}, per-class NMS, uint8 input of any "
                f"size, {job.max_detections} detections)")

    def convert(self, job: pipeline.Job) -> pipeline.File:
        from migrate.common import console
        from ssd_mobilenet.formats.tflite import writer as tflite_lib
        precision = self.precision(job)
        with contextlib.nullcontext() if self.verbose else console.native_stderr_quieted():
            data = tflite_lib.convert(job.model, max_detections=job.max_detections,
                                      representative_images=job.images if job.int8 else None, carried=job.entry,
                                      float16_weights=precision == FLOAT16)
        return pipeline.File(data, precision=FLOAT16 if precision == FLOAT16 else None,
                             fields={"precision": precision})

    def runner(self, data: bytes, job: pipeline.Job):
        """The file on LiteRT's interpreter, for its drift (`tflite.TFLite.runner`)."""
        from migrate.export.tflite import TFLite
        return TFLite().runner(data, job)

    def compared_on(self, calibration) -> str:
        from migrate.export.tflite import TFLite
        return TFLite().compared_on(calibration)

    def write(self, out: str, file: pipeline.File, job: pipeline.Job, say) -> dict:
        """The folder (module docstring), written beside `out` and renamed into place."""
        names, shown = job.entry.get("labels", {}), self.shown
        versions = {name: info["version"] for name, info in self.packages.items()}
        manifest = _manifest(job, versions, self.precision(job), file.agreement, file.data)
        say(f"writing the page, the model and the browser runtime (LiteRT.js {versions[LITERT]})")
        files = {}
        with atomic_write.atomic_directory(out, prefix=".web-") as folder:
            def put(name, data: bytes):
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data)
                files[name] = len(data)

            for name in PAGE_FILES:
                if name == "index.html":
                    with open(os.path.join(PAGE_DIR, name), encoding="utf-8") as f:
                        put(name, _page_html(f.read(), manifest, len(file.data), shown).encode("utf-8"))
                    continue
                shutil.copyfile(os.path.join(PAGE_DIR, name), os.path.join(folder, name))
                files[name] = os.path.getsize(os.path.join(folder, name))
            for package, inside, name in RUNTIME_FILES:
                put(name, runtime_file(WEB_DIR, package, inside))
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
            download = gzip_bytes(folder, one_visit(files))
        return {"files": files, "bytes": sum(files.values()), "model_bytes": len(file.data), "runtime": versions,
                "example": shown and shown["record"], "download_bytes": download, "precision": manifest["precision"]}


def export_web(converted: str, out: str, labels: str | None = None, max_detections: int | None = None,
               example: str | None = None, force: bool = False, verbose: bool = False, progress=None,
               float32: bool = False, int8: bool = False, calibration=None, warn=None) -> dict:
    """Writes the web page folder of `converted` to `out` (module docstring).

    Args:
      labels: a label map (`label_map.pbtxt` or a names file, or `coco`) whose names the page
        shows; default: the label map `converted` carries (`inputs.carried`), else the
        page shows `id N`.
      max_detections: rows of the model's outputs (default: the model's `max_total_detections`).
      example: a photo the page shows with the converted model's detections from its first paint
        (`_example`), then with its own; without one the page starts empty.
      float32: the float32 file (the TF1 graph's detections) instead of float16 weights.
      int8, calibration, warn: the int8 file, as `tflite.export`'s.
    Returns:
      dict: out, files ({name: bytes}), bytes (all files), download_bytes (what one visit of a
      cross-origin isolated page downloads, gzip-compressed: `one_visit`), model_bytes, precision
      (`PRECISIONS`' key), runtime ({package: version}), max_detections, example (its record, or
      None), notes (the drift lines of a file that is not float32), seconds, and
      `pipeline.export`'s int8 and drift keys.
    Raises:
      InputError: bad input, one line naming the path or option; nothing is written.
    """
    return pipeline.export(Web(example, verbose, float32), converted, out, max_detections=max_detections,
                           int8=int8, calibration=calibration, labels=labels, force=force, progress=progress, warn=warn)
