"""scripts/pipeline_messages.py: its proto2 reader, the union's rules, the module it writes, and
(with a tensorflow/models clone named by SSD_MIGRATE_MODELS_GIT) that regenerating
ssd_mobilenet/config/pipeline_messages.py changes nothing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(REPO, "scripts", "pipeline_messages.py")
MODELS_GIT = "SSD_MIGRATE_MODELS_GIT"  # tests/conftest.py deselects `models_git` tests without it


def _script():
    spec = importlib.util.spec_from_file_location("pipeline_messages_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gen = _script()

PIPELINE = """
syntax = "proto2";
package object_detection.protos;
import "object_detection/protos/ssd.proto";
// the root every union starts from
message TrainEvalPipelineConfig {
  optional DetectionModel model = 1;
  extensions 1000 to max;
}
message DetectionModel {
  oneof model {
    Ssd ssd = 1;
    FasterRcnn faster_rcnn = 2;
  }
}
message FasterRcnn { optional int32 num_classes = 1; optional Unreached first_stage = 2; }
message Unreached { optional int32 x = 1; }
"""


def _ssd(fields: str) -> str:
    return ('syntax = "proto2";\npackage object_detection.protos;\n'
            f"message Ssd {{\n{fields}\n}}\n")


def _union(*ssd_bodies, defaults=0):
    """(enums, messages) of one snapshot per body of `Ssd`, dated a year apart from 2017."""
    snaps = [gen.snapshot({"pipeline": PIPELINE, "ssd": _ssd(body)}, f"c{i}", f"{2017 + i}-06-01")
             for i, body in enumerate(ssd_bodies)]
    return gen.union(snaps, defaults)


def _fields(messages, name="Ssd"):
    return {f.name: f for f in messages[name][1]}


def _module(enums, messages, last_date="2019-06-01"):
    """The module text render() writes, executed: its namespace."""
    namespace = {}
    exec(compile(gen.render(enums, messages, "# test", last_date), "<generated>", "exec"), namespace)
    return namespace


def test_tokens_drop_comments_and_keep_strings_whole():
    text = 'optional string s = 1 [default = "a // b"]; /* x\n y */ optional float f = 2 [default = -1e-3];'
    assert gen.tokens(text) == ["optional", "string", "s", "=", "1", "[", "default", "=", '"a // b"', "]", ";",
                                "optional", "float", "f", "=", "2", "[", "default", "=", "-1e-3", "]", ";"]


def test_parse_reads_nested_messages_and_enums_oneofs_maps_and_options():
    p = gen.parse("""
        syntax = "proto2";
        package object_detection.protos;
        import "object_detection/protos/a.proto";
        option java_package = "x";
        message Outer {
          reserved 4, 5;
          enum Mode { FAN_IN = 0; FAN_OUT = 1 [deprecated = true]; }
          message Inner { repeated float v = 1; }
          optional Mode mode = 1 [default = FAN_OUT];
          oneof choice {
            Inner inner = 2;
            string name = 3 [default = 'it\\'s'];
          }
          map<string, Inner> by_name = 6;
          required uint32 n = 7 [default = 0x10, deprecated = true];
        }
        """, "outer")
    assert p.imports == ["object_detection/protos/a.proto"]
    assert [m.name for m in p.messages] == ["Outer", "Outer.Inner"]
    assert [(e.name, e.members) for e in p.enums] == [("Outer.Mode", [("FAN_IN", 0), ("FAN_OUT", 1)])]
    outer = {f.name: f for f in p.messages[0].fields}
    assert (outer["mode"].type, outer["mode"].default) == ("Mode", "FAN_OUT")
    assert (outer["inner"].oneof, outer["name"].oneof, outer["name"].default) == ("choice", "choice", "it's")
    assert (outer["by_name"].type, outer["by_name"].label) == (("string", "Inner"), "repeated")
    assert (outer["n"].number, outer["n"].default, outer["n"].deprecated) == (7, "0x10", True)
    assert outer["mode"].oneof is None
    assert p.messages[1].fields[0].label == "repeated"


def test_parse_names_the_file_and_token_it_cannot_read():
    with pytest.raises(gen.ProtoError, match=r"ssd.proto: expected = .* found '1'"):
        gen.parse("message Ssd { optional int32 num_classes 1; }", "ssd")


def test_snapshot_resolves_types_innermost_scope_first_and_keeps_opaque_messages_empty():
    snap = gen.snapshot({"pipeline": PIPELINE, "ssd": _ssd("""
        message Loss { optional float w = 1; }
        optional Loss loss = 1;
        optional .object_detection.protos.Loss top_loss = 2;
        enum Kind { A = 0; }
        optional Kind kind = 3;
    """) + "message Loss { optional int32 top = 1; }"})
    fields = {f.name: f.type for f in snap.messages["Ssd"].fields}
    assert fields == {"loss": ("message", "Ssd.Loss"), "top_loss": ("message", "Loss"), "kind": ("enum", "Ssd.Kind")}
    assert snap.messages["FasterRcnn"].fields == []
    assert "Unreached" not in snap.messages  # only under FasterRcnn, which is opaque
    assert list(snap.enums) == ["Ssd.Kind"]


def test_snapshot_refuses_a_type_it_cannot_find():
    with pytest.raises(gen.ProtoError, match="Ssd: type 'Missing' is neither"):
        gen.snapshot({"pipeline": PIPELINE, "ssd": _ssd("optional Missing m = 1;")})


def test_union_widens_int32_to_float_whichever_came_first():
    _, messages = _union("optional float size = 1;", "optional int32 size = 1;")
    assert _fields(messages)["size"].kind == ("float",)
    _, messages = _union("optional uint32 size = 1 [default = 2];", "optional float size = 1 [default = 2.5];",
                         defaults=0)
    assert (_fields(messages)["size"].kind, _fields(messages)["size"].default) == (("float",), 2.0)


def test_union_refuses_a_type_change_neither_side_reads():
    with pytest.raises(gen.ProtoError, match=r"Ssd.flag: its type changed from \('bool',\) to \('string',\)"):
        _union("optional bool flag = 1;", "optional string flag = 1;")


def test_union_takes_the_default_of_the_defaults_commit_or_the_nearest():
    bodies = ("optional float w = 1 [default = 1.0];",
              "optional float w = 1 [default = 2.0]; optional bool late = 2 [default = true];",
              "optional float w = 1 [default = 3.0]; optional bool late = 2 [default = false];")
    assert _fields(_union(*bodies, defaults=1)[1])["w"].default == 2.0
    assert _fields(_union(*bodies, defaults=2)[1])["w"].default == 3.0
    # a field born after the defaults commit: its first default
    assert _fields(_union(*bodies, defaults=0)[1])["late"].default is True


def test_union_keeps_a_field_removed_later_in_its_place_and_dates_it():
    enums, messages = _union("optional int32 a = 1; optional bool gone = 2; optional int32 c = 3;",
                             "optional int32 a = 1; optional bool gone = 2; optional int32 c = 3;",
                             "optional int32 a = 1; optional int32 c = 3; optional int32 d = 4;")
    assert list(_fields(messages)) == ["a", "gone", "c", "d"]
    assert (_fields(messages)["gone"].first, _fields(messages)["gone"].last) == ("2017-06-01", "2018-06-01")
    text = gen.render(enums, messages, "# test", "2019-06-01")
    assert '        Field("gone", BOOL),  # 2017-06 to 2018-06 only\n' in text


def test_render_dates_a_removed_message_once_and_puts_a_long_comment_above_its_field():
    enums, messages = _union("message Head { optional int32 h = 1; } optional Head head = 1;"
                             "optional Head long_enough_a_name_to_push_the_fields_dating_comment_out_of_its_line = 2;",
                             "optional int32 n = 3;")
    text = gen.render(enums, messages, "# test", "2018-06-01")
    assert ('    Message("Ssd.Head", "ssd", (  # 2017-06 only\n'
            '        Field("h", INT32),\n') in text
    field = 'Field("long_enough_a_name_to_push_the_fields_dating_comment_out_of_its_line", "Ssd.Head"),'
    assert f"        # 2017-06 only:\n        {field}\n" in text


def test_union_merges_oneofs_nested_enums_and_maps_into_a_module_that_loads():
    enums, messages = _union("""
        enum Mode { A = 0; B = 1; }
        optional Mode mode = 1 [default = B];
        optional int32 fpn = 2;
        map<string, float> weights = 3;
    """, """
        enum Mode { A = 0; B = 1; C = 2; }
        optional Mode mode = 1 [default = C];
        oneof pyramid { int32 fpn = 2; int32 bifpn = 4; }
        map<string, float> weights = 3;
        optional float clip = 5 [default = -inf];
    """)
    assert enums == {"Ssd.Mode": ("A", "B", "C")}
    module = _module(enums, messages)
    ssd = module["message"]("Ssd")
    assert ssd.field("mode").kind == module["Enum"]("Ssd.Mode", ("A", "B", "C"))
    assert ssd.field("mode").default == "B"
    # a field once outside a oneof is in the oneof it joined: old configs never set its new partners
    assert (ssd.field("fpn").oneof, ssd.field("bifpn").oneof) == ("pyramid", "pyramid")
    assert ssd.field("clip").default == float("-inf")
    weights = ssd.field("weights")
    assert weights.repeated and weights.kind == module["map_entry"]("string", "float")
    assert module["message"]("FasterRcnn").opaque and module["message"]("FasterRcnn").fields == ()
    # a depth-first walk from the root, grouped by file
    assert list(module["MESSAGES"]) == ["TrainEvalPipelineConfig", "DetectionModel", "FasterRcnn", "Ssd"]


def test_render_keeps_lines_within_the_width():
    long_name = "A" * 60
    enums, messages = _union(f"enum {long_name} {{ " + " ".join(f"MEMBER_{i} = {i};" for i in range(12)) + " }"
                             f"optional {long_name} mode = 1; repeated float a_rather_long_field_name_to_wrap = 2;")
    text = gen.render(enums, messages, "# test", "2017-06-01")
    assert max(len(line) for line in text.splitlines()) <= gen.WIDTH
    assert _module(enums, messages, "2017-06-01")["message"]("Ssd").field("mode").kind.members[-1] == "MEMBER_11"


def _commit(repo, folder: str, files: dict, date: str):
    """Commits `files` ({stem: text}) as folder/STEM.proto of `repo`, dated `date`."""
    os.makedirs(os.path.join(repo, folder), exist_ok=True)
    for stem, text in files.items():
        with open(os.path.join(repo, folder, stem + ".proto"), "w") as f:
            f.write(text)
    env = {**os.environ, "GIT_AUTHOR_DATE": f"{date}T12:00:00", "GIT_COMMITTER_DATE": f"{date}T12:00:00"}
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
    subprocess.run(["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", date],
                   check=True, env=env)


def test_main_writes_from_every_commit_of_both_folders_and_checks(tmp_path, capsys):
    """A clone whose protos move from object_detection/ to research/ between two commits, the
    second of which drops a field; a third commit after UNTIL is not read."""
    repo = str(tmp_path / "models")
    subprocess.run(["git", "init", "-q", repo], check=True)
    _commit(repo, "object_detection/protos", {"pipeline": PIPELINE, "ssd": _ssd("optional bool old = 1;")},
            "2017-06-15")
    os.mkdir(os.path.join(repo, "research"))
    os.rename(os.path.join(repo, "object_detection"), os.path.join(repo, "research", "object_detection"))
    _commit(repo, "research/object_detection/protos", {"ssd": _ssd("optional int32 n = 2 [default = 3];")},
            "2019-01-10")
    _commit(repo, "research/object_detection/protos", {"ssd": _ssd("optional int32 later = 3;")}, "2023-01-10")
    out = str(tmp_path / "pipeline_messages.py")
    assert gen.main([repo, "--out", out]) == 0
    with open(out) as f:
        text = f.read()
    assert text.startswith("# generated by scripts/pipeline_messages.py from tensorflow/models; do not edit.\n"
                           "# 2 commits, ")
    namespace = {}
    exec(compile(text, out, "exec"), namespace)
    ssd = namespace["message"]("Ssd")
    assert [f.name for f in ssd.fields] == ["old", "n"] and ssd.field("n").default == 3
    assert '        Field("old", BOOL),  # 2017-06 only\n' in text
    assert gen.main([repo, "--check", "--out", out]) == 0
    assert capsys.readouterr().out == ""
    with open(out, "a") as f:
        f.write("# an edit\n")
    assert gen.main([repo, "--check", "--out", out]) == 1
    assert "-# an edit" in capsys.readouterr().out


def test_commits_behind_one_dated_out_of_order_are_read(tmp_path):
    """A commit dated before SINCE between two in the range (a skewed clock): `git log --since`
    would stop at it and never reach the older commit, whose field must still be in the union."""
    repo = str(tmp_path / "models")
    subprocess.run(["git", "init", "-q", repo], check=True)
    folder = "research/object_detection/protos"
    _commit(repo, folder, {"pipeline": PIPELINE, "ssd": _ssd("optional bool first = 1;")}, "2017-08-01")
    _commit(repo, folder, {"ssd": _ssd("optional bool skewed = 2;")}, "2016-01-01")
    _commit(repo, folder, {"ssd": _ssd("optional bool last = 3;")}, "2018-01-01")
    assert [date for _, date in gen.commits(os.path.join(repo, ".git"))] == ["2017-08-01", "2018-01-01"]


def test_main_refuses_a_folder_that_is_not_a_clone(tmp_path, capsys):
    assert gen.main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'nowhere'}: no such folder; give a clone of tensorflow/models\n"
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    assert gen.main([str(empty), "--out", str(tmp_path / "x.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {empty}: ") and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "x.py")


@pytest.mark.slow  # git log over tensorflow/models' whole history, then a few hundred commits
@pytest.mark.models_git
def test_regenerating_from_tensorflow_models_changes_nothing(capsys):
    """The committed module is what the script writes from the clone in $SSD_MIGRATE_MODELS_GIT."""
    code = gen.main([os.environ[MODELS_GIT], "--check"])
    printed = capsys.readouterr()
    assert code == 0, ("ssd_mobilenet/config/pipeline_messages.py is not what the protos give:\n"
                       f"{printed.err}{printed.out}")
