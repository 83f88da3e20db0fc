"""`export --web DIR`: a converted model as a static web page that detects objects in the browser.

The folder holds the page (`web/page/`: index.html, app.js, jpeg.js, draw.js, style.css), the
model's `.onnx` file (`ssd_mobilenet.export.onnx`, the uint8 photo of any size in), its label map
as `labels.json`, `model.json` (what the page reads first: the files, the input's name, the
model's size), and the browser runtime, copied from `web/node_modules` (npm, pinned by
`web/package-lock.json`, installed by `scripts/setup_env.sh`):

- ONNX Runtime Web (`onnxruntime-web`): its WebAssembly build with SIMD and threads, which run
  where the page is cross-origin isolated (served with COOP/COEP headers), else on one thread;
- libjpeg-turbo compiled to WebAssembly (`@cwasm/jpeg-turbo`), which the page calls with
  TensorFlow's decode_jpeg settings, so that a JPEG photo's pixels, and so its detections, are
  the TF1 graph's.

Any static file server serves it; it fetches nothing from elsewhere. `export_web(converted, out,
...)` is the command as a library function. Bad input (no converted model, an existing DIR without
`force`, a label map that does not read, an option that does not apply, the runtime not
installed) raises `ExportInputError` with one line before anything is written; the folder is
written beside DIR and renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from migrate.export_inputs import ExportInputError, carried, load_converted
from ssd_mobilenet import atomic_write

# The repository's web/ folder: package.json and its lockfile, node_modules once installed, page/.
WEB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "web")
PAGE_DIR = os.path.join(WEB_DIR, "page")
PAGE_FILES = ("index.html", "app.js", "jpeg.js", "draw.js", "style.css")
MODEL_FILE = "model.onnx"
LABELS_FILE = "labels.json"
MANIFEST_FILE = "model.json"
LICENSES_FILE = "third_party.txt"
# scripts/setup_env.sh runs it.
INSTALL_HINT = "npm ci --ignore-scripts --prefix web"

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
    """{npm package: version} of the runtime's packages as `web/package-lock.json` pins them."""
    with open(os.path.join(web_dir, "package-lock.json"), encoding="utf-8") as f:
        lock = json.load(f)
    return {name: lock["packages"][f"node_modules/{name}"]["version"] for name in (ONNXRUNTIME_WEB, JPEG_TURBO)}


def installed_runtime(web_dir: str = WEB_DIR) -> dict:
    """{npm package: its package.json} of the runtime in `web_dir/node_modules`, checked against
    the lockfile.

    Raises:
      ExportInputError: a package missing or of another version than the lockfile's, or a file of
        `RUNTIME_FILES` missing.
    """
    pinned = pinned_versions(web_dir)
    found = {}
    for name, version in pinned.items():
        path = os.path.join(web_dir, "node_modules", name, "package.json")
        if not os.path.isfile(path):
            raise ExportInputError(f"--web: {name} is not installed: {INSTALL_HINT}")
        with open(path, encoding="utf-8") as f:
            found[name] = json.load(f)
        if found[name].get("version") != version:
            raise ExportInputError(f"--web: {name} {found[name].get('version')}, lockfile "
                                   f"{version}: {INSTALL_HINT}")
    for package, inside, _ in RUNTIME_FILES:
        if not os.path.isfile(os.path.join(web_dir, "node_modules", package, inside)):
            raise ExportInputError(f"--web: {package}/{inside} is missing: {INSTALL_HINT}")
    return found


def _licenses(packages: dict) -> str:
    lines = ["Third-party software in this folder (from the npm registry, copied by `migrate export --web`):", ""]
    for name, info in sorted(packages.items()):
        repository = info.get("repository")
        repository = repository.get("url") if isinstance(repository, dict) else repository
        lines.append(f"- {name} {info.get('version')}: {info.get('license')} licence ({repository})")
    lines += ["", "ONNX Runtime Web bundles ONNX Runtime (MIT, Microsoft Corporation); @cwasm/jpeg-turbo is "
              "libjpeg-turbo (IJG and BSD-style licences, the libjpeg-turbo Project) compiled to WebAssembly.", ""]
    return "\n".join(lines)


def export_web(converted: str, out: str, labels: str | None = None, max_detections: int | None = None,
               force: bool = False, verbose: bool = False, progress=None) -> dict:
    """Writes the web page folder of `converted` to `out` (module docstring).

    Args:
      labels: a label map (`label_map.pbtxt` or a names file, or `coco`) whose names the page
        shows; default: the label map `converted` carries (`export_inputs.carried`), else the
        page shows `id N`.
      max_detections: rows of the model's outputs (default: the model's `max_total_detections`).
    Returns:
      dict: out, files ({name: bytes}), bytes (all files), model_bytes, runtime ({package: version}),
      max_detections, seconds.
    Raises:
      ExportInputError: bad input, one line naming the path or option; nothing is written.
    """
    say = progress or (lambda msg: None)
    start = time.perf_counter()
    atomic_write.check_output(out, force, is_dir=True, flag="--web", error=ExportInputError)
    if max_detections is not None and max_detections < 1:
        raise ExportInputError(f"--max-detections {max_detections}: must be >= 1")
    entry = carried(converted, labels)
    names = entry.get("labels", {})
    packages = installed_runtime()
    try:  # every package the export imports, here, so that a missing one is this one line
        import tf2onnx  # noqa: F401  (imported by `onnx_lib.convert`)

        from ssd_mobilenet.export import onnx as onnx_lib
    except ImportError as e:
        raise ExportInputError(f"--web: {(e.name or 'tf2onnx').split('.')[0]} is not installed: pip install "
                               "'ssd-mobilenet-migrate[onnx-export]'") from None
    from ssd_mobilenet.export import network
    model = load_converted(converted)
    config = model.config
    if config.weight_bits:
        # Its ONNX file is int8 QDQ, which the page is not tested with.
        raise ExportInputError(f"{converted}: quantization-aware; --web does not take it (--onnx does)")
    if not network.any_size(config, network.UINT8):
        # The page takes photos of any size, resized inside the file.
        raise ExportInputError(f"{converted}: resize_method {config.resize_method}: no ONNX form takes any size")
    max_detections = max_detections or config.max_total_detections
    say(f"converting to ONNX (opset {onnx_lib.OPSET}, uint8 input of any size, {max_detections} detections)")
    model_bytes = onnx_lib.convert(model, network.UINT8, max_detections, verbose=verbose).SerializeToString()
    versions = {name: info["version"] for name, info in packages.items()}
    manifest = {
        "format": 1, "name": os.path.basename(os.path.normpath(converted)), "model": MODEL_FILE,
        "input": onnx_lib.INPUT_NAMES[network.UINT8], "image_size": [config.image_height, config.image_width],
        "num_classes": int(config.num_classes), "max_detections": int(max_detections),
        "labels": LABELS_FILE, "has_labels": bool(names), "synthetic": bool(entry.get("synthetic")),
        "runtime": {"package": ONNXRUNTIME_WEB, "version": versions[ONNXRUNTIME_WEB],
                    "script": "ort.wasm.min.mjs", "loader": "ort-wasm-simd-threaded.mjs",
                    "wasm": "ort-wasm-simd-threaded.wasm"},
        "decoder": {"package": JPEG_TURBO, "version": versions[JPEG_TURBO], "wasm": "jpeg-turbo.wasm"},
    }
    say(f"writing the page, the model and the browser runtime ({ONNXRUNTIME_WEB} {versions[ONNXRUNTIME_WEB]})")
    files = {}
    with atomic_write.atomic_directory(out, prefix=".web-") as folder:
        def put(name, data: bytes):
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
            files[name] = len(data)

        for name in PAGE_FILES:
            shutil.copyfile(os.path.join(PAGE_DIR, name), os.path.join(folder, name))
            files[name] = os.path.getsize(os.path.join(folder, name))
        for package, inside, name in RUNTIME_FILES:
            shutil.copyfile(os.path.join(WEB_DIR, "node_modules", package, inside), os.path.join(folder, name))
            files[name] = os.path.getsize(os.path.join(folder, name))
        put(MODEL_FILE, model_bytes)
        put(LABELS_FILE, (json.dumps(names, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
        put(LICENSES_FILE, _licenses(packages).encode("utf-8"))
        # The page checks that every file it will fetch is there before it fetches megabytes.
        manifest["files"] = {name: size for name, size in sorted(files.items()) if name not in PAGE_FILES}
        put(MANIFEST_FILE, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    return {"out": os.path.abspath(out), "files": files, "bytes": sum(files.values()), "model_bytes": len(model_bytes),
            "runtime": versions, "max_detections": max_detections, "seconds": time.perf_counter() - start}
