"""Download a pinned release once and unpack its Python sources into a cache.

``fetch_release("vllm==0.33.0", cache)`` returns an import root holding the
release's ``.py`` files (plus the metadata that names its version) under
``cache/releases/vllm-0.33.0/``. Wheels are fetched with ``pip download``.
When a release has no wheel, its sdist is fetched *without* pip: pip prepares
an sdist's metadata by running its build backend (``setup.py``), and
kvflowmap never runs the code it reads. Nothing downloaded is imported.

A release is unpacked into a temporary directory beside its final place and
moved there with one ``os.replace``, marker file included, so concurrent runs
either see a complete release or none; a complete release costs no network.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kvflowmap.sources.errors import SourceError

MARKER = ".kvflowmap-complete"
FIND_LINKS_ENV = "KVFLOWMAP_PIP_FIND_LINKS"
DEFAULT_INDEX = "https://pypi.org/simple"
SDIST_EXTS = (".tar.gz", ".tgz", ".tar.bz2", ".zip")
# Only "==": a release in the cache must name exactly one version.
_SPEC_RE = re.compile(
    r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*"
    r"([A-Za-z0-9](?:[A-Za-z0-9.+!_-]*[A-Za-z0-9])?)\s*$")
_KEEP_META = {"METADATA", "PKG-INFO", "top_level.txt", "RECORD"}


@dataclass(frozen=True)
class ReleaseSpec:
    """A validated ``NAME==VERSION``."""

    name: str
    version: str

    @property
    def canonical(self) -> str:
        return canonical_name(self.name)

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name (``Pegaflow_LLM`` -> ``pegaflow-llm``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_spec(spec: str) -> ReleaseSpec:
    """Validate ``NAME==VERSION``; raise SourceError saying what is expected."""
    m = _SPEC_RE.match(spec) if isinstance(spec, str) else None
    if m is None:
        raise SourceError(
            f"invalid release {spec!r}: expected NAME==VERSION with one exact "
            "version, e.g. 'vllm==0.33.0'")
    return ReleaseSpec(m.group(1), m.group(2))


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
    try:
        return _fetch_sdist(rs, dest)
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


def _fetch_sdist(rs: ReleaseSpec, dest: Path) -> Path:
    """Find the sdist in the find-links dir or on the configured indexes."""
    links = os.environ.get(FIND_LINKS_ENV)
    if links and Path(links).is_dir():
        for path in sorted(Path(links).iterdir()):
            if _is_sdist_of(path.name, rs) and path.is_file():
                return path
    index_urls, no_index = _pip_indexes()
    if no_index:
        raise SourceError("no sdist was found in the find-links directory and "
                          "pip is configured with no-index")
    problems: list[str] = []
    for index in index_urls:
        try:
            for filename, url, sha256 in _list_index(index, rs.canonical):
                if _is_sdist_of(filename, rs):
                    return _download_file(url, dest / filename, sha256)
        except (OSError, ValueError) as exc:
            problems.append(f"{index}: {exc}")
    where = ", ".join(index_urls)
    detail = "".join(f"\n  {p}" for p in problems)
    raise SourceError(f"no sdist of {rs} was found on {where}{detail}")


def _is_sdist_of(filename: str, rs: ReleaseSpec) -> bool:
    for ext in SDIST_EXTS:
        if filename.lower().endswith(ext):
            name, _, version = filename[: -len(ext)].rpartition("-")
            return (canonical_name(name) == rs.canonical
                    and version.lower() == rs.version.lower())
    return False


def _pip_indexes() -> tuple[list[str], bool]:
    """Index URLs and no-index as pip is configured (files and PIP_* env)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                          env=_pip_env(), capture_output=True, text=True, check=False)
    index, extra, no_index = DEFAULT_INDEX, [], False
    # Lines look like "global.index-url='https://...'", env ones ":env:.x=..."
    # and come lowest priority first, so later values win.
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        option, value = key.rpartition(".")[2], value.strip().strip("'\"")
        if option == "index-url":
            index = value
        elif option == "extra-index-url":
            extra += value.split()
        elif option == "no-index":
            no_index = value.lower() not in ("", "0", "false", "no", "off")
    return [index, *extra], no_index


def _list_index(index: str, project: str) -> list[tuple[str, str, str | None]]:
    """(filename, url, sha256) of a project's files from a PEP 503/691 index."""
    url = index.rstrip("/") + f"/{project}/"
    accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=60) as resp:
        ctype = resp.headers.get("Content-Type", "")
        body = resp.read().decode("utf-8", "replace")
    if "json" in ctype:
        return [(f["filename"], urllib.parse.urljoin(url, f["url"]),
                 f.get("hashes", {}).get("sha256")) for f in json.loads(body)["files"]]
    files = []
    for href in re.findall(r'href\s*=\s*["\']([^"\']+)["\']', body):
        full = urllib.parse.urljoin(url, html.unescape(href))
        parsed = urllib.parse.urlparse(full)
        frag = dict(urllib.parse.parse_qsl(parsed.fragment))
        name = urllib.parse.unquote(PurePosixPath(parsed.path).name)
        files.append((name, full.split("#")[0], frag.get("sha256")))
    return files


def _download_file(url: str, target: Path, sha256: str | None) -> Path:
    """Download ``url`` to ``target``, checking the index's sha256 if given."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as resp, open(target, "wb") as out:
        while chunk := resp.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if sha256 and digest.hexdigest() != sha256.lower():
        raise SourceError(f"sha256 mismatch for {url}: the download is corrupt")
    return target


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
