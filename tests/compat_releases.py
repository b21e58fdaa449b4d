"""Miniature vLLM "releases" and a connector package for the compat tests.

Release 0.1.0 is the old API, 0.2.0 the new one, with the real kinds of
change: ``handle_preemptions`` takes a ``KVConnectorMetadata`` instead of a
set of ids, ``__init__`` gains a required ``kv_cache_config``,
``get_transfer_results`` is new (and the worker calls it instead of
``get_finished``), ``failed_recving`` is a new carrier field,
``wait_for_save`` becomes abstract, a base member and an envs name are
removed, a request state is added, and the worker passes a new keyword."""

from __future__ import annotations

import json
from pathlib import Path

BASE = "vllm/distributed/kv_transfer/kv_connector/v1/base.py"

_BASE_OLD = '''from vllm.config import VllmConfig  # the config classes the surface follows
import enum
from abc import ABC, abstractmethod
from typing import Any


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):
    pass


class KVConnectorBase_V1(ABC):
    def __init__(self, vllm_config, role: KVConnectorRole):
        self._role = role
        self._connector_metadata = None

    def handle_preemptions(self, preempted_req_ids: set[str]):
        """Handle preempted requests."""
        return

    @abstractmethod
    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        pass

    def wait_for_save(self):
        return

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return None, None

    def _old_helper(self) -> int:
        return 1

    @property
    def prefer_cross_layer_blocks(self) -> bool:
        return False

    @abstractmethod
    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[int | None, bool]:
        pass

    def request_finished(self, request, block_ids: list[int]) -> bool:
        return False

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Block ids that failed to load."""
        return set()
'''

_BASE_NEW = '''from vllm.config import VllmConfig  # the config classes the surface follows
import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:
    from vllm.v1.kv_cache_interface import KVCacheConfig


@dataclass
class KVConnectorTransferResults:
    finished_sending: set[str] = field(default_factory=set)
    finished_recving: set[str] = field(default_factory=set)
    failed_recving: set[str] = field(default_factory=set)


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):
    pass


class KVConnectorBase_V1(ABC):
    def __init__(self, vllm_config, role: KVConnectorRole, kv_cache_config: "KVCacheConfig"):
        self._role = role
        self._connector_metadata = None

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata):
        """Handle preempted requests."""
        return

    @abstractmethod
    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        pass

    @abstractmethod
    def wait_for_save(self):
        pass

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        return None, None

    def get_transfer_results(self, finished_req_ids: set[str]) -> KVConnectorTransferResults:
        sending, recving = self.get_finished(finished_req_ids)
        return KVConnectorTransferResults(finished_sending=set(sending or ()),
                                          finished_recving=set(recving or ()))

    @abstractmethod
    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[int | None, bool]:
        pass

    def restore_kv_caches(self) -> None:
        return None

    def request_finished(self, request, block_ids: list[int]) -> tuple[bool, dict | None]:
        return False, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        """Block ids that failed to load, reported before the request finishes."""
        return set()

    _cache_hit_source = "external"
'''

# Not an entry module of the protocol file: found by the byte scan.
_GPU_WORKER = '''
from vllm.distributed.kv_transfer import get_kv_transfer_group


class Worker:
    def wake_up(self):
        get_kv_transfer_group().restore_kv_caches()
'''

_METRICS = '''
class KVConnectorStats:
    def reset(self) -> None:
        pass
'''

_OUTPUTS_OLD = '''
from dataclasses import dataclass


@dataclass
class KVConnectorOutput:
    finished_sending: set[str] | None = None
    finished_recving: set[str] | None = None
'''

_OUTPUTS_NEW = _OUTPUTS_OLD + "    failed_recving: set[str] = None\n"

_REQUEST_OLD = '''
import enum


class RequestStatus(enum.IntEnum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
'''

_REQUEST_NEW = _REQUEST_OLD + "    WAITING_FOR_REMOTE_KVS = enum.auto()\n"

_ENVS_OLD = '''
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    VLLM_HOST_IP: str = ""
    VLLM_OLD_FLAG: bool = False
'''

_ENVS_NEW = '''
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    VLLM_HOST_IP: str = ""
'''

_MIXIN_OLD = '''
class KVConnectorModelRunnerMixin:
    def _get_kv_connector_output(self, kv_connector, scheduler_output):
        kv_connector.handle_preemptions(scheduler_output.preempted_req_ids)
        kv_connector.start_load_kv(get_forward_context())
        kv_connector.wait_for_save()
        sending, recving = kv_connector.get_finished(scheduler_output.finished_req_ids)
        if kv_connector.prefer_cross_layer_blocks:
            pass
        errors = kv_connector.get_block_ids_with_load_errors()
'''

_MIXIN_NEW = '''
class KVConnectorModelRunnerMixin:
    def _get_kv_connector_output(self, kv_connector, scheduler_output):
        kv_connector.handle_preemptions(scheduler_output.kv_connector_metadata)
        kv_connector.start_load_kv(get_forward_context(), stream=None)
        kv_connector.wait_for_save()
        results = kv_connector.get_transfer_results(scheduler_output.finished_req_ids)
'''

_SCHEDULER = '''
class Scheduler:
    def schedule(self):
        n, load = self.connector.get_num_new_matched_tokens(request, 0)

    def _free(self, request):
        return self.connector.request_finished(request, [])
'''

_SCHEDULER_NEW = _SCHEDULER + '''
    def _drain_deferred_loads(self, request):
        self.connector.get_num_new_matched_tokens(request, 0)
'''

_FACTORY = '''
class KVConnectorFactory:
    @classmethod
    def create_connector(cls, config, role, kv_cache_config=None):
        return connector_cls(config, role, kv_cache_config)
'''


_VLLM_CONFIG = '''
from vllm.config.kv_transfer import KVTransferConfig


class VllmConfig:
    kv_transfer_config: KVTransferConfig | None = None
'''

_KV_TRANSFER_OLD = '''
class KVTransferConfig:
    kv_role: str | None = None
    kv_rank: int | None = None
'''

_KV_TRANSFER_NEW = '''
class KVTransferConfig:
    kv_role: str | None = None
'''


def release_files(version: str) -> dict[str, str]:
    """The files of miniature release ``version`` (0.1.0: old API, 0.2.0: new)."""
    new = version != "0.1.0"
    return {
        "vllm/__init__.py": f'__version__ = "{version}"\n',
        "vllm/envs.py": _ENVS_NEW if new else _ENVS_OLD,
        "vllm/config/__init__.py": "from vllm.config.vllm import VllmConfig\n",
        "vllm/config/vllm.py": _VLLM_CONFIG,
        "vllm/config/kv_transfer.py": _KV_TRANSFER_NEW if new else _KV_TRANSFER_OLD,
        BASE: _BASE_NEW if new else _BASE_OLD,
        "vllm/distributed/kv_transfer/kv_connector/v1/metrics.py": _METRICS,
        "vllm/distributed/kv_transfer/kv_connector/factory.py": _FACTORY,
        "vllm/v1/outputs.py": _OUTPUTS_NEW if new else _OUTPUTS_OLD,
        "vllm/v1/request.py": _REQUEST_NEW if new else _REQUEST_OLD,
        "vllm/v1/worker/kv_connector_model_runner_mixin.py": _MIXIN_NEW if new else _MIXIN_OLD,
        "vllm/v1/core/sched/scheduler.py": _SCHEDULER_NEW if new else _SCHEDULER,
        **({"vllm/v1/worker/gpu_worker.py": _GPU_WORKER} if new else {}),
    }


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``root``; return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def install_release(cache: Path, version: str) -> Path:
    """Put release ``version`` into ``cache`` as ``fetch`` leaves a complete
    release (so no network is used); return its import root."""
    root = write_tree(cache / "releases" / f"vllm-{version}", release_files(version))
    (root / ".kvflowmap-complete").write_text(json.dumps({"spec": f"vllm=={version}",
                                                          "import_root": "."}))
    return root


CONNECTOR = {
    "toyconn/__init__.py": "",
    "toyconn/good.py": '''
import vllm
from packaging.version import Version
from vllm import envs
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorMetadata

VLLM_VERSION = Version(vllm.__version__).release

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorTransferResults
except ImportError:  # vLLM 0.1.0
    KVConnectorTransferResults = None


class GuardedConnector(KVConnectorBase_V1):
    """Supports both APIs: every difference is guarded."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        try:
            super().__init__(vllm_config, role, kv_cache_config)
        except TypeError:  # vLLM 0.1.0
            super().__init__(vllm_config, role)

    def handle_preemptions(self, preempted):
        if isinstance(preempted, set):
            ids = set(preempted)
        else:
            ids = getattr(preempted, "preempted_req_ids", set())
        for rid in ids:
            pass

    def start_load_kv(self, forward_context, **kwargs):
        pass

    def wait_for_save(self):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False

    def get_finished(self, finished_req_ids):
        return None, None


class TryConnector(GuardedConnector):
    """Tries the new form and falls back on TypeError; tests members first."""

    def handle_preemptions(self, preempted: set[str]):
        try:
            ids = set(preempted)
        except TypeError:
            ids = preempted.preempted_req_ids
        return ids

    def start_load_kv(self, forward_context, **kwargs):
        if hasattr(self, "_old_helper"):
            self._old_helper()
        if hasattr(envs, "VLLM_OLD_FLAG") and envs.VLLM_OLD_FLAG:
            pass


class LayeredConnector(GuardedConnector):
    """Its own get_transfer_results builds on its own get_finished."""

    def get_finished(self, finished_req_ids):
        return set(), set()

    def get_transfer_results(self, finished_req_ids):
        sending, recving = self.get_finished(finished_req_ids)
        return KVConnectorTransferResults(finished_sending=sending, finished_recving=recving,
                                          failed_recving=set())


class WrongBranchConnector(GuardedConnector):
    """Guarded, but iterates the argument on the branch the new API takes."""

    def handle_preemptions(self, preempted):
        if isinstance(preempted, set):
            return len(preempted)
        return sorted(preempted)


class VersionedConnector(GuardedConnector):
    """An annotated override behind a version comparison."""

    def handle_preemptions(self, preempted: set[str]):
        if vllm.__version__ >= "0.2":
            preempted = preempted.preempted_req_ids
        return preempted


class HasattrConnector(GuardedConnector):
    """Tells the two forms apart with hasattr, on the argument and on the base."""

    def handle_preemptions(self, preempted):
        if hasattr(preempted, "preempted_req_ids"):
            ids = preempted.preempted_req_ids
        else:
            ids = set(preempted)
        return ids

    def start_load_kv(self, forward_context, **kwargs):
        if not hasattr(self, "_old_helper"):
            return None
        return self._old_helper()


class WrongHasattrConnector(GuardedConnector):
    """Tests the member, then uses it where the test says it is missing."""

    def start_load_kv(self, forward_context, **kwargs):
        if hasattr(self, "_old_helper"):
            return None
        return self._old_helper()


class VersionBranchConnector(GuardedConnector):
    """Picks the form by vLLM's version (packaging's Version)."""

    def handle_preemptions(self, preempted):
        if Version(vllm.__version__) >= Version("0.2.0"):
            ids = preempted.preempted_req_ids
        else:
            ids = set(preempted)
        return ids

    def start_load_kv(self, forward_context, **kwargs):
        if VLLM_VERSION < (0, 2):
            self._old_helper()


class WrongVersionConnector(GuardedConnector):
    """Compares the version the wrong way round: iterates on the new release."""

    def handle_preemptions(self, preempted):
        if Version(vllm.__version__) < Version("0.2.0"):
            return preempted.preempted_req_ids
        return sorted(preempted)


class TryWrongConnector(KVConnectorBase_V1):
    """Falls back on TypeError to a call that does not fit either."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        try:
            super().__init__(vllm_config, role, kv_cache_config)
        except TypeError:
            super().__init__(vllm_config, role, kv_cache_config, None)

    def start_load_kv(self, forward_context, **kwargs):
        pass

    def wait_for_save(self):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False


class ToyMetadata(KVConnectorMetadata):
    preempted_req_ids: set[str] = set()


class NoneGuardConnector(KVConnectorBase_V1):
    """Passes kv_cache_config on only when vLLM gave one (LMCache's guard), and
    tests the metadata against its own subclass."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        if kv_cache_config is not None:
            super().__init__(vllm_config, role, kv_cache_config)
        else:
            super().__init__(vllm_config, role)

    def start_load_kv(self, forward_context, **kwargs):
        pass

    def wait_for_save(self):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False

    def handle_preemptions(self, preempted):
        if isinstance(preempted, ToyMetadata):
            return preempted.preempted_req_ids
        return set()
''',
    "toyconn/bad.py": '''
from vllm import envs
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1


class OldConnector(KVConnectorBase_V1):
    """Written for the old API only."""

    def __init__(self, vllm_config, role):
        self.rank = vllm_config.kv_transfer_config.kv_rank  # gone from 0.2.0's config

    def handle_preemptions(self, preempted_req_ids: set[str]):
        return len(preempted_req_ids)

    def start_load_kv(self, forward_context, **kwargs):
        if envs.VLLM_OLD_FLAG:
            return self._old_helper()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False


class IteratingConnector(OldConnector):
    """Unannotated, and iterates what the new API passes as an object."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        pass

    def handle_preemptions(self, preempted):
        for rid in preempted:
            pass

    def wait_for_save(self):
        pass

    def get_transfer_results(self, finished_req_ids):
        return None

    def get_finished(self, finished_req_ids):
        return None, None


class NoSaveConnector(KVConnectorBase_V1):
    """Leaves wait_for_save to the base, which 0.2.0 makes abstract."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        pass

    def start_load_kv(self, forward_context, **kwargs):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False


class OldInitConnector(KVConnectorBase_V1):
    """Calls the old base __init__ (no kv_cache_config), unguarded."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role)

    def start_load_kv(self, forward_context, **kwargs):
        pass

    def wait_for_save(self):
        pass

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False


class OldReturnConnector(OldInitConnector):
    """Return annotations of the old API, and a hook the new one no longer calls."""

    def get_transfer_results(self, finished_req_ids) -> tuple[set[str], set[str]]:
        return set(), set()

    def get_finished(self, finished_req_ids) -> tuple[set[str], set[str], set[str]]:
        return set(), set(), set()

    def request_finished(self, request, block_ids) -> bool:
        return False

    def get_block_ids_with_load_errors(self):
        return set()


class UnannotatedReturnConnector(OldInitConnector):
    """No return annotations: nothing to compare."""

    def request_finished(self, request, block_ids):
        return False


class ExtraArgConnector(OldInitConnector):
    """Passes the base one argument too many, inside an expression; calls the
    base's __init__ by name the old way."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        KVConnectorBase_V1.__init__(self, vllm_config, role)

    def request_finished(self, request, block_ids):
        done = super().request_finished(request, block_ids,
                                        True) and True
        return done, None
''',
}
