"""Load rule files: YAML -> schema check -> kind/params check -> ``Rule``.

Parameters are checked against the fields of the kind's (or mode's)
``Options`` dataclass, which the rule then carries ready-built.

Every problem of every file is collected (import-linter style) as a
``RuleFileError`` naming the file, the line, the key and the expected form.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from kvflowmap.check.loader_errors import (RuleFileError, describe_value, display_path,
                                           key_text, line_of, schema_errors)
from kvflowmap.check.model import AppliesTo, Example, Rule
from kvflowmap.check.options import (accepts, build_options, option_fields, plain, type_words,
                                     unknown_message)
from kvflowmap.sources.errors import SourceError

SKIPPED_DIRS = ("protocol", "stubs")  # under a rules root: not rule files


class UnknownRuleError(SourceError):
    """A rule id (or pattern) given by the user matches no rule."""

# libyaml's loader when PyYAML has it: 13x faster on the shipped rule files (measured).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def default_rule_dirs() -> list[Path]:
    """The rules shipped with kvflowmap (``kvflowmap/rules``, package data)."""
    import kvflowmap

    return [Path(kvflowmap.__file__).parent / "rules"]


def load_rules(paths: Sequence[Path]) -> tuple[list[Rule], list[RuleFileError]]:
    """Rules from rule files and directories (searched for ``*.yaml``/``*.yml``,
    skipping ``protocol/`` and ``stubs/``), with every error of every file."""
    rules: list[Rule] = []
    errors: list[RuleFileError] = []
    seen: dict[str, Rule] = {}
    for file, pack in _rule_files(paths):
        rule, errs = load_rule_file(file, pack)
        errors.extend(errs)
        if rule is None:
            continue
        if rule.id in seen:
            first = seen[rule.id]
            where = f"{display_path(first.path)}:{first.line}"
            errors.append(RuleFileError(file, rule.line, "id", f"duplicate rule id '{rule.id}' "
                                        f"(also defined in {where})"))
            continue
        seen[rule.id] = rule
        rules.append(rule)
    rules.sort(key=lambda r: (r.pack, r.id))
    return rules, sorted(set(errors), key=lambda e: (str(e.path), e.line, e.key, e.message))


def load_rule_file(path: Path, pack: str) -> tuple[Rule | None, list[RuleFileError]]:
    """One rule file; the rule is None when the file has errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [RuleFileError(path, 1, "", f"cannot read rule file: {exc}")]
    try:
        node = yaml.compose(text, Loader=SAFE_LOADER)
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if ctx and ctx_mark is not None:
            problem = f"{ctx} (line {ctx_mark.line + 1}): {problem}"
        return None, [RuleFileError(path, line, "", f"malformed YAML: {problem}")]
    errors = schema_errors(path, node, data)
    if isinstance(data, dict):  # kind and pattern checks even when the schema failed
        errors += _check_kind(path, node, data) + _check_globs(path, node, data)
    if errors:
        return None, errors
    return _make_rule(path, pack, node, data), []


def select_rules(rules: Sequence[Rule], select: Sequence[str], ignore: Sequence[str]) -> list[Rule]:
    """Rules whose id (or pack) matches ``select`` (all when empty) and not
    ``ignore``; globs like ``pegaflow-*`` work. An id or pattern that matches
    no rule raises ``UnknownRuleError`` naming close matches."""
    unknown = [p for p in [*select, *ignore] if not any(_matches(r, p) for r in rules)]
    if unknown:
        ids = sorted(r.id for r in rules)
        parts = []
        for pat in unknown:
            close = difflib.get_close_matches(pat, ids, n=3, cutoff=0.5)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            parts.append(f"'{pat}'{hint}")
        raise UnknownRuleError(f"unknown rule id {', '.join(parts)}; "
                               "`kvflowmap rules` lists the rules")
    chosen = [r for r in rules if not select or any(_matches(r, p) for p in select)]
    return [r for r in chosen if not any(_matches(r, p) for p in ignore)]


# -- files -------------------------------------------------------------------

def _rule_files(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = (q for q in p.rglob("*") if q.suffix in (".yaml", ".yml") and q.is_file())
            for f in sorted(found):
                rel = f.relative_to(p).parts
                if rel[0] in SKIPPED_DIRS or _in_skipped(f):
                    continue
                pack = p.name if p.parent.name == "rules" or len(rel) == 1 else rel[0]
                out.append((f, pack))
        else:
            out.append((p, _pack_of_file(p)))
    first: dict[Path, tuple[Path, str]] = {}
    for f, pack in out:  # a file reached twice (overlapping paths) loads once
        first.setdefault(f.resolve(), (f, pack))
    return list(first.values())


def _in_skipped(f: Path) -> bool:
    parts = f.parts
    return any(a == "rules" and b in SKIPPED_DIRS for a, b in zip(parts, parts[1:], strict=False))


def _pack_of_file(f: Path) -> str:
    """The folder under the nearest ``rules/`` ancestor, else the parent's name."""
    dirs = f.parts[:-1]
    below = [dirs[i + 1] for i in range(len(dirs) - 1) if dirs[i] == "rules"]
    return below[-1] if below else f.parent.name


# -- rule objects and kind checks --------------------------------------------

def _names(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


def _example(item: dict) -> Example:
    kind = "bad" if "bad" in item else "good"
    code = item[kind]
    files = {"example.py": code} if isinstance(code, str) else dict(code["files"])
    return Example(kind, files, item.get("note", "") or "")


def _make_rule(path: Path, pack: str, node: yaml.Node, data: dict) -> Rule:
    """The rule, its params completed with the kind's (or mode's) defaults and
    its ``Options`` built once."""
    from kvflowmap.check.kinds import registry

    at = data.get("applies_to") or {}
    kind, given = data["kind"], dict(data.get("params") or {})
    spec = registry.spec_for(kind, given)
    mode = registry.default_mode(kind)
    params: dict[str, Any] = {registry.MODE: given.get(registry.MODE, mode)} if mode else {}
    params.update({f.name: plain(f.default) for f in option_fields(spec.options)})
    params.update(copy.deepcopy(given))
    options = build_options(spec.options, registry.own_params(kind, given), f"kind '{kind}'")
    return Rule(
        id=data["id"], title=data["title"], severity=data["severity"],
        rationale=data["rationale"], kind=kind, params=dict(sorted(params.items())),
        applies_to=AppliesTo(_names(at.get("base_class")), _names(at.get("classes")),
                             _names(at.get("modules")), bool(at.get("include_context", False))),
        examples=tuple(_example(x) for x in data["examples"]), help=data["help"],
        pack=pack, path=path, line=line_of(node, ["id"]), options=options)


def _check_kind(path: Path, node: yaml.Node, data: dict) -> list[RuleFileError]:
    """The kind exists, its mode (if it has modes) too, and every parameter is
    a field of the kind's (mode's) ``Options`` with a value of its type."""
    from kvflowmap.check.kinds import registry

    kind, params = data.get("kind"), data.get("params") or {}
    if not isinstance(kind, str):
        return []
    if kind not in registry.KINDS:
        return [RuleFileError(path, line_of(node, ["kind"]), "kind", "expected one of "
                              f"{', '.join(sorted(registry.KINDS))} (got {kind!r})")]
    if not isinstance(params, dict):
        return []  # the schema reports it
    modes, what = registry.modes_of(kind), f"kind '{kind}'"
    if modes is not None:
        mode = params.get(registry.MODE, registry.default_mode(kind))
        if not isinstance(mode, str) or mode not in modes:
            close = difflib.get_close_matches(str(mode), list(modes), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            return [RuleFileError(path, line_of(node, ["params", registry.MODE]),
                                  f"params.{registry.MODE}", f"unknown mode of {what} ({hint}"
                                  f"expected one of {', '.join(modes)}; "
                                  f"got {describe_value(mode)})")]
        what += f" mode '{mode}'"
    fields = {f.name: f for f in option_fields(registry.spec_for(kind, params).options)}
    errors: list[RuleFileError] = []
    for name, value in registry.own_params(kind, params).items():
        where = (path, line_of(node, ["params", name]), f"params.{name}")
        f = fields.get(name)
        if f is None:
            errors.append(RuleFileError(*where, unknown_message(str(name), list(fields), what)))
        elif not accepts(value, f.hint):
            help_ = f": {f.help}" if f.help else ""
            errors.append(RuleFileError(*where, f"expected {type_words(f.hint)} "
                                        f"(got {describe_value(value)}){help_}"))
        elif str(name).endswith("_regex"):
            errors.extend(RuleFileError(*where, f"bad regular expression {pat!r}: {msg}")
                          for pat, msg in _bad_regexes(value))
    return errors


def _bad_regexes(value: Any) -> list[tuple[str, str]]:
    pats = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
    out = []
    for pat in pats:
        try:
            re.compile(pat)
        except (re.error, TypeError) as exc:
            out.append((pat, str(exc)))
    return out


def _check_globs(path: Path, node: yaml.Node, data: dict) -> list[RuleFileError]:
    """fnmatch silently treats an unclosed ``[`` as a literal: flag it."""
    at = data.get("applies_to")
    errors = []
    for key in ("classes", "modules"):
        value = at.get(key) if isinstance(at, dict) else None
        pats = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for i, pat in enumerate(pats):
            if isinstance(pat, str) and re.search(r"\[[^\]]*$", pat):
                loc = ["applies_to", key] + ([i] if isinstance(value, list) else [])
                errors.append(RuleFileError(path, line_of(node, loc), key_text(loc),
                                            f"bad glob {pat!r}: '[' without a closing ']'"))
    return errors


def _matches(rule: Rule, pattern: str) -> bool:
    return fnmatch.fnmatchcase(rule.id, pattern) or rule.pack == pattern
