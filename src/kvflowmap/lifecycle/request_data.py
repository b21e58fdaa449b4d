"""The request's data inside one function: the names that hold its id or
data (``IdState.own_request_names``) and what the function gathers from them
for its work (the locals a statement naming one binds or appends to, the
targets of a loop over one). A transfer that fails works on these; a wait on
one of them waits for that request."""

from __future__ import annotations

from kvflowmap.lifecycle.containers import ADD_OPS
from kvflowmap.lifecycle.ids import IDENT
from kvflowmap.lifecycle.view import FnView


def request_data(fn: FnView, names: set[str]) -> set[str]:
    """``names`` and the locals a simple statement naming one of them binds
    or appends to (``addrs.append(addr)``; ``batch = addrs[k:] + addrs[:k]``),
    and the targets of a loop over one: the request's data, gathered for the
    transfer that may fail."""
    out = set(names)
    for _ in range(4):
        before = len(out)
        for st in fn.stmts:
            if st.kind == "simple" and out & set(st.names):
                out |= {a.target for a in fn.assigns(st) if "." not in a.target}
                out |= {op.container for op in fn.containers(st)
                        if op.op in ADD_OPS and "." not in op.container}
            elif st.kind == "for" and st.text and " in " in st.text:
                # ``for handle, t in handles``: the items of the request's data
                targets, _, walked = st.text.partition(" in ")
                if out & {n.partition(".")[0] for n in IDENT.findall(walked)}:
                    out |= set(IDENT.findall(targets))
        if len(out) == before:
            break
    return out
