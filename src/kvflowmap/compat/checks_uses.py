"""The ``compat`` checks of what a connector uses from vLLM besides the
hooks: base members through ``self.``/``super()``, ``vllm.envs`` names, names
imported from the base modules, config fields, and the carriers it should fill."""

from __future__ import annotations

from kvflowmap.compat.branches import Problem
from kvflowmap.compat.context import Run
from kvflowmap.compat.findings import Finding
from kvflowmap.compat.guarded import config_holders, settle
from kvflowmap.protocol import version_key


def check_members(run: Run) -> list[Finding]:
    """``self.X`` / ``super().X`` that another release's base has and this one
    lacks (AttributeError), on the branches that run on the release."""
    own = run.code.members(run.cls)
    here = {n for k in run.contract for n in (*run.surface.classes[k].methods,
                                               *run.surface.classes[k].members)}
    other = {n: s.version for s in run.others for b in run.bases for k in s.mro(b)
             for n in (*s.classes[k].methods, *s.classes[k].members)}
    out: list[Finding] = []
    for name, (module, fn) in sorted(run.reported.items()):
        if not fn.params:
            continue
        me, ff = fn.params[0].name, run.code.facts[module]
        uses = [(c.callee or "", c.line) for c in ff.calls if c.scope == fn.qualname]
        uses += [(f"{r.base}.{r.attr}", r.line) for r in ff.reads if r.scope == fn.qualname]
        seen: set[tuple[str, int]] = set()
        problems: list[Problem] = []
        for chain, line in sorted(uses, key=lambda u: u[1]):
            sup = chain.startswith("super().")
            if not sup and not chain.startswith(f"{me}."):
                continue
            member = chain.split(".")[1].split("(")[0].split("[")[0]
            if (member, line) in seen or member in here or \
                    (not sup and member in own) or member not in other:
                continue
            seen.add((member, line))
            what = f"super().{member}" if sup else f"{me}.{member}"
            problems.append(Problem(line, "AttributeError", "error", "removed-member",
                                    f"{name} uses {what}, which the vLLM {run.surface.version} "
                                    f"base does not have (vLLM {other[member]} has it)",
                                    member=member))
        out += _first_per_member(settle(run, module, fn, problems))
    return out


def _first_per_member(findings: list[Finding]) -> list[Finding]:
    """One error per member and method (its first use), every guarded note."""
    seen: set[str] = set()
    out: list[Finding] = []
    for f in findings:
        if f.severity == "error":
            if f.message in seen:
                continue
            seen.add(f.message)
        out.append(f)
    return out


def _envs_aliases(run: Run, module: str) -> set[str]:
    """Local names bound to ``<package>.envs`` in ``module``."""
    envs = f"{run.protocol.package}.envs"
    return {local for local, fqn in run.code.names[module].table.items() if fqn == envs}


def check_envs(run: Run) -> list[Finding]:
    """``envs.X`` read in the class's methods that the release's ``vllm.envs``
    lacks (AttributeError), on the branches that run on the release."""
    if not run.surface.envs:
        return []
    out: list[Finding] = []
    for name, (module, fn) in sorted(run.reported.items()):
        aliases, ff = _envs_aliases(run, module), run.code.facts[module]
        if not aliases:
            continue
        problems = [Problem(r.line, "AttributeError", "error", "envs",
                            f"{name} reads {r.base}.{r.attr}, which vLLM "
                            f"{run.surface.version}'s envs does not define (AttributeError)",
                            member=r.attr)
                    for r in ff.reads if r.scope == fn.qualname and r.base in aliases
                    and r.attr not in run.surface.envs and r.attr.isupper()]
        out += settle(run, module, fn, problems)
    return out


def check_imports(run: Run) -> list[Finding]:
    """Names the class's module imports from a surface module the release lacks."""
    module = run.code.classes[run.cls].module
    defined: dict[str, set[str]] = {}
    for fqn in run.surface.classes:
        mod, _, short = fqn.rpartition(".")
        defined.setdefault(mod, set()).add(short)
    out: list[Finding] = []
    for imp in run.code.facts[module].imports:
        if imp.level or not imp.name or imp.module not in defined or imp.scope:
            continue
        known = {fqn.rpartition(".")[2] for s in run.others for fqn in s.classes
                 if fqn.rpartition(".")[0] == imp.module}
        if imp.name in known and imp.name not in defined[imp.module] and \
                not _in_try(run, module, imp.line):
            out.append(run.finding("error", "import", f"imports {imp.name} from {imp.module}, "
                                   f"which vLLM {run.surface.version} does not define "
                                   "(ImportError)", module, imp.line))
    return out


def _in_try(run: Run, module: str, line: int) -> bool:
    """Whether the statement at ``line`` sits in a ``try:`` block (a guarded import)."""
    text = run.code.source_line(module, line)
    indent = len(text) - len(text.lstrip())
    for n in range(line - 1, 0, -1):
        prev = run.code.source_line(module, n)
        if prev.strip() and len(prev) - len(prev.lstrip()) < indent:
            return prev.strip().startswith("try:")
    return False


def check_carriers(run: Run) -> list[Finding]:
    """Carrier fields new in the release (absent in another release of the run)
    that the connector never fills (``failed_recving``)."""
    if run.canon(run.protocol.base_class) not in run.contract or \
            any(k in run.rows for k in run.code.ancestors(run.cls)[1:]):
        return []  # not a connector, or reported on the connector class it derives from
    out: list[Finding] = []
    fact = run.code.classes[run.cls].fact
    module = run.code.classes[run.cls].module
    for carrier in run.protocol.carriers:
        fields = run.surface.carriers.get(carrier.owner, {})
        hooks = [s.rpartition(".")[2] for s in carrier.sources]
        older = [s.version for s in run.others if carrier.attr not in
                 s.carriers.get(carrier.owner, {carrier.attr: None})]
        if carrier.attr not in fields or not older or _fills(run, carrier.attr, hooks):
            continue
        owner = carrier.owner.rpartition(".")[2]
        out.append(run.finding("warning", "carrier", f"never fills {owner}.{carrier.attr} (not in "
                               f"vLLM {', '.join(sorted(older, key=version_key))}; produced by "
                               f"{' / '.join(hooks)}): the connector never reports it",
                               module, fact.line, fields[carrier.attr].where))
    return out


def _fills(run: Run, attr: str, hooks: list[str]) -> bool:
    """Whether the connector fills carrier field ``attr``: it names it, or it
    overrides a hook whose return value is the field itself (a set, a tuple),
    not a results object holding it by name."""
    holders = {k.rpartition(".")[2] for k, fs in run.surface.carriers.items() if attr in fs}
    module = run.code.classes[run.cls].module
    if run.code.fills(module, attr, holders):
        return True
    for h in hooks:
        base = run.base_of(h)
        if h in run.methods and base and not any(c in (base.returns or "") for c in holders):
            return True
    return False



def check_config(run: Run) -> list[Finding]:
    """``<holder>.X`` read in the class's methods (``vllm_config.kv_transfer_config.kv_rank``)
    where the release's config class lacks field X that another release has."""
    holders = config_holders(run)
    out: list[Finding] = []
    for name, (module, fn) in sorted(run.reported.items()):
        ff = run.code.facts[module]
        problems: list[Problem] = []
        for r in ff.reads:
            cls = holders.get(r.base.rpartition(".")[2]) if r.scope == fn.qualname else None
            if cls is None:
                continue
            here = run.surface.configs.get(cls)
            seen = [s.version for s in run.others if r.attr in s.configs.get(cls, {})]
            if here is not None and r.attr not in here and seen:
                problems.append(Problem(r.line, "AttributeError", "error", "config",
                                        f"{name} reads {r.base}.{r.attr}, which vLLM "
                                        f"{run.surface.version}'s {cls.rpartition('.')[2]} does "
                                        f"not have (vLLM {max(seen, key=version_key)} has it)",
                                        member=r.attr))
        out += settle(run, module, fn, problems)
    return out
