"""`python -m migrate bench`: the TF1 graph against the converted model, side by side."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

from tests.conftest import (REPO, SHARED, SKYLAKE_SP, check_detections, needs_shared, random_images, run_cli,
                            unwrapped)
from migrate.bench import inputs, interleaving, sides, statistics, tables
from migrate.cli import main
from ssd_mobilenet import detector, hardware, loading, memory
from ssd_mobilenet.config.pipeline_reader import read_pipeline_config
from ssd_mobilenet.errors import InputError, RunError

PHOTOS = sorted(os.path.join(SHARED, "photos", f) for f in os.listdir(os.path.join(SHARED, "photos"))
                if f.endswith(".jpg")) if os.path.isdir(os.path.join(SHARED, "photos")) else []


def test_sizes_and_batches_parse_or_fail_with_the_flag_named():
    assert inputs.parse_sizes("300x300, 480x640") == [(300, 300), (480, 640)]
    assert inputs.parse_batches("1,8,32") == [1, 8, 32]
    for bad in ("300", "0x300", "axb"):
        with pytest.raises(InputError, match="--size"):
            inputs.parse_sizes(bad)
    for bad in ("0", "1,x", ""):
        with pytest.raises(InputError, match="--batch"):
            inputs.parse_batches(bad)


def test_smaller_batches_get_more_rounds_up_to_a_limit():
    assert [interleaving.rounds(15, b, [1, 8, 32]) for b in (1, 8, 32)] == [60, 60, 15]
    assert [interleaving.rounds(10, b, [1, 2]) for b in (1, 2)] == [20, 10]
    assert interleaving.rounds(10, 8, [8]) == 10


def test_ratio_interval_resamples_rounds_in_pairs():
    rng = np.random.default_rng(3)
    # A drift that slows both sides in the same rounds (x1 .. x2) cancels in every resample.
    base = 30.0 * rng.uniform(1.0, 2.0, 15)
    assert statistics.ratio_interval(0.8 * base, base) == pytest.approx([0.8, 0.8])
    # Independent noise on each side: an interval around the measured ratio, wider with fewer rounds.
    side = 24.0 * rng.uniform(0.9, 1.1, 40)
    base = 30.0 * rng.uniform(0.9, 1.1, 40)
    lo, hi = statistics.ratio_interval(side, base)
    assert lo < np.median(side) / np.median(base) < hi and hi - lo < 0.1
    lo5, hi5 = statistics.ratio_interval(side[:5], base[:5])
    assert hi5 - lo5 > hi - lo
    with pytest.raises(ValueError, match="paired"):
        statistics.ratio_interval(side[:5], base[:4])


def test_targets_say_when_the_interval_reaches_across_the_limit():
    def row(side, batch, ratio, ci, **more):
        return {"side": side, "size": [480, 640], "onednn": "default", "batch": batch,
                "latency_ratio": ratio, "latency_ratio_ci95": ci, **more}
    report = {"onednn": ["default"],
              "rows": [row("saved_model", 1, 0.78, [0.74, 0.83]),
                       row("saved_model", 8, 0.75, [0.72, 0.78], alloc_ratio=0.5, steady_rss_ratio=1.04),
                       row("detector", 8, 0.85, [0.8, 0.9])]}
    (b1_text, b1, b1_met), (b8_text, b8, b8_met), (_, alloc, alloc_met), (rss_text, rss, rss_met), \
        (det_text, _, det_met) = tables.targets(report)
    assert "`saved_model` latency at batch 1" in b1_text and b1_met and "0.74-0.83" in b1
    assert "reaches across 0.8x" in b1
    assert "batch 8" in b8_text and b8_met and "reaches across" not in b8
    assert alloc_met and "interval" not in alloc
    assert "steady-state process RSS" in rss_text and not rss_met and rss == "1.04x"
    assert "`detector` latency at batch 8" in det_text and not det_met
    # The reduced-precision target holds where the CPU has the units; elsewhere it is not judged.
    report["rows"].append(row("saved_model_mixed", 1, 1.9, [1.8, 2.0]))
    why = hardware.missing_units("mixed_bfloat16", cpuinfo=SKYLAKE_SP, gpus=[])
    (mixed_text, mixed, mixed_met), = [t for t in tables.targets({**report, "missing_units": why})
                                       if "saved_model_mixed" in t[0]]
    assert mixed_met is None and mixed.startswith("1.90x") and "not applicable: this machine has no bfloat16" in mixed
    (_, _, mixed_met), = [t for t in tables.targets({**report, "missing_units": None}) if "saved_model_mixed" in t[0]]
    assert mixed_met is False
    # The TFLite targets are judged at 300x300 only, where devices run the zoo model.
    report["rows"] += [dict(row("tflite", 1, 0.9, [0.8, 1.0], rss_ratio=0.5), size=[480, 640]),
                       dict(row("tflite", 1, 0.55, [0.5, 0.62], rss_ratio=0.15), size=[300, 300])]
    (lat_text, lat, lat_met), (rss_text, rss, rss_met) = [t for t in tables.targets(report) if "`tflite`" in t[0]]
    assert "latency at batch 1, 300x300: <= 0.6x" in lat_text and lat_met and "reaches across 0.6x" in lat
    assert "process peak RSS at batch 1, 300x300: <= 0.12x" in rss_text and not rss_met and rss == "0.15x"


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    assert main(["bench", str(tmp_path / "missing"), str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0] and "frozen_inference_graph.pb" in err[0]
    assert main(["bench", str(tmp_path), str(tmp_path), "--size", "300", "--quiet"]) == 2


@pytest.mark.slow
def test_existing_outputs_are_not_replaced_without_force(small_model, tmp_path, capsys, monkeypatch):
    src, out = small_model("two_classes").pair
    existing = tmp_path / "bench.json"
    existing.write_text("keep")
    assert main(["bench", src, out, "--json", str(existing), "--quiet"]) == 2
    assert "exists" in capsys.readouterr().err and existing.read_text() == "keep"
    assert main(["bench", src, out, "--sides", "tf1_session,nonsense", "--quiet"]) == 2
    assert "nonsense" in capsys.readouterr().err
    # --plot without matplotlib (the optional extra): refused before anything runs.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["bench", src, out, "--plot", str(tmp_path / "p.png"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "matplotlib" in err and "p.png" in err
    assert not (tmp_path / "p.png").exists()
    monkeypatch.delitem(sys.modules, "matplotlib")
    assert main(["bench", src, out, "--plot", str(tmp_path / "p.png"), "--batch", "8", "--quiet"]) == 2
    assert "give two or more (--batch 1,8)" in capsys.readouterr().err
    assert main(["bench", src, out, "--memory-growth", "--memory-limit", "100", "--quiet"]) == 2
    assert "exclude" in capsys.readouterr().err
    for bad in (["--repeats", "0"], ["--warmup", "-1"], ["--memory-limit", "-5"],
                ["--cold-runs", "0", "--photos", str(tmp_path)], ["--photos", str(tmp_path / "none")]):
        assert main(["bench", src, out, *bad, "--quiet"]) == 2, bad
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and len(err.splitlines()) == 1 and bad[0] in err, err


# One bench run of every kind of side on the small model, read by the two cases below: the TF1
# session, the library's detector and a SavedModel bench exports (saved_model_exact), and the TFLite
# files (exported by the same export process), at two sizes and batches 1 and 2, with cold starts over
# two photos. The other runners' outputs: test_runners_give_the_tf1_detections.
TF_SIDES = ("tf1_session", "detector", "saved_model_exact")
EVERY_SIDE = TF_SIDES + sides.TFLITE_SIDES
SIZES = ((128, 128), (96, 160))


@pytest.fixture(scope="module")
def every_side_run(small_model, tmp_path_factory):
    """{"report", "printed", "md", "png", "src"} of `bench` over `EVERY_SIDE`, `SIZES`, batches 1
    and 2, with --photos (two of the shared photos), --json, --markdown and --plot."""
    if not PHOTOS:
        pytest.skip(f"ground truth not found at {SHARED}")
    src, out = small_model("two_classes").pair
    root = tmp_path_factory.mktemp("bench_every_side")
    json_path, md_path, png_path = root / "bench.json", root / "benchmarks.md", root / "bench.png"
    photos = root / "photos"
    photos.mkdir()
    for photo in PHOTOS[1:3]:  # 1352x900 and 800x450
        os.symlink(photo, photos / os.path.basename(photo))
    code, printed, err = run_cli(["bench", src, out, "--batch", "1,2", "--size", "128x128,96x160", "--sides",
                                  ",".join(EVERY_SIDE), "--repeats", "2", "--warmup", "1", "--json", str(json_path),
                                  "--markdown", str(md_path), "--plot", str(png_path), "--photos", str(photos),
                                  "--cold-runs", "1", "--quiet"])
    assert code == 0, err
    return {"report": json.loads(json_path.read_text()), "printed": printed, "md": md_path.read_text(),
            "png": png_path.read_bytes(), "src": src}


@needs_shared
@pytest.mark.slow
def test_bench_measures_every_side_against_the_tf1_session(every_side_run):
    report, table, md = every_side_run["report"], every_side_run["printed"], every_side_run["md"]
    rows = report["rows"]
    assert {(r["side"], tuple(r["size"]), r["batch"]) for r in rows if r["side"] in TF_SIDES} == {
        (s, size, b) for s in TF_SIDES for size in SIZES for b in (1, 2)}
    for r in rows:
        assert r["rounds"] == {1: 4, 2: 2}[r["batch"]]  # twice the rounds at half the batch
        assert r["latency_ms"]["median"] > 0 and r["latency_ms"]["p90"] >= r["latency_ms"]["median"]
        lo, hi = r["latency_ratio_ci95"]
        assert lo <= r["latency_ratio"] <= hi
        assert r["side"] in table
        if r["side"] not in TF_SIDES:
            continue  # the TFLite sides' rows: test_tflite_sides_run_at_batch_1_and_every_size
        # Every side in its own process: real allocator and RSS figures, the baseline's ratio 1.
        assert r["alloc_transient_bytes"] > 0 and r["peak_rss_bytes"] >= r["rss_bytes"] > 100 * 2**20
        # Loading the model and its first call, in that process: more than a timed run of the batch.
        mem = report["memory"][r["side"]]
        assert r["ready_s"] == mem["build_s"] + mem["first_call_s"] > r["latency_ms"]["median"] / 1000.0
        if r["side"] == "tf1_session":
            assert r["latency_ratio"] == 1.0 and r["alloc_ratio"] == 1.0
            assert r["latency_ratio_ci95"] == [1.0, 1.0]
    # The allocator peak grows with the batch for the TF1 graph (one activation set per image).
    peak = {r["batch"]: r["alloc_transient_bytes"] for r in rows if r["side"] == "tf1_session"
            and r["size"] == [128, 128]}
    assert peak[2] > peak[1]
    assert "python -m migrate bench" in md and "| tf1_session |" in md and "## Targets" in md
    assert "interleaved rounds per batch: 4 at batch 1, 2 at batch 2" in md
    assert report["env"]["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    # Whether TensorFlow ran oneDNN's kernels or Eigen's is said with every figure (the worker
    # inherits this process's TF_ENABLE_ONEDNN_OPTS and CPU).
    state = f"default ({'on' if memory.onednn_on() else 'off'})"
    assert report["onednn_on"] == {"default": memory.onednn_on()}
    assert f"oneDNN: {state} (off: Eigen's kernels)" in md and f"| tf1_session | {state} |" in md
    # Cold start: every side's fresh process over the photos, in the users' environment (no BFC
    # allocator), timed from its start; the TF1 session is every ratio's baseline.
    cold = report["cold"]
    assert [p["width"] for p in cold["photos"]] == [1352, 800] and cold["runs"] == 1
    assert "TF_CPU_ALLOCATOR_USE_BFC" not in cold["env"]
    assert [r["side"] for r in cold["rows"]] == list(EVERY_SIDE)
    for r in cold["rows"]:
        assert 0 < r["first_detections_s"] < r["wall_s"]
        if r["side"] in TF_SIDES:
            assert r["tensorflow_imported"] and r["peak_rss_bytes"] > 300 * 2**20
        if r["side"] == "tf1_session":
            assert r["wall_s_ratio"] == r["first_detections_s_ratio"] == r["peak_rss_bytes_ratio"] == 1.0
    assert "## Cold start on photos" in md and "| detector | " in md.split("## Cold start on photos")[1]
    assert "`detector` cold on photos, peak RSS: <= 0.85x TF1" in md
    assert "| first detections s |" in table
    # This machine's peak in each precision and every row's share of it: the small model's
    # multiply-adds a frame (its convolutions at 128x128) times its frames a second.
    assert set(report["peak"]) == {"float32", "bfloat16", "int8"}
    assert all(p["mac_per_s"] > 1e8 for p in report["peak"].values())
    small = report["multiply_adds"]
    assert 0 < small < 1_237_129_408 / 4  # under a quarter of the zoo model's: depth 0.25 at 128x128
    for r in report["rows"]:
        assert r["mac_per_s"] == pytest.approx(small * r["batch"] * 1000 / r["latency_ms"]["median"])
        assert 0 < r["peak_share"] < 1  # a side with its pre- and post-processing cannot beat a plain product
    assert "This machine's peak, a 1024x1024 matrix product: float32 " in md and "| GMAC/s (of peak) |" in md
    # The plot (matplotlib is in the dev extra): a PNG of a real figure, not an empty canvas.
    data = every_side_run["png"]
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000


@pytest.mark.slow
def test_runners_give_the_tf1_detections(small_model, tmp_path):
    # On the small model: the runners load and feed what bench measures; the zoo graph's SavedModels
    # against its TF1 graph are test_export's and test_verify's subject (the same exports).
    src, small_out = small_model("two_classes").pair
    from ssd_mobilenet.formats.saved_model import writer as saved_model_lib
    out = str(tmp_path / "converted")  # the small pair's converted directory with convert's default SavedModel
    shutil.copytree(small_out, out)
    saved_model_lib.export_saved_model(detector.load_model(out), os.path.join(out, "saved_model"),
                                       saved_model_lib.FAST_VARIANT, "float32")
    images = random_images(5, 2, 128, 128)
    ref = sides.runner("tf1_session", src, out)(images)
    assert ref["num_detections"].min() > 0
    for side in ("tf1_wrap_function", "saved_model"):
        check_detections(sides.runner(side, src, out)(images), ref)
    # The SavedModels bench exports: the exact one within 1e-5 (ties may swap against the
    # session's folded arithmetic), the bfloat16 one by class and IoU.
    from migrate.tf1.parity import compare_detections, match_detections
    with open(os.path.join(out, "model_config.json")) as f:
        config = json.load(f)
    paths = sides.export_sides(out, str(tmp_path), ["saved_model_constants", "saved_model_exact", "saved_model_mixed"])
    # The default SavedModel with its weights as constants (the warm-latency lever).
    check_detections(sides.runner("saved_model_constants", src, out, paths["saved_model_constants"])(images), ref)
    with open(os.path.join(paths["saved_model_constants"], "assets.extra", "ssd_mobilenet.json")) as f:
        assert json.load(f)["weights"] == "constants"
    exact = sides.runner("saved_model_exact", src, out, paths["saved_model_exact"])(images)
    mixed = sides.runner("saved_model_mixed", src, out, paths["saved_model_mixed"])(images)
    for i in range(len(images)):
        assert compare_detections(exact, ref, i, atol=1e-5, rtol=0)["ok"]
        assert match_detections(mixed, ref, i, config["score_threshold"], 0.05,
                                config["max_total_detections"], config["iou_threshold"])["ok"]


@pytest.fixture(scope="module")
def tflite_path(small_model, tmp_path_factory):
    """The float32 `.tflite` file bench exports for the small model (the default export: any size)."""
    _, out = small_model("two_classes").pair
    return sides.export_sides(out, str(tmp_path_factory.mktemp("bench_tflite")), ["tflite"])["tflite"]


@needs_shared
@pytest.mark.slow
def test_tflite_sides_run_at_batch_1_and_every_size(every_side_run):
    report, printed, src = every_side_run["report"], every_side_run["printed"], every_side_run["src"]
    cells = {(r["side"], tuple(r["size"]), r["batch"]) for r in report["rows"]}
    everywhere = {(s, b) for s in SIZES for b in (1, 2)}
    # The TF sides everywhere; the TFLite files (one photo of any size per call) at batch 1, every size.
    assert cells == {(side, *c) for side in TF_SIDES for c in everywhere} | {
        (side, size, 1) for side in ("tflite", "tflite_int8") for size in SIZES}
    assert report["tflite"] == {"threads": os.cpu_count(), "model_size": [128, 128], "any_size": True, "batch": 1,
                                "quantization_aware": False, "not_measured": ["128x128/b2", "96x160/b2"]}
    frozen = os.path.getsize(os.path.join(src, "frozen_inference_graph.pb"))
    base = report["memory"]["tf1_session"]
    # Every memory process runs the TFLite sides' cells first, in the same order.
    assert base["keys"][:2] == ["128x128/b1", "96x160/b1"] and base["batches"][1]["shape"] == [1, 96, 160, 3]
    for size in ([128, 128], [96, 160]):
        rows = {r["side"]: r for r in report["rows"] if r["size"] == size and r["batch"] == 1}
        assert rows["tf1_session"]["file_bytes"] == frozen
        for side in ("tflite", "tflite_int8"):
            r = rows[side]
            # Interleaved with the session in the same rounds: paired times, a ratio with its interval.
            assert r["rounds"] == rows["tf1_session"]["rounds"] == 4
            lo, hi = r["latency_ratio_ci95"]
            assert r["latency_ratio"] > 0 and lo <= r["latency_ratio"] <= hi
            # Its own process, without TensorFlow: no allocator peak (the interpreter's arena is its own),
            # less RSS than the TF1 session's process after the same cells (the TensorFlow runtime).
            mem = report["memory"][side]
            assert mem["tensorflow_imported"] is False and mem["keys"] == ["128x128/b1", "96x160/b1"]
            assert r["alloc_transient_bytes"] is None and r.get("alloc_ratio") is None
            assert r["peak_rss_bytes"] >= r["rss_bytes"] > 0 and 0 < r["rss_ratio"] < 1
            assert r["rss_ratio"] == pytest.approx(r["peak_rss_bytes"] / base["batches"][1]["peak_rss_bytes"])
            assert r["ready_s"] == mem["build_s"] + mem["first_call_s"] > 0
    # The file sizes are the exported files': int8 weights take a quarter of float32's bytes.
    assert 0 < rows["tflite_int8"]["file_bytes"] < rows["tflite"]["file_bytes"] / 2
    # The console's memory table (after the latency table): the file's size, no allocator cells.
    memory_table = printed.split("\n\n")[1]
    tflite_line = next(line.split() for line in memory_table.splitlines() if line.startswith("tflite "))
    assert tflite_line.count("n/a") == 2 and f"{rows['tflite']['file_bytes'] / 2**20:.1f}" in tflite_line
    settings = f"LiteRT's Interpreter(num_threads={os.cpu_count()})"
    printed = unwrapped(printed)  # the settings note, wrapped to 100 columns
    assert settings in printed and "batch 1 at every size" in printed and "measured at 128x128" not in printed
    assert "process without TensorFlow" in printed and "not at 128x128/b2, 96x160/b2" in printed
    md = every_side_run["md"]
    assert settings in md and "- `tflite`: " in md and "- `tflite_int8`: " in md and "XNNPACK" in md
    assert "never imports TensorFlow" in md and "a process that imported TensorFlow" not in md
    # Their cold start over the photos: a process without TensorFlow, holding less than the TF1 session's.
    cold = {r["side"]: r for r in report["cold"]["rows"]}
    for side in ("tflite", "tflite_int8"):
        assert cold[side]["tensorflow_imported"] is False
        assert 0 < cold[side]["peak_rss_bytes_ratio"] < 1 and 0 < cold[side]["first_detections_s"]


def test_tflite_sides_need_batch_1_and_any_size_will_do(small_model, tmp_path, capsys, monkeypatch):
    src, out = small_model("two_classes").pair
    json_path = tmp_path / "bench.json"
    assert main(["bench", src, out, "--sides", "tflite_int8", "--size", "128x128", "--batch", "2",
                 "--json", str(json_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batch 1" in err[0] and "--batch" in err[0], err
    assert not json_path.exists()
    # The default export takes photos of any size: sizes without the model's are fine.
    assert inputs.check_tflite(out, ["tflite"], [(96, 96), (64, 64)], [1]) == ((128, 128), True, False)
    # A file of one size (a resize TFLite has no builtin for) would need the model's size in --size.
    from ssd_mobilenet.formats import network
    monkeypatch.setattr(network, "any_size", lambda config, input_type: False)
    with pytest.raises(InputError, match="--size 96x96,64x64,128x128"):
        inputs.check_tflite(out, ["tflite"], [(96, 96), (64, 64)], [1])
    assert inputs.check_tflite(out, ["tflite"], [(128, 128)], [1, 2]) == ((128, 128), False, False)
    assert not sides.applies("tflite", (96, 96), 1, (128, 128)) and sides.applies("tflite", (96, 96), 1, None)
    assert not sides.applies("tflite", (96, 96), 2, None) and sides.applies("tf1_session", (96, 96), 2, (128, 128))


def test_tflite_memory_process_never_imports_tensorflow(small_model, tflite_path, tmp_path):
    """The TFLite sides' memory worker with a `tensorflow` on its PYTHONPATH that cannot be
    imported: it measures, and says TensorFlow is not loaded. A runner that needs TensorFlow
    fails there (the stub is what that process sees)."""
    from migrate.bench import litert_memory
    src, out = small_model("two_classes").pair
    stub = tmp_path / "no_tensorflow"
    (stub / "tensorflow").mkdir(parents=True)
    (stub / "tensorflow" / "__init__.py").write_text("raise ImportError('tensorflow is not available here')\n")
    env = {"PYTHONPATH": str(stub)}
    images = [random_images(1, 1, 128, 128), random_images(2, 1, 90, 200)]
    kwargs = {"side": "tflite", "src": src, "converted": out, "exported": tflite_path, "threads": 1}
    result = litert_memory.measure_without_tensorflow("migrate.bench.sides:runner", kwargs, images, warmup=1,
                                                      repeats=1, env=env)
    assert result["tensorflow_imported"] is False and result["runtime"].startswith("LiteRT ")
    assert [b["shape"] for b in result["batches"]] == [[1, 128, 128, 3], [1, 90, 200, 3]]
    assert result["peak_rss_bytes"] >= result["rss_bytes"] > 0 and result["peak_memory_bytes"] is None
    assert result["build_s"] > 0 and result["first_call_s"] > 0 and result["env"]["PYTHONPATH"] == str(stub)
    with pytest.raises(RunError, match="tensorflow is not available here"):
        litert_memory.measure_without_tensorflow("migrate.bench.sides:mixed_precision", {}, images[:1], env=env)


def test_tflite_runner_gives_the_tf1_detections(small_model, tflite_path):
    # The runner bench times feeds the file's uint8 input and returns the four outputs as the TF
    # sides do; within 1e-5 of the TF1 session (TFLite's kernels round in the last float32 bits,
    # tests/ssd_mobilenet/formats/tflite/test_tflite_writer.py; counts, classes and order exactly), at the model's size and
    # at another (the file resizes the photo with the graph's kernel).
    src, out = small_model("two_classes").pair
    ref_runner = sides.runner("tf1_session", src, out)
    ours = sides.runner("tflite", src, out, tflite_path, threads=1)
    for h, w in ((128, 128), (96, 160)):
        images = random_images(5, 1, h, w)
        ref = ref_runner(images)
        assert ref["num_detections"].min() > 0
        check_detections(ours(images), ref)
    with pytest.raises(ValueError, match="one image"):
        ours(random_images(5, 2, 128, 128))


@pytest.mark.slow  # a fresh process with oneDNN's verbose log (~15 s)
def test_kernels_counts_every_convolution_of_a_call_and_the_filters_reordered_each_call(small_model):
    """`scripts/kernels.py`'s profile of the small model with its weights as variables (`load`'s default
    in float32): per call, as many 1x1, depthwise and kxk convolution primitives as the folded model
    has layers of each, and filter reorders on every call (a variable's filter is reordered per call;
    constants are cached). Where TensorFlow runs Eigen's kernels (CPUs without AVX-512, TF_ENABLE_ONEDNN_OPTS=0), the
    profile says so in one line instead of counting the primitives Eigen's products call."""
    from migrate.bench import kernels
    from ssd_mobilenet import layers
    src, out = small_model("two_classes").pair
    summary = kernels.profile("detector", src, out, size=(96, 160), batch=1, calls=3, warmup=1)
    assert summary["onednn"] == memory.onednn_on() and summary["wall_ms_per_call"] > 0
    if not summary["onednn"]:
        assert summary["rows"] == [] and summary["reorders"] == []
        text = kernels.format_summary(summary)
        assert "\n" not in text and text.endswith("nothing to count (TF_ENABLE_ONEDNN_OPTS=1 for oneDNN)"), text
        return
    model = loading.load(out, freeze_weights=False).model
    convs = [l for l in model._flatten_layers(include_self=False) if isinstance(l, layers.SlimConv)]
    expected = {"convolution depthwise": sum(c.depthwise for c in convs),
                "convolution 1x1": sum(not c.depthwise and c.kernel_size == 1 for c in convs),
                "convolution kxk": sum(not c.depthwise and c.kernel_size > 1 for c in convs)}
    counted = {}
    for row in summary["rows"]:
        counted[row["class"]] = counted.get(row["class"], 0) + row["per_call"]
    assert {k: counted.get(k, 0) for k in expected} == expected
    assert summary["isa"]
    assert counted.get("reorder", 0) >= 1 and summary["reorders"]
    assert "convolution 1x1" in kernels.format_summary(summary)


@pytest.mark.slow
def test_cold_memory_notes_every_stage_of_a_fresh_process(small_model, tmp_path):
    from PIL import Image

    from migrate.bench import cold_memory
    src, out = small_model("two_classes").pair
    rng = np.random.default_rng(0)
    for name, (h, w) in {"a.jpg": (90, 160), "b.png": (200, 120)}.items():
        Image.fromarray(rng.integers(0, 256, (h, w, 3)).astype(np.uint8)).save(tmp_path / name)
    names = ["Python and the project's modules", "import tensorflow", "model loaded", "first photo", "all photos",
             "after malloc_trim(0)"]
    for setting in ("default", "grappler_off"):
        stages = cold_memory.measure_stages("tf1_session", src, out, str(tmp_path), setting=setting)
        assert [s["stage"] for s in stages] == names[:len(stages)] and len(stages) >= 5
        # Linux counts resident pages per thread and adds them up from time to time: VmRSS and
        # VmHWM read a few hundred KiB off (`SPLIT_RSS_COUNTING`).
        slack = 2**20
        assert all(b["peak"] >= a["peak"] - slack for a, b in zip(stages, stages[1:]))
        assert all(s["rss"] <= s["peak"] + slack for s in stages)
        # TensorFlow's libraries are mapped files; its import alone holds hundreds of MiB.
        assert stages[1]["file"] > 100 * 2**20 and stages[1]["rss"] > 3 * stages[0]["rss"]
        assert stages[2]["threads"] > 1


# ---- scripts/bench.py --model: the zoo's FPN and PPN configs ----------------------------------

SCRIPT = os.path.join(REPO, "scripts", "bench.py")
# The zoo configs at the small model's scale (the measured run builds them as they are).
SMALL = dict(depth_multiplier=0.25, image_height=128, image_width=128, num_classes=3)


@needs_shared
@pytest.mark.slow
def test_model_option_builds_the_zoo_config_as_a_tf1_model_that_converts(tmp_path):
    """`--model fpn_640` / `ppn_300` read the zoo's sample configs as FPN and PPN; `ppn_300` (the
    same code path as `fpn_640`, cheaper) built by the TF1 builder at the small model's scale is
    that config and converts with its check."""
    from migrate.bench import zoo_models
    zoo = {name: read_pipeline_config(os.path.join(SHARED, "zoo", folder, config))
           for name, (_, folder, config) in zoo_models.MODELS.items() if config is not None}
    assert {name: (c.feature_extractor_type, c.anchor_generator_type, c.image_height) for name, c in zoo.items()} == {
        "fpn_640": ("ssd_mobilenet_v1_fpn", "multiscale_anchor_generator", 640),
        "ppn_300": ("ssd_mobilenet_v1_ppn", "ssd_anchor_generator", 300)}
    src = zoo_models.make("ppn_300", SHARED, str(tmp_path / "tf1"), **SMALL)
    assert read_pipeline_config(os.path.join(src, "pipeline.config")) == zoo["ppn_300"].replace(**SMALL)
    assert main(["convert", src, "--out", str(tmp_path / "tf2"), "--quiet"]) == 0
    with open(tmp_path / "tf2" / "conversion_report.json") as f:
        assert json.load(f)["check"]["passed"]


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fpn_small", "ppn_small"])
def test_bench_measures_fpn_and_ppn_beside_their_tf1_session(odapi_converted, tmp_path, name):
    """The OD API exporter's FPN and PPN exports (../shared/zoo/odapi_exports) and their conversions,
    measured side by side as `--model fpn_640` / `ppn_300` measure the zoo's."""
    from tests.conftest import ODAPI_EXPORTS
    json_path = tmp_path / "bench.json"
    assert main(["bench", os.path.join(ODAPI_EXPORTS, name), odapi_converted(name), "--batch", "1", "--size",
                 "128x128", "--sides", "tf1_session,saved_model", "--repeats", "1", "--warmup", "1", "--no-memory",
                 "--json", str(json_path), "--quiet"]) == 0
    rows = json.loads(json_path.read_text())["rows"]
    assert {r["side"] for r in rows} == {"tf1_session", "saved_model"}
    assert all(r["latency_ms"]["median"] > 0 for r in rows)


def test_script_writes_its_pages_only_where_told(tmp_path):
    """scripts/bench.py's pages go into --out's folder, or nowhere without --out or --publish (a line
    says so), and docs/, where --publish writes them, stays as it was. The report is the published
    one (docs/benchmarks.json: batches 1 and 8, so a plot too), then its batch 1 alone (no plot)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    docs = os.path.join(os.path.dirname(SCRIPT), os.pardir, "docs")
    tree = lambda: {f: open(os.path.join(docs, f), "rb").read() for f in os.listdir(docs)  # noqa: E731
                    if os.path.isfile(os.path.join(docs, f))}
    before = tree()
    report = json.loads(before["benchmarks.json"])
    said = []
    for argv in ([], ["--out", str(tmp_path / "pages")]):
        args, default_name = script.parse_args(["--src", "tf1_dir", "--batch", "1,8", "--no-cold", *argv])
        script.write_pages(report, args, default_name, said.append)
    assert said[0].startswith("nothing written: --out DIR, or --publish for docs/, writes benchmarks.md")
    assert os.listdir(tmp_path) == ["pages"]
    assert sorted(os.listdir(tmp_path / "pages")) == ["benchmarks.json", "benchmarks.md", "benchmarks.png"]
    assert f"--src tf1_dir --no-cold --out {tmp_path / 'pages'}\n" in (tmp_path / "pages" / "benchmarks.md").read_text()
    # A run of one batch has no plot: the earlier run's does not stay beside its page.
    one_batch = {**report, "batches": [1], "rows": [r for r in report["rows"] if r["batch"] == 1]}
    args, default_name = script.parse_args(["--src", "tf1_dir", "--batch", "1", "--no-cold", "--out",
                                            str(tmp_path / "pages")])
    script.write_pages(one_batch, args, default_name, said.append)
    assert sorted(os.listdir(tmp_path / "pages")) == ["benchmarks.json", "benchmarks.md"]
    assert ".png" not in (tmp_path / "pages" / "benchmarks.md").read_text()
    assert tree() == before
    with pytest.raises(SystemExit):
        script.parse_args(["--out", str(tmp_path), "--publish"])


def test_model_option_refuses_src_beside_it_and_a_missing_zoo_in_one_line(tmp_path):
    import subprocess
    run = subprocess.run([sys.executable, SCRIPT, "--src", str(tmp_path), "--model", "ppn_300"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "--src and --model exclude each other" in run.stderr
    run = subprocess.run([sys.executable, SCRIPT, "--model", "fpn_640", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SSD_MIGRATE_SHARED": str(tmp_path / "no_shared")})
    lines = run.stderr.splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and "sample_configs" in lines[0] and lines[0].endswith(
        "not found (the fpn_640 model is made from it)")
    assert not os.listdir(tmp_path)  # nothing written


def test_constant_filter_sides_get_a_latency_process_of_their_own_on_onednn_only():
    every = ["tf1_session", "saved_model", "saved_model_constants", "detector_constants", "tflite"]
    assert sides.latency_groups(every, onednn=True) == [["tf1_session", "saved_model", "tflite"],
                                                        ["tf1_session", "saved_model_constants", "detector_constants"]]
    assert sides.latency_groups(every, onednn=False) == [every]
    # Nothing to keep apart: no TensorFlow 2 side with variable filters beside them.
    assert sides.latency_groups(["tf1_session", "saved_model_constants", "tflite"], onednn=True) == [
        ["tf1_session", "saved_model_constants", "tflite"]]


def test_a_side_of_another_process_is_compared_with_that_process_tf1_session():
    first = {"tf1_session": {"8x8/b1": [10.0, 10.0]}, "saved_model": {"8x8/b1": [8.0, 8.0]}}
    times = {**first, "saved_model_constants": {"8x8/b1": [6.0, 6.0]},
             sides.OWN_BASELINE: {"saved_model_constants": {"8x8/b1": [20.0, 20.0]}}}
    report = statistics._report({"1": times}, {}, ["tf1_session", "saved_model", "saved_model_constants"], [(8, 8)],
                                [1], 2, 1, {})
    ratios = {r["side"]: (r["latency_ratio"], r["latency_ratio_ci95"]) for r in report["rows"]}
    assert ratios == {"tf1_session": (1.0, [1.0, 1.0]), "saved_model": (0.8, [0.8, 0.8]),
                      "saved_model_constants": (0.3, [0.3, 0.3])}


@needs_shared
@pytest.mark.slow
def test_bench_on_onednn_runs_the_constants_side_in_a_second_process(odapi_converted, tmp_path, capsys):
    """`--onednn 1` (oneDNN's kernels run on any x86 CPU when asked), on the OD API exporter's PPN export
    and its conversion: the constants SavedModel beside a TF1 session of its own, in a second latency
    process, every side with its row."""
    from tests.conftest import ODAPI_EXPORTS
    src, out = os.path.join(ODAPI_EXPORTS, "ppn_small"), odapi_converted("ppn_small")
    json_path = tmp_path / "bench.json"
    assert main(["bench", src, out, "--batch", "1", "--size", "128x128", "--sides",
                 "tf1_session,saved_model,saved_model_constants", "--repeats", "1", "--warmup", "1", "--no-memory",
                 "--onednn", "1", "--json", str(json_path)]) == 0
    printed = unwrapped(capsys.readouterr().err)
    assert "interleaved latency, oneDNN 1, process 1 of 2: tf1_session, saved_model" in printed
    assert "interleaved latency, oneDNN 1, process 2 of 2: tf1_session, saved_model_constants" in printed
    report = json.loads(json_path.read_text())
    assert report["onednn_on"] == {"1": True}
    rows = {r["side"]: r for r in report["rows"]}
    assert set(rows) == {"tf1_session", "saved_model", "saved_model_constants"}
    for r in rows.values():
        lo, hi = r["latency_ratio_ci95"]
        assert r["latency_ms"]["median"] > 0 and lo <= r["latency_ratio"] <= hi
