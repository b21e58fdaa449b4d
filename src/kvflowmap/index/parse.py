"""Read one file and turn it into facts, or into a problem report."""

from __future__ import annotations

import ast
import hashlib

import libcst as cst

from kvflowmap.facts import FileFacts, ProblemFact
from kvflowmap.index.extract import extract_module

# A file larger than this is reported, not parsed: it is generated data, and
# parsing it would stall the run (LibCST needs ~1 s per 10k lines).
MAX_BYTES = 8 * 1024 * 1024


def content_sha(data: bytes) -> str:
    """Content hash used as the cache key."""
    return hashlib.sha256(data).hexdigest()


def facts_from_bytes(path: str, data: bytes) -> FileFacts:
    """Parse ``data`` (the bytes of ``path``) into facts; never raises."""
    facts = FileFacts(path=path, sha=content_sha(data))
    problem = _check_bytes(data)
    if problem:
        facts.problem = problem
        return facts
    text = data.decode("utf-8")
    facts.lines = text.count("\n") + 1
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        facts.problem = _syntax_problem(text, exc)
        return facts
    except RecursionError:
        facts.problem = ProblemFact(0, "nesting too deep to parse")
        return facts
    try:
        return extract_module(module, facts, text)
    except RecursionError:
        return FileFacts(path=path, sha=facts.sha, lines=facts.lines,
                         problem=ProblemFact(0, "nesting too deep to analyse"))


def _syntax_problem(text: str, exc: cst.ParserSyntaxError) -> ProblemFact:
    """CPython's parser points at the right line more often than LibCST's."""
    try:
        ast.parse(text)
    except SyntaxError as err:
        return ProblemFact(err.lineno or 0, f"syntax error: {err.msg}")
    except (ValueError, RecursionError, MemoryError):
        pass
    return ProblemFact(exc.raw_line, f"syntax error: {exc.message}")


def _check_bytes(data: bytes) -> ProblemFact | None:
    if len(data) > MAX_BYTES:
        return ProblemFact(0, f"file too large ({len(data) // 1_000_000} MB > "
                              f"{MAX_BYTES // 1_000_000} MB), skipped")
    if b"\0" in data:
        return ProblemFact(data[: data.index(b"\0")].count(b"\n") + 1, "contains null bytes")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return ProblemFact(line, f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})")
    return None


def facts_from_path(path: str, display: str) -> FileFacts:
    """Read and parse a file; a read error becomes a problem fact."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return FileFacts(path=display, sha="", problem=ProblemFact(0, f"cannot read: {exc.strerror}"))
    return facts_from_bytes(display, data)
