"""Every error line the docs quote (docs/guides/troubleshooting.md above all, the other guides and
the README) is the line a command prints: each is produced here (`CASES`: the command line that
prints it, run in a folder of real models) and matched against the page's text, or named with
the test that produces it (`ELSEWHERE`). A quoted line in neither table fails, so a new line in
the docs comes with its case.

The placeholders (PATH, DIR, N, MAX, X, ...: words in capitals) stand for any text and `...` for
any rest; everything else must be printed as written (`iou_treshold`, `105`, `x`)."""

from __future__ import annotations

import glob
import os
import re
import shutil

import pytest

from tests.conftest import REPO, SHARED

PAGE = os.path.join(REPO, "docs", "guides", "troubleshooting.md")
# The pages that quote error lines: troubleshooting.md, and the guides and README where a line is shown.
PAGES = [os.path.join(REPO, "README.md"), *sorted(glob.glob(os.path.join(REPO, "docs", "guides", "*.md")))]
CONTROL = os.path.join(SHARED, "zoo", "odapi_exports", "control_small")  # its pipeline.config: fields on lines 105, 109


def quoted_lines() -> list:
    """The pages' quoted error lines: code spans (`...` or ``...``) and lines of fenced blocks that
    are an `error:` line, an argparse error or its closest-name hint; the generic `error: ...`
    forms left out."""
    lines = []
    for path in PAGES:
        with open(path, encoding="utf-8") as f:
            page = f.read()
        fenced = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.M | re.S)
        lines += [line.strip() for block in fenced.findall(page) for line in block.splitlines()
                  if line.strip().startswith("error: ")]
        spans = [" ".join(m.group(2).split()) for m in re.finditer(r"(``?)(?!`)(.+?)(?<!`)\1(?!`)",
                                                                    fenced.sub("", page), re.S)]
        lines += [s for s in spans if s.startswith("error: ") or ": error: " in s or "(did you mean " in s]
    return sorted(set(s for s in lines if s not in ("error: ...", "python -m migrate COMMAND: error: ...")))


def pattern(line: str) -> re.Pattern:
    """The page's line as a pattern: capitals (PATH, N, MAX, ...) any text, `...` any rest."""
    parts = re.split(r"(\.\.\.|\b[A-Z][A-Z_]*\b)", line)
    return re.compile("".join(".*" if p == "..." else ".+?" if re.fullmatch(r"[A-Z][A-Z_]*", p) and p
                              else re.escape(p) for p in parts))


@pytest.fixture(scope="module")
def folder(small_model, tmp_path_factory):
    """tf1/ and converted/: the small model (conftest's `small_model("two_classes")`); other/: a conversion of
    another (conftest's `small_model()`, 3 classes); typo/: the zoo fixture
    control_small with `iou_treshold` on line 105; sigmod/: with `SIGMOD` on line 109;
    classes/: its checkpoint alone with a pipeline.config of 1 class (the weights hold 3);
    model.tflite: a file LiteRT's identifier marks (its options are refused before it is read);
    photo.png."""
    from PIL import Image
    root = tmp_path_factory.mktemp("troubleshooting")
    os.symlink(small_model("two_classes").tf1, root / "tf1")
    os.symlink(small_model("two_classes").converted, root / "converted")
    os.symlink(small_model().converted, root / "other")  # a conversion of another model (3 classes)
    for name, old, new in (("typo", "iou_threshold", "iou_treshold"), ("sigmod", "score_converter: SIGMOID",
                                                                        "score_converter: SIGMOD"),
                           ("classes", "num_classes: 3", "num_classes: 1")):
        os.mkdir(root / name)
        for file in ("pipeline.config", "model.ckpt.index", "model.ckpt.data-00000-of-00001"):
            shutil.copy(os.path.join(CONTROL, file), root / name)
        text = (root / name / "pipeline.config").read_text()
        assert old in text
        (root / name / "pipeline.config").write_text(text.replace(old, new, 1))
    (root / "model.tflite").write_bytes(b"\0\0\0\0TFL3" + bytes(64))
    Image.new("RGB", (64, 48), (120, 80, 40)).save(root / "photo.png")
    return str(root)


# The page's line: the command line that prints it (run in `folder`).
CASES = {
    'python -m migrate: error: conver: no such command (did you mean convert?)': "conver tf1",
    'unrecognized arguments: --ouput x (did you mean --out?)': "convert tf1 --ouput x",
    '--precision floa32: no such choice (did you mean float32?)': "predict converted photo.png --precision floa32",
    'error: PATH: no such file or directory': "convert missing_tf1",
    'error: DIR: no such folder (`python -m migrate convert SRC` writes it)': "verify tf1 missing_tf2",
    'error: SRC comes first: `verify SRC CONVERTED`': "verify converted tf1",
    'error: FILE: no such file (--tflite)': "verify tf1 converted --tflite missing.tflite",
    "error: MODEL: no such directory, .tflite or .onnx file (convert's or export's output)":
        "predict missing_tf2 photo.png",
    'error: DIR: no such directory (expected the output of `migrate convert`)': "export missing_tf2 --tflite m.tflite",
    "error: DIR: no frozen_inference_graph.pb (bench's TF1 side runs it)": "bench typo converted",
    'error: DIR: not a converted model directory (no model_config.json)': "bench tf1 tf1",
    'error: PATH: no such file or folder': "predict converted missing.png",
    'error: --batch N: must be 1..MAX': "predict converted photo.png --batch 0",
    'error: --threads: for .tflite and .onnx files; TensorFlow takes its threads from the environment':
        "predict converted photo.png --threads 2",
    'error: --batch: sets up TensorFlow; a .tflite file runs on LiteRT, one image per call':
        "predict model.tflite photo.png --batch 2",
    'error: --threads N: must be >= 1': "predict model.tflite photo.png --threads 0",
    'error: --steps N: must be >= 1': "train converted --config tf1/pipeline.config --train photo.png --steps 0",
    "error: --devices X: must be a number >= 1 or 'all'":
        "train converted --config tf1/pipeline.config --train photo.png --devices some",
    'error: --batch B is not a multiple of --devices D x --accumulate K':
        "train converted --config tf1/pipeline.config --train photo.png --batch 6 --devices 2 --accumulate 2",
    'error: --batch B is not a multiple of --accumulate K':
        "train converted --config tf1/pipeline.config --train photo.png --batch 3 --accumulate 2",
    'error: --max-memory M: must be a positive number of MiB':
        "train converted --config tf1/pipeline.config --train photo.png --max-memory -1",
    'error: --pipeline-options: ...':
        "predict converted photo.png --engine beam --out o.jsonl --pipeline-options --no_such_option=1",
    'error: PATH:105: no field "iou_treshold" (did you mean "iou_threshold"?)': "convert typo --out o",
    'error: PATH:109: score_converter: no value SIGMOD (did you mean "SIGMOID"?)': "convert sigmod --out o",
    'error: PATH: num_classes 1, the weights 3 (--trust-weights)': "convert classes --out o",
    "error: coco: ids 3..90 beyond the model's 2 classes: the map of another model?": "convert tf1 --out o --labels coco",
    "error: label_map.pbtxt: no such file (--labels): the model's label map, or `coco` for the COCO zoo's":
        "predict converted photo.png --labels label_map.pbtxt",
    'error: CONVERTED against SRC: ...: not a conversion of this model (verify the one it was converted from)':
        "verify tf1 other --no-measure",
}

# The page's lines produced by other tests, which need what this folder has not: a process
# without TensorFlow or Beam, a Beam run, two training workers, a graph the conversion differs from.
ELSEWHERE = {
    "error: COMMAND needs TensorFlow: pip install 'ssd-mobilenet-migrate[cpu]' (or [gpu])":
        "tests/migrate/test_device_install.py",
    "error: convert needs TensorFlow: pip install 'ssd-mobilenet-migrate[cpu]' (or [gpu])":
        "tests/migrate/test_device_install.py",
    'error: a converted directory needs TensorFlow: ...': "tests/migrate/test_device_install.py",
    "error: --engine beam: apache_beam is not installed: pip install 'ssd-mobilenet-migrate[beam]'":
        "migrate/commands/predict.py (_run_engine)",
    "error: --workers: the local runner's; RUNNER counts its workers in --pipeline-options":
        "tests/migrate/predict/test_predict_beam.py",
    'error: SHARD: exists (use --force to replace the shards of OUT)': "tests/migrate/predict/test_predict_beam.py",
    "error: the pipeline failed: ... (--verbose shows the runner's log)": "tests/migrate/predict/test_predict_beam.py",
    'error: the converted model differs from GRAPH first at STAGE: DETAIL; likely FIELD': "tests/migrate/tf1/test_self_check.py",
    'error: worker 0 lost worker 1 (HOST:PORT) after step N: start every worker again to resume at ckpt-K':
        "tests/ssd_mobilenet/training/test_multi_worker.py",
    'error: worker 0 lost worker 1 (127.0.0.1:PORT) after step N: start every worker again to resume at ckpt-K':
        "tests/ssd_mobilenet/training/test_multi_worker.py",
    '--sides X: no such side (did you mean Y?)': "tests/migrate/test_cli.py (bad input)",
    # A conversion at an assumed size: a checkpoint without its graph and pipeline.config, converted again.
    'error: CONVERTED against SRC: image size N, TF1 M: convert again with --image-size H W':
        "tests/migrate/verify/test_verify.py (test_a_conversion_at_another_input_size_is_refused_in_one_line)",
    'error: fpn_tf2 against fpn: image size 640x640, TF1 256x256: convert again with --image-size 256 256':
        "tests/migrate/verify/test_verify.py (test_a_conversion_at_another_input_size_is_refused_in_one_line: the same line "
        "of the small model)",
    'error: GRAPH: X is not an SSD op (--allow-ops X runs it)':
        "tests/migrate/verify/test_verify.py (test_unknown_ops_are_refused_unless_allowed: a zoo graph that writes a file)",
    # From a wheel (not editable) without the npm runtime: the installed package's folder.
    "error: --web: @litertjs/core is not installed: npm ci --ignore-scripts --prefix "
    "/home/me/venv/lib/python3.11/site-packages/migrate/export/web_page": "tests/test_wheel.py",
}


def test_every_quoted_line_has_a_case():
    quoted = quoted_lines()
    assert len(quoted) > 25  # the spans were found
    assert [line for line in quoted if line not in CASES and line not in ELSEWHERE] == []
    assert [line for line in [*CASES, *ELSEWHERE] if line not in quoted] == []  # none stale
    named = {where.split(" ")[0] for where in ELSEWHERE.values()}
    assert [path for path in named if not os.path.isfile(os.path.join(REPO, path))] == []  # where it is, not was


@pytest.mark.parametrize("line", sorted(CASES))
def test_the_command_prints_the_line_the_page_quotes(folder, line):
    from tests.migrate.test_cli import _run_in
    code, _, err = _run_in(folder, CASES[line].split())
    printed = [text for text in err.splitlines() if text.startswith("error: ") or ": error: " in text]
    assert code == 2 and len(printed) == 1, err[-3000:]
    shown = printed[0] if line.startswith(("error: ", "python -m migrate")) else printed[0].split(": error: ")[1]
    assert pattern(line).fullmatch(shown) or pattern(line).fullmatch(shown.split(": ", 1)[-1]), (line, shown)
