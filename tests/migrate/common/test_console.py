"""What the command line prints: the project's own lines, TensorFlow's only with `--verbose`;
a missing path refused before TensorFlow loads.

The commands run as a user runs them: `python -m migrate ...` in a fresh process whose
environment has no TF_CPP_MIN_LOG_LEVEL, on a small real TF1 model (`migrate.tf1.builder`).
"""

import json
import logging
import os
import platform
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from tests.conftest import REPO
from migrate import cli
from migrate.commands import common as cli_common
from migrate.common import console
from migrate.common.measure import measure_isolated
from ssd_mobilenet import memory
from ssd_mobilenet.errors import RunError

# TensorFlow's lines: absl's pre-init notice, C++ log lines (I0000/W0000 prefixes, the oneDNN
# and CPU-feature notices), its Python log and deprecation notices.
NOISE = re.compile(r"absl|oneDNN|cpu_feature_guard|deprecat|WARNING:tensorflow|I0000|W0000", re.IGNORECASE)
# The project's own `warnings.warn` messages (ssd_mobilenet.detector and .runtime), shown as
# Python shows a warning: `FILE:LINE: UserWarning: MESSAGE` and the calling source line.
PROJECT_WARNINGS = ("no GPU visible: the memory settings apply to the CPU allocator",
                    "jit_compile=True on CPU: measured several times slower",
                    "quantization-aware model under XLA or mixed precision")


def _cli(*args, timeout=300, columns=None) -> subprocess.CompletedProcess:
    """`python -m migrate ARGS` in a fresh process; `columns`: the terminal's width it is told (COLUMNS)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", console.QUIET_ENV)}
    if columns:
        env["COLUMNS"] = str(columns)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "migrate", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)


def _foreign_lines(stderr: str) -> list:
    """The stderr lines that are not the project's own: `[migrate] ...` progress (and the indented
    lines a long one wraps onto), `error: ...`, `warning: ...` (predict's), or a listed project
    warning with its source line."""
    foreign, after_warning, in_progress = [], False, False
    for line in stderr.splitlines():
        own = (line.startswith(("[migrate] ", "error: ", "warning: "))
               or re.match(r"\S+\.py:\d+: UserWarning: ", line) and any(w in line for w in PROJECT_WARNINGS)
               or after_warning and line.startswith("  ")
               or in_progress and line.startswith("    "))
        after_warning = bool(re.match(r"\S+\.py:\d+: UserWarning: ", line)) and own
        in_progress = own and (line.startswith("[migrate] ") or in_progress and line.startswith("    "))
        if not own or NOISE.search(line):
            foreign.append(line)
    return foreign


@pytest.fixture(scope="module")
def small(small_model):
    """(TF1 model directory, its converted directory): a small model, and its weights assigned and
    saved as `convert` does, in this process (conftest's `small_model("two_classes")`; `convert` in a process of
    its own is test_convert_prints_only_the_projects_lines' subject, not the other tests')."""
    return small_model("two_classes").pair


@pytest.mark.slow
def test_convert_prints_only_the_projects_lines(small, tmp_path):
    src, _ = small
    proc = _cli("convert", src, "--out", str(tmp_path / "small_tf2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("converted ")
    assert "[migrate] reading " in proc.stderr  # progress still shows
    assert _foreign_lines(proc.stderr) == []


@pytest.mark.slow
def test_int8_onnx_export_prints_only_the_projects_lines(small, tmp_path):
    # onnxruntime.quantization logs on Python's root logger (its advice to pre-process the model).
    pytest.importorskip("tf2onnx", reason="the ONNX export needs tf2onnx (pip install '.[onnx-export]')")
    _, converted = small
    proc = _cli("export", converted, "--onnx", str(tmp_path / "m.onnx"), "--int8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "int8 QDQ" in proc.stdout and "[migrate] int8 QDQ calibrated on " in proc.stderr
    assert _foreign_lines(proc.stderr) == []


@pytest.mark.slow
def test_verify_with_measurement_prints_only_the_projects_lines(small, tmp_path):
    # Measured: the TF1 and TF2 sides run in worker processes of their own.
    src, out = small
    # With a memory limit far above the need and two batch sizes: the measurement's figures are
    # checked here too (the one verify run of the suite that measures; the 2018 zoo conversion
    # passes verify in tests/migrate/verify/test_verify.py's test_zoo_conversion_passes_on_the_generated_set), and
    # every line it prints within 100 columns on a terminal 1000 wide (tests/migrate/test_cli.py's
    # every-command check runs verify's other forms without measuring).
    json_path = tmp_path / "report.json"
    proc = _cli("verify", src, out, "--repeats", "2", "--batch", "3", "--memory-limit", "2048", "--json",
                str(json_path), columns=1000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "PASSED" in proc.stdout and "peak RSS" in proc.stdout and "allocator peak" in proc.stdout
    assert "[migrate] measuring TF2" in proc.stderr
    assert _foreign_lines(proc.stderr) == []
    assert [line for line in (proc.stdout + proc.stderr).splitlines() if len(line) > cli_common.COLUMNS] == []
    report = json.loads(json_path.read_text())
    # The limit reaches both measurement processes and changes nothing else.
    assert report["passed"] and report["memory"] == {"memory_growth": False, "memory_limit_mb": 2048}
    import tensorflow as tf
    for side in ("tf1", "tf2"):
        figures = report[side]
        assert figures["device"] == ("GPU:0" if tf.config.list_physical_devices("GPU") else "CPU:0")
        assert 0 < figures["peak_memory_bytes"] <= 2048 * 2**20 and figures["peak_rss_bytes"] > 0
        assert set(figures["latency_ms"]) == {"batch_1", "batch_3"}
        assert all(lat["median"] > 0 and lat["p90"] >= lat["median"] for lat in figures["latency_ms"].values())


@pytest.mark.parametrize("command", ["convert", "verify"])
@pytest.mark.parametrize("problem", ["missing", "corrupt"])
def test_bad_input_prints_one_error_line_and_nothing_of_tensorflow(small, tmp_path, command, problem):
    _, converted = small
    src = tmp_path / "model"
    if problem == "corrupt":
        src.mkdir()
        (src / "frozen_inference_graph.pb").write_bytes(b"\x0a\xff\xff\x01garbage")
    args = [command, str(src)] + (["--out", str(tmp_path / "out")] if command == "convert" else [converted])
    proc = _cli(*args, "--no-measure" if command == "verify" else "--quiet")
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(src) in errors[0], proc.stderr
    assert _foreign_lines(proc.stderr) == []


@pytest.mark.slow
def test_verbose_shows_tensorflows_lines(small):
    src, out = small
    proc = _cli("verify", src, out, "--no-measure", "--quiet", "--verbose")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Its Python log (the TF1 graph is pruned with the deprecated extract_sub_graph) and, on
    # x86 CPUs where TensorFlow runs oneDNN's kernels (its default on CPUs with AVX-512 VNNI, BF16
    # or AMX), the C++ notices its libraries print while they load. Where it runs Eigen's (CPUs
    # without AVX-512, or TF_ENABLE_ONEDNN_OPTS=0, which the child inherits) there is no such notice.
    assert re.search(r"WARNING:tensorflow:.*extract_sub_graph .* is deprecated", proc.stderr), proc.stderr
    if not memory.onednn_on():
        assert "oneDNN custom operations are on" not in proc.stderr, proc.stderr
    elif platform.machine().lower() in ("x86_64", "amd64"):
        assert "oneDNN custom operations are on" in proc.stderr and "absl::InitializeLog" in proc.stderr
    assert _foreign_lines(proc.stderr)


def test_every_command_has_verbose():
    parser = cli._parser()
    for args in (["convert"], ["verify"], ["predict", "converted", "image.jpg"], ["bench", "src", "converted"]):
        assert parser.parse_args(args).verbose is False
        assert parser.parse_args(args + ["--verbose"]).verbose is True


# ---- a missing path: refused before TensorFlow is imported ------------------------------------

# What a missing --labels file's line says to do (every command's, `commands.common.labels_problem`).
LABELS_WAY_OUT = "the model's label map, or `coco` for the COCO zoo's"

def test_missing_paths_are_refused_before_tensorflow_loads(small, tmp_path):
    """Every path argument of every command, missing, in one line naming it, exit 2, before
    `import tensorflow` (seconds); a swapped `verify CONVERTED SOURCE` likewise, with the order."""
    src, converted = small
    image = tmp_path / "image.jpg"
    image.write_bytes(b"")  # present (what is in it is checked later)
    record = tmp_path / "train.record"
    record.write_bytes(b"")  # present (an empty file is refused later, by the command)
    nope = str(tmp_path / "nope")
    records = ["--records", str(record)]
    cases = [
        (["convert", nope], f"{nope}: no such file or directory"),
        (["verify", nope], f"{nope}: no such file or directory"),
        (["verify", nope, converted], f"{nope}: no such file or directory"),
        (["verify", src, nope], f"{nope}: no such folder (`python -m migrate convert SRC` writes it)"),
        (["verify", src, converted, "--images", str(image), nope], f"{nope}: no such file or folder"),
        (["verify", converted, src], f"SRC comes first: `verify {src} {converted}`"),
        (["verify", converted, os.path.join(src, "model.ckpt")],
         f"SRC comes first: `verify {os.path.join(src, 'model.ckpt')} {converted}`"),
        (["verify", src, converted, "--tflite", nope], f"{nope}: no such file (--tflite)"),
        (["verify", src, converted, "--onnx", nope], f"{nope}: no such file (--onnx)"),
        (["predict", nope, str(image)], f"{nope}: no such directory, .tflite or .onnx file (convert's or export's output)"),
        (["predict", converted, str(image), nope], f"{nope}: no such file or folder"),
        (["predict", converted, str(image), "--labels", nope], f"{nope}: no such file (--labels): " + LABELS_WAY_OUT),
        (["evaluate", nope, *records], f"{nope}: no such file or directory"),
        (["evaluate", converted, "--records", nope], f"{nope}: no such file (--records)"),
        (["evaluate", converted, "--records", f"{nope}*.record"], f"{nope}*.record: no file matches this pattern "
                                                                  "(--records)"),
        (["evaluate", converted, *records, "--labels", nope], f"{nope}: no such file (--labels): " + LABELS_WAY_OUT),
        # Without --config too: the missing file, not the settings the converted model lacks.
        (["train", converted, "--train", nope], f"{nope}: no such file (--train)"),
        (["train", converted, "--train", str(record), "--eval", nope], f"{nope}: no such file (--eval)"),
        (["train", converted, "--train", str(record), "--labels", nope], f"{nope}: no such file (--labels): " + LABELS_WAY_OUT),
        (["train", converted, "--train", str(record), "--config", nope], f"{nope}: no such file (--config)"),
        (["train", nope, "--train", str(record)],
         f"{nope}: no such directory (expected the output of `migrate convert`)"),
        (["export", nope, "--tflite", str(tmp_path / "m.tflite")],
         f"{nope}: no such directory (expected the output of `migrate convert`)"),
        (["export", converted, "--tflite", str(tmp_path / "m.tflite"), "--int8", "--calibration", nope],
         f"{nope}: no such file or folder"),
        (["bench", nope, converted], f"{nope}: no frozen_inference_graph.pb (bench's TF1 side runs it)"),
        (["bench", src, nope], f"{nope}: not a converted model directory (no model_config.json)"),
    ]
    code = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from migrate.cli import main
        results = []
        for args in {[args for args, _ in cases]!r}:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                exit_code = main(args)
            results.append([exit_code, err.getvalue(), "tensorflow" in sys.modules])
        print(json.dumps(results))
    """)
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for (args, expected), (exit_code, err, tensorflow_loaded) in zip(cases, json.loads(proc.stdout)):
        assert (exit_code, err, tensorflow_loaded) == (2, f"error: {expected}\n", False), args


def test_a_checkpoint_prefix_is_not_a_missing_path(small):
    src, converted = small
    prefix = os.path.join(src, "model.ckpt")  # exists only as model.ckpt.index + .data-*
    assert not os.path.exists(prefix)
    for args in (["convert", prefix], ["verify", prefix, converted], ["verify"], ["convert"]):
        assert cli._missing_path(cli._parser().parse_args(args)) is None, args


# ---- the mechanism (migrate.common.console) ----------------------------------------------------------

def test_quiet_output_hides_tensorflows_warnings_and_log_not_the_projects():
    tf_logger = logging.getLogger("tensorflow")
    level, cpp = tf_logger.level, os.environ.get("TF_CPP_MIN_LOG_LEVEL")

    def warn_from(module):  # a warning attributed to `module`, as its own code raises it
        exec("import warnings\nwarnings.warn('from ' + __name__, UserWarning)", {"__name__": module})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with console.tensorflow_output(verbose=False):
            assert not tf_logger.isEnabledFor(logging.WARNING) and tf_logger.isEnabledFor(logging.ERROR)
            assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3" and os.environ[console.QUIET_ENV] == "1"
            for module in ("tensorflow.python.framework.ops", "keras.src.layers", "tf_slim.layers",
                           "ssd_mobilenet.memory", "migrate.verify", "kerasfoo"):
                warn_from(module)
        warn_from("tensorflow.python.framework.ops")  # the filter ends with the command
    assert [str(w.message) for w in caught] == ["from ssd_mobilenet.memory", "from migrate.verify",
                                                "from kerasfoo", "from tensorflow.python.framework.ops"]
    assert (tf_logger.level, os.environ.get("TF_CPP_MIN_LOG_LEVEL")) == (level, cpp)
    assert console.QUIET_ENV not in os.environ


def test_workers_of_a_quiet_command_start_quietly():
    # A worker that fails after TensorFlow has loaded: its stderr tail (in the error) is the
    # failure alone, without the notices TensorFlow's libraries print while they load.
    with pytest.raises(RunError) as raised:
        measure_isolated("migrate.common.console:no_such_function", {}, [np.zeros((1, 8, 8, 3), np.uint8)],
                         env={console.QUIET_ENV: "1"}, timeout=120)
    assert "AttributeError" in str(raised.value)
    assert not NOISE.search(str(raised.value)), str(raised.value)
