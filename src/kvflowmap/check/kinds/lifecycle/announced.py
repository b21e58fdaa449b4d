"""``lifecycle`` mode ``announced``: a request the commit hook announced to
the workers is announced again on every way ``request_finished`` ends it
(``kvflowmap.lifecycle.announced``).

A P/D scheduler that tells its workers about a request in
``update_state_after_alloc`` (they start tracking it) and again when
``request_finished`` delays the free (they pair the two and send) must tell
them something on the paths that end the request without delaying (an
abort, an unexpected status): otherwise the worker's entry is never removed
and a peer that pulls the request waits for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.context import CheckContext
from kvflowmap.check.guard import each_function
from kvflowmap.check.kinds.lifecycle._shared import by_function, lifecycle, short, steps
from kvflowmap.check.model import Finding
from kvflowmap.lifecycle.announced import Unannounced
from kvflowmap.lifecycle.intakes import Intake
from kvflowmap.lifecycle.unseen import Unseen

READS = ("Reads: per class, the protocol's commit hook (`lifecycle.commit`), metadata "
         "builder (`lifecycle.metadata_builder`) and delay-free hook (`lifecycle.delay_free`); "
         "the `self` containers the builder puts into the metadata it returns; the adds of "
         "request ids to them in the commit hook with the tests they sit under; and the paths "
         "of the delay-free hook, its tests evaluated three-valued against those (locals bound "
         "to a test are expanded); the request flags the commit hook clears "
         "(`params[\"flag\"] = ...`); and the worker loops over the metadata fields the "
         "builder fills from an announcing container.")


@dataclass(frozen=True)
class Options:
    """Parameters of ``lifecycle`` mode ``announced`` (the hook names come
    from the protocol's lifecycle section)."""


def check(ctx: CheckContext, opts: Options) -> list[Finding]:
    """One finding per return of the delay-free hook that ends an announced
    request without a word to the workers."""
    lc = lifecycle(ctx)
    found = lc.unannounced()
    by_fn: dict[str, list[Unannounced]] = by_function(ctx, lc, found)
    # the workers' side of the same gap: where the id enters their own state
    taken: dict[str, list[Intake]] = by_function(ctx, lc, lc.intakes(found))
    # requests the commit hook never saw (aborted before it ran)
    unseen: dict[str, list[Unseen]] = by_function(ctx, lc, lc.unseen())

    def one(f: str) -> list[Finding]:
        out = [_intake(ctx, i) for i in
               {(i.line, i.attr): i for i in taken.get(f, [])}.values()]
        out += [_unseen(ctx, u) for u in {(u.line, u.key): u for u in unseen.get(f, [])}.values()]
        for u in by_fn.get(f, []):
            out.append(ctx.finding(
                f, u.line,
                f"{short(f)} ends the request here without delaying the free and without "
                f"telling the workers, although {short(u.commit)} announced it to them "
                f"(self.{u.attr}, handed over by {short(u.builder)}) and the delaying path "
                f"announces it again (line {u.paired_line}): the workers' entry for it is "
                "never paired, never removed, and a peer that pulls this request waits for "
                "it. Tell the workers on this path too (a not-processed set in the metadata "
                "they remove the request by).",
                path=steps(ctx, u.commit, [(u.commit_line,
                                            f"announces the request to the workers: self.{u.attr}")])
                + (ctx.step(u.builder, ctx.function(u.builder).line,
                            f"hands self.{u.attr} to the workers in the step's metadata"),)
                + steps(ctx, f, [(u.paired_line, "the delaying path announces it again"),
                                 (u.line, "this path ends it and tells the workers nothing")]),
                anchor=f"unannounced:{u.attr}"))
        return out

    return each_function(ctx, sorted(set(by_fn) | set(taken) | set(unseen)), one)


def _intake(ctx: CheckContext, i: Intake) -> Finding:
    """The finding at the worker's intake of an announced id."""
    u = i.u
    return ctx.finding(
        i.fqn, i.line,
        f"{short(i.fqn)} takes each request of the metadata's {i.field} into self.{i.attr} "
        f"here, but {short(u.fqn)} can end such a request without delaying the free and "
        f"without telling the workers (line {u.line}): its entry here is never paired with "
        "a send and never removed, and a peer that pulls it waits. Give the workers a way "
        "to drop it (a not-processed set in the metadata, removed here).",
        path=steps(ctx, u.commit, [(u.commit_line,
                                    f"announces the request to the workers: self.{u.attr}")])
        + steps(ctx, u.fqn, [(u.line, "ends it and tells the workers nothing")])
        + steps(ctx, i.fqn, [(i.line, f"the workers' entry: self.{i.attr}")]),
        anchor=f"unannounced-intake:{i.attr}")


def _unseen(ctx: CheckContext, u: Unseen) -> Finding:
    """The finding at a return of the delay-free hook for a request the
    commit hook never saw."""
    if u.key:
        return ctx.finding(
            u.fqn, u.line,
            f"{short(u.fqn)} announces here a request whose \"{u.flag}\" is still set (the "
            f"commit hook never ran for it) into self.{u.attr}, but without the request's "
            f"\"{u.key}\", which {short(u.commit)} sets before it announces (line "
            f"{u.commit_line}) and {short(u.reader)} reads with a subscript (line "
            f"{u.read_line}): building the next step's metadata raises KeyError, in the "
            f"scheduler. Set \"{u.key}\" here too, or read it with .get().",
            path=steps(ctx, u.commit, [(u.commit_line, f"sets \"{u.key}\" before announcing")])
            + steps(ctx, u.fqn, [(u.line, f"announces without \"{u.key}\"")])
            + steps(ctx, u.reader, [(u.read_line, f"reads \"{u.key}\" with no default")]),
            anchor=f"unseen-key:{u.key}")
    if u.untested:
        message = (
            f"{short(u.fqn)} never tests \"{u.flag}\", which {short(u.commit)} clears once "
            f"it has announced the request into self.{u.attr} (line {u.commit_line}): a "
            "request aborted before it was scheduled still has it set, and ends here, the "
            "first way out that tells the workers nothing. The peer that holds KV for it "
            "(the prefill side's blocks) is never told to free it. Test the flag and "
            f"announce such a request here (an empty entry in self.{u.attr}).")
        here = f"\"{u.flag}\" may still be set here; nothing is announced"
    else:
        message = (
            f"{short(u.fqn)} ends here a request whose \"{u.flag}\" is still set: "
            f"{short(u.commit)} clears it, so it never ran for this request (aborted before it "
            f"was scheduled), and the announcement it makes into self.{u.attr} (line "
            f"{u.commit_line}) never happened. Nothing tells the workers, so the peer that "
            "holds KV for this request (the prefill side's blocks) is never told to free it. "
            f"Announce it here too (an empty entry in self.{u.attr}).")
        here = f"\"{u.flag}\" is still set here; nothing is announced"
    return ctx.finding(
        u.fqn, u.line, message,
        path=steps(ctx, u.commit, [(u.commit_line, f"announces the request: self.{u.attr}")])
        + (ctx.step(u.builder, ctx.function(u.builder).line,
                    f"hands self.{u.attr} to the workers in the step's metadata"),)
        + steps(ctx, u.fqn, [(u.line, here)]),
        anchor=f"unseen:{u.attr}")
    return ctx.finding(
        u.fqn, u.line,
        f"{short(u.fqn)} ends here a request whose \"{u.flag}\" is still set: "
        f"{short(u.commit)} clears it, so it never ran for this request (aborted before it "
        f"was scheduled), and the announcement it makes into self.{u.attr} (line "
        f"{u.commit_line}) never happened. Nothing tells the workers, so the peer that "
        "holds KV for this request (the prefill side's blocks) is never told to free it. "
        f"Announce it here too (an empty entry in self.{u.attr}).",
        path=steps(ctx, u.commit, [(u.commit_line, f"announces the request: self.{u.attr}")])
        + (ctx.step(u.builder, ctx.function(u.builder).line,
                    f"hands self.{u.attr} to the workers in the step's metadata"),)
        + steps(ctx, u.fqn, [(u.line, f"\"{u.flag}\" is still set here; nothing is announced")]),
        anchor=f"unseen:{u.attr}")
