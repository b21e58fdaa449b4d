"""Parameters of the ``paired`` kind: declaration, defaults and the parsed form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# name -> (accepted types, default, help). Patterns: a pattern without a dot
# matches a called name / the last attribute of a container chain; with a dot
# it matches the callee chain as written or its resolved FQN (fnmatch, case
# sensitive): ``pin``, ``acquire_*``, ``*.lease``, ``threading.Lock.acquire``.
PARAMS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "resource": ((str,), "resource", "What the resource is called in messages."),
    "acquire": ((list,), [], "Call patterns that acquire a resource (the call's result, "
                "its receiver or its first argument names it)."),
    "release": ((list,), [], "Call patterns that release a resource mentioned in the call."),
    "exclude": ((list,), ["pin_memory", "*.pin_memory"],
                "Call patterns that are never an acquire, release or hand-over."),
    "containers": ((list,), [], "Container attribute patterns whose entries are resources: "
                   "an add (add_ops) acquires, a removal (remove_ops) with the same "
                   "receiver chain and a compatible key releases."),
    "add_ops": ((list,), ["setitem", "add", "append", "appendleft", "setdefault", "insert",
                          "extend", "update"], "Container operations that put an entry in."),
    "remove_ops": ((list,), ["pop", "popitem", "popleft", "discard", "remove", "delitem",
                             "clear", "difference_update", "intersection_update"],
                   "Container operations that take an entry out (also when passed as a "
                   "callback: add_done_callback(self._c.discard))."),
    "owners": ((list,), ["self.*"], "Container/attribute patterns that take ownership: "
               "storing the resource there hands it over."),
    "container_owners": ((list,), [], "Container/attribute patterns that take over a "
                         "container entry when its key is stored there (default: none, an "
                         "entry is only released by its removal)."),
    "handover_calls": ((list,), [], "Call patterns that take ownership of a resource "
                       "mentioned in their arguments (queues, executors...)."),
    "return_hands_over": ((bool,), True, "Returning the resource hands it to the caller "
                          "(whose calls then acquire it)."),
    "on_return": ((bool,), True, "Report paths that leave the function normally."),
    "on_exception": ((bool,), True, "Report paths that leave the function by an exception."),
    "failed_paths_only": ((bool,), False, "Only report paths on which an exception happens "
                          "(propagated or caught): on a path without failure, what is still "
                          "held at the exit is handed over to the object (pending entries)."),
    "calls_raise": ((bool,), True, "Any call may raise (else only raise and assert do)."),
    "no_raise": ((list,), ["logger.*", "*.logger.*", "*._logger.*", "logging.*", "log.*",
                           "*.add", "*.discard", "*.append", "*.appendleft", "*.extend",
                           "*.update", "*.setdefault", "*.clear", "*.get", "*.items", "*.keys",
                           "*.values", "*.copy", "*.pop", "*.popleft", "*.remove",
                           "len", "isinstance", "issubclass", "callable", "type", "any", "all",
                           "sum", "abs", "round", "hash", "repr", "reversed", "iter", "super",
                           "hasattr", "getattr", "print", "time.*", "*.perf_counter",
                           "set", "list", "dict", "tuple", "frozenset", "sorted", "min",
                           "max", "range", "enumerate", "zip", "id", "bool", "int", "str",
                           "threading.Event", "threading.Lock", "threading.RLock", "*.set",
                           "super().__init__", "<builtin>.object.__init__", "abc.ABC.__init__"],
                 "Call patterns assumed not to raise: logging, container and builtin "
                 "helpers whose failure would be a bug, not an event to handle."),
    "summaries": ((bool,), True, "Look into called helpers: one that releases on all its "
                  "paths is a release, one that returns a resource is an acquire, one "
                  "that stores its argument into an owner is a hand-over."),
    "scope": ((str,), "function", "function: each acquisition is released or handed over "
              "in the same function. class: every matching container some method adds "
              "to is removed from by some method of the class."),
    "removal_from": ((list,), [], "scope=class: method names whose call trees must do the "
                     "removal (empty: any method of the class)."),
}
SCOPES = ("function", "class")


@dataclass(frozen=True)
class Spec:
    """The parameters of one ``paired`` rule, defaults applied."""

    resource: str
    acquire: tuple[str, ...]
    release: tuple[str, ...]
    exclude: tuple[str, ...]
    containers: tuple[str, ...]
    add_ops: frozenset[str]
    remove_ops: frozenset[str]
    owners: tuple[str, ...]
    container_owners: tuple[str, ...]
    handover_calls: tuple[str, ...]
    return_hands_over: bool
    on_return: bool
    on_exception: bool
    failed_paths_only: bool
    calls_raise: bool
    no_raise: tuple[str, ...]
    summaries: bool
    scope: str
    removal_from: tuple[str, ...]

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Spec:
        """Parse a rule's ``params``; unknown names and bad types raise
        ``ValueError`` naming the parameter and the expected form."""
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ValueError(f"unknown paired parameter(s) {', '.join(unknown)}; "
                             f"expected one of {', '.join(sorted(PARAMS))}")
        values: dict[str, Any] = {}
        for name, (types, default, _help) in PARAMS.items():
            value = params.get(name, default)
            if not isinstance(value, types) or (isinstance(value, list) and
                                                not all(isinstance(v, str) for v in value)):
                want = "a list of strings" if list in types else types[0].__name__
                raise ValueError(f"paired parameter {name!r} must be {want}, got {value!r}")
            values[name] = value
        if values["scope"] not in SCOPES:
            raise ValueError(f"paired parameter 'scope' must be one of {SCOPES}")
        for name in ("add_ops", "remove_ops"):
            values[name] = frozenset(values[name])
        for name, (types, _, _) in PARAMS.items():
            if list in types and name not in ("add_ops", "remove_ops"):
                values[name] = tuple(values[name])
        return cls(**values)
