"""`migrate export --web`: the page in a real browser (Debian's headless Chromium, driven by
Playwright), served from 127.0.0.1 by a static file server: with `--float32` the seven shared
photos' detections are `predict`'s and the TF1 graph's (counts and classes exact, boxes and scores
within 1e-4), with and without cross-origin isolation (threads, one thread); the default page
(float16 weights) is within the issue's download (15 MiB gzip a visit) and says its agreement
with the converted model, on the console and on the page, and its detections on the photos agree
with the TF1 graph's as that line says; the page's first paint (its load event) shows the example
photo with its detections, and a page load logs no failed request and no console error; bad input
on the page is one message on the page; bad input to the command is one `error:` line, exit 2,
nothing written.

Two exported folders (the 2018 zoo graph's conversion, 300x300, 90 classes, the first shared
photo as its example: `web/` float32, `web16/` the default) and one browser serve the whole file."""

from __future__ import annotations

import base64
import glob
import html
import io
import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import SHARED, json_lines, run_cli, same_predict_lines, shared_available
from migrate.bench import browser
from migrate.export import web
from migrate.predict import prediction
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from ssd_mobilenet.errors import InputError

PHOTOS = sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))
# `predict`'s rule for a runtime that is not the converted model's own: counts and classes exact,
# boxes and scores within 1e-4 (XNNPACK's WebAssembly kernels round otherwise than oneDNN's).
ATOL = 1e-4
LABELS = "\n".join(f"class {i}" for i in range(1, 91)) + "\n"
needs_photos = pytest.mark.skipif(not shared_available() or not PHOTOS, reason=f"ground truth not found at {SHARED}")


@pytest.fixture(scope="module")
def zoo_web(zoo_converted, tmp_path_factory):
    """(TF1 fixture dir, converted dir, served root): the conversion's pages exported once by the
    command, the float32 one under `root/web/` (the first shared photo its example), the default
    one under `root/web16/` (with `root/web16.err`, its console), the shared photos under
    `root/photos/` (the same origin: a cross-origin isolated page may fetch only what allows it)
    and a PNG copy of one of them."""
    from PIL import Image
    src, converted = zoo_converted
    root = tmp_path_factory.mktemp("web_root")
    (root / "labels.txt").write_text(LABELS)
    code, out, err = run_cli(["export", converted, "--web", str(root / "web"), "--labels", str(root / "labels.txt"),
                              "--example", PHOTOS[0], "--float32"])
    assert code == 0, err
    assert out.startswith("exported a web page: float32, 100 detections, 21 files") and "@litertjs/core 2.5.3" in out
    code, out, err = run_cli(["export", converted, "--web", str(root / "web16"), "--labels", str(root / "labels.txt")])
    assert code == 0, err
    assert out.startswith("exported a web page: float16 weights, 100 detections, 19 files")
    (root / "web16.err").write_text(err)
    (root / "photos").mkdir()
    for photo in PHOTOS:
        os.symlink(photo, root / "photos" / os.path.basename(photo))
    Image.open(PHOTOS[-1]).save(root / "photos" / "as_png.png")  # TF's and the browser's PNG pixels
    (root / "photos" / "notes.txt").write_text("not an image")
    (root / "photos" / "truncated.jpg").write_bytes(open(PHOTOS[0], "rb").read()[:5000])
    return src, converted, root


@pytest.fixture(scope="module")
def chromium():
    with browser.chromium() as context:
        yield context


@pytest.fixture(scope="module")
def references(zoo_web):
    """{photo name: predict's record} on the converted directory (TensorFlow), and {photo name:
    the TF1 graph's four outputs} (a session of the frozen graph, Grappler off)."""
    import tensorflow as tf

    from migrate.tf1.frozen_graph import FrozenGraphRunner
    from migrate.tf1.sources import read_graph_def
    src, converted, root = zoo_web
    photos = sorted(glob.glob(str(root / "photos" / "*.jpg"))) + [str(root / "photos" / "as_png.png")]
    photos = [p for p in photos if not p.endswith("truncated.jpg")]
    out = root / "predict.jsonl"
    prediction.run(converted, photos, out=str(out), labels=str(root / "labels.txt"), batch_size=1)
    records = {os.path.basename(k): v for k, v in json_lines(out).items()}
    runner = FrozenGraphRunner(read_graph_def(os.path.join(src, "frozen_inference_graph.pb")), exact_arithmetic=True)
    tf1 = {}
    for photo in photos:
        image = tf.io.decode_image(open(photo, "rb").read(), channels=3).numpy()[None]
        tf1[os.path.basename(photo)] = runner.run(image, {k: f"{k}:0" for k in DETECTION_OUTPUTS})
    runner.close()
    return records, tf1


def _page_records(chromium, root, query, names, folder="web"):
    with browser.serve(str(root), isolated="threads" not in query) as base:
        page, info = browser.open_page(chromium, f"{base}{folder}/{query}")
        try:
            records = {name: page.evaluate("(url) => window.detect(url)", f"../photos/{name}") for name in names}
            page.evaluate("() => window.exampleShown")
            shown = page.locator("figure:not(#example)").count()
        finally:
            page.close()
    return info, records, shown


def _same_as_tf1(record, outputs):
    n = int(outputs["num_detections"][0])
    assert record["num_detections"] == n
    assert [d["class_id"] for d in record["detections"]] == outputs["detection_classes"][0, :n].astype(int).tolist()
    np.testing.assert_allclose([d["score"] for d in record["detections"]], outputs["detection_scores"][0, :n],
                               rtol=0, atol=ATOL)
    np.testing.assert_allclose([d["box"] for d in record["detections"]], outputs["detection_boxes"][0, :n],
                               rtol=0, atol=ATOL)
    return n


@pytest.mark.slow
@needs_photos
@pytest.mark.parametrize("query", ["", "?threads=1"], ids=["isolated_threads", "not_isolated_one_thread"])
def test_page_gives_predicts_and_the_tf1_graphs_detections_on_the_shared_photos(zoo_web, chromium, references,
                                                                                 query):
    _, _, root = zoo_web
    records, tf1 = references
    info, ours, shown = _page_records(chromium, root, query, sorted(records))
    # Cross-origin isolated, LiteRT.js runs on threads; served as any static server serves it (no
    # COOP/COEP headers), on one.
    assert info["cross_origin_isolated"] == (query == "") and info["runtime"] == "LiteRT.js 2.5.3"
    assert info["precision"] == "float32"
    assert info["threads"] == (min(os.cpu_count(), 4) if query == "" else 1)
    assert shown == len(records)  # every photo drawn on the page
    for name, record in ours.items():
        assert set(record) == {"image", "height", "width", "num_detections", "detections"}
        assert all(set(d) == {"class_id", "label", "score", "box", "box_pixels"} for d in record["detections"])
    compared = same_predict_lines({k: dict(v, image=k) for k, v in ours.items()}, records, ATOL)
    assert compared == sum(r["num_detections"] for r in records.values()) > 0
    counted = sum(_same_as_tf1(ours[name], tf1[name]) for name in sorted(ours))
    errors = [max(abs(a["score"] - b["score"]) for a, b in zip(ours[k]["detections"], records[k]["detections"]))
              for k in ours]
    print(f"web page {query or '(isolated)'}: {counted} detections on {len(ours)} photos, scores within "
          f"{max(errors):.1e} of predict's")


@pytest.mark.slow
@needs_photos
def test_the_default_page_is_within_15_mib_and_says_its_agreement_which_holds_on_the_photos(zoo_web, chromium,
                                                                                          references):
    """The default page's file has float16 weights: a visit downloads at most 15 MiB gzip-compressed
    (the issue's figure), the export's console line says its agreement with the converted model as
    `export --int8` says an int8 file's, the page says the same under its photos, and on the shared
    photos its detections scoring >= 0.5 are the TF1 graph's (same class, IoU >= 0.5) but for a
    few, scores within 0.06 (measured: 698 of 700, mean IoU 0.998, scores within 0.052)."""
    from migrate.export import drift
    _, _, root = zoo_web
    _, tf1 = references
    manifest = json.loads((root / "web16" / "model.json").read_text())
    assert manifest["precision"] == web.FLOAT16
    visit = web.one_visit(os.listdir(root / "web16"))
    assert "litert_wasm_threaded_internal.wasm" in visit and "litert_wasm_internal.wasm" not in visit
    assert web.gzip_bytes(str(root / "web16"), visit) <= 15 * 2 ** 20
    [line] = manifest["agreement"]
    assert line.startswith("float16: ") and "detections scoring >= 0.5 on 16 generated images kept (same class, " \
                                              "IoU >= 0.5), mean IoU" in line
    console = " ".join((root / "web16.err").read_text().split())  # its lines wrapped within 100 columns
    assert f"[migrate] {line}" in console
    names = sorted(name for name in tf1 if name.endswith(".jpg"))
    info, ours, _ = _page_records(chromium, root, "", names, folder="web16")
    assert info["precision"] == web.FLOAT16
    with browser.serve(str(root)) as base:
        page, _ = browser.open_page(chromium, f"{base}web16/")
        try:
            assert line in page.locator("#fidelity").text_content()
        finally:
            page.close()

    def outputs(record):
        n, d = record["num_detections"], record["detections"]
        pad = 100 - n
        return {"num_detections": np.array([n], np.float32),
                "detection_boxes": np.array([[x["box"] for x in d] + [[0] * 4] * pad], np.float32),
                "detection_classes": np.array([[x["class_id"] for x in d] + [0] * pad], np.float32),
                "detection_scores": np.array([[x["score"] for x in d] + [0] * pad], np.float32)}
    joined = [{k: np.concatenate([side[name][k] for name in names]) for k in DETECTION_OUTPUTS}
              for side in (tf1, {name: outputs(ours[name]) for name in names})]
    agreement = drift.agreement(*joined)
    print(f"float16 page against the TF1 graph on {len(names)} photos: {agreement}")
    assert agreement["rate"] >= 0.99 and agreement["mean_iou"] >= 0.99 and agreement["max_score_diff"] < 0.06


@pytest.mark.slow
@needs_photos
def test_the_first_paint_shows_the_examples_detections_and_a_load_logs_no_error(zoo_web, chromium, references):
    """What a screenshot at the load event shows (`chromium --headless --screenshot`, a link
    preview): the example photo with the detections found at export time, drawn; then the page's
    own run replaces it with the same detections. Nothing of the load fails: no request (the
    browser's /favicon.ico, an unread HEAD response), no console error or warning."""
    from PIL import Image
    _, _, root = zoo_web
    records, _ = references
    manifest = json.loads((root / "web" / "model.json").read_text())
    exported = manifest["example"]["record"]
    plain = np.asarray(Image.open(root / "web" / manifest["example"]["photo"]).convert("RGB"), np.int16)
    drawn = np.asarray(Image.open(root / "web" / manifest["example"]["drawn"]).convert("RGB"), np.int16)
    # The export's detections are predict's on the photo (and so the TF1 graph's, test above).
    assert same_predict_lines({"p": dict(exported, image="p")}, {"p": records[os.path.basename(PHOTOS[0])]},
                              ATOL) == exported["num_detections"] > 0
    with browser.serve(str(root)) as base:
        page = chromium.new_page()
        page.set_viewport_size({"width": 1280, "height": 900})  # the photo at 1:1, whole
        failed, console = [], []
        page.on("requestfailed", lambda request: failed.append(f"{request.method} {request.url}: {request.failure}"))
        page.on("response", lambda response: response.status >= 400 and failed.append(
            f"{response.request.method} {response.url}: HTTP {response.status}"))
        page.on("console", lambda message: console.append((message.type, message.text)))
        try:
            page.goto(f"{base}web/", wait_until="load")
            box = page.evaluate("""() => {
                const img = document.querySelector('#example img');
                if (!img || !img.complete) return null;
                const r = img.getBoundingClientRect();
                return { x: r.x, y: r.y, width: img.naturalWidth, shown: r.width };
            }""")
            shot = page.screenshot()
            assert box is not None and box["width"] == plain.shape[1] == round(box["shown"]) - 2, box  # 1px border
            live = page.evaluate("() => window.exampleShown")
            assert page.locator("#example canvas").count() == 1 and page.locator("#example img").count() == 0
        finally:
            page.close()
    # Where the boxes and their strips are drawn, the screenshot is the drawn photo, not the photo.
    x, y = round(box["x"]) + 1, round(box["y"]) + 1
    screen = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"), np.int16)[y:y + plain.shape[0], x:x + plain.shape[1]]
    boxes = np.abs(drawn - plain).max(axis=-1) > 100
    to_drawn, to_plain = (np.abs(screen - drawn)[boxes].mean(), np.abs(screen - plain)[boxes].mean())
    assert boxes.mean() > 0.05 and to_drawn < 3 and to_plain > 60, (boxes.mean(), to_drawn, to_plain)
    # This browser's run of the example: the export's detections.
    assert same_predict_lines({"p": dict(live, image="p")}, {"p": dict(exported, image="p")}, ATOL) > 0
    assert failed == [] and [c for c in console if c[0] in ("error", "warning")] == [], (failed, console)


@pytest.mark.slow
@needs_photos
def test_bad_input_on_the_page_is_one_message_on_the_page(zoo_web, chromium):
    _, _, root = zoo_web
    with browser.serve(str(root)) as base:
        page, _ = browser.open_page(chromium, f"{base}web/")
        try:
            for name, expected in (("notes.txt", "notes.txt: not an image this page reads (JPEG, PNG, GIF, BMP or WebP)"),
                                   ("truncated.jpg", "truncated.jpg: cannot read image: the JPEG data is corrupt or "
                                                     "truncated"),
                                   # The photo's problem, not the page's.
                                   ("missing.jpg", "../photos/missing.jpg: not found (HTTP 404)")):
                error = page.evaluate("(url) => window.detect(url).then(() => null, (e) => e.message)",
                                      f"../photos/{name}")
                assert error is not None and expected in error and "export" not in error, error
                assert page.locator("#message").is_visible() and expected in page.locator("#message").text_content()
            # The page goes on: the next photo is detected and the message cleared.
            record = page.evaluate("(url) => window.detect(url)", f"../photos/{os.path.basename(PHOTOS[3])}")
            assert record["num_detections"] > 0 and not page.locator("#message").is_visible()
        finally:
            page.close()


@pytest.mark.slow
@needs_photos
@pytest.mark.parametrize("missing", ["model.tflite", "litert_wasm_threaded_internal.wasm", "app.js", "model.js",
                                     "model.json"])
def test_a_folder_missing_a_file_is_one_message_on_the_page(zoo_web, chromium, tmp_path, missing):
    _, _, root = zoo_web
    folder = tmp_path / "web"
    folder.mkdir()
    for name in os.listdir(root / "web"):
        if name != missing:
            os.link(root / "web" / name, folder / name)  # hard links: no copy of 60 MB
    with browser.serve(str(tmp_path)) as base:
        page = chromium.new_page()
        console = []
        page.on("console", lambda message: console.append(message.text))
        try:
            page.goto(f"{base}web/")
            page.wait_for_selector("#message:not([hidden])", timeout=30000)
            message = page.locator("#message").text_content()
            # The visitor reads what is wrong; the developer finds what to do in the console.
            assert message.startswith(missing) and "the page is incomplete" in message, message
            assert "export" not in message and "migrate" not in message, message
            assert page.locator("#status").text_content() == "The model could not be loaded."
            assert any("export it again" in line for line in console), console
            # The example drawn at export stays, no longer said to be running here.
            caption = page.locator("#example figcaption").text_content()
            assert "as found when this page was made" in caption and "running" not in caption, caption
        finally:
            page.close()


@pytest.mark.slow
@needs_photos
def test_a_page_opened_as_a_file_says_to_serve_it(zoo_web, chromium):
    """Opened as a file, the browser refuses the page's module scripts: the page says that it must
    be served, not that its folder is incomplete."""
    _, _, root = zoo_web
    page = chromium.new_page()
    try:
        page.goto((root / "web" / "index.html").as_uri())
        page.wait_for_selector("#message:not([hidden])", timeout=30000)
        message = page.locator("#message").text_content()
        assert message.startswith("This page runs only when served over HTTP") and "incomplete" not in message
    finally:
        page.close()


def test_the_runtime_is_the_lockfiles(tmp_path):
    """The runtime copied into the folder is the one migrate/export/web_page/package-lock.json pins (npm ci
    installed it)."""
    pinned = web.pinned_versions()
    assert pinned == {"@litertjs/core": "2.5.3", "@litertjs/wasm-utils": "2.5.3", "@cwasm/jpeg-turbo": "0.1.3"}
    assert {name: info["version"] for name, info in web.installed_runtime().items()} == pinned
    with open(os.path.join(web.WEB_DIR, "package.json"), encoding="utf-8") as f:
        # Exact versions, no ranges (LiteRT.js's helper comes with it, as the lockfile pins it).
        assert json.load(f)["dependencies"] == {k: v for k, v in pinned.items() if k != web.LITERT_UTILS}


@pytest.mark.parametrize("case", ["exists", "float32_int8", "float32_tflite", "nms", "float32", "labels_beyond",
                                  "bad_labels", "config_labels",
                                  "no_labels_file", "not_converted", "parent_is_file", "example_with_onnx",
                                  "no_example_file", "example_not_an_image"])
def test_export_web_bad_input_is_one_line_exit_2_and_nothing_written(small_model, tmp_path, case):
    converted, out = small_model().converted, tmp_path / "page"
    args = ["export", converted, "--web", str(out)]
    if case == "exists":
        out.mkdir()
        (out / "index.html").write_text("mine")
    extra, expected = {
        "exists": ([], f"{out}: exists (use --force to replace it)"),
        "float32_int8": (["--float32", "--int8"], "--float32: the page's file is float32 or --int8, not both"),
        "float32_tflite": (None, "--float32: for the --web page only"),
        "nms": (["--nms", "fast"], "--nms: not for --web"),
        "float32": (["--input", "float32"], "--input float32: not for --web"),
        # The COCO map on a 3-class model: the map of another model (`--labels coco` is taken, issue 51).
        "labels_beyond": (["--labels", "coco"], "coco: ids 4..90 beyond the model's 3 classes"),
        "bad_labels": (["--labels", str(tmp_path / "labels.pbtxt")], f"{tmp_path / 'labels.pbtxt'}:"),
        "config_labels": (["--labels", str(tmp_path / "pipeline.config")],
                          f"{tmp_path / 'pipeline.config'}: not a label map (top-level field 'model'"),
        "no_labels_file": (["--labels", str(tmp_path / "nothing.pbtxt")],
                           f"{tmp_path / 'nothing.pbtxt'}: no such file (--labels): the model's label map, or `coco`"),
        "not_converted": (None, f"{tmp_path}: not a converted model directory"),
        "parent_is_file": (None, "is a file, not a folder"),
        "example_with_onnx": (None, "--example: for the --web page only"),
        "no_example_file": (["--example", str(tmp_path / "nothing.jpg")], f"{tmp_path / 'nothing.jpg'}: no such file "
                                                                           "(--example)"),
        "example_not_an_image": (["--example", str(tmp_path / "notes.jpg")], f"{tmp_path / 'notes.jpg'}: cannot "
                                                                             "read image"),
    }[case]
    if case == "config_labels":
        (tmp_path / "pipeline.config").write_text("model {\n  ssd {\n    num_classes: 3\n  }\n}\n")
    elif case == "example_with_onnx":
        (tmp_path / "photo.jpg").write_bytes(b"")
        args = ["export", converted, "--onnx", str(tmp_path / "m.onnx"), "--example", str(tmp_path / "photo.jpg")]
    elif case == "float32_tflite":
        args = ["export", converted, "--tflite", str(tmp_path / "m.tflite"), "--float32"]
    elif case == "example_not_an_image":
        (tmp_path / "notes.jpg").write_text("not an image")
    elif case == "bad_labels":
        (tmp_path / "labels.pbtxt").write_text("item { id: 1 name: 'cat' ")  # unterminated
    elif case == "not_converted":
        args = ["export", str(tmp_path), "--web", str(out)]
    elif case == "parent_is_file":
        (tmp_path / "file").write_text("x")
        args = ["export", converted, "--web", str(tmp_path / "file" / "page")]
    before = sorted(os.listdir(tmp_path))
    code, stdout, err = run_cli(args + (extra or []))
    assert code == 2 and stdout == "", (code, stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no temporary folder left
    if case == "exists":
        assert os.listdir(out) == ["index.html"] and (out / "index.html").read_text() == "mine"


@pytest.mark.slow
def test_export_web_writes_the_folder_whole_and_replaces_it_with_force(small_model, tmp_path, monkeypatch):
    converted, out = small_model().converted, tmp_path / "page"
    code, stdout, err = run_cli(["export", converted, "--web", str(out), "--quiet"])
    # --quiet keeps the file's agreement, as it keeps an --int8 file's.
    assert code == 0 and err.startswith("[migrate] float16: ") and err.count("[migrate]") == 1, err
    files = sorted(os.listdir(out))
    assert files == sorted([*web.PAGE_FILES, "model.tflite", "labels.json", "model.json", "third_party.txt",
                            *(name for _, _, name in web.RUNTIME_FILES)])
    manifest = json.loads((out / "model.json").read_text())
    assert manifest["image_size"] == [128, 128] and manifest["num_classes"] == 3 and not manifest["has_labels"]
    assert all(os.path.getsize(out / name) == size for name, size in manifest["files"].items())
    assert json.loads((out / "labels.json").read_text()) == {}
    # Without --example the page's first paint names the model and its download, and holds no figure.
    page = (out / "index.html").read_text()
    model_mb = os.path.getsize(out / "model.tflite") / 1e6
    assert '<span id="model-name">(converted)</span>' in page and f"Loading the model ({model_mb:.1f} MB)" in page
    assert "<figure" not in page and "example" not in manifest
    # A failure half-way leaves the old folder as it was, and no temporary folder beside it.
    (out / "mine.txt").write_text("kept")

    def fail(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(web, "_licenses", fail)
    with pytest.raises(OSError):
        web.export_web(converted, str(out), force=True)
    assert (out / "mine.txt").read_text() == "kept" and sorted(os.listdir(tmp_path)) == ["page"]
    monkeypatch.undo()
    # --labels: the names the page shows (a names file here; a converted directory's own label map
    # is the default, `converted_dir.carried`, which the .onnx and .tflite files carry too).
    (tmp_path / "names.txt").write_text("circle\nsquare\ntriangle\n")
    assert run_cli(["export", converted, "--web", str(out), "--force", "--quiet", "--labels",
                    str(tmp_path / "names.txt")])[0] == 0
    assert not (out / "mine.txt").exists() and sorted(os.listdir(out)) == files
    assert json.loads((out / "labels.json").read_text()) == {"1": "circle", "2": "square", "3": "triangle"}
    assert json.loads((out / "model.json").read_text())["has_labels"]


@pytest.mark.slow
def test_export_web_int8_says_its_agreement_as_tflite_int8_does(small_model, tmp_path):
    """`--web --int8`: the page's file is `--tflite --int8`'s, and so is its agreement line, on the
    console (kept with --quiet) and under the page's photos; the result line says int8."""
    converted = small_model().converted
    code, stdout, err = run_cli(["export", converted, "--web", str(tmp_path / "page"), "--int8", "--quiet"])
    assert code == 0 and stdout.startswith("exported a web page: int8, "), (stdout, err)
    code, _, tflite_err = run_cli(["export", converted, "--tflite", str(tmp_path / "m.tflite"), "--int8", "--quiet"])
    assert code == 0
    said = [line for line in " ".join(err.split()).split("[migrate] ") if line.startswith("int8: ")]
    assert said and said == [line for line in " ".join(tflite_err.split()).split("[migrate] ")
                             if line.startswith("int8: ")]
    manifest = json.loads((tmp_path / "page" / "model.json").read_text())
    assert manifest["precision"] == web.INT8 and manifest["agreement"] == [line.strip() for line in said]
    from ssd_mobilenet.formats.tflite.file_format import operator_names
    assert operator_names((tmp_path / "page" / "model.tflite").read_bytes()) == \
        operator_names((tmp_path / "m.tflite").read_bytes())
    assert html.escape(said[0].strip()) in (tmp_path / "page" / "index.html").read_text()


def test_a_runtime_not_installed_is_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "web"
    folder.mkdir()
    shutil.copy(os.path.join(web.WEB_DIR, "package-lock.json"), folder)
    monkeypatch.setattr(web, "WEB_DIR", str(folder))
    monkeypatch.chdir(tmp_path)  # the folder as the console shows paths: relative to the working folder
    with pytest.raises(InputError, match=r"^--web: @litertjs/core is not installed: npm ci "
                                                          r"--ignore-scripts --prefix web$"):
        web.installed_runtime(str(folder))


@pytest.mark.slow
@needs_photos
def test_jpeg_decoding_of_the_page_is_tensorflows(zoo_web, chromium):
    """The page's JPEG decoder (libjpeg-turbo in WebAssembly, TensorFlow's settings) gives
    tf.io.decode_jpeg's pixels exactly; the browser's own decoder (a canvas) does not."""
    import tensorflow as tf
    _, _, root = zoo_web
    with browser.serve(str(root)) as base:
        page, _ = browser.open_page(chromium, f"{base}web/")
        try:
            for photo in PHOTOS:
                name = os.path.basename(photo)
                got = page.evaluate("""async (url) => {
                    const { JpegDecoder } = await import('./jpeg.js');
                    const decoder = await JpegDecoder.load('jpeg-turbo.wasm');
                    const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
                    const ours = decoder.decode(bytes);
                    const bitmap = await createImageBitmap(new Blob([bytes]));
                    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
                    const context = canvas.getContext('2d');
                    context.drawImage(bitmap, 0, 0);
                    const rgba = context.getImageData(0, 0, bitmap.width, bitmap.height).data;
                    const canvasRgb = new Uint8Array(ours.rgb.length);
                    for (let i = 0; i < canvasRgb.length; i++) canvasRgb[i] = rgba[4 * Math.floor(i / 3) + i % 3];
                    const b64 = (u8) => {
                        let text = '';
                        for (let i = 0; i < u8.length; i += 32768) text += String.fromCharCode(...u8.subarray(i, i + 32768));
                        return btoa(text);
                    };
                    return { rgb: b64(ours.rgb), canvas: b64(canvasRgb) };
                }""", f"../photos/{name}")
                expected = tf.io.decode_jpeg(open(photo, "rb").read(), channels=3).numpy()
                ours = np.frombuffer(base64.b64decode(got["rgb"]), np.uint8).reshape(expected.shape)
                canvas = np.frombuffer(base64.b64decode(got["canvas"]), np.uint8).reshape(expected.shape)
                np.testing.assert_array_equal(ours, expected, err_msg=name)
                print(f"{name}: the canvas's pixels differ from TensorFlow's by up to "
                      f"{np.abs(canvas.astype(int) - expected).max()} levels")
        finally:
            page.close()


def test_the_page_of_synthetic_weights_says_its_boxes_mean_nothing():
    """A model marked as synthetic weights (the default model, the shapes demo; model.json's
    `synthetic`) gets the notice written into index.html, so that it shows from the first paint;
    any other model's page has none."""
    with open(os.path.join(web.PAGE_DIR, "index.html"), encoding="utf-8") as f:
        template = f.read()
    manifest = {"precision": web.FLOAT32, "agreement": []}
    marked = web._page_html(template, dict(manifest, name="default_tf2", synthetic=True), 28_100_000, None)
    plain = web._page_html(template, dict(manifest, name="my_model_tf2", synthetic=False), 28_100_000, None)
    assert marked.count(web.SYNTHETIC_NOTE) == 1 and "synthetic" not in plain
    assert marked.index(web.SYNTHETIC_NOTE) < marked.index('<p id="message"')  # under the status line
