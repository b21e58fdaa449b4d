"""Announced requests: a request the scheduler told its workers about must
be told about again on every way it finishes.

A P/D connector's scheduler half announces a request to its workers twice.
The commit hook (``update_state_after_alloc``) puts the id into a container
the metadata builder hands over (``self._reqs_in_batch``): the worker starts
tracking it (``_reqs_to_process``, a ``reqs_need_send`` entry with no
expiry). The delay-free hook (``request_finished``) announces it again when
it delays the free (``self._reqs_need_send[rid] = expiry``): the worker
pairs the two and sends, or lets the entry expire. A ``request_finished``
path that ends the request without delaying (an abort, a status other than
the expected one) and tells the workers nothing leaves the first
announcement unpaired: the worker's entry for it is never removed, and a
peer that pulls it waits (vLLM 0.11.0's NIXL and 0.15.1's Mooncake
connectors; both fixed by forwarding such ids as ``reqs_not_processed``).

Paths are told apart by the tests the commit hook's announcement sits
under (``elif params.get("do_remote_decode"):``): a ``request_finished``
path on which such a test is known false is about other requests. Tests are
evaluated three-valued (``not T or X`` may take either arm; ``not params``
is false where ``params.get(...)`` is true).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from kvflowmap.facts import Stmt
from kvflowmap.lifecycle.containers import ADD_OPS, self_attr
from kvflowmap.lifecycle.effects import HANDLING, Effects
from kvflowmap.lifecycle.ids import loop_targets
from kvflowmap.lifecycle.view import FnView, walk
from kvflowmap.model.classes import ClassIndex

# a guard: the text of a test and the arm the statement is on
Guard = tuple[str, bool]


@dataclass(frozen=True)
class Missed:
    """``fqn`` (the delay-free hook) returns at ``line`` without the
    announcement ``commit`` makes at ``commit_line`` into ``attr`` (handed
    over to the workers by ``builder``)."""

    fqn: str
    line: int
    commit: str
    commit_line: int
    attr: str
    builder: str


@dataclass(frozen=True)
class Unannounced(Missed):
    """A return that also does not delay the free, for a request the commit
    hook announced: the workers are never told it ended."""

    paired_line: int  # where the delaying path announces it again


def forwarded_attrs(fn: FnView) -> set[str]:
    """Attributes of ``self`` the metadata builder ``fn`` puts into what it
    returns: ``meta.f = self.X``, ``Meta(f=self.X)`` bound or returned, or a
    loop over ``self.X`` that adds each entry (``meta.add_new_req(rid, ...)``,
    ``meta.reqs[rid] = ...``)."""
    back = {(r.value or "").strip() for r in fn.all_returns} - {""}
    out: set[str] = set()
    for a in fn.all_assigns:
        if a.target.partition(".")[0] in back and a.value and (x := self_attr(a.value)) \
                and a.value == f"self.{x}":
            out.add(x)
    lines = {r.line for r in fn.all_returns} | {a.line for a in fn.all_assigns
                                                if a.target in back}
    for c in fn.all_calls:
        if c.line in lines and not (c.callee or "").startswith(("self.", "super()")):
            out.update(x for arg in (*c.args, *(v for _, v in c.kwargs))
                       if (x := self_attr(arg or "")) and arg == f"self.{x}")
    for s in fn.stmts:
        if s.kind != "for":
            continue
        _, iterable = loop_targets(s.text)
        x = self_attr((iterable or "").partition("(")[0].rsplit(".", 1)[0]
                      if (iterable or "").endswith(")") else iterable or "")
        body = list(walk(s.body))
        if x and (any((c.callee or "").partition(".")[0] in back
                      for t in body for c in fn.calls(t)) or
                  any(op.container.partition(".")[0] in back
                      for t in body for op in fn.containers(t))):
            out.add(x)
    return out


def announcements(fn: FnView, eff: Effects, attrs: set[str]
                  ) -> list[tuple[int, str, str, tuple[Guard, ...]]]:
    """``(line, attr, op, guards)`` per statement of ``fn`` adding a request
    id to a forwarded ``self`` attribute, with the tests it sits under."""
    out = []
    for s, guards in guarded(fn.fact.body, ()):
        for op in fn.containers(s):
            x = self_attr(op.container)
            if x in attrs and op.op in ADD_OPS and eff.state.is_id(fn, op.key):
                out.append((s.line, x, op.op, guards))
    return out


def guarded(body: tuple[Stmt, ...], guards: tuple[Guard, ...]
             ) -> Iterator[tuple[Stmt, tuple[Guard, ...]]]:
    """Each statement with the tests it sits under: the arms of enclosing
    ``if``s, and the tests of earlier ``if T: return`` (false after them)."""
    for s in body:
        yield s, guards
        if s.kind == "if" and s.text:
            yield from guarded(s.body, guards + ((s.text, True),))
            yield from guarded(s.orelse, guards + ((s.text, False),))
            if not s.orelse and s.body and s.body[-1].kind in ("return", "raise"):
                guards = guards + ((s.text, False),)
        else:
            for part in (s.body, s.orelse, s.final, *(h.body for h in s.handlers)):
                yield from guarded(part, guards)


# -- paths of the delay-free hook ---------------------------------------------

# a path state: the value known for each atom of the guards (None: unknown),
# the first line that handed the id on (0: none), and the forwarded
# attributes the path added to
_State = tuple[tuple[bool | None, ...], int, frozenset[str]]


@dataclass(frozen=True)
class Exit:
    """A return of the delay-free hook on some path: what its first element
    says, the atoms' values there, and the first line that handed the id on
    (0: none)."""

    line: int
    first: str
    atoms: tuple[bool | None, ...]
    handed: int
    told: frozenset[str]  # forwarded attributes the path added to


def exits(fn: FnView, eff: Effects, atoms: tuple[str, ...], element: int,
          forwarded: set[str]) -> list[Exit]:
    """Every return of ``fn`` per distinct path state (atom values, hand-over,
    forwarded attributes added to). Adding anything to a ``forwarded``
    attribute tells the workers (``self._reqs_not_processed.add(
    params["transfer_id"])``: keyed by another id of the request)."""
    out: list[Exit] = []
    start: _State = (tuple(None for _ in atoms), 0, frozenset())
    _run(_Walk(fn, eff, atoms, element, frozenset(forwarded), out, local_tests(fn)),
         fn.fact.body, {start})
    return sorted(set(out), key=lambda e: (e.line, e.first, e.handed))


@dataclass
class _Walk:
    """What one walk of the delay-free hook needs, and the exits it finds."""

    fn: FnView
    eff: Effects
    atoms: tuple[str, ...]
    element: int
    forwarded: frozenset[str]
    out: list[Exit]
    # locals bound once to a truth test (``is_p_node = bool(params.get(...))``)
    tests: dict[str, str]


def _run(w: _Walk, body: tuple[Stmt, ...], states: set[_State]) -> set[_State]:
    fn = w.fn
    for s in body:
        if not states:
            break
        if s.kind == "return":
            for vals, handed, told in states:
                for r in fn.returns(s):
                    first = r.elements[w.element].strip() if r.elements and \
                        w.element < len(r.elements) else (r.value or "None")
                    w.out.append(Exit(s.line, first, vals, handed, told))
            return set()
        if s.kind == "if" and s.text:
            nxt: set[_State] = set()
            for arm, part in ((True, s.body), (False, s.orelse)):
                test = expand(s.text, w.tests)
                split = {st2 for st in states for st2 in _assume(test, arm, w.atoms, st)}
                nxt |= _run(w, part, split)
            states = nxt
            continue
        added = frozenset(x for op in fn.containers(s) if op.op in ADD_OPS
                          and (x := self_attr(op.container)) in w.forwarded)
        if added or any(e.kind in HANDLING and e.kind != "return" for e in w.eff.of(fn, s)):
            states = {(vals, handed or s.line, told | added) for vals, handed, told in states}
        if s.kind in ("for", "while", "with", "try"):
            inner = _run(w, s.body, set(states))
            for h in s.handlers:
                inner |= _run(w, h.body, set(states))
            inner |= _run(w, s.orelse, inner | states)
            states = _run(w, s.final, inner if s.kind == "with" else inner | states)
    return states


def local_tests(fn: FnView) -> dict[str, str]:
    """Locals of ``fn`` bound exactly once, to a truth test (``AssignFact.test``)."""
    count: dict[str, int] = {}
    for a in fn.all_assigns:
        count[a.target] = count.get(a.target, 0) + 1
    return {a.target: a.test for a in fn.all_assigns if a.test and count[a.target] == 1}


def expand(test: str, tests: dict[str, str], depth: int = 3) -> str:
    """``test`` with the locals in ``tests`` replaced by what they stand for
    (normalised: ``ast.unparse``)."""
    try:
        tree = ast.parse(test.strip(), mode="eval")
    except SyntaxError:
        return test
    for _ in range(depth):
        changed = False

        class _Sub(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                nonlocal changed
                if node.id in tests and _parses(tests[node.id]):
                    changed = True
                    return ast.parse(tests[node.id].strip(), mode="eval").body
                return node

        tree = _Sub().visit(tree)
        if not changed:
            break
    return ast.unparse(tree)


def _assume(test: str, arm: bool, atoms: tuple[str, ...], st: _State) -> list[_State]:
    """The states, refined, in which ``test`` can take ``arm``: each value of
    the unknown atoms it mentions under which it does (or may)."""
    vals, handed, told = st
    unknown = [i for i, atom in enumerate(atoms) if vals[i] is None and atom_in(atom, test)]
    out = []
    for bits in range(1 << len(unknown)):
        trial = list(vals)
        for k, i in enumerate(unknown):
            trial[i] = bool(bits >> k & 1)
        if evaluate(test, dict(zip(atoms, trial, strict=True))) in (None, arm):
            out.append((tuple(trial), handed, told))
    return out


def atom_in(atom: str, test: str) -> bool:
    """``test`` mentions ``atom`` (or the object it reads: ``params`` for
    ``params.get("x")``)."""
    base = atom.partition(".")[0].partition("[")[0]
    return atom in test or (bool(base) and base in test)


def evaluate(test: str, known: dict[str, bool | None]) -> bool | None:
    """Three-valued truth of ``test`` given atom values (None: unknown)."""
    try:
        tree = ast.parse(test.strip(), mode="eval").body
    except SyntaxError:
        return None
    norm = {ast.unparse(ast.parse(a, mode="eval").body): v for a, v in known.items()
            if _parses(a)}
    return _eval(tree, norm)


def _parses(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return True


def _eval(node: ast.expr, known: dict[str, bool | None]) -> bool | None:
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, known) for v in node.values]
        if isinstance(node.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _eval(node.operand, known)
        return None if v is None else not v
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "bool" and len(node.args) == 1 and not node.keywords:
        return _eval(node.args[0], known)
    text = ast.unparse(node)
    if text in known:
        return known[text]
    # ``params`` is true where ``params.get("x")`` or ``params["x"]`` is
    if any(v is True and (a.startswith(text + ".") or a.startswith(text + "["))
           for a, v in known.items()):
        return True
    return None


FALSY = frozenset({"False", "None", "0"})
# path states grow as 2**atoms: an announcement under more tests is skipped
_MAX_ATOMS = 8


def unannounced(fns: dict[str, FnView], classes: ClassIndex, eff: Effects, commit_name: str,
                finish_name: str, builder_name: str, element: int) -> list[Unannounced]:
    """Per class whose commit hook announces request ids to the workers, the
    returns of its delay-free hook that neither delay nor tell the workers
    anything, on paths the announcement's tests allow, when another such
    path delays and announces the request again in a way the workers pair
    with the first: into the same container (the worker completes its
    entry), or after a bare existence notice (the id alone, added to a set)."""
    out: set[Unannounced] = set()
    handed: dict[str, set[str]] = {}  # builder -> forwarded attrs (subclasses share one)
    for commit, finish, builder in scheduler_hooks(fns, classes, commit_name, finish_name,
                                                   builder_name):
        if builder not in handed:
            handed[builder] = forwarded_attrs(fns[builder])
        attrs = handed[builder]
        tests = local_tests(fns[commit])
        for line, attr, op, guards in announcements(fns[commit], eff, attrs) if attrs else ():
            guards = tuple((expand(t, tests), arm) for t, arm in guards)
            atoms = tuple(dict.fromkeys(a for t, _ in guards for a in leaves(t)))
            if len(atoms) > _MAX_ATOMS:
                continue  # too many tests to tell the paths apart
            ex = [e for e in exits(fns[finish], eff, atoms, element, attrs)
                  if all(evaluate(t, dict(zip(atoms, e.atoms, strict=True))) in (None, arm)
                         for t, arm in guards)]
            paired = [e for e in ex if e.handed and e.first not in FALSY
                      and (attr in e.told or (op == "add" and e.told))]
            if not paired:
                continue
            for e in ex:
                if not e.handed and e.first == "False":
                    out.add(Unannounced(finish, e.line, commit, line, attr, builder,
                                        paired[0].handed))
    return sorted(out, key=lambda u: (u.fqn, u.line, u.attr))


def scheduler_hooks(fns: dict[str, FnView], classes: ClassIndex, commit_name: str,
                    finish_name: str, builder_name: str) -> Iterator[tuple[str, str, str]]:
    """``(commit, finish, builder)``, the members an analysed class resolves
    the three hook names to, for each class where all three are analysed."""
    for cls in sorted({fn.cls for fn in fns.values() if fn.cls}):
        commit, finish, builder = (classes.find_member(cls, n)
                                   for n in (commit_name, finish_name, builder_name))
        if commit and finish and builder and commit in fns and finish in fns and builder in fns:
            yield commit, finish, builder


def leaves(test: str) -> list[str]:
    """The atoms of a test: its parts that are not ``and``/``or``/``not``
    (``bool(x)`` is ``x``), normalised."""
    try:
        node = ast.parse(test.strip(), mode="eval").body
    except SyntaxError:
        return []
    out: list[str] = []

    def visit(n: ast.expr) -> None:
        if isinstance(n, ast.BoolOp):
            for v in n.values:
                visit(v)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            visit(n.operand)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id == "bool" and len(n.args) == 1:
            visit(n.args[0])
        else:
            out.append(ast.unparse(n))

    visit(node)
    return out
