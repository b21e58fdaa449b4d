"""State the probe adds for a request that only the commit hook takes out.

vLLM asks the probe (``get_num_new_matched_tokens``) about a waiting request
and calls the commit hook (``update_state_after_alloc``) only once it has
allocated blocks for it. A request can end in between: aborted while it waits,
it goes from the waiting queue straight to the ending hook
(``request_finished``). An entry the probe adds for the request (which child
connector answered, a lookup result, a pinned prefix) that only the commit
hook, or what it runs, removes stays behind for every such request: it leaks,
and whatever reads the container later finds a request that is gone. So does
one that only a later call of the probe removes (a lookup still running when
the probe answered "ask again"): an aborted request is never probed again
(PegaFlow 0.23.0's prefetch start times; 0.23.1 pops them on release).

Structure only: per leaf class (``balance.leaf_uses``) and request-keyed
``self`` attribute, every add is in code the probe runs and not the commit or
ending hooks, and every removal is in code only the probe or the commit hook
runs. A container also emptied wholesale (a per-step buffer), handed to other
code, or forwarded in the metadata is left out, as is one removed anywhere
else (an expiry sweep, a report): another way out exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvflowmap.lifecycle.balance import LeafUses, Use


@dataclass(frozen=True)
class ProbeLeft:
    """``self.attr`` of ``cls``: filled by the probe, emptied only on commit."""

    cls: str
    attr: str
    add: Use  # the probe's first add
    removes: tuple[Use, ...]  # every removal (all on the probe's or the commit hook's way)
    end: str | None  # the class's ending hook, when the subject defines it
    # some removal is on the commit hook's way; else only a later probe call removes it
    on_commit: bool = True


def probe_leftovers(per_leaf: Mapping[str, LeafUses],
                    keyed: set[str], probe: set[str], commit: set[str], end: set[str],
                    end_names: frozenset[str]) -> list[ProbeLeft]:
    """Every such container (``probe``, ``commit``, ``end``: the functions
    those hooks make run; ``end_names``: the ending hooks' names)."""
    out: list[ProbeLeft] = []
    for leaf, (members, uses) in sorted(per_leaf.items()):
        ending = next((m.fqn for m in members if m.name in end_names and m.cls == leaf), None) \
            or next((m.fqn for m in members if m.name in end_names), None)
        for attr, us in sorted(uses.items()):
            if attr not in keyed or {u.what for u in us} & {"escape", "clear", "forward"}:
                continue
            adds = [u for u in us if u.what == "add"]
            removes = [u for u in us if u.what == "remove"]
            if not adds or not removes:
                continue  # never removed at all: kvc-request-state-balanced's
            if not all(u.fqn in probe and u.fqn not in commit and u.fqn not in end
                       for u in adds):
                continue
            if any(u.fqn in end or (u.fqn not in commit and u.fqn not in probe)
                   for u in removes):
                continue
            out.append(ProbeLeft(leaf, attr, adds[0], tuple(removes), ending,
                                 any(u.fqn in commit for u in removes)))
    return out
