"""pipeline_schema: every real config passes; unknown fields, wrong kinds, non-members, oneof
conflicts and repeats are refused in one line that names the field and its line, within the
console's 100 columns for a config path of 25 characters."""

import glob
import os

import pytest

from tests.conftest import ZOO, needs_shared, zoo_path
from ssd_mobilenet.config import pipeline_messages as pm
from ssd_mobilenet.config import proto_kinds as kinds
from ssd_mobilenet.config.pipeline_reader import parse_pipeline_config, read_pipeline_config
from ssd_mobilenet.training.train_config import TrainingConfig
from ssd_mobilenet.errors import ConfigError

REAL_CONFIGS = sorted(glob.glob(os.path.join(ZOO, "*", "pipeline.config"))
                      + glob.glob(os.path.join(ZOO, "sample_configs", "*.config"))
                      + glob.glob(os.path.join(ZOO, "odapi_exports", "*", "pipeline.config")))
ZOO_2018 = ("ssd_mobilenet_v1_coco_2018_01_28", "pipeline.config")


def zoo_text(parts=ZOO_2018) -> str:
    with open(zoo_path(*parts)) as f:
        return f.read()


def line_of(text: str, snippet: str) -> int:
    """The 1-based line on which `snippet` first appears in `text`."""
    assert snippet in text, snippet
    return text[:text.index(snippet)].count("\n") + 1


# A config path of typical length (25 characters): the error line fits the console's 100 columns.
TYPICAL_PATH = "/tmp/cfgt/pipeline.config"


def refusal(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse_pipeline_config(text)
    assert len(f"error: {e.value.at(TYPICAL_PATH)}") <= 100, e.value.problem
    return e.value


@needs_shared
def test_the_zoo_holds_every_kind_of_real_config():
    # The zoo's exports (2017-2018), sample configs (plain, quantized, FPN, PPN) and the OD API's
    # own 2023 exports: a glob that found fewer would let the next test pass on nothing.
    assert len(REAL_CONFIGS) >= 11
    assert {os.path.basename(os.path.dirname(p)) for p in REAL_CONFIGS} >= {"sample_configs", "fpn_small", "ppn_small"}


@needs_shared
@pytest.mark.parametrize("path", REAL_CONFIGS, ids=lambda p: os.path.relpath(p, ZOO))
def test_every_real_config_passes_the_schema(path):
    root = parse_pipeline_config(path)
    assert root.child("model").child("ssd").child("feature_extractor") is not None


@needs_shared
@pytest.mark.parametrize("written, misspelt, problem", [
    # top level, model.ssd, three levels down, a repeated message, a oneof member, a deprecated field;
    # the line says which block (the whole dotted path would run past the console's width)
    ("train_config {", "train_confg {", 'no field "train_confg" (did you mean "train_config"?)'),
    ("num_classes: 90", "num_clases: 90", 'no field "num_clases" (did you mean "num_classes"?)'),
    ("iou_threshold: 0.600000023842", "iou_treshold: 0.5", 'no field "iou_treshold" (did you mean "iou_threshold"?)'),
    ("        epsilon: 0.0010000000475", "        epsilom: 0.0010000000475",
     'no field "epsilom" (did you mean "epsilon"?)'),
    ("  shuffle: false", "  shuffel: false", 'no field "shuffel" (did you mean "shuffle"?)'),
    ("    ssd_random_crop {", "    ssd_random_crops {", 'no field "ssd_random_crops" (did you mean "ssd_random_crop"?)'),
    # The TF 1.3-era export's config, which carries the since-deprecated anchorwise_output.
    ("anchorwise_output: true", "anchorwise: true", 'no field "anchorwise" (did you mean "anchorwise_output"?)'),
])
def test_misspelt_fields_are_refused_with_path_and_line(written, misspelt, problem):
    tf13 = ("custom_nc3_tf1.3_config_mismatch", "pipeline.config")
    text = zoo_text(tf13 if written.startswith("anchorwise") else ZOO_2018).replace(written, misspelt, 1)
    error = refusal(text)
    assert error.problem == problem
    assert error.line == line_of(text, misspelt.strip())
    assert error.at("dir/pipeline.config").args[0] == f"dir/pipeline.config:{error.line}: {problem}"


@needs_shared
def test_a_misspelling_the_inference_reader_ignored_is_refused():
    # Before the schema, iou_treshold read as "unset" and the model took the default 0.6.
    text = zoo_text().replace("iou_threshold: 0.600000023842", "iou_treshold: 0.5", 1)
    with pytest.raises(ConfigError, match=r'^line 105: no field "iou_treshold"'):
        read_pipeline_config(text)
    with pytest.raises(ConfigError, match=r'^line 105: no field "iou_treshold"'):
        TrainingConfig.from_pipeline_config(text)


@needs_shared
def test_a_field_one_level_too_high_is_pointed_to_its_message():
    text = zoo_text().replace("    post_processing {\n", "    post_processing {\n      iou_threshold: 0.5\n", 1)
    error = refusal(text)
    assert error.problem == '"iou_threshold" belongs in batch_non_max_suppression'
    assert error.line == line_of(text, "iou_threshold: 0.5")


@needs_shared
def test_an_unknown_field_names_its_block():
    # No declared name is close: the block it was written in is named (the line says which one).
    text = zoo_text().replace("    post_processing {\n", "    post_processing {\n      xyz: 1\n", 1)
    assert refusal(text).problem == 'no field "xyz" in post_processing'
    text = zoo_text().replace("model {", "xyz: 1\nmodel {", 1)
    assert refusal(text).problem == 'no field "xyz" at the top level'


@needs_shared
@pytest.mark.parametrize("written, wrong, problem", [
    ("score_converter: SIGMOID", "score_converter: SIGMOD", 'score_converter: no value SIGMOD (did you mean "SIGMOID"?)'),
    ("score_converter: SIGMOID", "score_converter: LOGIT", "score_converter: no value LOGIT (IDENTITY, SIGMOID, SOFTMAX)"),
    ("score_converter: SIGMOID", 'score_converter: "SIGMOID"', 'score_converter expects SIGMOID unquoted, got "SIGMOID"'),
    ("score_converter: SIGMOID", 'score_converter: "LOGIT"', 'score_converter: no value "LOGIT" (IDENTITY, SIGMOID, SOFTMAX)'),
    ("num_classes: 90", "num_classes: ninety", "num_classes expects an integer, got ninety"),
    ("num_classes: 90", "num_classes { }", "num_classes expects an integer, got a { ... } block"),
    ("batch_size: 24", "batch_size: -24", "batch_size expects an integer >= 0, got -24"),
    ("batch_size: 24", "batch_size: 24.0", "batch_size expects an integer >= 0, got 24.0"),
    ("num_classes: 90", "num_classes: 4294967296", "num_classes expects an integer, got 4294967296 (over 32 bits)"),
    ("iou_threshold: 0.600000023842", 'iou_threshold: "0.6"', 'iou_threshold expects a number, got "0.6"'),
    ("scale: true", "scale: yes", "scale expects true or false, got yes"),
    ('type: "ssd_mobilenet_v1"', "type: ssd_mobilenet_v1", 'type expects a quoted string ("..."), got ssd_mobilenet_v1'),
    ("    image_resizer {\n      fixed_shape_resizer {\n        height: 300\n        width: 300\n      }\n    }",
     "    image_resizer: 300", "image_resizer expects a { ... } block, got 300"),
])
def test_wrong_kinds_and_enum_values_are_refused(written, wrong, problem):
    text = zoo_text().replace(written, wrong, 1)
    error = refusal(text)
    assert error.problem == problem
    assert error.line == line_of(text, wrong.strip())


@needs_shared
def test_a_field_given_twice_is_refused_at_the_second():
    text = zoo_text().replace("num_classes: 90", "num_classes: 90\n    num_classes: 91", 1)
    error = refusal(text)
    assert error.problem == f"num_classes is set twice (first on line {line_of(text, 'num_classes: 90')})"
    assert error.line == line_of(text, "num_classes: 91")


@needs_shared
def test_two_members_of_a_oneof_are_refused():
    text = zoo_text().replace("    ssd_anchor_generator {",
                              "    multiscale_anchor_generator {\n    }\n    ssd_anchor_generator {", 1)
    error = refusal(text)
    # Both named; the line is the second's (the first is the line above its closing brace here).
    assert error.problem == "multiscale_anchor_generator or ssd_anchor_generator, not both"
    assert error.line == line_of(text, "ssd_anchor_generator {")


def test_spellings_protobuf_accepts_pass():
    # Text format's other spellings: floats with an f suffix, exponents, inf; octal and hex
    # integers; t/f/1/0 bools; enum names; the short repeated form; `<...>` blocks; `;` and `,`.
    parse_pipeline_config("""
      model < ssd { num_classes: 0x10; add_background_class: t,
        anchor_generator { ssd_anchor_generator { aspect_ratios: [1.0f, 2e0, .5] min_scale: 010 max_scale: inf } }
        image_resizer { fixed_shape_resizer { resize_method: AREA convert_to_grayscale: 0 } } } >
      eval_input_reader { shuffle: False }  eval_input_reader { shuffle: True }""")


def test_other_architectures_are_not_looked_into():
    # SSDConfig refuses them by name; their contents are not this table's business.
    root = parse_pipeline_config("model { faster_rcnn { num_classes: 3 anything_at_all { x: 1 } } }")
    assert root.child("model").child("faster_rcnn") is not None


def test_parse_errors_carry_their_line():
    error = refusal("model {\n  ssd {\n    num_classes 3\n  }\n}\n")
    # The line's text is left out of the message (the line number points at it).
    assert error.line == 3 and error.problem == 'text format: expected ":" or "{" after field "num_classes"'
    assert str(error).startswith("line 3: text format")


def test_every_message_a_field_names_is_in_the_table():
    for m in pm.MESSAGES.values():
        names = [f.name for f in m.fields]
        assert len(names) == len(set(names)), m.name
        for f in m.fields:
            kind = f.kind
            assert (kind in kinds.SCALARS or kind in pm.MESSAGES or isinstance(kind, (kinds.Enum, kinds.Message))), (m.name, f)
            if isinstance(kind, kinds.Enum) and f.default is not None:
                assert f.default in kind.members, (m.name, f)


@needs_shared
def test_train_names_the_config_file_and_line(tmp_path):
    # The training settings are looked for before anything runs; a misspelt block is not taken
    # for "no training settings here".
    from migrate.train import training_settings
    text = zoo_text().replace("train_config {", "train_confg {", 1)
    path = tmp_path / "pipeline.config"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        training_settings(str(tmp_path), config=str(path))
    assert str(e.value) == f'{path}:{line_of(text, "train_confg")}: no field "train_confg" (did you mean "train_config"?)'


def test_the_first_problem_in_the_file_is_named():
    # Read field by field, the second eval_input_reader's problem (line 3) would come before line 2's.
    error = refusal('eval_input_reader { shuffle: false }\ntrain_confg { }\neval_input_reader { shufle: true }\n')
    assert (error.line, error.problem) == (2, 'no field "train_confg" (did you mean "train_config"?)')
