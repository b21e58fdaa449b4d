"""``lifecycle`` mode ``cache_kept``: a cache lookup's miss branch keeps what
it makes (``kvflowmap.lifecycle.caches``).

tpu-inference 0.18.0 made a new ZMQ socket for every pull notification whose
peer was not in ``self.notif_sockets`` and never put it there: a socket per
request, never closed (0.19.0 stores it).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.lifecycle._shared import functions, lifecycle, short
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.caches import unkept_misses

READS = ("Reads: per subject function, its tests of `key in self.D` (and `x is None` after "
         "`x = self.D.get(key)`), the locals each branch binds from `self.D[...]` and from "
         "calls, and the puts into (or rebinding of) `self.D` from the test on.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``cache_kept`` (it has none)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per cache lookup whose miss branch does not keep what it makes."""
    lc = lifecycle(ctx)
    out = []
    for f in functions(ctx, lc):
        for u in unkept_misses(lc.functions[f], lc.functions):
            out.append(ctx.finding(
                f, u.line,
                f"{short(f)} looks `{u.local}` up in self.{u.attr} (line {u.test_line}) and on "
                f"a miss makes a new one here, but never puts it into self.{u.attr}: every "
                "call makes another (a socket, a connection, a handle per request) and nothing "
                f"closes the ones before. Store it: `self.{u.attr}[key] = {u.local}`",
                path=(ctx.step(f, u.test_line, f"looks it up in self.{u.attr}"),
                      ctx.step(f, u.line, "makes a new one on a miss and drops it")),
                anchor=f"cache-kept:{u.attr}"))
    return out
