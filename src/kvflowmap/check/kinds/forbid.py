"""Rule kind ``forbid``: calls (or writes) that must not happen in a context.

Context functions are methods of the target classes named in ``methods``, the
protocol's methods of one ``side`` (e.g. every scheduler-side hook) and the
functions matching ``entry_points``.

- Calls mode (``calls``): call edges of the graph (``call`` and ``dispatch``;
  never bridges, nor callbacks handed to threads unless ``follow_refs``) are
  followed ``depth`` hops through the subject code. A call whose resolved
  external target (or, when unresolved, whose callee text) matches a ``calls``
  glob is a finding unless it is bounded: it passes a keyword of
  ``unless_kwargs`` (``timeout=``); it matches ``positional_timeout`` and has
  a positional argument (``event.wait(5)``; this also spares ``sep.join(xs)``);
  for a ``guarded_by`` glob, the receiver was asked first on the way to the
  call (``if fut.done(): fut.result()``, ``if not fut.done(): return``); or,
  for a ``timeout_setters`` glob, the class of the call gives its sockets a
  timeout (``sock.setsockopt(zmq.RCVTIMEO, ms)``, ``sock.settimeout(s)``).
- Writes mode (``forbid_writes: true``): an attribute or container write on
  ``self.*`` in a context function, in a method it calls on ``self``
  (``self._helper()``), or in the method of the same name it delegates to
  (``self._scheduler.get_num_new_matched_tokens(...)``, a facade's half) is a
  finding unless the attribute matches ``allow_attrs``. With ``released_by``,
  a write is accepted when what the ``released_by`` methods reach (the same
  way) resets the attribute (``self.x = ...``, ``self.x.clear()``: per-step
  state) or, for a keyed write (``self._d[req_id] = ...``, ``.add(req_id)``),
  removes from it (a per-request memo dropped when the request ends).
  ``ignore_removals`` accepts pops, ``del`` and ``discard`` (they release).

Each site is reported once, with the chain from the first context function
(sorted) that reaches it by the fewest hops.
"""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.forbid_calls import (EXCLUDE, GUARDED_BY, POSITIONAL_TIMEOUT,
                                                TIMEOUT_SETTERS, calls_from)
from kvflowmap.check.kinds.forbid_contexts import contexts
from kvflowmap.check.kinds.forbid_writes import released_writes, writes_from
from kvflowmap.check.model import Finding

PARAMS: dict[str, tuple[tuple[type, ...], object, str]] = {
    "methods": ((list,), [], "method names of the target classes to start from"),
    "side": ((str,), "", "start from the protocol's methods of this side (scheduler, worker)"),
    "entry_points": ((list,), [], "FQN globs of functions to start from"),
    "calls": ((list,), [], "FQN globs of forbidden calls (time.sleep, requests.*, *.wait)"),
    "unless_kwargs": ((list,), [], "a call passing one of these keywords is fine (timeout)"),
    "positional_timeout": ((list,), POSITIONAL_TIMEOUT,
                           "globs of calls whose positional argument is a timeout"),
    "guarded_by": ((dict,), GUARDED_BY,
                   "glob -> methods that, called first on the same receiver, bound the call"),
    "timeout_setters": ((dict,), TIMEOUT_SETTERS,
                        "glob -> calls ('method' or 'method:ARG') that, made anywhere in the "
                        "class of the call, give its receivers a timeout"),
    "exclude": ((list,), EXCLUDE, "globs never reported"),
    "depth": ((int,), 6, "call hops followed from a context function"),
    "edge_kinds": ((list,), ["call", "dispatch"], "graph edge kinds followed (calls mode)"),
    "follow_refs": ((bool,), False, "follow functions passed as values (thread targets)"),
    "follow_context": ((bool,), False, "follow calls into --context/--release code"),
    "forbid_writes": ((bool,), False, "report writes to self.* instead of calls"),
    "allow_attrs": ((list,), [], "writes mode: attribute globs that may be written"),
    "follow_attrs": ((bool,), False, "writes mode: also follow any call on a self attribute "
                     "(self.pool.touch()), not only self.m() and same-name delegation"),
    "released_by": ((list,), [], "writes mode: methods whose resets (and, for keyed writes, "
                    "removals) make a write acceptable (request_finished, build_connector_meta)"),
    "ignore_removals": ((bool,), False, "writes mode: pops, del and discard are not reported"),
}


def check(ctx: CheckContext) -> list[Finding]:
    """Forbidden calls (or writes) reachable from the context functions."""
    if ctx.param("forbid_writes", False):
        released = released_writes(ctx)
        one = lambda start: writes_from(ctx, start, released)  # noqa: E731
    else:
        one = lambda start: calls_from(ctx, start)  # noqa: E731
    found: dict[tuple[str, int, int], Finding] = {}
    for f in each_function(ctx, contexts(ctx), one):
        key = (f.function, f.line, f.column)
        if key not in found or len(f.path) < len(found[key].path):
            found[key] = f
    return sorted(found.values(), key=Finding.sort_key)
