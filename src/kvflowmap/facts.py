"""Plain, serialisable facts extracted from one source file.

The indexer produces one ``FileFacts`` per file; everything downstream (model,
graph, rules, docs) reads only these. They hold names and source text, never
LibCST objects, so they store small and load fast from the cache
(``index/facts_codec``: msgpack rows, rebuilt by position). The per-fact
types are named tuples, not frozen dataclasses: a row per fact, and
measured on the facts of PegaFlow + vLLM (as pickles, before the msgpack
format) 2.7x as fast to load and 40% smaller.

Scopes are dotted qualified names inside the module: ``""`` is module-level
code, ``"C.m"`` a method, ``"f.g"`` a function nested in ``f``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class Param(NamedTuple):
    """One parameter of a function signature."""

    name: str
    kind: str  # posonly | pos | vararg | kwonly | kwarg
    annotation: str | None = None
    default: str | None = None


# The argument recorded for a decorator's call: the function as defined,
# before any decorator rebinds its name (``<def>func``; ``Evaluator.name``).
DEF_MARK = "<def>"


class Stmt(NamedTuple):
    """One statement of a function body, as a tree for control-flow analysis.

    ``kind``: simple | return | raise | assert | break | continue | if | for |
    while | try | except | with | match | def | class. ``events`` index into
    the file's ``calls``, ``containers``, ``assigns`` and ``returns`` lists
    (``("call", 3)``): what happens in this statement itself (for compound
    statements: in the test, iterable or context expressions)."""

    kind: str
    line: int
    text: str | None = None  # the test, the returned/raised value, the caught type
    events: tuple[tuple[str, int], ...] = ()
    body: tuple[Stmt, ...] = ()
    orelse: tuple[Stmt, ...] = ()  # else / elif chain / for-else / try-else
    handlers: tuple[Stmt, ...] = ()  # ``except`` statements of a try
    final: tuple[Stmt, ...] = ()  # ``finally``
    # Names and dotted chains read or written in this statement itself (for
    # compound statements: in its header), e.g. ``("self._recv", "req_id")``:
    # what the request-lifecycle model follows ids through.
    names: tuple[str, ...] = ()


class FunctionFact(NamedTuple):
    """A ``def`` or ``async def`` (methods included)."""

    qualname: str
    name: str
    line: int
    col: int
    end_line: int
    params: tuple[Param, ...]
    returns: str | None
    decorators: tuple[str, ...]
    is_async: bool
    is_generator: bool
    doc: str | None
    class_qualname: str | None  # enclosing class when this is a method
    abstract: bool = False
    body: tuple[Stmt, ...] = ()


class ClassFact(NamedTuple):
    """A ``class`` statement with what resolution needs from its body."""

    qualname: str
    name: str
    line: int
    col: int
    end_line: int
    bases: tuple[str, ...]
    decorators: tuple[str, ...]
    doc: str | None
    # name -> annotation text for class-level annotated attributes
    attributes: tuple[tuple[str, str], ...] = ()
    # names assigned a value in the class body (enum members, constants)
    members: tuple[str, ...] = ()


class CallFact(NamedTuple):
    """A call site. ``callee`` is a dotted chain such as ``self.a.b`` or
    ``super().m`` or ``f()``; ``None`` when the callee is not a chain."""

    scope: str
    callee: str | None
    line: int
    col: int
    args: tuple[str | None, ...] = ()  # dotted text of each positional arg
    kwargs: tuple[tuple[str, str | None], ...] = ()  # keyword -> dotted text
    literal_args: tuple[str | None, ...] = ()  # string literal value of each arg
    awaited: bool = False
    # ``callee`` with the literal keys of its subscripts (``d[s:a]()`` for
    # ``d["a"]()``, see ``index.text.keyed_chain``); None when it has none
    keyed: str | None = None


class AssignFact(NamedTuple):
    """``target = value`` or ``target: annotation = value``.

    ``value`` is the dotted chain of the value when it is a name, an attribute
    or a call (``C()``); ``None`` otherwise. ``literal`` is the source text of
    the value when it is a literal display a rule may compare (a tuple, a
    number or string, a conditional expression: ``(0, True)``) and the target
    a plain name (``returns`` follows ``result = (0, True)`` ... ``return result``).
    ``key`` is the string of a subscript value's literal key (``meta["req_id"]``)."""

    scope: str
    target: str
    value: str | None
    annotation: str | None
    line: int
    col: int
    aug: bool = False
    literal: str | None = None
    key: str | None = None  # the string key of ``x["request_id"]`` when that is the value
    # Where the value comes from, through ``or`` and ``set()``/``list()``-like
    # copies (``set(done or ())`` -> ``done``); with ``position``, the place of
    # this target in a tuple unpacking (``sending, recving = w.get_finished()``
    # gives ``recving`` origin ``w.get_finished()`` and position 1).
    origin: str | None = None
    position: int | None = None
    # a simple statement directly in its scope's body (no branch, loop, try or
    # with around it): it runs whenever the scope does, and rebinds the name
    straight: bool = False
    # the source text of a value that is a truth test (``bool(x)``, ``not x``,
    # ``a and b``, a comparison) bound to a plain name: where the name is
    # tested later, a rule can evaluate what it stands for
    test: str | None = None
    # the operator of an augmented assignment (``|`` for ``x |= y``, ``-``
    # for ``x -= y``): whether the value's elements go into the target
    op: str | None = None


# ``AssignFact.op`` of augmented assignments whose value's elements go into
# the target (``done |= t.take()``), and of those that take them out of it
# (``done -= failed``, ``done &= kept``).
AUG_MERGES = frozenset({"|", "+"})
AUG_TAKES = frozenset({"-", "&"})


# Methods whose calls on a container are recorded as ``ContainerOpFact``s
# (here, not in the extractor, so rules can use it without importing LibCST).
CONTAINER_METHODS = frozenset({
    "add", "discard", "remove", "pop", "popitem", "append", "appendleft",
    "extend", "update", "clear", "setdefault", "insert", "popleft",
})


class ContainerOpFact(NamedTuple):
    """A write into or removal from a container: ``x[k] = v``, ``del x[k]``,
    ``x.add(k)``, ``x.pop(k)``... ``container`` is the dotted chain of ``x``."""

    scope: str
    container: str
    op: str  # setitem | delitem | method name (add, pop, discard, append...)
    key: str | None
    line: int
    col: int
    # a ``setitem`` that counts: ``x[k] += 1``, ``x[k] -= n``, ``x[k] = left - 1``
    # (a value plus or minus a number literal); the container holds counts
    counts: bool = False


class KeyReadFact(NamedTuple):
    """A subscript ``base["key"]`` with a string-literal key (loads and
    stores alike; a store also has its ``ContainerOpFact``): a read of it
    raises ``KeyError`` where the key is missing, where ``.get`` would not."""

    scope: str
    base: str
    key: str
    line: int


class AttrReadFact(NamedTuple):
    """An attribute load ``base.attr`` that is not itself called."""

    scope: str
    base: str
    attr: str
    line: int
    col: int


class CompareFact(NamedTuple):
    """A comparison; ``operands`` are the dotted chains that appear in it."""

    scope: str
    operands: tuple[str, ...]
    ops: tuple[str, ...]
    text: str
    line: int
    col: int


class ReturnFact(NamedTuple):
    """A ``return`` (or ``yield``). ``elements`` holds the source text of each
    item when the value is a tuple display; ``value`` the whole text."""

    scope: str
    value: str | None
    elements: tuple[str, ...] | None
    line: int
    col: int
    # ``AssignFact.origin`` of each element (of the whole value when it is not
    # a tuple), and of each keyword of a returned constructor call
    # (``return Results(finished_recving=set(recving or ()))``)
    origins: tuple[str | None, ...] = ()
    fields: tuple[tuple[str, str | None], ...] = ()


class ElementFact(NamedTuple):
    """A value put into a container: an element of a display bound to a
    target (``x = [f, g]``, ``self.cbs = {"a": f}``), of a display returned
    (``group`` ``@return``), ``x.append(f)``, ``x.add(f)``, ``x.insert(i, f)``,
    ``x.setdefault(k, f)``, ``x.update({k: f})``, ``x.extend([f])`` and
    ``x[k] = f``. ``group`` is the container's dotted chain in ``scope``, or
    ``@N`` for the N-th nested display of the file; ``value`` is the dotted
    chain of the element, or ``@N`` when it is itself a display. The call
    graph reads values back through subscripts, ``get``/``pop`` and loops."""

    scope: str
    group: str
    value: str
    line: int
    # the literal key it is put under (``s:a`` for ``"a"``, ``i:0`` for a
    # list display's first element; see ``index.text.literal_key``); None
    # when unknown (``append``, ``x[k] = f``)
    key: str | None = None
    straight: bool = False  # as ``AssignFact.straight``


class RefFact(NamedTuple):
    """A function or class used as a value (callback, dict entry, return)."""

    scope: str
    name: str
    line: int
    col: int


class LogFact(NamedTuple):
    """A logging call and its message string."""

    scope: str
    level: str
    message: str
    line: int
    col: int


class ImportFact(NamedTuple):
    """``import a.b as c`` (name None) or ``from .m import n as c``."""

    scope: str
    module: str
    name: str | None
    asname: str | None
    level: int
    line: int
    type_checking: bool = False
    # inside a ``try`` or an ``if``: a fallback or a gate decides whether it runs
    guarded: bool = False
    # the ``if``/``case`` tests that must hold for it to run (``StmtTreeMixin._gates``)
    gates: tuple[str, ...] = ()


class ProblemFact(NamedTuple):
    """A file the indexer could not read or parse."""

    line: int
    reason: str


@dataclass
class FileFacts:
    """Everything the indexer knows about one file."""

    path: str
    sha: str
    lines: int = 0
    functions: list[FunctionFact] = field(default_factory=list)
    classes: list[ClassFact] = field(default_factory=list)
    calls: list[CallFact] = field(default_factory=list)
    assigns: list[AssignFact] = field(default_factory=list)
    containers: list[ContainerOpFact] = field(default_factory=list)
    reads: list[AttrReadFact] = field(default_factory=list)
    key_reads: list[KeyReadFact] = field(default_factory=list)
    compares: list[CompareFact] = field(default_factory=list)
    # chains used as a condition on their own (``if x.spec``, ``a and x.spec``,
    # ``not x``, a conditional expression's test): ops ``("Truth",)``
    truths: list[CompareFact] = field(default_factory=list)
    returns: list[ReturnFact] = field(default_factory=list)
    refs: list[RefFact] = field(default_factory=list)
    logs: list[LogFact] = field(default_factory=list)
    imports: list[ImportFact] = field(default_factory=list)
    elements: list[ElementFact] = field(default_factory=list)
    # Names bound by ``for``/comprehension targets (value ``xs[]``: an element
    # of ``xs``) and by matched tuple unpacking, kept apart from ``assigns``
    # (which rules read as statements): only the value evaluator reads them.
    binds: list[AssignFact] = field(default_factory=list)
    dunder_all: tuple[str, ...] | None = None
    # lines that carry a ``# type: ignore`` comment: the author tells the
    # type checker a value is what its declaration does not promise
    type_ignores: tuple[int, ...] = ()
    problem: ProblemFact | None = None
