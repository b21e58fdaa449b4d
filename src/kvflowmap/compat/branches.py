"""Which branch of a version guard runs on one release.

A connector that supports two forms of a vLLM API tests for the form at run
time; only the branch that fits a release runs on it, and only that branch is
checked against it. The tests read here (from the method's statement tree,
parsed as text with ``ast``, never run):

- ``if isinstance(param, T)``: the release's annotation of the parameter decides;
- ``if hasattr(obj, "name")`` / ``if getattr(obj, "name", ...)``: whether the
  release has the member (``self``/``super()``, ``envs``, a builtin-typed parameter);
- ``if param is None`` / ``is not None``: the release does not pass the
  parameter (the override's default runs), or passes a value its annotation
  says is never None (``kv_cache_config`` once it became required);
- ``if <vLLM version> <op> <literal>``: ``vllm.__version__`` (or a name that
  holds it) against a string, a ``Version(...)`` or a tuple, evaluated as Python
  would (strings compare as strings); ``if vllm_version_is("0.9.1")``: the
  release is that one (versions compared as versions);
- ``try: ... except TypeError`` (or ``AttributeError``, ``Exception``, a bare
  ``except``): the handler runs when the try body fails on the release in a
  way it catches, else the body runs and the handler is not checked.

``and``/``or``/``not`` combine tests; a test that cannot be decided leaves both
branches to be checked (never a false pass by guessing). The tests themselves
are evaluated by ``model.version_tests``, which the import gates of
``check.gated_modules`` share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kvflowmap.facts import FunctionFact, Stmt
from kvflowmap.model.version_tests import Oracle, evaluate

Span = tuple[int, int]
# The exceptions a failure raises, and what each handler name catches.
_CATCHES = {"TypeError": {"TypeError"}, "AttributeError": {"AttributeError"},
            "ImportError": {"ImportError"}, "Exception": {"TypeError", "AttributeError",
                                                          "ImportError"}}
_CATCHES["BaseException"] = _CATCHES["Exception"]


@dataclass(frozen=True)
class Guard:
    """One guard of a method, decided for one release."""

    kind: str  # isinstance | hasattr | is-none | version
    line: int
    text: str  # the test as written, or ``try/except TypeError``
    taken: bool | None  # the test holds / the try body runs through; None: undecided
    skipped: tuple[Span, ...] = ()  # line spans that do not run on the release

    def describe(self, version: str) -> str:
        """``hasattr(self, "x") at line 12: the other branch runs on vLLM 0.2.0``."""
        if self.kind == "try":
            side = "the try body" if self.taken else "the except branch"
        else:
            side = "the if branch" if self.taken else "the other branch"
        return f"{self.text} at line {self.line}: {side} runs on vLLM {version}"


@dataclass
class Branches:
    """The guards of one method on one release, and the tries it has."""

    version: str
    guards: list[Guard] = field(default_factory=list)  # the ``if`` guards decided
    tries: list[tuple[Span, list[tuple[Span, set[str] | None]], Span | None, int]] = \
        field(default_factory=list)  # (body, [(handler span, catches)], else span, line)

    def skipping(self, line: int) -> Guard | None:
        """The guard whose undecided side holds ``line``, when one does."""
        for g in self.guards:
            if any(lo <= line <= hi for lo, hi in g.skipped):
                return g
        return None


def decide(fn: FunctionFact, oracle: Oracle) -> Branches:
    """The guards of ``fn`` decided against one release."""
    out = Branches(oracle.version)
    _walk(fn.body, fn.end_line, oracle, out)
    return out


def _walk(stmts: tuple[Stmt, ...], end: int, oracle: Oracle, out: Branches) -> None:
    for i, s in enumerate(stmts):
        stop = stmts[i + 1].line - 1 if i + 1 < len(stmts) else end
        if s.kind in ("if", "while") and s.text:
            _if(s, stop, end, oracle, out)
        if s.kind == "try":
            _try(s, stop, out)
        parts = _parts(s, stop)
        for body, (_, hi) in parts:
            _walk(body, hi, oracle, out)


def _parts(s: Stmt, stop: int) -> list[tuple[tuple[Stmt, ...], Span]]:
    """The statement lists of ``s`` with the line span each covers."""
    starts = [(part, part[0].line) for part in (s.body, *((h,) for h in s.handlers),
                                                   s.orelse, s.final) if part]
    out: list[tuple[tuple[Stmt, ...], Span]] = []
    for n, (part, start) in enumerate(starts):
        nxt = starts[n + 1][1] - 1 if n + 1 < len(starts) else stop
        if len(part) == 1 and part[0].kind == "except":
            out.append((part[0].body, (start, nxt)))
        else:
            out.append((part, (start, nxt)))
    return out


def _if(s: Stmt, stop: int, end: int, oracle: Oracle, out: Branches) -> None:
    taken, kind = evaluate(s.text or "", oracle)
    if taken is None or kind is None or not s.body:
        return
    body_end = s.orelse[0].line - 1 if s.orelse else stop
    if taken:
        skipped = [(s.orelse[0].line, stop)] if s.orelse else []
    else:
        skipped = [(s.body[0].line, body_end)]
        if s.kind == "while":
            skipped = [(s.body[0].line, stop)]
    if taken and not s.orelse and s.kind == "if" and s.body[-1].kind in ("return", "raise"):
        skipped.append((stop + 1, end))  # ``if not hasattr(...): return`` leaves the rest
    out.guards.append(Guard(kind, s.line, s.text or "", taken, tuple(skipped)))


def _try(s: Stmt, stop: int, out: Branches) -> None:
    if not s.handlers or not s.body:
        return
    body = (s.body[0].line, s.handlers[0].line - 1)
    handlers: list[tuple[Span, set[str] | None]] = []
    after = [x.line for x in (*s.handlers[1:], *s.orelse[:1], *s.final[:1])]
    for h in s.handlers:
        nxt = [ln for ln in after if ln > h.line]
        handlers.append(((h.line, (min(nxt) - 1) if nxt else stop), catches(h.text)))
    orelse = None
    if s.orelse:
        orelse = (s.orelse[0].line, (s.final[0].line - 1) if s.final else stop)
    out.tries.append((body, handlers, orelse, s.line))


def catches(text: str | None) -> set[str] | None:
    """What ``except <text>`` catches of the failures compat finds (None: all)."""
    if text is None:
        return None
    names = {n.strip() for n in text.strip("() ").split(",")}
    found: set[str] = set()
    for n in names:
        found |= _CATCHES.get(n.rpartition(".")[2].split(" as ")[0].strip(), set())
    return found


@dataclass(frozen=True)
class Problem:
    """A use that fails on a release: where, what it raises, and the finding."""

    line: int
    raises: str  # TypeError | AttributeError | ImportError
    severity: str
    kind: str
    message: str
    base_where: object = None
    member: str = ""  # the member name a ``hasattr`` on the same line may test


def resolve(branches: Branches, problems: list[Problem],
            same_line_guards: Callable[[Problem], bool] = lambda p: False,
            ) -> Iterator[tuple[Problem, str | None]]:
    """Each problem with the guard that accepts it on the release (None: it stands).

    A problem on a side of an ``if`` guard that does not run is accepted by that
    guard; one a ``try`` catches makes its handler the branch that runs (checked
    in turn); when nothing in a try body fails, its handlers are not checked.
    ``same_line_guards`` accepts a use tested on its own line
    (``hasattr(envs, "X") and envs.X``)."""
    live: list[Problem] = []
    for p in problems:
        g = branches.skipping(p.line)
        if g is not None:
            yield p, g.describe(branches.version)
        elif same_line_guards(p):
            yield p, f"tested on line {p.line} before use"
        else:
            live.append(p)
    # innermost tries first: a failure one catches does not reach the outer one
    tries = sorted(branches.tries, key=lambda t: t[0][1] - t[0][0])
    decided: dict[Problem, str | None] = {}
    for body, handlers, orelse, line in tries:
        inside = [p for p in live if body[0] <= p.line <= body[1] and p not in decided]
        caught = [p for p in inside if any(c is None or p.raises in c for _, c in handlers)]
        if caught:
            why = f"try/except at line {line}: the except branch runs on vLLM {branches.version}"
            for p in caught:
                decided[p] = why
            if orelse:
                for p in live:
                    if orelse[0] <= p.line <= orelse[1]:
                        decided[p] = f"try/except at line {line}: its else does not run"
        else:
            for p in live:
                if p not in decided and any(lo <= p.line <= hi for (lo, hi), _ in handlers):
                    decided[p] = f"try/except at line {line}: the try body runs, not the handler"
    for p in live:
        yield p, decided.get(p)
