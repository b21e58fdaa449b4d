"""Keep one failing rule or function from stopping the run."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable

from kvflowmap.check.context import CheckContext
from kvflowmap.check.model import Finding, Rule

INTERNAL_ERROR = "internal-error"


def internal_error(rule: Rule, where: str, exc: BaseException, ctx: CheckContext | None = None,
                   fqn: str = "") -> Finding:
    """An internal-error finding naming the rule and the file it failed on."""
    tb = traceback.extract_tb(exc.__traceback__)
    origin = f" ({tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    file, root, abspath = ctx.where(fqn) if ctx and fqn else (where, "", "")
    return Finding(rule=INTERNAL_ERROR, severity="error",
                   message=f"rule {rule.id} failed on {file or 'the analysis'}: "
                           f"{type(exc).__name__}: {exc}{origin}",
                   file=file, line=1, column=1, function=fqn, root=root, abspath=abspath,
                   anchor=f"{rule.id}:{fqn}")


def each_function(ctx: CheckContext, fqns: Iterable[str],
                  check_one: Callable[[str], list[Finding]]) -> list[Finding]:
    """Run ``check_one`` per function; one function's crash is one finding."""
    out: list[Finding] = []
    for fqn in fqns:
        try:
            out.extend(check_one(fqn))
        except Exception as exc:
            out.append(internal_error(ctx.rule, "", exc, ctx, fqn))
    return out
