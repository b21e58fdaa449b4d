"""Parameters of the ``conforms`` kind."""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.options import option

READS = ("Reads: the signatures, decorators and annotations of the target classes' "
         "methods and of the contract classes' methods they override, the keyword "
         "arguments at vLLM's call sites of those methods, abstract methods along the MRO, "
         "the self.X / super().X uses in the target methods, the subject's imports and the "
         "top-level names of the vLLM modules they name, the self attributes the overridden "
         "base methods assign and the base methods that read them, the attribute reads and "
         "calls on chains rooted at annotated parameters, the classes those evaluate to (and "
         "what their callers pass) and those classes' members; the classes a self field is "
         "given and the tests around those assignments and around its reads; the "
         "annotations that declare fields, returns and parameters to admit None, the truth "
         "tests, comparisons and type: ignore lines around reads through them; the calls in "
         "vLLM modules that import the subject and what their receivers evaluate to; in two-release mode, the "
         "same signatures in the other release's analysis.")


@dataclass(frozen=True)
class Options:
    """Parameters of the ``conforms`` kind."""

    bases: tuple[str, ...] = option((), "FQN globs of the contract classes; default: the "
                                    "rule's applies_to.base_class (else the protocol base "
                                    "class) and its module's classes")
    signatures: bool = option(True, "check override signatures against the base")
    annotations: bool = option(True, "compare parameter annotations when both sides have them")
    returns: bool = option(True, "compare return annotations when both sides have them")
    abstract: bool = option(True, "report abstract methods left unimplemented (leaf classes)")
    missing_members: bool = option(True, "report self.X / super().X defined nowhere in the MRO")
    forwards: bool = option(False, "report protocol hooks a composite connector (one that "
                            "forwards its hooks to child connectors) leaves to a base default "
                            "that does nothing, while a connector overrides them")
    imports: bool = option(False, "report names the subject imports from the analysed vLLM "
                           "(the protocol's package) that it does not have: ImportError; "
                           "imports in a try or an if are fallbacks and left alone")
    base_state: bool = option(False, "report an override that neither calls its base method "
                              "nor sets the self attributes the base method sets, which "
                              "another base method the class keeps reads")
    typed_members: bool = option(False, "report attributes the subject reads, or methods it "
                                 "calls, on objects that can only be instances of the "
                                 "analysed vLLM's classes, and that none of those classes "
                                 "has: AttributeError")
    field_members: bool = option(False, "report members the subject reads through one of "
                                 "its fields (self.F.attr) that some of the analysed classes "
                                 "the field may hold have and others lack: AttributeError in "
                                 "the mode that builds the latter")
    mode_fields: bool = option(False, "report reads of a self field that __init__ sets only "
                               "in some modes (under a test, in a loop, after a handler "
                               "that carries on), with no test of the mode where it is read: "
                               "AttributeError on an object built the other way")
    optional_fields: bool = option(False, "report reads through a field declared to admit "
                                   "None (X | None, Optional[X]) on another object "
                                   "(request.spec.n), or through a parameter a call gives such "
                                   "a field, with no test of it first: AttributeError")
    called_members: bool = option(False, "report methods the analysed vLLM calls on "
                                  "objects of the subject's classes (a facade forwarding a "
                                  "hook to a package's class) that the class lacks: "
                                  "AttributeError")
    ignore_methods: tuple[str, ...] = option((), "method names (globs) not checked")
    compare_with: str = option("", "another vLLM release ('vllm==0.X.Y' or an import root): "
                               "two-release mode")
    report_changes: bool = option(True, "two-release mode: also report each changed base "
                                  "method")
