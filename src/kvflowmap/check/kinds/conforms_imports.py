"""The ``conforms`` import check: what the subject imports from the analysed
vLLM exists there. vLLM moves and deletes helpers between releases
(``get_kv_cache_torch_dtype`` left ``vllm.utils``, ``vllm.attention`` became
``vllm.v1.attention``); a connector still importing the old place fails with
``ImportError`` when vLLM loads it, or, for an import inside a function, at the
first call of that function.

An import inside a ``try`` or an ``if`` is a fallback or a gate and is left
alone, as are ``TYPE_CHECKING`` imports and relative ones. The same holds for
the environment variables read through ``vllm.envs`` (``envs.VLLM_X``): a
name its ``envs`` module does not declare is an ``AttributeError`` where it is
read."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_contract import vllm_label
from kvflowmap.check.model import Finding
from kvflowmap.facts import FileFacts, ImportFact


def import_modules(ctx: CheckContext, package: str) -> list[str]:
    """Subject modules, when ``package`` (the analysed vLLM) is there to judge against."""
    table = ctx.model.table
    if package not in table.files:
        return []  # no vLLM given: nothing to judge the imports by
    return sorted(m for m, sf in table.files.items() if sf.subject and m in ctx.model.facts)


def check_imports(ctx: CheckContext, module: str, package: str) -> list[Finding]:
    """``import``/``from ... import`` in ``module`` naming what ``package`` lacks:
    one finding per statement, with every name of it that is missing."""
    ff = ctx.model.facts[module]
    gone: dict[tuple[str, int, str], list[ImportFact]] = {}
    for imp in ff.imports:
        if imp.level or imp.type_checking or imp.guarded:
            continue
        if imp.module != package and not imp.module.startswith(package + "."):
            continue
        if _missing_module(ctx, imp.module) is not None or _missing_name(ctx, imp):
            gone.setdefault((imp.scope, imp.line, imp.module), []).append(imp)
    out: list[Finding] = []
    for (scope, line, mod), imps in gone.items():
        lost = _missing_module(ctx, mod)
        names = [i.name for i in imps if i.name and i.name != "*"]
        what = f"imports module {lost}" if lost else f"imports {', '.join(names)} from {mod}"
        where = f"{module}.{scope}" if scope else module
        when = (f"the first call of {scope.rpartition('.')[2]}() raises ImportError"
                if scope else "importing this module raises ImportError" + _loads(ctx, module))
        hint = _elsewhere(ctx, names, package, mod)
        out.append(ctx.finding(where, line, f"{what}, which {vllm_label(ctx)} does not have: "
                               f"{when}{hint}", anchor=f"import:{mod}:{','.join(names)}"))
    return out


def check_envs(ctx: CheckContext, module: str, package: str,
               declared: set[str] | None) -> list[Finding]:
    """``envs.X`` reads in ``module`` of a variable the analysed ``vllm.envs``
    lacks (``declared``: ``declared_envs`` of it; None: not judged)."""
    ff, envs = ctx.model.facts[module], f"{package}.envs"
    if declared is None:
        return []
    aliases: dict[str, set[str]] = {}  # scope -> names standing for vllm.envs there
    for imp in ff.imports:
        if imp.level or imp.type_checking:
            continue
        if imp.name is None and imp.module == envs:
            aliases.setdefault(imp.scope, set()).add(imp.asname or envs)
        elif imp.module == package and imp.name == "envs":
            aliases.setdefault(imp.scope, set()).add(imp.asname or "envs")
    out: list[Finding] = []
    for r in ff.reads:
        if r.attr in declared or not r.attr.isupper() or not r.attr.startswith(package.upper()):
            continue
        if r.base not in aliases.get(r.scope, set()) | aliases.get("", set()):
            continue
        where = f"{module}.{r.scope}" if r.scope else module
        out.append(ctx.finding(where, r.line, f"reads {r.base}.{r.attr}, which {envs} of "
                               f"{vllm_label(ctx)} does not declare: AttributeError here",
                               column=r.col, anchor=f"envs:{r.attr}"))
    return out


def declared_envs(ff: FileFacts | None) -> set[str] | None:
    """The variables ``vllm.envs`` declares (its upper-case module-level names:
    the ``TYPE_CHECKING`` declarations); None when it cannot be told."""
    if ff is None or ff.problem:
        return None
    names = {a.target for a in ff.assigns if not a.scope and a.target.isupper()}
    return names or None


def _loads(ctx: CheckContext, module: str) -> str:
    """What else fails with the module: the connectors it defines."""
    mine = sorted(c.rpartition(".")[2] for c in ctx.target_classes
                  if c.rpartition(".")[0] == module)
    if mine:
        return f", and vLLM cannot load {', '.join(mine)}"
    return ", and so does every import of it"


def _missing_name(ctx: CheckContext, imp: ImportFact) -> bool:
    """``from M import n`` where module M exists but binds no ``n``: no def,
    class, import, submodule (``Model.lookup``) or assignment of it at top
    level. A module that is not indexed, builds names at run time (``__getattr__``)
    or star-imports is not judged."""
    if imp.name is None or imp.name == "*":
        return False
    model, mod = ctx.model, imp.module
    ff = model.facts.get(mod)
    if ff is None or ff.problem or f"{mod}.__getattr__" in model.defs or any(
            i.name == "*" and not i.scope for i in ff.imports):
        return False
    return model.lookup(mod, imp.name) is None and not model.value_assigns(mod, "", imp.name) \
        and f"{mod}.{imp.name}" not in model.table.native


def _missing_module(ctx: CheckContext, module: str) -> str | None:
    """The first missing package or module along ``module``, or None."""
    table = ctx.model.table
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name in table.files or name in table.native:
            continue
        top = parts[0]
        if parts[i - 1].startswith("_") and not any(n.startswith(top + ".")
                                                   for n in table.native):
            return None  # likely a compiled module of a checkout nobody built
        return name
    return None


def _elsewhere(ctx: CheckContext, names: list[str], package: str, module: str) -> str:
    """`` (vllm.x.y defines n)`` for each name an analysed module of the release defines."""
    homes = []
    for name in names:
        found = sorted(d.module for fqn, d in ctx.model.defs.items()
                       if fqn == f"{d.module}.{name}" and d.module.startswith(package + ".")
                       and d.module != module)
        if found:
            homes.append(f"{found[0]} defines {name}")
    return f" ({'; '.join(homes)})" if homes else ""
