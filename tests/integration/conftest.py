"""Real releases, fetched once by the tool into a cache shared across runs.

Set ``KVFLOWMAP_TEST_CACHE`` to choose the folder; by default it is the
per-user kvflowmap cache, so a developer's second run downloads nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvflowmap.api import Analysis, Request, analyse
from kvflowmap.sources.fetch import fetch_release

VLLM = "vllm==0.33.0"
PEGAFLOW = "pegaflow-llm==0.25.1"
LMCACHE = "lmcache==0.5.6"


def release_cache_dir() -> Path:
    env = os.environ.get("KVFLOWMAP_TEST_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("kvflowmap"))


def release(spec: str) -> Path:
    """Import root of a release, downloaded on first use."""
    return fetch_release(spec, release_cache_dir())


@pytest.fixture(scope="session")
def vllm_root() -> Path:
    return release(VLLM)


@pytest.fixture(scope="session")
def pegaflow_root() -> Path:
    return release(PEGAFLOW)


@pytest.fixture(scope="session")
def lmcache_root() -> Path:
    return release(LMCACHE)


@pytest.fixture(scope="session")
def pegaflow_analysis(vllm_root: Path, pegaflow_root: Path) -> Analysis:
    """PegaFlow's package analysed against vLLM 0.33.0, once per session."""
    req = Request(sources=[str(pegaflow_root / "pegaflow")],
                  release_roots=[(vllm_root, "vllm 0.33.0")],
                  cache_dir=release_cache_dir())
    return analyse(req)


@pytest.fixture(scope="session")
def vllm_connectors_analysis(vllm_root: Path) -> Analysis:
    """vLLM 0.33.0's own KV connectors (NIXL, Mooncake, offloading...) as the
    subject, with the rest of vLLM as context, once per session."""
    sub = vllm_root / "vllm" / "distributed" / "kv_transfer" / "kv_connector" / "v1"
    req = Request(sources=[str(sub)], release_roots=[(vllm_root, "vllm 0.33.0")],
                  cache_dir=release_cache_dir())
    return analyse(req)
