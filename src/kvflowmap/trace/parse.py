"""Log lines to records: vLLM's text format (with ``VLLM_LOGGING_PREFIX``,
colour codes and its repeated-header multi-line messages), vLLM's JSON
format, and plain Python logging; plain, gzip or stdin; streamed.

A line that is none of these and does not continue the record before it is
counted (``ParseStats``), never fatal: binary junk, a huge line (cut at
``MAX_LINE``), a truncated gzip member.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

MAX_LINE = 1 << 16  # characters kept of one line; the rest is counted, not kept
_READ_SIZE = 1 << 16  # bytes per read: what a damaged gzip can cost at most

# (PROCESS pid=N) LEVEL MM-DD HH:MM:SS [file.py:LINE] message; the process part
# is missing in old releases and single-process runs; whatever precedes it is
# VLLM_LOGGING_PREFIX.
_VLLM = re.compile(
    r"(?:\((?P<proc>[^()]*?) ?pid=(?P<pid>\d+)[^)]*\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|WARN) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? \[(?P<file>[^\]\s]+?):(?P<line>\d+)\] ?")
_vllm_search = _VLLM.search
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# logging.basicConfig's default: LEVEL:logger.name:message
_BASIC = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<name>[\w.]*):")
# %(asctime)s - %(name)s - %(levelname)s - %(message)s, and
# %(asctime)s %(levelname)s %(name)s: %(message)s (with or without the name)
_ASCTIME = re.compile(
    r"(?P<ts>\d{4}-(?P<md>\d\d-\d\d)[ T](?P<hms>\d\d:\d\d:\d\d))(?:[.,]\d+)?\s*(?:-\s*)?"
    r"(?:(?P<name1>[\w.]+)\s+-\s+)?\[?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\]?\s*[-:]?\s*"
    r"(?:(?P<name2>[a-z_][\w]*(?:\.[\w]+)+):\s)?")
_TRACEBACK = re.compile(r"\s|Traceback \(|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b")


@dataclass(slots=True)
class Record:
    """One log record (its continuation lines joined with newlines)."""

    lineno: int  # first physical line, 1-based, in its file
    source: str  # which log file
    process: str  # process name ("EngineCore_DP0", "Worker_TP1"); "" when not logged
    pid: int  # 0 when not logged
    level: str
    ts: str  # "MM-DD HH:MM:SS" as logged; "" when not logged
    file: str  # as logged (basename or vLLM's shortened path); "" when not logged
    line: int  # 0 when not logged
    logger: str  # logger name (JSON, plain logging); "" otherwise
    message: str


@dataclass
class ParseStats:
    """What the parser met: kept in the summary, never an error."""

    lines: int = 0
    records: int = 0
    unparsed: int = 0
    continuation: int = 0
    huge_lines: int = 0
    binary_lines: int = 0
    truncated_files: list[str] = field(default_factory=list)
    unreadable_files: list[str] = field(default_factory=list)
    formats: dict[str, int] = field(default_factory=dict)
    unparsed_samples: list[str] = field(default_factory=list)

    def unparsed_line(self, text: str) -> None:
        self.unparsed += 1
        if len(self.unparsed_samples) < 5:
            # binary junk must not reach a terminal as control characters
            self.unparsed_samples.append("".join(c if c.isprintable() else "?" for c in text[:160]))


def open_log(path: str) -> IO[bytes]:
    """``path`` opened for reading bytes: ``-`` is stdin, a gzip file (by its
    magic number, not its name) is decompressed on the fly."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller's reader
    head = raw.peek(2)[:2] if isinstance(raw, io.BufferedReader) else b""
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def physical_lines(path: str, stats: ParseStats) -> Iterator[str]:
    """The lines of one log, decoded (bad bytes replaced), without their
    ``\n``; a ``\r`` left at the end marks vLLM's multi-line message. Read
    in chunks, so a truncated or corrupt gzip still yields every line before
    the damage (and is counted), and a line longer than ``MAX_LINE`` is cut
    there (the rest skipped up to its newline), whatever its length."""
    try:
        raw = open_log(path)
    except OSError as exc:
        stats.unreadable_files.append(f"{path}: {exc.strerror or exc}")
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    # read1: a gzip's read(n) raises at the damage and loses what it had inflated
    read = getattr(raw, "read1", raw.read)
    rest = ""
    skipping = False  # inside a huge line, after the part kept
    try:
        while True:
            try:
                chunk = read(_READ_SIZE)
            except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
                stats.truncated_files.append(f"{path}: {type(exc).__name__}: {exc}")
                break
            if not chunk:
                break
            text = rest + decoder.decode(chunk)
            if skipping:
                cut = text.find("\n")
                if cut < 0:
                    rest = ""
                    continue
                text, skipping = text[cut + 1:], False
            lines = text.split("\n")
            rest = lines.pop()
            stats.lines += len(lines)
            if "\x00" in text or "\ufffd" in text:  # junk somewhere in this chunk: find it
                lines = [_clean(line, stats) for line in lines]
            for line in lines:
                if len(line) > MAX_LINE:
                    stats.huge_lines += 1
                    line = line[:MAX_LINE]
                yield line
            if len(rest) > MAX_LINE:
                stats.huge_lines += 1
                stats.lines += 1
                yield _clean(rest[:MAX_LINE], stats)
                rest, skipping = "", True
        rest += decoder.decode(b"", final=True)
        if rest and not skipping:
            stats.lines += 1
            yield _clean(rest, stats)
    finally:
        if path != "-":
            raw.close()


def _clean(line: str, stats: ParseStats) -> str:
    """A line with NUL bytes dropped; binary junk (NULs, undecodable bytes) counted."""
    if "\x00" in line or "\ufffd" in line:
        stats.binary_lines += 1
        return line.replace("\x00", "")
    return line


def _parse_json(text: str) -> Record | None:
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if not isinstance(d, dict):
        return None
    msg = d.get("message", d.get("msg"))
    if not isinstance(msg, str):
        return None
    ts = str(d.get("asctime") or "")
    m = re.search(r"(\d\d-\d\d)[ T](\d\d:\d\d:\d\d)", ts)
    pid = d.get("process")
    return Record(0, "", str(d.get("processName") or ""), pid if isinstance(pid, int) else 0,
                  str(d.get("levelname") or d.get("level") or "").upper(),
                  f"{m.group(1)} {m.group(2)}" if m else "",
                  str(d.get("filename") or ""), int(d.get("lineno") or 0),
                  str(d.get("name") or ""), msg)


def parse_line(text: str) -> tuple[Record | None, str]:
    """One physical line as a record (source and line number left for the
    caller), and the name of its format; (None, "") when it is no header."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    m = _VLLM.search(text)
    if m is not None:
        pid = m.group("pid")
        level = m.group("level")
        return Record(0, "", m.group("proc") or "", int(pid) if pid else 0,
                      "WARNING" if level == "WARN" else level, m.group("ts"), m.group("file"),
                      int(m.group("line")), "", text[m.end():]), "vllm"
    first = text[:1]
    if first == "{":
        rec = _parse_json(text)
        if rec is not None:
            return rec, "json"
    m = _BASIC.match(text)
    if m is not None:
        return Record(0, "", "", 0, m.group("level"), "", "", 0, m.group("name"),
                      text[m.end():]), "logging"
    if first.isdigit():
        m = _ASCTIME.match(text)
        if m is not None:
            return Record(0, "", "", 0, m.group("level"), f"{m.group('md')} {m.group('hms')}", "",
                          0, m.group("name1") or m.group("name2") or "", text[m.end():]), "asctime"
    return None, ""


def records(paths: list[str], stats: ParseStats) -> Iterator[Record]:
    """The records of the logs, in file order, each file streamed. A line
    with the same header as the record before it whose line ended in ``\\r``
    (vLLM repeats the header on every line of a multi-line message) and a
    headerless line that looks like a traceback or is indented continue that
    record."""
    for path in paths:
        pending: Record | None = None
        open_multi = False  # the record's last line ended with \r
        for lineno, text in enumerate(physical_lines(path, stats), 1):
            cr = text.endswith("\r")
            if cr:
                text = text[:-1]
            # vLLM's own format inline: the common case, at every line
            m = _vllm_search(text) if "\x1b" not in text else None
            if m is not None:
                proc, pid, level, ts, file, line = m.groups()
                rec: Record | None = Record(0, "", proc or "", int(pid) if pid else 0,
                                            "WARNING" if level == "WARN" else level, ts, file,
                                            int(line), "", text[m.end():])
                fmt = "vllm"
            else:
                rec, fmt = parse_line(text)
            if rec is None:
                if pending is not None and text and (open_multi or _TRACEBACK.match(text)):
                    pending.message += "\n" + text
                    stats.continuation += 1
                    open_multi = cr
                elif text.strip():
                    stats.unparsed_line(text)
                continue
            if (open_multi and pending is not None and rec.pid == pending.pid
                    and rec.line == pending.line and rec.file == pending.file):
                pending.message += "\n" + rec.message
                stats.continuation += 1
                open_multi = cr
                continue
            if pending is not None:
                yield pending
            rec.lineno = lineno
            rec.source = path
            stats.records += 1
            stats.formats[fmt] = stats.formats.get(fmt, 0) + 1
            pending = rec
            open_multi = cr
        if pending is not None:
            yield pending
