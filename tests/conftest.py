"""Shared fixtures: real TF1 model directories built once per session from ../shared/zoo."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from ssd_mobilenet.detections import DETECTION_OUTPUTS
from tests.tiers import FIXTURE_TIERS, tier_of

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SSD_MIGRATE_SHARED", os.path.join(os.path.dirname(REPO), "shared"))
ZOO = os.path.join(SHARED, "zoo")
MAKE_FIXTURE = os.path.join(SHARED, "tools", "make_zoo_fixture.py")

ZOO_2018 = "ssd_mobilenet_v1_coco_2018_01_28"
ZOO_2017 = "ssd_mobilenet_v1_coco_2017_11_17"
DEPTHWISE = "custom_nc2_use_depthwise"
TF13 = "custom_nc3_tf1.3_config_mismatch"
QUANTIZED = "ssd_mobilenet_v1_quantized_300x300_coco14_sync_2018_07_18"

# /proc/cpuinfo of a CPU with AVX-512 but no bfloat16 or float16 units (an AWS m5 Xeon, Skylake-SP;
# the lines that matter), for the commands' reduced-precision warning.
SKYLAKE_SP = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8175M CPU @ 2.50GHz
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw avx512vl
"""


@pytest.fixture
def without_reduced_precision_units(tmp_path, monkeypatch):
    """This process sees the machine as a Skylake-SP Xeon without a GPU (`ssd_mobilenet.hardware`);
    returns the start of the warning line a command then ends with, given the precision."""
    from ssd_mobilenet import hardware
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SKYLAKE_SP)
    monkeypatch.setattr(hardware, "CPUINFO", str(cpuinfo))
    monkeypatch.setattr(hardware, "gpu_capabilities", lambda: [])
    return lambda precision: (f"warning: --precision {precision}: this machine has no "
                              f"{precision.split('_')[1]} units")


def unwrapped(stderr: str) -> str:
    """A command's stderr with the notes it wrapped to the terminal's width joined back into one
    line each (a wrapped note goes on over lines indented by four spaces)."""
    return stderr.replace("\n    ", " ")


def fits_100_columns(printed: str) -> bool:
    """Whether every line of `printed` is within 100 columns, a line holding one word (a path
    longer than the width, which wrapping cannot break) aside."""
    return all(len(line) <= 100 or len(line.split()) == 1 for line in printed.splitlines())


def warnings_in(stderr: str) -> list:
    """The `warning:` lines of a command's stderr."""
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def shared_available() -> bool:
    return os.path.isfile(MAKE_FIXTURE) and os.path.isdir(ZOO)


needs_shared = pytest.mark.skipif(not shared_available(), reason=f"ground truth not found at {SHARED}")

# The one reason a test may skip: ../shared is absent (a clone without the ground truth). Any other
# skip (a package the tests need that is not installed, say) fails the run: the README's setup
# installs everything the suite uses, so a skip there is a setup that no longer does.
SKIP_ALLOWED = f"ground truth not found at {SHARED}"
_other_skips = []


# Tests marked `models_git` read a tensorflow/models clone (scripts/pipeline_messages.py's source),
# which CI has not: without $SSD_MIGRATE_MODELS_GIT they are deselected (not skipped), and the
# summary says so in one line. Under pytest-xdist the workers collect, so each sends its count to
# the controller, which writes the summary.
MODELS_GIT = "SSD_MIGRATE_MODELS_GIT"
_without_models_git = {"count": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", f"models_git: needs a tensorflow/models clone named by ${MODELS_GIT}")
    _share_the_cores()


def _share_the_cores() -> None:
    """pytest-xdist's workers (two in the README's command) share the machine's cores, as `predict
    --engine beam`'s local workers do (`migrate.predict.beam`): each worker's TensorFlow, and the
    commands its tests start, run the worker's part of the cores as intra-op and inter-op threads
    (TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS, read when TensorFlow starts; a value already
    set is kept), not two pools as wide as the machine each, which spend their cores on each other
    (the suite's time with and without: docs/guides/contributing.md). A test whose subject is the
    threads sets its own."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
            os.environ.setdefault(name, threads)


def pytest_collection_modifyitems(config, items):
    """Marks every test with its tier (tests/tiers.py: what it needs, the heaviest of unit, model,
    parity, cli), so that `-m unit`, `-m "unit or model"` and so on select by need; deselects the
    `models_git` tests where no clone is named."""
    for item in items:
        relpath = os.path.relpath(str(item.path), os.path.join(REPO, "tests")).replace(os.sep, "/")
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        own = [d.func for name in item.fixturenames if name not in FIXTURE_TIERS for d in defs.get(name, ())
               if (getattr(d.func, "__module__", "") or "").startswith("tests.")]
        item.add_marker(tier_of(relpath, item.fixturenames, getattr(item, "function", None), own))
    _heavy_files_first(items)
    if os.environ.get(MODELS_GIT):
        return
    deselected = [item for item in items if item.get_closest_marker("models_git")]
    if deselected:
        items[:] = [item for item in items if not item.get_closest_marker("models_git")]
        config.hook.pytest_deselected(items=deselected)
    _without_models_git["count"] = len(deselected)
    if hasattr(config, "workeroutput"):
        config.workeroutput[MODELS_GIT] = len(deselected)


def _heavy_files_first(items) -> None:
    """Orders the tests file by file: the files holding `slow` tests first, those with most first,
    then the others, most tests first (a file's tests, and files that tie, keep the order pytest
    collected them in). pytest-xdist hands its two workers whole files in this order (`--dist
    loadfile --no-loadscope-reorder`, pyproject.toml), so a run ends on files of fast tests: a
    file of one long test (tests/test_leftovers.py's 13 commands) handed out last, as xdist's own
    order (most tests first) hands it, keeps one core busy while the other idles
    (docs/guides/contributing.md)."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(tests):
        return sum(t.get_closest_marker("slow") is not None for t in tests), len(tests)
    items[:] = [item for tests in sorted(files.values(), key=weight, reverse=True) for item in tests]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    count = getattr(node, "workeroutput", {}).get(MODELS_GIT, 0)
    _without_models_git["count"] = max(_without_models_git["count"], count)  # every worker collects all


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if SKIP_ALLOWED not in reason:
            _other_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _other_skips and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _without_models_git["count"]:
        terminalreporter.write_line(f"{_without_models_git['count']} deselected: ${MODELS_GIT} names no "
                                    "tensorflow/models clone (scripts/pipeline_messages.py --check)")
    if _other_skips:
        terminalreporter.write_line(f"error: {len(_other_skips)} tests skipped for a reason other than a "
                                    f"missing ../shared (the README's setup installs what the suite needs):",
                                    red=True)
        for line in _other_skips[:20]:
            terminalreporter.write_line(f"  {line}")


def zoo_path(*parts) -> str:
    return os.path.join(ZOO, *parts)


def built_once(tmp_path_factory, name: str, build) -> str:
    """The folder `name`, made by `build(folder)` once per test run: with pytest-xdist's workers
    (the README's command runs two) the first worker to ask builds it below the run's shared
    temporary folder while the others wait on a lock, then all read it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if folder.exists():
                shutil.rmtree(folder)  # a build that failed half-way
            folder.mkdir()
            build(folder)
            done.touch()
    return str(folder)


@pytest.fixture(scope="session")
def zoo_fixture(tmp_path_factory):
    """`zoo_fixture(name, perturb=None) -> dir`: a complete TF1 model directory built by
    ../shared/tools/make_zoo_fixture.py from the published graph, once per test run."""
    if not shared_available():
        pytest.skip(f"ground truth not found at {SHARED}")

    def make(name, perturb, out):
        cmd = [sys.executable, MAKE_FIXTURE, zoo_path(name), str(out)]
        if perturb:
            cmd += ["--perturb", perturb]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"make_zoo_fixture failed for {name}:\n{proc.stderr[-3000:]}")

    def build(name, perturb=None):
        folder = re.sub(r"\W", "_", name + (f"_perturbed_{perturb}" if perturb else ""))
        return built_once(tmp_path_factory, folder, lambda out: make(name, perturb, out))

    return build


@pytest.fixture(scope="session")
def quantized_fixture(zoo_fixture, tmp_path_factory):
    """The quantization-aware zoo graph as a TF1 model directory whose FakeQuant ranges look
    trained: each layer's weight range is its folded weights' min/max, activation ranges are
    seeded [0, 2..6] after ReLU6 and [-12..-4, 2..8] for the heads. (make_zoo_fixture sets every
    range to [-6, 6], which rounds most synthetic weights to 0 or one step.) Checkpoint, meta
    graph, pipeline.config, a frozen graph of the new weights and its reference outputs."""
    fx = zoo_fixture(QUANTIZED)
    return built_once(tmp_path_factory, "quantized_ranges", lambda out: _trained_looking_ranges(fx, out))


def _trained_looking_ranges(fx, out):
    import tensorflow as tf

    from migrate.tf1.frozen_graph import FrozenGraphRunner, freeze_inference_graph
    from migrate.tf1.sources import read_meta_graph

    reader = tf.train.load_checkpoint(os.path.join(fx, "model.ckpt"))
    weights = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    rng = np.random.default_rng(7)
    for name in sorted(weights):
        scope, quant, end = (["", ""] + name.rsplit("/", 2))[-3:]
        if quant == "weights_quant":
            layer = scope.replace("MobilenetV1/MobilenetV1/", "MobilenetV1/")
            depthwise = f"{layer}/depthwise_weights" in weights
            kernel = weights[f"{layer}/depthwise_weights" if depthwise else f"{layer}/weights"]
            if f"{layer}/BatchNorm/gamma" in weights:
                scale = weights[f"{layer}/BatchNorm/gamma"] / np.sqrt(weights[f"{layer}/BatchNorm/moving_variance"] + 1e-3)
                kernel = kernel * (scale[:, None] if depthwise else scale)
            weights[name] = np.float32(kernel.min() if end == "min" else kernel.max())
        elif quant == "act_quant":
            head = "Predictor" in scope
            weights[name] = np.float32(rng.uniform(-12, -4) if head else 0.0) if end == "min" else \
                np.float32(rng.uniform(2, 8) if head else rng.uniform(2, 6))
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(out / "model.ckpt"), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])
    (out / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    for f in ("model.ckpt.meta", "pipeline.config", "inputs.npz"):
        shutil.copy(os.path.join(fx, f), out)
    meta = read_meta_graph(os.path.join(fx, "model.ckpt.meta"))
    frozen = freeze_inference_graph(meta.graph_def, weights)
    (out / "frozen_inference_graph.pb").write_bytes(frozen.SerializeToString())
    runner = FrozenGraphRunner(frozen)
    images = np.load(os.path.join(fx, "inputs.npz"))["images"]
    np.savez(out / "reference.npz", **runner.run(images, {k: f"{k}:0" for k in DETECTION_OUTPUTS}))
    runner.close()


# Beside the `zoo_converted` directory: the conversion's stderr.
CONVERT_STDERR = "convert_stderr.txt"


@pytest.fixture(scope="session")
def zoo_converted(zoo_fixture, tmp_path_factory):
    """(TF1 fixture dir, its conversion by `python -m migrate convert`) of the 2018 zoo graph,
    once per session; tests read the conversion and write elsewhere."""
    src = zoo_fixture(ZOO_2018)
    return src, os.path.join(built_once(tmp_path_factory, "zoo_converted",
                                        lambda folder: _convert_with_console(src, folder, "zoo_tf2")), "zoo_tf2")


def _convert_with_console(src, folder, name: str, *extra) -> None:
    """`python -m migrate convert SRC --out folder/name --quiet [extra]` in this process, what the
    console showed written beside it (`CONVERT_STDERR`, read by test_convert)."""
    import contextlib
    import io

    from migrate.cli import main
    console = io.StringIO()
    with contextlib.redirect_stderr(console):
        assert main(["convert", src, "--out", str(folder / name), "--quiet", *extra]) == 0, console.getvalue()
    (folder / CONVERT_STDERR).write_text(console.getvalue())


# The OD API exporter's own FPN, PPN and plain SSD exports (their README says how they were made).
ODAPI_EXPORTS = os.path.join(ZOO, "odapi_exports")


@pytest.fixture(scope="session")
def odapi_converted(tmp_path_factory):
    """`odapi_converted(name) -> dir`: the export `ODAPI_EXPORTS/name` as `convert` writes it (check
    on), once per run."""
    if not shared_available():
        pytest.skip(f"ground truth not found at {os.path.dirname(ZOO)}")

    def build(name, folder):
        code, _, err = run_cli(["convert", os.path.join(ODAPI_EXPORTS, name), "--out", str(folder / "tf2"),
                                "--quiet"])
        assert code == 0, err

    return lambda name: os.path.join(built_once(tmp_path_factory, f"odapi_{name}",
                                                lambda folder: build(name, folder)), "tf2")


def mixed_image_folder(root) -> str:
    """`root` (a pathlib.Path) filled with images of mixed sizes and formats (the real photos when
    ../shared is there, generated PNG and JPEG too), a grayscale PNG, and a corrupt JPEG."""
    import glob

    from PIL import Image
    rng = np.random.default_rng(4)
    for name, (h, w) in {"a.png": (96, 200), "b.jpg": (300, 170)}.items():
        Image.fromarray(rng.integers(0, 256, (h, w, 3)).astype(np.uint8)).save(root / name, quality=90)
    Image.fromarray(rng.integers(0, 256, (64, 64)).astype(np.uint8)).save(root / "gray.png")
    for photo in sorted(glob.glob(os.path.join(SHARED, "photos", "*.jpg")))[:4]:
        os.symlink(photo, root / os.path.basename(photo))
    (root / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    return str(root)


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory):
    """A folder whose `tensorflow` package raises on import, to put first on PYTHONPATH."""
    stub = tmp_path_factory.mktemp("no_tensorflow")
    (stub / "tensorflow").mkdir()
    (stub / "tensorflow" / "__init__.py").write_text("raise ImportError('TensorFlow is not installed here')\n")
    return str(stub)


def without_tensorflow(args, stub):
    """`python -m migrate ARGS` where `import tensorflow` raises (`stub`: the `no_tensorflow` fixture)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([stub, REPO]))
    return subprocess.run([sys.executable, "-m", "migrate", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def json_lines(path) -> dict:
    """{image: line} of a `predict` JSON lines file."""
    return {line["image"]: line for line in map(json.loads, open(path))}


def same_predict_lines(ours: dict, ref: dict, atol: float) -> int:
    """Asserts that two runtimes' `predict` lines ({image: line}) agree: the same images and
    unreadable ones, each image's size, count, class ids and labels exactly, scores and boxes within
    `atol`; returns how many detections were compared."""
    assert sorted(ours) == sorted(ref)
    compared = 0
    for image, line in ours.items():
        expected = ref[image]
        if "error" in line:
            assert set(line) == {"image", "error"} == set(expected), image
            continue
        assert (line["height"], line["width"], line["num_detections"]) == (
            expected["height"], expected["width"], expected["num_detections"]), image
        assert [d["class_id"] for d in line["detections"]] == [d["class_id"] for d in expected["detections"]]
        assert [d["label"] for d in line["detections"]] == [d["label"] for d in expected["detections"]]
        for a, b in zip(line["detections"], expected["detections"]):
            assert abs(a["score"] - b["score"]) <= atol and np.allclose(a["box"], b["box"], rtol=0, atol=atol)
            compared += 1
    return compared


def run_cli(args) -> tuple:
    """(exit code, stdout, stderr) of `migrate.cli.main(args)` in this process."""
    import contextlib
    import io

    from migrate.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def check_detections(ours: dict, ref: dict, atol: float = 1e-5) -> None:
    """Detections agree: counts and classes exactly, scores and boxes within `atol` (numpy dicts)."""
    np.testing.assert_array_equal(ours["num_detections"], ref["num_detections"])
    for i, n in enumerate(ref["num_detections"].astype(int)):
        np.testing.assert_array_equal(ours["detection_classes"][i, :n], ref["detection_classes"][i, :n])
        np.testing.assert_allclose(ours["detection_scores"][i], ref["detection_scores"][i], rtol=0, atol=atol)
        np.testing.assert_allclose(ours["detection_boxes"][i], ref["detection_boxes"][i], rtol=0, atol=atol)


def assert_float_postprocessing(model) -> None:
    """An int8 `.onnx` file (an `onnx.ModelProto`): its post-processing (the `postprocess/` nodes,
    the NMS among them) reads no quantized or dequantized value, so the scores reach NMS in float32."""
    producer = {out: node for node in model.graph.node for out in node.output}
    post = [node for node in model.graph.node if node.name.startswith("postprocess/")]
    assert any(node.op_type == "NonMaxSuppression" for node in post)
    assert not [name for node in post for name in node.input
                if name in producer and producer[name].op_type in ("DequantizeLinear", "QuantizeLinear")]


def random_images(seed, n, h, w) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3)).astype(np.uint8)


def model_for_fixture(fixture_dir):
    """(model, graph_def): the Keras model of a TF1 model directory, configured the way
    `convert` configures it (pipeline.config + graph traits + weights; the TF 1.3 export's
    config says 1 class where its weights have 3, so the weights are trusted) and with the
    TF1 checkpoint's weights assigned."""
    from migrate.tf1 import assign, config_inference, sources
    from ssd_mobilenet import SSDMobileNetV1

    source = sources.open_source(fixture_dir)
    config, _ = config_inference.infer_config(source, trust_weights=True)
    model = SSDMobileNetV1(config)
    assign.assign(source.weights, model)
    return model, source.graph_def


def save_synthetic_model(directory: str, config, seed: int = 3):
    """Writes a converted model directory (what `ssd_mobilenet.load` reads) of `config` with the
    TF1 builder's seeded synthetic weights, assigned as `convert` assigns them; returns the model."""
    from migrate.tf1 import assign, builder
    from ssd_mobilenet import SSDMobileNetV1, detector

    model = SSDMobileNetV1(config)
    assign.assign(builder.synthetic_weights(config, seed=seed), model)
    os.makedirs(directory, exist_ok=True)
    detector.save(model, directory)
    return model


def smooth_noise(rng, h, w, c=3) -> np.ndarray:
    """uint8 [h, w, c]: noise blurred a little, so that JPEG keeps it close and a model sees structure."""
    x = rng.integers(0, 256, (h + 2, w + 2, c)).astype(np.float32)
    blurred = sum(x[i:i + h, j:j + w] for i in range(3) for j in range(3)) / 9.0
    return blurred.astype(np.uint8)


def write_image_folder(root, files: dict, truncated_from: str) -> None:
    """Writes `files` ({relative path: encoded bytes}) below `root`, plus `c_corrupt.jpg` (the first
    400 bytes of `files[truncated_from]`) and `notes.txt` (not an image)."""
    for name, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
    with open(os.path.join(root, "c_corrupt.jpg"), "wb") as f:
        f.write(files[truncated_from][:400])
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write("not an image")


# ---- suite time: the convert/verify group (test_convert, test_verify and their neighbours) -------

@pytest.fixture(scope="session")
def zoo_dir_converted(zoo_fixture, tmp_path_factory, request):
    """`zoo_dir_converted(name) -> (TF1 fixture dir, its conversion)`: a whole fixture directory
    as `python -m migrate convert DIR --quiet` writes it (check on; the TF 1.3 export with
    --trust-weights, its config's class count being wrong), once per run, its console beside
    (CONVERT_STDERR). The 2018 zoo graph's is `zoo_converted`; the quantization-aware graph's
    source is `quantized_fixture`."""
    if not shared_available():
        pytest.skip(f"ground truth not found at {SHARED}")

    def get(name):
        if name == ZOO_2018:
            return request.getfixturevalue("zoo_converted")
        src = request.getfixturevalue("quantized_fixture") if name == QUANTIZED else zoo_fixture(name)
        extra = ["--trust-weights"] if name == TF13 else []
        folder = "zoo_dir_converted_" + re.sub(r"\W", "_", name)
        return src, os.path.join(built_once(tmp_path_factory, folder,
                                            lambda out: _convert_with_console(src, out, "tf2", *extra)), "tf2")
    return get


# --- The small models: one per preset, each file built once per run when a test first asks ---

# The presets the tests share: (SSDConfig fields, the seed of the TF1 builder's synthetic weights).
# "plain": 3 classes, depth 0.25, 128x128, the zoo's post-processing (score threshold 1e-8, 100
# detections: NMS and the sort run on every image); "two_classes": the same with 2 classes (the
# commands' small model: bench, verify, convert's copies, the docs' blocks); "training": 3 classes
# with a score threshold of 0.05, as `train`'s and `evaluate`'s inputs.
SMALL = dict(depth_multiplier=0.25, image_height=128, image_width=128)
SMALL_PRESETS = {"plain": dict(num_classes=3, **SMALL),
                 "two_classes": dict(num_classes=2, **SMALL),
                 "training": dict(num_classes=3, score_threshold=0.05, **SMALL)}
SMALL_SEEDS = {"plain": 3, "two_classes": 0, "training": 3}


class SmallModel:
    """The small model of one preset (`SMALL_PRESETS`) with the TF1 builder's seeded synthetic
    weights (`SMALL_SEEDS`), and the files several tests read: each is built on first use, once per
    run (`built_once`); tests read them and write elsewhere."""

    def __init__(self, preset: str, tmp_path_factory):
        from ssd_mobilenet.config.ssd_config import SSDConfig
        self.preset, self.config, self._factory = preset, SSDConfig(**SMALL_PRESETS[preset]), tmp_path_factory
        self.seed = SMALL_SEEDS[preset]

    def _built(self, name: str, build) -> str:
        """The folder `small_{preset}_{name}`, made by `build(folder)` once per run."""
        return built_once(self._factory, f"small_{self.preset}_{name}", build)

    @property
    def converted(self) -> str:
        """A converted directory (what `ssd_mobilenet.load` reads): the weights assigned as `convert`
        assigns them (`save_synthetic_model`)."""
        folder = self._built("converted", lambda out: save_synthetic_model(str(out / "converted"), self.config,
                                                                           seed=self.seed))
        return os.path.join(folder, "converted")

    @property
    def tf1(self) -> str:
        """A TF1 model directory of the same weights (`migrate.tf1.builder.write_model_dir`: checkpoint,
        frozen graph, SavedModel, pipeline.config), what `convert`, `verify` and `bench` read."""
        def build(out):
            from migrate.tf1 import builder
            builder.write_model_dir(self.config, str(out / "tf1"),
                                    weights=builder.synthetic_weights(self.config, seed=self.seed))
        return os.path.join(self._built("tf1", build), "tf1")

    @property
    def pair(self) -> tuple:
        """(`tf1`, `converted`): the TF1 model and its conversion, for the commands that read both."""
        return self.tf1, self.converted

    @property
    def training_inputs(self) -> dict:
        """What `train` reads: "converted" (`converted`), "records" and "eval", the shapes set's
        training and eval records (24 and 6 images of 128 px, seed 1), "labels" its label map;
        "config", a training pipeline.config of the model
        (`tests/ssd_mobilenet/training/training_pipeline.pipeline`)."""
        def build(out):
            from ssd_mobilenet.training import shapes_dataset
            from tests.ssd_mobilenet.training.training_pipeline import pipeline
            shapes_dataset.write_shapes_dataset(str(out / "shapes"), num_train=24, num_eval=6, image_size=128,
                                                seed=1)
            fields = {k: v for k, v in SMALL_PRESETS[self.preset].items() if k != "num_classes"}
            (out / "train.config").write_text(pipeline(**fields))
        folder = self._built("training_inputs", build)
        shapes = os.path.join(folder, "shapes")
        return {"converted": self.converted, "records": os.path.join(shapes, "train.record"),
                "eval": os.path.join(shapes, "eval.record"), "labels": os.path.join(shapes, "label_map.pbtxt"),
                "config": os.path.join(folder, "train.config")}

    def _export_onnx(self, out) -> None:
        code, stdout, stderr = run_cli(["export", self.converted, "--onnx", str(out / "model.onnx")])
        assert code == 0, stderr
        (out / "stdout.txt").write_text(stdout)
        (out / "stderr.txt").write_text(stderr)

    @property
    def onnx(self) -> str:
        """`converted`'s `.onnx` file as `python -m migrate export CONVERTED --onnx FILE` writes it
        (in this process); `onnx_console` is what the command printed."""
        return os.path.join(self._built("onnx", self._export_onnx), "model.onnx")

    @property
    def onnx_console(self) -> tuple:
        """(stdout, stderr) of the `export --onnx` that wrote `onnx`."""
        folder = self._built("onnx", self._export_onnx)
        return tuple(open(os.path.join(folder, name)).read() for name in ("stdout.txt", "stderr.txt"))


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    """`small_model(preset="plain") -> SmallModel`: the one small model of that preset, for every
    test that needs a small model and reads it (a test whose subject is another config builds its
    own)."""
    models = {}

    def get(preset: str = "plain") -> SmallModel:
        if preset not in models:
            models[preset] = SmallModel(preset, tmp_path_factory)
        return models[preset]
    return get


@pytest.fixture(scope="session")
def quantized_converted(quantized_fixture, tmp_path_factory):
    """(`quantized_fixture`, a converted directory of it): the weights assigned as `convert`
    assigns them (`model_for_fixture`), saved as `ssd_mobilenet.load` reads them (no SavedModel and
    no self-check: test_convert converts the same directory with both), once per run."""
    def build(out):
        from ssd_mobilenet import detector
        model, _ = model_for_fixture(quantized_fixture)
        (out / "converted").mkdir()
        detector.save(model, str(out / "converted"))

    return quantized_fixture, os.path.join(built_once(tmp_path_factory, "quantized_converted", build), "converted")


@pytest.fixture(scope="session")
def quantized_tflite(quantized_converted, tmp_path_factory):
    """The integer `.tflite` file of `quantized_converted` as `python -m migrate export CONVERTED
    --tflite FILE --quiet` writes it (in this process), once per run."""
    _, converted = quantized_converted

    def build(out):
        code, _, stderr = run_cli(["export", converted, "--tflite", str(out / "model.tflite"), "--quiet"])
        assert code == 0, stderr

    return os.path.join(built_once(tmp_path_factory, "quantized_tflite", build), "model.tflite")
