"""Parameters of the ``paired`` kind: each field carries its default and help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kvflowmap.check.options import build_options, option

READS = ("Reads: the statement trees (control flow: branches, loops, try/finally, "
         "with, match) of the target functions, their calls (resolved), container "
         "operations and assignments, the source text of their simple statements, and the "
         "same for the analysed helpers they call (summaries); with scope=class, the "
         "container operations of every method of the class.")


@dataclass(frozen=True)
class Spec:
    """The parameters of one ``paired`` rule, defaults applied. Patterns: a
    pattern without a dot matches a called name / the last attribute of a
    container chain; with a dot it matches the callee chain as written or its
    resolved FQN (fnmatch, case sensitive): ``pin``, ``acquire_*``,
    ``*.lease``, ``threading.Lock.acquire``."""

    resource: str = option(
        'resource',
        'What the resource is called in messages.')
    acquire: tuple[str, ...] = option(
        (),
        "Call patterns that acquire a resource (the call's result, its receiver or its "
        'first argument names it).')
    release: tuple[str, ...] = option(
        (),
        'Call patterns that release a resource mentioned in the call.')
    exclude: tuple[str, ...] = option(
        ('pin_memory', '*.pin_memory'),
        'Call patterns that are never an acquire, release or hand-over.')
    infer_from_release: bool = option(
        False,
        'Acquisitions are those the function itself releases somewhere outside an except '
        'handler (see _paired_inferred): a local bound to a call that a release consumes; '
        'an acquire call whose receiver a release names. What the function pops out of self '
        'state is held on entry: its raising exits count too. Needs no acquire names and '
        'applies to any function: one that releases on one path owes the release on all.')
    containers: tuple[str, ...] = option(
        (),
        'Container attribute patterns whose entries are resources: an add (add_ops) '
        'acquires, a removal (remove_ops) with the same receiver chain and a compatible key'
        ' releases.')
    add_ops: frozenset[str] = option(
        frozenset({'setitem', 'add', 'append', 'appendleft', 'setdefault', 'insert',
        'extend', 'update'}),
        'Container operations that put an entry in.')
    remove_ops: frozenset[str] = option(
        frozenset({'pop', 'popitem', 'popleft', 'discard', 'remove', 'delitem', 'clear',
        'difference_update', 'intersection_update'}),
        'Container operations that take an entry out (also when passed as a callback: '
        'add_done_callback(self._c.discard)).')
    owners: tuple[str, ...] = option(
        ('self.*',),
        'Container/attribute patterns that take ownership: storing the resource there hands'
        ' it over.')
    container_owners: tuple[str, ...] = option(
        (),
        'Container/attribute patterns that take over a container entry when its key is '
        'stored there (default: none, an entry is only released by its removal).')
    handover_calls: tuple[str, ...] = option(
        (),
        'Call patterns that take ownership of a resource mentioned in their arguments '
        '(queues, executors...).')
    return_hands_over: bool = option(
        True,
        'Returning the resource hands it to the caller (whose calls then acquire it).')
    on_return: bool = option(
        True,
        'Report paths that leave the function normally.')
    on_exception: bool = option(
        True,
        'Report paths that leave the function by an exception.')
    failed_paths_only: bool = option(
        False,
        'Only report paths on which an exception happens (propagated or caught): on a path '
        'without failure, what is still held at the exit is handed over to the object '
        '(pending entries).')
    follow_failures: bool = option(
        True,
        'Follow exception, raise and assert edges. False: only the paths on which nothing '
        'fails (early returns, breaks, the end of the function) are searched.')
    calls_raise: bool = option(
        True,
        'Any call may raise (else only raise and assert do).')
    no_raise: tuple[str, ...] = option(
        ('logger.*', '*.logger.*', '*._logger.*', 'logging.*', 'log.*', '*.add',
        '*.discard', '*.append', '*.appendleft', '*.extend', '*.update', '*.setdefault',
        '*.clear', '*.get', '*.items', '*.keys', '*.values', '*.copy', '*.pop', '*.popleft',
        '*.remove', 'len', 'isinstance', 'issubclass', 'callable', 'type', 'any', 'all',
        'sum', 'abs', 'round', 'hash', 'repr', 'reversed', 'iter', 'super', 'hasattr',
        'getattr', 'print', 'time.*', '*.perf_counter', 'set', 'list', 'dict', 'tuple',
        'frozenset', 'sorted', 'min', 'max', 'range', 'enumerate', 'zip', 'id', 'bool',
        'int', 'str', 'threading.Event', 'threading.Lock', 'threading.RLock', '*.set',
        'super().__init__', '<builtin>.object.__init__', 'abc.ABC.__init__'),
        'Call patterns assumed not to raise: logging, container and builtin helpers whose '
        'failure would be a bug, not an event to handle.')
    summaries: bool = option(
        True,
        'Look into called helpers: one that releases on all its paths is a release, one '
        'that returns a resource is an acquire, one that stores its argument into an owner '
        'is a hand-over.')
    scope: Literal["function", "class"] = option(
        'function',
        'function: each acquisition is released or handed over in the same function. class:'
        ' every matching container some method adds to is removed from by some method of '
        'the class.')
    removal_from: tuple[str, ...] = option(
        (),
        'scope=class: method names whose call trees must do the removal (empty: any method '
        'of the class).')

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Spec:
        """Parse a rule's ``params``; unknown names and bad types raise
        ``OptionsError`` (a ``ValueError``) naming the parameter."""
        return build_options(cls, params, "kind 'paired'")


Options = Spec
