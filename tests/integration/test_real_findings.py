"""The shipped rules on the real releases give exactly the triaged findings
(docs/real-world-results.md; tests/integration/real_findings.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import release, release_cache_dir
from tests.integration.corpora import CORPORA, check_corpus, key

pytestmark = pytest.mark.integration

TRIAGED = json.loads((Path(__file__).parent / "real_findings.json").read_text())["findings"]


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda c: c.name)
def test_findings_match_the_triage(corpus) -> None:
    _, findings = check_corpus(corpus, release, release_cache_dir())
    got = sorted(key(f) for f in findings)
    want = sorted((t["rule"], t["file"], t["function"]) for t in TRIAGED
                  if t["corpus"] == corpus.name)
    assert got == want, ("findings changed: triage them in docs/real-world-results.md and "
                         f"tests/integration/real_findings.json\nnew: {sorted(set(got) - set(want))}"
                         f"\ngone: {sorted(set(want) - set(got))}")
    assert not [f for f in findings if f.rule == "internal-error"]


def test_every_triaged_finding_has_a_verdict() -> None:
    assert all(t["verdict"] in ("real bug", "real bug (performance)", "accepted",
                                "false (open)") and t["note"] for t in TRIAGED)


def test_at_most_one_open_false_positive_per_code_base() -> None:
    for corpus in CORPORA:
        open_fp = [t for t in TRIAGED if t["corpus"] == corpus.name
                   and t["verdict"] == "false (open)"]
        assert len(open_fp) <= 1, (corpus.name, open_fp)
