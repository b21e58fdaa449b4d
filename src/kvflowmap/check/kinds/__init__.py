"""Rule kinds: each module (or package) exposes a frozen ``Options``
dataclass, ``check(ctx, opts) -> list[Finding]`` and a ``KindSpec`` (``SPEC``,
or ``MODES`` for a kind with modes); ``registry`` maps kind names to them."""
