"""`ssd_mobilenet.label_map`: the COCO label map the package ships (`--labels coco`), and the one
warning for a label map that misses a model's classes or names others; without TensorFlow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO
from migrate import cli
from migrate.train import _label_map_classes
from ssd_mobilenet import label_map
from ssd_mobilenet.errors import InputError

# The ids COCO's annotations leave unused in 1..90 (its 80 categories keep the 2014 paper's 91
# numbering, less background 0 and 11 categories never annotated: 12, 26, 29, 30, 45, 66, 68,
# 69, 71, 83; 91 is above the zoo models' 90).
COCO_UNUSED = {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}


def test_the_coco_label_map_ships_with_the_package_and_holds_cocos_ids():
    path = label_map.builtin_path("coco")
    assert os.path.dirname(path) == os.path.join(REPO, "ssd_mobilenet", "label_maps")
    names = label_map.read("coco")
    assert sorted(names) == sorted(set(range(1, 91)) - COCO_UNUSED) and len(names) == 80
    assert len(set(names.values())) == 80
    # Spot checks against the OD API's data/mscoco_label_map.pbtxt (tensorflow/models): the first,
    # the last, and the names either side of a gap.
    assert (names[1], names[11], names[13], names[44], names[46], names[82], names[84], names[90]) == (
        "person", "fire hydrant", "stop sign", "bottle", "wine glass", "refrigerator", "book", "toothbrush")
    # As class texts (records written by the OD API's create_coco_tf_record.py name the category).
    ids = label_map.class_ids("coco")
    assert ids["person"] == 1 and ids["toothbrush"] == 90 and len(ids) == 80
    # Training on it keeps the zoo models' 90 class columns (ids unused below 90 keep theirs).
    assert _label_map_classes("coco") == 90


@pytest.mark.slow
def test_the_wheel_holds_the_label_maps_and_the_version(tmp_path):
    """pyproject.toml's package-data and dynamic version, as pip builds the wheel from a copy of
    the sources."""
    import migrate
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), src)
    for package in ("migrate", "ssd_mobilenet"):
        shutil.copytree(os.path.join(REPO, package), src / package, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for file in label_map.BUILTIN.values():
        assert f"ssd_mobilenet/label_maps/{file}" in names
    assert f"\nVersion: {migrate.__version__}\n" in metadata


def test_a_file_named_like_a_shipped_map_is_given_with_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "coco").write_text("item { id: 1 name: 'mine' }\n")
    assert label_map.read("./coco") == {1: "mine"}
    assert label_map.read("coco")[1] == "person"
    # and no path check refuses the name: it is not a file.
    os.remove(tmp_path / "coco")
    args = cli._parser().parse_args(["predict", str(tmp_path), str(tmp_path), "--labels", "coco"])
    assert cli._missing_path(args) is None


def test_id_ranges():
    assert label_map.id_ranges([38, 39, 40]) == "38-40"
    assert label_map.id_ranges([7, 1, 2, 3, 5, 9, 10]) == "1-3, 5, 7, 9-10"
    assert label_map.id_ranges([]) == ""


@pytest.mark.parametrize("ids, num_classes, expected", [
    # 37 pets on a 90-class COCO model: the case, 52 of 100 detections with "label": null.
    (range(1, 38), 90, 'warning: MAP: no name for the model\'s class ids 38-90 ("label": null)'),
    (range(1, 90), 90, 'warning: MAP: no name for the model\'s class id 90 ("label": null)'),
    # More ids than the model has: never predicted.
    (range(1, 91), 3, "warning: MAP: 87 ids beyond the model's 3 classes (4..90)"),
    ([1, 2, 5], 4, 'warning: MAP: 1 id beyond the model\'s 4 classes (5)'),
    ([2, 7], 9, 'warning: MAP: no name for the model\'s class ids 8-9 ("label": null)'),
    (range(1, 4), 3, None),
])
def test_coverage_warning_names_the_ids_in_ranges(ids, num_classes, expected):
    names = {i: f"c{i}" for i in ids}
    assert label_map.coverage_warning("MAP", names, num_classes, '"label": null') == expected


def test_coco_gaps_are_no_warning_and_an_unknown_class_count_is_none():
    coco = label_map.read("coco")
    assert label_map.coverage_warning("coco", coco, 90, "x") is None  # its 10 unused ids are gaps
    assert label_map.coverage_warning("coco", coco, None, "x") is None  # a file without the count


# The first lines of a zoo pipeline.config: protobuf text, but not a StringIntLabelMap.
PIPELINE_CONFIG = "model {\n  ssd {\n    num_classes: 90\n  }\n}\ntrain_input_reader {\n  label_map_path: 'x'\n}\n"


@pytest.mark.parametrize("text, problem", [
    (PIPELINE_CONFIG, "not a label map (top-level field 'model', not `item`)"),
    ('{"1": "person", "2": "car"}\n', "line 1: a brace, in neither a label map nor a names file"),
    ("# mine\nitem { id: 1 name: 'a' \n", 'expected "}"'),
    ("item { id: 0 name: 'person' }\n", "item 1 has id 0: class ids start at 1 (0 is only `background`)"),
    ("item { id: -2 name: 'a' }\n", "item 1 has id -2: class ids start at 1"),
])
def test_a_file_that_is_no_label_map_is_refused_naming_it(tmp_path, text, problem):
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    with pytest.raises(InputError) as e:
        label_map.read(str(bad))
    assert str(e.value).startswith(f"{bad}: ") and problem in str(e.value)


def test_what_the_od_api_accepts_reads(tmp_path):
    """The OD API's label_map_util reads items in any field order, comments, a first field other
    than an item's opening line, and id 0 for `background` (no class a detection has)."""
    path = tmp_path / "label_map.pbtxt"
    path.write_text("# my classes\n\nitem {\n  name: 'background'\n  id: 0\n}\nitem { display_name: 'cat' id: 1 "
                    "name: '/m/01yrx' }\nitem: { id: 2 name: \"dog\" }\n")
    assert label_map.read(str(path)) == {1: "cat", 2: "dog"}
    names = tmp_path / "names.txt"
    names.write_text("cat\ndog: a pet\n")  # a names file's line is the whole name
    assert label_map.read(str(names)) == {1: "cat", 2: "dog: a pet"}


@pytest.mark.parametrize("command", [
    ["predict", "MODEL", "IMAGE"], ["evaluate", "MODEL", "--records", "RECORD"],
    ["export", "MODEL", "--web", "OUT"], ["train", "MODEL", "--train", "RECORD"], ["convert", "MODEL"],
])
def test_every_command_takes_the_same_labels_and_refuses_the_same_files(tmp_path, capsys, command):
    """`--labels` goes through one check in every command: `coco` passes, a missing file is refused
    with the way out, a pipeline.config (exit 0 and `"label": "model {"` before) is refused in one
    line naming it; before any model is read."""
    for name in ("MODEL", "IMAGE", "RECORD"):
        (tmp_path / name).mkdir() if name == "MODEL" else (tmp_path / name).write_bytes(b"x")
    argv = [str(tmp_path / a) if a in ("MODEL", "IMAGE", "RECORD", "OUT") else a for a in command]
    assert cli._missing_path(cli._parser().parse_args(argv + ["--labels", "coco"])) is None
    (tmp_path / "pipeline.config").write_text(PIPELINE_CONFIG)
    missing, config = tmp_path / "label_map.pbtxt", tmp_path / "pipeline.config"
    assert cli.main(argv + ["--labels", str(missing)]) == 2
    assert capsys.readouterr().err == (f"error: {missing}: no such file (--labels): the model's label map, or "
                                       "`coco` for the COCO zoo's\n")
    assert cli.main(argv + ["--labels", str(config)]) == 2
    assert capsys.readouterr().err == (f"error: {config}: not a label map (top-level field "
                                       "'model', not `item`)\n")
    assert sorted(os.listdir(tmp_path)) == ["IMAGE", "MODEL", "RECORD", "pipeline.config"]
