"""``kvflowmap trace`` on a tiny connector written here (the shipped stub vLLM
as context) and on logs written by hand: parsing, matching, stories,
diagnosis, outputs and the command."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from kvflowmap.trace.code import CodeIndex
from kvflowmap.trace.formats import compile_format
from kvflowmap.trace.match import EXACT, MOVED, UNKNOWN, Matcher, split_ids
from kvflowmap.trace.output_html import render_html
from kvflowmap.trace.output_mermaid import render_mermaid
from kvflowmap.trace.output_text import render_text
from kvflowmap.trace.parse import MAX_LINE, ParseStats, parse_line, records
from kvflowmap.trace.run import trace
from tests.conftest import write_tree
from tests.trace_support import connector_index

CONNECTOR = '''\
import logging

from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

logger = logging.getLogger(__name__)


class TinyConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._loading = {}
        self._done = set()
        self._failed_blocks = set()

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        logger.info("[Tiny] probe req=%s computed=%d", request.request_id, num_computed_tokens)
        return 16, True

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        logger.info("[Tiny] parked req=%s tokens=%d", request.request_id, num_external_tokens)
        self._loading[request.request_id] = blocks

    def start_load_kv(self, forward_context, **kwargs):
        for req_id in list(self._loading):
            logger.info("[Tiny] loading req=%s", req_id)
            self._transfer(req_id)
            logger.info("[Tiny] loaded req=%s in %.2fs", req_id, 0.5)
            self._done.add(req_id)

    def _transfer(self, req_id):
        logger.debug("[Tiny] reading req=%s", req_id)
        self._wait_for_remote(req_id)

    def _wait_for_remote(self, req_id):
        return None

    def _log_failure(self, req_id):
        logger.error("[Tiny] transfer failed req=%s", req_id, stacklevel=2)

    def get_finished(self, finished_req_ids):
        done, self._done = self._done, set()
        for req_id in done:
            logger.warning(f"[Tiny] finished_recving {req_id} after {len(done)} steps")
        return None, done or None

    def get_block_ids_with_load_errors(self):
        failed, self._failed_blocks = self._failed_blocks, set()
        if failed:
            logger.warning("[Tiny] %d blocks failed to load: recomputing", len(failed))
        return failed
'''


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(CONNECTOR.splitlines(), 1) if text in ln)


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> CodeIndex:
    return connector_index(tmp_path_factory.mktemp("tiny"), "tiny", CONNECTOR)


def vline(proc: str, pid: int, level: str, ts: str, where: str, msg: str, prefix: str = "") -> str:
    """A line as vLLM's formatter writes it."""
    header = f"{prefix}({proc} pid={pid}) {level} 12-02 {ts} [{where}] "
    return header + msg.replace("\n", "\r\n" + header) + "\n"


def story_lines(rid: str, t: int = 0, finish: bool = True, pid: int = 10, offset: int = 0) -> list[str]:
    """One request through the tiny connector: probe, park, load, report."""
    def c(n: int) -> str:
        return f"connector.py:{n + offset}"

    def ts(k: int) -> str:
        return f"10:00:{t + k:02d}"

    out = [vline("EngineCore_DP0", pid, "INFO", ts(0), c(_line("[Tiny] probe")), f"[Tiny] probe req={rid} computed=0"),
           vline("EngineCore_DP0", pid, "INFO", ts(0), c(_line("[Tiny] parked")), f"[Tiny] parked req={rid} tokens=16"),
           vline("Worker_TP0", pid + 1, "INFO", ts(1), c(_line("[Tiny] loading")), f"[Tiny] loading req={rid}")]
    if finish:
        out += [vline("Worker_TP0", pid + 1, "INFO", ts(2), c(_line("[Tiny] loaded")), f"[Tiny] loaded req={rid} in 0.50s"),
                vline("Worker_TP0", pid + 1, "WARNING", ts(2), c(_line("finished_recving")),
                      f"[Tiny] finished_recving {rid} after 1 steps")]
    return out


def _write(tmp_path: Path, lines: list[str], name: str = "a.log") -> str:
    p = tmp_path / name
    p.write_text("".join(lines), encoding="utf-8")
    return str(p)


# ---- formats ---------------------------------------------------------------

def test_printf_and_brace_formats_become_patterns() -> None:
    f = compile_format("[X] req=%s n=%d t=%.2f r=%r %% done", 4)
    m = f.pattern.match("[X] req=cmpl-1 n=-3 t=0.50 r='a' % done")
    assert m is not None and m.groups() == ("cmpl-1", "-3", "0.50", "'a'")
    assert f.prefix == "[X] req=" and f.placeholders == 4
    assert f.pattern.match("[X] req=cmpl-1 n=three t=0.50 r='a' % done") is None  # %d is a number
    g = compile_format("finished {} after {} steps")
    assert g.pattern.match("finished r1 after 3 steps").groups() == ("r1", "3")
    # no arguments: logging prints the message as written, % included
    assert compile_format("100% done", 0).pattern.match("100% done")
    # trailing blanks may be lost
    assert compile_format("ends with blank. ", 0).pattern.match("ends with blank.")


def test_split_ids_reads_logged_collections() -> None:
    assert split_ids("['a-1', 'b-2']") == ["a-1", "b-2"]
    assert split_ids("{'a-1'}") == ["a-1"]
    assert split_ids("r-1") == ["r-1"]
    assert split_ids("None") == [] and split_ids("set()") == []


# ---- parsing ---------------------------------------------------------------

def test_vllm_line_with_prefix_and_colours() -> None:
    raw = ("node7| \x1b[0;36m(Worker_TP1 pid=77)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m12-02 10:00:01\x1b[0m "
           "\x1b[90m[v1/core/sched/scheduler.py:12]\x1b[0m hello")
    rec, fmt = parse_line(raw)
    assert fmt == "vllm" and rec is not None
    # the prefix (VLLM_LOGGING_PREFIX) names the instance: part of the process
    assert (rec.process, rec.pid, rec.level, rec.ts, rec.file, rec.line, rec.message) == (
        "node7| Worker_TP1", 77, "INFO", "12-02 10:00:01", "v1/core/sched/scheduler.py", 12, "hello")
    # a container runtime's prefix carries a clock: no instance name
    rec, _ = parse_line("2026-12-02T10:00:01Z stdout F (Worker_TP1 pid=77) INFO 12-02 10:00:01 "
                        "[v1/core/sched/scheduler.py:12] hello")
    assert rec is not None and rec.process == "Worker_TP1"


def test_other_formats_parse() -> None:
    rec, fmt = parse_line('{"asctime": "2026-12-02 10:00:01,5", "levelname": "INFO", "name": "tiny.connector", '
                          '"processName": "EngineCore_DP0", "process": 5, "message": "hi"}')
    assert fmt == "json" and rec and (rec.logger, rec.pid, rec.ts, rec.message) == ("tiny.connector", 5, "12-02 10:00:01", "hi")
    rec, fmt = parse_line("WARNING:tiny.connector:careful")
    assert fmt == "logging" and rec and (rec.level, rec.logger, rec.message) == ("WARNING", "tiny.connector", "careful")
    rec, fmt = parse_line("2026-12-02 10:00:01,123 - tiny.connector - ERROR - boom")
    assert fmt == "asctime" and rec and (rec.level, rec.logger, rec.message, rec.ts) == (
        "ERROR", "tiny.connector", "boom", "12-02 10:00:01")
    assert parse_line("just words") == (None, "")


def test_multiline_messages_join_and_junk_is_counted(tmp_path: Path) -> None:
    lines = [vline("W", 1, "ERROR", "10:00:00", "c.py:3", "first\nTraceback (most recent call last):\nValueError: x"),
             "\x00\x01\x02 binary \xff\n",
             "  an indented continuation of nothing\n",
             vline("W", 1, "INFO", "10:00:01", "c.py:4", "second"),
             "  File \"x.py\", line 1, in f\n",
             "x" * (MAX_LINE + 10) + "\n"]
    p = tmp_path / "m.log"
    p.write_bytes("".join(lines).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    st = ParseStats()
    recs = list(records([str(p)], st))
    assert [r.message.split("\n")[0] for r in recs] == ["first", "second"]
    # the repeated headers, then an indented line, continue the record before
    assert recs[0].message.count("\n") == 3 and recs[1].message.endswith('in f')
    assert st.lines == 8 and st.records == 2 and st.continuation == 4
    assert st.binary_lines == 1 and st.huge_lines == 1
    assert st.unparsed == 2  # the binary line and the huge one


def test_headers_seen_before_read_as_the_regex_reads_them(tmp_path: Path) -> None:
    # the reader places a header it has seen by its text up to "] "; every
    # line must come out as parse_line (the regular expressions) reads it
    raw = [vline("W", 1, "INFO", "10:00:00", "c.py:3", "a [b] c] d"),
           vline("W", 1, "INFO", "10:00:00", "c.py:3", "again] with ] brackets"),
           vline("W", 2, "WARNING", "10:00:00", "c.py:3", " leading blank"),
           vline("W", 1, "INFO", "10:00:00", "c.py:3", "x", prefix="[rank0] "),
           vline("W", 1, "INFO", "10:00:00", "c.py:3", "y", prefix="[rank0] "),
           vline("W", 1, "INFO", "10:00:00", "c.py:3", "z", prefix="node [7] "),
           "(W pid=1) INFO 12-02 10:00:00 [c.py:3]no blank] after it\n",
           "(W pid=1) INFO 12-02 10:00:00 [c.py:3]no blank] after it\n",
           "INFO 12-02 10:00:01 [c.py:4] no process part\n",
           "INFO 12-02 10:00:01 [c.py:4] no process part\n",
           "\x1b[32m(W pid=1) INFO\x1b[0m 12-02 10:00:00 [c.py:3] colour\n"]
    got = list(records([_write(tmp_path, raw + raw)], ParseStats()))
    want = [parse_line(line.rstrip("\n"))[0] for line in raw + raw]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert w is not None
        assert (g.process, g.pid, g.level, g.ts, g.file, g.line, g.message) == (
            w.process, w.pid, w.level, w.ts, w.file, w.line, w.message)


def test_gzip_truncated_and_missing_files_never_crash(tmp_path: Path) -> None:
    body = "".join(vline("W", 1, "INFO", "10:00:00", "c.py:4", f"line {i}") for i in range(2000)).encode()
    good = tmp_path / "g.log.gz"
    good.write_bytes(gzip.compress(body))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(body)[:3000])
    st = ParseStats()
    assert len(list(records([str(good)], st))) == 2000
    st = ParseStats()
    got = list(records([str(cut), str(tmp_path / "missing.log")], st))
    assert 0 < len(got) < 2000
    assert st.truncated_files and st.unreadable_files


# ---- matching, stories, diagnosis --------------------------------------------

def test_exact_moved_and_unknown_matches(code: CodeIndex) -> None:
    m = Matcher(code)
    rec, _ = parse_line(story_lines("cmpl-aa11bb22-0")[2].rstrip("\n"))
    assert rec is not None
    got = m.match(rec)
    assert got.kind == EXACT and got.marker and got.marker.function.endswith("TinyConnector.start_load_kv")
    assert got.values == ("cmpl-aa11bb22-0",)
    assert m.request_ids(got) == (["cmpl-aa11bb22-0"], [])  # and its shape is learnt
    rec, _ = parse_line(story_lines("cmpl-aa11bb22-0", offset=40)[2].rstrip("\n"))
    assert rec is not None and m.match(rec).kind == MOVED
    rec, _ = parse_line(vline("W", 1, "INFO", "10:00:00", "connector.py:3", "nothing like it").rstrip("\n"))
    assert rec is not None and m.match(rec).kind == UNKNOWN
    # f-string parts: the id comes out of the {} placeholder, by the id shapes seen
    rec, _ = parse_line(story_lines("cmpl-aa11bb22-0")[4].rstrip("\n"))
    assert rec is not None
    fin = m.match(rec)
    assert fin.kind == EXACT and m.request_ids(fin)[0] == ["cmpl-aa11bb22-0"]


def test_markers_know_hooks_and_reports(code: CodeIndex) -> None:
    by_line = {m.line: m for m in code.markers if m.module == "tiny.connector"}
    assert by_line[_line("[Tiny] parked")].hooks == ("update_state_after_alloc",)
    assert by_line[_line("finished_recving")].reports == ("finished_recving",)
    assert by_line[_line("[Tiny] probe")].id_args == (0,)


def test_stories_outcomes_and_the_hang(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000001-0", 0) + story_lines("cmpl-00000002-0", 1, finish=False)
    lines += story_lines("cmpl-00000003-0", 2)
    report = trace(code, [_write(tmp_path, lines)])
    by = {r["request_id"]: r for r in report["requests"]}
    assert by["cmpl-00000001-0"]["outcome"] == "finished" and not by["cmpl-00000001-0"]["problems"]
    hang = by["cmpl-00000002-0"]
    assert hang["outcome"] == "stuck" and hang["problems"] == ["parked"]
    assert hang["hooks"] == ["get_num_new_matched_tokens", "update_state_after_alloc", "start_load_kv"]
    top = [c["function"].rpartition(".")[2] for c in hang["candidates"]]
    assert "_wait_for_remote" in top and "_transfer" in top, hang["candidates"]
    first = hang["candidates"][0]
    assert first["reasons"] and first["where"].startswith("tiny/connector.py:")
    assert any("[Tiny] loaded" in w["message"] for w in hang["would_have_logged"])
    assert [e["function"].rpartition(".")[2] for e in hang["events"]] == [
        "get_num_new_matched_tokens", "update_state_after_alloc", "start_load_kv"]
    assert report["summary"]["matched"] == {"exact": 13, "moved": 0, "unknown": 0}
    # the report the protocol still owes it: the hook that makes it, which
    # logged for the others and never for it
    owed = hang["owed"]
    assert [c["function"].rpartition(".")[2] for c in owed] == ["get_finished"]
    assert "finished_recving" in owed[0]["reasons"][0]
    assert not by["cmpl-00000001-0"]["owed"]


def test_restart_starts_a_new_epoch_and_clock_jumps_are_counted(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000001-0", 0, finish=False) + story_lines("cmpl-00000001-0", 30, pid=50)
    report = trace(code, [_write(tmp_path, lines)])
    s = report["summary"]
    assert s["epochs"] == 2 and s["restarts"]
    stories = [(r["epoch"], r["outcome"]) for r in report["requests"]]
    assert stories == [(0, "stuck"), (1, "finished")]
    assert s["clock_jumps"] == 0  # another pid is another clock
    # two instances' logs given one after the other (prefill, decode): the
    # second's EngineCore_DP0 logs before the first's last line, so it ran at
    # the same time, and is no restart
    both = [_write(tmp_path, story_lines("cmpl-00000002-0", 0) + story_lines("cmpl-00000003-0", 20),
                   "decode.log"),
            _write(tmp_path, story_lines("cmpl-00000004-0", 5, pid=90), "prefill.log")]
    report = trace(code, both)
    assert report["summary"]["epochs"] == 1
    assert {r["outcome"] for r in report["requests"]} == {"finished"}
    # and with VLLM_LOGGING_PREFIX, interleaved in one file, each is its own process
    tagged = [f"[D] {x}" for x in story_lines("cmpl-00000005-0", 0, finish=False)]
    tagged += [f"[P] {x}" for x in story_lines("cmpl-00000006-0", 1, pid=90)]
    tagged += [f"[D] {x}" for x in story_lines("cmpl-00000005-0", 3)[3:]]
    report = trace(code, [_write(tmp_path, tagged, "merged.log")])
    assert report["summary"]["epochs"] == 1
    assert {r["request_id"]: r["outcome"] for r in report["requests"]} == {
        "cmpl-00000005-0": "finished", "cmpl-00000006-0": "finished"}
    # two live processes of one name taking turns are not restarts after the first switch
    turns = story_lines("cmpl-00000005-0", 0) + story_lines("cmpl-00000006-0", 1, pid=70)
    turns += story_lines("cmpl-00000007-0", 2) + story_lines("cmpl-00000008-0", 3, pid=70)
    assert trace(code, [_write(tmp_path, turns, "t.log")])["summary"]["epochs"] == 2
    jump = story_lines("cmpl-00000009-0", 40) + story_lines("cmpl-00000008-0", 0)
    assert trace(code, [_write(tmp_path, jump, "j.log")])["summary"]["clock_jumps"] >= 1


def _later(lines: list[str], marker: str) -> list[str]:
    """The lines of one process (``marker`` in the header) 90 minutes ahead."""
    return [x.replace(" 10:00:", " 11:30:") if marker in x else x for x in lines]


def test_a_clock_running_ahead_is_a_forward_jump(code: CodeIndex, tmp_path: Path) -> None:
    # the worker's clock leaps 90 minutes while the engine core's, writing
    # into the same stream between the worker's lines, runs on: counted once
    lines = story_lines("cmpl-00000001-0", 0) + _later(story_lines("cmpl-00000002-0", 5), "Worker_TP0")
    lines += _later(story_lines("cmpl-00000003-0", 10), "Worker_TP0")
    lines += _later(story_lines("cmpl-00000004-0", 15), "Worker_TP0")
    report = trace(code, [_write(tmp_path, lines, "fwd.log")])
    assert report["summary"]["clock_jumps"] == 1
    assert {r["outcome"] for r in report["requests"]} == {"finished"}
    # every process at once (one host's clock) is idle time to the log: no jump
    idle = story_lines("cmpl-00000001-0", 0) + _later(story_lines("cmpl-00000002-0", 5), "Worker_TP0")
    idle = idle[:5] + _later(idle[5:], "EngineCore")
    assert trace(code, [_write(tmp_path, idle, "idle.log")])["summary"]["clock_jumps"] == 0
    # nor do two instances' logs given one after the other, 90 minutes apart
    both = [_write(tmp_path, _later(story_lines("cmpl-00000005-0", 0), "TP0"), "decode.log"),
            _write(tmp_path, story_lines("cmpl-00000006-0", 5, pid=90), "prefill.log")]
    assert trace(code, both)["summary"]["clock_jumps"] == 0


def test_finished_twice_and_unreported_failure(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000004-0") + [story_lines("cmpl-00000004-0")[-1]]
    report = trace(code, [_write(tmp_path, lines)])
    assert report["requests"][0]["problems"] == ["finished_twice"]


def test_a_failure_report_naming_no_request_answers_the_failures_before_it(
        code: CodeIndex, tmp_path: Path) -> None:
    # vLLM's recompute policy logs "Recovered from KV load failure: %d
    # request(s) rescheduled" with no id: it answers the failures logged
    # before it, not the ones after
    def failed(rid: str, ts: str) -> str:
        return vline("Worker_TP0", 11, "ERROR", ts, f"connector.py:{_line('[Tiny] loading')}",
                     f"[Tiny] transfer failed req={rid}")
    recovered = vline("Worker_TP0", 11, "WARNING", "10:00:05",
                      f"connector.py:{_line('blocks failed to load')}",
                      "[Tiny] 2 blocks failed to load: recomputing")
    lines = (story_lines("cmpl-00000011-0", 0, finish=False) + [failed("cmpl-00000011-0", "10:00:03"),
             recovered] + story_lines("cmpl-00000012-0", 6, finish=False) +
             [failed("cmpl-00000012-0", "10:00:08")])
    by_id = {r["request_id"]: r for r in trace(code, [_write(tmp_path, lines)])["requests"]}
    assert "failure_unreported" not in by_id["cmpl-00000011-0"]["problems"]
    assert "failure_unreported" in by_id["cmpl-00000012-0"]["problems"]


def test_request_since_until_filters(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000001-0", 0) + story_lines("cmpl-00000002-0", 20)
    path = _write(tmp_path, lines)
    one = trace(code, [path], request="cmpl-00000002-0")
    assert [r["request_id"] for r in one["requests"]] == ["cmpl-00000002-0"]
    late = trace(code, [path], since="10:00:10")
    assert [r["request_id"] for r in late["requests"]] == ["cmpl-00000002-0"]
    early = trace(code, [path], until="12-02 10:00:05")
    assert [r["request_id"] for r in early["requests"]] == ["cmpl-00000001-0"]
    assert early["summary"]["filtered_out"] == 5


def test_outputs_are_deterministic_and_sane(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000001-0", 0) + story_lines("cmpl-00000002-0", 1, finish=False)
    path = _write(tmp_path, lines)
    a, b = trace(code, [path], templates={"": "https://code/{file}#L{line}"}), trace(
        code, [path], templates={"": "https://code/{file}#L{line}"})
    assert json.dumps(a) == json.dumps(b)
    text = render_text(a)
    assert "stuck" in text and "cmpl-00000002-0" in text and "where it may have stopped" in text
    assert "where its owed report is made" in text
    # the tiny connector's one DEBUG call naming a request never shows in an INFO log
    assert "the log has no DEBUG line: 1 of the 9 logging calls that name a request" in text
    # a line the request logs every step is shown once, with its count
    again = lines + [story_lines("cmpl-00000002-0", 1, finish=False)[2]] * 4
    text = render_text(trace(code, [_write(tmp_path, again, "again.log")]))
    assert "... and 4 more times from the same call" in text
    page = render_html(a)
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page and "http" not in page.split("<body>")[0]
    assert 'href="https://code/tiny/connector.py#L' in page and 'data-outcome="stuck"' in page
    mer = render_mermaid(a)
    assert mer.count("```mermaid") == 3 and "sequenceDiagram" in mer and "gantt" in mer


def test_the_command(code: CodeIndex, tmp_path: Path, monkeypatch) -> None:
    from kvflowmap.check.stubs import stub_root
    from kvflowmap.cli import main

    root = write_tree(tmp_path / "src", {"tiny/__init__.py": "", "tiny/connector.py": CONNECTOR})
    log = _write(tmp_path, story_lines("cmpl-00000001-0", 0) + story_lines("cmpl-00000002-0", 1, finish=False))
    out = tmp_path / "t.json"
    rc = main(["trace", log, str(root / "tiny"), "--context", str(stub_root()), "-o", str(out), "-q"])
    assert rc == 1  # a stuck request
    data = json.loads(out.read_text())
    assert data["summary"]["outcomes"]["stuck"] == 1
    html_out = tmp_path / "t.html"
    assert main(["trace", log, str(root / "tiny"), "--context", str(stub_root()), "-o", str(html_out),
                 "--request", "cmpl-00000001-0", "-q"]) == 0
    assert "cmpl-00000001-0" in html_out.read_text() and "cmpl-00000002-0" not in html_out.read_text()
    # stdin
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(Path(log).read_bytes())))
    assert main(["trace", "-", str(root / "tiny"), "--context", str(stub_root()), "-f", "json",
                 "-o", str(out), "-q"]) == 1
    assert json.loads(out.read_text())["summary"]["records"] == 8
    assert main(["trace", str(root / "tiny"), "--context", str(stub_root())]) == 2  # no log
    assert main(["trace", log, str(root / "tiny"), "--context", str(stub_root()), "--since", "noon"]) == 2
    assert main(["trace", log, str(root / "tiny"), "--context", str(stub_root()),
                 "--since", "25:99:00"]) == 2


def test_settled_idle_stories_are_compacted_stuck_ones_kept(code: CodeIndex, tmp_path: Path,
                                                            monkeypatch) -> None:
    from kvflowmap.trace import story

    monkeypatch.setattr(story, "SWEEP_EVERY", 8)
    monkeypatch.setattr(story, "IDLE", 8)
    monkeypatch.setattr(story, "KEEP_SETTLED", 0)
    lines = story_lines("cmpl-00000002-0", 0, finish=False)
    for n in range(10):
        lines += story_lines(f"cmpl-1000000{n}-0", 1 + n)
    report = trace(code, [_write(tmp_path, lines)])
    by = {r["request_id"]: r for r in report["requests"]}
    assert by["cmpl-00000002-0"]["outcome"] == "stuck" and by["cmpl-00000002-0"]["events"]
    assert by["cmpl-00000002-0"]["candidates"]
    compacted = [r for r in report["requests"] if not r["lines_listed"]]
    assert compacted and all(r["outcome"] == "finished" and r["lines"] == 5 for r in compacted)
    assert report["summary"]["requests"] == 11 and not report["summary"]["not_listed"]
    # beyond KEEP_ROWS settled requests are only counted
    monkeypatch.setattr(story, "KEEP_ROWS", 2)
    report = trace(code, [_write(tmp_path, lines, "b.log")])
    s = report["summary"]
    assert s["requests"] == 11 and s["outcomes"]["finished"] == 10 and s["not_listed"]["finished"] >= 1
    assert len(report["requests"]) == 11 - s["not_listed"]["finished"]
    assert "counted but not listed" in render_text(report)
    # and only the last few retired ids are remembered: the counts stay the same
    monkeypatch.setattr(story, "RETIRED_IDS", 1)
    again = trace(code, [_write(tmp_path, lines, "c.log")])["summary"]
    assert (again["requests"], again["outcomes"], again["not_listed"]) == (
        s["requests"], s["outcomes"], s["not_listed"])


def test_unknown_lines_join_the_requests_they_name(code: CodeIndex, tmp_path: Path) -> None:
    lines = story_lines("cmpl-00000007-0", 0, finish=False)
    lines.append(vline("Worker_TP0", 11, "ERROR", "10:00:05", "elsewhere.py:9",
                       "transport reset while serving cmpl-00000007-0 (peer gone)"))
    report = trace(code, [_write(tmp_path, lines)])
    r = report["requests"][0]
    assert [e["match"] for e in r["events"]] == ["exact", "exact", "exact", "unknown"]
    assert "transport reset" in r["events"][-1]["text"] and r["events"][-1]["function"] == ""
    assert r["outcome"] == "stuck" and r["candidates"]  # ranked from the last known line
    assert report["summary"]["matched"]["unknown"] == 1
    render_text(report), render_html(report), render_mermaid(report)


def test_a_delayed_free_needs_finished_sending(tmp_path: Path) -> None:

    src = CONNECTOR + (
        "\n    def request_finished(self, request, block_ids):\n"
        '        logger.info("[Tiny] free of %s waits for the transfer", request.request_id)\n'
        "        return True, None\n")
    code = connector_index(tmp_path / "d", "tiny", src)
    n = next(i for i, ln in enumerate(src.splitlines(), 1) if "free of" in ln)
    log = [vline("EngineCore_DP0", 10, "INFO", "10:00:00", f"connector.py:{n}",
                 "[Tiny] free of cmpl-00000031-0 waits for the transfer")]
    r = trace(code, [_write(tmp_path, log)])["requests"][0]
    assert r["outcome"] == "stuck" and r["problems"] == ["delayed_free"]


def test_pipes_are_logs_folders_are_sources(tmp_path: Path) -> None:
    """``trace <(zcat prefill.log.gz) src/``: a pipe is read as a log."""
    import os

    from kvflowmap.commands.trace_cmd import split_arguments

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "m.py").write_text("")
    logs, sources = split_arguments((str(fifo), str(tmp_path / "a.log"), str(tmp_path),
                                     str(tmp_path / "m.py"), "-"))
    assert logs == [str(fifo), str(tmp_path / "a.log"), "-"]
    assert sources == [str(tmp_path), str(tmp_path / "m.py")]


def test_a_call_logging_its_callers_place_is_exact(code: CodeIndex, tmp_path: Path) -> None:
    """``stacklevel=2``: the line carries the caller's [file:LINE]; it is this
    release's call all the same, not one from another release."""
    line = vline("Worker_TP0", 11, "ERROR", "10:00:05", f"connector.py:{_line('self._transfer(req_id)')}",
                 "[Tiny] transfer failed req=cmpl-00000009-0")
    report = trace(code, [_write(tmp_path, story_lines("cmpl-00000009-0", 0, finish=False) + [line])])
    assert report["summary"]["matched"] == {"exact": 4, "moved": 0, "unknown": 0}
    assert not report["summary"]["moved_calls"]


def test_a_story_across_per_process_files_is_in_time_order(code: CodeIndex, tmp_path: Path) -> None:
    """Logs written one per process: the worker's file given first still
    tells the request's story in the order it happened."""
    lines = story_lines("cmpl-00000010-0", 0)
    worker = [x for x in lines if "Worker_TP0" in x]
    engine = [x for x in lines if "EngineCore" in x]
    report = trace(code, [_write(tmp_path, worker, "worker.log"), _write(tmp_path, engine, "engine.log")])
    events = report["requests"][0]["events"]
    assert [e["function"].rpartition(".")[2] for e in events] == [
        "get_num_new_matched_tokens", "update_state_after_alloc", "start_load_kv", "start_load_kv",
        "get_finished"]


def test_a_json_line_keeps_its_traceback() -> None:
    rec, fmt = parse_line('{"message": "send failed", "levelname": "ERROR", '
                          '"exc_info": "Traceback (most recent call last):\\nRuntimeError: x"}')
    assert fmt == "json" and rec is not None
    assert rec.message == "send failed\nTraceback (most recent call last):\nRuntimeError: x"
