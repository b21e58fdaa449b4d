"""Log lines to records: vLLM's text format (with ``VLLM_LOGGING_PREFIX``,
colour codes and its repeated-header multi-line messages), vLLM's JSON
format, and plain Python logging; plain, gzip or stdin; streamed.

A line that is none of these and does not continue the record before it is
counted (``ParseStats``), never fatal: binary junk, a huge line (cut at
``MAX_LINE``), a truncated gzip member.
"""

from __future__ import annotations

import codecs
import functools
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
_READ_SIZE = 1 << 16  # bytes per read of a gzip: what a damaged one can cost at most
_READ_SIZE_PLAIN = 1 << 18  # bytes per read of a plain file
_MAX_HEADERS = 1 << 12  # distinct header texts remembered (a few seconds of log; memory stays flat)

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
# a VLLM_LOGGING_PREFIX that names an instance: one short token, no clock
# (a container runtime's ``2026-12-04T10:00:00Z stdout F`` is no instance)
_INSTANCE = re.compile(r"[^\s:]{1,40}")
_TRACEBACK = re.compile(r"\s|Traceback \(|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b")


_DAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


@functools.lru_cache(maxsize=1 << 12)  # the report asks for the same few thousand again and again
def seconds(ts: str) -> float | None:
    """``MM-DD HH:MM:SS`` as seconds since the start of its year (no year
    in vLLM's format: a log across New Year goes back, counted as a jump)."""
    try:
        mo, dd = int(ts[0:2]), int(ts[3:5])
        return (((_DAYS[mo - 1] + dd - 1) * 24 + int(ts[6:8])) * 60 + int(ts[9:11])) * 60 + int(ts[12:14])
    except (ValueError, IndexError):
        return None


@dataclass(slots=True, eq=False)
class Header:
    """What a record's header says, apart from the message. vLLM's text
    format repeats one header on many lines (same process, second and
    place), so the reader makes one ``Header`` per distinct header text and
    shares it: a line then costs a dict lookup, not a regex, and what is
    derived from it (the time in seconds, the process label, the place key)
    is worked out once. Not to be changed once made. ``eq=False``: hashed
    by identity, which is cheap."""

    process: str  # process name ("EngineCore_DP0", "Worker_TP1"); "" when not logged
    pid: int  # 0 when not logged
    level: str
    ts: str  # "MM-DD HH:MM:SS" as logged; "" when not logged
    file: str  # as logged (basename or vLLM's shortened path); "" when not logged
    line: int  # 0 when not logged
    logger: str = ""  # logger name (JSON, plain logging); "" otherwise
    t: float | None = None  # ts in seconds (``seconds``); None without a readable ts
    label: str = ""  # "EngineCore_DP0 pid=4100": the process as a story names it
    place: str = ""  # "file:line", a key for the logging call's place; "" without one

    def __post_init__(self) -> None:
        self.t = seconds(self.ts) if self.ts else None
        self.label = f"{self.process} pid={self.pid}" if self.pid else (self.process or "-")
        self.place = f"{self.file}:{self.line}" if self.line else ""


# One record as the reader hands it on: (header, message, log file, first
# physical line, 1-based). A plain tuple: it is made for every record.
RawRecord = tuple[Header, str, str, int]


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


def physical_chunks(path: str, stats: ParseStats) -> Iterator[list[str]]:
    """The lines of one log, a chunk's worth at a time, decoded (bad bytes
    replaced), without their ``\n``; a ``\r`` left at the end marks vLLM's
    multi-line message. Read in chunks, so a truncated or corrupt gzip still
    yields every line before the damage (and is counted), and a line longer
    than ``MAX_LINE`` is cut there (the rest skipped up to its newline),
    whatever its length. Lists, not single lines: the reader's loop over a
    list is cheaper than a generator step per line."""
    try:
        raw = open_log(path)
    except OSError as exc:
        stats.unreadable_files.append(f"{path}: {exc.strerror or exc}")
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    # read1: a gzip's read(n) raises at the damage and loses what it had inflated
    read = getattr(raw, "read1", raw.read)
    size = _READ_SIZE if isinstance(raw, gzip.GzipFile) else _READ_SIZE_PLAIN
    rest = ""
    skipping = False  # inside a huge line, after the part kept
    try:
        while True:
            try:
                chunk = read(size)
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
            if len(text) > MAX_LINE and lines and max(map(len, lines)) > MAX_LINE:
                stats.huge_lines += sum(len(line) > MAX_LINE for line in lines)
                lines = [line[:MAX_LINE] for line in lines]
            if len(rest) > MAX_LINE:
                stats.huge_lines += 1
                stats.lines += 1
                lines.append(_clean(rest[:MAX_LINE], stats))
                rest, skipping = "", True
            if lines:
                yield lines
        rest += decoder.decode(b"", final=True)
        if rest and not skipping:
            stats.lines += 1
            yield [_clean(rest, stats)]
    finally:
        if path != "-":
            raw.close()


def physical_lines(path: str, stats: ParseStats) -> Iterator[str]:
    """The lines of one log one by one (see ``physical_chunks``)."""
    for lines in physical_chunks(path, stats):
        yield from lines


def _clean(line: str, stats: ParseStats) -> str:
    """A line with NUL bytes dropped; binary junk (NULs, undecodable bytes) counted."""
    if "\x00" in line or "\ufffd" in line:
        stats.binary_lines += 1
        return line.replace("\x00", "")
    return line


def _parse_json(text: str) -> tuple[Header, str] | None:
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if not isinstance(d, dict):
        return None
    msg = d.get("message", d.get("msg"))
    if not isinstance(msg, str):
        return None
    # the traceback of logger.exception(), as the text format puts it after the message
    for key in ("exc_info", "exc_text", "stack_info"):
        extra = d.get(key)
        if isinstance(extra, str) and extra:
            msg += "\n" + extra
    ts = str(d.get("asctime") or "")
    m = re.search(r"(\d\d-\d\d)[ T](\d\d:\d\d:\d\d)", ts)
    pid = d.get("process")
    return Header(str(d.get("processName") or ""), pid if isinstance(pid, int) else 0,
                  str(d.get("levelname") or d.get("level") or "").upper(),
                  f"{m.group(1)} {m.group(2)}" if m else "",
                  str(d.get("filename") or ""), int(d.get("lineno") or 0),
                  str(d.get("name") or "")), msg


def parse_header(text: str) -> tuple[Header | None, str, str]:
    """One physical line's header, its message and the name of its format;
    (None, "", "") when it is no header."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    m = _vllm_search(text)
    if m is not None:
        proc, pid, level, ts, file, line = m.groups()
        prefix = text[:m.start()].strip()
        if proc and _INSTANCE.fullmatch(prefix):
            # VLLM_LOGGING_PREFIX names the instance (``[P]``, ``[decode-0]``):
            # two instances' EngineCore_DP0 are two processes, not a restart
            proc = f"{prefix} {proc}"
        return Header(proc or "", int(pid) if pid else 0, "WARNING" if level == "WARN" else level,
                      ts, file, int(line)), text[m.end():], "vllm"
    first = text[:1]
    if first == "{":
        got = _parse_json(text)
        if got is not None:
            return got[0], got[1], "json"
    m = _BASIC.match(text)
    if m is not None:
        return Header("", 0, m.group("level"), "", "", 0, m.group("name")), text[m.end():], "logging"
    if first.isdigit():
        m = _ASCTIME.match(text)
        if m is not None:
            return (Header("", 0, m.group("level"), f"{m.group('md')} {m.group('hms')}", "", 0,
                           m.group("name1") or m.group("name2") or ""), text[m.end():], "asctime")
    return None, "", ""


def _record(hdr: Header, message: str, source: str = "", lineno: int = 0) -> Record:
    return Record(lineno, source, hdr.process, hdr.pid, hdr.level, hdr.ts, hdr.file, hdr.line,
                  hdr.logger, message)


def parse_line(text: str) -> tuple[Record | None, str]:
    """One physical line as a record (source and line number left for the
    caller), and the name of its format; (None, "") when it is no header."""
    hdr, msg, fmt = parse_header(text)
    return (None, "") if hdr is None else (_record(hdr, msg), fmt)


def read_records(paths: list[str], stats: ParseStats) -> Iterator[list[RawRecord]]:
    """The records of the logs, in file order, each file streamed, in
    batches (one per chunk read). A line with the same header as the record
    before it whose line ended in ``\\r`` (vLLM repeats the header on every
    line of a multi-line message) and a headerless line that looks like a
    traceback or is indented continue that record.

    The common line, vLLM's text format, is placed by its header text up to
    ``] `` (after the `` [`` of ``[file.py:LINE]``) in a dict of the headers
    already read; only a header not seen yet goes through the regular
    expressions. A record is handed on when the next one starts (a
    continuation may still follow)."""
    heads: dict[str, Header] = {}  # header text -> its Header (vLLM's text format only)
    formats = stats.formats
    for path in paths:
        p_hdr: Header | None = None  # the pending record, handed on when the next starts
        p_msg = ""
        p_lineno = 0
        open_multi = False  # the pending record's last line ended with \r
        lineno = 0
        n_vllm = 0
        for lines in physical_chunks(path, stats):
            out: list[RawRecord] = []
            # a \r ends the lines of a multi-line message: looked for per chunk
            any_cr = "\r" in "".join(lines)
            cr = False
            first = lineno + 1
            for lineno, text in enumerate(lines, first):
                if any_cr:
                    cr = text[-1:] == "\r"
                    if cr:
                        text = text[:-1]
                if text.find("\x1b", 0, 48) < 0:
                    cut, skip = text.find("] ", text.find(" [")), 2
                else:  # coloured: the header ends ``[file.py:LINE]\x1b[0m ``
                    cut, skip = text.find("]\x1b[0m "), 6
                hdr: Header | None = heads.get(text[:cut]) if cut > 0 else None
                if hdr is not None:
                    if not open_multi:  # the common line: a record of its own, hand on the one before
                        if p_hdr is not None:
                            out.append((p_hdr, p_msg, path, p_lineno))
                        p_hdr, p_msg, p_lineno = hdr, text[cut + skip:], lineno
                        n_vllm += 1
                        open_multi = cr
                        continue
                    msg = text[cut + skip:]
                    fmt = "vllm"
                else:
                    hdr, msg, fmt = parse_header(text)
                    # the header ends where the quick cut put it (and the
                    # message holds no colour code): later lines with it skip the regex
                    if (hdr is not None and fmt == "vllm" and cut > 0
                            and len(text) - len(msg) == cut + skip):
                        if len(heads) >= _MAX_HEADERS:
                            heads.clear()
                        heads[text[:cut]] = hdr
                if hdr is None:
                    if p_hdr is not None and text and (open_multi or _TRACEBACK.match(text)):
                        p_msg += "\n" + text
                        stats.continuation += 1
                        open_multi = cr
                    elif text.strip():
                        stats.unparsed_line(text)
                    continue
                if (open_multi and p_hdr is not None and hdr.pid == p_hdr.pid
                        and hdr.line == p_hdr.line and hdr.file == p_hdr.file):
                    p_msg += "\n" + msg
                    stats.continuation += 1
                    open_multi = cr
                    continue
                if p_hdr is not None:
                    out.append((p_hdr, p_msg, path, p_lineno))
                p_hdr, p_msg, p_lineno = hdr, msg, lineno
                if fmt == "vllm":
                    n_vllm += 1  # the common format, counted once a chunk
                else:
                    formats[fmt] = formats.get(fmt, 0) + 1
                    stats.records += 1
                open_multi = cr
            if n_vllm:
                formats["vllm"] = formats.get("vllm", 0) + n_vllm
                stats.records += n_vllm
                n_vllm = 0
            if out:
                yield out
        if p_hdr is not None:
            yield [(p_hdr, p_msg, path, p_lineno)]


def records(paths: list[str], stats: ParseStats) -> Iterator[Record]:
    """The records of the logs one by one, as ``Record`` (see ``read_records``)."""
    for batch in read_records(paths, stats):
        for hdr, msg, source, lineno in batch:
            yield _record(hdr, msg, source, lineno)
