"""Rule files: loading, every malformed case reported with file, line, key and
expected form, all at once; select/ignore."""

from __future__ import annotations

import contextlib
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kvflowmap.check.kinds import registry
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.loader import (RuleFileError, UnknownRuleError, default_rule_dirs,
                                    load_rules, select_rules)
from kvflowmap.check.options import option
from kvflowmap.sources.errors import SourceError

KIND_NAMES = ("reach", "paired", "conforms", "forbid", "returns", "states")


@dataclass(frozen=True)
class FlagOptions:
    """Options of the fake kind."""

    name_regex: str = option("^bad_", "Function names to flag.")
    limit: int = option(3, "A number.")
    targets: tuple[str, ...] | str = option((), "Names or one name.")


def flag_bad_functions(ctx, opts: FlagOptions) -> list:
    """Fake kind: a finding on every target function whose name matches
    ``name_regex`` (default ``^bad_``)."""
    import re

    pattern = re.compile(opts.name_regex)
    return [ctx.finding(fqn, ctx.function(fqn).line, f"{fqn} is bad")
            for fqn in ctx.target_functions if pattern.search(fqn.rpartition(".")[2])]


@dataclass(frozen=True)
class NoOptions:
    """A kind without parameters."""


def nothing(ctx, opts) -> list:
    """Fake kind: no findings."""
    return []


FLAG = KindSpec(FlagOptions, flag_bad_functions, "Reads: the names of the target functions.")
NOTHING = KindSpec(NoOptions, nothing, "Reads: nothing.")


@contextlib.contextmanager
def fake_engine(monkeypatch: pytest.MonkeyPatch,
                kinds: dict[str, Any] | None = None) -> Iterator[types.ModuleType]:
    """The kind registry with ``KINDS`` replaced (default: a fake ``returns``
    kind with three parameters and a ``reach`` kind with two modes)."""
    monkeypatch.setattr(registry, "KINDS", kinds if kinds is not None else
                        {"returns": FLAG, "reach": {"first": NOTHING, "second": FLAG}})
    yield registry


@pytest.fixture
def engine(monkeypatch):
    with fake_engine(monkeypatch) as eng:
        yield eng


VALID = """\
id: pf-demo-rule
title: No bad functions
severity: warning
rationale: |
  Bad functions are bad.
applies_to:
  base_class: [vllm.distributed.kv_transfer.kv_connector.v1.base.KVConnectorBase_V1]
  classes: ["pegaflow.*"]
kind: returns
params:
  limit: 5
help: Rename it.
examples:
  - bad: |
      def bad_one():
          pass
    note: flagged
  - good:
      files:
        example.py: |
          def good_one():
              pass
        pkg/helpers.py: "X = 1\\n"
"""


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text) if text.startswith("\n") else text)
    return path


def test_valid_file_loads_with_pack_and_defaults(tmp_path, engine):
    write(tmp_path, "rules/pegaflow/demo.yaml", VALID)
    rules, errors = load_rules([tmp_path / "rules"])
    assert errors == []
    [rule] = rules
    assert (rule.id, rule.severity, rule.kind, rule.pack, rule.line) == \
        ("pf-demo-rule", "warning", "returns", "pegaflow", 1)
    assert rule.params == {"limit": 5, "name_regex": "^bad_", "targets": []}
    assert rule.options == FlagOptions(limit=5)
    assert rule.applies_to.classes == ("pegaflow.*",)
    assert rule.applies_to.include_context is False
    bad, good = rule.examples
    assert (bad.kind, bad.note, list(bad.files)) == ("bad", "flagged", ["example.py"])
    assert sorted(good.files) == ["example.py", "pkg/helpers.py"]


def test_protocol_and_stubs_are_skipped_and_files_load_alone(tmp_path, engine):
    write(tmp_path, "rules/protocol/p.yaml", "name: proto\n")
    write(tmp_path, "rules/stubs/vllm/x.yaml", "- not a rule\n")
    f = write(tmp_path, "rules/vllm-scheduler/demo.yml", VALID)
    rules, errors = load_rules([tmp_path / "rules"])
    assert errors == [] and [r.pack for r in rules] == ["vllm-scheduler"]
    assert load_rules([f])[0][0].pack == "vllm-scheduler"
    assert load_rules([tmp_path / "rules" / "vllm-scheduler"])[0][0].pack == "vllm-scheduler"


def _edit(old: str, new: str) -> str:
    assert old in VALID, old
    return VALID.replace(old, new)


MALFORMED = [
    # (rule text, line, key, expected-form fragment)
    (_edit("severity: warning", "severity: fatal"), 3, "severity",
     "expected one of error, warning, note (got 'fatal')"),
    (_edit("id: pf-demo-rule", "id: PF_Demo"), 1, "id", "lowercase letters, digits"),
    (_edit("title: No bad functions\n", ""), 1, "title", "missing required key"),
    (_edit("help: Rename it.", "help: Rename it.\nhelpp: typo"), 13, "helpp",
     "unknown key (expected one of applies_to, examples"),
    (_edit("  classes:", "  include_context: 'yes'\n  classes:"), 8, "applies_to.include_context",
     "expected true or false (got 'yes')"),
    (_edit("  classes:", "  clases:"), 8, "applies_to.clases", "unknown key"),
    (_edit("  classes: [\"pegaflow.*\"]", "  classes: [3]"), 8, "applies_to.classes[0]",
     "expected a string (got 3)"),
    (_edit("  classes: [\"pegaflow.*\"]", "  classes: [\"pegaflow.[x\"]"), 8,
     "applies_to.classes[0]", "'[' without a closing ']'"),
    (_edit("kind: returns", "kind: retruns"), 9, "kind",
     "expected one of reach, returns (got 'retruns')"),
    (_edit("  limit: 5", "  limit: five"), 11, "params.limit",
     "expected an integer (got 'five')"),
    (_edit("  limit: 5", "  limit: true"), 11, "params.limit", "expected an integer (got True)"),
    (_edit("  limit: 5", "  colour: red"), 11, "params.colour",
     "unknown parameter of kind 'returns' (expected one of limit, name_regex, targets)"),
    (_edit("  limit: 5", "  name_regex: 'bad_(('"), 11, "params.name_regex",
     "bad regular expression 'bad_(('"),
    (_edit("params:\n  limit: 5", "params: [1]"), 10, "params", "expected a mapping"),
    (_edit("  - good:\n      files:", "  - bad:\n      files:"), 13, "examples",
     "at least one `good:` example"),
    (_edit("    note: flagged", "    good: x"), 14, "examples[0]",
     "exactly one of `bad:` or `good:`"),
    (_edit("pkg/helpers.py", "pkg/my-helpers.py"), 23, "examples[1].good.files.pkg/my-helpers.py",
     "bad file name: expected a relative .py path"),
    (_edit("      files:", "      fils:"), 19, "examples[1].good.fils", "unknown key"),
    (_edit("severity: warning", "severity: [warning"), 4, "", "malformed YAML"),
    ("- just\n- a list\n", 1, "", "expected a mapping with the keys id, title"),
]


@pytest.mark.parametrize("text,line,key,fragment", MALFORMED,
                         ids=[f"{m[2] or 'file'}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_rule_names_file_line_key_and_form(tmp_path, engine, text, line, key,
                                                     fragment):
    path = write(tmp_path, "rules/pegaflow/x.yaml", text)
    rules, errors = load_rules([tmp_path / "rules"])
    assert rules == []
    # a misspelt `files:` is also a missing `files:`; everything else is one error
    assert len(errors) == (2 if key.endswith(".fils") else 1), [str(e) for e in errors]
    [err] = [e for e in errors if e.key == key]
    assert (err.path, err.line, err.key) == (path, line, key), str(err)
    assert fragment in err.message
    assert str(err).startswith(f"{path}:{line}: ")
    assert (f"key '{key}': " in str(err)) == bool(key)


def test_message_shape_relative_to_cwd(tmp_path, engine, monkeypatch):
    write(tmp_path, "rules/pegaflow/x.yaml", _edit("severity: warning", "severity: fatal"))
    monkeypatch.chdir(tmp_path)
    _, [err] = load_rules([Path("rules")])
    assert str(err) == ("rules/pegaflow/x.yaml:3: key 'severity': "
                        "expected one of error, warning, note (got 'fatal')")


def test_all_errors_of_all_files_reported_at_once(tmp_path, engine):
    write(tmp_path, "rules/a/one.yaml",
          _edit("severity: warning", "severity: fatal").replace("kind: returns", "kind: nope"))
    write(tmp_path, "rules/b/two.yaml", _edit("title: No bad functions\n", "")
          .replace("  limit: 5", "  limit: x\n  extra: 1"))
    write(tmp_path, "rules/c/three.yaml", "id: [unclosed\n")
    write(tmp_path, "rules/c/ok.yaml", _edit("pf-demo-rule", "fine-rule"))
    rules, errors = load_rules([tmp_path / "rules"])
    assert [r.id for r in rules] == ["fine-rule"]
    got = {(e.path.parent.name, e.path.name, e.key) for e in errors}
    assert got == {("a", "one.yaml", "severity"), ("a", "one.yaml", "kind"),
                   ("b", "two.yaml", "title"), ("b", "two.yaml", "params.limit"),
                   ("b", "two.yaml", "params.extra"), ("c", "three.yaml", "")}


def test_unknown_kind_lists_known_kinds(tmp_path, monkeypatch):
    with fake_engine(monkeypatch, {k: NOTHING for k in KIND_NAMES}):
        write(tmp_path, "rules/p/x.yaml", _edit("kind: returns", "kind: flow"))
        _, [err] = load_rules([tmp_path / "rules"])
    assert err.key == "kind"
    assert err.message == ("expected one of conforms, forbid, paired, reach, returns, states "
                           "(got 'flow')")


def test_unknown_parameter_names_the_closest(tmp_path, engine):
    write(tmp_path, "rules/p/x.yaml", _edit("  limit: 5", "  limt: 5"))
    _, [err] = load_rules([tmp_path / "rules"])
    assert (err.line, err.key) == (11, "params.limt")
    assert err.message == ("unknown parameter of kind 'returns' (did you mean limit? "
                           "expected one of limit, name_regex, targets)")


def test_list_items_are_checked_and_lists_become_tuples(tmp_path, engine):
    write(tmp_path, "rules/p/x.yaml", _edit("  limit: 5", "  targets: [a, 3]"))
    _, [err] = load_rules([tmp_path / "rules"])
    assert err.message == ("expected a list of strings or a string (got a list): "
                           "Names or one name.")
    write(tmp_path, "rules/p/x.yaml", _edit("  limit: 5", "  targets: [a, b]"))
    [rule], errors = load_rules([tmp_path / "rules"])
    assert errors == [] and rule.options.targets == ("a", "b")
    assert rule.params["targets"] == ["a", "b"]


def test_modes_select_their_options(tmp_path, engine):
    reach = _edit("kind: returns", "kind: reach")
    write(tmp_path, "rules/p/x.yaml", reach.replace("  limit: 5", "  mode: second\n  limit: 5"))
    [rule], errors = load_rules([tmp_path / "rules"])
    assert errors == [] and rule.options == FlagOptions(limit=5)
    assert rule.params["mode"] == "second"
    write(tmp_path, "rules/p/x.yaml", reach)  # default mode 'first' has no parameters
    _, [err] = load_rules([tmp_path / "rules"])
    assert (err.key, err.message) == ("params.limit", "unknown parameter of kind 'reach' mode "
                                      "'first' (expected one of no parameters)")
    write(tmp_path, "rules/p/x.yaml", reach.replace("  limit: 5", "  mode: secnd"))
    _, [err] = load_rules([tmp_path / "rules"])
    assert (err.line, err.key) == (11, "params.mode")
    assert err.message == ("unknown mode of kind 'reach' (did you mean second? expected one of "
                           "first, second; got 'secnd')")


def test_duplicate_ids_across_files(tmp_path, engine):
    first = write(tmp_path, "rules/a/one.yaml", VALID)
    second = write(tmp_path, "rules/b/two.yaml", VALID)
    rules, [err] = load_rules([tmp_path / "rules"])
    assert len(rules) == 1 and rules[0].path == first
    assert (err.path, err.line, err.key) == (second, 1, "id")
    assert f"duplicate rule id 'pf-demo-rule' (also defined in {first}:1)" in err.message


def _rules(engine, tmp_path, ids_packs):
    for rid, pack in ids_packs:
        write(tmp_path, f"rules/{pack}/{rid}.yaml", _edit("pf-demo-rule", rid))
    rules, errors = load_rules([tmp_path / "rules"])
    assert errors == []
    return rules


def test_select_and_ignore_with_globs_and_packs(tmp_path, engine):
    rules = _rules(engine, tmp_path, [("pegaflow-lease", "pegaflow"), ("pegaflow-pin", "pegaflow"),
                                      ("kvc-probe", "vllm-kv-connector")])
    ids = lambda rs: [r.id for r in rs]  # noqa: E731
    assert ids(select_rules(rules, [], [])) == ["pegaflow-lease", "pegaflow-pin", "kvc-probe"]
    assert ids(select_rules(rules, ["pegaflow-*"], [])) == ["pegaflow-lease", "pegaflow-pin"]
    assert ids(select_rules(rules, ["pegaflow-*"], ["pegaflow-pin"])) == ["pegaflow-lease"]
    assert ids(select_rules(rules, ["vllm-kv-connector"], [])) == ["kvc-probe"]
    assert ids(select_rules(rules, [], ["pegaflow"])) == ["kvc-probe"]


def test_unknown_rule_id_names_close_matches(tmp_path, engine):
    rules = _rules(engine, tmp_path, [("pegaflow-lease", "pegaflow"), ("kvc-probe", "v")])
    with pytest.raises(UnknownRuleError) as exc:
        select_rules(rules, ["pegaflow-leas"], ["zzz-*"])
    msg = str(exc.value)
    assert "'pegaflow-leas' (did you mean pegaflow-lease?)" in msg and "'zzz-*'" in msg
    assert isinstance(exc.value, SourceError)  # the CLI turns it into exit 2


def test_default_rule_dirs_is_the_shipped_rules_folder():
    [d] = default_rule_dirs()
    assert d.name == "rules" and d.is_dir() and (d / "protocol").is_dir()


def test_rule_file_error_without_key():
    assert str(RuleFileError(Path("/x/r.yaml"), 3, "", "malformed YAML: boom")) == \
        "/x/r.yaml:3: malformed YAML: boom"


def test_overlapping_paths_load_a_file_once(tmp_path, engine):
    f = write(tmp_path, "rules/pegaflow/demo.yaml", VALID)
    rules, errors = load_rules([tmp_path / "rules", tmp_path / "rules" / "pegaflow", f])
    assert errors == [] and len(rules) == 1
