"""Rule file problems in words: the ``RuleFileError`` type, and the JSON
schema's errors translated to a key, a line and the expected form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "rule.schema.json"
TYPE_WORDS: dict[str, str] = {  # JSON schema types in words
    "object": "a mapping", "array": "a list", "string": "a string", "boolean": "true or false",
    "integer": "an integer", "number": "a number", "null": "nothing"}


@dataclass(frozen=True)
class RuleFileError:
    """One problem in one rule file, ready to show to the user."""

    path: Path
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{display_path(self.path)}:{self.line}"
        key = f"key '{self.key}': " if self.key else ""
        return f"{where}: {key}{self.message}"


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it."""
    try:
        return Path(path).absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


@lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def schema_errors(path: Path, root: yaml.Node | None, data: Any) -> list[RuleFileError]:
    """Every schema error of a rule file's ``data`` in words, at its YAML line."""
    return [_schema_error(path, root, e)
            for top in _validator().iter_errors(data) for e in _narrow(top)]


def line_of(node: yaml.Node | None, path: Sequence[str | int]) -> int:
    """Line (1-based) of the YAML node at a JSON path: the key for a mapping
    entry, the item for a list element; the deepest node found otherwise."""
    line = node.start_mark.line + 1 if node is not None else 1
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == part]
            if not match:
                break
            line, node = match[0][0].start_mark.line + 1, match[0][1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def key_text(path: Sequence[str | int]) -> str:
    """A JSON path as the user writes the key: ``params.calls[0]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_value(value: Any) -> str:
    """What a rule file gave, short: ``a mapping``, ``a list`` or its repr."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _schema_error(path: Path, root: yaml.Node | None, err) -> RuleFileError:
    """A jsonschema error in words: the key, the expected form, what was given."""
    loc, (v, inst) = list(err.absolute_path), (err.validator, err.instance)
    expected = err.schema.get("x-expected") if isinstance(err.schema, dict) else None
    props = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
    shown = not isinstance(inst, (dict, list)) or v == "type"
    got = f" (got {describe_value(inst)})" if shown else ""
    line_loc = None
    if "propertyNames" in err.schema_path:
        loc, msg = loc + [inst], f"bad file name: expected {expected or 'a valid name'}"
    elif v == "required":
        missing = [k for k in err.validator_value if k not in inst][:1]
        sub = props.get(missing[0], {}) if missing else {}
        form = sub.get("x-expected") or sub.get("description")
        line_loc, loc = loc, loc + missing
        msg = "missing required key" + (f" (expected {form})" if form else "")
    elif v == "additionalProperties":
        loc += sorted(k for k in inst if k not in props)[:1]
        msg = f"unknown key (expected one of {', '.join(sorted(props))})"
    elif v == "enum":
        msg = f"expected one of {', '.join(map(str, err.validator_value))}{got}"
    elif v == "type" and not expected:
        types: list[str] = err.validator_value if isinstance(err.validator_value, list) \
            else [err.validator_value]
        msg = f"expected {' or '.join(TYPE_WORDS.get(t, t) for t in types)}{got}"
    else:
        msg = f"expected {expected}{got}" if expected else err.message
    return RuleFileError(path, line_of(root, loc if line_loc is None else line_loc),
                         key_text(loc), msg)


def _narrow(err) -> list:
    """For anyOf/oneOf: when only one branch fits the value's type, report
    that branch's own errors instead of the vague 'not valid under any'."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return [err]
    by_branch: dict[int, list] = {}
    for sub in err.context:
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [errs for errs in by_branch.values()
               if not any(e.validator == "type" and not e.relative_path for e in errs)]
    if len(fitting) == 1 and len(by_branch) > 1:
        return [narrowed for sub in fitting[0] for narrowed in _narrow(sub)]
    return [err]
