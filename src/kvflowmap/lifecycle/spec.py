"""What the lifecycle model needs from the protocol file's ``lifecycle`` section.

Every name the model and the lifecycle rules depend on comes from here, so a
connector protocol with other hook names is a data change, not a code change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvflowmap.protocol import Protocol


@dataclass(frozen=True)
class Channel:
    """A report channel: what some hooks return that vLLM reads as ids (or
    block ids) of one kind. ``element`` indexes a returned tuple, ``keyword``
    names the argument of a returned constructor call; either may be absent
    (a plain returned set)."""

    name: str
    methods: tuple[str, ...]
    element: int | None = None
    keyword: str | None = None


@dataclass(frozen=True)
class Spawner:
    """A call that runs one of its arguments concurrently (thread, executor,
    task, callback): ``target`` names the keyword, ``arg`` the position."""

    call: str
    target: str | None = None
    arg: int | None = None
    # the argument is a call whose callee runs (``create_task(self._work(x))``:
    # a coroutine made by calling ``self._work``)
    called: bool = False


@dataclass(frozen=True)
class LifecycleSpec:
    """Names and shapes of the request lifecycle, from the protocol file."""

    id_fields: tuple[str, ...] = ("request_id", "req_id")
    id_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # fields of vLLM's objects that are collections of request ids
    # (``scheduler_output.finished_req_ids``), whatever the loop names its id
    id_collections: tuple[str, ...] = ()
    # type names connectors give their request ids (``ReqId = str``):
    # annotations with them seed ids, id collections and keyed containers
    id_types: tuple[str, ...] = ()
    request_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    finished_params: tuple[str, ...] = ("finished_req_ids",)
    probe: str = "get_num_new_matched_tokens"
    async_element: int = 1
    # the Request attribute whose content makes the probe ask for a remote
    # load; the commit hook consumes it so that a request scheduled again
    # is not loaded twice
    load_trigger: str = "kv_transfer_params"
    commit: str = "update_state_after_alloc"
    # the commit hook's parameter (``self`` included) that counts the tokens
    # vLLM lets this connector load: 0 when it is not to load the request
    commit_count: int = 3
    metadata_builder: str = "build_connector_meta"
    # the worker's step metadata: the hook that binds it, the base method that
    # reads it (asserting it is bound), and the names that test it is bound
    metadata_binder: str = "bind_connector_metadata"
    metadata_reader: str = "_get_connector_metadata"
    metadata_guards: tuple[str, ...] = ("has_connector_metadata", "_connector_metadata")
    releases: tuple[str, ...] = ("release", "release_*", "unpin", "unlock")
    # the hook that ends a connector's life, and the calls that give back a
    # long-lived resource (a socket, a thread, a client): matched on the name
    # methods whose call asks an in-flight transfer whether it is done
    done_tests: tuple[str, ...] = ("done", "query", "is_ready", "ready", "is_done",
                                   "is_finished", "completed")
    shutdown: str = "shutdown"
    closes: tuple[str, ...] = ("close", "shutdown", "stop", "join", "terminate")
    # library classes whose objects hold a resource, with the method that frees it
    closeables: tuple[str, ...] = ("concurrent.futures.ThreadPoolExecutor.shutdown",
                                   "concurrent.futures.ProcessPoolExecutor.shutdown")
    # calls that decode or receive a peer's bytes: an id taken from what they
    # return is the peer's word (``msg.decode()``, ``msgpack.loads(msg)``)
    peer_calls: tuple[str, ...] = ("decode", "loads", "unpackb", "recv", "recv_multipart",
                                   "recv_pyobj", "recv_json", "recv_string")
    delay_free: str = "request_finished"
    delay_element: int = 0
    # hooks vLLM calls instead of ``delay_free`` for some connectors (once per
    # finished request too: ``request_finished_all_groups`` for the hybrid KV cache)
    delay_free_instead: tuple[str, ...] = ()
    channels: tuple[Channel, ...] = ()
    # channels that report a send done (vLLM frees the request's blocks): a
    # send that failed has no other channel, so reporting it is no lie
    send_reports: tuple[str, ...] = ("finished_sending",)
    blocking_hooks: tuple[str, ...] = ()
    spawners: tuple[Spawner, ...] = ()
    worker_hooks: tuple[str, ...] = ()
    scheduler_hooks: tuple[str, ...] = ()
    # worker hooks that move KV in (a load) and out (a save): what only a save
    # reaches never owes vLLM failed load blocks
    load_hooks: tuple[str, ...] = ("start_load_kv", "wait_for_layer_load")
    save_hooks: tuple[str, ...] = ("save_kv_layer", "wait_for_save")
    # the step's running requests (``SchedulerOutput.scheduled_cached_reqs``):
    # their new blocks are appended to each request's table, except for a
    # request resumed after preemption (any of ``resumed``), whose new blocks
    # replace it
    running_carrier: str = "scheduled_cached_reqs"
    running_blocks: str = "new_block_ids"
    resumed: tuple[str, ...] = ("resumed_req_ids", "resumed_from_preemption")
    # what tells a connector a request was preempted: one that reads it keeps
    # its own account of resumed requests (or drops their state)
    preempted: tuple[str, ...] = ("preempted_req_ids", "PREEMPTED")

    def channel(self, name: str) -> Channel | None:
        """The channel called ``name`` (``finished_recving``...), if declared."""
        return next((c for c in self.channels if c.name == name), None)

    @property
    def hooks(self) -> tuple[str, ...]:
        return self.scheduler_hooks + self.worker_hooks


def lifecycle_spec(protocol: Protocol) -> LifecycleSpec:
    """The protocol's lifecycle section as a ``LifecycleSpec`` (defaults for
    what it leaves out)."""
    raw: dict[str, Any] = protocol.lifecycle or {}
    probe = raw.get("probe") or {}
    delay = raw.get("delay_free") or {}
    channels = tuple(
        Channel(name, tuple(c.get("methods") or ()), c.get("element"), c.get("keyword"))
        for name, c in sorted((raw.get("reports") or {}).items()))
    running = raw.get("running") or {}
    spawners = tuple(Spawner(s["call"], s.get("target"), s.get("arg"), bool(s.get("called")))
                     for s in raw.get("spawners") or () if isinstance(s, dict) and "call" in s)
    return LifecycleSpec(
        id_fields=tuple(raw.get("id_fields") or ("request_id", "req_id")),
        id_params={k: tuple(v) for k, v in (raw.get("id_params") or {}).items()},
        id_collections=tuple(raw.get("id_collections") or ()),
        id_types=tuple(raw.get("id_types") or ()),
        request_params={k: tuple(v) for k, v in (raw.get("request_params") or {}).items()},
        finished_params=tuple(raw.get("finished_params") or ("finished_req_ids",)),
        probe=str(probe.get("method", "get_num_new_matched_tokens")),
        async_element=int(probe.get("async_element", 1)),
        load_trigger=str(probe.get("trigger", LifecycleSpec.load_trigger)),
        commit=str(raw.get("commit", "update_state_after_alloc")),
        commit_count=int(raw.get("commit_count", LifecycleSpec.commit_count)),
        metadata_builder=str(raw.get("metadata_builder", "build_connector_meta")),
        metadata_binder=str((raw.get("metadata") or {}).get("binder",
                                                             LifecycleSpec.metadata_binder)),
        metadata_reader=str((raw.get("metadata") or {}).get("reader",
                                                             LifecycleSpec.metadata_reader)),
        metadata_guards=tuple((raw.get("metadata") or {}).get("guards")
                              or LifecycleSpec.metadata_guards),
        releases=tuple(raw.get("releases") or ("release", "release_*", "unpin", "unlock")),
        done_tests=tuple(raw.get("done_tests") or LifecycleSpec.done_tests),
        shutdown=str(raw.get("shutdown", "shutdown")),
        closes=tuple(raw.get("closes") or LifecycleSpec.closes),
        closeables=tuple(raw.get("closeables") or LifecycleSpec.closeables),
        peer_calls=tuple(raw.get("peer_calls") or LifecycleSpec.peer_calls),
        delay_free=str(delay.get("method", "request_finished")),
        delay_element=int(delay.get("element", 0)),
        delay_free_instead=tuple(delay.get("instead") or ()),
        channels=channels,
        send_reports=tuple(raw.get("send_reports") or LifecycleSpec.send_reports),
        blocking_hooks=tuple(raw.get("blocking_hooks") or ()),
        spawners=spawners,
        worker_hooks=tuple(protocol.methods.get("worker", ())),
        scheduler_hooks=tuple(protocol.methods.get("scheduler", ())),
        load_hooks=tuple(raw.get("load_hooks") or ("start_load_kv", "wait_for_layer_load")),
        save_hooks=tuple(raw.get("save_hooks") or ("save_kv_layer", "wait_for_save")),
        running_carrier=str(running.get("carrier", LifecycleSpec.running_carrier)),
        running_blocks=str(running.get("blocks", LifecycleSpec.running_blocks)),
        resumed=tuple(running.get("resumed") or LifecycleSpec.resumed),
        preempted=tuple(running.get("preempted") or LifecycleSpec.preempted),
    )
