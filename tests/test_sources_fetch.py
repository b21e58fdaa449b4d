"""Tests for kvflowmap.sources.fetch.

Offline tests build tiny wheels and sdists in tmp_path and point pip at them
with KVFLOWMAP_PIP_FIND_LINKS (pip's own config is switched off so the
machine's indexes are never asked). The sdist index path runs against a
local HTTP server. Only ``integration`` tests touch the real package index.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kvflowmap.sources import fetch, fetch_sdist
from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.fetch import MARKER, fetch_release, parse_spec, release_dir
from kvflowmap.sources.version import detect_version

# If the sdist's setup.py ever runs, it leaves this file behind.
EXEC_SENTINEL = "import pathlib; pathlib.Path({path!r}).write_text('ran')\n"


def make_wheel(where: Path, name: str, version: str, files: dict[str, bytes | str],
               ) -> Path:
    """A minimal wheel holding ``files`` plus its dist-info."""
    info = f"{name}-{version}.dist-info"
    members = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "".join(f"{m},,\n" for m in files) + f"{info}/RECORD,,\n",
    }
    path = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def make_sdist(where: Path, name: str, version: str, files: dict[str, str],
               symlinks: dict[str, str] | None = None) -> Path:
    """A minimal ``name-version.tar.gz`` with everything under one top dir."""
    top = f"{name}-{version}"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             **files}
    path = where / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for member, text in files.items():
            data = text.encode()
            ti = tarfile.TarInfo(member if member.startswith("/") or ".." in member
                                 else f"{top}/{member}")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for member, target in (symlinks or {}).items():
            ti = tarfile.TarInfo(f"{top}/{member}")
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
    return path


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A find-links dir; pip sees only it (no index, no config files)."""
    d = tmp_path / "links"
    d.mkdir()
    monkeypatch.setenv("KVFLOWMAP_PIP_FIND_LINKS", str(d))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    return d


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("network or pip used for a cached release")
    monkeypatch.setattr(fetch.subprocess, "run", boom)
    monkeypatch.setattr(fetch_sdist.urllib.request, "urlopen", boom)


# --- spec ---------------------------------------------------------------------

@pytest.mark.parametrize("spec,name,version", [
    ("vllm==0.33.0", "vllm", "0.33.0"),
    (" pegaflow-llm == 0.25.1 ", "pegaflow-llm", "0.25.1"),
    ("Foo.Bar_baz==1.0rc1+local.2", "Foo.Bar_baz", "1.0rc1+local.2"),
])
def test_parse_spec_accepts_exact_pins(spec: str, name: str, version: str) -> None:
    rs = parse_spec(spec)
    assert (rs.name, rs.version) == (name, version)


@pytest.mark.parametrize("spec", [
    "vllm", "vllm>=0.3", "vllm==", "==1.0", "vllm==0.3.*", "vllm==1.0; python_version>'3'",
    "vllm==1.0,<2", "../x==1.0", "vllm==../../etc", "vllm==1/2", "", "vllm===1.0",
])
def test_bad_spec_raises_before_any_download(spec: str, cache: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    no_network(monkeypatch)
    with pytest.raises(SourceError, match="NAME==VERSION"):
        fetch_release(spec, cache)
    assert not cache.exists()


def test_release_dir_uses_normalized_name(cache: Path) -> None:
    assert release_dir("Pega_Flow.LLM==0.25.1", cache) == cache / "releases" / "pega-flow-llm-0.25.1"


# --- wheels -------------------------------------------------------------------

def test_wheel_unpacks_only_python_and_metadata(links: Path, cache: Path) -> None:
    make_wheel(links, "tinypkg", "1.2.3", {
        "tinypkg/__init__.py": "X = 1\n",
        "tinypkg/sub/mod.py": "Y = 2\n",
        "tinypkg/_native.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
        "tinypkg/data.json": "{}",
        "tinypkg-1.2.3.data/purelib/extra_mod.py": "Z = 3\n",
        "tinypkg-1.2.3.data/scripts/tool.py": "print('script')\n",
    })
    root = fetch_release("tinypkg==1.2.3", cache)
    assert root == release_dir("tinypkg==1.2.3", cache)
    assert files_under(root) == {
        MARKER, "tinypkg/__init__.py", "tinypkg/sub/mod.py", "extra_mod.py",
        "tinypkg-1.2.3.dist-info/METADATA", "tinypkg-1.2.3.dist-info/RECORD",
    }
    assert (root / "tinypkg/sub/mod.py").read_text() == "Y = 2\n"
    assert detect_version(root, "tinypkg") == "1.2.3"
    # The temp work dir is gone: only the published release remains.
    assert sorted(p.name for p in (cache / "releases").iterdir()) == ["tinypkg-1.2.3"]


def test_second_call_is_offline_and_immediate(links: Path, cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    make_wheel(links, "tinypkg", "1.0", {"tinypkg/__init__.py": ""})
    first = fetch_release("tinypkg==1.0", cache)
    (links / "tinypkg-1.0-py3-none-any.whl").unlink()
    no_network(monkeypatch)
    assert fetch_release("TinyPkg==1.0", cache) == first


def test_directory_without_marker_is_not_trusted(links: Path, cache: Path) -> None:
    # A leftover without the marker (not made by fetch) is replaced, not reused.
    stale = release_dir("tinypkg==1.0", cache)
    (stale / "junk").mkdir(parents=True)
    (stale / "junk" / "old.py").write_text("")
    make_wheel(links, "tinypkg", "1.0", {"tinypkg/__init__.py": ""})
    root = fetch_release("tinypkg==1.0", cache)
    assert "junk/old.py" not in files_under(root)
    assert (root / "tinypkg/__init__.py").is_file()


def test_zip_slip_is_refused_and_nothing_is_published(links: Path, cache: Path,
                                                      tmp_path: Path) -> None:
    make_wheel(links, "evilpkg", "1.0", {"evilpkg/__init__.py": "",
                                         "../../escaped.py": "pwned = 1\n"})
    with pytest.raises(SourceError, match="zip-slip"):
        fetch_release("evilpkg==1.0", cache)
    assert not release_dir("evilpkg==1.0", cache).exists()
    assert list((cache / "releases").iterdir()) == []
    assert not list(tmp_path.rglob("escaped.py"))


def test_concurrent_fetches_agree(links: Path, cache: Path) -> None:
    make_wheel(links, "tinypkg", "1.0", {f"tinypkg/m{i}.py": f"V = {i}\n" for i in range(50)})
    with ThreadPoolExecutor(4) as pool:
        roots = list(pool.map(lambda _: fetch_release("tinypkg==1.0", cache), range(4)))
    assert len(set(roots)) == 1
    assert len(list((roots[0] / "tinypkg").glob("*.py"))) == 50
    assert sorted(p.name for p in (cache / "releases").iterdir()) == ["tinypkg-1.0"]


def test_publish_keeps_a_complete_release_that_won_the_race(tmp_path: Path) -> None:
    final, staging = tmp_path / "final", tmp_path / "staging"
    for d, text in ((final, "winner"), (staging, "loser")):
        d.mkdir()
        (d / MARKER).write_text('{"import_root": "."}')
        (d / "who.py").write_text(text)
    fetch._publish(staging, final)
    assert (final / "who.py").read_text() == "winner"


def test_pip_failure_reports_pip_stderr(links: Path, cache: Path) -> None:
    with pytest.raises(SourceError) as err:
        fetch_release("no-such-pkg-kvflowmap==9.9", cache)
    msg = str(err.value)
    assert "no-such-pkg-kvflowmap==9.9" in msg
    assert "No matching distribution" in msg  # pip's own words are passed on
    assert not release_dir("no-such-pkg-kvflowmap==9.9", cache).exists()


# --- sdists -------------------------------------------------------------------

def test_sdist_src_layout_is_unpacked_without_running_setup(links: Path, cache: Path,
                                                            tmp_path: Path) -> None:
    ran = tmp_path / "setup-ran"
    make_sdist(links, "tinypkg", "2.0", {
        "setup.py": EXEC_SENTINEL.format(path=str(ran)),
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\n",
        "README.md": "hi",
        "src/tinypkg/__init__.py": "A = 1\n",
        "src/tinypkg/core.py": "B = 2\n",
        "tests/test_x.py": "",
    })
    root = fetch_release("tinypkg==2.0", cache)
    top = release_dir("tinypkg==2.0", cache)
    assert root == top / "src"
    assert files_under(top) == {MARKER, "PKG-INFO", "setup.py", "src/tinypkg/__init__.py",
                                "src/tinypkg/core.py", "tests/test_x.py"}
    assert not ran.exists(), "the sdist's setup.py was executed"
    assert detect_version(root, "tinypkg") == "2.0"


def test_sdist_flat_layout_root_is_project_dir(links: Path, cache: Path) -> None:
    make_sdist(links, "single_mod", "0.1", {"single_mod.py": "", "docs/conf.py": ""})
    root = fetch_release("single-mod==0.1", cache)
    assert root == release_dir("single-mod==0.1", cache)
    assert (root / "single_mod.py").is_file()


def test_sdist_symlinks_are_not_followed(links: Path, cache: Path) -> None:
    make_sdist(links, "linkpkg", "1.0", {"linkpkg/__init__.py": ""},
               symlinks={"linkpkg/passwd.py": "/etc/passwd"})
    root = fetch_release("linkpkg==1.0", cache)
    assert not (root / "linkpkg/passwd.py").exists()
    assert (root / "linkpkg/__init__.py").is_file()


def test_sdist_with_escaping_member_is_refused(links: Path, cache: Path) -> None:
    make_sdist(links, "evil", "1.0", {"evil/__init__.py": "", "../../evil.py": ""})
    with pytest.raises(SourceError, match="zip-slip"):
        fetch_release("evil==1.0", cache)
    assert not release_dir("evil==1.0", cache).exists()


class _Index(http.server.BaseHTTPRequestHandler):
    """A PEP 503 HTML index serving ``files`` (name -> bytes)."""

    files: dict[str, bytes] = {}
    sha_override: str | None = None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/files/") and self.path[7:] in self.files:
            self._send(self.files[self.path[7:]], "application/octet-stream")
        elif self.path.startswith("/simple/"):
            links = "".join(
                f'<a href="../../files/{n}#sha256='
                f'{self.sha_override or hashlib.sha256(d).hexdigest()}">{n}</a>\n'
                for n, d in self.files.items())
            self._send(f"<html><body>{links}</body></html>".encode(), "text/html")
        else:
            self.send_error(404)

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Index]]:
    """A local index that pip and the sdist fallback both use."""
    handler = type("Handler", (_Index,), {"files": {}, "sha_override": None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    for var in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL",
                "KVFLOWMAP_PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    yield handler
    server.shutdown()
    server.server_close()


def test_sdist_is_fetched_from_the_index_when_no_wheel(index: type[_Index],
                                                       tmp_path: Path, cache: Path) -> None:
    ran = tmp_path / "setup-ran"
    sdist = make_sdist(tmp_path, "idxpkg", "3.1", {
        "setup.py": EXEC_SENTINEL.format(path=str(ran)), "idxpkg/__init__.py": ""})
    other = make_sdist(tmp_path, "idxpkg", "3.0", {"idxpkg/old.py": ""})
    index.files = {sdist.name: sdist.read_bytes(), other.name: other.read_bytes()}
    root = fetch_release("idxpkg==3.1", cache)
    assert (root / "idxpkg/__init__.py").is_file()
    assert not (root / "idxpkg/old.py").exists()
    assert not ran.exists(), "the sdist's setup.py was executed"


def test_sdist_with_wrong_hash_is_rejected(index: type[_Index], tmp_path: Path,
                                           cache: Path) -> None:
    sdist = make_sdist(tmp_path, "idxpkg", "3.1", {"idxpkg/__init__.py": ""})
    index.files = {sdist.name: sdist.read_bytes()}
    index.sha_override = "0" * 64
    with pytest.raises(SourceError, match="sha256 mismatch"):
        fetch_release("idxpkg==3.1", cache)
    assert not release_dir("idxpkg==3.1", cache).exists()


# --- the real index -----------------------------------------------------------

@pytest.mark.integration
def test_real_wheel_six(cache: Path) -> None:
    root = fetch_release("six==1.16.0", cache)
    assert (root / "six.py").is_file()
    assert detect_version(root, "six") == "1.16.0"


@pytest.mark.integration
def test_real_sdist_only_docopt(cache: Path) -> None:
    root = fetch_release("docopt==0.6.2", cache)  # docopt never shipped a wheel
    assert (root / "docopt.py").is_file()
    assert detect_version(root, "docopt") == "0.6.2"


VLLM_WHEEL_DIR = Path("/tmp/rel")


@pytest.mark.integration
@pytest.mark.skipif(not list(VLLM_WHEEL_DIR.glob("vllm-0.33.0-*.whl")),
                    reason="no local vllm 0.33.0 wheel")
def test_real_vllm_wheel(links: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVFLOWMAP_PIP_FIND_LINKS", str(VLLM_WHEEL_DIR))
    root = fetch_release("vllm==0.33.0", cache)
    assert (root / "vllm/distributed/kv_transfer/kv_connector/v1/base.py").is_file()
    assert (root / "vllm/v1/core/sched/scheduler.py").is_file()
    assert not list(root.rglob("*.so"))
    assert detect_version(root, "vllm") == "0.33.0"
