"""Fetch a release's sdist without pip, when it has no wheel.

pip prepares an sdist's metadata by running its build backend (``setup.py``),
and kvflowmap never runs the code it reads: the sdist is taken from the
find-links directory, else found on the indexes pip is configured with
(PEP 503 HTML or PEP 691 JSON pages) and downloaded, its sha256 checked.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.release_spec import ReleaseSpec, canonical_name

DEFAULT_INDEX = "https://pypi.org/simple"
SDIST_EXTS = (".tar.gz", ".tgz", ".tar.bz2", ".zip")


def fetch_sdist(rs: ReleaseSpec, dest: Path, links: str | None, env: dict[str, str]) -> Path:
    """Find the sdist in the find-links dir ``links`` or on the indexes pip is
    configured with (``pip config list`` run with ``env``); download it to
    ``dest`` unless it is a local file. Raises SourceError when none is found."""
    if links and Path(links).is_dir():
        for path in sorted(Path(links).iterdir()):
            if _is_sdist_of(path.name, rs) and path.is_file():
                return path
    index_urls, no_index = _pip_indexes(env)
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


def _pip_indexes(env: dict[str, str]) -> tuple[list[str], bool]:
    """Index URLs and no-index as pip is configured (files and PIP_* env)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                          env=env, capture_output=True, text=True, check=False)
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
