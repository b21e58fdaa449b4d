"""Combine command-line source options with ``[tool.kvflowmap]`` into a Request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kvflowmap.request import Request
from kvflowmap.index.cache import default_cache_dir
from kvflowmap.sources.config import ProjectConfig, load_config
from kvflowmap.sources.errors import SourceError
from kvflowmap.sources.fetch import fetch_release, parse_spec
from kvflowmap.sources.installed import installed_root


@dataclass(frozen=True)
class SourceOptions:
    """The source-related options shared by every command."""

    sources: Sequence[str] = ()
    context: Sequence[str] = ()
    releases: Sequence[str] = ()
    installed: Sequence[str] = ()
    all_files: bool = False
    cache_dir: str | None = None
    no_cache: bool = False
    jobs: int | None = None


def make_request(opts: SourceOptions, *, cwd: Path | None = None,
                 say: Callable[[str], None] = lambda s: None) -> tuple[Request, ProjectConfig]:
    """A Request from options; config fills what the command line leaves out."""
    config = load_config(cwd or Path.cwd())
    sources = tuple(opts.sources) or config.sources
    if not sources:
        raise SourceError("no sources: pass SRC paths, or add `sources = [...]` under "
                          "[tool.kvflowmap] in pyproject.toml")
    cache_root = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
    releases = tuple(opts.releases) or (config.releases if not opts.context else ())
    release_roots = []
    for spec in releases:
        parse_spec(spec)
        say(f"release {spec}: using the cached copy or downloading it once")
        root = fetch_release(spec, cache_root)
        rs = parse_spec(spec)
        release_roots.append((root, f"{rs.name} {rs.version}"))
    for name in opts.installed:
        root, version = installed_root(name)
        release_roots.append((root, f"{name} {version}"))
    context = tuple(opts.context) or (config.context if not opts.releases else ())
    req = Request(
        sources=sources, context=context, release_roots=tuple(release_roots),
        exclude=config.exclude, all_files=opts.all_files,
        cache_dir=cache_root, use_cache=not opts.no_cache, jobs=opts.jobs,
    )
    return req, config
