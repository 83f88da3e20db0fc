"""Declarative reading of one protobuf text message against a table of its proto's fields.

A `Message` lists every field its `.proto` declares (TF1-era Object Detection API), each with its
kind, proto default and what this toolkit does with it: `READ` (returned), `IGNORED` (accepted,
with the reason in `why`), `DEFAULT_ONLY` (accepted at the proto default, refused otherwise) or
`REFUSED` (a sub-message that must not be set). A field the proto does not declare is refused,
so a config of another release or a typo never passes silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from ssd_mobilenet.config import ConfigError, _f32, _PipelineReader
from ssd_mobilenet.pipeline_text import TextMessage

READ, IGNORED, DEFAULT_ONLY, REFUSED = "read", "ignored", "default_only", "refused"
MESSAGE = "message"  # kind of a sub-message field; its caller reads it


@dataclass(frozen=True)
class Field:
    """One proto field. `kind` is float, int, bool, str, MESSAGE or a tuple of enum names."""

    name: str
    kind: object
    default: object = None
    use: str = READ
    why: str = ""
    repeated: bool = False


@dataclass(frozen=True)
class Message:
    """The fields of one proto message; `proto` names the file that declares it."""

    proto: str
    fields: tuple

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def fail(path: str, value, why: str):
    raise ConfigError(f"{path}: {value} — {why}")


def read(msg: "TextMessage | None", path: str, spec: Message) -> dict:
    """The `READ` fields of `msg` (proto defaults where unset) as `{name: value}`.

    Floats are the float32 value of their spelling (proto `float` fields are 32-bit).

    Raises:
      ConfigError: naming the dotted field path of an unknown field, a value of the wrong kind, an
        enum name the proto does not declare, a `DEFAULT_ONLY` field set to another value or a
        `REFUSED` message that is present.
    """
    msg = msg if msg is not None else TextMessage()
    known = {f.name for f in spec.fields}
    for name in msg:
        if name not in known:
            fail(f"{path}.{name}", "(set)", f"not a field of this message in the TF1-era {spec.proto}")
    # The inference config reader already parses scalars the way proto text format spells them.
    scalars = _PipelineReader(None)
    out = {}
    for f in spec.fields:
        where = f"{path}.{f.name}"
        if f.kind == MESSAGE:
            present = msg.child(f.name) is not None
            if f.use == REFUSED and present:
                fail(where, "{...}", f"not supported: {f.why}")
            continue
        kind = str if isinstance(f.kind, tuple) else f.kind
        if f.repeated:
            holder = [TextMessage({f.name: [v]}) for v in msg.scalars(f.name)]
            value = tuple(scalars.get(h, f.name, path, kind, None) for h in holder)
        else:
            value = scalars.get(msg, f.name, path, kind, f.default)
        default = f.default
        if kind is float and not f.repeated:  # proto floats are float32, defaults included
            value, default = (None if x is None else _f32(x) for x in (value, default))
        if isinstance(f.kind, tuple):
            for v in (value if f.repeated else (value,)):
                if v not in f.kind:
                    fail(where, v, f"one of {', '.join(f.kind)}")
        if f.use == DEFAULT_ONLY and value != default:
            fail(where, value, f"only {default!r} is supported: {f.why}")
        if f.use == READ:
            out[f.name] = value
    return out


def choose(msg: "TextMessage | None", path: str, spec: Message, required: bool = True):
    """(name, sub-message) of the oneof member of `spec` set in `msg` (its `MESSAGE` fields), after
    checking `msg` against `spec`; refuses none set when `required`. (None, None) when not set."""
    read(msg, path, spec)  # unknown and REFUSED members first, so the error names them
    members = tuple(f.name for f in spec.fields if f.kind == MESSAGE)
    name, sub = msg.oneof(members) if msg is not None else (None, None)
    if name is None and required:
        fail(path, "(missing)", f"expected one of {', '.join(members)}")
    return name, sub
