"""Where the analysed code comes from.

A source is always reduced to an *import root*: a directory whose children are
top-level packages or modules. Roots come from a path on disk, from an
installed distribution located through its metadata (never imported), or from a
pinned release downloaded once from the package index and unpacked into a user
cache. ``config`` reads ``[tool.kvflowmap]`` from pyproject.toml and ``version``
tells which release of a package a root holds, again without importing it.
"""
