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
from kvflowmap.check.kinds.forbid_calls import calls_from
from kvflowmap.check.kinds.forbid_contexts import contexts
from kvflowmap.check.kinds.forbid_options import READS, Options
from kvflowmap.check.kinds.forbid_writes import (committed_attrs, handed_attrs, released_writes,
                                                  writes_from)
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.model import Finding

def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Forbidden calls (or writes) reachable from the context functions."""
    if opts.forbid_writes:
        released = released_writes(ctx, opts)
        handed = handed_attrs(ctx, opts)
        committed = committed_attrs(ctx, opts)
        one = lambda start: writes_from(ctx, opts, start, released, handed,  # noqa: E731
                                        committed)
    else:
        one = lambda start: calls_from(ctx, opts, start)  # noqa: E731
    found: dict[tuple[str, int, int], Finding] = {}
    for f in each_function(ctx, contexts(ctx, opts), one):
        key = (f.function, f.line, f.column)
        if key not in found or len(f.path) < len(found[key].path):
            found[key] = f
    return sorted(found.values(), key=Finding.sort_key)


SPEC = KindSpec(Options, check, READS)
