"""The SavedModel `convert` writes, run unchanged by the clients users already have.

Each written SavedModel (fast float32, the default; `--exact`; `--precision mixed_bfloat16`) is
loaded in a fresh process by plain TensorFlow, as the TF2 OD API tutorial loads its models
(the loaded object called on the image tensor) and as TF Serving does (`serving_default`), and
by `saved_model_cli` (`show --all`; `run`, whose session-based loader stands in for TF Serving's
C++ loader). Every client's detections are compared with the TF1 graph's.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from PIL import Image

from tests.conftest import needs_shared, random_images, run_cli, warnings_in
from migrate.tf1.parity import MIXED_TOLERANCES, compare_detections, match_detections
from migrate.cli import main
from ssd_mobilenet import converted_dir
from ssd_mobilenet.formats.saved_model import writer as saved_model_lib
from ssd_mobilenet.detections import ALL_OUTPUTS

SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")

# The TF2 OD API tutorial's inference code (object_detection_tutorial / plot_object_detection_saved_model),
# on image 0, then the signature as TF Serving calls it on the whole batch: for each SavedModel named
# (one process of plain TensorFlow for every variant: TensorFlow's import is most of a process's time).
CLIENT = r"""
import sys
import numpy as np
import tensorflow as tf

images_npz, *pairs = sys.argv[1:]
images = np.load(images_npz)["images"]
for saved_model, out in zip(pairs[::2], pairs[1::2]):
    detect_fn = tf.saved_model.load(saved_model)
    input_tensor = tf.convert_to_tensor(images[0])[tf.newaxis, ...]
    detections = detect_fn(input_tensor)
    # The tutorial writes int(detections.pop("num_detections")): NumPy >= 2.3 refuses int() of the
    # [1]-shaped tensor (the OD API's own exports have the same [batch] shape), hence [0].
    num_detections = int(detections.pop("num_detections")[0])
    detections = {key: value[0, :num_detections].numpy() for key, value in detections.items()}
    detections["num_detections"] = num_detections
    detections["detection_classes"] = detections["detection_classes"].astype(np.int64)
    serve = detect_fn.signatures["serving_default"]
    batch = {k: v.numpy() for k, v in serve(input_tensor=tf.constant(images)).items()}
    np.savez(out, **{"tutorial_" + k: np.asarray(v) for k, v in detections.items()}, **batch)
"""

VARIANTS = {"fast": [], "exact": ["--exact"], "mixed_bfloat16": ["--precision", "mixed_bfloat16"]}


@pytest.fixture(scope="module")
def exported(zoo_converted, tmp_path_factory):
    """{variant: converted dir} of the 2018 zoo graph (the default conversion is the fast one)."""
    src, default = zoo_converted
    out = {"fast": default}
    for variant, args in VARIANTS.items():
        if variant != "fast":
            out[variant] = str(tmp_path_factory.mktemp("export") / variant)
            assert main(["convert", src, "--out", out[variant], "--quiet", *args]) == 0
    return src, out


@pytest.fixture(scope="module")
def client_results(exported, tmp_path_factory):
    """{variant: the CLIENT's outputs (npz path)}: every variant's SavedModel run by CLIENT in one fresh
    process of plain TensorFlow."""
    src, converted = exported
    folder = tmp_path_factory.mktemp("client")
    results = {variant: str(folder / f"{variant}.npz") for variant in VARIANTS}
    pairs = [p for variant in VARIANTS for p in (os.path.join(converted[variant], "saved_model"), results[variant])]
    proc = subprocess.run([sys.executable, "-c", CLIENT, os.path.join(src, "inputs.npz"), *pairs],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return results


def _agree(ours: dict, ref: dict, index: int, precision: str, converted: str) -> dict:
    """verify's criterion: exact in float32 (ties may swap), by class and IoU in bfloat16."""
    if precision == "float32":
        return compare_detections(ours, ref, index, atol=1e-5, rtol=0)
    with open(os.path.join(converted, "model_config.json")) as f:
        config = json.load(f)
    return match_detections(ours, ref, index, config["score_threshold"], MIXED_TOLERANCES[precision]["score_margin"],
                            config["max_total_detections"], config["iou_threshold"])


@needs_shared
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.slow
def test_written_saved_model_runs_in_the_od_api_client_and_serving_signature(exported, client_results, variant):
    src, converted = exported
    out = converted[variant]
    with open(os.path.join(out, "conversion_report.json")) as f:
        report = json.load(f)
    precision = "mixed_bfloat16" if variant == "mixed_bfloat16" else "float32"
    assert report["saved_model"]["variant"] == ("exact" if variant == "exact" else "fast")
    assert report["saved_model"]["precision"] == precision
    # The conversion check ran on the SavedModel as written, reloaded.
    assert report["check"]["saved_model"]["precision"] == precision
    assert all(d["ok"] for d in report["check"]["saved_model"]["detections"])

    got = dict(np.load(client_results[variant]))
    ref = dict(np.load(os.path.join(src, "reference.npz")))
    assert ref["num_detections"].min() > 0
    # The tutorial's image 0, cut to its detections as the tutorial does.
    n = int(got["tutorial_num_detections"])
    tutorial = {k: got["tutorial_" + k][None] for k in ("detection_boxes", "detection_scores")}
    tutorial["detection_classes"] = got["tutorial_detection_classes"][None].astype(np.float32)
    tutorial["num_detections"] = np.array([n], np.float32)
    assert got["tutorial_detection_classes"].dtype == np.int64 and len(got["tutorial_detection_boxes"]) == n
    padded = {k: np.pad(v, [(0, 0), (0, ref[k].shape[1] - n)] + [(0, 0)] * (v.ndim - 2))
              for k, v in tutorial.items() if k != "num_detections"}
    result0 = _agree({**padded, "num_detections": tutorial["num_detections"]}, {k: v[:1] for k, v in ref.items()},
                     0, precision, out)
    assert result0["ok"], result0
    # The serving signature on the whole batch: every output of the TF2 OD API's, float32.
    assert set(got) >= set(export_keys()) and all(got[k].dtype == np.float32 for k in export_keys())
    for i in range(len(ref["num_detections"])):
        r = _agree(got, ref, i, precision, out)
        assert r["ok"], r


def export_keys():
        return ALL_OUTPUTS


@needs_shared
@pytest.mark.parametrize("variant", ["fast", "exact"])
@pytest.mark.slow
def test_saved_model_cli_shows_and_runs_it(exported, variant, tmp_path):
    src, converted = exported
    saved_model = os.path.join(converted[variant], "saved_model")
    show = subprocess.run([SAVED_MODEL_CLI, "show", "--dir", saved_model, "--all"], capture_output=True, text=True)
    assert show.returncode == 0, show.stderr[-2000:]
    assert "signature_def['serving_default']" in show.stdout
    assert "inputs['input_tensor'] tensor_info:" in show.stdout and "dtype: DT_UINT8" in show.stdout
    assert "shape: (-1, -1, -1, 3)" in show.stdout
    for key in export_keys():
        assert f"outputs['{key}']" in show.stdout
    # `run` loads the SavedModel into a TF1 session, as TF Serving's C++ loader does: the
    # exact variant's variables must be found and restored (Keras 3 variables are not).
    images = np.load(os.path.join(src, "inputs.npz"))["images"]
    np.save(tmp_path / "images.npy", images)
    run = subprocess.run([SAVED_MODEL_CLI, "run", "--dir", saved_model, "--tag_set", "serve", "--signature_def",
                          saved_model_lib.SIGNATURE_KEY, "--inputs", f"input_tensor={tmp_path / 'images.npy'}",
                          "--outdir", str(tmp_path / "out")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    got = {k: np.load(tmp_path / "out" / f"{k}.npy") for k in export_keys()}
    ref = dict(np.load(os.path.join(src, "reference.npz")))
    for i in range(len(images)):
        r = compare_detections(got, ref, i, atol=1e-5, rtol=0)
        assert r["ok"], r


@pytest.fixture(scope="module")
def small_variants(small_model, tmp_path_factory):
    """{variant: converted dir} of the small model's TF1 directory (`conftest.small_model("two_classes")`: the zoo
    model's layers at depth 0.25, 128x128, 2 classes), `convert --no-check` with each variant's
    options: what the SavedModel holds is the subject here, the check of each variant on the zoo
    graph is test_written_saved_model_runs_in_the_od_api_client_and_serving_signature's."""
    src, _ = small_model("two_classes").pair
    root = tmp_path_factory.mktemp("variants")
    out = {}
    for variant, args in VARIANTS.items():
        out[variant] = str(root / variant)
        code, _, err = run_cli(["convert", src, "--out", out[variant], "--quiet", "--no-check", *args])
        assert code == 0, err
    return out


def test_saved_models_hold_their_weights_as_their_variant_says(small_variants):
    import tensorflow as tf
    converted = small_variants

    def stored(variant):
        prefix = os.path.join(converted[variant], "saved_model", "variables", "variables")
        return [n for n, _ in tf.train.list_variables(prefix) if n.endswith("VARIABLE_VALUE")]
    # Fast float32: one variable per weight of the folded model (batch norm folded into the
    # convolutions, each map's two heads merged: the zoo model's 199 weights, which the small
    # model has layer for layer, become 82).
    assert len(stored("fast")) == 82
    # Mixed precision: graph constants, their casts folded.
    assert stored("mixed_bfloat16") == []
    assert len(stored("exact")) == 199
    names = {v.name.split(":")[0] for v in tf.saved_model.load(os.path.join(converted["exact"], "saved_model")).weights}
    assert "BoxPredictor_0/BoxEncodingPredictor/biases" in names
    for variant, weights in (("fast", "variables"), ("exact", "variables"), ("mixed_bfloat16", "constants")):
        with open(os.path.join(converted[variant], "saved_model", "assets.extra", "ssd_mobilenet.json")) as f:
            metadata = json.load(f)
        assert metadata["weights"] == weights and metadata["detect_resized"] == (weights == "variables")
        # The converted directory's own config and checkpoint, as `load` checks the SavedModel against them.
        assert metadata["source"] == converted_dir.source_fingerprint(converted[variant])
        assert metadata["source"]["checkpoint_data_bytes"] > 1e6


@pytest.mark.parametrize("other", [["--precision", "mixed_bfloat16"], ["--constant-weights"]])
def test_exact_saved_model_is_float32_with_variables_only(tmp_path, capsys, other):
    code = main(["convert", str(tmp_path), "--out", str(tmp_path / "out"), "--exact", *other, "--quiet"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "--exact" in err and other[0] in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


# ---- verify --mode saved_model -----------------------------------------------------------------

def _perturbed_source(src, folder) -> str:
    """`folder` holding `src`'s frozen graph with Conv2d_7_pointwise's weights scaled by 1.5 (in this
    process, on the graph's constant) and its pipeline.config: a TF1 source one mid-network layer off."""
    import shutil

    from tensorflow.python.framework import tensor_util

    from migrate.tf1.sources import read_graph_def
    graph_def = read_graph_def(os.path.join(src, "frozen_inference_graph.pb"))
    (node,) = [n for n in graph_def.node
               if n.name == "FeatureExtractor/MobilenetV1/Conv2d_7_pointwise/weights" and n.op == "Const"]
    value = tensor_util.MakeNdarray(node.attr["value"].tensor)
    node.attr["value"].tensor.CopyFrom(tensor_util.make_tensor_proto(value * np.float32(1.5)))
    folder.mkdir()
    (folder / "frozen_inference_graph.pb").write_bytes(graph_def.SerializeToString())
    shutil.copy(os.path.join(src, "pipeline.config"), folder)
    return str(folder)


@needs_shared
@pytest.mark.slow
def test_verify_saved_model_mode_passes_the_conversion_and_fails_a_perturbed_source(exported, tmp_path, capsys,
                                                                                   without_reduced_precision_units):
    src, converted = exported
    # As on a CPU without bfloat16 units: the bfloat16 SavedModel's own precision (no --precision
    # given) is named in the one warning line; the float32 one warns of nothing.
    for variant in ("fast", "mixed_bfloat16"):
        out = tmp_path / f"{variant}.json"
        code = main(["verify", src, converted[variant], "--mode", "saved_model", "--no-measure", "--json", str(out)])
        captured = capsys.readouterr()
        printed = captured.out
        assert code == 0, printed
        warned = warnings_in(captured.err)
        if variant == "fast":
            assert warned == []
        else:
            assert len(warned) == 1 and warned[0].startswith(without_reduced_precision_units(variant)), warned
        report = json.loads(out.read_text())
        assert report["mode"] == "saved_model" and report["tensors"] == []
        assert report["precision"] == ("mixed_bfloat16" if variant == "mixed_bfloat16" else "float32")
        assert "not compared (a SavedModel shows its detections only)" in printed
    perturbed = _perturbed_source(src, tmp_path / "perturbed")
    # One image is enough for the divergence to show in the detections.
    (tmp_path / "image").mkdir()
    Image.fromarray(random_images(6, 1, 300, 300)[0]).save(tmp_path / "image" / "im0.png")
    out = tmp_path / "perturbed.json"
    code = main(["verify", perturbed, converted["fast"], "--mode", "saved_model", "--images", str(tmp_path / "image"),
                 "--no-measure", "--json", str(out)])
    assert code == 1
    assert "FIRST DIVERGENCE  detections of the SavedModel" in capsys.readouterr().out
    assert json.loads(out.read_text())["first_divergence"]["name"] == "detections of the SavedModel"
