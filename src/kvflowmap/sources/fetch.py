"""Download a pinned release once and unpack its Python sources into a cache.

``fetch_release("vllm==0.33.0", cache)`` returns an import root holding the
release's ``.py`` files (plus the metadata that names its version) under
``cache/releases/vllm-0.33.0/``. Wheels are fetched with ``pip download``.
When a release has no wheel, its sdist is fetched *without* pip
(``fetch_sdist``): pip prepares an sdist's metadata by running its build
backend (``setup.py``), and kvflowmap never runs the code it reads. Nothing
downloaded is imported.

A release is unpacked into a temporary directory beside its final place and
moved there with one ``os.replace``, marker file included, so concurrent runs
either see a complete release or none; a complete release costs no network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.release_spec import ReleaseSpec, parse_spec

MARKER = ".kvflowmap-complete"
FIND_LINKS_ENV = "KVFLOWMAP_PIP_FIND_LINKS"
_KEEP_META = {"METADATA", "PKG-INFO", "top_level.txt", "RECORD"}


def release_dir(spec: str, cache_root: Path) -> Path:
    """The cache directory holding release ``spec`` (it may not exist yet)."""
    rs = parse_spec(spec)
    return Path(cache_root) / "releases" / f"{rs.canonical}-{rs.version}"


def fetch_release(spec: str, cache_root: Path, *, quiet: bool = True) -> Path:
    """Return the import root of release ``spec``, downloading it if needed.

    A release already complete in the cache is returned without any network
    access. Raises SourceError when the spec is invalid, the release cannot
    be downloaded (with pip's last error lines) or its archive is unsafe.
    """
    rs = parse_spec(spec)
    final = release_dir(spec, cache_root)
    done = _complete_root(final)
    if done is not None:
        return done
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        # The work dir sits beside `final` so os.replace never crosses filesystems.
        with tempfile.TemporaryDirectory(prefix=".tmp-", dir=final.parent) as tmp:
            work = Path(tmp)
            archive = _download(rs, work / "download", quiet=quiet)
            staging = work / "unpacked"
            rel_root = _unpack(archive, staging, rs)
            marker = {"spec": str(rs), "archive": archive.name, "import_root": rel_root}
            (staging / MARKER).write_text(json.dumps(marker), encoding="utf-8")
            _publish(staging, final)
    except OSError as exc:  # a read-only or full cache: say where, not a traceback
        raise SourceError(f"{spec}: cannot store the release under {final.parent}: "
                          f"{exc.strerror or exc}"
                          f"{f' ({exc.filename})' if exc.filename else ''}") from exc
    done = _complete_root(final)
    if done is None:
        raise SourceError(f"{spec}: release unpacked but {final} is not usable")
    return done


def _complete_root(final: Path) -> Path | None:
    """The import root recorded by the marker of a complete release, if any."""
    try:
        data = json.loads((final / MARKER).read_text(encoding="utf-8"))
        rel = PurePosixPath(data["import_root"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if rel.is_absolute() or ".." in rel.parts:
        return None
    root = final / rel
    return root if root.is_dir() else None


def _publish(staging: Path, final: Path) -> None:
    """Move ``staging`` to ``final`` atomically; a concurrent winner is fine."""
    try:
        os.replace(staging, final)
        return
    except OSError:
        if _complete_root(final) is not None:
            return  # another run finished first: its copy is as good as ours
    # A non-empty, incomplete `final` was not made by this code (it publishes
    # whole directories); set it aside rather than mixing files into it.
    stale = final.with_name(f".stale-{final.name}-{uuid.uuid4().hex}")
    os.replace(final, stale)
    shutil.rmtree(stale, ignore_errors=True)
    os.replace(staging, final)


# --- download -----------------------------------------------------------------

def _pip_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _download(rs: ReleaseSpec, dest: Path, *, quiet: bool) -> Path:
    """Fetch the wheel with pip, else the sdist; return the archive path."""
    dest.mkdir(parents=True)
    wheel_error = _pip_download_wheel(rs, dest, quiet=quiet)
    if wheel_error is None:
        wheels = sorted(dest.glob("*.whl"))
        if wheels:
            return wheels[0]
        wheel_error = f"pip reported success but left no wheel in {dest}"
    # only a download needs it (urllib, certifi: 30 ms of every run's start-up)
    from kvflowmap.sources.fetch_sdist import fetch_sdist

    try:
        return fetch_sdist(rs, dest, os.environ.get(FIND_LINKS_ENV), _pip_env())
    except SourceError as exc:
        raise SourceError(
            f"could not download {rs}: no wheel could be fetched and {exc}\n"
            f"pip said:\n{wheel_error}") from None


def _pip_download_wheel(rs: ReleaseSpec, dest: Path, *, quiet: bool) -> str | None:
    """Run ``pip download`` for a wheel; None on success, else pip's last lines."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           "--only-binary", ":all:", "-d", str(dest)]
    links = os.environ.get(FIND_LINKS_ENV)
    if links:
        cmd += ["--find-links", links]
    if quiet:
        cmd.append("-q")
    cmd.append(str(rs))
    # pip's stdout is progress: keep it off our stdout, which may carry JSON.
    proc = subprocess.run(cmd, env=_pip_env(), text=True, stderr=subprocess.PIPE,
                          stdout=subprocess.PIPE if quiet else 2, check=False)
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return "\n".join(lines[-8:]) or f"pip exited with status {proc.returncode}"


# --- unpack -------------------------------------------------------------------

def _unpack(archive: Path, staging: Path, rs: ReleaseSpec) -> str:
    """Unpack what kvflowmap reads; return the import root relative to staging."""
    if archive.name.endswith(".whl"):
        staging.mkdir(parents=True)
        for rel, data in _members(archive, _wheel_target):
            _write(staging, rel, data)
        return "."
    raw = staging.with_name("raw")
    raw.mkdir(parents=True)
    for rel, data in _members(archive, _sdist_target):
        _write(raw, rel, data)
    # An sdist holds one "name-version/" directory: that is the project dir.
    children = list(raw.iterdir())
    top = children[0] if len(children) == 1 and children[0].is_dir() else raw
    os.replace(top, staging)
    return _sdist_import_root(staging, rs)


def _members(archive: Path, target: Callable[[PurePosixPath], PurePosixPath | None],
             ) -> Iterator[tuple[PurePosixPath, bytes]]:
    """(destination, bytes) of the regular-file members ``target`` keeps.

    Every member name is checked, kept or not: an archive with an escaping
    path is refused whole rather than trusted in part.
    """
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                dest = None if info.is_dir() else target(_safe_path(archive, info.filename))
                if dest is not None:
                    yield dest, zf.read(info)
        return
    try:
        tf = tarfile.open(archive)
    except tarfile.TarError as exc:
        raise SourceError(f"{archive.name} is not a zip or tar archive: {exc}") from None
    with tf:
        for member in tf:
            rel = _safe_path(archive, member.name)
            # Links and devices are skipped: only regular files are written.
            dest = target(rel) if member.isfile() else None
            fobj = tf.extractfile(member) if dest is not None else None
            if dest is not None and fobj is not None:
                yield dest, fobj.read()


def _safe_path(archive: Path, name: str) -> PurePosixPath:
    """Refuse member names that could escape the unpack dir (zip-slip)."""
    rel = PurePosixPath(name.replace("\\", "/"))
    if (not rel.parts or rel.is_absolute() or ".." in rel.parts
            or ":" in rel.parts[0]):
        raise SourceError(f"refusing to unpack {archive.name}: member {name!r} "
                          "points outside the archive (possible zip-slip)")
    return rel


def _sdist_target(rel: PurePosixPath) -> PurePosixPath | None:
    return rel if rel.suffix == ".py" or rel.name == "PKG-INFO" else None


def _wheel_target(rel: PurePosixPath) -> PurePosixPath | None:
    """Where a wheel member goes in the import root, or None to skip it."""
    top = rel.parts[0]
    if top.endswith(".dist-info"):
        return rel if len(rel.parts) == 2 and rel.name in _KEEP_META else None
    if top.endswith(".data"):
        # purelib/platlib are installed into site-packages itself.
        if len(rel.parts) > 2 and rel.parts[1] in ("purelib", "platlib"):
            rel = PurePosixPath(*rel.parts[2:])
        else:
            return None
    return rel if rel.suffix == ".py" else None


def _write(staging: Path, rel: PurePosixPath, data: bytes) -> None:
    target = staging.joinpath(*rel.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _sdist_import_root(staging: Path, rs: ReleaseSpec) -> str:
    """The sdist directory holding its top-level package (``src`` or ``.``)."""
    want = rs.canonical.replace("-", "_")
    bases = [b for b in ("src", ".", "lib", "python") if (staging / b).is_dir()]
    for base in bases:
        names = {c.name.lower() for c in (staging / base).iterdir()}
        if want in names or f"{want}.py" in names:
            return base
    for base in bases:
        if any((c / "__init__.py").is_file() for c in (staging / base).iterdir()):
            return base
    return "."
