"""``check --diff-base REV``: report only findings the change causes.

A changed helper can break an invariant whose finding lands in an unchanged
caller. Filtering by changed files misses it; comparing with the committed
tree does not. The subject folders as they are at ``REV`` are exported with
``git archive`` into a temporary folder (the working tree is never touched),
checked with the same rules and context, and every finding whose
fingerprint (rule, function, anchor; never the line) is already there is
known, not new.
"""

from __future__ import annotations

import dataclasses
import io
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kvflowmap.request import Request
from kvflowmap.sources.errors import SourceError

GIT_TIMEOUT = 120  # seconds for one git command


def commit_of(rev: str | None, sources: Sequence[str]) -> str:
    """The commit ``rev`` names now in the subject's repository (part of the
    run memo's key: a new commit is a new base); "" without ``rev``, or when
    git cannot tell (``base_fingerprints`` then reports why)."""
    if not rev or not sources:
        return ""
    first = Path(sources[0]).resolve()
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                    first if first.is_dir() else first.parent, "").strip()
    except SourceError:
        return ""


def base_fingerprints(req: Request, rev: str,
                      findings_of: Callable[[Request], list]) -> set[str]:
    """Fingerprints of the findings on the subject as committed at ``rev``.
    ``findings_of(request)`` analyses and checks a request the way the
    current run does. A subject folder that does not exist at ``rev`` has
    no findings there."""
    sources = [Path(s).resolve() for s in req.sources]
    if not sources:
        raise SourceError("--diff-base needs subject folders (give SRC or configure sources)")
    top = _git(["rev-parse", "--show-toplevel"], sources[0] if sources[0].is_dir()
               else sources[0].parent, f"--diff-base {rev}: {sources[0]} is not in a git "
                                       "work tree").strip()
    root = Path(top).resolve()
    _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root,
         f"--diff-base {rev}: no such commit in {root}")
    with tempfile.TemporaryDirectory(prefix="kvflowmap-base-") as tmp:
        base_sources = []
        for s in sources:
            try:
                rel = s.relative_to(root)
            except ValueError as exc:
                raise SourceError(f"--diff-base {rev}: {s} is outside the git work tree "
                                  f"{root}") from exc
            if _export(root, rev, rel, Path(tmp)):
                base_sources.append(str(Path(tmp) / rel))
        if not base_sources:
            return set()
        base = dataclasses.replace(req, sources=base_sources)
        return {f.fingerprint for f in findings_of(base)}


def _export(root: Path, rev: str, rel: Path, into: Path) -> bool:
    """Extract ``rel`` as committed at ``rev`` under ``into``; False when
    ``rel`` does not exist at ``rev``."""
    spec = rel.as_posix() or "."
    listed = _git(["ls-tree", "--name-only", rev, "--", spec], root, "")
    if not listed.strip():
        return False
    try:
        data = subprocess.run(["git", "archive", "--format=tar", rev, "--", spec], cwd=root,
                              capture_output=True, timeout=GIT_TIMEOUT, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceError(f"--diff-base {rev}: git archive of {spec} failed: {exc}") from exc
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        # plain files and folders only: nothing is written outside ``into``
        members = [m for m in tar.getmembers() if (m.isfile() or m.isdir())
                   and not Path(m.name).is_absolute() and ".." not in Path(m.name).parts]
        tar.extractall(into, members=members, filter="data")
    return True


def _git(args: list[str], cwd: Path, problem: str) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceError(f"{problem or 'git failed'}: {exc}") from exc
    if proc.returncode != 0 and problem:
        detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        raise SourceError(f"{problem}" + (f" ({detail})" if detail else ""))
    return proc.stdout
