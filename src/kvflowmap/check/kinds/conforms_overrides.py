"""The ``conforms`` override check: each override of a contract method stays
callable the way vLLM calls the base (keywords and positional counts seen at
vLLM's call sites)."""

from __future__ import annotations

from kvflowmap.check.context import CheckContext
from kvflowmap.check.kinds.conforms_compare import Related, compare
from kvflowmap.check.kinds.conforms_contract import base_method, vllm_label
from kvflowmap.check.kinds.conforms_signatures import Sig
from kvflowmap.check.kinds.conforms_options import Options
from kvflowmap.check.model import Finding
from kvflowmap.facts import CallFact


class Callers:
    """Call sites of contract methods: keywords passed, positional counts."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.by_name: dict[str, list[tuple[str, CallFact]]] = {}
        for module, ff in ctx.model.facts.items():
            for c in ff.calls:
                if c.callee and "." in c.callee:
                    self.by_name.setdefault(c.callee.rpartition(".")[2], []).append((module, c))
        self._memo: dict[str, list[tuple[str, CallFact]]] = {}

    def calls(self, base: str) -> list[tuple[str, CallFact]]:
        """Call sites resolved to ``base`` or one of its overrides."""
        if base not in self._memo:
            wanted = {base, *self.ctx.classes.overrides(base)}
            self._memo[base] = sorted(
                ((m, c) for m, c in self.by_name.get(base.rpartition(".")[2], ())
                 if any(t.fqn in wanted for t in self.ctx.linker.calls.resolve((m, c.scope), c))),
                key=lambda mc: (self.ctx.is_subject(mc[0]), mc[0], mc[1].line))
        return self._memo[base]

    def passed(self, base: str, cls: str | None = None) -> dict[str, int] | None:
        """Keyword names and ``*pos`` (most positional args) over the call sites
        that can run the override in class ``cls``: a ``super().m(...)`` in a
        class that does not derive from ``cls`` runs a method above it, never
        this override (MultiConnector's ``super().__init__(vllm_config=...)``
        says nothing of how vLLM constructs another connector)."""
        sites = [(m, c) for m, c in self.calls(base) if cls is None or self._reaches(m, c, cls)]
        if not sites:
            return None
        out = {"*pos": max(len(c.args) for _, c in sites)}
        out.update({k: 1 for _, c in sites for k, _ in c.kwargs})
        return out

    def _reaches(self, module: str, call: CallFact, cls: str) -> bool:
        if not (call.callee or "").startswith("super()."):
            return True
        caller = f"{module}.{call.scope.rpartition('.')[0]}"
        return self.ctx.classes.is_class(caller) and cls in self.ctx.classes.mro(caller)[1:]

    def first_site(self, base: str, cls: str | None = None) -> list[tuple[str, int, str]]:
        """(function, line, call text) of the first call site that can run the
        override in ``cls``, if any: a path step."""
        sites = [(m, c) for m, c in self.calls(base) if cls is None or self._reaches(m, c, cls)]
        for m, c in sites[:1]:
            args = [a or "…" for a in c.args] + [f"{k}={v or '…'}" for k, v in c.kwargs]
            return [(f"{m}.{c.scope}" if c.scope else m, c.line, f"{c.callee}({', '.join(args)})")]
        return []


def check_override(ctx: CheckContext, opts: Options, pats: list[str], callers: Callers,
                   fqn: str) -> list[Finding]:
    """Findings for each way override ``fqn`` breaks how vLLM calls its base."""
    base = base_method(ctx, fqn, pats)
    assert base is not None
    b, o = Sig.of(ctx.linker, base), Sig.of(ctx.linker, fqn)
    cls = fqn.rpartition(".")[0]
    issues = compare(b, o, callers.passed(base, cls), Related(ctx),
                     annotations=opts.annotations, returns=opts.returns)
    if not issues:
        return []
    fn = ctx.function(fqn)
    label = vllm_label(ctx, base)
    steps = [ctx.step(base, ctx.function(base).line, f"base ({label}): {b.text}"),
             ctx.step(fqn, fn.line, f"override: {o.text}")]
    steps += [ctx.step(c, line, f"vLLM calls it: {text}") for c, line, text in
              callers.first_site(base, cls)]
    short = base.rpartition(".")[0].rpartition(".")[2]
    return [ctx.finding(fqn, fn.line, f"{fn.name} {issue} ({short} in {label})", column=fn.col,
                        path=tuple(steps), anchor=f"{fn.name}:{key}") for key, issue in issues]
