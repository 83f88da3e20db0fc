"""`python -m migrate predict` on a real converted model and a folder of mixed images."""

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import ssd_mobilenet
from tests.conftest import REPO, SHARED, ZOO_2018, model_for_fixture, needs_shared, warnings_in
from migrate.predict import prediction
from migrate.predict.runtimes.base import MAX_BATCH
from migrate.cli import main
from migrate.common import images
from ssd_mobilenet import label_map
from ssd_mobilenet import SSDConfig, detector, preprocessing
from ssd_mobilenet.config.ssd_config import RESIZE_METHODS
from ssd_mobilenet.errors import InputError

LABELS = """# a TF Object Detection API label map
item {
  name: "/m/01g317"
  id: 1
  display_name: "person"
}
item { id: 9 name: 'boat' }
item: { id: 40, name: "bottle", display_name: "Bottle" }
"""


@pytest.fixture(scope="module")
def converted(tmp_path_factory, zoo_fixture):
    """A converted model directory of the 2018 zoo graph (synthetic weights)."""
    model, _ = model_for_fixture(zoo_fixture(ZOO_2018))
    out = str(tmp_path_factory.mktemp("converted"))
    detector.save(model, out)
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """JPEG and PNG images of mixed sizes (one in a subfolder, one grayscale, one RGBA),
    a truncated JPEG and a text file."""
    root = tmp_path_factory.mktemp("images")
    (root / "sub").mkdir()
    rng = np.random.default_rng(5)

    def smooth(h, w, c=3):
        # Noise blurred a little, so JPEG keeps it close and the model sees structure.
        x = rng.integers(0, 256, (1, h, w, c)).astype(np.float32)
        return tf.cast(tf.nn.avg_pool2d(x, 3, 1, "SAME")[0], tf.uint8)

    files = {
        "a_300x300.png": tf.io.encode_png(smooth(300, 300)),
        "b_257x311.jpg": tf.io.encode_jpeg(smooth(257, 311), quality=90),
        "c_480x640.jpg": tf.io.encode_jpeg(smooth(480, 640), quality=90),
        # A file name that is not valid UTF-8 (byte 0xff), as Python's os functions spell it.
        os.fsdecode(b"d_gray_\xff_200x150.png"): tf.io.encode_png(smooth(200, 150, 1)),
        "e_rgba_90x120.png": tf.io.encode_png(smooth(90, 120, 4)),
        "sub/f_123x457.png": tf.io.encode_png(smooth(123, 457)),
        "sub/g_\u00fc_300x300.jpg": tf.io.encode_jpeg(smooth(300, 300), quality=90),
    }
    for name, data in files.items():
        (root / name).write_bytes(data.numpy())
    (root / "c_corrupt.jpg").write_bytes(files["c_480x640.jpg"].numpy()[:400])
    (root / "notes.txt").write_text("not an image")
    return str(root)


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@needs_shared
@pytest.mark.slow
def test_each_line_equals_the_detector_on_that_image_alone(converted, folder, tmp_path, capsys):
    labels = tmp_path / "label_map.pbtxt"
    labels.write_text(LABELS)
    out, pngs = str(tmp_path / "results.jsonl"), str(tmp_path / "drawn")
    # Batch 3 over 7 readable images: mixed sizes in one batch, a partial last batch.
    assert main(["predict", converted, folder, "--out", out, "--batch", "3", "--labels", str(labels),
                 "--png", pngs, "--quiet"]) == 0
    err = capsys.readouterr().err
    corrupt = os.path.join(folder, "c_corrupt.jpg")
    assert f"warning: {corrupt}: cannot read image" in err
    assert "[migrate]" not in err  # --quiet

    lines = _lines(out)
    assert [line["image"] for line in lines] == images.list_images([folder])
    names = label_map.read(str(labels))
    det = ssd_mobilenet.load(converted)
    checked = 0
    for line in lines:
        if line["image"] == corrupt:
            assert set(line) == {"image", "error"} and "jpeg" in line["error"].lower()
            continue
        image = images.read_image(line["image"])
        h, w = image.shape[:2]
        assert (line["height"], line["width"]) == (h, w)
        ref = {k: v.numpy()[0] for k, v in det(image).items()}
        k = int(ref["num_detections"])
        dets = line["detections"]
        assert line["num_detections"] == len(dets) == k > 0
        np.testing.assert_array_equal([d["class_id"] for d in dets], ref["detection_classes"][:k].astype(int))
        boxes = np.array([d["box"] for d in dets])
        np.testing.assert_allclose(boxes, ref["detection_boxes"][:k], rtol=0, atol=1e-6)
        np.testing.assert_allclose([d["score"] for d in dets], ref["detection_scores"][:k], rtol=0, atol=1e-6)
        np.testing.assert_allclose([d["box_pixels"] for d in dets], boxes * [h, w, h, w], rtol=0, atol=1e-3)
        assert [d["label"] for d in dets] == [names.get(d["class_id"]) for d in dets]
        # PNGs mirror the folder below the images' common folder.
        png = os.path.splitext(os.path.relpath(line["image"], folder))[0] + ".png"
        drawn = images.read_image(os.path.join(pngs, png))
        assert drawn.shape == image.shape and not np.array_equal(drawn, image)
        checked += 1
    assert checked == 7
    assert {"person", "Bottle", "boat"} & {d["label"] for line in lines for d in line.get("detections", [])}


@needs_shared
@pytest.mark.slow
def test_stdout_by_default_and_no_overwrite_without_force(converted, folder, tmp_path, capsys):
    two = [os.path.join(folder, "b_257x311.jpg"), os.path.join(folder, "sub", "f_123x457.png")]
    assert main(["predict", converted, *two, "--batch", "2"]) == 0
    captured = capsys.readouterr()
    printed = [json.loads(line) for line in captured.out.splitlines()]
    assert [line["image"] for line in printed] == two
    assert "2 images (0 unreadable)" in captured.err  # the summary goes to stderr, not into the JSON

    out = tmp_path / "results.jsonl"
    out.write_text("keep me\n")
    assert main(["predict", converted, *two, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {out}: exists (use --force to replace it)"
    assert out.read_text() == "keep me\n"
    # --force replaces it; --min-score leaves out the lower-scoring detections of the same run.
    threshold = float(np.median([d["score"] for d in printed[0]["detections"]]))
    assert main(["predict", converted, *two, "--out", str(out), "--force", "--batch", "2",
                 "--min-score", str(threshold)]) == 0
    expected = []
    for line in printed:
        kept = [d for d in line["detections"] if d["score"] >= threshold]
        expected.append({**line, "num_detections": len(kept), "detections": kept})
    assert _lines(out) == expected
    assert 0 < expected[0]["num_detections"] < printed[0]["num_detections"]
    assert sorted(os.listdir(tmp_path)) == ["results.jsonl"]  # no temporary file left behind
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o666 & ~_umask())
    # --force never replaces an input: the images' folder as --png, an image as --out, the model.
    before = sorted(os.listdir(folder))
    capsys.readouterr()
    for flag, target in (("--png", folder), ("--out", two[0]), ("--png", converted)):
        assert main(["predict", converted, *two, flag, target, "--force"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "an input" in err and flag in err, err
    assert sorted(os.listdir(folder)) == before and os.path.isfile(two[0])


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@needs_shared
@pytest.mark.slow  # two predicts on the zoo model, each built and traced: ~10 s
def test_a_label_map_short_of_the_models_classes_is_named_in_one_warning(converted, folder, tmp_path, capsys):
    """The issue's case: the 37-class pets label map on the 90-class zoo model. One warning names
    the ids it leaves without a name; their detections have "label": null, the others a name.
    The COCO label map the package ships names them all, without a warning."""
    pets = os.path.join(SHARED, "records", "pet_label_map.pbtxt")
    names, num_classes = label_map.read(pets), detector.load_model(converted).config.num_classes
    assert (max(names), num_classes) == (37, 90)
    image = os.path.join(folder, "c_480x640.jpg")
    lines, warned = {}, {}
    for labels in (pets, "coco"):
        out = tmp_path / f"{os.path.basename(labels)}.jsonl"
        assert main(["predict", converted, image, "--out", str(out), "--labels", labels, "--quiet"]) == 0
        lines[labels], warned[labels] = _lines(out)[0]["detections"], warnings_in(capsys.readouterr().err)
    assert warned == {pets: [f'warning: {pets}: no name for the model\'s class ids 38-90 ("label": null)'], "coco": []}
    unnamed = [d for d in lines[pets] if d["class_id"] > 37]
    assert unnamed and all(d["label"] is None for d in unnamed)
    assert all(d["label"] == names[d["class_id"]] for d in lines[pets] if d["class_id"] <= 37)
    coco = label_map.read("coco")
    assert [d["label"] for d in lines["coco"]] == [coco.get(d["class_id"]) for d in lines["coco"]]


class _Terminal(io.StringIO):
    """stdout as a person's terminal (`isatty`)."""

    def isatty(self):
        return True


@needs_shared
@pytest.mark.slow  # two predicts on the zoo model, each built and traced: ~10 s
def test_a_terminal_gets_a_line_per_image_and_a_pipe_the_json(converted, folder, tmp_path, monkeypatch):
    """Without --out, a terminal gets one summary line per image (the best detections that fit
    in 100 columns), a file or pipe the JSON lines; `--out -` asks for the JSON on a terminal."""
    monkeypatch.setenv("COLUMNS", "1000")  # a wide terminal: the lines' own 100 columns
    two = [os.path.join(folder, "b_257x311.jpg"), os.path.join(folder, "a_300x300.png")]
    shown = {}
    for out in ([], ["--out", "-"]):
        terminal, err = _Terminal(), io.StringIO()
        with contextlib.redirect_stdout(terminal), contextlib.redirect_stderr(err):
            assert main(["predict", converted, *two, "--labels", "coco", "--quiet", *out]) == 0
        shown[bool(out)] = terminal.getvalue().splitlines()
    json_lines = [json.loads(line) for line in shown[True]]
    assert [line["image"] for line in json_lines] == two
    assert shown[False] == [prediction.summary_line(line) for line in json_lines]
    for text, line in zip(shown[False], json_lines):
        assert text.startswith(f"{line['image']}  {line['height']}x{line['width']}  {line['num_detections']} detections")
        assert len(text) <= prediction.TERMINAL_COLUMNS


def test_summary_line_names_the_best_detections_that_fit():
    detections = [{"class_id": 18, "label": "dog", "score": 0.91}, {"class_id": 1, "label": "person", "score": 0.88},
                  {"class_id": 3, "score": 0.52}] + [{"class_id": 5, "label": "airplane", "score": 0.5}] * 20 + \
                 [{"class_id": 7, "label": "train", "score": 0.2}]
    line = {"image": "photos/a.jpg", "height": 480, "width": 640, "num_detections": len(detections),
            "detections": detections}
    text = prediction.summary_line(line)
    assert text.startswith("photos/a.jpg  480x640  24 detections: dog 0.91, person 0.88, id 3 0.52, airplane 0.50")
    shown = text.split(": ", 1)[1].split(", ")
    more = int(shown[-1].split()[0])  # "+N more": the ones scoring >= 0.5 that did not fit
    assert shown[-1] == f"+{more} more" and len(shown) - 1 + more == 23 and len(text) <= 100
    assert prediction.summary_line(dict(line, detections=detections[:2], num_detections=2)) == (
        "photos/a.jpg  480x640  2 detections: dog 0.91, person 0.88")
    assert prediction.summary_line({"image": "x.jpg", "error": "cannot read image"}) is None


@needs_shared
def test_all_images_unreadable_exits_1_with_the_errors_written(converted, folder, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    corrupt = os.path.join(folder, "c_corrupt.jpg")
    assert main(["predict", converted, corrupt, "--out", str(out), "--quiet"]) == 1
    assert [set(line) for line in _lines(out)] == [{"image", "error"}]
    assert f"warning: {corrupt}: " in capsys.readouterr().err


@pytest.mark.parametrize("case", ["converted", "no_model_config", "image", "empty_folder", "labels", "png_dir",
                                  "batch"])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, case):
    image = tmp_path / "img.png"
    image.write_bytes(tf.io.encode_png(np.zeros((8, 8, 3), np.uint8)).numpy())
    model_dir = tmp_path / "model"
    model_dir.mkdir()  # a folder, but no converted model in it
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.pbtxt").write_text("item { id: 1 name: 'a' }\nitem { id: 1 name: 'b' }\n")
    (tmp_path / "drawn").mkdir()
    (tmp_path / "drawn" / "old.png").write_bytes(b"")
    out = tmp_path / "r.jsonl"
    args, expected = {
        "converted": ([str(tmp_path / "nope"), str(image)], f"{tmp_path / 'nope'}: no such directory"),
        "no_model_config": ([str(model_dir), str(image)], "model_config.json: not found"),
        "image": ([str(model_dir), str(tmp_path / "missing.jpg")], f"{tmp_path / 'missing.jpg'}: no such file"),
        "empty_folder": ([str(model_dir), str(tmp_path / "empty")], f"{tmp_path / 'empty'}: no JPEG or PNG"),
        "labels": ([str(model_dir), str(image), "--labels", str(tmp_path / "bad.pbtxt")],
                   f"{tmp_path / 'bad.pbtxt'}: id 1 appears twice"),
        "png_dir": ([str(model_dir), str(image), "--png", str(tmp_path / "drawn")], f"{tmp_path / 'drawn'}: exists"),
        "batch": ([str(model_dir), str(image), "--batch", "0"], "--batch 0: must be"),
    }[case]
    before = sorted(os.listdir(tmp_path))
    assert main(["predict", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and err.count("\n") == 1, err
    assert sorted(os.listdir(tmp_path)) == before


def test_options_of_another_runtime_are_refused_before_any_runtime_loads(tmp_path):
    """Every runtime option (`migrate.commands.predict`) given for a model whose runtime does not
    take it (`migrate.predict.runtimes.KINDS`) is refused in one line, exit 2, before the command imports
    TensorFlow or a runtime: the lines for each runtime, with and without --engine beam."""
    from migrate.commands.predict import _RUNTIME_OPTIONS
    from migrate.predict.runtimes import KINDS, runtime_kind
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # present (what is in it is checked later)
    models = {"tensorflow": tmp_path / "converted", "litert": tmp_path / "m.tflite", "onnx": tmp_path / "m.onnx"}
    models["tensorflow"].mkdir()
    models["litert"].write_bytes(b"\0\0\0\0TFL3")
    models["onnx"].write_bytes(b"\x08\x07")
    assert {kind: runtime_kind(str(path)) for kind, path in models.items()} == KINDS
    values = {"--batch": "4", "--max-memory": "100", "--memory-limit": "100", "--trace": str(tmp_path / "trace"),
              "--precision": "mixed_bfloat16", "--threads": "2", "--runtime": "openvino"}
    cases = [[kind, flag] for kind in KINDS for flag, name in _RUNTIME_OPTIONS.items()
             if name not in KINDS[kind].options]
    assert {flag for _, flag in cases} == set(_RUNTIME_OPTIONS)  # each option belongs to some runtimes, not all
    argvs = [["predict", str(models[kind]), str(image), flag, *([values[flag]] if flag in values else [])]
             for kind, flag in cases]
    engine = ["--engine", "beam", "--out", str(tmp_path / "r.jsonl")]
    argvs += [["predict", str(models["tensorflow"]), str(image), "--threads", "2", *engine],
              ["predict", str(models["onnx"]), str(image), "--precision", "mixed_float16", *engine]]
    code = f"""
import contextlib, io, json, sys
from migrate.cli import main
results = []
for args in {argvs!r}:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        exit_code = main(args)
    results.append([exit_code, err.getvalue()])
modules = ("tensorflow", "onnxruntime", "migrate.predict.runtimes.litert", "migrate.predict.beam")
loaded = [m for m in modules if m in sys.modules]
print(json.dumps([results, loaded]))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results, loaded = json.loads(proc.stdout)
    assert loaded == []
    for args, (exit_code, err) in zip(argvs, results):
        assert exit_code == 2 and err.count("\n") == 1 and err.startswith(f"error: {args[3]}"), (args, err)
    lines = {tuple(args[1:4]): err.strip() for args, (_, err) in zip(argvs[:-2], results[:-2])}  # without --engine
    converted, tflite, onnx = (str(models[kind]) for kind in ("tensorflow", "litert", "onnx"))
    # The option and the runtime that runs MODEL are named (MODEL is on the command line).
    assert lines[converted, str(image), "--threads"] == (
        "error: --threads: for .tflite and .onnx files; TensorFlow takes its threads from the environment")
    assert lines[tflite, str(image), "--jit"] == (
        "error: --jit: sets up TensorFlow; a .tflite file runs on LiteRT, one image per call")
    assert lines[onnx, str(image), "--precision"] == (
        "error: --precision: sets up TensorFlow; an .onnx file runs on ONNX Runtime, one image per call")
    assert lines[tflite, str(image), "--runtime"] == "error: --runtime: for .onnx files; a .tflite file runs on LiteRT"
    assert results[-2][1] == "error: --threads: for .tflite and .onnx files; the local runner shares the cores among its workers\n"
    assert results[-1][1] == "error: --precision: sets up TensorFlow; an .onnx file runs on ONNX Runtime\n"


def test_each_runtime_kind_names_its_class_and_its_options_are_the_class_keywords():
    """`migrate.predict.runtimes.KINDS` describes its classes without importing them: the same name, and
    options that are keywords of the class's constructor."""
    import importlib
    import inspect
    from migrate.predict.runtimes import KINDS
    for kind in KINDS.values():
        module, name = kind.runtime.split(":")
        runtime_class = getattr(importlib.import_module(module), name)
        assert runtime_class.name == kind.name
        assert set(kind.options) <= set(inspect.signature(runtime_class).parameters), kind


@pytest.mark.parametrize("method", RESIZE_METHODS)
@pytest.mark.parametrize("size", [(300, 300), (257, 311)])
def test_resizing_in_the_pipeline_leaves_the_models_resize_an_identity(method, size):
    # The pipeline resizes with the model's own kernel; the model then resizes an image
    # already at its input size, which must change nothing, for every resize method.
    config = SSDConfig(num_classes=2, image_height=size[0], image_width=size[1], resize_method=method)
    rng = np.random.default_rng(0)
    for shape in [(1, 480, 640, 3), (1, 123, 457, 3), (1, *size, 3)]:
        once = preprocessing.resize(tf.constant(rng.integers(0, 256, shape).astype(np.uint8)), config)
        assert once.shape == (1, *size, 3) and once.dtype == tf.float32
        np.testing.assert_array_equal(preprocessing.resize(once, config).numpy(), once.numpy())


def test_label_maps(tmp_path):
    pbtxt = tmp_path / "label_map.pbtxt"
    pbtxt.write_text(LABELS)
    assert label_map.read(str(pbtxt)) == {1: "person", 9: "boat", 40: "Bottle"}
    names = tmp_path / "names.txt"
    names.write_text("person\nbicycle\n\ncar\n")
    assert label_map.read(str(names)) == {1: "person", 2: "bicycle", 4: "car"}
    for text, problem in [("item { id: 1 name: 'a' ", 'expected "}"'),
                          ("item { id: x name: 'a' }", "item 1 has no integer id (got 'x')"),
                          ("item { id: 2 }", "item 1 (id 2) has no quoted name"),
                          ("item { id: 1 name: 'a' }\nother { }", "not a label map (top-level field 'other'"),
                          ("\n\n", "no class names")]:
        bad = tmp_path / "bad.pbtxt"
        bad.write_text(text)
        with pytest.raises(InputError, match=f"^{re.escape(str(bad))}: .*{re.escape(problem)}"):
            label_map.read(str(bad))
    with pytest.raises(InputError, match=f"{tmp_path / 'missing'}: cannot read label map"):
        label_map.read(str(tmp_path / "missing"))


def _iou(a, b):
    """IoU of [ymin, xmin, ymax, xmax] box a [4] with boxes b [K, 4]."""
    top_left, bottom_right = np.maximum(a[:2], b[:, :2]), np.minimum(a[2:], b[:, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=1)
    area = lambda x: (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


@needs_shared
@pytest.mark.slow
def test_precision_flag_reaches_the_model(converted, folder, tmp_path):
    two = [os.path.join(folder, "b_257x311.jpg"), os.path.join(folder, "a_300x300.png")]
    runs = {}
    for precision in ("float32", "mixed_bfloat16"):
        out = tmp_path / f"{precision}.jsonl"
        assert main(["predict", converted, *two, "--out", str(out), "--precision", precision, "--quiet"]) == 0
        runs[precision] = _lines(out)
    for low, exact in zip(runs["mixed_bfloat16"], runs["float32"]):
        low_scores = np.array([d["score"] for d in low["detections"]])
        exact_scores = np.array([d["score"] for d in exact["detections"]])
        assert not np.array_equal(low_scores, exact_scores)  # bfloat16 arithmetic did run
        # ... and finds the same objects: each of the top 10 has a same-class float32 match.
        exact_boxes = np.array([d["box"] for d in exact["detections"]])
        exact_classes = np.array([d["class_id"] for d in exact["detections"]])
        for d in low["detections"][:10]:
            same_class = exact_classes == d["class_id"]
            assert _iou(np.array(d["box"]), exact_boxes[same_class]).max() > 0.5


@needs_shared
@pytest.mark.slow  # a traced predict of three images under the profiler: ~7 s
def test_trace_writes_a_profiler_trace(converted, folder, tmp_path):
    three = images.list_images([folder])[:3]
    trace = tmp_path / "trace"
    assert main(["predict", converted, *three, "--batch", "1", "--trace", str(trace), "--out",
                 str(tmp_path / "r.jsonl"), "--quiet"]) == 0
    assert len(_lines(tmp_path / "r.jsonl")) == 3
    assert list(trace.glob("plugins/profile/*/*.xplane.pb"))


@needs_shared
def test_memory_settings_after_tensorflow_started_exit_2(converted, folder, capsys):
    tf.constant(0)  # TensorFlow's devices exist in this process now
    assert main(["predict", converted, folder, "--memory-limit", "512"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "already initialised" in err and err.count("\n") == 1


@needs_shared
@pytest.mark.slow
def test_max_memory_picks_the_batch_in_a_fresh_process(small_model, folder, tmp_path):
    # Allocator peaks on a CPU need the BFC allocator, chosen before TensorFlow starts:
    # a fresh process, as a user runs it. The small model (conftest's small_model("two_classes"): depth 0.25,
    # 128x128; the search picked batch 2 under 4 MiB, 13 under 8 MiB on a 2-core x86 CPU): each
    # batch the search measures costs a fraction of the zoo model's, the search is the same.
    two = [os.path.join(folder, "b_257x311.jpg"), os.path.join(folder, "a_300x300.png")]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, "-m", "migrate", "predict", small_model("two_classes").converted, *two]
    proc = subprocess.run(cmd + ["--max-memory", "5", "--out", str(tmp_path / "r.jsonl")],
                          capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    batch = int(re.search(r"batch size (\d+): the largest whose measured peak stays under 5 MiB", proc.stderr)[1])
    assert 1 <= batch <= MAX_BATCH
    assert [line["image"] for line in _lines(tmp_path / "r.jsonl")] == two
    proc = subprocess.run(cmd + ["--max-memory", "1", "--out", str(tmp_path / "small.jsonl")],
                          capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == ("error: --max-memory 1: one image at 128x128 already peaks "
                                                    "above 1 MiB (weights included)")
    assert not (tmp_path / "small.jsonl").exists()


def test_png_names_mirror_the_common_folder_and_never_clash(tmp_path):
    paths = [str(tmp_path / "a" / "x.jpg"), str(tmp_path / "a" / "x.png"), str(tmp_path / "b" / "c" / "y.jpeg")]
    assert prediction.png_names(paths) == {paths[0]: os.path.join("a", "x.jpg.png"),
                                           paths[1]: os.path.join("a", "x.png.png"),
                                           paths[2]: os.path.join("b", "c", "y.png")}


@pytest.mark.slow  # an .onnx and a .tflite export of the small model, and a predict on each: ~15 s
def test_an_exported_file_carries_the_label_map_and_the_mark_of_synthetic_weights(small_model, tmp_path,
                                                                                     capsys):
    """The label map a converted directory carries goes into the .onnx and .tflite files' metadata
    (`--labels` in its place for the .tflite here), and so does its mark of synthetic weights:
    predict on the file, on a device without the directory, labels without --labels and says once
    that the boxes mean nothing."""
    import shutil
    from PIL import Image
    from ssd_mobilenet import converted_dir
    model = str(tmp_path / "converted")
    shutil.copytree(small_model().converted, model)
    (tmp_path / "converted" / "label_map.pbtxt").write_text("item { id: 1 name: 'a' }\nitem { id: 2 name: 'b' }\n"
                                                           "item { id: 3 name: 'c' display_name: 'C' }\n")
    converted_dir.mark_synthetic(model)
    names = tmp_path / "names.txt"
    names.write_text("one\ntwo\nthree\n")
    photo = str(tmp_path / "photo.png")
    Image.fromarray(np.random.default_rng(2).integers(0, 256, (100, 90, 3), dtype=np.uint8)).save(photo)
    files = {str(tmp_path / "model.onnx"): {"a", "b", "C"}, str(tmp_path / "model.tflite"): {"one", "two", "three"}}
    assert main(["export", model, "--onnx", str(tmp_path / "model.onnx"), "--quiet"]) == 0
    assert main(["export", model, "--tflite", str(tmp_path / "model.tflite"), "--labels", str(names), "--quiet"]) == 0
    capsys.readouterr()
    for path, expected in files.items():
        out = str(tmp_path / f"{os.path.basename(path)}.jsonl")
        assert main(["predict", path, photo, "--out", out, "--min-score", "0.01"]) == 0
        with open(out) as f:
            labels = {d["label"] for d in json.loads(f.readline())["detections"]}
        assert labels and labels <= expected, path
        assert capsys.readouterr().err.count("[migrate] note: synthetic weights") == 1
