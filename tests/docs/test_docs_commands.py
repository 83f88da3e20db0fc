"""Every command block of the README and the guides runs as written (issue 41: a newcomer's first hour).

README.md, docs/index.md and docs/guides/*.md are read for their ```bash and ```python blocks. A
synopsis (`[--option ...]`, placeholders) is a ```text block: not a command, so its options are
checked against the parser instead (`test_synopses_name_options_the_commands_have`).

Each block runs in a fresh folder laid out as the docs assume a clone to be (`LAYOUT`): the zoo model
the README names and its conversion (conftest's `zoo_fixture` and `zoo_converted`, shared with the rest
of the suite), ../shared's photos, label map and TFRecords, and the clone's own files.

- `.venv/bin/python -m migrate ARGS` runs in this process, `migrate.cli.main(ARGS)`: one TensorFlow
  import for every line. `python -m migrate ARGS` is a device's Python with the `litert` or `onnx`
  extra: this venv's Python in a child process where TensorFlow and its companions are not found
  (tests/migrate/device_install.py). Any other `.venv/bin/...` line runs in a child process, with this venv
  as the folder's `.venv`. A line must exit 0 (or `EXPECTED_EXIT`) and leave the outputs it names.
- A block's lines run in order, in its folder. `CONTINUES` names the blocks that go on in an earlier
  block's folder, because they read what it wrote.
- A `migrate` line (in this process or a device's) or a script prints every line within 100 columns
  on a terminal 1000 columns wide (`check_widths`; tests/migrate/test_cli.py runs the commands' other forms);
  a script prints the project's lines only (`check_own_lines`); no line changes docs/
  (`check_docs_unchanged`).
- A block whose steps begin another's (the README's short forms of the guides' examples) runs as
  part of that one: the same lines on the same layout give the same results (`plan`).
- Installs are checked, not run: the project is the target and the extra exists in pyproject.toml
  (`INSTALL`). `NOT_RUN` lists what cannot run here, with the reason; `SUBSTITUTED` what runs with
  other arguments, with the reason.

Lines run without a shell (no globbing, pipes or variables); `test_every_command_line_is_run_or_declared`
refuses a line that would need one, and parses every `migrate` line, so that a changed flag fails the
fast tier. The runs take a few minutes (`-m slow`); the checks of the text, a second.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import io
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
import traceback

import pytest

from tests.conftest import REPO, SHARED, ZOO_2018, run_cli

PAGES = ["README.md", "docs/index.md", *sorted(os.path.relpath(p, REPO) for p in
                                               glob.glob(os.path.join(REPO, "docs", "guides", "*.md")))]

# What the folder of each run holds, as the docs assume it (built by the `layout` fixture). An entry
# that a run's own lines write (`convert ... --out converted`) is left out of that run's folder.
LAYOUT = {
    "ssd_mobilenet_v1_coco_2018_01_28": "the zoo model the README converts: its published graph from ../shared "
                                        "with synthetic weights (conftest.zoo_fixture)",
    "converted": "its conversion by `python -m migrate convert` (conftest.zoo_converted)",
    "photos": "../shared/photos: seven real JPEG photos (and a README.md, which predict and verify pass over)",
    "label_map.pbtxt": "../shared/records/pet_label_map.pbtxt: a real OD API label map",
    "eval.record": "../shared/records/pets_examples.record: ten of the OD API's own TFRecords",
    "my_model": "a user's own TF1 export (docs/guides/own-model.md): the small model's TF1 directory, its "
                "pipeline.config naming the label map where it was trained (/home/me/training/label_map.pbtxt), "
                "the map copied beside it (`own_model`)",
    "small_tf1_model": "a TF1 model directory of the small model (depth 0.25, 128x128, 2 classes; "
                       "conftest.small_model('two_classes')), "
                       "for SUBSTITUTED",
    ".venv": "this venv (sys.prefix)",
    "pyproject.toml": "the clone's own (a link)",
    "migrate": "the clone's own (a link)",
    "ssd_mobilenet": "the clone's own (a link)",
    "scripts": "the clone's own (a link)",
    "docs": "a copy of the clone's, which no line may change (`check_docs_unchanged`): scripts/bench.py writes "
            "docs/ only with --publish",
    "mkdocs.yml": "a copy of the clone's: mkdocs writes site/ beside it",
}
COPIED = {"docs", "mkdocs.yml"}

# Lines that cannot run here: (pattern on the line as `command_lines` gives it, the reason).
NOT_RUN = [
    (r"bash scripts/quickstart\.sh", "installs the project into .venv with pip and builds the default model under "
                                     "checkpoints/: .ci/run runs it on a fresh clone, as the README says"),
    (r"\.venv/bin/python -m pytest\b.*", "the test suite, of which this test is one: .ci/run runs it"),
    (r"trtexec\b.*", "TensorRT needs an NVIDIA GPU, which this machine lacks (tests/ssd_mobilenet/formats/onnx/test_onnx_runtimes.py checks that every op of "
                     "the file is in TensorRT's parser's list)"),
    (r"\.venv/bin/mkdocs serve", "serves a preview until stopped; the block's `mkdocs build --strict` runs"),
    (r"'TF_CONFIG=.*", "a worker of a run on two machines (10.0.0.1, 10.0.0.2); tests/ssd_mobilenet/training/test_multi_worker.py "
                      "runs the same command as two workers on 127.0.0.1"),
]

# An install: pip (the venv's, or a device's) with the project and its extras as the target, from
# a clone (`-e '.[EXTRA]'`) or into an install (`'ssd-mobilenet-migrate[EXTRA]'`).
INSTALL = re.compile(r"(?:\.venv/bin/python -m pip|\.venv/bin/pip|pip) install "
                     r"(?:-e '(?P<clone>\.)|'(?P<name>ssd-mobilenet-migrate))\[(?P<extras>[a-z0-9,-]+)\]'")

# scripts/bench.py's FPN and PPN runs (docs/guides/speed-memory.md).
BENCH_MODEL_LINES = [f".venv/bin/python scripts/bench.py --model {model} --batch 1,8 --size 480x640,{size}x{size} "
                     "--repeats 20 --sides tf1_session,saved_model,saved_model_exact,detector,tflite,tflite_int8,onnx,"
                     "onnx_int8" for model, size in (("fpn_640", 640), ("ppn_300", 300))]

# Lines that run with other arguments: {line without its comment: (the line run, the reason)}.
SUBSTITUTED = {
    ".venv/bin/python scripts/bench.py": (
        ".venv/bin/python scripts/bench.py --src small_tf1_model --batch 1 --size 128x128 --repeats 1 "
        "--sides tf1_session,saved_model --no-cold",
        "without options it measures every side of the zoo model at three batch sizes and starts each side "
        "cold over the photos three times (a long run); the small model, two sides, one round and no cold "
        "rounds (six fresh processes: tests/migrate/bench/test_bench.py's every-side case runs bench's cold rows) run the "
        "same script end to end: the short run of docs/guides/speed-memory.md, on the small model; it prints "
        "the tables within 100 columns, no TensorFlow line, and leaves docs/ as it was"),
    **{line: (line + " --src small_tf1_model",
              "builds the zoo's config at full size and measures eight sides (a long run, for a quiet machine): run "
              "with --src, the script parses every option of the line and refuses the pair in one line, exit 2 "
              "(EXPECTED_EXIT); tests/migrate/bench/test_bench.py runs --model on small models")
       for line in BENCH_MODEL_LINES},
    # README.md's verify (docs/guides/verify.md's too): the same pair, stage by stage, on the photos.
    ".venv/bin/python -m migrate verify ssd_mobilenet_v1_coco_2018_01_28 converted --images photos/": (
        ".venv/bin/python -m migrate verify ssd_mobilenet_v1_coco_2018_01_28 converted --images photos/ --no-measure",
        "the memory and latency of this conversion, both sides in fresh processes, are "
        "tests/migrate/verify/test_verify.py's test_zoo_conversion_passes_with_memory_and_latency (the same zoo conversion, "
        "conftest.zoo_converted); here the check of every stage and detection on the seven photos runs "
        "(the line took 36 s with it, 6 s without, -n 0 on a loaded 2-core machine)"),
    # docs/guides/own-model.md's two verify lines: the same checks, without the fresh processes that measure.
    **{line: (line + " --no-measure",
              "both sides measured in fresh processes are tests/migrate/verify/test_verify.py's, the file's in "
              "test_tflite_side_is_measured_in_a_fresh_process_without_tensorflow; here every stage and detection is checked on the photos")
       for line in (".venv/bin/python -m migrate verify my_model my_model_tf2 --images photos/",
                    ".venv/bin/python -m migrate verify my_model my_model_tf2 --tflite my_model.tflite "
                    "--images photos/")},
    # The training demo (docs/guides/train.md, README.md).
    ".venv/bin/python -m migrate train demo/converted --config demo/train.config --train demo/train.record --eval "
    "demo/eval.record --steps 100": (
        ".venv/bin/python -m migrate train demo/converted --config demo/train.config --train demo/train.record "
        "--eval demo/eval.record --steps 2",
        "100 steps of 16 images are the guide's quick look at the losses, which this test does not read (54 of "
        "the run's 80 CPU seconds); 2 run the same chain (the config, the records, the checkpoint, the held-out "
        "evaluation, the model the predict line reads); tests/migrate/test_train.py holds what training does to them"),
    ".venv/bin/python -m migrate train demo_ppn/converted --config demo_ppn/train.config --train "
    "demo_ppn/train.record --steps 20": (
        ".venv/bin/python -m migrate train demo_ppn/converted --config demo_ppn/train.config --train "
        "demo_ppn/train.record --steps 2",
        "the same: the guide's 20 steps of 16 images show the focal loss at work, which this test does not read; "
        "2 run the PPN's chain (tests/migrate/test_shapes.py checks that two steps move its weights)"),
    ".venv/bin/python scripts/kernels.py": (
        ".venv/bin/python scripts/kernels.py --src small_tf1_model --sides saved_model --size 128x128 --calls 2",
        "the same: the small model, one side and two calls"),
}


def _kernels_exit():
    from ssd_mobilenet import memory
    return 0 if memory.onednn_on() else 2


# Lines whose exit is not 0: {line without its comment: (exit code, or a function giving it, the reason)}.
EXPECTED_EXIT = {
    **{line: (2, "run with --src (SUBSTITUTED): --src and --model exclude each other") for line in BENCH_MODEL_LINES},
    ".venv/bin/python scripts/kernels.py": (_kernels_exit, "on Eigen's kernels it has nothing to count and exits 2, "
                                                           "as the guide says"),
}

# Blocks that go on in an earlier block's folder: {(page, the block's first line): (the first line of
# the earlier block on that page, the reason)}.
CONTINUES = {
    # docs/guides/own-model.md: each step reads what the one before it wrote.
    **{("docs/guides/own-model.md", first): (".venv/bin/python -m migrate convert my_model --out my_model_tf2",
                                              "reads my_model_tf2, which the guide's convert writes")
       for first in (".venv/bin/python -m migrate verify my_model my_model_tf2 --images photos/",
                     ".venv/bin/python -m migrate predict my_model_tf2 photos/ --out results.jsonl --png drawn/",
                     ".venv/bin/python -m migrate export my_model_tf2 --tflite my_model.tflite")},
    ("docs/guides/own-model.md", "python -m migrate predict my_model.tflite photos/ --out device_results.jsonl"): (
        ".venv/bin/python -m migrate export my_model_tf2 --tflite my_model.tflite",
        "the device runs my_model.tflite, which the guide's export writes"),
    ("docs/guides/deploy.md", ".venv/bin/saved_model_cli show --dir converted/saved_model --all"): (
        "import numpy as np", "saved_model_cli reads images.npy, which the Python clients' block writes"),
    ("docs/guides/deploy.md", "from ai_edge_litert.interpreter import Interpreter"): (
        ".venv/bin/python -m migrate export converted --tflite model.tflite",
        "LiteRT's interpreter runs model.tflite, which the device block's export writes"),
    ("docs/guides/deploy.md", "import onnxruntime as ort"): (
        ".venv/bin/python -m migrate export converted --onnx model.onnx",
        "ONNX Runtime's session runs model.onnx, which the device block's export writes"),
    ("docs/guides/deploy.md", "import cv2"): (
        ".venv/bin/python -m migrate export converted --onnx model.onnx",
        "OpenCV's DNN module runs model.onnx, which the device block's export writes"),
    ("docs/guides/deploy.md", "import openvino as ov"): (
        ".venv/bin/python -m migrate export converted --onnx model.onnx",
        "OpenVINO runs model.onnx, which the device block's export writes"),
}

# The outputs of each command, by its parser's destinations: they must exist after the line.
OUTPUTS = {"convert": ("out",), "export": ("tflite", "onnx"), "predict": ("out", "png"), "verify": ("json", "png"),
           "evaluate": ("json",), "train": ("out",), "shapes": ("out",), "bench": ("json", "markdown", "plot")}
# The outputs of other lines: (pattern on the line, the path it writes; \1 the pattern's group).
TOOL_OUTPUTS = [
    (r"\.venv/bin/mkdocs build\b.*", "site/index.html"),
    (r".*saved_model_cli run .*--outdir (\S+).*", r"\1"),
]
# The project's scripts: held to the commands' console (`check_widths`, `check_own_lines`).
SCRIPT = re.compile(r"\.venv/bin/python scripts/\S+\.py\b.*")
MIGRATE = [".venv/bin/python", "-m", "migrate"]
DEVICE_PYTHON = ["python", "-m", "migrate"]
SHELL_SYNTAX = set("|&;<>()`$*?~")


@dataclasses.dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    body: str

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_line(self) -> str:
        """A bash block's first command (without its comment), a Python block's first line."""
        if self.lang == "bash":
            return (command_lines(self.body) or [""])[0]
        return next((line.strip() for line in self.body.splitlines() if line.strip()), "")

    def steps(self) -> list:
        """("bash", line without its comment) per command line, or ("python", code)."""
        if self.lang == "python":
            return [("python", self.body)]
        return [("bash", line) for line in command_lines(self.body)]


def read_blocks(page: str) -> list:
    """Every fenced block of `page`, indented ones (in a list) included, dedented."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = f.read()
    fence = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                       re.M | re.S)
    blocks = []
    for m in fence.finditer(text):
        indent = len(m.group("indent"))
        body = "".join(line[indent:] if line[:indent].isspace() else line
                       for line in m.group("body").splitlines(keepends=True))
        blocks.append(Block(page, text.count("\n", 0, m.start()) + 1, m.group("lang"), body))
    return blocks


def command_lines(body: str) -> list:
    """A bash block's commands: continuation lines joined, comments and blank lines dropped."""
    lines = []
    for line in re.sub(r"\\\n[ \t]*", " ", body).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(shlex.join(words))
    return lines


def all_blocks(langs=("bash", "python")) -> list:
    return [b for page in PAGES for b in read_blocks(page) if b.lang in langs]


def not_run_reason(line: str):
    return next((reason for pattern, reason in NOT_RUN if re.fullmatch(pattern, line)), None)


def kind(line: str) -> str:
    """What the test does with a bash line: "not run", "install", "migrate" (in this process),
    "device" (a child process without TensorFlow), "venv" (a child process), or "unknown"."""
    if not_run_reason(line):
        return "not run"
    if INSTALL.fullmatch(line):
        return "install"
    words = shlex.split(line)
    if words[:3] == MIGRATE:
        return "migrate"
    if words[:3] == DEVICE_PYTHON:
        return "device"
    if words[0].startswith(".venv/bin/"):
        return "venv"
    return "unknown"


def shell_syntax(line: str) -> list:
    """The unquoted characters of `line` that a shell would act on (globs, pipes, variables...)."""
    lexer = shlex.shlex(line, posix=False, punctuation_chars=True)
    lexer.whitespace_split = True
    return sorted({c for token in lexer if token[:1] not in "'\"" for c in token if c in SHELL_SYNTAX})


def parsed(words: list):
    """The `migrate` parser's namespace for a `python -m migrate ARGS` line's ARGS."""
    from migrate.cli import _parser, _values_attached
    return _parser().parse_args(_values_attached(words[3:]))


def migrate_outputs(args) -> list:
    """The paths (glob patterns) a migrate command line names as its outputs."""
    paths = [getattr(args, dest) for dest in OUTPUTS.get(args.command, ()) if getattr(args, dest, None)]
    if args.command == "predict" and getattr(args, "engine", None) == "beam" and args.out:
        stem, ext = os.path.splitext(args.out)  # Beam writes shards named after OUT
        paths = [f"{stem}-*-of-*{ext}" if p == args.out else p for p in paths]
    return paths


@dataclasses.dataclass
class Run:
    """Blocks run in order in one folder; `covers`: the runs whose steps begin this one's."""
    blocks: list
    covers: list = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return self.blocks[0].name

    def steps(self) -> list:
        return [step for block in self.blocks for step in block.steps()]

    def executes(self) -> bool:
        return any(lang == "python" or kind(line) in ("migrate", "device", "venv") for lang, line in self.steps())


def plan(blocks) -> list:
    """The runs that execute every block: a block starts a run, or goes on in the run of the block
    it continues (`CONTINUES`); a run whose steps begin another's is covered by the longest such run."""
    runs, run_of = [], {}
    for block in blocks:
        earlier = CONTINUES.get((block.page, block.first_line))
        if earlier:
            target = next((b for b in blocks if b.page == block.page and b.first_line == earlier[0]), None)
            if target is None:  # test_tables_name_lines_that_the_docs_hold names it
                runs.append(Run([block]))
                run_of[block.name] = runs[-1]
                continue
            run_of[block.name] = run_of[target.name]
            run_of[block.name].blocks.append(block)
        else:
            run_of[block.name] = Run([block])
            runs.append(run_of[block.name])
    kept = []
    for run in runs:
        steps = run.steps()
        longer = [other for other in runs if other is not run and other.steps()[:len(steps)] == steps
                  and (len(other.steps()) > len(steps) or runs.index(other) < runs.index(run))]
        if longer:
            max(longer, key=lambda other: len(other.steps())).covers.append(run)
        else:
            kept.append(run)
    for run in kept:  # a covered run's own covered runs
        stack = list(run.covers)
        while stack:
            inner = stack.pop()
            run.covers.extend(r for r in inner.covers if r not in run.covers)
            stack.extend(inner.covers)
    return kept


RUNS = plan(all_blocks())


def project_extras() -> set:
    """The names of pyproject.toml's extras (read as text: no toml reader before Python 3.11)."""
    with open(os.path.join(REPO, "pyproject.toml"), encoding="utf-8") as f:
        section = f.read().split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([a-z0-9-]+)\s*=", section, re.M))


# --- The text: every line is run or declared, tables name lines that exist (fast) ---

def test_every_command_line_is_run_or_declared():
    problems = []
    for block in all_blocks(("bash",)):
        for _, line in block.steps():
            what = kind(line)
            if what == "install":
                problems += [f"{block.name}: `{line}`: pyproject.toml has no extra {e!r}"
                             for e in INSTALL.fullmatch(line).group("extras").split(",") if e not in project_extras()]
            elif what == "unknown":
                problems.append(f"{block.name}: `{line}`: neither run by this test nor declared in NOT_RUN")
            elif what in ("migrate", "device", "venv") and shell_syntax(line):
                problems.append(f"{block.name}: `{line}` needs a shell ({' '.join(shell_syntax(line))}), which the "
                                "test does not run lines through")
            elif what in ("migrate", "device"):
                refusal = io.StringIO()
                try:
                    with contextlib.redirect_stderr(refusal):
                        parsed(shlex.split(SUBSTITUTED.get(line, (line,))[0]))
                except SystemExit:
                    problems.append(f"{block.name}: `{line}`: {refusal.getvalue().strip().splitlines()[-1]}")
    assert not problems, "\n".join(problems)


def test_tables_name_lines_that_the_docs_hold():
    lines = {line for block in all_blocks(("bash",)) for _, line in block.steps()}
    firsts = {(b.page, b.first_line) for b in all_blocks()}
    stale = [f"NOT_RUN {pattern}" for pattern, _ in NOT_RUN if not any(re.fullmatch(pattern, line) for line in lines)]
    stale += [f"SUBSTITUTED / EXPECTED_EXIT `{line}`" for line in {*SUBSTITUTED, *EXPECTED_EXIT} if line not in lines]
    stale += [f"CONTINUES {key}" for key, (earlier, _) in CONTINUES.items()
              if key not in firsts or (key[0], earlier) not in firsts]
    assert not stale, "tables name lines that no block holds any more: " + "; ".join(stale)


def test_install_lines_name_extras_of_pyproject():
    """Every `pip install` of the project in the docs (blocks and inline) names extras it has."""
    extras = project_extras()
    problems = []
    pages = ["README.md", *(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "**", "*.md"),
                                                                         recursive=True))]
    for page in pages:
        text = open(os.path.join(REPO, page), encoding="utf-8").read()
        for m in re.finditer(r"pip install [^`\n]*?\[([a-z0-9,-]+)\]", text):
            problems += [f"{page}: `{m.group(0)}`: no extra {e!r}" for e in m.group(1).split(",")
                         if e not in extras and e != "EXTRA"]
    assert not problems, "\n".join(problems)


def test_synopses_name_options_the_commands_have():
    """A ```text block that starts as a `migrate` command names only options that command has."""
    from migrate.cli import _parser
    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    problems, synopses = [], 0
    for block in (b for page in PAGES for b in read_blocks(page) if b.lang == "text"):
        m = re.match(r"(?:\.venv/bin/)?python -m migrate (\w+)", block.body)
        if not m:
            continue
        synopses += 1
        options = {o for a in commands[m.group(1)]._actions for o in a.option_strings}
        unquoted = re.sub(r"'[^']*'", "", block.body)
        problems += [f"{block.name}: {m.group(1)} has no {option}"
                     for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", unquoted) if option not in options]
    assert synopses and not problems, "\n".join(problems)


# --- The runs (slow) ---

# The label map of `own_model`, as a user's training left it: two classes of their own.
OWN_LABELS = 'item {\n  id: 1\n  name: "apple"\n}\nitem {\n  id: 2\n  name: "pear"\n}\n'


@pytest.fixture(scope="module")
def own_model(small_model, tmp_path_factory) -> str:
    """`my_model`: a copy of the small TF1 model directory whose pipeline.config names its label map
    on the machine it was trained on, with the map copied beside it, as a user brings their export."""
    folder = str(tmp_path_factory.mktemp("own") / "my_model")
    shutil.copytree(small_model("two_classes").tf1, folder)
    with open(os.path.join(folder, "pipeline.config"), "a", encoding="utf-8") as f:
        f.write('train_input_reader {\n  label_map_path: "/home/me/training/label_map.pbtxt"\n}\n')
    with open(os.path.join(folder, "label_map.pbtxt"), "w", encoding="utf-8") as f:
        f.write(OWN_LABELS)
    return folder


@pytest.fixture(scope="module")
def layout(zoo_fixture, zoo_converted, small_model, own_model):
    """{LAYOUT entry: the path it links to or copies}."""
    paths = {
        "my_model": own_model,
        "ssd_mobilenet_v1_coco_2018_01_28": zoo_fixture(ZOO_2018),
        "converted": zoo_converted[1],
        "photos": os.path.join(SHARED, "photos"),
        "label_map.pbtxt": os.path.join(SHARED, "records", "pet_label_map.pbtxt"),
        "eval.record": os.path.join(SHARED, "records", "pets_examples.record"),
        "small_tf1_model": small_model("two_classes").tf1,
        ".venv": sys.prefix,
        **{name: os.path.join(REPO, name) for name in ("pyproject.toml", "migrate", "ssd_mobilenet", "scripts",
                                                          "docs", "mkdocs.yml")},
    }
    assert sorted(paths) == sorted(LAYOUT)
    return paths


def written_entries(run) -> set:
    """The LAYOUT entries a run's own lines write, left out of its folder."""
    written = set()
    for lang, line in run.steps():
        if lang == "bash" and kind(line) in ("migrate", "device"):
            written |= {os.path.normpath(p).split(os.sep)[0] for p in migrate_outputs(parsed(shlex.split(line)))}
    return written


def make_folder(root, layout, leave_out) -> str:
    for name, source in layout.items():
        if name in leave_out:
            continue
        target = os.path.join(root, name)
        if name in COPIED:
            (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, target)
        else:
            os.symlink(source, target)
    return str(root)


class LineFailed(AssertionError):
    pass


def check_outputs(folder, line, paths, started):
    for path in paths:
        found = glob.glob(os.path.join(folder, path))
        fresh = [p for p in found if os.path.getmtime(p) >= started - 1 and (os.path.isfile(p) or os.listdir(p))]
        if not fresh:
            raise LineFailed(f"`{line}` exited 0 but did not write {path}")


def check_widths(line, printed):
    """A `migrate` line or a script prints every line within 100 columns (tests/migrate/test_cli.py holds the commands the
    guides do not run to the same); the terminal is 1000 columns wide (`test_block_runs_as_written`),
    so that only the notes a command wraps on purpose are wrapped."""
    from migrate.commands.common import COLUMNS
    too_long = [text for text in printed.splitlines() if len(text) > COLUMNS]
    if too_long:
        raise LineFailed(f"`{line}` printed lines over {COLUMNS} columns:\n" + "\n".join(too_long))


def check_own_lines(line, stderr):
    """A script prints the project's lines only (`[migrate] ...`, `error: ...`): TensorFlow's only
    with --verbose, as the commands (tests/migrate/common/test_console.py). A long progress line goes on in
    lines indented by four spaces (`migrate.commands.common.wrapped`)."""
    from migrate.common.console import PROJECT_LINE
    foreign, previous = [], None
    for text in stderr.splitlines():
        own = PROJECT_LINE.match(text) or text.startswith("    ") and previous == "own"
        foreign += [] if own else [text]
        previous = "own" if own else None
    if foreign:
        raise LineFailed(f"`{line}` printed lines that are not the project's:\n" + "\n".join(foreign))


def docs_state(folder) -> dict:
    """{path below the folder's docs/: its bytes}."""
    docs = os.path.join(folder, "docs")
    return {os.path.relpath(os.path.join(root, name), docs): open(os.path.join(root, name), "rb").read()
            for root, _, names in os.walk(docs) for name in names}


def check_docs_unchanged(line, before, after):
    """No line of the docs writes into docs/ (scripts/bench.py and the figure scripts: only with --publish)."""
    changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
    if changed:
        raise LineFailed(f"`{line}` changed docs/: {', '.join(changed)}")


def run_bash_line(line, folder):
    run_line, _ = SUBSTITUTED.get(line, (line, None))
    words = shlex.split(run_line)
    expected, _ = EXPECTED_EXIT.get(line, (0, None))
    expected = expected() if callable(expected) else expected
    docs_before = docs_state(folder)
    started = time.time()
    if kind(line) == "migrate":
        code, out, err = run_cli(words[3:])
        outputs = migrate_outputs(parsed(words))
    else:
        env = dict(os.environ, PYTHONPATH=folder, SSD_MIGRATE_SHARED=SHARED)
        if kind(line) == "device":
            # Where TensorFlow and what comes with it cannot be imported (tests/migrate/device_install.py);
            # the folder on PYTHONPATH holds the clone's migrate/ and ssd_mobilenet/.
            words = [sys.executable, os.path.join(REPO, "tests", "migrate", "device_install.py"), *words[3:]]
            outputs = migrate_outputs(parsed(shlex.split(run_line)))
        else:
            words = [os.path.join(folder, words[0]), *words[1:]]
            outputs = [re.sub(pattern, path, run_line) for pattern, path in TOOL_OUTPUTS
                       if re.fullmatch(pattern, run_line)]
        proc = subprocess.run(words, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    if code != expected:
        raise LineFailed(f"`{run_line}` exited {code}, not {expected}:\n{err[-3000:]}\n{out[-1000:]}")
    if kind(line) in ("migrate", "device") or SCRIPT.fullmatch(run_line):
        check_widths(run_line, out + err)
    if SCRIPT.fullmatch(run_line):
        check_own_lines(run_line, err)
    check_docs_unchanged(run_line, docs_before, docs_state(folder))
    if code == 0:
        check_outputs(folder, run_line, outputs, started)


def run_python(code, name):
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except Exception:  # noqa: BLE001 - the snippet's own error, shown whole
        raise LineFailed(f"the Python block failed:\n{traceback.format_exc(limit=-3)}") from None


def cpu_seconds() -> float:
    """CPU time of this process and of its children that ended: the runs' cost apart from the load
    of other jobs on the machine."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.mark.slow
@pytest.mark.parametrize("run", [r for r in RUNS if r.executes()], ids=lambda r: r.name)
def test_block_runs_as_written(run, layout, tmp_path, monkeypatch):
    """The run's lines and snippets, in order, in a folder laid out as the docs assume; each line's
    wall and CPU time is printed (`-s`, `-rP`) for the suite's budget."""
    folder = make_folder(tmp_path, layout, written_entries(run))
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping to the terminal hides a long line (`check_widths`)
    times = []
    for block in run.blocks:
        for lang, step in block.steps():
            if lang == "bash" and kind(step) not in ("migrate", "device", "venv"):
                continue  # declared: test_every_command_line_is_run_or_declared
            wall, cpu = time.time(), cpu_seconds()
            try:
                if lang == "python":
                    run_python(step, block.name)
                else:
                    run_bash_line(step, folder)
            except LineFailed as e:
                covered = "".join(f", {r.name}" for r in run.covers)
                raise AssertionError(f"{block.name} (the run of {run.name}{covered}): {e}") from None
            times.append((time.time() - wall, cpu_seconds() - cpu, "python block" if lang == "python" else step))
    print(f"{run.name}, covering {', '.join(r.name for r in run.covers) or 'no other block'}:")
    for wall, cpu, what in times:
        print(f"{wall:6.1f} s wall {cpu:6.1f} s CPU  {what}")


def test_readme_python_example_prints_only_its_own_lines(small_model, tmp_path):
    """The README's Python example, in a fresh process as a user runs it (`test_block_runs_as_written`
    runs it in this one, whose TensorFlow is loaded): its two arrays on stdout and nothing on stderr,
    TensorFlow's start-up lines included, without an environment variable the user would not set.
    Its paths are the small converted model and a real photo, laid out as it names them."""
    [example] = [b for b in read_blocks("README.md") if b.lang == "python" and "ssd_mobilenet.load(" in b.body]
    os.symlink(small_model().converted, tmp_path / "converted")
    (tmp_path / "photos").mkdir()
    os.symlink(os.path.join(SHARED, "photos", "image1.jpg"), tmp_path / "photos" / "image1.jpg")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TF_", "ABSL_", "GLOG_"))}
    proc = subprocess.run([sys.executable, "-c", example.body], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**env, "PYTHONPATH": REPO})
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr[-3000:]
    classes, scores = re.fullmatch(r"\[([^\]]*)\] \[([^\]]*)\]\n", proc.stdout).groups()
    assert len(classes.split()) == len(scores.split()) == 5
    assert all(0 <= float(s) <= 1 for s in scores.split())
