"""Parameters of the ``forbid`` kind, and the defaults that bound a call."""

from __future__ import annotations

from dataclasses import dataclass

from kvflowmap.check.options import option

EXCLUDE = ("os.path.*", "posixpath.*", "<builtin>.*")
POSITIONAL_TIMEOUT = ("*.wait", "*.join", "*.result")
GUARDED_BY = {"*.result": ("*",), "*.recv*": ("poll",), "*.wait": ("is_set",)}
TIMEOUT_SETTERS = {"*.recv*": ("setsockopt:RCVTIMEO", "settimeout")}

READS = ("Reads: the call and dispatch edges of the graph from the context functions "
         "(resolved targets, callee texts, keyword and positional arguments of each call, "
         "the statement tree on the way for guards, the calls of the class for socket "
         "timeouts); in writes mode, the assignments and container operations on self in "
         "the context functions and the self methods they reach. With background, also the "
         "lifecycle model's background starts (spawned threads, executor tasks, callbacks, "
         "coroutines) and, for request_receivers, the request's data in each function; with "
         "polling_loops, the while loops of every reached function (their continue, sleep, "
         "clock reads and stepped locals).")


@dataclass(frozen=True)
class Options:
    """Parameters of the ``forbid`` kind."""

    methods: tuple[str, ...] = option((), "method names of the target classes to start from")
    side: str = option("", "start from the protocol's methods of this side (scheduler, worker)")
    entry_points: tuple[str, ...] = option((), "FQN globs of functions to start from")
    calls: tuple[str, ...] = option((), "FQN globs of forbidden calls (time.sleep, requests.*, "
                                    "*.wait)")
    unless_kwargs: tuple[str, ...] = option((), "a call passing one of these keywords is fine "
                                            "(timeout)")
    positional_timeout: tuple[str, ...] = option(POSITIONAL_TIMEOUT, "globs of calls whose "
                                                 "positional argument is a timeout")
    guarded_by: dict[str, tuple[str, ...]] = option(
        dict(GUARDED_BY), "glob -> methods (globs: '*' is any) that, called first on the "
        "same receiver, bound the call")
    timeout_setters: dict[str, tuple[str, ...]] = option(
        dict(TIMEOUT_SETTERS), "glob -> calls ('method' or 'method:ARG') that, made anywhere in "
        "the class of the call, give its receivers a timeout")
    background: bool = option(False, "also start from every function the subject runs in the "
                              "background (thread targets, executor tasks, callbacks, tasks)")
    only_after: dict[str, tuple[str, ...]] = option(
        {}, "glob -> methods: a matching call is forbidden only after one of these was called "
        "on the same receiver earlier on every way to it in the function (a reply awaited: "
        "send, then recv)")
    request_receivers: tuple[str, ...] = option(
        (), "globs of calls forbidden only on the request's own data (a per-request event or "
        "future: send_meta.ready.wait()), not on the object's long-lived ones (a thread's wake "
        "event)")
    awaited_bounded: bool = option(True, "an awaited call (await ev.wait()) suspends a coroutine, "
                                   "not a thread: bounded (false where the coroutine is the "
                                   "request's work)")
    polling_loops: bool = option(False, "also report loops that wait for another thread by "
                                 "spinning (continue or sleep) with no deadline or turn count")
    exclude: tuple[str, ...] = option(EXCLUDE, "globs never reported")
    depth: int = option(6, "call hops followed from a context function")
    edge_kinds: tuple[str, ...] = option(("call", "dispatch"), "graph edge kinds followed "
                                         "(calls mode)")
    follow_refs: bool = option(False, "follow functions passed as values (thread targets)")
    follow_context: bool = option(False, "follow calls into --context/--release code")
    forbid_writes: bool = option(False, "report writes to self.* instead of calls")
    allow_attrs: tuple[str, ...] = option((), "writes mode: attribute globs that may be written")
    follow_attrs: bool = option(False, "writes mode: also follow any call on a self attribute "
                                "(self.pool.touch()), not only self.m() and same-name "
                                "delegation")
    follow_attrs_keyed: bool = option(False, "writes mode: also follow calls on a self "
                                      "attribute (self.adapter.submit_lookup()), reporting "
                                      "there only writes keyed by a request id (per-request "
                                      "state of a helper object; its counters and metrics "
                                      "are not)")
    released_by: tuple[str, ...] = option((), "writes mode: methods whose resets (and, for "
                                          "keyed writes, removals) make a write acceptable "
                                          "(request_finished, build_connector_meta)")
    ignore_removals: bool = option(False, "writes mode: pops, del and discard are not reported")
    committed_by: tuple[str, ...] = option((), "writes mode: methods that commit per-request "
                                           "state (update_state_after_alloc); a keyed write "
                                           "into a container they also fill overwrites "
                                           "committed state and is reported whatever releases "
                                           "it, unless it only fills a missing key")
    handed_by: tuple[str, ...] = option((), "writes mode: methods that hand containers to the "
                                        "workers (build_connector_meta); a keyed write into one "
                                        "is reported even when a reset undoes it, unless the "
                                        "context function reads it back first")
