"""Data edges: request states, carrier fields, bridges; sides and flow marks."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvflowmap.graph.build import Linker, member_line


def state_member(lk: Linker, ctx: tuple[str, str], chain: str) -> str | None:
    """``RequestStatus.X`` in ctx -> the state node id, when X is a state."""
    head, _, member = chain.rpartition(".")
    if not head or "(" in chain:
        return None
    for kind, fqn in lk.values.eval(ctx, head):
        if kind == "class" and fqn in lk.protocol.state_enums:
            fact = lk.classes.class_fact(fqn)
            if fact is not None and member in fact.members:
                return f"{fqn}.{member}"
    return None


def add_states(lk: Linker) -> None:
    """``sets_state`` from assignments, ``reads_state`` from comparisons."""
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        for a in ff.assigns:
            if a.value and "." in a.target:
                state = state_member(lk, (module, a.scope), a.value)
                if state:
                    add_state_node(lk, state)
                    lk.add_edge(lk.scope_node(module, a.scope), state, "sets_state", module,
                                a.line, target=a.target)
        for c in ff.compares:
            for op in c.operands:
                state = state_member(lk, (module, c.scope), op)
                if state:
                    add_state_node(lk, state)
                    lk.add_edge(state, lk.scope_node(module, c.scope), "reads_state", module,
                                c.line, guard=c.text)


def add_state_node(lk: Linker, state: str) -> None:
    """The node of a request state (made once)."""
    if state in lk.graph and lk.graph.nodes[state].get("kind") == "state":
        return
    enum, _, member = state.rpartition(".")
    d = lk.model.defs.get(enum)
    where = lk.where(d.module) if d else {"file": "", "root": ""}
    # defined where the enum's body binds the member, not at the ``class`` line
    line = (member_line(lk.model, d.module, d.fact.qualname, member) or d.fact.line) if d else 0
    lk.graph.add_node(state, kind="state", line=line, flow=True,
                      package=state.split(".")[0], subject=False, **where)


@dataclass(frozen=True)
class Store:
    """A write of a carrier field: ``o.field = value`` or ``Class(field=value)``
    in ``module``/``scope`` at ``line``; ``value`` is where the value comes
    from (``AssignFact.origin``, a keyword's chain), "" when unknown."""

    module: str
    scope: str
    line: int
    field: str
    value: str
    # the place of the target in a tuple unpacking (``out.finished_sending,
    # out.finished_recving = connector.get_finished(...)``: 1 for recving)
    position: int | None = None


def add_fields(lk: Linker) -> list[Store]:
    """``produces``/``consumes`` edges for each carrier field of the protocol;
    returns the writes found (``returnflow`` follows their values back)."""
    by_attr: dict[str, list] = {}
    for c in lk.protocol.carriers:
        by_attr.setdefault(c.attr, []).append(c)
    stores: list[Store] = []
    for module in sorted(lk.model.facts):
        ff = lk.model.facts[module]
        first = len(stores)
        for a in ff.assigns:
            base, _, attr = a.target.rpartition(".")
            for c in by_attr.get(attr, ()):
                if base and _is_owner(lk, (module, a.scope), base, c.owner):
                    stores.append(Store(module, a.scope, a.line, c.field, a.origin or "",
                                        a.position))
        for call in ff.calls:
            for kw, value in call.kwargs:
                for c in by_attr.get(kw, ()):
                    if call.callee and any(k == "class" and f == c.owner for k, f in
                                           lk.values.eval((module, call.scope), call.callee)):
                        stores.append(Store(module, call.scope, call.line, c.field, value or ""))
        for s in stores[first:]:
            _field_edge(lk, lk.scope_node(module, s.scope), s.field, "produces", module, s.line)
        for r in _loads(ff):
            for c in by_attr.get(r.attr, ()):
                if _is_owner(lk, (module, r.scope), r.base, c.owner):
                    _field_edge(lk, c.field, lk.scope_node(module, r.scope), "consumes", module, r.line)
    return stores


def _loads(ff) -> list:
    """The attribute reads of a file that load a value: the facts record the
    target of ``o.field = value`` as a read of ``o.field`` too, which reads
    nothing (``output.finished_recving = results.finished_recving`` consumes
    ``results``' field, not ``output``'s). One read per plain assignment of
    the same target on its line is dropped, so ``o.f = o.f or set()`` still
    reads ``o.f`` once; ``o.f += x`` reads it."""
    stored: dict[tuple[str, int, str], int] = {}
    for a in ff.assigns:
        if not a.aug and "." in a.target:
            key = (a.scope, a.line, a.target)
            stored[key] = stored.get(key, 0) + 1
    out = []
    for r in ff.reads:
        key = (r.scope, r.line, f"{r.base}.{r.attr}")
        if stored.get(key):
            stored[key] -= 1
            continue
        out.append(r)
    return out


def _is_owner(lk: Linker, ctx, base: str, owner: str) -> bool:
    """True when ``base`` is an instance of ``owner`` (or of unknown type:
    carrier names are specific enough that an untyped receiver counts)."""
    values = [v for v in lk.values.eval(ctx, base) if v[0] != "elems"]
    if not values:
        return True
    for kind, fqn in values:
        if kind == "inst" and (fqn == owner or owner in lk.classes.mro(fqn)):
            return True
    return False


def _field_edge(lk: Linker, u: str, v: str, kind: str, module: str, line: int) -> None:
    field = v if kind == "produces" else u
    if field not in lk.graph or lk.graph.nodes[field].get("kind") != "field":
        owner, _, attr = field.rpartition(".")
        d = lk.model.defs.get(owner)
        where = lk.where(d.module) if d else {"file": "", "root": ""}
        lk.graph.add_node(field, kind="field", line=_field_line(lk, d, attr), flow=True,
                          package=field.split(".")[0], subject=False, **where)
    lk.add_edge(u, v, kind, module, line)


def _field_line(lk: Linker, d, attr: str) -> int:
    """The line that declares ``attr`` in the class body of ``d`` (its
    ``finished_recving: set[str] | None = None``), else the class line."""
    if d is None:
        return 0
    for a in lk.model.facts[d.module].assigns:
        if a.scope == d.fact.qualname and a.target == attr:
            return a.line
    return d.fact.line


def _with_overrides(lk: Linker, names) -> list[str]:
    out: list[str] = []
    for n in names:
        if n in lk.model.defs:
            out.append(n)
            out += lk.classes.overrides(n)
    return sorted(set(out))


def add_bridges(lk: Linker) -> None:
    """Bridge edges across the process boundary, one per carrier.

    Sources are the implementations of the protocol's source methods that the
    analysed vLLM takes the field from: when the field has producers through
    return values (``graph.returnflow``), only those; and in any case only
    the implementations vLLM's calls reach for a class that runs them
    (``_Reach``): a class overriding ``get_transfer_results`` without calling
    ``get_finished`` gets no bridge from its ``get_finished``, which vLLM 0.33
    never calls. A target that is a method of the source's own class
    hierarchy is that class's implementation (the metadata one connector
    built reaches its own ``start_load_kv``, not every connector's); other
    targets (vLLM's scheduler) are the declared ones."""
    reach = _Reach(lk)
    for c in lk.protocol.carriers:
        targets = [t for t in c.targets if t in lk.model.defs]
        sources = _with_overrides(lk, c.sources)
        returned = {u for u, _, d in lk.graph.in_edges(c.field, data=True)
                    if d.get("kind") == "produces" and d.get("via") == "return"} \
            if c.field in lk.graph else set()
        if returned:
            sources = [s for s in sources if s in returned]
        sources = [s for s in sources if reach.runs(s)]
        for src in sources:
            d = lk.model.defs[src]
            for dst in targets:
                for own in _own(lk, src, dst, reach):
                    lk.add_edge(src, own, "bridge", d.module, d.fact.line, carrier=c.field)


class _Reach:
    """Which hook implementations vLLM's calls reach, per connector class.

    vLLM *enters* hook ``h`` of class ``C`` when code outside the connector
    classes (the protocol base and its subclasses) calls ``D.h`` for a class
    ``D`` along ``C``'s MRO (the model runner calling the base's
    ``get_transfer_results``). A hook ``s`` runs for ``C`` when vLLM enters it,
    or when the implementation ``C`` has of a hook vLLM enters calls ``s`` on
    the same object (``self.s()``, ``super().s()``, through other methods of
    ``self``): the base's ``get_transfer_results`` calls ``self.get_finished``,
    NIXL's override of it does not, so NIXL's ``get_finished`` never runs.
    When vLLM's calls into the hooks are not among the analysed code at all,
    every implementation counts as run (nothing to decide by)."""

    DEPTH = 6

    def __init__(self, lk: Linker) -> None:
        self.lk = lk
        self.base = lk.protocol.base_class
        self.family = {self.base, *lk.classes.all_subclasses(self.base)}
        self.hooks = [m for ms in lk.protocol.methods.values() for m in ms]
        # hook name -> the classes whose method of that name vLLM calls
        self.entered: dict[str, set[str]] = {}
        g = lk.graph
        for h in self.hooks:
            for k in self.family:
                m = f"{k}.{h}"
                if m not in g or lk.model.defs.get(m) is None:
                    continue
                if any(d.get("kind") == "call" and self._outside(u)
                       for u, _, d in g.in_edges(m, data=True)):
                    self.entered.setdefault(h, set()).add(k)
        self._memo: dict[tuple[str, str], bool] = {}

    def _outside(self, fqn: str) -> bool:
        """``fqn`` is not code of a connector class (nor nested in one)."""
        head = fqn
        while "." in head:
            head = head.rpartition(".")[0]
            if head in self.family:
                return False
        return True

    def runs(self, method: str) -> bool:
        """Some class that has ``method`` as its implementation runs it."""
        cls, _, name = method.rpartition(".")
        if not self.entered or cls not in self.family or name not in self.hooks:
            return True
        return any(self.runs_for(k, name) for k in self._runners(cls, name, method))

    def _runners(self, cls: str, name: str, method: str) -> list[str]:
        return [cls] + [sub for sub in self.lk.classes.all_subclasses(cls)
                        if self.lk.classes.find_member(sub, name) == method]

    def runs_for(self, cls: str, name: str) -> bool:
        """vLLM's calls reach hook ``name`` of an object of class ``cls``."""
        if not self.entered or name not in self.hooks:
            return True
        key = (cls, name)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._entered(cls, name) or any(
                self._entered(cls, h) and self._calls_on_self(cls, h, name)
                for h in self.hooks if h != name)
        return found

    def _entered(self, cls: str, name: str) -> bool:
        mro = self.lk.classes.mro(cls)
        return any(k in mro for k in self.entered.get(name, ()))

    def _calls_on_self(self, cls: str, hook: str, name: str) -> bool:
        """The implementation of ``hook`` that ``cls`` runs calls ``name`` on
        ``self``, directly or through other methods of ``self``."""
        start = self.lk.classes.find_member(cls, hook)
        seen: set[str] = set()
        frontier = [start] if start else []
        for _ in range(self.DEPTH):
            nxt = []
            for fqn in frontier:
                if fqn in seen:
                    continue
                seen.add(fqn)
                d = self.lk.model.defs.get(fqn)
                if d is None or d.is_class:
                    continue
                owner = fqn.rpartition(".")[0]
                ctx = (d.module, d.fact.qualname)
                for call in self.lk.model.scope_calls(*ctx):
                    head, _, rest = (call.callee or "").partition(".")
                    if not rest or "." in rest:
                        continue
                    if head == "super()":
                        target = self.lk.classes.find_member(cls, rest, after=owner)
                    elif self.lk.values.is_self(ctx, head):
                        target = self.lk.classes.find_member(cls, rest)
                    else:
                        continue
                    if rest == name:
                        return True
                    if target is not None:
                        nxt.append(target)
            frontier = nxt
        return False


def _own(lk: Linker, src: str, dst: str, reach: _Reach) -> list[str]:
    """``dst`` as the classes that run method ``src`` resolve it, when both
    are methods of one hierarchy; else ``[dst]``. The class of ``src`` itself
    when it has its own ``dst``; when it only inherits the base's (NIXL's
    ``NixlBaseConnector.build_connector_meta``, whose ``start_load_kv`` lives
    in the Pull and Push subclasses), each subclass that still runs ``src``,
    with its own ``dst``. Only where vLLM's calls reach that ``dst`` for the
    class (``_Reach``)."""
    cls, dst_cls = src.rpartition(".")[0], dst.rpartition(".")[0]
    if not (lk.classes.is_class(cls) and lk.classes.is_class(dst_cls)) or \
            dst_cls not in lk.classes.mro(cls):
        return [dst]
    name, src_name = dst.rpartition(".")[2], src.rpartition(".")[2]
    mine = lk.classes.find_member(cls, name) or dst
    if mine != dst:
        return [mine] if reach.runs_for(cls, name) else []
    subs = [(sub, lk.classes.find_member(sub, name)) for sub in lk.classes.all_subclasses(cls)
            if lk.classes.find_member(sub, src_name) == src]
    found = sorted({m for sub, m in subs if m and m != dst and reach.runs_for(sub, name)})
    return found or ([dst] if reach.runs_for(cls, name) else [])


def check_protocol(lk: Linker, version: str | None) -> None:
    """Warn about every protocol name the analysed vLLM does not have."""
    pkg = lk.protocol.package
    if not any(m == pkg or m.startswith(pkg + ".") for m in lk.model.table.files):
        lk.warnings.append(f"protocol {lk.protocol.name}: no '{pkg}' sources among the roots; "
                           f"add --release {pkg}==VERSION or --context PATH to draw the bridges")
        return
    label = f"{pkg} {version}" if version else pkg
    for key, name in lk.protocol.all_names():
        if name in lk.model.defs or not lk.protocol.expected_in(name, version):
            continue
        owner, _, attr = name.rpartition(".")
        if key == "carriers.field" and owner in lk.model.defs and _has_field(lk, owner, attr):
            continue
        if key == "state_enums" and name in lk.model.defs:
            continue
        if key.startswith("methods.") and lk.classes.find_member(owner, attr):
            continue
        module_known = any(name.startswith(m + ".") for m in lk.model.facts)
        if not module_known:
            continue  # its module was not indexed: nothing to say about it
        lk.warnings.append(f"{lk.protocol.path.name}: {key} '{name}' not found in {label}")


def check_carrier_fields(lk: Linker, version: str | None) -> None:
    """Warn about fields of the carrier classes that the analysed vLLM has and
    the protocol file neither declares as carriers nor lists as known others
    (vLLM 0.33's ``KVConnectorOutput.failed_recving`` was such a field)."""
    declared = {c.field for c in lk.protocol.carriers}
    label = f"{lk.protocol.package} {version}" if version else lk.protocol.package
    for cls, others in sorted(lk.protocol.carrier_classes.items()):
        fact = lk.classes.class_fact(cls)
        if fact is None:
            continue
        for name, _ in fact.attributes:
            if f"{cls}.{name}" not in declared and name not in others and \
                    not name.startswith("_"):
                lk.warnings.append(
                    f"{lk.protocol.path.name}: {cls}.{name} exists in {label} but is neither a "
                    "carrier nor listed under carrier_classes: add it, or nothing it carries "
                    "is drawn or checked")


def _has_field(lk: Linker, owner: str, attr: str) -> bool:
    fact = lk.classes.class_fact(owner)
    return fact is not None and (attr in fact.members or any(n == attr for n, _ in fact.attributes))


def assign_sides(lk: Linker) -> None:
    """Side of each function: protocol methods, side modules, then callees."""
    g = lk.graph
    base = lk.protocol.base_class
    seeds: dict[str, list[str]] = {"scheduler": [], "worker": []}
    for side, methods in lk.protocol.methods.items():
        for m in methods:
            seeds.setdefault(side, []).extend(_with_overrides(lk, [f"{base}.{m}"]))
    for side, names in lk.protocol.entry_points.items():
        seeds.setdefault(side, []).extend(n for n in names if n in g)
    for node, data in g.nodes(data=True):
        own = lk.protocol.side_of_module(node) if data.get("kind") != "external" else None
        if own:
            data["side"] = own
    for side, starts in seeds.items():
        for n in _reach_in_package(g, starts, depth=4):
            cur = g.nodes[n].get("side")
            g.nodes[n]["side"] = side if cur in (None, side) else "both"


def _reach_in_package(g, starts: list[str], depth: int) -> set[str]:
    seen = set(starts)
    queue = deque((s, 0) for s in starts)
    while queue:
        node, d = queue.popleft()
        if d >= depth:
            continue
        pkg = g.nodes[node].get("package")
        for _, nxt, kind in g.out_edges(node, data="kind"):
            if kind in ("call", "dispatch") and nxt not in seen and \
                    g.nodes[nxt].get("kind") == "function" and g.nodes[nxt].get("package") == pkg \
                    and g.nodes[nxt].get("role") != "module":
                seen.add(nxt)
                queue.append((nxt, d + 1))
    return seen


def mark_flow(lk: Linker) -> None:
    """Mark the KV-transfer flow (the default picture) on nodes.

    Connector-independent part (``flow=True``): the protocol's vLLM entry
    points, the base hooks they call, states, carrier fields and their vLLM
    producers/consumers. Per connector: each override of a hook gets
    ``implements`` (the base hook) and ``connector`` (its class), and the
    subject functions it calls get ``connector`` too, so the picture can show
    one connector at a time (``select.flow_view``).
    """
    g = lk.graph
    base = lk.protocol.base_class
    hooks = [f"{base}.{m}" for ms in lk.protocol.methods.values() for m in ms]
    entries = [n for ns in lk.protocol.entry_points.values() for n in ns if n in g]
    flow = set(entries)
    for h in hooks:
        if h in g:
            g.nodes[h]["hook"] = True
            if any(u in entries for u, _ in g.in_edges(h)):
                flow.add(h)
    for u, v, kind in g.edges(data="kind"):
        if kind in ("sets_state", "reads_state", "produces", "consumes"):
            fn = u if kind in ("sets_state", "produces") else v
            if fn in flow or g.nodes[fn].get("kind") != "function":
                flow |= {u, v}
    flow |= {n for n, k in g.nodes(data="kind") if k in ("state", "field")}
    for n in flow:
        g.nodes[n]["flow"] = True
    _mark_connectors(lk, hooks)


def _mark_connectors(lk: Linker, hooks: list[str]) -> None:
    """Per connector class, the hook implementations it runs: its own
    overrides and those it inherits from an analysed class between it and the
    protocol base (NIXL's Pull and Push connectors run the twelve hooks of
    ``NixlBaseConnector``). Each gets ``implements``, ``connector`` (the class
    that defines it) and ``connectors`` (every class that runs it), as do the
    same-package functions they call; the class gets ``connector_hooks`` and
    ``subject_hooks`` (how many of them subject code defines)."""
    g = lk.graph
    base = lk.protocol.base_class
    for cls in lk.classes.all_subclasses(base):
        impls = [m for h in hooks if (m := lk.classes.find_member(cls, h.rpartition(".")[2]))
                 and m in lk.model.defs and m.rpartition(".")[0] != base
                 and base in lk.classes.mro(m.rpartition(".")[0])]
        if cls not in g or not impls:
            continue
        g.nodes[cls]["connector_hooks"] = len(impls)
        # those written in the subject (not inherited from vLLM's MultiConnector)
        g.nodes[cls]["subject_hooks"] = sum(1 for m in impls if g.nodes.get(m, {}).get("subject"))
        for m in impls:
            g.nodes[m]["implements"] = f"{base}.{m.rpartition('.')[2]}"
            _runs_for(g.nodes[m], m.rpartition(".")[0], cls)
            for _, nxt, kind in g.out_edges(m, data="kind"):
                d = g.nodes[nxt]
                # a call back into the protocol base (MultiConnector forwarding
                # to its children's hooks) is every connector's, not this one's
                if kind == "call" and d.get("kind") == "function" and d.get("role") != "module" \
                        and d.get("package") == g.nodes[m].get("package") \
                        and nxt.rpartition(".")[0] != base:
                    _runs_for(d, m.rpartition(".")[0], cls)


def _runs_for(d: dict, owner: str, cls: str) -> None:
    d.setdefault("connector", owner)
    if cls not in d.setdefault("connectors", []):
        d["connectors"].append(cls)
        d["connectors"].sort()
