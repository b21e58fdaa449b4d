"""Link templates: one per root (``vllm = "..."``, ``pegaflow = "..."``), the
same for pictures, pages and every command.

A template is a URL with the placeholders of :data:`PLACEHOLDERS`. A set of
templates maps a root's name (its label, or the label's first word: the
distribution name of a fetched release, ``vllm`` for ``vllm 0.33.0``) to its
template; the key ``""`` is the template of every other root. Known
releases get a code-host default when the set names other roots but not
them (vLLM's tag of the analysed version).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PLACEHOLDERS = "{root}, {path} (or {root_path}), {version}, {file} and {line}"

Templates = dict[str, str]  # root name -> template; "" for every other root

# Where the sources of a known release live, by distribution name
KNOWN = {"vllm": "https://github.com/vllm-project/vllm/blob/v{version}/{file}#L{line}"}

_NAMED = re.compile(r"^([A-Za-z0-9_.-]+)=(.*\S.*)$")


def parse(values: Iterable[str]) -> Templates:
    """``--link-template`` values: ``URL`` (every root) or ``NAME=URL`` (the
    root named NAME). Raises ValueError for an empty one."""
    out: Templates = {}
    for value in values:
        m = _NAMED.match(value)
        if m and ("{" in m.group(2) or "://" in m.group(2)) and "://" not in m.group(1):
            out[m.group(1)] = m.group(2)
        elif value.strip():
            out[""] = value
        else:
            raise ValueError("an empty --link-template")
    return out


def pick(templates: Templates | str | None, label: str) -> str | None:
    """The template of the root labelled ``label`` (None: no template)."""
    if templates is None or isinstance(templates, str):
        return templates
    name = label.split(" ", 1)[0]
    for key in (label, name):  # an empty template is a choice too: no link
        if key in templates:
            return templates[key]
    if known(label) and set(templates) - {""}:
        return known(label)
    return templates.get("")


def known(label: str) -> str | None:
    """The code-host template of a known release's root label (``vllm
    0.33.0``: vLLM's tag on GitHub), None for any other root."""
    name = label.split(" ", 1)[0]
    return KNOWN.get(name) if _version(label) else None


def fill(template: str, root: str, folder: str, file: str, line: object) -> str:
    """The URL of one location; ValueError naming the template and the
    placeholders when it cannot be filled."""
    try:
        return template.format_map({"root": root, "path": folder, "root_path": folder,
                                    "version": _version(root), "file": file, "line": line})
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ValueError(f"link template {template!r} is not usable ({exc!r}); use only the "
                         f"placeholders {PLACEHOLDERS}") from exc


def check(templates: Templates | str | None) -> None:
    """Raise ValueError naming a template that cannot be filled."""
    items = [templates] if isinstance(templates, str) else list((templates or {}).values())
    for t in items:
        fill(t, "r 1.0", "p", "f.py", 1)


def _version(label: str) -> str:
    """``0.33.0`` of the root label ``vllm 0.33.0`` (empty when it has none)."""
    parts = label.split(" ")
    return parts[1] if len(parts) > 1 else ""


def merged(cli: Iterable[str], default: str | None,
           table: dict[str, str] | None = None) -> Templates | None:
    """The templates in force: ``[tool.kvflowmap]``'s ``link_templates`` table
    and ``link_template`` (every other root), overridden by the command
    line's. None when there is none at all."""
    out: Templates = dict(table or {})
    if default is not None:
        out[""] = default
    out.update(parse(cli))
    return out or None
