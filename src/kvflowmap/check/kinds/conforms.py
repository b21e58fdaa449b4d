"""Rule kind ``conforms``: connectors keep to the vLLM base class they run with.

Checks on each target class (a subclass of the protocol base class), and on
the subject's imports:

- every override of a method of a *contract* class (``bases``: the base class
  and its siblings such as ``SupportsHMA``) stays callable the way vLLM calls
  it: same method kind (property, classmethod, async), every positional
  argument vLLM may pass accepted, no extra required parameter, parameters
  vLLM passes by keyword (seen at its call sites) kept under that name,
  ``*args`` / ``**kwargs`` kept, and annotations compatible when both sides
  have them (names resolved to FQNs: ``set[str]`` is no ``KVConnectorMetadata``);
- every abstract method along the MRO is implemented (leaf classes only);
- ``self.X`` / ``super().X`` used but defined nowhere along a fully analysed
  MRO (a base member the analysed vLLM no longer has);
- (``imports``) every name the subject imports from the analysed vLLM exists
  there, and every ``vllm.envs`` variable it reads (``conforms_imports``);
- (``base_state``) an override that neither calls its base method nor sets
  the ``self`` attributes the base method sets, which a base method the class
  keeps reads (``bind_connector_metadata`` and ``has_connector_metadata``);
- (``typed_members``) an attribute the subject reads on an object that can
  only be an instance of the analysed vLLM's classes, which none of them has
  (``conforms_typed``);
- (``field_members``) a member read through a ``self`` field that some of
  the subject classes the field may hold lack (``conforms_fields``);
- (``mode_fields``) a read of a ``self`` field that ``__init__`` sets only in
  some modes, with no test of the mode where it is read (``conforms_modes``);
- (``optional_fields``) a read through a field declared to admit ``None``,
  or through what a function declared to return ``None`` returned, with no
  test of it first (``conforms_optional``, ``conforms_optional_returns``);
- (``called_members``) a method the analysed vLLM calls on an object of a
  subject class (a facade forwarding hooks) that the class lacks
  (``conforms_called``);
- (``forwards``) a composite connector leaves a protocol hook to a base
  default that does nothing, while its children may override it.

Two-release mode (``compare_with: "vllm==0.X.Y"`` or an import root path):
the contract methods whose signature differs between that release and the
analysed vLLM are reported, and so are overrides that still fit the old form
but not the new one; the other checks are off. The other release is analysed
on its own, once per process (a spec is fetched into the fact cache).
"""

from __future__ import annotations

from collections.abc import Iterable

from kvflowmap.check.context import CheckContext
from kvflowmap.check.gated_modules import live_only
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.conforms_base_state import check_base_state
from kvflowmap.check.kinds.conforms_called import calling_modules, check_called_members
from kvflowmap.check.kinds.conforms_fields import check_field_members, subject_modules
from kvflowmap.check.kinds.conforms_modes import check_mode_fields
from kvflowmap.check.kinds.conforms_optional import check_optional_fields, optional_names
from kvflowmap.check.kinds.conforms_optional_returns import check_optional_returns
from kvflowmap.check.kinds.conforms_forwards import check_forwards
from kvflowmap.check.kinds.conforms_contract import contract_patterns, overrides, target_methods
from kvflowmap.check.kinds.conforms_imports import (check_envs, check_imports,
                                                     declared_envs, import_modules)
from kvflowmap.check.kinds.conforms_members import check_abstract, check_members
from kvflowmap.check.kinds.conforms_options import READS, Options
from kvflowmap.check.kinds.conforms_overrides import Callers, check_override
from kvflowmap.check.kinds.conforms_releases import two_release
from kvflowmap.check.kinds.conforms_typed import check_typed_members
from kvflowmap.check.kinds.spec import KindSpec
from kvflowmap.check.model import Finding

def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """Findings of every enabled conformance check on the target classes."""
    contract = contract_patterns(ctx, opts.bases)
    if opts.compare_with:
        return two_release(ctx, opts, contract, opts.compare_with)
    out: list[Finding] = []
    gated = ctx.gated_off()  # what vLLM drift cannot reach: code for other releases

    def live(fqns: Iterable[str]) -> list[str]:
        return live_only(fqns, gated)

    if opts.signatures:
        callers = Callers(ctx)
        out += each_function(ctx, live(overrides(ctx, contract, opts.ignore_methods)),
                             lambda f: check_override(ctx, opts, contract, callers, f))
    if opts.base_state:
        out += each_function(ctx, live(overrides(ctx, contract, opts.ignore_methods)),
                             lambda f: check_base_state(ctx, f, contract))
    if opts.abstract:
        out += each_function(ctx, live(ctx.target_classes), lambda c: check_abstract(ctx, c))
    if opts.missing_members:
        out += each_function(ctx, live(target_methods(ctx)), lambda f: check_members(ctx, f))
    if opts.imports:
        package = ctx.protocol.package
        envs = declared_envs(ctx.model.facts.get(f"{package}.envs"))
        out += each_function(ctx, live(import_modules(ctx, package)),
                             lambda m: check_imports(ctx, m, package)
                             + check_envs(ctx, m, package, envs))
    if opts.typed_members:
        package = ctx.protocol.package
        out += each_function(ctx, live(import_modules(ctx, package)),
                             lambda m: check_typed_members(ctx, m, package))
    if opts.field_members:
        out += each_function(ctx, live(subject_modules(ctx)),
                             lambda m: check_field_members(ctx, m))
    if opts.mode_fields:
        out += each_function(ctx, subject_modules(ctx),
                             lambda m: check_mode_fields(ctx, m))
    if opts.optional_fields:
        names = optional_names(ctx)
        out += each_function(ctx, subject_modules(ctx),
                             lambda m: check_optional_fields(ctx, m, names)
                             + check_optional_returns(ctx, m))
    if opts.called_members:
        out += each_function(ctx, live(calling_modules(ctx)),
                             lambda m: check_called_members(ctx, m))
    if opts.forwards:
        hooks = tuple(h for side in ctx.protocol.methods.values() for h in side)
        out += each_function(ctx, ctx.target_classes, lambda c: check_forwards(ctx, c, hooks))
    return out


SPEC = KindSpec(Options, check, READS)
