"""Checks a parsed `pipeline.config` against the OD API's messages before any value is read.

The Object Detection API reads a config with protobuf's `text_format.Merge`, which refuses a
field its message does not declare: a misspelt `iou_treshold` stops training there. This
module does the same for the schema-free tree of `pipeline_text` against the tables of
`pipeline_messages`, so that a misspelling is not read as "unset, take the default". It
refuses, naming the field and the line it is on (`ConfigError.line`; the line says where, so
the message names the field and the block it is in, not its whole dotted path, and fits a
console line):

- a field its message does not declare, with the nearest declared name when one is close
  (`no field "iou_treshold" (did you mean "iou_threshold"?)`), or the sub-message it belongs
  in when it was written one level too high;
- a value of the wrong kind: a `{ ... }` block where a scalar is declared or a scalar where a
  message is, a number that does not parse, an unquoted string, a bool other than protobuf's
  spellings (true/false, True/False, t/f, 1/0);
- an enum value its enum does not declare (`score_converter: SIGMOD`);
- two members of one oneof (`ssd_anchor_generator` and `multiscale_anchor_generator`), and a
  non-repeated field given twice. `Merge` would keep the last member, and merge two blocks of
  one message field, where the readers here take the last block whole; both are mistakes in
  a hand-edited config, so they are refused rather than read either way.

It checks form, not meaning: which values this toolkit supports is the readers' business
(`pipeline_reader.PipelineReader`, `training.train_config`). Enum values are accepted by name only
(protobuf would also take their numbers, which no config in the wild uses).
"""

from __future__ import annotations

import difflib
import re

from ssd_mobilenet.config import pipeline_messages as pm
from ssd_mobilenet.config import proto_kinds as kinds
from ssd_mobilenet.config.pipeline_text import Scalar, TextMessage
from ssd_mobilenet.errors import ConfigError

ROOT = "TrainEvalPipelineConfig"


def check(root: TextMessage, message: str = ROOT) -> None:
    """Checks the tree `root` (from `pipeline_text.parse`) against the message `message`.

    Raises:
      ConfigError: the first problem in the file (by line), naming the field, with its `line`.
    """
    problems = []
    _check_message(root, pm.message(message), "", problems)
    if problems:
        raise min(problems, key=lambda e: e.line or 0)


def _check_message(msg: TextMessage, spec: kinds.Message, path: str, problems: list) -> None:
    if spec.opaque:
        return
    oneof_set = {}  # oneof group -> (member, line) of the member set first
    for name, values in msg.items():
        field = spec.field(name)
        if field is None:
            problems.append(ConfigError(_unknown(name, spec, path), _line(values[0])))
            continue
        where = f"{path}.{name}" if path else name
        if not field.repeated and len(values) > 1:  # a field that holds one value
            problems.append(ConfigError(f"{name} is set twice (first on line {_line(values[0])})", _line(values[1])))
        if field.oneof is not None:
            other = oneof_set.setdefault(field.oneof, (name, _line(values[0])))
            if other[0] != name:
                # Two members of one oneof: named both, the line is the second's.
                problems.append(ConfigError(f"{other[0]} or {name}, not both", _line(values[0])))
        for value in values:
            _check_value(value, field, where, problems)


def _check_value(value, field: kinds.Field, where: str, problems: list) -> None:
    """`where`: the field's dotted path, to descend with; messages name the field alone."""
    kind = field.kind
    if isinstance(kind, str) and kind not in kinds.SCALARS:
        kind = pm.message(kind)
    name = field.name
    if isinstance(kind, kinds.Message):
        if not isinstance(value, TextMessage):
            problems.append(ConfigError(f"{name} expects a {{ ... }} block, got {_shown(value)}", _line(value)))
        else:
            _check_message(value, kind, where, problems)
    elif isinstance(value, TextMessage):
        problems.append(ConfigError(f"{name} expects {_expected(kind)}, got a {{ ... }} block", _line(value)))
    elif _close_member(value, kind):
        problems.append(ConfigError(f'{name}: no value {value.text} (did you mean "{_close_member(value, kind)}"?)',
                                    _line(value)))
    elif isinstance(kind, kinds.Enum) and not isinstance(value, Scalar) and value in kind.members:
        problems.append(ConfigError(f"{name} expects {value} unquoted, got {_shown(value)}", _line(value)))
    elif isinstance(kind, kinds.Enum) and (not isinstance(value, Scalar) or value.text not in kind.members):
        problems.append(ConfigError(f"{name}: no value {_shown(value)} ({', '.join(kind.members)})", _line(value)))
    else:
        problem = _scalar_problem(value, kind)
        if problem is not None:
            problems.append(ConfigError(f"{name} expects {_expected(kind)}, got {_shown(value)}{problem}",
                                        _line(value)))


# protobuf's text format (its `ParseFloat`, `ParseInteger`): floats as Python's float() reads
# them, after an optional f/F suffix, and inf/nan; integers in decimal, hex (0x) or octal (leading 0).
_INFINITY_OR_NAN = re.compile(r"-?(inf(inity)?|nan)f?", re.IGNORECASE)
_BOOLS = ("true", "True", "t", "1", "false", "False", "f", "0")
_INT_RANGE = {kinds.INT32: (-2 ** 31, 2 ** 31 - 1), kinds.UINT32: (0, 2 ** 32 - 1)}


def _close_member(value, kind) -> "str | None":
    """The member of the enum `kind` nearest a misspelt `value`, if one is close (else None,
    and the message lists the members)."""
    if not isinstance(kind, kinds.Enum) or not isinstance(value, Scalar) or value.text in kind.members:
        return None
    close = difflib.get_close_matches(value.text, kind.members, n=1, cutoff=0.6)
    return close[0] if close else None


def _scalar_problem(value, kind) -> "str | None":
    """None when `value` is a valid `kind`; else "" or a hint to append to the message."""
    if kind == kinds.STRING:
        return None if isinstance(value, str) else ""
    if not isinstance(value, Scalar):
        return ""  # a quoted string where a number, bool or enum name is declared
    text = value.text
    if isinstance(kind, kinds.Enum):
        return None if text in kind.members else ""  # a close name is `_check_value`'s message
    if kind == kinds.BOOL:
        return None if text in _BOOLS else ""
    if kind == kinds.FLOAT:
        if _INFINITY_OR_NAN.fullmatch(text):
            return None
        try:
            float(text.rstrip("fF"))
        except ValueError:
            return ""
        return None
    try:
        number = _integer(text)
    except ValueError:
        return ""
    low, high = _INT_RANGE[kind]
    if low <= number <= high:
        return None
    return " (over 32 bits)" if kind == kinds.INT32 else "" if number < 0 else f" (at most {high})"


def _integer(text: str) -> int:
    body = text.lstrip("-")
    if len(body) > 1 and body[0] == "0" and body[1].isdigit():
        return int(text, 8)  # protobuf reads a leading 0 as octal
    return int(text, 0)


def _expected(kind) -> str:
    if isinstance(kind, kinds.Enum):
        return "one of " + ", ".join(kind.members)
    return {kinds.FLOAT: "a number", kinds.INT32: "an integer", kinds.UINT32: "an integer >= 0", kinds.BOOL: "true or false",
            kinds.STRING: 'a quoted string ("...")'}[kind]


def _shown(value) -> str:
    if isinstance(value, TextMessage):
        return "a { ... } block"
    if isinstance(value, Scalar):
        return value.text
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _line(value) -> int:
    return getattr(value, "line", 0)


def _unknown(name: str, spec: kinds.Message, path: str) -> str:
    """`no field "NAME"` with the nearest declared name; or the sub-message that declares NAME
    when it was written one level too high; or the block (PATH's last field) that lacks it."""
    names = [f.name for f in spec.fields]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.7)
    if close:
        return f'no field "{name}" (did you mean "{close[0]}"?)'
    for field in spec.fields:
        kind = field.kind
        if isinstance(kind, str) and kind in pm.MESSAGES and pm.message(kind).field(name) is not None:
            return f'"{name}" belongs in {field.name}'
    return f'no field "{name}" in {path.rsplit(".", 1)[-1]}' if path else f'no field "{name}" at the top level'
