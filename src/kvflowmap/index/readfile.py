"""Reading a source file without ever blocking on it.

A FIFO, socket or device named ``*.py`` in the tree would block a plain
``open``/``read`` forever (the reader waits for a writer that never comes).
Files are opened non-blocking and read only when they are regular files.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a directory"))


def read_regular(path: str | Path) -> bytes:
    """The bytes of ``path``; ``OSError`` (with a readable ``strerror``) when
    it cannot be read or is not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a file")
            raise OSError(errno.EINVAL, f"not a regular file ({kind}), skipped", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
