"""Declarative reading of one protobuf text message: what this toolkit does with each field.

The fields themselves (names, kinds, proto defaults) are `pipeline_messages`' tables, and a
config has been checked against them (`pipeline_schema`) before anything here reads it. A
`Uses` table says, for one message, which fields are `READ` (returned, with the proto default
where unset), `IGNORED` (accepted, with the reason in `why`), `DEFAULT_ONLY` (accepted at the
proto default, refused otherwise) or `REFUSED` (a sub-message that must not be set). Every
other field of the message is `DEFAULT_ONLY`: a field this toolkit does not reproduce is
never honoured silently, whichever OD API release added it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ssd_mobilenet.config import pipeline_messages as pm
from ssd_mobilenet.config import proto_kinds as kinds
from ssd_mobilenet.config.pipeline_reader import PipelineReader, proto_default
from ssd_mobilenet.config.pipeline_text import TextMessage
from ssd_mobilenet.config.ssd_config import float_text
from ssd_mobilenet.errors import ConfigError

READ, IGNORED, DEFAULT_ONLY, REFUSED = "read", "ignored", "default_only", "refused"
# The reason for a field no table lists: training here does not reproduce it.
_NOT_REPRODUCED = ""


@dataclass(frozen=True)
class Uses:
    """What is done with the fields of the message `message` (a `pipeline_messages` name).

    `read` names the fields returned; `ignored`, `default_only` and `refused` map a field's name
    to the reason. `unset_is_none` names read fields whose absence reads as None rather than
    the proto default (where the OD API's builder tests `HasField`).
    """

    message: str
    read: tuple = ()
    ignored: dict = field(default_factory=dict)
    default_only: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)
    unset_is_none: tuple = ()

    def __post_init__(self):
        names = {f.name for f in pm.message(self.message).fields}
        listed = [*self.read, *self.ignored, *self.default_only, *self.refused]
        unknown = sorted(set(listed) - names)
        if unknown or len(listed) != len(set(listed)):
            raise ValueError(f"{self.message}: unknown or twice-listed fields {unknown or listed}")

    def use(self, name: str) -> tuple:
        """(READ | IGNORED | DEFAULT_ONLY | REFUSED, why) of the field `name`."""
        if name in self.read:
            return READ, ""
        for how, reasons in ((IGNORED, self.ignored), (DEFAULT_ONLY, self.default_only), (REFUSED, self.refused)):
            if name in reasons:
                return how, reasons[name]
        return DEFAULT_ONLY, _NOT_REPRODUCED


def fail(path: str, value, why: str, line: "int | None" = None):
    """Refuses `value` of the field `path` (dotted): `NAME: VALUE — WHY` at `line`, which says
    where the field is (its own name is enough; a dotted path runs past a console line), or with
    the dotted path where there is no line (a field not written)."""
    raise ConfigError(f"{path.rsplit('.', 1)[-1] if line else path}: {value} — {why}", line)


def _kind(f: kinds.Field):
    """The field's kind, with a message's name resolved to its `Message`."""
    return pm.message(f.kind) if isinstance(f.kind, str) and f.kind not in kinds.SCALARS else f.kind


def _text(value, kind) -> str:
    """`value` as a pipeline.config spells it: `true`, `0.6` (not 0.6000000238418579), `"a"`, `[1, 2]`."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_text(v, kind) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return float_text(value)
    return json.dumps(value) if kind == kinds.STRING else str(value)


def read(msg: "TextMessage | None", path: str, spec: Uses) -> dict:
    """The `READ` scalar fields of `msg` (defaults where unset) as `{name: value}`; `READ`
    sub-messages are their caller's to read.

    Floats are the float32 value of their spelling (proto `float` fields are 32-bit).

    Raises:
      ConfigError: naming the field and its line: a `DEFAULT_ONLY` field set to another value,
        or a `REFUSED` (or not `READ`) sub-message that is present.
    """
    msg = msg if msg is not None else TextMessage()
    # The inference config reader already parses scalars the way proto text format spells them.
    scalars = PipelineReader(None)
    out = {}
    for f in pm.message(spec.message).fields:
        how, why = spec.use(f.name)
        where, values = f"{path}.{f.name}", msg.get(f.name, [])
        line = getattr(values[-1], "line", None) if values else None
        kind = _kind(f)
        if isinstance(kind, kinds.Message):
            if values and how in (DEFAULT_ONLY, REFUSED):
                fail(where, "{...}", why or "not supported", line)
            continue
        as_python = {kinds.FLOAT: float, kinds.INT32: int, kinds.UINT32: int, kinds.BOOL: bool}.get(kind, str)
        if f.repeated:
            holder = [TextMessage({f.name: [v]}) for v in values]
            value = tuple(scalars.get(h, f.name, path, as_python, None) for h in holder)
        elif values:
            value = scalars.get(msg, f.name, path, as_python, None)
        else:
            value = None if f.name in spec.unset_is_none else proto_default(f)
        if how == DEFAULT_ONLY and value != proto_default(f):
            fail(where, _text(value, f.kind), why or f"training supports {_text(proto_default(f), f.kind)} only", line)
        if how == READ:
            out[f.name] = value
    return out


def choose(msg: "TextMessage | None", path: str, spec: Uses, required: bool = True):
    """(name, sub-message) of the oneof member of `spec`'s message set in `msg`, after checking
    `msg` against `spec`; refuses none set when `required`. (None, None) when not set."""
    read(msg, path, spec)  # REFUSED members first, so the error names them
    members = tuple(f.name for f in pm.message(spec.message).fields if f.oneof is not None)
    name, sub = msg.oneof(members) if msg is not None else (None, None)
    if name is None and required:
        fail(path, "(missing)", f"expected one of {', '.join(members)}", getattr(msg, "line", None))
    return name, sub
