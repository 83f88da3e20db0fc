"""Class names for detection class ids, from an Object Detection API label map or a names file.

Two formats, told apart by content:
- `label_map.pbtxt` (protobuf text format, read with `ssd_mobilenet.config.pipeline_text`, no
  Object Detection API needed): `item { id: 1 name: '/m/01g317' display_name: 'person' }`.
  `display_name` is preferred over `name`, as the OD API's
  `create_category_index_from_labelmap(use_display_name=True)` does. As the OD API's
  `label_map_util` validates, ids are >= 0 and id 0 is only the `background` item (no class of
  `detection_classes`, so it is left out).
- a plain text file, one name per line: line N names class id N (1-based, the ids in
  `detection_classes`); an empty line leaves that id unnamed.

Any other text is refused (`InputError`): a protobuf text message with other fields than
`item` (a `pipeline.config`), or a file whose lines hold protobuf or JSON braces.

The package ships the label map of the COCO models (the model zoo's `ssd_mobilenet_v1_coco_*`,
the built-in default model): `BUILTIN`, which every function here takes by name in place of a
path (`--labels coco`).
"""

from __future__ import annotations

import json
import os
import re

from ssd_mobilenet.config import pipeline_text
from ssd_mobilenet.errors import ConfigError, InputError

# The label maps the package ships, by the name that selects them in place of a path: `coco`, the
# 80 COCO categories with their ids 1..90 (10 unused), as the OD API's mscoco_label_map.pbtxt has them.
BUILTIN = {"coco": "mscoco_label_map.pbtxt"}
_BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "label_maps")


# A label map's first field is `item` followed by `{` (comments and blank lines aside).
_PBTXT_START = re.compile(r"\A(\s*#[^\n]*\n|\s)*item\s*\{")


def _is_text_message(text: str) -> bool:
    """Whether `text` is protobuf text format holding a message field (`name { ... }`): a
    `label_map.pbtxt` whose first item is not first, or another message (a `pipeline.config`)."""
    try:
        root = pipeline_text.parse(text)
    except ConfigError:
        return False
    return any(isinstance(v, pipeline_text.TextMessage) for values in root.values() for v in values)


def parse(text: str, path: str = "<label map>") -> dict:
    """Label map text -> {class id (int >= 1): name}.

    Raises:
      InputError: text that is neither format (module docstring), naming `path` and the problem.
    """
    if _PBTXT_START.match(text) or _is_text_message(text):
        return _parse_pbtxt(text, path)
    for n, line in enumerate(text.splitlines(), start=1):
        if "{" in line or "}" in line:
            # A names file's line is one class name: braces are a broken pbtxt or JSON.
            raise InputError(f"{path}: line {n}: a brace, in neither a label map nor a names file")
    return {i: name.strip() for i, name in enumerate(text.splitlines(), start=1) if name.strip()}


def _pbtxt_items(text: str, path: str) -> list:
    """Label map text -> [(class id, name or None, display_name or None)], in file order."""
    try:
        root = pipeline_text.parse(text)
    except ConfigError as e:
        raise InputError(f"{path}: not a valid label map: {e.problem}") from None
    unknown = sorted(set(root) - {"item"})
    if unknown:
        # A StringIntLabelMap (string_int_label_map.proto) has only `item`: a pipeline.config is not one.
        raise InputError(f"{path}: not a label map (top-level field {unknown[0]!r}, not `item`)")
    items, seen = [], {}
    for n, item in enumerate(root.get("item", []), start=1):
        if not isinstance(item, pipeline_text.TextMessage):
            raise InputError(f"{path}: item {n} is not a message")
        raw_id = item.scalar("id")
        try:
            class_id = int(raw_id.text)
        except (AttributeError, ValueError):
            got = getattr(raw_id, "text", raw_id)
            raise InputError(f"{path}: item {n} has no integer id (got {got!r})") from None
        name, display_name = (v if isinstance(v, str) else None
                              for v in (item.scalar("name"), item.scalar("display_name")))
        if name is None and display_name is None:
            raise InputError(f"{path}: item {n} (id {class_id}) has no quoted name or display_name")
        if class_id < 0 or (class_id == 0 and "background" not in (name, display_name)):
            raise InputError(f"{path}: item {n} has id {class_id}: class ids start at 1 (0 is only `background`)")
        if class_id in seen:
            raise InputError(f"{path}: id {class_id} appears twice ({seen[class_id]!r}, {display_name or name!r})")
        seen[class_id] = display_name or name
        items.append((class_id, name, display_name))
    return items


def _parse_pbtxt(text: str, path: str) -> dict:
    # Id 0 is the background, which `detection_classes` never holds.
    return {class_id: display_name or name for class_id, name, display_name in _pbtxt_items(text, path) if class_id}


def builtin_path(name: str) -> str:
    """The file of the shipped label map `name` (a key of `BUILTIN`)."""
    return os.path.join(_BUILTIN_DIR, BUILTIN[name])


def builtin_named(path: str) -> str | None:
    """The shipped label map (its `BUILTIN` name) whose file name `path` ends in, else None: a
    pipeline.config's `PATH_TO_BE_CONFIGURED/mscoco_label_map.pbtxt` names the OD API's own COCO
    map, whose ids and display names the shipped copy has."""
    return {file: name for name, file in BUILTIN.items()}.get(os.path.basename(path))


def resolve(path: str) -> str:
    """`path` itself, or the file of a shipped label map when it is one's name (`BUILTIN`): a
    file named like one is given as `./coco`."""
    return builtin_path(path) if path in BUILTIN else path


def _read_text(path: str) -> str:
    path = resolve(path)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read label map: {getattr(e, 'strerror', None) or e}") from None


def read(path: str) -> dict:
    """Reads a label map file (or a shipped one's name, `coco`) -> {class id: name}.

    Raises:
      InputError: naming the file, when it is missing, unreadable or malformed.
    """
    return _read(path)[1]


def _read(path: str) -> tuple:
    """(text, {class id: name}) of a label map file, checked as `read` does."""
    text = _read_text(path)
    names = parse(text, path)
    if not names:
        raise InputError(f"{path}: no class names in this file")
    return text, names


def as_pbtxt(path: str) -> str:
    """The `label_map.pbtxt` text of a label map file (or `coco`): a pbtxt as it is (its `name`s
    and `display_name`s, which `class_ids` reads), a names file as `item { id: N name: '...' }`
    items.

    Raises:
      InputError: as `read`.
    """
    text, names = _read(path)
    if _PBTXT_START.match(text) or _is_text_message(text):
        return text
    # JSON's string escapes are protobuf text format's for these names (quotes, backslashes).
    return "".join(f"item {{\n  id: {i}\n  name: {json.dumps(n, ensure_ascii=False)}\n}}\n"
                   for i, n in sorted(names.items()))


def fits(path: str, names: dict, num_classes: int) -> None:
    """Checks that a label map's ids are class ids of a model of `num_classes` classes.

    Raises:
      InputError: ids above `num_classes` (the model never gives them: the map is another
        model's), naming the file and the ids.
    """
    beyond = coverage(names, num_classes)[1]
    if beyond:
        span = id_ranges(beyond) if len(beyond) < 4 else f"{beyond[0]}..{beyond[-1]}"
        raise InputError(f"{path}: id{'s' if len(beyond) > 1 else ''} {span} beyond the model's {num_classes} "
                         "classes: the map of another model?")


def class_ids(path: str) -> dict:
    """Reads a `label_map.pbtxt` -> {class text: class id}, keyed by both `name` and `display_name`.

    This is how the Object Detection API's TFRecord decoder resolves `image/object/class/text`:
    a text matches an item's `name` or its `display_name`.

    Raises:
      InputError: naming the file, when it is missing, unreadable, malformed, not a pbtxt
        label map, or when one text names two different ids.
    """
    text = _read_text(path)
    if not _PBTXT_START.match(text):
        # Class texts need its `item { id name }` entries.
        raise InputError(f"{path}: not a label_map.pbtxt (no `item {{ id name }}`)")
    ids = {}
    for class_id, *texts in _pbtxt_items(text, path):
        for t in texts:
            if t is not None and ids.setdefault(t, class_id) != class_id:
                raise InputError(f"{path}: {t!r} names both id {ids[t]} and id {class_id}")
    if not ids:
        raise InputError(f"{path}: no class names in this file")
    return ids


def id_ranges(ids) -> str:
    """Class ids as compact ranges: [2, 3, 4, 7, 38, ..., 90] -> "2-4, 7, 38-90"."""
    ids, parts = sorted(set(ids)), []
    for i in ids:
        if parts and i == parts[-1][1] + 1:
            parts[-1][1] = i
        else:
            parts.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def coverage(names: dict, num_classes: int) -> tuple:
    """(unnamed, beyond): the model's class ids above the label map's largest id, and the label
    map's ids above the model's `num_classes`, each sorted.

    Ids missing between a label map's ids are not counted as unnamed: gaps are how a label map
    leaves ids unused (COCO's leaves 10 of 1..90 unused, and the COCO models' heads have columns for
    them that training never made positive). A map that stops short of the model's classes, say
    the 37 pets on a 90-class COCO model, leaves the model's upper ids (38-90) without a name.
    """
    largest = max(names, default=0)
    unnamed = list(range(largest + 1, num_classes + 1))
    beyond = sorted(i for i in names if i > num_classes)
    return unnamed, beyond


def coverage_warning(path: str, names: dict, num_classes: int | None, consequence: str) -> str | None:
    """One `warning:` line when the label map at `path` ({class id: name}) misses the upper class
    ids of a model with `num_classes` classes, or names ids beyond them (`coverage`), else None
    (also when the model's class count is unknown). `consequence`: what a missing id costs the
    command (`"label": null`). The ids are ranges (`38-90`), so the line stays short:

        warning: pets.pbtxt: no name for the model's class ids 38-90 ("label": null)
    """
    if not num_classes:
        return None
    unnamed, beyond = coverage(names, num_classes)
    problems = []
    if unnamed:
        problems.append(f"no name for the model's class id{'s' if len(unnamed) > 1 else ''} {id_ranges(unnamed)} "
                        f"({consequence})")
    if beyond:
        span = id_ranges(beyond) if len(beyond) == 1 else f"{beyond[0]}..{beyond[-1]}"
        problems.append(f"{len(beyond)} id{'s' if len(beyond) > 1 else ''} beyond the model's {num_classes} classes "
                        f"({span})")
    return f"warning: {path}: {'; '.join(problems)}" if problems else None
