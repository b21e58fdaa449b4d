"""The real-release corpora the shipped rules are triaged on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvflowmap.api import Analysis, Request, analyse
from kvflowmap.check.engine import run_rules
from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.model import Finding


@dataclass(frozen=True)
class Corpus:
    """A subject inside a release, checked against a vLLM release (0.33.0 by
    default; an older vLLM's own connectors against that release)."""

    name: str
    release: str  # NAME==VERSION of the subject's release
    subject: str  # path inside the release's import root
    context: str = "vllm==0.33.0"


CORPORA = (
    Corpus("pegaflow-llm 0.25.1", "pegaflow-llm==0.25.1", "pegaflow"),
    Corpus("vllm 0.33.0 connectors", "vllm==0.33.0", "vllm/distributed/kv_transfer/kv_connector/v1"),
    Corpus("lmcache 0.5.6", "lmcache==0.5.6", "lmcache"),
    Corpus("vllm-ascend 0.23.0", "vllm-ascend==0.23.0", "vllm_ascend/distributed"),
    Corpus("vllm 0.11.0 connectors", "vllm==0.11.0", "vllm/distributed/kv_transfer/kv_connector/v1",
           "vllm==0.11.0"),
    # Mooncake's own copy of its vLLM connector, shipped in the transfer engine's
    # wheel for vLLM 0.10 to 0.12 (it refuses newer ones); first checked
    # 2026-12-05, after the rules were written
    Corpus("mooncake-transfer-engine 0.3.13.post1", "mooncake-transfer-engine==0.3.13.post1",
           "mooncake", "vllm==0.11.1"),
    # AIBrix's KV cache package: three connectors, first checked 2026-12-05; its
    # findings then were all false and fixed in the engine, so none is triaged
    Corpus("aibrix-kvcache 0.8.0", "aibrix-kvcache==0.8.0", "aibrix_kvcache/integration/vllm"),
)


def check_corpus(corpus: Corpus, release, cache: Path) -> tuple[Analysis, list[Finding]]:
    """Run every shipped rule on one corpus; ``release(spec)`` gives a root."""
    vllm = release(corpus.context)
    subject = release(corpus.release) / corpus.subject
    a = analyse(Request(sources=[str(subject)],
                        release_roots=[(vllm, corpus.context.replace("==", " "))],
                        cache_dir=cache))
    rules, errors = load_rules(default_rule_dirs())
    assert not errors, errors
    return a, run_rules(a, rules)


def key(f: Finding) -> tuple[str, str, str]:
    """What identifies a triaged finding across unrelated edits."""
    return (f.rule, f.file, f.function)
