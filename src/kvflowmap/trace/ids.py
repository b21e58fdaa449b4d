"""Which placeholders of a logging call carry a request id.

First by data flow: the lifecycle model (``lifecycle.ids``) knows which
names of a connector's functions hold request ids or collections of them,
whatever they are called (``key = request.request_id``, ``for r in
finished_recving``, a parameter an id is passed to). vLLM's own functions
are outside that model; their names are followed the same way within each
function (from the id fields of vLLM's objects). Then by name, for what
the flow does not reach (``req_id`` handed over by code the model does not
follow). A numeric placeholder (``%d``, ``%.3f``) never carries one: a
request id is a string. The placeholders chosen first hold the request a
line is about; the other id placeholders are related ids (a remote
request's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvflowmap.lifecycle.ids import IDENT, IdState, flow_locals, seed, unwrap
from kvflowmap.lifecycle.view import FnView, view
from kvflowmap.trace.formats import conversions, printf_style

if TYPE_CHECKING:
    from kvflowmap.lifecycle.model import Lifecycle
    from kvflowmap.model.core import Model

FLOW, NAME = "flow", "name"
FLOWED, NAMED, FIELD = 3, 2, 1  # how surely an argument holds a request id (see ``IdFlow.id_args``)
_STRING_CONVERSIONS = frozenset("sra")
_LOCAL_ROUNDS = 4  # passes of one function's own flow (assignments feed later ones)


@dataclass(frozen=True)
class IdArgs:
    """The id placeholders of one logging call (positions among its
    arguments after the message)."""

    ids: tuple[int, ...]  # the request (or requests) the line is about
    related: tuple[int, ...]  # further ids it names (a remote request's)
    how: str  # FLOW, NAME, or "" when it has none


NONE = IdArgs((), (), "")


def name_says_id(chain: str | None, id_fields: set[str]) -> bool:
    """Whether an argument's text names a request id (``req_id``,
    ``request.request_id``, ``req_ids``, ``rid``)."""
    if not chain:
        return False
    last = (unwrap(chain) or chain).rstrip("()").rpartition(".")[2].lower()
    return last in id_fields or last in ("rid", "req") or (
        "req" in last and (last.endswith("id") or last.endswith("ids")))


def string_placeholders(message: str, nargs: int) -> list[bool]:
    """Per argument after the message: whether its placeholder may show a
    string (``%s``, ``%r``; ``{}`` and unknown ones too), not a number."""
    if nargs <= 0:
        return []
    if not printf_style(message):
        return [True] * nargs
    convs = [c for c in conversions(message) if c != "%"]
    return [i >= len(convs) or convs[i] in _STRING_CONVERSIONS for i in range(nargs)]


def _shown(arg: str) -> str:
    """What of an argument's text may be a logged id: the argument, what a
    wrapper that keeps it shows (``sorted(ids)``, ``str(rid)``: the name
    inside), or "" for the result of another call (``len(ids)`` is a
    number, ``self._lookup(rid)`` something else)."""
    if "(" not in arg:
        return arg
    if unwrap(arg):
        return arg  # sorted(x), list(x.keys()): the collection x
    for w in ("str(", "repr("):
        if arg.startswith(w) and arg.endswith(")") and IDENT.fullmatch(arg[len(w):-1]):
            return arg[len(w):-1]
    return ""


class IdFlow:
    """Data flow of request ids over the analysed code, asked per logging
    call (``id_args``)."""

    def __init__(self, lifecycle: Lifecycle | None, model: Model | None,
                 id_fields: set[str]) -> None:
        self.lifecycle = lifecycle
        self.model = model
        self.id_fields = id_fields
        self._own: dict[str, FnView | None] = {}  # functions outside the model, followed locally

    def _view(self, fn: str) -> tuple[IdState, FnView] | None:
        """The id state and view that answer for ``fn``; None when unknown."""
        lc = self.lifecycle
        if lc is None:
            return None
        v = lc.functions.get(fn)
        if v is not None:
            return lc.state, v
        if fn not in self._own:
            self._own[fn] = v = view(self.model, fn) if self.model is not None and \
                fn in self.model.defs else None
            if v is not None:
                # vLLM's own code: its ids followed within the function only
                seed(lc.state, v)
                for _ in range(_LOCAL_ROUNDS):
                    if not flow_locals(lc.state, v):
                        break
        v = self._own[fn]
        return None if v is None else (lc.state, v)

    def by_flow(self, fn: str, args: tuple[str | None, ...]) -> list[int]:
        """Per argument, how surely data flow says it holds a request id or
        a collection of them: ``FLOWED`` (a name the ids flow into, a
        request-keyed container, what a report method returns, the id field
        of a hook's request), ``FIELD``
        (the id field of some other object: ``handshake.request_id`` may be
        a remote request's), 0 (not an id, or ``fn`` is not analysed)."""
        got = self._view(fn)
        if got is None:
            return [0] * len(args)
        state, v = got
        mine = state.of(v.fqn)
        fields = state.spec.id_fields
        # a hook's request parameter: its id field is the request's id (any
        # other object with an id field may carry another request's)
        requests = set(state.spec.request_params.get(v.name, ()))
        # what a report method hands back to vLLM (get_finished's sending,
        # recving) are request ids by the protocol, wherever they came from
        reported = {o for r in v.all_returns for o in r.origins if o and IDENT.fullmatch(o)} \
            - {"None"} if v.name in state.report_methods else set()
        out = []
        for a in args:
            strength = 0
            a = _shown(a) if a else ""
            if a:
                base = unwrap(a)
                if any(t in mine.ids for t in IDENT.findall(a)) or base in mine.colls or \
                        base in reported or (
                        "." in base and base.rpartition(".")[2] in state.keyed_attrs):
                    strength = FLOWED
                else:
                    for t in IDENT.findall(a):
                        head, _, last = t.rpartition(".")
                        if head and last in fields:
                            strength = FLOWED if head in requests else FIELD
                            break
            out.append(strength)
        return out

    def id_args(self, fn: str, message: str, args: tuple[str | None, ...]) -> IdArgs:
        """The id placeholders of a logging call in ``fn`` with ``message``
        and ``args`` (the arguments' texts after the message): the first of
        the surest kind is the request the line is about, by data flow
        first, then by name, then an id field of another object; the rest
        are related ids."""
        text = string_placeholders(message, len(args))
        flow = self.by_flow(fn, args)
        score = [0 if not t else FLOWED if f == FLOWED else NAMED if name_says_id(_shown(a or ""), self.id_fields)
                 else f for t, f, a in zip(text, flow, args, strict=True)]
        best = max(score, default=0)
        if not best:
            return NONE
        first = score.index(best)
        related = tuple(i for i, sc in enumerate(score) if sc and i != first)
        return IdArgs((first,), related, FLOW if best == FLOWED else NAME)
