"""The mutation harness (``bench/mutants.py``) on a small fixed sample.

Recall is not asserted (the rules change); what is asserted can fail for real:
the sampled mutants compile, the files are restored, the unmutated baseline is
reproducible, a line shift is not a new finding, and a known bug planted in a
toy connector is detected by the rule that exists for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvflowmap.check.loader import default_rule_dirs, load_rules
from kvflowmap.check.model import Finding, Rule, Step

from .conftest import release

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import mutants  # noqa: E402
from mutation_ops import OPERATORS, Site, find_sites  # noqa: E402

TOY_WORKER = '''\
class ToyWorker:
    def __init__(self):
        self._pending = {}
        self._done = set()

    def start_load_kv(self, metadata):
        for req_id in metadata.req_ids:
            self._pending[req_id] = object()

    def get_finished(self, finished_req_ids):
        done = set()
        for req_id in list(self._pending):
            done.add(req_id)
            del self._pending[req_id]
        done.update(self._done)
        self._done = set()
        return None, done

    def handle_preemptions(self, metadata):
        for req_id in metadata.preempted:
            self._pending.pop(req_id, None)
            self._done.add(req_id)
'''
DROPPED = "            self._done.add(req_id)\n"
HANDLER = "toyconn.worker.ToyWorker.handle_preemptions"


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    found, errors = load_rules(default_rule_dirs())
    assert not errors, errors
    return found


def _toy(tmp_path: Path) -> mutants.Subject:
    pkg = tmp_path / "src" / "toyconn"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "worker.py").write_text(TOY_WORKER)
    return mutants.Subject(tmp_path / "src", pkg, (), tmp_path / "facts")


def _site(operator: str, file: str, line: int, function: str) -> Site:
    return Site(operator, file, line, 0, function, (function,), "")


def test_toy_dropped_report_is_detected(tmp_path: Path, rules: list[Rule]) -> None:
    subject = _toy(tmp_path)
    baseline = {mutants.finding_key(f) for f in mutants.check(subject, rules)}
    assert not any(k[1] == HANDLER for k in baseline)
    line = TOY_WORKER[: TOY_WORKER.index(DROPPED)].count("\n") + 1
    hand = _site("hand", "toyconn/worker.py", line, HANDLER)
    res = mutants.evaluate(subject, rules, baseline, hand, TOY_WORKER.replace(DROPPED, ""))
    assert res.detected and "kvc-pending-loads-reported" in res.rules
    assert (subject.subject / "worker.py").read_text() == TOY_WORKER  # restored


def test_toy_operator_finds_the_same_site(tmp_path: Path, rules: list[Rule]) -> None:
    subject = _toy(tmp_path)
    sites = find_sites(["drop-report"], TOY_WORKER, "toyconn/worker.py", "toyconn.worker")
    ours = [s for s in sites["drop-report"] if s.function == HANDLER]
    assert len(ours) == 1
    baseline = {mutants.finding_key(f) for f in mutants.check(subject, rules)}
    res = mutants.run_mutant(subject, rules, baseline, ours[0])
    assert res.valid and res.detected, res


def test_detection_bookkeeping() -> None:
    site = _site("x", "m.py", 3, "m.C.f")
    step = Step("m.py", 3, "m.C.f", "")
    on_path = Finding("r1", "error", "msg", "m.py", 9, 0, "m.C.g", path=(step,))
    elsewhere = Finding("r2", "error", "msg", "m.py", 9, 0, "m.C.g")
    assert mutants.detected_by([on_path, elsewhere], site) == ["r1"]
    at_7 = Finding("r1", "error", "held at line 7", "m.py", 7, 0, "m.C.g")
    at_12 = Finding("r1", "error", "held at line 12", "m.py", 12, 0, "m.C.g")
    assert mutants.finding_key(at_7) == mutants.finding_key(at_12)


# One mutant per operator on PegaFlow; on vLLM 0.33.0 (about twice as slow a
# check) the operators whose rewrites reshape code (guards, handlers, finally).
SAMPLE = {
    "pegaflow": tuple(OPERATORS),
    "vllm-0.33": ("early-return", "except-log", "finally-out", "reset-no-forward",
                  "request-finished-true", "raise-in-thread-loop"),
}


@pytest.fixture(scope="module", params=sorted(SAMPLE))
def sampled(request, tmp_path_factory, rules: list[Rule]):
    """One code base copied, its baseline, and one site per sampled operator."""
    cb = mutants.codebase(request.param)
    subject = mutants.prepare(cb, tmp_path_factory.mktemp(cb.name), release)
    base = mutants.check(subject, rules)
    sites = mutants.all_sites(subject, SAMPLE[cb.name])
    return subject, base, {op: mutants.choose(s, 1) for op, s in sites.items()}


def test_sample_baseline_reproducible(sampled, rules: list[Rule]) -> None:
    subject, base, _ = sampled
    again = mutants.check(subject, rules)
    assert sorted(map(mutants.finding_key, again)) == sorted(map(mutants.finding_key, base))


def test_sample_line_shift_is_not_new(sampled, rules: list[Rule]) -> None:
    subject, base, _ = sampled
    if not base:
        pytest.skip("no baseline finding to shift")
    target = base[0]
    path = Path(target.abspath)
    text = path.read_text(encoding="utf-8")
    site = _site("shift", str(path.relative_to(subject.root)), 1, target.function)
    baseline = {mutants.finding_key(f) for f in base}
    res = mutants.evaluate(subject, rules, baseline, site, "# shifted\n\n" + text)
    assert res.new_findings == 0 and not res.detected
    assert path.read_text(encoding="utf-8") == text


def test_sample_mutants_compile_and_restore(sampled, rules: list[Rule]) -> None:
    subject, base, chosen = sampled
    baseline = {mutants.finding_key(f) for f in base}
    results = []
    for sites in chosen.values():
        for site in sites:
            before = (subject.root / site.file).read_text(encoding="utf-8")
            res = mutants.run_mutant(subject, rules, baseline, site)
            assert res.valid, res.error
            assert (subject.root / site.file).read_text(encoding="utf-8") == before
            results.append(res)
    assert results
