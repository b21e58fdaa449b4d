"""Read one file and turn it into facts, or into a problem report."""

from __future__ import annotations

import ast
import io
import signal
import threading
import tokenize
import warnings
from contextlib import contextmanager

import libcst as cst

from kvflowmap.facts import FileFacts, ProblemFact
from kvflowmap.index.cache import content_sha
from kvflowmap.index.extract import extract_module
from kvflowmap.index.readfile import read_regular

# Seconds one file may take; LibCST needs ~1 s per 10k lines, so only a
# pathological file gets near it, and it must not stall the whole run.
TIME_BUDGET = 60.0

# A file larger than this is reported, not parsed: it is generated data, and
# parsing it would stall the run (LibCST needs ~1 s per 10k lines).
MAX_BYTES = 8 * 1024 * 1024


def facts_from_bytes(path: str, data: bytes, *, screen: bool = True) -> FileFacts:
    """Parse ``data`` (the bytes of ``path``) into facts; never raises.

    ``screen=False`` skips the pre-screen for nesting that crashes LibCST's
    native parser (a tenth of the parse): only for pool workers, whose crash
    the runner survives by redoing their files screened."""
    facts = FileFacts(path=path, sha=content_sha(data))
    problem = _check_bytes(data)
    if problem:
        facts.problem = problem
        return facts
    text = decode_source(data)
    facts.lines = text.count("\n") + 1
    unsafe = _too_deep(text) if screen else None
    if unsafe:
        facts.problem = unsafe
        return facts
    try:
        with _time_budget(TIME_BUDGET):
            try:
                module = cst.parse_module(text)
            except cst.ParserSyntaxError as exc:
                facts.problem = _syntax_problem(text, exc)
                return facts
            return extract_module(module, facts, text)
    except RecursionError:
        reason = "nesting too deep to analyse"
    except _OverBudget:
        reason = f"took longer than {TIME_BUDGET:.0f} s to analyse, skipped"
    except MemoryError:
        reason = "too large to analyse (out of memory)"
    return FileFacts(path=path, sha=facts.sha, lines=facts.lines, problem=ProblemFact(0, reason))


def _too_deep(text: str) -> ProblemFact | None:
    """CPython's parser screens out nesting that crashes LibCST's native parser
    (a segmentation fault at ~3,000 nested parentheses, measured); it costs
    about a tenth of the LibCST parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings are the user's business
            ast.parse(text)
    except RecursionError:
        return ProblemFact(0, "nesting too deep to analyse safely")
    except MemoryError:
        return ProblemFact(0, "too large to analyse (out of memory)")
    except SyntaxError as err:
        if "too many nested" in str(err.msg) or "too many levels" in str(err.msg):
            return ProblemFact(err.lineno or 0, f"syntax error: {err.msg}")
    except ValueError:
        pass  # e.g. null bytes, reported elsewhere
    return None


class _OverBudget(Exception):
    pass


@contextmanager
def _time_budget(seconds: float):
    """Raise ``_OverBudget`` after ``seconds`` (main thread, Unix only)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _expire(signum, frame):
        raise _OverBudget()

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
        decode_source(data)
    except SyntaxError as exc:  # an unknown or malformed coding declaration
        return ProblemFact(exc.lineno or 1, f"bad encoding declaration: {exc.msg}")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        enc = source_encoding(data)
        return ProblemFact(line, f"not {'UTF-8' if enc in ('utf-8', 'utf-8-sig') else enc} "
                                 f"(byte 0x{data[exc.start]:02x} at offset {exc.start})")
    return None


def source_encoding(data: bytes) -> str:
    """The encoding Python reads ``data`` with: a PEP 263 ``coding:`` line or
    a BOM, else UTF-8. Raises ``SyntaxError`` for an unknown declaration."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        if "unknown encoding" in str(exc.msg) or "encoding problem" in str(exc.msg):
            raise
        return "utf-8"  # no declaration and undecodable first lines: say "not UTF-8"


def decode_source(data: bytes) -> str:
    """``data`` as text, decoded the way Python itself would (PEP 263)."""
    return data.decode(source_encoding(data))


def facts_from_path(path: str, display: str, *, screen: bool = True) -> FileFacts:
    """Read and parse a file; a read error becomes a problem fact."""
    try:
        data = read_regular(path)
    except OSError as exc:
        return FileFacts(path=display, sha="", problem=ProblemFact(0, f"cannot read: {exc.strerror}"))
    return facts_from_bytes(display, data, screen=screen)
