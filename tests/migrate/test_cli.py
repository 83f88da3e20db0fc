"""The command line as a whole: `--version`, and every line every command prints within 100
columns (docs/guides/contributing.md), whatever the terminal's width.

The widths are held twice: the line formatters at their widest (long stage names, many digits,
every report variant; fast), and every command run, its output read line by line (slow): here
each form of verify, export, predict and bench in this process on a small model; `shapes`,
`convert`, `evaluate` and `train` as the guides run them (tests/docs/test_docs_commands.py, the training
demo and the zoo model); a measured verify's figures in a fresh process
(tests/migrate/common/test_console.py). The terminal is set 1000 columns wide for all, so that no wrapping
to the terminal hides a long line: only the notes the commands wrap on purpose (`common.wrapped`,
at most 100 columns) are wrapped.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO
from migrate import cli
from migrate.commands import common

WIDTH = common.COLUMNS


@pytest.fixture
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")


def _too_long(text: str) -> list:
    return [line for line in text.splitlines() if len(line) > WIDTH]


# ---- --version ------------------------------------------------------------------------------------

def test_version_names_the_package_python_and_the_runtimes_without_importing_tensorflow():
    import importlib.metadata
    import platform

    import migrate
    import ssd_mobilenet
    code = textwrap.dedent("""
        import contextlib, io, json, sys
        from migrate.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                main(["--version"])
            except SystemExit as e:
                code = e.code
        print(json.dumps([code, out.getvalue(), "tensorflow" in sys.modules]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr[-3000:]
    exit_code, printed, tensorflow_imported = json.loads(proc.stdout)
    assert migrate.__version__ == ssd_mobilenet.__version__
    # The distributions that hold the modules, as pip sees them (tensorflow-cpu here, say).
    owners = importlib.metadata.packages_distributions()
    versions = [f"{name} {importlib.metadata.version(owners[module][0])}"
                for module, name in cli.RUNTIME_MODULES if module in owners]
    assert (exit_code, tensorflow_imported) == (0, False)
    assert printed == (f"ssd-mobilenet-migrate {migrate.__version__} (Python {platform.python_version()}; "
                       f"{', '.join(versions)})\n")
    assert len(printed) <= WIDTH and versions[0].startswith("TensorFlow ")


def test_version_says_where_tensorflow_is_not_installed(monkeypatch, capsys):
    # A LiteRT-only or ONNX-only install (`pip install 'ssd-mobilenet-migrate[litert]'`).
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else
                        find_spec(name, *a))
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    assert printed.endswith("; no TensorFlow)\n") and "TensorFlow " not in printed and "LiteRT " in printed


# ---- --help and argparse's own errors -----------------------------------------------------------

def test_help_says_what_the_tool_does(wide_terminal, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m migrate [-h] [--version] COMMAND ...\n\nConvert a TF1 Object Detection")
    assert "main(argv)" not in out and "`python -m migrate COMMAND --help` shows a command's arguments." in out


# A misspelt option, choice or command: (command line, the error line; troubleshooting.md shows the first
# form of each).
MISSPELT = [
    ("convert SRC --ouput x", "python -m migrate convert: error: unrecognized arguments: --ouput x (did you mean --out?)"),
    ("convert SRC --ouput=x", "python -m migrate convert: error: unrecognized arguments: --ouput=x (did you mean --out?)"),
    ("predict M I --precision floa32",
     "python -m migrate predict: error: --precision floa32: no such choice (did you mean float32?)"),
    ("predict M I --precision half", "python -m migrate predict: error: --precision half: no such choice (the usage "
                                     "line lists them)"),
    ("conver SRC", "python -m migrate: error: conver: no such command (did you mean convert?)"),
    ("frobnicate", "python -m migrate: error: frobnicate: no such command (python -m migrate --help lists them)"),
]


@pytest.mark.parametrize("command, line", MISSPELT, ids=[c for c, _ in MISSPELT])
def test_a_misspelt_word_is_the_commands_error_naming_the_closest(wide_terminal, capsys, command, line):
    with pytest.raises(SystemExit) as exited:
        cli.main(command.split())
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("usage: ")
    assert err.splitlines()[-1] == line and len(line) <= WIDTH


# ---- the line formatters at their widest (fast) ------------------------------------------------

def test_help_fits_whatever_the_terminal(wide_terminal, capsys):
    for argv in ([], *([name] for name in cli.COMMANDS)):
        with pytest.raises(SystemExit):
            cli.main([*argv, "--help"])
        out = capsys.readouterr().out
        assert out and not _too_long(out), argv


def test_notes_wrap_at_100_columns_on_a_wide_terminal(wide_terminal):
    note = "[migrate] from the graph: 22 fields, 9 other than the zoo defaults: " + ", ".join(
        f"field_number_{i}=value_{i}" for i in range(9))
    text = common.wrapped(note)
    assert not _too_long(text) and len(text.splitlines()) > 1
    assert text.replace("\n    ", " ") == note


def test_verify_report_lines_fit(wide_terminal):
    from migrate.verify.report import VerifyReport, format_report
    stage = "FeatureExtractor/MobilenetV1/Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512"  # the longest of depth 1
    tensors = [{"name": stage, "tf1_tensor": stage + ":0", "max_abs_err": 2.384e-06, "max_rel_err": 1.3e-07,
                "allowed": 1.6e-05, "ok": False}]
    latency = {f"batch_{b}": {"median": 12345.6, "p90": 23456.7} for b in (1, 64)}
    side = {"measured": True, "device": "CPU (ONNX Runtime)", "peak_memory_bytes": 123456 * 2**20,
            "transient_peak_bytes": 12345 * 2**20, "peak_rss_bytes": 123456 * 2**20, "latency_ms": latency}
    detections = [{"image": f"photos/im{i}.jpg", "num_tf1": 100, "ok": True, "ties_swapped": 3, "matched": 100,
                   "nms_flips": 2, "note": ""} for i in range(64)]
    postprocessing = {"detections": [{"ok": True, "num_tf1": 100}] * 12}
    divergence = {"name": stage, "max_abs_err": 1.234e-2, "max_rel_err": 3.21e-3,
                  "note": "photos/a_rather_long_image_name_0001.jpg: 98 of 100 detections, classes differ at 3 "
                          "and 7, boxes by up to 0.0123, scores by up to 0.0456 (first at detection 3)"}
    kind = ("uint8 input of any size, resized to 1024x1024 inside, int8 QDQ (quantization-aware), 90 classes, "
            "100 detections")
    criteria = [{"criterion": "exact"}, {"criterion": "mixed_precision", "score_margin": 0.05},
                {"criterion": "agreement", "min_rate": 0.9, "min_score": 0.5, "match_iou": 0.5}]
    for criterion in criteria:
        report = VerifyReport(
            passed=False, first_divergence=divergence, tensors=tensors, detections=detections, tf1=side, tf2=side,
            tolerances={"atol": 5e-4, "rtol": 5e-2, **criterion}, versions={},
            images=[d["image"] for d in detections], skipped=["photos/broken.jpg"] * 12,
            src="models/ssd_mobilenet_v1_coco_2018_01_28", converted="models/ssd_mobilenet_v1_coco_2018_01_28_tf2",
            mode="onnx", precision="mixed_bfloat16", postprocessing=postprocessing,
            tflite={"file": "models/ssd_mobilenet_v1_coco_2018_01_28.onnx", "kind": kind, "threads": 64,
                    "runtime": "onnx",
                    "agreement": {"matched": 6399, "reference": 6400, "rate": 0.99984, "mean_iou": 0.98765}})
        text = format_report(report)
        assert not _too_long(text), criterion
        lines = text.splitlines()
        after = lines.index(next(line for line in lines if line.startswith("tensors"))) + 1
        # The largest error's line, wrapped: the stage whole on a line of its own when it is long.
        assert lines[after].startswith(" " * 13 + "largest error 2.38e-06 at") and lines[after + 1].strip() == stage
        assert "(allowed there 1.6e-05)" in lines[after + 2]


def test_bench_tables_fit(wide_terminal):
    from migrate.bench.tables import format_table
    rows = []
    for side in ("tf1_session", "detector_variables", "tf1_wrap_function", "tflite_int8", "onnx_int8"):
        for size, batch in (((1024, 1024), 64), ((480, 640), 8)):
            rows.append({"side": side, "onednn": "default", "size": list(size), "batch": batch,
                         "latency_ms": {"median": 12345.6, "p90": 23456.7}, "images_per_s": 1234.5,
                         "latency_ratio": 10.0, "latency_ratio_ci95": [9.99, 10.01], "file_bytes": 123.4 * 2**20,
                         "alloc_transient_bytes": 1234.5 * 2**20, "peak_rss_bytes": 12345.6 * 2**20,
                         "ready_s": 12.3, "rss_bytes": 12345.6 * 2**20, "alloc_ratio": 10.0, "rss_ratio": 10.0,
                         "steady_rss_ratio": 10.0, "mac_per_s": 1234.5e9, "peak_share": 0.987})
    report = {"rows": rows, "onednn_on": {"default": True}}
    text = format_table(report)
    assert not _too_long(text)
    latency, memory = text.split("\n\n")
    assert len(latency.splitlines()) == len(memory.splitlines()) == len(rows) + 1
    # The Markdown table (docs/benchmarks.md) keeps every column in one row, the share of this
    # machine's peak among them.
    markdown = format_table(report, markdown=True).splitlines()
    assert len(markdown[0].split("|")) == 19 and "| 1234.5 (99% int8) |" in markdown[-1]


def test_train_step_lines_fit():
    from migrate.train import losses_line, step_line
    from ssd_mobilenet.training.trainer import REGULARIZATION_LOSS, TOTAL_LOSS
    from ssd_mobilenet.training.ssd_loss import CLASSIFICATION_LOSS, LOCALIZATION_LOSS
    losses = {LOCALIZATION_LOSS: 1234.5678, CLASSIFICATION_LOSS: 12345.6789, REGULARIZATION_LOSS: 123.4567,
              TOTAL_LOSS: 13703.7034}
    lines = [losses_line(losses), step_line(250000, 250000, losses, 12345.6)]
    assert lines == ["loss = localization + classification + regularization",
                     "step 250000/250000: loss 13703.7034 = 1234.5678 + 12345.6789 + 123.4567, 12345.6 images/s"]
    assert all(len(f"[migrate] {line}") <= WIDTH for line in lines)


# ---- every command, run (slow) ----------------------------------------------------------------------

# Every form of verify, export, predict and bench on a small model (`small_model("two_classes")`: 2
# classes, depth 0.25, 128x128) with its images and label map beside it, with relative paths as a user in that folder
# types them. The commands the guides show run there and are held to the same width
# (tests/docs/test_docs_commands.py's runs: `shapes demo` and `--model ppn`, `convert`, `evaluate` and
# `train --eval --labels` of the training demo; `convert`, `verify`, `export`, `predict` and
# `evaluate` of the zoo model); a measured verify's memory and latency lines are
# tests/migrate/common/test_console.py's (a fresh process, held to the same width); bench's tables at their
# widest are `test_bench_tables_fit`'s.
COMMANDS = [
    "verify demo/tf1_model demo/converted --no-measure --json verify.json",
    "export demo/converted --tflite m.tflite",
    "export demo/converted --onnx m.onnx",
    "verify demo/tf1_model demo/converted --tflite m.tflite --no-measure",
    "verify demo/tf1_model demo/converted --onnx m.onnx --no-measure --images demo/images broken.jpg",
    "predict demo/converted demo/images broken.jpg --out p.jsonl --labels demo/label_map.pbtxt --png drawn",
    "predict m.tflite demo/images --out p.jsonl --force --labels demo/label_map.pbtxt",
    "predict m.onnx demo/images --out p.jsonl --force",
    "predict m.onnx demo/images --labels demo/label_map.pbtxt --terminal",
    "bench demo/tf1_model demo/converted --batch 1 --size 128x128 --repeats 1 --warmup 0 --sides tf1_session,tflite "
    "--no-memory",
    "verify demo/converted demo/tf1_model",
    "--version",
]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(scope="module")
def every_command(small_model, tmp_path_factory):
    """{command line: (exit code, stdout, stderr)} of `COMMANDS`, in-process (`migrate.cli.main`)
    in a folder of their own, the terminal 1000 columns wide; `--terminal`: stdout is a terminal.
    demo/: the small pair (links: nothing writes there), four JPEGs of smoothed noise, a label map
    of its two classes; broken.jpg: a JPEG header and nothing else."""
    import numpy as np
    from PIL import Image

    from tests.conftest import smooth_noise
    folder = tmp_path_factory.mktemp("every_command")
    (folder / "demo" / "images").mkdir(parents=True)
    os.symlink(small_model("two_classes").tf1, folder / "demo" / "tf1_model")
    os.symlink(small_model("two_classes").converted, folder / "demo" / "converted")
    rng = np.random.default_rng(5)
    for i, (h, w) in enumerate([(128, 128), (96, 160), (200, 150), (128, 128)]):
        Image.fromarray(smooth_noise(rng, h, w)).save(folder / "demo" / "images" / f"shape_{i}.jpg", quality=90)
    (folder / "demo" / "label_map.pbtxt").write_text("item { id: 1 name: 'circle' }\nitem { id: 2 name: 'square' }\n")
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("COLUMNS", "1000")
        for command in COMMANDS:
            argv = [arg for arg in command.split() if arg != "--terminal"]
            out, err = _Terminal() if "--terminal" in command else io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(argv)
                except SystemExit as e:
                    code = e.code
            results[command] = (code, out.getvalue(), err.getvalue())
    return results


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_line_of_every_command_fits_in_100_columns(every_command, command):
    code, out, err = every_command[command]
    expected = 2 if command.startswith("verify demo/converted") else 0  # the swapped arguments: one error line
    assert code == expected, err[-3000:]
    assert out or err
    assert not _too_long(out) and not _too_long(err), [line for line in (out + err).splitlines()
                                                       if len(line) > WIDTH]


# ---- bad input: one line within 100 columns, exit code 2, no traceback (fast) ------------------------

# Each command given bad input, in a folder whose paths are ~30 characters long as a user's are
# (`models/ssd_mobilenet_small_tf2`): (command line, words its error line holds). The files are
# `bad_inputs`'s; MISSING does not exist.
TF1, TF2 = "models/ssd_mobilenet_small_tf1", "models/ssd_mobilenet_small_tf2"
MISSING = "models/ssd_mobilenet_v1_nope"
BAD_INPUTS = [
    (f"convert {MISSING}", f"{MISSING}: "),
    (f"convert {TF1} --out {TF1}", "holds the source"),
    (f"convert {TF1} --out {TF1}/pipeline.config", "is a file"),
    ("convert models/not_a_model_file.txt", "not a checkpoint, .pb graph or pipeline.config"),
    ("convert models/typo_tf1 --out out/converted", "iou_treshold"),
    (f"verify {TF2} {TF1}", "SRC comes first"),
    (f"verify {TF1} {MISSING}", f"{MISSING}: "),
    (f"verify {TF1} {TF2} --threads 2", "--threads 2"),
    (f"verify {TF1} {TF2} --memory-growth --memory-limit 512", "choose one"),
    (f"verify {TF1} {TF2} --tflite models/not_a_model_file.tflite", "not_a_model_file.tflite"),
    (f"verify {TF1} {TF2} --onnx models/not_a_model_file.onnx", "not_a_model_file.onnx"),
    (f"predict {TF2} images/a_photo.png --threads 2", "--threads"),
    (f"predict {TF2} images/a_photo.png --labels labels/label_map_with_extra.pbtxt", "top-level field"),
    (f"predict {TF2} images/a_photo.png --labels labels/label_map_same_ids.pbtxt", "id 1 appears twice"),
    ("predict models/not_a_model_file.tflite images/a_photo.png", "not_a_model_file.tflite"),
    ("predict models/not_a_model_file.onnx images/a_photo.png", "not_a_model_file.onnx"),
    ("predict models/ssd_mobilenet_broken_tf2 images/a_photo.png", "broken_tf2: unreadable checkpoint/"),
    (f"predict {TF2} images/a_photo.png --engine beam --out out/p.jsonl --workers 2 "
     "--pipeline-options --runner=FlinkRunner",
     "--workers"),
    (f"export {TF2} --tflite out/model.tflite --int8 --calibration {MISSING}", f"{MISSING}: "),
    (f"export {TF2} --onnx out/model.onnx --nms fast", "--nms"),
    (f"export {TF2} --tflite {TF1}/pipeline.config", "exists"),
    (f"evaluate {TF2} --records records/missing_eval.record --labels coco", "missing_eval.record"),
    (f"evaluate {TF2} --records records/not_a_record.record --labels coco", "not_a_record.record"),
    (f"train {TF2} --train records/not_a_record.record", "no training settings"),
    (f"train {TF2} --config configs/misspelt_pipeline.config --train records/not_a_record.record",
     "iou_treshold"),
    (f"train {TF2} --config {TF1}/pipeline.config --train records/not_a_record.record --accumulate 0",
     "--accumulate 0"),
    (f"bench {MISSING} {TF2}", f"{MISSING}: "),
    (f"bench {TF1} {TF2} --sides tf1_session,tflite --batch 8 --size 128x128", "--batch"),
    (f"bench {TF1} {TF2} --batch 1 --plot out/latency.png", "--batch"),
    (f"bench {TF1} {TF2} --sides tf1_session,tflit", "did you mean tflite?"),
]


@pytest.fixture(scope="session")
def bad_inputs(small_model, tmp_path_factory):
    """The folder of `BAD_INPUTS`: the small model (2 classes, 128x128, depth 0.25) as a TF1
    directory and as a converted one (copies of conftest's `small_model("two_classes")`: no `convert` run), one
    whose checkpoint lost its data, a pipeline.config with a misspelt field, files that are not
    what their names say, an image."""
    import pathlib
    import shutil

    from PIL import Image

    from tests.conftest import built_once

    def build(folder):
        root = pathlib.Path(folder)
        (root / "models").mkdir()
        shutil.copytree(small_model("two_classes").tf1, root / TF1)
        shutil.copytree(small_model("two_classes").converted, root / TF2)
        shutil.copytree(root / TF2, root / "models/ssd_mobilenet_broken_tf2")
        for data in (root / "models/ssd_mobilenet_broken_tf2/checkpoint").glob("*.data-*"):
            data.write_bytes(data.read_bytes()[:100])
        (root / "models/not_a_model_file.txt").write_text("not a model\n")
        misspelt = root / "models/typo_tf1"
        shutil.copytree(root / TF1, misspelt)
        text = (misspelt / "pipeline.config").read_text()
        assert "iou_threshold" in text
        (misspelt / "pipeline.config").write_text(text.replace("iou_threshold", "iou_treshold", 1))
        (root / "configs").mkdir()
        shutil.copy(misspelt / "pipeline.config", root / "configs/misspelt_pipeline.config")
        for name in ("not_a_model_file.tflite", "not_a_model_file.onnx"):
            (root / "models" / name).write_bytes(bytes(range(256)) * 4)
        (root / "labels").mkdir()
        (root / "labels/label_map_with_extra.pbtxt").write_text("item { id: 1 name: 'a' }\nversion: 2\n")
        (root / "labels/label_map_same_ids.pbtxt").write_text("item { id: 1 name: 'a' }\nitem { id: 1 name: 'b' }\n")
        (root / "records").mkdir()
        (root / "records/not_a_record.record").write_bytes(b"not a TFRecord file\n" * 8)
        (root / "images").mkdir()
        Image.new("RGB", (64, 48), (120, 80, 40)).save(root / "images/a_photo.png")
        (root / "out").mkdir()

    return built_once(tmp_path_factory, "bad_inputs", build)


def _run_in(folder, argv) -> tuple:
    """(exit code, stdout, stderr) of `migrate.cli.main(argv)` run in `folder`, the terminal 1000
    columns wide (no wrapping to the terminal hides a long line); an exception escaping `main` is
    the traceback the console would show."""
    import traceback
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("COLUMNS", "1000")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as e:
                code = e.code
            except Exception:  # noqa: BLE001 - what the console would show
                code = "traceback"
                traceback.print_exc(file=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command, words", BAD_INPUTS, ids=[c for c, _ in BAD_INPUTS])
def test_bad_input_is_one_line_within_100_columns(bad_inputs, command, words):
    before = sorted(str(p) for p in __import__("pathlib").Path(bad_inputs).rglob("*"))
    code, out, err = _run_in(bad_inputs, command.split())
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and "Traceback" not in err and len(errors) == 1, (code, err[-3000:])
    assert words in errors[0], errors[0]
    assert not _too_long(out) and not _too_long(err), [line for line in (out + err).splitlines()
                                                       if len(line) > WIDTH]
    assert sorted(str(p) for p in __import__("pathlib").Path(bad_inputs).rglob("*")) == before  # nothing written


# ---- every message template at its widest path (fast, no command run) ---------------------------

# Modules whose long messages are printed wrapped within 100 columns (`common.print_wrapped`), not
# as one line: the conversion check's failure names the first diverging stage (a TF1 node name
# of up to ~70 characters) and its numbers, the diagnosis.
_TEMPLATE_EXCEPTIONS = {"migrate.tf1.self_check"}
# Placeholders that hold a path (a user's is ~30 characters); a module's UPPERCASE constant counts
# at its value's width; any other placeholder (a number, an option's value) at none: the check is a
# lower bound, which the bad-input table above completes with the lines themselves.
_PATH_PLACEHOLDER = re.compile(r"^(path|src|converted|out|output_dir|directory|folder|prefix|named|name|where|"
                               r"graph_from|weights_from|config_path|model|labels|target|json_path|png_dir|"
                               r"trace_dir|report_path|tflite|onnx|file|item)$")
_CONSTANT = re.compile(r"^([a-z_][a-z0-9_]*\.)*[A-Z][A-Z0-9_]*$")
_PREFIXES = {"raise": "error: ", "bad_input": "error: ", "warnings.warn": "warning: ", "warn": ""}


def _constants(tree) -> dict:
    """The module-level `NAME = "text"` (or a tuple of texts) of a parsed module, as their texts."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            found[node.targets[0].id] = str(value)
    return found


def _template_width(node, source: str, constants: dict, everywhere: dict):
    """The width of a message template (a string or f-string node), as `_PATH_PLACEHOLDER` and
    `_CONSTANT` say (a constant is its module's, else the widest of that name in the project);
    None for a message built otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return len(node.value)
    if not isinstance(node, ast.JoinedStr):
        return None
    width = 0
    for part in node.values:
        if isinstance(part, ast.Constant):
            width += len(part.value)
            continue
        expression = ast.unparse(part.value)
        if _CONSTANT.match(expression):  # CONFIG_FILE, detector.CONFIG_FILE
            name = expression.split(".")[-1]  # one computed at import (a path found then): not counted
            width += len(constants[name]) if name in constants else max(map(len, everywhere.get(name, [""])))
        elif _PATH_PLACEHOLDER.match(expression):
            width += 30
    return width


def _message_templates():
    """(module:line, printed width) of every message the project raises (`raise X(MESSAGE)`), prints
    as bad input (`bad_input`) or warns (`warnings.warn`, shown as `warning: MESSAGE`; `warn`,
    whose messages carry their `warning: `) in `migrate` and `ssd_mobilenet`, read from the source
    (nothing imported)."""
    modules = {}
    for package in ("migrate", "ssd_mobilenet"):
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for file in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, file)
                source = open(path, encoding="utf-8").read()
                modules[os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")] = (source, ast.parse(source))
    constants = {module: _constants(tree) for module, (_, tree) in modules.items()}
    everywhere = {}
    for table in constants.values():
        for name, value in table.items():
            everywhere.setdefault(name, []).append(value)
    for module, (source, tree) in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                kind, message = "raise", node.exc.args[0]
            elif isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in _PREFIXES:
                kind, message = ast.unparse(node.func), node.args[0]
            else:
                continue
            width = _template_width(message, source, constants[module], everywhere)
            if width is not None:
                yield f"{module}:{node.lineno}", len(_PREFIXES[kind]) + width


def test_every_message_template_fits_with_a_30_character_path():
    templates = dict(_message_templates())
    assert len(templates) > 300  # the walk found the project's messages (353 in 2026-11)
    too_long = {where: width for where, width in templates.items()
                if width > WIDTH and where.split(":")[0] not in _TEMPLATE_EXCEPTIONS}
    assert too_long == {}
